//! Issue 25: modifying a committed plan (`PATCH /v1/plans/{id}`) — every change booked or
//! none; a change that does not fit leaves the plan, the calendars and the event log as they
//! were; bad input is a 4xx that changes nothing; under contention (three planners, new plans
//! racing the changes) nothing is overbooked and every site books exactly the plans' jobs;
//! `kill -9` at each step of a modification's two-phase commit loses nothing and half-changes
//! nothing.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sqlx::{Connection, PgConnection, Row};

use crate::support::serve::Server;
use crate::support::{in_hours, machine, problem, ts, workflow, ApiClient, TestApp, ADMIN};

async fn patch(api: &ApiClient, id: &str, token: &str, body: &Value) -> reqwest::Response {
    api.call(Method::PATCH, &format!("/v1/plans/{id}"), Some(token), Some(body)).await
}

/// Events of the durable log per type, for plan `id`.
async fn events_of(db: &str, id: &str) -> HashMap<String, i64> {
    let mut conn = PgConnection::connect(db).await.unwrap();
    let rows = sqlx::query(
        "SELECT COALESCE(kind, 'plan.' || status) AS kind, count(*) AS n FROM plan_events
         WHERE plan_id = $1::uuid GROUP BY 1",
    )
    .bind(id)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    rows.iter().map(|r| (r.get::<String, _>("kind"), r.get::<i64, _>("n"))).collect()
}

/// The committed reservations of `site` as `(start, end, cpus)`, sorted.
async fn booked_at(api: &ApiClient, site: &str) -> Vec<(String, String, u64)> {
    booked_as(api, site, ADMIN).await
}

/// [`booked_at`] as `admin`.
async fn booked_as(api: &ApiClient, site: &str, admin: &str) -> Vec<(String, String, u64)> {
    let (from, to) = (ts(Utc::now() - chrono::Duration::hours(1)), ts(Utc::now() + chrono::Duration::days(3)));
    let mut got: Vec<(String, String, u64)> = api
        .site_reservations(site, admin, &from, &to)
        .await
        .iter()
        .filter(|r| r["state"] == "committed")
        .map(|r| (r["start"].as_str().unwrap().into(), r["end"].as_str().unwrap().into(), r["cpus"].as_u64().unwrap()))
        .collect();
    got.sort();
    got
}

/// The jobs of every committed or active plan at `site`, as [`booked_at`] lists them.
fn planned_at(plans: &[Value], site: &str) -> Vec<(String, String, u64)> {
    let mut want: Vec<(String, String, u64)> = plans
        .iter()
        .filter(|p| p["status"] == "committed" || p["status"] == "active")
        .flat_map(|p| p["jobs"].as_array().unwrap().clone())
        .filter(|j| j["site"] == site)
        .map(|j| (j["start"].as_str().unwrap().into(), j["end"].as_str().unwrap().into(), j["cpus"].as_u64().unwrap()))
        .collect();
    want.sort();
    want
}

fn seconds(v: &Value) -> i64 {
    v.as_str().unwrap().parse::<DateTime<Utc>>().unwrap().timestamp()
}

#[tokio::test]
async fn a_modification_books_every_change_or_none_and_says_what_did_not_fit() {
    let app = TestApp::spawn().await;
    let user = app.token("ana", false).await;
    let r = app.post("/v1/plans", &user, &workflow()).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let plan: Value = r.json().await.unwrap();
    assert_eq!(plan["status"], "committed", "{plan}");
    let id = plan["id"].as_str().unwrap().to_owned();
    let site_a = plan["jobs"][0]["site"].as_str().unwrap().to_owned();
    let db = app.db_url().to_owned();

    // Extend job A by an hour: only A changes, and its site books the new interval.
    let r = patch(&app, &id, &user, &json!({"jobs": [{"name": "A", "duration_s": 7200}]})).await;
    let text = r.text().await.unwrap();
    let modified: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(modified["status"], "committed", "{text}");
    let (a0, a1) = (&plan["jobs"][0], &modified["jobs"][0]);
    assert_eq!(seconds(&a1["start"]), seconds(&a0["start"]));
    assert_eq!(seconds(&a1["end"]), seconds(&a0["end"]) + 3600);
    assert_eq!(modified["jobs"][1], plan["jobs"][1], "B is unchanged");
    let price = a0["price_per_cpu_hour"].as_f64().unwrap();
    let cost = |p: &Value| p["cost"].as_f64().unwrap();
    assert!((cost(&modified) - cost(&plan) - 12.0 * price).abs() < 1e-6, "{} -> {}", cost(&plan), cost(&modified));
    assert_eq!(app.json(&format!("/v1/plans/{id}"), &user).await, modified, "stored as answered");
    let plans = app.plans(ADMIN, "").await;
    assert_eq!(booked_at(&app, &site_a).await, planned_at(&plans, &site_a), "the site books the new shape only");
    assert_eq!(events_of(&db, &id).await.get("plan.modified"), Some(&1));

    // More CPUs than the site has: refused, naming the job, and nothing changes.
    let before = (booked_at(&app, &site_a).await, events_of(&db, &id).await);
    let r = patch(&app, &id, &user, &json!({"jobs": [{"name": "A", "cpus": 20}]})).await;
    let p = problem(r, StatusCode::CONFLICT).await;
    assert!(p["type"].as_str().unwrap().ends_with(":modification-refused"), "{p}");
    let detail = p["detail"].as_str().unwrap();
    assert!(detail.contains("job `A`"), "{detail}");
    assert_eq!(app.json(&format!("/v1/plans/{id}"), &user).await, modified, "the plan is as it was");
    assert_eq!((booked_at(&app, &site_a).await, events_of(&db, &id).await), before, "so are the site and the log");

    // Both sites full for the hour after A: extending A into it is refused, and the answer
    // says when the longer job could start instead.
    let bob = app.token("bob", false).await;
    for i in 0..2 {
        let body = json!({
            "id": format!("full-{i}"), "deadline": in_hours(24), "not_before": a1["end"],
            "jobs": [{"name": "X", "os": "linux", "cpus": 16, "offset_s": 0, "duration_s": 3600}],
        });
        let p: Value = app.post("/v1/plans", &bob, &body).await.json().await.unwrap();
        assert_eq!((p["status"].as_str(), p["start"].as_str()), (Some("committed"), a1["end"].as_str()), "{p}");
    }
    let r = patch(&app, &id, &user, &json!({"jobs": [{"name": "A", "duration_s": 10800}]})).await;
    let p = problem(r, StatusCode::CONFLICT).await;
    let detail = p["detail"].as_str().unwrap();
    assert!(detail.contains("job `A`") && detail.contains("could start at"), "{detail}");
    assert_eq!(app.json(&format!("/v1/plans/{id}"), &user).await, modified, "the plan is as it was");

    // The transfer's bandwidth: up to the link's 1000 Mbit/s, not beyond.
    let r = patch(&app, &id, &user, &json!({"transfers": [{"from": "A", "to": "B", "bandwidth_mbps": 1200}]})).await;
    let p = problem(r, StatusCode::CONFLICT).await;
    assert!(p["detail"].as_str().unwrap().contains("transfer A->B"), "{p}");
    let body = json!({"transfers": [{"from": "A", "to": "B", "bandwidth_mbps": 900}]});
    let keyed = |body: Value| {
        let url = format!("{}/v1/plans/{id}", app.base);
        app.client.patch(url).bearer_auth(&user).header("Idempotency-Key", "more-bandwidth").json(&body).send()
    };
    let r = keyed(body.clone()).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let wider: Value = r.json().await.unwrap();
    assert_eq!(wider["transfers"][0]["bandwidth_mbps"], 900);
    // Its retry answers the plan as it is, and modifies nothing again.
    let again: Value = keyed(body).await.unwrap().json().await.unwrap();
    assert_eq!(again, wider);
    assert_eq!(events_of(&db, &id).await.get("plan.modified"), Some(&2));
    let r = keyed(json!({"transfers": [{"from": "A", "to": "B", "bandwidth_mbps": 800}]})).await.unwrap();
    problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    let (from, to) = (ts(Utc::now() - chrono::Duration::hours(1)), ts(Utc::now() + chrono::Duration::days(2)));
    let links = app.json(&format!("/v1/network/reservations?from={from}&to={to}"), ADMIN).await;
    let bw: Vec<u64> = links.as_array().unwrap().iter().map(|r| r["bandwidth_mbps"].as_u64().unwrap()).collect();
    assert!(!bw.is_empty() && bw.iter().all(|b| *b == 900), "the NIS books the new bandwidth only: {links}");

    // The whole plan moves with its start (past the other user's plans).
    let start = seconds(&wider["start"]) + 5 * 3600;
    let r = patch(&app, &id, &user, &json!({"start": ts(DateTime::from_timestamp(start, 0).unwrap())})).await;
    assert_eq!(r.status(), StatusCode::OK);
    let moved: Value = r.json().await.unwrap();
    for (j, k) in moved["jobs"].as_array().unwrap().iter().zip(wider["jobs"].as_array().unwrap()) {
        assert_eq!(seconds(&j["start"]), seconds(&k["start"]) + 5 * 3600);
    }
    let plans = app.plans(ADMIN, "").await;
    for site in ["s1", "s2"] {
        assert_eq!(booked_at(&app, site).await, planned_at(&plans, site), "{site}");
    }
    // Three committed (A longer, 900 Mbit/s, the move; the keyed retry is answered without a
    // planner), three refused (20 CPUs, into the other user's hour, 1200 Mbit/s).
    let metrics = app.metrics().await;
    for line in [
        "coreserve_plan_modifications_total{result=\"committed\"} 3",
        "coreserve_plan_modifications_total{result=\"refused\"} 3",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
}

#[tokio::test]
async fn bad_modifications_are_refused_with_their_reason_and_change_nothing() {
    let app = TestApp::spawn().await;
    let (ana, bob) = (app.token("ana", false).await, app.token("bob", false).await);
    let plan: Value = app.post("/v1/plans", &ana, &workflow()).await.json().await.unwrap();
    let id = plan["id"].as_str().unwrap().to_owned();
    let past = ts(Utc::now() - chrono::Duration::hours(1));
    let cases: Vec<(Value, &str, StatusCode, &str)> = vec![
        (json!({"jobs": [{"name": "A", "duration_s": 7200}]}), &bob, StatusCode::FORBIDDEN, "another user"),
        (json!({"start": past}), &ana, StatusCode::UNPROCESSABLE_ENTITY, "in the past"),
        (json!({"jobs": [{"name": "A", "duration_s": 200000}]}), &ana, StatusCode::UNPROCESSABLE_ENTITY, "deadline"),
        (json!({"jobs": [{"name": "Z", "cpus": 1}]}), &ana, StatusCode::UNPROCESSABLE_ENTITY, "no job `Z`"),
        (json!({"jobs": [{"name": "A", "cpus": 0}]}), &ana, StatusCode::UNPROCESSABLE_ENTITY, "cpus must be in"),
        (json!({"jobs": [{"name": "A", "duration_s": 300}]}), &ana, StatusCode::UNPROCESSABLE_ENTITY, "inside job `A`"),
        (json!({}), &ana, StatusCode::UNPROCESSABLE_ENTITY, "changes nothing"),
        (json!({"jobs": [{"name": "A", "gpus": 1}]}), &ana, StatusCode::UNPROCESSABLE_ENTITY, "gpus"),
    ];
    for (body, token, status, want) in cases {
        let p = problem(patch(&app, &id, token, &body).await, status).await;
        let detail = p["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(want), "{body}: {detail} (want {want})");
    }
    let r = app.call(Method::PATCH, &format!("/v1/plans/{}", uuid::Uuid::new_v4()), Some(&ana), Some(&json!({}))).await;
    problem(r, StatusCode::NOT_FOUND).await;
    assert_eq!(app.json(&format!("/v1/plans/{id}"), &ana).await, plan, "nothing changed");
    assert!(!events_of(app.db_url(), &id).await.contains_key("plan.modified"));

    // A cancelled plan cannot be modified.
    assert_eq!(app.delete(&format!("/v1/plans/{id}"), &ana).await.status(), StatusCode::OK);
    let r = patch(&app, &id, &ana, &json!({"jobs": [{"name": "A", "duration_s": 7200}]})).await;
    let p = problem(r, StatusCode::CONFLICT).await;
    assert!(p["type"].as_str().unwrap().ends_with(":plan-not-modifiable"), "{p}");
}

/// Three planners; users book one-job plans and change them at once (longer, more CPUs,
/// later), racing each other and new plans. Afterwards no site is overbooked at any instant
/// and each site's committed reservations are exactly the plans' jobs (nothing half-changed,
/// no replaced reservation left behind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modifications_racing_new_plans_on_three_planners_never_overbook() {
    let app = TestApp::spawn_with(|c| c.planners = 3).await;
    let mut tasks = Vec::new();
    for u in 0..3 {
        let api = app.api.clone();
        let token = app.token(&format!("user-{u}"), false).await;
        tasks.push(tokio::spawn(async move {
            let (mut committed, mut refused) = (0, 0);
            for i in 0..6u32 {
                let body = json!({
                    "id": format!("u{u}-{i}"),
                    "deadline": in_hours(12),
                    "jobs": [{"name": "A", "os": "linux", "cpus": 4 + (i + u) % 5, "offset_s": 0, "duration_s": 3600}],
                });
                let plan: Value = api.post("/v1/plans", &token, &body).await.json().await.unwrap();
                if plan["status"] != "committed" {
                    continue;
                }
                let id = plan["id"].as_str().unwrap();
                let change = match i % 3 {
                    0 => json!({"jobs": [{"name": "A", "duration_s": 7200 + 600 * i64::from(u)}]}),
                    1 => json!({"jobs": [{"name": "A", "cpus": 10 + u}]}),
                    _ => json!({"start": ts(DateTime::from_timestamp(seconds(&plan["start"]) + 1800, 0).unwrap())}),
                };
                let r = patch(&api, id, &token, &change).await;
                match r.status() {
                    StatusCode::OK => committed += 1,
                    StatusCode::CONFLICT => refused += 1,
                    s => panic!("{s}: {}", r.text().await.unwrap()),
                }
            }
            (committed, refused)
        }));
    }
    let (mut committed, mut refused) = (0, 0);
    for t in tasks {
        let (c, r) = t.await.unwrap();
        committed += c;
        refused += r;
    }
    eprintln!("modifications: {committed} committed, {refused} refused");
    assert!(committed > 0, "some changes fit");
    let plans = app.plans(ADMIN, "").await;
    for site in ["s1", "s2"] {
        let booked = booked_at(&app, site).await;
        assert_eq!(booked, planned_at(&plans, site), "{site}: exactly the plans' jobs");
        let mut steps: Vec<(i64, i64)> = booked
            .iter()
            .flat_map(|(a, b, n)| {
                let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap().timestamp();
                [(at(a), *n as i64), (at(b), -(*n as i64))]
            })
            .collect();
        steps.sort();
        let mut usage = 0;
        for (t, d) in steps {
            usage += d;
            assert!(usage <= 16, "{site} overbooked at {t}: {usage} CPUs");
        }
    }
}

/// `kill -9` (a fault-injection abort) at each step of a modification's two-phase commit in
/// the all-in-one service: after a restart the plan is entirely as it was (before the durable
/// decision) or entirely as modified (after it: the decision is written before the commits in
/// memory, and the restart restores the store's reservations), and each site books exactly its
/// jobs.
#[tokio::test]
async fn a_crash_at_each_step_of_a_modification_loses_nothing_and_half_changes_nothing() {
    let _machine = machine::reserve("crash").await;
    let test_db = crate::support::TestDb::new().await;
    let db = test_db.url.as_str();
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.json");
    std::fs::write(&grid, serde_json::to_string(&crate::support::grid()).unwrap()).unwrap();
    let s = Server::start(db, Some(&grid), &[], None);
    let plan: Value = s.api().post("/v1/plans", crate::support::serve::ADMIN, &workflow()).await.json().await.unwrap();
    assert_eq!(plan["status"], "committed", "{plan}");
    let id = plan["id"].as_str().unwrap().to_owned();
    s.kill();
    let mut current = plan;
    for (step, (point, survives)) in
        [("after-prepare", false), ("after-decision", true), ("after-commit", true)].into_iter().enumerate()
    {
        let s = Server::start(db, Some(&grid), &[], Some(point));
        let change = json!({"jobs": [{"name": "B", "duration_s": 3600 + 600 * (step as i64 + 1)}]});
        let send = s
            .api()
            .client
            .patch(format!("{}/v1/plans/{id}", s.url))
            .bearer_auth(crate::support::serve::ADMIN)
            .json(&change)
            .send();
        let r = tokio::time::timeout(Duration::from_secs(20), send).await;
        assert!(matches!(r, Ok(Err(_))), "{point}: the request ends with the process: {r:?}");
        s.wait_for_crash();
        let s = Server::start(db, Some(&grid), &[], None);
        let api = s.api();
        let now: Value = api.json(&format!("/v1/plans/{id}"), crate::support::serve::ADMIN).await;
        assert_eq!(now["status"], "committed", "{point}: {now}");
        let want_end =
            seconds(&current["jobs"][1]["start"]) + 3600 + if survives { 600 * (step as i64 + 1) } else { 0 };
        if !survives {
            assert_eq!(now["jobs"][1]["end"], current["jobs"][1]["end"], "{point}: the plan is as it was");
        }
        assert_eq!(seconds(&now["jobs"][1]["end"]), want_end, "{point}: {now}");
        let plans = api.plans(crate::support::serve::ADMIN, "").await;
        for site in ["s1", "s2"] {
            assert_eq!(
                booked_as(&api, site, crate::support::serve::ADMIN).await,
                planned_at(&plans, site),
                "{point}: {site}"
            );
        }
        let modified = [false, true, true][..=step].iter().filter(|s| **s).count() as i64;
        assert_eq!(events_of(db, &id).await.get("plan.modified").copied().unwrap_or(0), modified);
        current = now;
        s.kill();
    }
}

/// `coreserve plans modify`: one job from flags, by request id; a change that does not fit is
/// exit 4 naming the part; a malformed `--transfer` is a bad command line (exit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_modifies_a_plan_from_flags() {
    let app = TestApp::spawn().await;
    let token = app.token("ana", false).await;
    let plan: Value = app.post("/v1/plans", &token, &workflow()).await.json().await.unwrap();
    assert_eq!(plan["status"], "committed");
    let env = [("CORESERVE_URL", app.base.as_str()), ("CORESERVE_TOKEN", token.as_str())];
    let cli = crate::api::coreserve;
    let (code, out, err) =
        cli(&["plans", "modify", "wf-1", "--job", "A", "--duration", "2h", "-o", "json"], &env).await;
    assert_eq!(code, 0, "{err}");
    let modified: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(seconds(&modified["jobs"][0]["end"]), seconds(&plan["jobs"][0]["start"]) + 7200, "{out}");
    let (code, _, err) = cli(&["plans", "modify", "wf-1", "--job", "A", "--cpus", "99"], &env).await;
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("job `A`"), "{err}");
    let (code, _, err) = cli(&["plans", "modify", "wf-1", "--transfer", "AB", "--bandwidth", "10"], &env).await;
    assert_eq!(code, 2, "{err}");
    assert_eq!(app.json(&format!("/v1/plans/{}", plan["id"].as_str().unwrap()), &token).await, modified);
}

/// A modification whose durable decision is refused (here: it would exceed its project's
/// allocation, re-checked with the decision) changes nothing, in the store nor at the sites.
/// Before, the all-in-one committed the replacements in memory first, as planning does, and
/// could not give them back when the write failed: the site kept the new shape (and had
/// released the old reservation) while the plan said the old one.
#[tokio::test]
async fn a_modification_over_its_allocation_changes_nothing_anywhere() {
    let app = TestApp::spawn().await;
    let ana = app.token("ana", false).await;
    let period_start = ts(Utc::now() - chrono::Duration::days(1));
    // 30 CPU-hours: the workflow's 24 fit, an extra hour of 12 CPUs does not.
    let lab = json!({"allocation": {"cpu_hours": 30.0, "period_s": 315_360_000, "period_start": period_start},
                     "members": ["ana"]});
    let r = app.call(Method::PUT, "/v1/projects/lab", Some(ADMIN), Some(&lab)).await;
    assert_eq!(r.status(), StatusCode::OK);
    let plan: Value = app.post("/v1/plans", &ana, &workflow()).await.json().await.unwrap();
    assert_eq!(plan["status"], "committed", "{plan}");
    let id = plan["id"].as_str().unwrap();
    let r = patch(&app, id, &ana, &json!({"jobs": [{"name": "A", "duration_s": 7200}]})).await;
    let p = problem(r, StatusCode::CONFLICT).await;
    assert!(p["detail"].as_str().unwrap().contains("allocation exceeded"), "{p}");
    assert_eq!(app.json(&format!("/v1/plans/{id}"), &ana).await, plan, "the plan is as it was");
    let plans = app.plans(ADMIN, "").await;
    for site in ["s1", "s2"] {
        assert_eq!(booked_at(&app, site).await, planned_at(&plans, site), "{site} books the plan as it was");
    }
    // Within the allocation it goes through.
    let r = patch(&app, id, &ana, &json!({"jobs": [{"name": "A", "duration_s": 5400}]})).await;
    assert_eq!(r.status(), StatusCode::OK);
    let plans = app.plans(ADMIN, "").await;
    for site in ["s1", "s2"] {
        assert_eq!(booked_at(&app, site).await, planned_at(&plans, site), "{site}");
    }
}

/// Issue 49: `modification_pending` is always in a plan's answers, `false` when nothing is
/// pending (created, read, listed, modified, cancelled, dry run), so that a client reads a
/// bool, never an absent field (the Python client read it as None); the OpenAPI document
/// names it required.
#[tokio::test]
async fn modification_pending_is_always_answered_false_when_nothing_is_pending() {
    let app = TestApp::spawn().await;
    let user = app.token("ana", false).await;
    let dry: Value = app.post("/v1/plans?dry_run=true", &user, &workflow()).await.json().await.unwrap();
    assert_eq!(dry["modification_pending"], false, "dry run: {dry}");
    let plan: Value = app.post("/v1/plans", &user, &workflow()).await.json().await.unwrap();
    assert_eq!(plan["modification_pending"], false, "created: {plan}");
    let id = plan["id"].as_str().unwrap().to_owned();
    let got = app.json(&format!("/v1/plans/{id}"), &user).await;
    assert_eq!(got["modification_pending"], false, "read: {got}");
    let listed = app.plans(&user, "").await;
    assert!(listed.iter().all(|p| p["modification_pending"] == false), "listed: {listed:?}");
    let r = patch(&app, &id, &user, &json!({"jobs": [{"name": "A", "duration_s": 7200}]})).await;
    let modified: Value = r.json().await.unwrap();
    assert_eq!(modified["modification_pending"], false, "modified: {modified}");
    let cancelled: Value = app.delete(&format!("/v1/plans/{id}"), &user).await.json().await.unwrap();
    assert_eq!(cancelled["modification_pending"], false, "cancelled: {cancelled}");
    let doc: Value = serde_json::from_str(&coreserve::api::openapi::json()).unwrap();
    let required = doc["components"]["schemas"]["PlanView"]["allOf"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(std::iter::once(&doc["components"]["schemas"]["PlanView"]))
        .flat_map(|s| s["required"].as_array().cloned().unwrap_or_default())
        .collect::<Vec<_>>();
    assert!(required.contains(&json!("modification_pending")), "required in the schema: {required:?}");
}

/// Issue 50: creation and modification share one idempotency rule (`api::idempotency`), so a
/// key reused for another request gets one answer from both: 422 `invalid-request` with the
/// same detail (create's said "a different request body", modify's "a different request").
#[tokio::test]
async fn idempotency_a_reused_key_is_the_same_422_for_create_and_modify() {
    let app = TestApp::spawn().await;
    let ana = app.token("ana", false).await;
    let keyed = |method: Method, path: String, key: &'static str, body: Value| {
        let req = app.client.request(method, format!("{}{path}", app.base)).bearer_auth(&ana);
        async move { req.header("Idempotency-Key", key).json(&body).send().await.unwrap() }
    };
    let first = keyed(Method::POST, "/v1/plans".into(), "k-create", workflow()).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let id = first.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let mut other = workflow();
    other["id"] = json!("wf-2");
    let r = keyed(Method::POST, "/v1/plans".into(), "k-create", other).await;
    let create = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;

    let change = json!({"transfers": [{"from": "A", "to": "B", "bandwidth_mbps": 600}]});
    let path = format!("/v1/plans/{id}");
    assert_eq!(keyed(Method::PATCH, path.clone(), "k-modify", change).await.status(), StatusCode::OK);
    let another = json!({"transfers": [{"from": "A", "to": "B", "bandwidth_mbps": 700}]});
    let modify = problem(keyed(Method::PATCH, path, "k-modify", another).await, StatusCode::UNPROCESSABLE_ENTITY).await;

    for (p, key) in [(&create, "k-create"), (&modify, "k-modify")] {
        assert_eq!(p["type"], "urn:coreserve:problem:invalid-request", "{p}");
        let want = format!(
            "Idempotency-Key `{key}` was used for another request (another body, or another plan); use a new key"
        );
        assert_eq!(p["detail"], want.as_str(), "{p}");
    }
}

/// Issue 50: a replay of a key whose plan is `pending` is `409 idempotency-in-progress`
/// (Retry-After) for a modification too, as for a creation, never the pending plan as if
/// settled (the modification's copy had no pending check and answered 200). The API makes no
/// plan pending after a modification of it, so the test sets the status in the store.
#[tokio::test]
async fn idempotency_a_replayed_modification_of_a_pending_plan_is_409() {
    let app = TestApp::spawn().await;
    let ana = app.token("ana", false).await;
    let plan: Value = app.post("/v1/plans", &ana, &workflow()).await.json().await.unwrap();
    let id = plan["id"].as_str().unwrap().to_owned();
    let change = json!({"transfers": [{"from": "A", "to": "B", "bandwidth_mbps": 600}]});
    let send = || {
        let req = app.client.patch(format!("{}/v1/plans/{id}", app.base)).bearer_auth(&ana);
        req.header("Idempotency-Key", "k-pending").json(&change).send()
    };
    assert_eq!(send().await.unwrap().status(), StatusCode::OK);
    let mut conn = PgConnection::connect(app.db_url()).await.unwrap();
    sqlx::query("UPDATE plans SET status = 'pending' WHERE id = $1::uuid").bind(&id).execute(&mut conn).await.unwrap();
    let r = send().await.unwrap();
    assert!(r.headers().contains_key("retry-after"), "{:?}", r.headers());
    let p = problem(r, StatusCode::CONFLICT).await;
    assert_eq!(p["type"], "urn:coreserve:problem:idempotency-in-progress", "{p}");
}

/// Issue 50: a plan's lock is a key of its owner's key space (`coreserve:plan:{id}`). A client
/// key in that namespace is refused (400, nothing stored); before, a POST under
/// `coreserve:plan:{id}` took the lock of the user's own plan, which then answered 409
/// `plan-busy` to every modification and cancellation until retention removed the key.
#[tokio::test]
async fn idempotency_a_key_in_the_service_s_own_namespace_is_refused() {
    let app = TestApp::spawn().await;
    let ana = app.token("ana", false).await;
    let plan: Value = app.post("/v1/plans", &ana, &workflow()).await.json().await.unwrap();
    let id = plan["id"].as_str().unwrap().to_owned();
    let mut other = workflow();
    other["id"] = json!("wf-2");
    let r = app
        .client
        .post(format!("{}/v1/plans", app.base))
        .bearer_auth(&ana)
        .header("Idempotency-Key", format!("coreserve:plan:{id}"))
        .json(&other)
        .send()
        .await
        .unwrap();
    let p = problem(r, StatusCode::BAD_REQUEST).await;
    assert!(p["detail"].as_str().unwrap().contains("coreserve:"), "{p}");
    assert_eq!(app.plans(&ana, "").await.len(), 1, "nothing stored");
    let change = json!({"transfers": [{"from": "A", "to": "B", "bandwidth_mbps": 600}]});
    let r =
        app.client.patch(format!("{}/v1/plans/{id}", app.base)).bearer_auth(&ana).json(&change).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "the plan's lock is free: {:?}", r.text().await);
}
