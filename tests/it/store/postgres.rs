//! The PostgreSQL store ([`PgStore`]): the memory store's behaviours against a real server,
//! plus persistence across a restart of the API and `coreserve token create`.
//!
//! Every test runs on a fresh database `test_<uuid>` ([`common::with_db`]) created on the server
//! of `CORESERVE_TEST_PG` and dropped afterwards. The test command `.ci/test` starts a throwaway
//! PostgreSQL cluster for them and sets `CORESERVE_TEST_PG` unless it is already set; a bare
//! `cargo test` defaults to `postgres://postgres@127.0.0.1:5432/postgres`. An unreachable server
//! fails the tests: they are never skipped.

use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use coreserve::model::{Outcome, OutcomeStatus};
use coreserve::planner::{Booking, ParticipantRef};
use coreserve::store::{Claim, KeyClaim, PgStore, PlanFilter, PlanRecord, PlanStatus, Store, TokenRecord};
use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

use crate::support as common;
use common::{spawn_app, with_db, workflow, ADMIN};

fn at(h: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, 1, h, 0, 0).unwrap()
}

fn record(user: &str, request_id: &str, start: Option<DateTime<Utc>>) -> PlanRecord {
    let mut outcome = Outcome::rejected(request_id, "no site", "p0");
    let mut bookings = vec![];
    let mut status = PlanStatus::Rejected;
    if let Some(st) = start {
        outcome.status = OutcomeStatus::Committed;
        outcome.reason = None;
        outcome.start = Some(st);
        outcome.cost = 12.375;
        outcome.planning_ms = 0.1 + 0.2;
        bookings = vec![
            Booking { participant: ParticipantRef::Site("s1".into()), hold: Uuid::new_v4() },
            Booking { participant: ParticipantRef::Network, hold: Uuid::new_v4() },
        ];
        status = PlanStatus::Committed;
    }
    PlanRecord {
        id: Uuid::new_v4(),
        user: user.into(),
        status,
        outcome,
        bookings,
        created_at: at(0),
        cancelled_at: None,
    }
}

/// The claim rules every store keeps (run against the memory store and PostgreSQL).
mod claims_contract {
    use super::*;
    use coreserve::planner::log::{DecidedPart, Decision};
    use coreserve::protocol::HoldRequest;
    use coreserve::store::{Claim, DecisionRecord, MemoryStore, RejectionRecord, StoreError};
    use std::time::Duration;

    /// Past a lease of 1 s, measured by the store's own clock.
    async fn lapse() {
        tokio::time::sleep(Duration::from_millis(1300)).await;
    }

    fn decided_plan(user: &str) -> (PlanRecord, Vec<DecidedPart>, Uuid) {
        let mut plan = record(user, "wf", Some(at(10)));
        plan.status = PlanStatus::Pending;
        let txn = Uuid::new_v4();
        let parts = vec![DecidedPart {
            participant: ParticipantRef::Site("s1".into()),
            hold: plan.bookings[0].hold,
            request: HoldRequest::Compute { txn, site: "s1".into(), cpus: 4, start: 0, end: 3600 },
        }];
        (plan, parts, txn)
    }

    async fn decide(
        s: &dyn Store,
        plan: &PlanRecord,
        parts: &[DecidedPart],
        txn: Uuid,
        key: Option<(&str, &str)>,
        claim: &Claim,
    ) -> Result<(), StoreError> {
        let d = Decision { txn, parts, outcome: &plan.outcome };
        s.record_decision(&DecisionRecord { decision: d, plan, reservations: false, key, claim }).await
    }

    /// Keys: one claim at a time, per user; only the holder releases; a lapsed claim is taken
    /// over, and the old claim can then write nothing (one key never yields two plans).
    pub async fn keys(s: &dyn Store) {
        let (a, b) = (Claim::new("a", 1), Claim::new("b", 1));
        assert_eq!(s.claim_key("u", "k", &a).await.unwrap(), KeyClaim::Claimed);
        assert_eq!(s.claim_key("u", "k", &b).await.unwrap(), KeyClaim::InProgress);
        assert_eq!(s.claim_key("v", "k", &b).await.unwrap(), KeyClaim::Claimed, "keys are per user");
        s.release_key("u", "k", &b).await.unwrap();
        assert_eq!(s.claim_key("u", "k", &b).await.unwrap(), KeyClaim::InProgress, "only the holder releases");
        s.release_key("u", "k", &a).await.unwrap();
        assert_eq!(s.claim_key("u", "k", &b).await.unwrap(), KeyClaim::Claimed, "released: free at once");

        // b stops renewing (its process stalled); a takes the key over after the lease.
        lapse().await;
        assert_eq!(s.claim_key("u", "k", &a).await.unwrap(), KeyClaim::Claimed, "a lapsed claim is taken over");
        let stale = record("u", "wf-b", None);
        let r = s.record_rejection(&RejectionRecord { plan: &stale, key: Some(("k", "fb")), claim: &b }).await;
        assert!(matches!(r, Err(StoreError::Superseded)), "{r:?}");
        let (plan, parts, txn) = decided_plan("u");
        let r = decide(s, &plan, &parts, txn, Some(("k", "fb")), &b).await;
        assert!(matches!(r, Err(StoreError::Superseded)), "{r:?}");
        let mine = record("u", "wf-a", None);
        s.record_rejection(&RejectionRecord { plan: &mine, key: Some(("k", "fa")), claim: &a }).await.unwrap();
        assert_eq!(
            s.claim_key("u", "k", &b).await.unwrap(),
            KeyClaim::Done { plan: mine.id, fingerprint: "fa".into() }
        );
        let plans = s.list_plans(&PlanFilter::default()).await.unwrap();
        assert_eq!(plans.iter().map(|p| p.id).collect::<Vec<_>>(), vec![mine.id], "one key, one plan");
        assert_eq!(s.plan(plan.id).await.unwrap(), None, "nothing of b's decision was written");

        // Renewal keeps a claim alive past its first lease.
        let c = Claim::new("c", 1);
        assert_eq!(s.claim_key("u", "k2", &c).await.unwrap(), KeyClaim::Claimed);
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            s.renew_claims(&[c.id], 1).await.unwrap();
        }
        assert_eq!(s.claim_key("u", "k2", &a).await.unwrap(), KeyClaim::InProgress, "renewed, not taken over");
        // All-in-one start: every claim of the previous life ends at once.
        assert_eq!(s.end_all_claims().await.unwrap(), 2, "u/k2 and v/k");
        assert_eq!(s.claim_key("u", "k2", &a).await.unwrap(), KeyClaim::Claimed);
    }

    /// A decided transaction is worked on by one claim at a time: taken over only once its lease
    /// lapsed, settled only by its current claim; its key stays bound to its (pending) plan.
    pub async fn transactions(s: &dyn Store) {
        let (a, b) = (Claim::new("a", 1), Claim::new("b", 1));
        assert_eq!(s.claim_key("u", "k", &a).await.unwrap(), KeyClaim::Claimed);
        let (plan, parts, txn) = decided_plan("u");
        decide(s, &plan, &parts, txn, Some(("k", "f")), &a).await.unwrap();
        assert_eq!(s.plan(plan.id).await.unwrap().unwrap().status, PlanStatus::Pending, "not committed before its end");
        assert!(s.take_in_doubt(&b, 10).await.unwrap().is_empty(), "a's lease runs");
        assert!(matches!(s.finish_txn(txn, &b, None).await, Err(StoreError::Superseded)));
        assert!(matches!(s.mark_compensating(txn, &b).await, Err(StoreError::Superseded)));

        // a stalls; b takes over; a can no longer settle it.
        lapse().await;
        assert_eq!(
            s.claim_key("u", "k", &b).await.unwrap(),
            KeyClaim::Done { plan: plan.id, fingerprint: "f".into() },
            "a decided key is bound to its plan: never planned twice"
        );
        let taken = s.take_in_doubt(&b, 10).await.unwrap();
        assert_eq!(taken.iter().map(|t| (t.txn, t.compensating)).collect::<Vec<_>>(), vec![(txn, false)]);
        assert!(s.take_in_doubt(&a, 10).await.unwrap().is_empty(), "b holds it now");
        assert!(matches!(s.finish_txn(txn, &a, None).await, Err(StoreError::Superseded)));
        s.mark_compensating(txn, &b).await.unwrap();
        // b dies too: the next taker sees that compensation was decided.
        lapse().await;
        let c = Claim::new("c", 1);
        let taken = s.take_in_doubt(&c, 10).await.unwrap();
        assert_eq!(taken.iter().map(|t| (t.txn, t.compensating)).collect::<Vec<_>>(), vec![(txn, true)]);
        let rejected = Outcome::rejected("wf", "a part refused its commit", "p0");
        s.finish_txn(txn, &c, Some(&rejected)).await.unwrap();
        let rec = s.plan(plan.id).await.unwrap().unwrap();
        assert_eq!((rec.status, rec.bookings.len()), (PlanStatus::Rejected, 0));
        assert!(matches!(s.finish_txn(txn, &c, None).await, Err(StoreError::Superseded)), "finished once");
        lapse().await;
        assert!(s.take_in_doubt(&c, 10).await.unwrap().is_empty());

        // The normal end: a pending plan becomes committed when its end is logged.
        let (plan, parts, txn) = decided_plan("u");
        decide(s, &plan, &parts, txn, None, &a).await.unwrap();
        s.finish_txn(txn, &a, None).await.unwrap();
        assert_eq!(s.plan(plan.id).await.unwrap().unwrap().status, PlanStatus::Committed);
    }

    #[tokio::test]
    async fn memory_store_keys() {
        keys(&MemoryStore::new()).await;
    }

    #[tokio::test]
    async fn memory_store_transactions() {
        transactions(&MemoryStore::new()).await;
    }

    #[tokio::test]
    async fn postgres_store_keys() {
        with_db(|url| async move { keys(&PgStore::connect(&url).await.unwrap()).await }).await;
    }

    #[tokio::test]
    async fn postgres_store_transactions() {
        with_db(|url| async move { transactions(&PgStore::connect(&url).await.unwrap()).await }).await;
    }
}

#[tokio::test]
async fn a_key_is_claimed_once_across_processes() {
    with_db(|url| async move {
        // Separate pools stand for separate broker processes.
        let stores: Vec<PgStore> = futures::future::join_all((0..4).map(|_| PgStore::connect(&url)))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let owners: Vec<Claim> = (0..32).map(|i| Claim::new(&format!("p{i}"), 60)).collect();
        let claims =
            futures::future::join_all((0..32).map(|i| stores[i % stores.len()].claim_key("u", "race", &owners[i])))
                .await;
        let claimed = claims.iter().filter(|c| matches!(c, Ok(KeyClaim::Claimed))).count();
        let waiting = claims.iter().filter(|c| matches!(c, Ok(KeyClaim::InProgress))).count();
        assert_eq!((claimed, waiting), (1, 31), "{claims:?}");
    })
    .await;
}

#[tokio::test]
async fn plans_are_stored_listed_in_order_filtered_and_cancelled_once() {
    with_db(|url| async move {
        let s = PgStore::connect(&url).await.unwrap();
        assert_eq!(s.kind(), "postgres");
        s.ping().await.unwrap();
        let a = record("alice", "wf-1", Some(at(10)));
        let b = record("bob", "wf-2", None);
        let c = record("alice", "wf-3", Some(at(12)));
        for p in [&a, &b, &c] {
            s.insert_plan(p.clone()).await.unwrap();
        }
        assert_eq!(s.plan(a.id).await.unwrap().as_ref(), Some(&a), "round trip, outcome and bookings included");
        assert_eq!(s.plan(b.id).await.unwrap().as_ref(), Some(&b));
        assert_eq!(s.plan(Uuid::new_v4()).await.unwrap(), None);

        let ids = |v: Vec<PlanRecord>| v.into_iter().map(|p| p.id).collect::<Vec<_>>();
        let list = |f: PlanFilter| {
            let s = &s;
            async move { ids(s.list_plans(&f).await.unwrap()) }
        };
        assert_eq!(list(PlanFilter::default()).await, vec![a.id, b.id, c.id], "oldest first");
        assert_eq!(list(PlanFilter { user: Some("alice".into()), ..Default::default() }).await, vec![a.id, c.id]);
        assert_eq!(list(PlanFilter { status: Some(PlanStatus::Rejected), ..Default::default() }).await, vec![b.id]);
        assert_eq!(
            list(PlanFilter { from: Some(at(11)), ..Default::default() }).await,
            vec![c.id],
            "no start: no match"
        );
        assert_eq!(list(PlanFilter { to: Some(at(12)), ..Default::default() }).await, vec![a.id], "to is exclusive");
        assert_eq!(
            list(PlanFilter { from: Some(at(10)), to: Some(at(13)), ..Default::default() }).await,
            vec![a.id, c.id]
        );

        let first = s.mark_cancelled(a.id, at(20)).await.unwrap().unwrap();
        assert_eq!((first.status, first.cancelled_at), (PlanStatus::Cancelled, Some(at(20))));
        let again = s.mark_cancelled(a.id, at(21)).await.unwrap().unwrap();
        assert_eq!(again.cancelled_at, Some(at(20)), "the first cancel time is kept");
        assert_eq!(s.plan(a.id).await.unwrap(), Some(again));
        assert_eq!(s.mark_cancelled(Uuid::new_v4(), at(20)).await.unwrap(), None);
        assert_eq!(list(PlanFilter { status: Some(PlanStatus::Cancelled), ..Default::default() }).await, vec![a.id]);
    })
    .await;
}

#[tokio::test]
async fn tokens_are_stored_by_hash_and_replaced() {
    with_db(|url| async move {
        let s = PgStore::connect(&url).await.unwrap();
        let t = TokenRecord { hash: "h1".into(), user: "alice".into(), admin: false, service: true };
        s.insert_token(t.clone()).await.unwrap();
        assert_eq!(s.token("h1").await.unwrap(), Some(t));
        assert_eq!(s.token("h2").await.unwrap(), None);
        let t2 = TokenRecord { hash: "h1".into(), user: "root".into(), admin: true, service: false };
        s.insert_token(t2.clone()).await.unwrap();
        assert_eq!(s.token("h1").await.unwrap(), Some(t2), "like the memory store, a hash maps to its latest record");
    })
    .await;
}

#[tokio::test]
async fn migrations_run_again_on_an_existing_database() {
    with_db(|url| async move {
        let s = PgStore::connect(&url).await.unwrap();
        s.insert_token(TokenRecord { hash: "h".into(), user: "u".into(), admin: false, service: false }).await.unwrap();
        s.pool().close().await;
        let s = PgStore::connect(&url).await.unwrap();
        assert!(s.token("h").await.unwrap().is_some());
    })
    .await;
}

#[tokio::test]
async fn an_unreachable_database_is_an_error() {
    let e = PgStore::connect("postgres://postgres@127.0.0.1:1/nothing").await.err().expect("no server on port 1");
    assert!(e.to_string().contains("postgres"), "{e}");
}

// ---- API level -------------------------------------------------------------------------------

/// Starts the API on `url`'s database; returns its base URL.
async fn spawn(url: &str) -> String {
    spawn_app(Arc::new(PgStore::connect(url).await.unwrap()), |_| {}).await.base
}

#[tokio::test]
async fn plans_tokens_and_idempotency_keys_survive_a_restart() {
    with_db(|url| async move {
        coreserve::protocol::http::install_crypto_provider();
        let client = Client::new();
        let first = spawn(&url).await;
        let r = client
            .post(format!("{first}/v1/tokens"))
            .bearer_auth(ADMIN)
            .json(&json!({"user": "alice"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
        let alice = r.json::<Value>().await.unwrap()["token"].as_str().unwrap().to_owned();
        // One body for the request and its retry (workflow() stamps its deadline from now).
        let body = workflow();
        let r = client
            .post(format!("{first}/v1/plans"))
            .bearer_auth(&alice)
            .header("Idempotency-Key", "k1")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
        let plan: Value = r.json().await.unwrap();
        assert_eq!(plan["status"], "committed", "{plan}");
        let id = plan["id"].as_str().unwrap().to_owned();

        // A new application on the same database: a restarted broker.
        let second = spawn(&url).await;
        let r = client.get(format!("{second}/v1/plans/{id}")).bearer_auth(&alice).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "the plan and alice's token survived");
        assert_eq!(r.json::<Value>().await.unwrap(), plan);
        let r = client
            .post(format!("{second}/v1/plans"))
            .bearer_auth(&alice)
            .header("Idempotency-Key", "k1")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
        assert_eq!(r.headers()["location"].to_str().unwrap(), format!("/v1/plans/{id}"));
        assert_eq!(r.json::<Value>().await.unwrap(), plan, "the retried key answers with the same plan");
        let r = client.get(format!("{second}/v1/plans")).bearer_auth(&alice).send().await.unwrap();
        assert_eq!(r.json::<Vec<Value>>().await.unwrap().len(), 1, "booked once");
    })
    .await;
}

#[tokio::test]
async fn a_token_from_token_create_is_accepted_by_a_server_on_the_same_database() {
    with_db(|url| async move {
        let token = coreserve::cli::token_create(&url, "carol", false, false).await.unwrap();
        assert!(token.starts_with("cs_"), "{token}");
        let admin = coreserve::cli::token_create(&url, "root", true, false).await.unwrap();
        let base = spawn(&url).await;
        let client = Client::new();
        let r = client.get(format!("{base}/v1/plans")).bearer_auth(&token).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let r = client
            .post(format!("{base}/v1/tokens"))
            .bearer_auth(&token)
            .json(&json!({"user": "x"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "carol is no admin");
        let r = client
            .post(format!("{base}/v1/tokens"))
            .bearer_auth(&admin)
            .json(&json!({"user": "x"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED, "root is");
        let r = client.get(format!("{base}/v1/plans")).bearer_auth("cs_not_a_token").send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        // Only the hash is stored.
        let mut conn = PgConnection::connect(&url).await.unwrap();
        let stored: Vec<(String,)> =
            sqlx::query_as(r#"SELECT hash FROM tokens WHERE "user" = 'carol'"#).fetch_all(&mut conn).await.unwrap();
        assert_eq!(stored, vec![(coreserve::api::auth::hash_token(&token),)]);
        assert_ne!(stored[0].0, token);
    })
    .await;
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
    with_db(|url| async move {
        coreserve::protocol::http::install_crypto_provider();
        let c = Client::new();
        let base = spawn(&url).await;
        let send = |method: reqwest::Method, path: &str, token: &str, body: Option<Value>| {
            let mut r = c.request(method, format!("{base}{path}")).bearer_auth(token);
            if let Some(b) = body {
                r = r.json(&b);
            }
            async move { r.send().await.unwrap() }
        };
        use reqwest::Method as M;
        // State to refuse changes to: a user, a committed plan with a key, a committed hold and
        // an aborted one.
        let r = send(M::POST, "/v1/tokens", ADMIN, Some(json!({"user": "bob"}))).await;
        let bob = r.json::<Value>().await.unwrap()["token"].as_str().unwrap().to_owned();
        let r = c.post(format!("{base}/v1/plans")).bearer_auth(&bob).header("Idempotency-Key", "k").json(&workflow());
        let plan: Value = r.send().await.unwrap().json().await.unwrap();
        assert_eq!(plan["status"], "committed");
        let hold = json!({"cpus": 1, "start": common::in_hours(30), "end": common::in_hours(31)});
        let mut holds = Vec::new();
        for _ in 0..2 {
            let r = send(M::POST, "/v1/sites/s1/holds", ADMIN, Some(hold.clone())).await;
            assert_eq!(r.status(), StatusCode::CREATED);
            holds.push(r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned());
        }
        let (committed, aborted) = (&holds[0], &holds[1]);
        assert_eq!(send(M::POST, &format!("/v1/holds/{committed}/commit"), ADMIN, None).await.status(), 200);
        assert_eq!(send(M::POST, &format!("/v1/holds/{aborted}/abort"), ADMIN, None).await.status(), 200);
        let before = snapshot(&url).await;
        assert!(before.iter().any(|r| r.starts_with("reservations: ")), "the journal has rows");

        let mut bad_plans = Vec::new();
        let mut unknown_field = workflow();
        unknown_field["priority"] = json!(1);
        bad_plans.push(unknown_field);
        let mut zero_cpus = workflow();
        zero_cpus["jobs"][0]["cpus"] = json!(0);
        bad_plans.push(zero_cpus);
        let mut past_horizon = workflow();
        past_horizon["deadline"] = json!(common::in_hours(24 * 400));
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
                    Some(json!({"cpus": 17, "start": common::in_hours(40), "end": common::in_hours(41)})),
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
        assert_eq!(snapshot(&url).await, before, "no refused request changed a row");
    })
    .await;
}

/// A commit or extension the participant accepted before its lease ended wins over the lease
/// sweeper of another process that marked the row `expired` before the journal write landed;
/// an abort or release is final.
#[tokio::test]
async fn journal_transitions_follow_the_participant_not_the_sweeper() {
    use coreserve::protocol::{HoldRequest, HoldState, Journal, JournalEntry};
    with_db(|url| async move {
        let s = PgStore::connect(&url).await.unwrap();
        let who = ParticipantRef::Site("s1".into());
        let request = HoldRequest::Compute { txn: Uuid::new_v4(), site: "s1".into(), cpus: 2, start: 100, end: 200 };
        let held = |hold| JournalEntry::Held {
            participant: who.clone(),
            hold,
            request: request.clone(),
            expires_at: 10,
            via_api: false,
            owner: None,
        };
        let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        for h in [a, b, c] {
            s.append(&held(h)).await.unwrap();
        }
        s.append(&JournalEntry::Aborted { hold: c }).await.unwrap();
        assert_eq!(s.expire_holds(20).await.unwrap(), 2, "a and b lapse (c was aborted)");
        s.append(&JournalEntry::Committed { hold: a }).await.unwrap();
        s.append(&JournalEntry::Extended { hold: b, expires_at: 50 }).await.unwrap();
        s.append(&JournalEntry::Committed { hold: c }).await.unwrap();
        s.append(&JournalEntry::Extended { hold: c, expires_at: 50 }).await.unwrap();
        let mut live: Vec<(Uuid, HoldState)> =
            s.live_holds(20).await.unwrap().into_iter().map(|h| (h.hold, h.state)).collect();
        live.sort_by_key(|(h, _)| *h);
        let mut want = vec![(a, HoldState::Committed), (b, HoldState::Held { expires_at: 50 })];
        want.sort_by_key(|(h, _)| *h);
        assert_eq!(live, want, "the aborted hold stays gone");
        s.append(&JournalEntry::Released { hold: a }).await.unwrap();
        s.append(&JournalEntry::Committed { hold: a }).await.unwrap();
        assert_eq!(s.live_holds(20).await.unwrap().len(), 1, "a release is final");
    })
    .await;
}
