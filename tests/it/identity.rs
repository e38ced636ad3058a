//! Issue 8, part 3: holds are bound to the principal that prepared them, hold ids are shown
//! only to their owner, the caller's role is checked before its body, and planners reach
//! their participants over TLS.
//!
//! The API tests run the all-in-one service on a fresh PostgreSQL database ([`TestApp::spawn`]);
//! the TLS test runs a separated deployment in process (LIS processes serving HTTPS with a
//! certificate of a CA made here, and planners that trust it or not).

use coreserve::api::config::TlsFiles;
use coreserve::api::{RemoteServices, Role, ServeConfig};
use coreserve::protocol::HoldId;
use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::support::{grid, in_hours, workflow, TestApp, ADMIN};

/// The shared bootstrap token of the deployment under test.
const BOOTSTRAP: &str = "test-bootstrap-service-token";

/// The all-in-one service on a fresh database, with [`BOOTSTRAP`] as its service token.
async fn spawn() -> TestApp {
    TestApp::spawn_with(|c| c.service_token = Some(BOOTSTRAP.into())).await
}

/// Booked CPUs of `site` over the next two days, at the busiest instant.
fn peak(app: &TestApp, site: &str) -> u64 {
    let lis = &app.state.participants.lis[site];
    let now = chrono::Utc::now().timestamp();
    (0..48 * 60).map(|m| lis.usage_at(now + m * 60)).max().unwrap()
}

fn compute_hold(site: &str, cpus: u32) -> Value {
    json!({"kind": "compute", "txn": Uuid::new_v4(), "site": site, "cpus": cpus,
           "start": chrono::Utc::now().timestamp() + 7200, "end": chrono::Utc::now().timestamp() + 10800})
}

/// The issue's scenario: a user's committed plan; another service principal (and the shared
/// bootstrap token) tries to release one of its holds through the participant endpoint: 403,
/// the plan stays booked, its CPUs are not sold again; an admin may (audited).
#[tokio::test]
async fn another_principal_cannot_release_a_booked_plans_hold() {
    let app = spawn().await;
    let alice = app.token("alice", false).await;
    let mallory = app.token("mallory", true).await;
    let r = app.post("/v1/plans", &alice, &workflow()).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let plan: Value = r.json().await.unwrap();
    assert_eq!(plan["status"], "committed", "{plan}");
    let s1 = app.reservations_as("s1", ADMIN).await;
    assert_eq!(s1.len(), 1, "{s1:?}");
    let hold = s1[0]["hold"].as_str().expect("an admin sees every hold id").to_owned();
    let booked = peak(&app, "s1");
    assert_eq!(booked, 12);

    for token in [&mallory, BOOTSTRAP] {
        for verb in ["release", "abort", "commit"] {
            let r = app.post_empty(&format!("/v1/participant/sites/s1/holds/{hold}/{verb}"), token).await;
            assert_eq!(r.status(), StatusCode::FORBIDDEN, "{verb}");
        }
        let r =
            app.post(&format!("/v1/participant/sites/s1/holds/{hold}/extend"), token, &json!({"lease_s": 60})).await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
    }
    assert_eq!(peak(&app, "s1"), booked, "the plan's CPUs are still booked");
    // The CPUs are not sold again: 16 more CPUs over the job's interval do not fit.
    let job = plan["jobs"].as_array().unwrap().iter().find(|j| j["site"] == "s1").unwrap().clone();
    let at = |k: &str| chrono::DateTime::parse_from_rfc3339(job[k].as_str().unwrap()).unwrap().timestamp();
    let more = json!({"kind": "compute", "txn": Uuid::new_v4(), "site": "s1", "cpus": 16, "start": at("start"), "end": at("end")});
    let r = app.post("/v1/participant/sites/s1/prepare", &mallory, &more).await;
    assert_eq!(r.status(), StatusCode::CONFLICT, "{}", r.text().await.unwrap());
    let id = plan["id"].as_str().unwrap();
    let got: Value = app.get(&format!("/v1/plans/{id}"), &alice).await.json().await.unwrap();
    assert_eq!(got["status"], "committed");

    // An admin may, and it is audited.
    let r = app.post_empty(&format!("/v1/participant/sites/s1/holds/{hold}/release"), ADMIN).await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(peak(&app, "s1"), 0);
}

/// A planner that drives another principal's hold gets a typed refusal, `NotOwner`, not a
/// transport error (as a second planner with its own credential would when asked to cancel, or
/// to recover, a plan the first one booked): phase 2 then leaves the transaction in doubt for
/// its owner, and a cancel answers 409 saying why. Nothing changes at the participant.
#[tokio::test]
async fn another_principals_hold_is_a_typed_refusal_over_http() {
    use coreserve::protocol::http::HttpParticipant;
    use coreserve::protocol::{ComputeHoldRequest, HoldLifecycle, Participant, ParticipantError, TxnId};
    coreserve::protocol::http::install_crypto_provider();
    let app = spawn().await;
    let (planner_1, planner_2) = (app.token("planner-1", true).await, app.token("planner-2", true).await);
    let as_principal = |token: &str| HttpParticipant::site(&app.base, "s1", Some(token.to_owned()));
    let start = chrono::Utc::now().timestamp() + 3600;
    let req = ComputeHoldRequest {
        replaces: None,
        reservation_name: None,
        txn: TxnId::new(),
        site: "s1".into(),
        cpus: 4,
        start,
        end: start + 600,
        gpus: None,
        user: None,
    };
    let hold = as_principal(&planner_1).prepare(&req).await.unwrap();
    let other = as_principal(&planner_2);
    assert_eq!(other.commit(hold.id).await, Err(ParticipantError::NotOwner(hold.id)));
    assert_eq!(other.abort(hold.id).await, Err(ParticipantError::NotOwner(hold.id)));
    let batch = other.abort_all(&[hold.id]).await;
    assert!(
        matches!(&batch[..], [Err(ParticipantError::Transport(m))] if m.contains("403 hold-not-owned")),
        "{batch:?}"
    );
    assert_eq!(peak(&app, "s1"), 4, "the hold is untouched");
    as_principal(&planner_1).commit(hold.id).await.unwrap();
    assert_eq!(other.release(hold.id).await, Err(ParticipantError::NotOwner(hold.id)));
    assert_eq!(peak(&app, "s1"), 4, "the reservation is untouched");

    // What a cancel through the wrong planner answers.
    let problem = coreserve::api::problem::ApiError::from(ParticipantError::NotOwner(hold.id));
    assert_eq!((problem.status.as_u16(), problem.slug), (409, "hold-not-owned"));
    assert!(problem.to_string().contains("cancel it through that planner"), "{problem}");
}

/// Holds made through the participant endpoints and the REST hold endpoints belong to the
/// principal that prepared them: it may commit, extend and release them, nobody else (but an
/// admin) may; the ownership survives a restart (journaled).
#[tokio::test]
async fn only_the_owner_drives_its_holds() {
    let app = spawn().await;
    let a = app.token("planner-a", true).await;
    let b = app.token("planner-b", true).await;

    let r = app.post("/v1/participant/sites/s1/prepare", &a, &compute_hold("s1", 4)).await;
    assert_eq!(r.status(), StatusCode::OK);
    let hold = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let path = |verb: &str| format!("/v1/participant/sites/s1/holds/{hold}/{verb}");
    assert_eq!(app.post_empty(&path("commit"), &b).await.status(), StatusCode::FORBIDDEN);
    assert_eq!(app.post_empty(&path("abort"), &b).await.status(), StatusCode::FORBIDDEN);
    assert_eq!(app.post(&path("extend"), &a, &json!({"lease_s": 600})).await.status(), StatusCode::OK);
    assert_eq!(app.post_empty(&path("commit"), &a).await.status(), StatusCode::NO_CONTENT);
    assert_eq!(app.post_empty(&path("release"), &b).await.status(), StatusCode::FORBIDDEN);
    assert_eq!(peak(&app, "s1"), 4);
    assert_eq!(app.post_empty(&path("release"), &a).await.status(), StatusCode::NO_CONTENT);
    assert_eq!(peak(&app, "s1"), 0, "the owner may release");

    // The REST hold endpoints.
    let body = json!({"cpus": 2, "start": in_hours(2), "end": in_hours(3)});
    let r = app.post("/v1/sites/s2/holds", &a, &body).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let rest = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let r = app.post(&format!("/v1/holds/{rest}/extend"), &b, &json!({"lease_s": 60})).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(app.post_empty(&format!("/v1/holds/{rest}/commit"), &b).await.status(), StatusCode::FORBIDDEN);
    assert_eq!(app.post_empty(&format!("/v1/holds/{rest}/commit"), &a).await.status(), StatusCode::OK);

    // A network hold: the owner is recorded by the NIS too.
    let r = app
        .post(
            "/v1/network/holds",
            &a,
            &json!({"links": ["l1"], "bandwidth_mbps": 100, "start": in_hours(2), "end": in_hours(3)}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let net = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let r = app.post_empty(&format!("/v1/participant/network/holds/{net}/abort"), &b).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(app.post_empty(&format!("/v1/holds/{net}/abort"), ADMIN).await.status(), StatusCode::OK);

    // Restart on the same database: the journal brings the owner back.
    let owner: HoldId = rest.parse().unwrap();
    let again = app.restarted().await;
    assert_eq!(again.state.participants.lis["s2"].owner(owner), Some(Some("planner-a".into())));
    let c = Client::new();
    let r = c.post(format!("{}/v1/holds/{rest}/abort", again.base)).bearer_auth(&b).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN, "ownership survives a restart");
}

/// `GET /v1/sites/{id}/reservations` lists every booking, with the hold id only for the
/// caller's own holds (admin: all).
#[tokio::test]
async fn reservations_show_only_own_hold_ids() {
    let app = spawn().await;
    let alice = app.token("alice", false).await;
    let a = app.token("planner-a", true).await;
    let b = app.token("planner-b", true).await;
    let r = app.post("/v1/plans", &alice, &workflow()).await;
    assert_eq!(r.json::<Value>().await.unwrap()["status"], "committed");
    let r = app.post("/v1/participant/sites/s1/prepare", &a, &compute_hold("s1", 2)).await;
    let own = r.json::<Value>().await.unwrap()["id"].clone();

    let ids = |list: &[Value]| list.iter().filter_map(|r| r["hold"].as_str().map(str::to_owned)).collect::<Vec<_>>();
    for (token, want) in [(&alice, 0), (&b, 0), (&a, 1)] {
        let list = app.reservations_as("s1", token).await;
        assert_eq!(list.len(), 2, "every booking is listed: {list:?}");
        assert_eq!(ids(&list).len(), want, "{list:?}");
        assert!(list.iter().all(|r| r["cpus"].is_u64() && r["start"].is_string()), "{list:?}");
    }
    assert_eq!(ids(&app.reservations_as("s1", &a).await), vec![own.as_str().unwrap().to_owned()]);
    assert_eq!(ids(&app.reservations_as("s1", ADMIN).await).len(), 2);
}

/// A user token with a malformed or ill-shaped body gets 403 before any schema hint, on every
/// endpoint that checks a role.
#[tokio::test]
async fn authorization_comes_before_body_validation() {
    let app = spawn().await;
    let alice = app.token("alice", false).await;
    let hold = Uuid::new_v4();
    let paths = [
        "/v1/participant/sites/s1/query".to_owned(),
        "/v1/participant/sites/s1/prepare".to_owned(),
        format!("/v1/participant/sites/s1/holds/{hold}/extend"),
        "/v1/participant/network/query".to_owned(),
        "/v1/participant/network/prepare".to_owned(),
        format!("/v1/participant/network/holds/{hold}/extend"),
        "/v1/participant/gis/candidates".to_owned(),
        "/v1/sites/s1/holds".to_owned(),
        "/v1/network/holds".to_owned(),
        format!("/v1/holds/{hold}/extend"),
        "/v1/tokens".to_owned(),
    ];
    for path in &paths {
        for raw in ["{not json", r#"{"unknown_field": 1}"#] {
            let r = app.post_raw(path, &alice, raw).await;
            assert_eq!(r.status(), StatusCode::FORBIDDEN, "{path} {raw}");
            let body = r.text().await.unwrap();
            assert!(!body.contains("unknown_field") && !body.contains("JSON"), "{path}: {body}");
        }
    }
    let r = app
        .client
        .put(format!("{}/v1/sites/s1", app.base))
        .bearer_auth(&alice)
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // An authorised caller still gets the schema hints.
    let r = app.post_raw("/v1/participant/sites/s1/prepare", BOOTSTRAP, "{not json").await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = app.post_raw("/v1/participant/sites/s1/prepare", BOOTSTRAP, r#"{"unknown_field": 1}"#).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

/// A CA and a certificate for `localhost` / 127.0.0.1 signed by it, written to `dir`:
/// (ca.pem, cert.pem, key.pem).
fn certificates(dir: &std::path::Path) -> (std::path::PathBuf, TlsFiles) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    let (ca_path, cert_path, key_path) = (dir.join("ca.pem"), dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&ca_path, ca_cert.pem()).unwrap();
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (ca_path, TlsFiles { cert: cert_path, key: key_path })
}

/// Starts `role` over the test grid on a memory store; returns its port.
async fn serve(role: Role, tweak: impl FnOnce(&mut ServeConfig)) -> u16 {
    let app = TestApp::memory(grid(), |c| {
        c.planners = 1;
        c.service_token = Some(BOOTSTRAP.into());
        c.role = role;
        tweak(c);
    })
    .await;
    app.port
}

/// LIS processes serve HTTPS with a certificate of a CA; a planner that trusts the CA books a
/// plan through them, a planner that does not cannot reach them.
#[tokio::test]
async fn planners_reach_tls_participants_only_when_they_trust_the_ca() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, files) = certificates(dir.path());
    let mut lis = Vec::new();
    for site in ["s1", "s2", "s3"] {
        let tls = files.clone();
        let port = serve(Role::Lis { site: site.into() }, |c| c.tls = Some(tls)).await;
        lis.push((site.to_owned(), format!("https://localhost:{port}")));
    }
    let nis = serve(Role::Nis, |c| c.tls = Some(files.clone())).await;
    let gis = serve(Role::Gis, |c| c.tls = Some(files.clone())).await;
    let remote =
        RemoteServices { gis: format!("https://localhost:{gis}"), nis: format!("https://localhost:{nis}"), lis };
    let trusting = serve(Role::Planner(remote.clone()), |c| c.tls_ca = Some(ca.clone())).await;
    let blind = serve(Role::Planner(remote.clone()), |_| {}).await;

    let client = Client::new();
    let job = json!({
        "deadline": in_hours(24),
        "jobs": [{"name": "A", "os": "linux", "cpus": 4, "offset_s": 0, "duration_s": 3600}],
        "transfers": []
    });
    let plan = |port: u16| {
        let (client, job) = (client.clone(), job.clone());
        async move {
            let r = client
                .post(format!("http://127.0.0.1:{port}/v1/plans"))
                .bearer_auth(ADMIN)
                .json(&job)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::CREATED);
            r.json::<Value>().await.unwrap()
        }
    };
    let ok = plan(trusting).await;
    assert_eq!(ok["status"], "committed", "{ok}");
    let refused = plan(blind).await;
    assert_eq!(refused["status"], "rejected", "a planner that does not trust the CA reached a participant: {refused}");

    // Plain HTTP to a TLS listener fails too, and the participant client names the failure.
    let site = coreserve::protocol::http::HttpParticipant::site(&remote.lis[0].1, "s1", Some(BOOTSTRAP.into()));
    let q = coreserve::protocol::ComputeQuery {
        site: "s1".into(),
        cpus: 1,
        duration_s: 60,
        window_start: chrono::Utc::now().timestamp() + 3600,
        deadline: chrono::Utc::now().timestamp() + 7200,
        gpus: None,
    };
    use coreserve::protocol::Participant;
    let e = site.query(&q).await.unwrap_err();
    assert!(matches!(e, coreserve::protocol::ParticipantError::Transport(_)), "{e}");
    let trusted = coreserve::protocol::http::client(&coreserve::protocol::http::ClientTls {
        ca_pem: Some(std::fs::read(&ca).unwrap()),
        identity_pem: None,
    })
    .unwrap();
    site.with_client(trusted).query(&q).await.unwrap();
}

/// Issue 28: a process serving TLS says `https://` in its start line (it said `http://`).
#[tokio::test]
async fn the_start_line_of_a_tls_listener_says_https() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let (_, files) = certificates(dir.path());
    let grid_path = dir.path().join("grid.json");
    std::fs::write(&grid_path, serde_json::to_string(&grid()).unwrap()).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_coreserve"))
        .args(["serve", "--listen", "127.0.0.1:0", "--workers", "1", "--grid"])
        .arg(&grid_path)
        .arg("--tls-cert")
        .arg(&files.cert)
        .arg("--tls-key")
        .arg(&files.key)
        .env_remove("DATABASE_URL")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        std::io::BufReader::new(stderr).lines().map_while(Result::ok).find(|l| l.contains(" serving "))
    })
    .await
    .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let line = line.expect("a start line");
    assert!(line.contains("on https://127.0.0.1:"), "{line}");
}

/// Issue 28, point 1: a hold prepared with a planner credential belongs to the deployment's
/// planner principal: another planner credential may drive it (and sees its id), a service
/// principal without the planner role (another broker) may not, and a planner may not drive
/// that principal's own holds either.
#[tokio::test]
async fn planner_credentials_share_their_holds_and_nobody_else_does() {
    let app = spawn().await;
    let planner = |user: &'static str| {
        let app = &app;
        async move {
            let r = app.post("/v1/tokens", ADMIN, &json!({"user": user, "planner": true})).await;
            assert_eq!(r.status(), StatusCode::CREATED);
            let v: Value = r.json().await.unwrap();
            assert_eq!((v["planner"].as_bool(), v["service"].as_bool()), (Some(true), Some(true)), "{v}");
            v["token"].as_str().unwrap().to_owned()
        }
    };
    let (a, b) = (planner("planner-a").await, planner("planner-b").await);
    let broker = app.token("broker", true).await;

    let r = app.post("/v1/participant/sites/s1/prepare", &a, &compute_hold("s1", 4)).await;
    assert_eq!(r.status(), StatusCode::OK);
    let hold = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let path = |verb: &str| format!("/v1/participant/sites/s1/holds/{hold}/{verb}");
    assert_eq!(app.post_empty(&path("commit"), &broker).await.status(), StatusCode::FORBIDDEN, "not a planner");
    assert_eq!(app.post_empty(&path("commit"), &b).await.status(), StatusCode::NO_CONTENT, "another planner");
    let ids = |list: Vec<Value>| list.iter().filter_map(|r| r["hold"].as_str().map(str::to_owned)).collect::<Vec<_>>();
    assert_eq!(ids(app.reservations_as("s1", &b).await), vec![hold.clone()], "a planner sees the planners' hold ids");
    assert!(ids(app.reservations_as("s1", &broker).await).is_empty());
    assert_eq!(app.post_empty(&path("release"), &broker).await.status(), StatusCode::FORBIDDEN);
    assert_eq!(app.post_empty(&path("release"), &a).await.status(), StatusCode::NO_CONTENT);
    assert_eq!(peak(&app, "s1"), 0);

    // The broker's own hold: only the broker (or an admin) drives it, not the planners.
    let r = app.post("/v1/participant/sites/s1/prepare", &broker, &compute_hold("s1", 2)).await;
    let own = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let r = app.post_empty(&format!("/v1/participant/sites/s1/holds/{own}/abort"), &a).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = app.post_empty(&format!("/v1/participant/sites/s1/holds/{own}/abort"), &broker).await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    // Recorded as the planners' in the journal: it survives a restart so.
    let restarted = app.restarted().await;
    let r = restarted.post("/v1/participant/sites/s1/prepare", &a, &compute_hold("s1", 1)).await;
    let h: HoldId = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().parse().unwrap();
    let again = restarted.restarted().await;
    assert_eq!(again.state.participants.lis["s1"].owner(h), Some(Some("@planners".into())));
}

/// A CA, a server certificate for `localhost` / 127.0.0.1, and client certificates with the
/// given common names, written to `dir`: (CA PEM, server files, each client's cert + key PEM).
fn ca_with_clients(dir: &std::path::Path, names: &[&str]) -> (std::path::PathBuf, TlsFiles, Vec<Vec<u8>>) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_path = dir.join("ca.pem");
    std::fs::write(&ca_path, ca.self_signed(&ca_key).unwrap().pem()).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    let server = server.signed_by(&key, &issuer).unwrap();
    let files = TlsFiles { cert: dir.join("server.pem"), key: dir.join("server-key.pem") };
    std::fs::write(&files.cert, server.pem()).unwrap();
    std::fs::write(&files.key, key.serialize_pem()).unwrap();
    let clients = names
        .iter()
        .map(|cn| {
            let key = KeyPair::generate().unwrap();
            let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
            p.distinguished_name.push(DnType::CommonName, *cn);
            let cert = p.signed_by(&key, &issuer).unwrap();
            format!("{}{}", cert.pem(), key.serialize_pem()).into_bytes()
        })
        .collect();
    (ca_path, files, clients)
}

/// Issue 28, point 4: principals are ids, not names. A participant that trusts client
/// certificates (`--trust-client-certificates`) takes a caller by its certificate's name; a
/// certificate named `admin` (or `alice`, or `broker`) is not the admin (alice, the broker): it
/// reads, lists and cancels none of their plans, replays none of their
/// idempotency keys and drives none of their holds. With plans owned by name, the certificate
/// named `admin` read and cancelled the admin's plans.
#[tokio::test]
async fn a_certificate_named_like_a_token_principal_is_another_principal() {
    coreserve::protocol::http::install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let (ca, files, clients) = ca_with_clients(dir.path(), &["some-client", "admin", "alice", "broker"]);
    let app = TestApp::spawn_with(|c| {
        c.service_token = Some(BOOTSTRAP.into());
        c.tls = Some(files);
        c.tls_client_ca = Some(ca.clone());
        c.trust_client_certificates = true;
    })
    .await;
    let base = format!("https://localhost:{}", app.port);
    let ca_pem = std::fs::read(&ca).unwrap();
    let with_cert = |identity: &Vec<u8>| {
        coreserve::protocol::http::client(&coreserve::protocol::http::ClientTls {
            ca_pem: Some(ca_pem.clone()),
            identity_pem: Some(identity.clone()),
        })
        .unwrap()
    };
    let (tokens, as_admin, as_alice, as_broker) =
        (with_cert(&clients[0]), with_cert(&clients[1]), with_cert(&clients[2]), with_cert(&clients[3]));

    // The admin's plan, and alice's with an idempotency key.
    let post = |c: &Client, token: Option<&str>, key: Option<&str>| {
        let mut r = c.post(format!("{base}/v1/plans")).json(&workflow());
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        if let Some(k) = key {
            r = r.header("Idempotency-Key", k);
        }
        async move { r.send().await.unwrap() }
    };
    let r = post(&tokens, Some(ADMIN), None).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let admins: Value = r.json().await.unwrap();
    let r = tokens.post(format!("{base}/v1/tokens")).bearer_auth(ADMIN).json(&json!({"user": "alice"})).send().await;
    let alice = r.unwrap().json::<Value>().await.unwrap()["token"].as_str().unwrap().to_owned();
    let r = post(&tokens, Some(&alice), Some("k-1")).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let alices: Value = r.json().await.unwrap();

    // Who the certificates are: their names, no admin role.
    let who: Value = as_admin.get(format!("{base}/v1/whoami")).send().await.unwrap().json().await.unwrap();
    assert_eq!((who["user"].as_str(), who["admin"].as_bool()), (Some("admin"), Some(false)), "{who}");

    for (client, plan) in [(&as_admin, &admins), (&as_alice, &alices)] {
        let url = format!("{base}/v1/plans/{}", plan["id"].as_str().unwrap());
        let r = client.get(&url).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "a namesake certificate reads {url}");
        let r = client.delete(&url).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "a namesake certificate cancels {url}");
        let list: Vec<Value> = client.get(format!("{base}/v1/plans")).send().await.unwrap().json().await.unwrap();
        assert!(list.is_empty(), "a namesake certificate lists {list:?}");
    }
    // alice's key, replayed by the certificate named alice, is not alice's plan.
    let r = post(&as_alice, None, Some("k-1")).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let replayed: Value = r.json().await.unwrap();
    assert_ne!(replayed["id"], alices["id"], "the certificate named alice got alice's plan by her key");
    // Both plans still stand, and each owner still sees its own.
    for (token, plan) in [(ADMIN, &admins), (alice.as_str(), &alices)] {
        let url = format!("{base}/v1/plans/{}", plan["id"].as_str().unwrap());
        let got: Value = tokens.get(&url).bearer_auth(token).send().await.unwrap().json().await.unwrap();
        assert_eq!(got["status"], "committed", "{got}");
    }
    let mine: Vec<Value> =
        tokens.get(format!("{base}/v1/plans")).bearer_auth(&alice).send().await.unwrap().json().await.unwrap();
    assert_eq!(mine.iter().map(|p| p["id"].clone()).collect::<Vec<_>>(), vec![alices["id"].clone()]);

    // A hold of a service principal that is not a planner (another broker): the certificate
    // named `broker` may not drive it (it may drive the planners' holds only).
    let r =
        tokens.post(format!("{base}/v1/tokens")).bearer_auth(ADMIN).json(&json!({"user": "broker", "service": true}));
    let broker = r.send().await.unwrap().json::<Value>().await.unwrap()["token"].as_str().unwrap().to_owned();
    let r = tokens
        .post(format!("{base}/v1/participant/sites/s1/prepare"))
        .bearer_auth(&broker)
        .json(&compute_hold("s1", 2))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let hold = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let r = as_broker.post(format!("{base}/v1/participant/sites/s1/holds/{hold}/commit")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN, "the certificate named broker drove the broker's hold");
    let r = tokens
        .post(format!("{base}/v1/participant/sites/s1/holds/{hold}/abort"))
        .bearer_auth(&broker)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
}

/// Issue 28, point 4: names are validated, never trimmed nor shown as another. A name with an
/// invisible character (zero-width space, byte-order mark, a bidirectional override) would be
/// shown as another principal's (`admin\u{200B}` as `admin` in plans and audit lines): refused
/// with a 422 problem, like surrounding whitespace (also Unicode's) and control characters.
#[tokio::test]
async fn names_that_would_show_as_another_are_refused() {
    let app = spawn().await;
    for user in [
        "admin\u{200B}",
        "\u{FEFF}admin",
        "ali\u{202E}ce",
        "al\u{2060}ice",
        "alice\u{00AD}",
        "\u{3000}alice",
        "alice\u{A0}",
        "alice\n",
        "ali\u{7F}ce",
        " admin",
    ] {
        let r = app.post("/v1/tokens", ADMIN, &json!({"user": user})).await;
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY, "{user:?}");
        assert_eq!(r.headers()["content-type"], "application/problem+json", "{user:?}");
        let p: Value = r.json().await.unwrap();
        assert!(p["detail"].as_str().unwrap().contains("user"), "{user:?}: {p}");
    }
    // What is visible stays accepted (accents, inner spaces, other scripts).
    for user in ["José Müller", "алиса", "planner-1"] {
        let r = app.post("/v1/tokens", ADMIN, &json!({"user": user})).await;
        assert_eq!(r.status(), StatusCode::CREATED, "{user:?}");
    }
}
