//! What only the PostgreSQL store ([`PgStore`]) has: several processes on one database, its
//! migrations, a database that is not there, persistence across a restart of the API and
//! `coreserve token create`, and its tables themselves (every row unchanged after refused
//! requests; the journal's transitions against the lease sweeper of another process).
//!
//! The store-level tests run on a fresh database of `#[sqlx::test]` (`DATABASE_URL`); the
//! API-level ones on the database of a [`TestApp`] or a [`TestDb`] (`CORESERVE_TEST_PG`).
//! `.ci/test` sets both; an unreachable server fails the tests: they are never skipped.

use coreserve::api::auth::Roles;
use coreserve::protocol::ParticipantRef;
use coreserve::store::{Claim, KeyClaim, PgStore, Store, TokenRecord};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection};
use uuid::Uuid;

use crate::support::{in_hours, workflow, TestApp, TestDb, ADMIN};
use coreserve::store::{HoldStore, KeyStore, ProjectStore, TokenStore};

/// The URL of a `#[sqlx::test]` database.
fn url(db: &PgConnectOptions) -> String {
    db.to_url_lossy().to_string()
}

#[sqlx::test(migrations = false)]
async fn a_key_is_claimed_once_across_processes(_: PgPoolOptions, db: PgConnectOptions) {
    let url = url(&db);
    // Separate pools stand for separate broker processes.
    let stores: Vec<PgStore> = futures::future::join_all((0..4).map(|_| PgStore::connect(&url)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let owners: Vec<Claim> = (0..32).map(|i| Claim::new(&format!("p{i}"), 60)).collect();
    let claims = futures::future::join_all(
        (0..32).map(|i| stores[i % stores.len()].claim_key(uuid::Uuid::nil(), "race", &owners[i])),
    )
    .await;
    let claimed = claims.iter().filter(|c| matches!(c, Ok(KeyClaim::Claimed))).count();
    let waiting = claims.iter().filter(|c| matches!(c, Ok(KeyClaim::InProgress))).count();
    assert_eq!((claimed, waiting), (1, 31), "{claims:?}");
    for s in stores {
        s.pool().close().await;
    }
}

#[sqlx::test(migrations = false)]
async fn migrations_run_again_on_an_existing_database(_: PgPoolOptions, db: PgConnectOptions) {
    let url = url(&db);
    let s = PgStore::connect(&url).await.unwrap();
    s.insert_token(TokenRecord::new("h", "u", false, false)).await.unwrap();
    s.pool().close().await;
    let s = PgStore::connect(&url).await.unwrap();
    assert!(s.token("h").await.unwrap().is_some());
    s.pool().close().await;
}

#[tokio::test]
async fn an_unreachable_database_is_an_error() {
    let e = PgStore::connect("postgres://postgres@127.0.0.1:1/nothing").await.err().expect("no server on port 1");
    assert!(e.to_string().contains("postgres"), "{e}");
}

/// A commit or extension the participant accepted before its lease ended wins over the lease
/// sweeper of another process that marked the row `expired` before the journal write landed;
/// an abort or release is final (a later commit of it is refused).
#[sqlx::test(migrations = false)]
async fn journal_transitions_follow_the_participant_not_the_sweeper(_: PgPoolOptions, db: PgConnectOptions) {
    use coreserve::protocol::{
        ComputeHoldRequest, HoldId, HoldRequest, HoldState, Journal, JournalEntry, JournalError, TxnId,
    };
    let s = PgStore::connect(&url(&db)).await.unwrap();
    let who = ParticipantRef::Site("s1".into());
    let request = HoldRequest::from(ComputeHoldRequest {
        replaces: None,
        reservation_name: None,
        txn: TxnId::new(),
        site: "s1".into(),
        cpus: 2,
        start: 100,
        end: 200,
        gpus: None,
        user: None,
    });
    let held = |hold| JournalEntry::Held {
        participant: who.clone(),
        hold,
        request: request.clone(),
        expires_at: 10,
        via_api: false,
        owner: None,
    };
    let (a, b, c) = (HoldId::new(), HoldId::new(), HoldId::new());
    for h in [a, b, c] {
        s.append(&held(h)).await.unwrap();
    }
    s.append(&JournalEntry::Aborted { hold: c }).await.unwrap();
    assert_eq!(s.expire_holds(20).await.unwrap(), 2, "a and b lapse (c was aborted)");
    s.append(&JournalEntry::Committed { hold: a }).await.unwrap();
    s.append(&JournalEntry::Extended { hold: b, expires_at: 50 }).await.unwrap();
    // An aborted hold's commit or extension contradicts the journal: refused.
    let refused = |r: Result<(), JournalError>| assert!(matches!(r, Err(JournalError::Illegal { .. })), "{r:?}");
    refused(s.append(&JournalEntry::Committed { hold: c }).await);
    refused(s.append(&JournalEntry::Extended { hold: c, expires_at: 50 }).await);
    let mut live: Vec<(HoldId, HoldState)> =
        s.live_holds(20).await.unwrap().into_iter().map(|h| (h.part.hold, h.state)).collect();
    live.sort_by_key(|(h, _)| *h);
    let mut want = vec![(a, HoldState::Committed), (b, HoldState::Held { expires_at: 50 })];
    want.sort_by_key(|(h, _)| *h);
    assert_eq!(live, want, "the aborted hold stays gone");
    s.append(&JournalEntry::Released { hold: a }).await.unwrap();
    refused(s.append(&JournalEntry::Committed { hold: a }).await);
    assert_eq!(s.live_holds(20).await.unwrap().len(), 1, "a release is final");
    s.pool().close().await;
}

// ---- API level -------------------------------------------------------------------------------

#[tokio::test]
async fn plans_tokens_and_idempotency_keys_survive_a_restart() {
    let first = TestApp::spawn().await;
    let alice = first.token("alice", false).await;
    // One body for the request and its retry (workflow() stamps its deadline from now).
    let body = workflow();
    let post = |app: &TestApp| {
        let r = app.client.post(format!("{}/v1/plans", app.base)).bearer_auth(&alice);
        r.header("Idempotency-Key", "k1").json(&body).send()
    };
    let r = post(&first).await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let plan: Value = r.json().await.unwrap();
    assert_eq!(plan["status"], "committed", "{plan}");
    let id = plan["id"].as_str().unwrap().to_owned();

    // A new application on the same database: a restarted broker.
    let second = first.restarted().await;
    let r = second.get(&format!("/v1/plans/{id}"), &alice).await;
    assert_eq!(r.status(), StatusCode::OK, "the plan and alice's token survived");
    assert_eq!(r.json::<Value>().await.unwrap(), plan);
    let r = post(&second).await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(r.headers()["location"].to_str().unwrap(), format!("/v1/plans/{id}"));
    assert_eq!(r.json::<Value>().await.unwrap(), plan, "the retried key answers with the same plan");
    assert_eq!(second.plans(&alice, "").await.len(), 1, "booked once");
}

#[tokio::test]
async fn a_token_from_token_create_is_accepted_by_a_server_on_the_same_database() {
    let db = TestDb::new().await;
    let user = Roles::default();
    let (token, _) = coreserve::cli::token_create(&db.url, "carol", user, None).await.unwrap();
    assert!(token.starts_with("cs_"), "{token}");
    let (admin, _) = coreserve::cli::token_create(&db.url, "ops", Roles { admin: true, ..user }, None).await.unwrap();
    let app = TestApp::on_database(&db.url, |_| {}).await;
    assert_eq!(app.get("/v1/plans", &token).await.status(), StatusCode::OK);
    let r = app.post("/v1/tokens", &token, &json!({"user": "x"})).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN, "carol is no admin");
    let r = app.post("/v1/tokens", &admin, &json!({"user": "x"})).await;
    assert_eq!(r.status(), StatusCode::CREATED, "root is");
    assert_eq!(app.get("/v1/plans", "cs_not_a_token").await.status(), StatusCode::UNAUTHORIZED);
    // Only the hash is stored.
    let mut conn = PgConnection::connect(&db.url).await.unwrap();
    let stored: Vec<(String,)> =
        sqlx::query_as(r#"SELECT hash FROM tokens WHERE "user" = 'carol'"#).fetch_all(&mut conn).await.unwrap();
    assert_eq!(stored, vec![(coreserve::api::auth::hash_token(&token),)]);
    assert_ne!(stored[0].0, token);
}

/// Issue 28: `token create` refuses reserved and untrimmed names (a plain token for `admin`
/// would read the admin's plans); `token revoke` is refused at once by a running server that
/// has the token cached, and a token past its expiry is refused.
#[tokio::test]
async fn token_create_refuses_reserved_names_and_token_revoke_takes_effect_at_once() {
    let db = TestDb::new().await;
    let user = Roles::default();
    for name in ["admin", " admin", "Admin", "admin ", "service", "@planners", "root"] {
        let e = coreserve::cli::token_create(&db.url, name, user, None).await.unwrap_err();
        assert!(e.to_string().contains("--user"), "{name:?}: {e}");
    }
    let (carol, id) = coreserve::cli::token_create(&db.url, "carol", user, None).await.unwrap();
    let app = TestApp::on_database(&db.url, |_| {}).await;
    let other = TestApp::on_database(&db.url, |_| {}).await;
    for a in [&app, &other] {
        assert_eq!(a.get("/v1/plans", &carol).await.status(), StatusCode::OK, "cached now");
    }
    let who: Value = app.get("/v1/whoami", &carol).await.json().await.unwrap();
    assert_eq!(who["token_id"], id.to_string());
    // Revoked through the database (the CLI's path), by another process than the servers.
    let store = coreserve::store::PgStore::connect(&db.url).await.unwrap();
    assert!(coreserve::store::TokenStore::revoke_token(&store, id).await.unwrap().is_some());
    let started = std::time::Instant::now();
    for a in [&app, &other] {
        loop {
            let status = a.get("/v1/plans", &carol).await.status();
            if status == StatusCode::UNAUTHORIZED {
                break;
            }
            assert!(started.elapsed() < std::time::Duration::from_secs(2), "revoked token still accepted: {status}");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    // Through the API: 204, then 401 on every process at once; 404 the second time.
    let (dave, _) = coreserve::cli::token_create(&db.url, "dave", user, None).await.unwrap();
    let dave_id: Value = other.get("/v1/whoami", &dave).await.json().await.unwrap();
    assert_eq!(app.get("/v1/plans", &dave).await.status(), StatusCode::OK);
    let path = format!("/v1/tokens/{}", dave_id["token_id"].as_str().unwrap());
    assert_eq!(app.delete(&path, &dave).await.status(), StatusCode::FORBIDDEN, "admins only");
    assert_eq!(app.delete(&path, crate::support::ADMIN).await.status(), StatusCode::NO_CONTENT);
    assert_eq!(app.get("/v1/plans", &dave).await.status(), StatusCode::UNAUTHORIZED);
    let started = std::time::Instant::now();
    while other.get("/v1/plans", &dave).await.status() != StatusCode::UNAUTHORIZED {
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "the other process still accepts it");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(app.delete(&path, crate::support::ADMIN).await.status(), StatusCode::NOT_FOUND);
    // Expiry.
    let soon = chrono::Utc::now() + chrono::Duration::milliseconds(1500);
    let (eve, _) = coreserve::cli::token_create(&db.url, "eve", user, Some(soon)).await.unwrap();
    assert_eq!(app.get("/v1/plans", &eve).await.status(), StatusCode::OK);
    tokio::time::sleep(std::time::Duration::from_millis(1600)).await;
    let r = app.get("/v1/plans", &eve).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "expired");
    store.pool().close().await;
}

/// Every row of every table of the service, as JSON text, in a stable order.
async fn snapshot(url: &str) -> Vec<String> {
    let mut conn = PgConnection::connect(url).await.unwrap();
    let mut rows = Vec::new();
    for table in ["topology", "sites", "reservations", "transactions", "plans", "idempotency_keys", "tokens"] {
        let q = format!("SELECT to_jsonb(t)::text AS row FROM {table} t ORDER BY 1");
        for r in sqlx::query(&q).fetch_all(&mut conn).await.unwrap() {
            rows.push(format!("{table}: {}", sqlx::Row::get::<String, _>(&r, "row")));
        }
    }
    rows
}

#[tokio::test]
async fn bad_input_leaves_the_database_unchanged() {
    let app = TestApp::spawn().await;
    let url = app.db_url();
    let (c, base) = (&app.client, &app.base);
    let app = &app;
    let send = |method: Method, path: &str, token: &str, body: Option<Value>| {
        let (path, token) = (path.to_owned(), token.to_owned());
        async move { app.call(method, &path, Some(&token), body.as_ref()).await }
    };
    use Method as M;
    // State to refuse changes to: a user, a committed plan with a key, a committed hold and
    // an aborted one.
    let r = send(M::POST, "/v1/tokens", ADMIN, Some(json!({"user": "bob"}))).await;
    let bob = r.json::<Value>().await.unwrap()["token"].as_str().unwrap().to_owned();
    let r = c.post(format!("{base}/v1/plans")).bearer_auth(&bob).header("Idempotency-Key", "k").json(&workflow());
    let plan: Value = r.send().await.unwrap().json().await.unwrap();
    assert_eq!(plan["status"], "committed");
    let hold = json!({"cpus": 1, "start": in_hours(30), "end": in_hours(31)});
    let mut holds = Vec::new();
    for _ in 0..2 {
        let r = send(M::POST, "/v1/sites/s1/holds", ADMIN, Some(hold.clone())).await;
        assert_eq!(r.status(), StatusCode::CREATED);
        holds.push(r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned());
    }
    let (committed, aborted) = (&holds[0], &holds[1]);
    assert_eq!(send(M::POST, &format!("/v1/holds/{committed}/commit"), ADMIN, None).await.status(), 200);
    assert_eq!(send(M::POST, &format!("/v1/holds/{aborted}/abort"), ADMIN, None).await.status(), 200);
    let before = snapshot(url).await;
    assert!(before.iter().any(|r| r.starts_with("reservations: ")), "the journal has rows");

    let mut bad_plans = Vec::new();
    let mut unknown_field = workflow();
    unknown_field["priority"] = json!(1);
    bad_plans.push(unknown_field);
    let mut zero_cpus = workflow();
    zero_cpus["jobs"][0]["cpus"] = json!(0);
    bad_plans.push(zero_cpus);
    let mut past_horizon = workflow();
    past_horizon["deadline"] = json!(in_hours(24 * 400));
    bad_plans.push(past_horizon);
    for body in bad_plans {
        assert_eq!(send(M::POST, "/v1/plans", &bob, Some(body)).await.status(), 422);
    }
    let malformed = c.post(format!("{base}/v1/plans")).bearer_auth(&bob).header("content-type", "application/json");
    assert_eq!(malformed.body("{\"jobs\": [").send().await.unwrap().status(), 400);
    let mut other = workflow();
    other["id"] = json!("another");
    let reuse = c.post(format!("{base}/v1/plans")).bearer_auth(&bob).header("Idempotency-Key", "k").json(&other);
    assert_eq!(reuse.send().await.unwrap().status(), 422, "a key reused for another body");
    let id = plan["id"].as_str().unwrap();
    let nobody = Uuid::new_v4();
    let refusals = [
        (send(M::DELETE, &format!("/v1/plans/{id}"), "not-a-token", None).await, 401),
        (send(M::DELETE, &format!("/v1/plans/{nobody}"), &bob, None).await, 404),
        (send(M::POST, &format!("/v1/holds/{committed}/abort"), ADMIN, None).await, 409),
        (send(M::POST, &format!("/v1/holds/{aborted}/commit"), ADMIN, None).await, 409),
        (send(M::POST, &format!("/v1/holds/{nobody}/commit"), ADMIN, None).await, 404),
        (send(M::POST, &format!("/v1/holds/{committed}/commit"), &bob, None).await, 403),
        (send(M::POST, &format!("/v1/holds/{aborted}/extend"), ADMIN, Some(json!({"lease_s": 60}))).await, 409),
        (
            send(
                M::POST,
                "/v1/sites/s1/holds",
                ADMIN,
                Some(json!({"cpus": 17, "start": in_hours(40), "end": in_hours(41)})),
            )
            .await,
            409,
        ),
        (send(M::POST, "/v1/sites/s1/holds", &bob, Some(hold.clone())).await, 403),
        (
            send(
                M::PUT,
                "/v1/sites/s1",
                ADMIN,
                Some(json!({"node": "n1", "cpus": 64, "os": "linux", "price_per_cpu_hour": 1.0})),
            )
            .await,
            422,
        ),
        (
            send(
                M::PUT,
                "/v1/sites/s1",
                &bob,
                Some(json!({"node": "n1", "cpus": 16, "os": "linux", "price_per_cpu_hour": 9.0})),
            )
            .await,
            403,
        ),
    ];
    for (i, (r, status)) in refusals.into_iter().enumerate() {
        assert_eq!(r.status(), status, "refusal {i}");
        assert_eq!(r.headers()["content-type"], "application/problem+json", "refusal {i}");
    }
    // Idempotent repeats change nothing either.
    assert_eq!(send(M::POST, &format!("/v1/holds/{committed}/commit"), ADMIN, None).await.status(), 200);
    assert_eq!(send(M::POST, &format!("/v1/holds/{aborted}/abort"), ADMIN, None).await.status(), 200);
    assert_eq!(snapshot(url).await, before, "no refused request changed a row");
}

/// Issue 28: upgrading a database whose tokens were issued before principal names were checked
/// (migration 0007) revokes the tokens that could act as a bootstrap principal without its role
/// (a plain `admin`, once also made by trimming `" admin"`) or under a name no longer allowed,
/// and keeps the others; the committed plans of before get their allocation charges (0008).
#[sqlx::test(migrations = false)]
async fn the_upgrade_revokes_impostor_tokens_and_charges_earlier_plans(_: PgPoolOptions, db: PgConnectOptions) {
    let url = url(&db);
    // The schema as it was before issue 28: migrations 0001-0006 only.
    let dir = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations")).unwrap() {
        let f = f.unwrap();
        let name = f.file_name().into_string().unwrap();
        if name.as_str() < "0007" {
            std::fs::copy(f.path(), dir.path().join(&name)).unwrap();
        }
    }
    let mut conn = PgConnection::connect(&url).await.unwrap();
    sqlx::migrate::Migrator::new(dir.path()).await.unwrap().run(&mut conn).await.unwrap();
    for (hash, user, admin, service) in [
        ("h-admin", "admin", true, true),
        ("h-impostor", "admin", false, false),
        ("h-svc", "service", false, true),
        ("h-svc-impostor", "service", false, false),
        ("h-at", "@planners", false, true),
        ("h-space", " bob", false, false),
        ("h-root", "root", true, false),
        ("h-alice", "alice", false, false),
    ] {
        sqlx::query(r#"INSERT INTO tokens (hash, "user", admin, service) VALUES ($1, $2, $3, $4)"#)
            .bind(hash)
            .bind(user)
            .bind(admin)
            .bind(service)
            .execute(&mut conn)
            .await
            .unwrap();
    }
    // A committed plan of alice's: two jobs.
    let outcome = json!({"request_id": "r", "status": "committed", "jobs": [
        {"name": "A", "site": "s1", "start": "2030-01-01T00:00:00Z", "end": "2030-01-01T02:00:00Z", "cpus": 4},
        {"name": "B", "site": "s2", "start": "2030-01-01T01:00:00Z", "end": "2030-01-01T03:00:00Z", "cpus": 2}
    ]});
    let plan = Uuid::new_v4();
    sqlx::query(
        r#"INSERT INTO plans (id, "user", request_id, status, created_at, outcome, bookings)
           VALUES ($1, 'alice', 'r', 'committed', now(), $2, '[]')"#,
    )
    .bind(plan)
    .bind(&outcome)
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();

    let s = PgStore::connect(&url).await.unwrap();
    for (hash, kept) in [
        ("h-admin", true),
        ("h-impostor", false),
        ("h-svc", true),
        ("h-svc-impostor", false),
        ("h-at", false),
        ("h-space", false),
        ("h-root", true),
        ("h-alice", true),
    ] {
        assert_eq!(s.token(hash).await.unwrap().is_some(), kept, "{hash}");
    }
    let t0 = chrono::DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z").unwrap().timestamp();
    let mut charged = s.charged("alice", t0, t0 + 86_400).await.unwrap();
    charged.sort_by_key(|u| u.start);
    let got: Vec<(i64, i64, u32)> = charged.iter().map(|u| (u.start - t0, u.end - t0, u.cpus)).collect();
    assert_eq!(got, vec![(0, 7200, 4), (3600, 10800, 2)]);
    s.pool().close().await;
}

/// Issue 29: TLS to PostgreSQL. A server with a certificate from a test CA (for 127.0.0.1):
/// the store connects with `sslmode=verify-full` and that CA, and its connection is encrypted
/// (`pg_stat_ssl`); with another CA, verify-full refuses the server. Before, sqlx was built
/// without TLS and every `sslmode` but `disable` / `prefer` failed.
#[tokio::test]
async fn the_store_connects_to_postgres_over_verified_tls() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca = |name: &str| {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(rcgen::DnType::CommonName, name);
        let pem = p.self_signed(&key).unwrap().pem();
        (pem, Issuer::new(p, key))
    };
    let (ca_pem, issuer) = ca("test CA");
    let (other_pem, _) = ca("another CA");
    let key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap().signed_by(&key, &issuer).unwrap();

    let mut cluster = crate::support::cluster::PgCluster::new();
    let cert = cluster.write_private("server.crt", server.pem().as_bytes());
    let key = cluster.write_private("server.key", key.serialize_pem().as_bytes());
    cluster.restart_with(&format!(
        "-c ssl=on -c ssl_cert_file='{}' -c ssl_key_file='{}'",
        cert.display(),
        key.display()
    ));
    let dir = tempfile::tempdir().unwrap();
    let (ca_file, other_file) = (dir.path().join("ca.pem"), dir.path().join("other.pem"));
    std::fs::write(&ca_file, ca_pem).unwrap();
    std::fs::write(&other_file, other_pem).unwrap();
    let url = |root: &std::path::Path| {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?sslmode=verify-full&sslrootcert={}",
            cluster.port(),
            root.display()
        )
    };

    let store = PgStore::connect(&url(&ca_file)).await.expect("verify-full with the server's CA connects");
    store.ping().await.unwrap();
    let mut conn = PgConnection::connect(&url(&ca_file)).await.unwrap();
    let (ssl, version): (bool, Option<String>) =
        sqlx::query_as("SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert!(ssl, "the connection is encrypted");
    assert!(version.is_some_and(|v| v.starts_with("TLS")));
    let refused = PgStore::connect(&url(&other_file)).await;
    assert!(refused.is_err(), "verify-full refuses a server whose CA is not the one given");
}
