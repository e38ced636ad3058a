//! End-to-end tests of `coreserve serve` (all-in-one, on PostgreSQL): each test spawns the
//! application on 127.0.0.1:0 over a small hand-made grid, with a fresh database
//! ([`TestApp::spawn`]), and talks HTTP.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use coreserve::api::ServiceClock;
use coreserve::clock::{Clock, ManualClock};
use reqwest::{Client, Method, StatusCode};
use serde_json::{json, Value};

use crate::support::{self, in_hours, problem, ts, workflow, TestApp, ADMIN};

#[tokio::test]
async fn probes_metrics_and_openapi_answer_without_a_token() {
    let app = TestApp::spawn().await;
    let r = app.call(Method::GET, "/healthz", None, None).await;
    assert_eq!(r.status(), StatusCode::OK);
    let r = app.call(Method::GET, "/readyz", None, None).await;
    assert_eq!(r.json::<Value>().await.unwrap(), json!({"status": "ready", "store": "postgres"}));
    let memory = TestApp::memory(support::grid(), |_| {}).await;
    let r = app.client.get(format!("{}/readyz", memory.base)).send().await.unwrap();
    assert_eq!(r.json::<Value>().await.unwrap(), json!({"status": "ready", "store": "memory"}));
    let r = app.call(Method::GET, "/openapi.json", None, None).await;
    let doc: Value = r.json().await.unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/v1/plans"]["post"].is_object());
    let text = app.metrics().await;
    for name in [
        "coreserve_plans_total{status=\"committed\"} 0",
        "coreserve_planning_seconds_count 0",
        "coreserve_holds_outstanding 0",
        "coreserve_2pc_aborts_total 0",
    ] {
        assert!(text.contains(name), "missing `{name}` in\n{text}");
    }
    problem(app.call(Method::GET, "/nowhere", None, None).await, StatusCode::NOT_FOUND).await;
}

#[test]
fn committed_openapi_yaml_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/coreserve.yaml");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let generated = coreserve::api::openapi::yaml();
    assert!(
        committed == generated,
        "openapi/coreserve.yaml is out of date with the code; regenerate it with\n    \
         cargo run -- openapi > openapi/coreserve.yaml"
    );
}

#[tokio::test]
async fn tokens_and_roles_are_enforced() {
    let app = TestApp::spawn().await;
    let body = problem(app.call(Method::GET, "/v1/sites", None, None).await, StatusCode::UNAUTHORIZED).await;
    assert!(body["detail"].as_str().unwrap().contains("Bearer"));
    let r = app.call(Method::GET, "/v1/sites", None, None).await;
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    problem(app.get("/v1/sites", "not-a-token").await, StatusCode::UNAUTHORIZED).await;
    problem(app.call(Method::POST, "/v1/plans", None, Some(&workflow())).await, StatusCode::UNAUTHORIZED).await;

    let alice = app.token("alice", false).await;
    assert_eq!(app.get("/v1/sites", &alice).await.status(), StatusCode::OK);
    let site = json!({"node": "n1", "cpus": 16, "os": "linux", "price_per_cpu_hour": 9.0});
    problem(app.call(Method::PUT, "/v1/sites/s1", Some(&alice), Some(&site)).await, StatusCode::FORBIDDEN).await;
    problem(app.post("/v1/tokens", &alice, &json!({"user": "mallory", "admin": true})).await, StatusCode::FORBIDDEN)
        .await;
    let hold = json!({"cpus": 1, "start": in_hours(1), "end": in_hours(2)});
    problem(app.post("/v1/sites/s1/holds", &alice, &hold).await, StatusCode::FORBIDDEN).await;
    let nhold = json!({"links": ["l1"], "bandwidth_mbps": 1, "start": in_hours(1), "end": in_hours(2)});
    problem(app.post("/v1/network/holds", &alice, &nhold).await, StatusCode::FORBIDDEN).await;
    let any = uuid::Uuid::new_v4();
    for op in ["commit", "abort"] {
        problem(app.post(&format!("/v1/holds/{any}/{op}"), &alice, &json!({})).await, StatusCode::FORBIDDEN).await;
    }
    problem(app.post(&format!("/v1/holds/{any}/extend"), &alice, &json!({"lease_s": 5})).await, StatusCode::FORBIDDEN)
        .await;
    assert_eq!(app.booked_anywhere().await, 0, "refused holds book nothing");
    problem(app.post("/v1/tokens", ADMIN, &json!({"user": ""})).await, StatusCode::UNPROCESSABLE_ENTITY).await;
}

#[tokio::test]
async fn a_plan_is_booked_read_listed_and_cancelled_by_its_owner() {
    let app = TestApp::spawn().await;
    let (alice, bob) = (app.token("alice", false).await, app.token("bob", false).await);
    let r = app.post("/v1/plans", &alice, &workflow()).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let location = r.headers()["location"].to_str().unwrap().to_owned();
    let plan: Value = r.json().await.unwrap();
    assert_eq!(plan["status"], "committed", "{plan}");
    assert_eq!(plan["request_id"], "wf-1");
    assert_eq!(plan["user"], "alice");
    let id = plan["id"].as_str().unwrap().to_owned();
    assert_eq!(location, format!("/v1/plans/{id}"));
    let sites: Vec<&str> = plan["jobs"].as_array().unwrap().iter().map(|j| j["site"].as_str().unwrap()).collect();
    assert!(sites.contains(&"s1") && sites.contains(&"s2"), "12-CPU jobs need both sites: {sites:?}");
    assert_eq!(plan["transfers"][0]["path"], json!(["l1"]));
    let start: DateTime<Utc> = plan["start"].as_str().unwrap().parse().unwrap();
    assert!(start >= Utc::now() + chrono::Duration::seconds(55), "start >= receipt + w_interval");

    // Booked: one committed reservation per job; the site is busy for the plan's hour.
    for s in ["s1", "s2"] {
        let res = app.reservations(s).await;
        assert_eq!(res.len(), 1);
        assert_eq!((res[0]["state"].as_str(), res[0]["cpus"].as_u64()), (Some("committed"), Some(12)));
    }
    let avail =
        |from: String| format!("/v1/sites/s1/availability?from={from}&to={}&cpus=16&duration_s=600", in_hours(30));
    let a: Value = app.get(&avail(ts(start)), &alice).await.json().await.unwrap();
    assert_eq!(a["earliest_start"], json!(ts(start + chrono::Duration::seconds(3600))));
    assert!(a["utilisation"].as_f64().unwrap() > 0.0);

    // Read and list: the owner and the admin see it, another user does not.
    assert_eq!(app.get(&location, &alice).await.json::<Value>().await.unwrap(), plan);
    problem(app.get(&location, &bob).await, StatusCode::FORBIDDEN).await;
    problem(app.get(&format!("/v1/plans/{}", uuid::Uuid::new_v4()), &alice).await, StatusCode::NOT_FOUND).await;
    problem(app.get("/v1/plans/not-a-uuid", &alice).await, StatusCode::NOT_FOUND).await;
    assert_eq!(app.plans(&alice, "").await, vec![plan.clone()]);
    assert!(app.plans(&bob, "").await.is_empty());
    assert_eq!(app.plans(ADMIN, "").await.len(), 1);
    assert_eq!(app.plans(&alice, "?status=committed").await.len(), 1);
    assert!(app.plans(&alice, "?status=cancelled").await.is_empty());
    assert_eq!(app.plans(&alice, &format!("?from={}&to={}", ts(start), in_hours(3))).await.len(), 1);
    assert!(app.plans(&alice, &format!("?from={}", in_hours(3))).await.is_empty());
    problem(app.get("/v1/plans?status=bogus", &alice).await, StatusCode::BAD_REQUEST).await;

    // Cancel: only the owner (or an admin); idempotent; the capacity is free again.
    problem(app.call(Method::DELETE, &location, Some(&bob), None).await, StatusCode::FORBIDDEN).await;
    assert_eq!(app.booked_anywhere().await, 2);
    let r = app.call(Method::DELETE, &location, Some(&alice), None).await;
    assert_eq!(r.status(), StatusCode::OK);
    let cancelled: Value = r.json().await.unwrap();
    assert_eq!(cancelled["status"], "cancelled");
    let again: Value = app.call(Method::DELETE, &location, Some(&alice), None).await.json().await.unwrap();
    assert_eq!(again, cancelled, "cancel is idempotent");
    assert_eq!(app.booked_anywhere().await, 0);
    let a: Value = app.get(&avail(ts(start)), &alice).await.json().await.unwrap();
    assert_eq!(a["earliest_start"], json!(ts(start)));
    assert_eq!(app.plans(&alice, "?status=cancelled").await.len(), 1);

    let text = app.metrics().await;
    assert!(text.contains("coreserve_plans_total{status=\"committed\"} 1"), "{text}");
    assert!(text.contains("coreserve_plans_total{status=\"cancelled\"} 1"));
    assert!(text.contains("coreserve_planning_seconds_count 1"));
    // The planner's calls to participants are timed: the plan committed a hold at a LIS.
    let count = |participant: &str, message: &str| -> u64 {
        let key =
            format!("coreserve_participant_call_seconds_count{{participant=\"{participant}\",message=\"{message}\"}} ");
        text.lines().find_map(|l| l.strip_prefix(key.as_str())).and_then(|v| v.parse().ok()).unwrap()
    };
    assert!(count("lis", "query") >= 2 && count("lis", "commit") >= 2, "{text}");
    assert!(count("nis", "query") >= 1);
}

#[tokio::test]
async fn a_rejected_plan_is_stored_with_its_reason_and_cannot_be_cancelled() {
    let app = TestApp::spawn().await;
    let r = app.post("/v1/plans", ADMIN, &too_tight()).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let plan: Value = r.json().await.unwrap();
    assert_eq!(plan["status"], "rejected");
    assert!(!plan["reason"].as_str().unwrap().is_empty());
    let path = format!("/v1/plans/{}", plan["id"].as_str().unwrap());
    problem(app.call(Method::DELETE, &path, Some(ADMIN), None).await, StatusCode::CONFLICT).await;
    assert_eq!(app.booked_anywhere().await, 0);
}

/// A workflow whose deadline the model accepts (it leaves the span) but no plan can meet: the
/// planner's w_interval (60 s) comes first.
fn too_tight() -> Value {
    let mut body = workflow();
    body["deadline"] = json!((chrono::Utc::now() + chrono::Duration::seconds(3630)).to_rfc3339());
    body
}

/// A job no site of the grid can ever run is invalid input (422, naming the nearest site's
/// unmet requirement), not a stored rejection; the idempotency key stays free.
#[tokio::test]
async fn a_job_no_site_can_run_is_422_naming_the_unmet_requirement_and_stores_nothing() {
    let app = TestApp::spawn().await;
    let cases = [
        (json!({"os": "solaris"}), "lacks OS solaris"),
        (json!({"cpus": 40}), "lacks 40 CPUs"),
        (
            json!({"requires": {"gpus": {"count": 1, "min_compute_capability": 3.5}}}),
            "lacks 1 GPU with compute capability >= 3.5",
        ),
        (
            json!({"requires": {"software": ["tensorflow >=1.5"], "extensions": ["avx"]}}),
            "lacks instruction-set extension avx",
        ),
    ];
    for (change, unmet) in cases {
        let mut body = workflow();
        for (k, v) in change.as_object().unwrap() {
            body["jobs"][0][k] = v.clone();
        }
        for dry_run in ["", "?dry_run=true"] {
            let r = app
                .client
                .post(format!("{}/v1/plans{dry_run}", app.base))
                .bearer_auth(ADMIN)
                .header("Idempotency-Key", "k-unsat")
                .json(&body)
                .send()
                .await
                .unwrap();
            let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
            assert!(p["type"].as_str().unwrap().ends_with(":unsatisfiable"), "{p}");
            let detail = p["detail"].as_str().unwrap();
            assert!(detail.contains("no site can run job `A`") && detail.contains(unmet), "{unmet}: {p}");
        }
    }
    let plans: Value = app.get("/v1/plans", ADMIN).await.json().await.unwrap();
    assert_eq!(plans.as_array().unwrap().len(), 0, "nothing stored: {plans}");
    // The key was given back: a valid body may use it now.
    let r = app.client.post(format!("{}/v1/plans", app.base)).bearer_auth(ADMIN).header("Idempotency-Key", "k-unsat");
    assert_eq!(r.json(&workflow()).send().await.unwrap().status(), StatusCode::CREATED);
}

#[tokio::test]
async fn the_same_idempotency_key_books_once() {
    let app = TestApp::spawn().await;
    let alice = app.token("alice", false).await;
    let send = |body: Value, key: &'static str, token: String| {
        let req = app.client.post(format!("{}/v1/plans", app.base)).bearer_auth(token).header("Idempotency-Key", key);
        async move { req.json(&body).send().await.unwrap() }
    };
    let body = workflow();
    let first = send(body.clone(), "k1", alice.clone()).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let loc1 = first.headers()["location"].clone();
    let first: Value = first.json().await.unwrap();
    let second = send(body.clone(), "k1", alice.clone()).await;
    assert_eq!(second.status(), StatusCode::CREATED);
    assert_eq!(second.headers()["location"], loc1);
    assert_eq!(second.json::<Value>().await.unwrap(), first, "same id and body");
    assert_eq!(app.booked_anywhere().await, 2, "one booking per job, not two");
    assert_eq!(app.plans(&alice, "").await.len(), 1);

    let mut other = body.clone();
    other["id"] = json!("wf-2");
    problem(send(other, "k1", alice.clone()).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    // A bad body does not burn a fresh key: fixed, the retry books.
    let mut bad = body.clone();
    bad["jobs"][0]["cpus"] = json!(0);
    problem(send(bad, "k2", alice.clone()).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    let mut small = body.clone();
    small["jobs"][0]["cpus"] = json!(2);
    small["jobs"][1]["cpus"] = json!(2);
    assert_eq!(send(small, "k2", alice.clone()).await.status(), StatusCode::CREATED);
    assert_eq!(app.plans(&alice, "").await.len(), 2);
}

#[tokio::test]
async fn a_dry_run_books_nothing() {
    let app = TestApp::spawn().await;
    let r = app.post("/v1/plans?dry_run=true", ADMIN, &workflow()).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers().get("location").is_none());
    let plan: Value = r.json().await.unwrap();
    assert_eq!(plan["status"], "planned", "{plan}");
    assert_eq!(plan["jobs"].as_array().unwrap().len(), 2);
    assert_eq!(app.booked_anywhere().await, 0);
    assert!(app.plans(ADMIN, "").await.is_empty());
    assert_eq!(app.state.participants.holds_outstanding(), 0);
    problem(app.get(&format!("/v1/plans/{}", plan["id"].as_str().unwrap()), ADMIN).await, StatusCode::NOT_FOUND).await;
}

#[tokio::test]
async fn bad_input_is_refused_with_a_problem_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let raw = |body: String| {
        let req = app.client.post(format!("{}/v1/plans", app.base)).bearer_auth(ADMIN);
        async move { req.header("content-type", "application/json").body(body).send().await.unwrap() }
    };
    problem(raw("{\"deadline\": ".into()).await, StatusCode::BAD_REQUEST).await;
    let mut unknown = workflow();
    unknown["user"] = json!("someone-else");
    let p = problem(app.post("/v1/plans", ADMIN, &unknown).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert!(p["detail"].as_str().unwrap().contains("unknown field `user`"), "{p}");
    let mut unknown_in_job = workflow();
    unknown_in_job["jobs"][0]["gpus"] = json!(1);
    problem(app.post("/v1/plans", ADMIN, &unknown_in_job).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    let mut no_deadline = workflow();
    no_deadline.as_object_mut().unwrap().remove("deadline");
    problem(app.post("/v1/plans", ADMIN, &no_deadline).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    let mut invalid = workflow();
    invalid["transfers"][0]["to"] = json!("Z");
    let p = problem(app.post("/v1/plans", ADMIN, &invalid).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert!(p["detail"].as_str().unwrap().contains("unknown job `Z`"));
    let mut too_late = workflow();
    too_late["deadline"] = json!(in_hours(24 * 400));
    let p = problem(app.post("/v1/plans", ADMIN, &too_late).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert!(p["detail"].as_str().unwrap().contains("horizon"));
    let mut many = workflow();
    many["jobs"] = json!((0..1001)
        .map(|i| json!({"name": format!("j{i}"), "os": "linux", "cpus": 1, "offset_s": 0, "duration_s": 60}))
        .collect::<Vec<_>>());
    many["transfers"] = json!([]);
    problem(app.post("/v1/plans", ADMIN, &many).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    let mut huge = workflow();
    huge["id"] = json!("x".repeat(5 * 1024 * 1024));
    problem(app.post("/v1/plans", ADMIN, &huge).await, StatusCode::PAYLOAD_TOO_LARGE).await;
    let p =
        problem(app.call(Method::PATCH, "/v1/plans", Some(ADMIN), None).await, StatusCode::METHOD_NOT_ALLOWED).await;
    assert!(p["detail"].as_str().unwrap().contains("PATCH"), "{p}");

    assert!(app.plans(ADMIN, "").await.is_empty(), "no plan stored");
    assert_eq!(app.booked_anywhere().await, 0, "nothing booked");
    let text = app.metrics().await;
    assert!(text.contains("coreserve_planning_seconds_count 0"), "no request reached a planner");
}

#[tokio::test]
async fn sites_can_be_read_and_repriced_but_not_resized() {
    let app = TestApp::spawn().await;
    let user = app.token("u", false).await;
    let sites: Vec<Value> = app.get("/v1/sites", &user).await.json().await.unwrap();
    assert_eq!(sites.iter().map(|s| s["id"].as_str().unwrap()).collect::<Vec<_>>(), ["s1", "s2", "s3"]);
    let s1: Value = app.get("/v1/sites/s1", &user).await.json().await.unwrap();
    assert_eq!(s1["cpus"], 16);
    problem(app.get("/v1/sites/nope", &user).await, StatusCode::NOT_FOUND).await;

    let put = |id: &'static str, body: Value| {
        let req = app.client.put(format!("{}/v1/sites/{id}", app.base)).bearer_auth(ADMIN).json(&body);
        async move { req.send().await.unwrap() }
    };
    let r = put("s1", json!({"node": "n1", "cpus": 16, "os": "linux", "price_per_cpu_hour": 0.25})).await;
    assert_eq!(r.status(), StatusCode::OK);
    let s1: Value = app.get("/v1/sites/s1", &user).await.json().await.unwrap();
    assert_eq!(s1["price_per_cpu_hour"], 0.25);
    let q = format!("/v1/sites/s1/availability?from={}&to={}&cpus=4&duration_s=60", in_hours(1), in_hours(2));
    let a: Value = app.get(&q, &user).await.json().await.unwrap();
    assert_eq!(a["price_per_cpu_hour"], 0.25, "the LIS offers the new price");
    problem(
        put("s1", json!({"node": "n1", "cpus": 32, "os": "linux", "price_per_cpu_hour": 1.0})).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    problem(
        put("s9", json!({"node": "n1", "cpus": 4, "os": "linux", "price_per_cpu_hour": 1.0})).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    problem(
        put("s1", json!({"node": "n1", "cpus": 16, "os": "linux", "price_per_cpu_hour": 1.0, "x": 1})).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    let sites: Vec<Value> = app.get("/v1/sites", &user).await.json().await.unwrap();
    assert_eq!(sites.len(), 3);
    assert_eq!(sites[0]["price_per_cpu_hour"], 0.25, "refused updates changed nothing");
    let bad_window = format!("/v1/sites/s1/availability?from={}&to={}&cpus=4&duration_s=60", in_hours(2), in_hours(1));
    problem(app.get(&bad_window, &user).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    problem(app.get("/v1/sites/s1/availability?from=yesterday", &user).await, StatusCode::BAD_REQUEST).await;
}

#[tokio::test]
async fn holds_go_through_two_phase_commit_over_http() {
    let app = TestApp::spawn().await;
    let svc = app.token("planner-x", true).await;
    let hold = |cpus: u32| json!({"cpus": cpus, "start": in_hours(1), "end": in_hours(2)});
    let r = app.post("/v1/sites/s1/holds", &svc, &hold(10)).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let h1: Value = r.json().await.unwrap();
    let id1 = h1["id"].as_str().unwrap().to_owned();
    let res = app.reservations("s1").await;
    assert_eq!((res[0]["state"].as_str(), res[0]["hold"].as_str()), (Some("held"), Some(id1.as_str())));
    let p = problem(app.post("/v1/sites/s1/holds", &svc, &hold(10)).await, StatusCode::CONFLICT).await;
    assert_eq!(p["type"], "urn:coreserve:problem:capacity");
    problem(app.post("/v1/sites/zz/holds", &svc, &hold(1)).await, StatusCode::NOT_FOUND).await;

    let ext: Value =
        app.post(&format!("/v1/holds/{id1}/extend"), &svc, &json!({"lease_s": 600})).await.json().await.unwrap();
    assert!(ext["expires_at"].as_str().unwrap() > h1["expires_at"].as_str().unwrap());
    problem(
        app.post(&format!("/v1/holds/{id1}/extend"), &svc, &json!({"lease_s": 0})).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    for _ in 0..2 {
        let r = app.post(&format!("/v1/holds/{id1}/commit"), &svc, &json!({})).await;
        assert_eq!(r.json::<Value>().await.unwrap(), json!({"id": id1, "state": "committed"}));
    }
    assert_eq!(app.reservations("s1").await[0]["state"], "committed");
    problem(app.post(&format!("/v1/holds/{id1}/abort"), &svc, &json!({})).await, StatusCode::CONFLICT).await;
    problem(app.post(&format!("/v1/holds/{id1}/extend"), &svc, &json!({"lease_s": 5})).await, StatusCode::CONFLICT)
        .await;

    let h2: Value = app.post("/v1/sites/s1/holds", ADMIN, &hold(6)).await.json().await.unwrap();
    let id2 = h2["id"].as_str().unwrap();
    for _ in 0..2 {
        // The admin's own hold: only the admin (its owner) may drive it; the service gets 403.
        assert_eq!(app.post(&format!("/v1/holds/{id2}/abort"), ADMIN, &json!({})).await.status(), StatusCode::OK);
    }
    problem(app.post(&format!("/v1/holds/{id2}/abort"), &svc, &json!({})).await, StatusCode::FORBIDDEN).await;
    let p = problem(app.post(&format!("/v1/holds/{id2}/commit"), ADMIN, &json!({})).await, StatusCode::CONFLICT).await;
    assert_eq!(p["type"], "urn:coreserve:problem:hold-aborted");
    problem(
        app.post(&format!("/v1/holds/{}/commit", uuid::Uuid::new_v4()), &svc, &json!({})).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    assert_eq!(app.reservations("s1").await.len(), 1, "only the committed hold is left");

    // The network: topology, a route, and a bandwidth hold.
    let net: Value = app.get("/v1/network", &svc).await.json().await.unwrap();
    assert_eq!(net["links"][0]["capacity_mbps"], 1000);
    assert_eq!(net["nodes"].as_array().unwrap().len(), 2);
    let q = format!(
        "/v1/network/route?from_site=s1&to_site=s2&bandwidth_mbps=400&start={}&end={}",
        in_hours(1),
        in_hours(2)
    );
    let route: Value = app.get(&q, &svc).await.json().await.unwrap();
    assert_eq!(route["route"]["links"], json!(["l1"]));
    assert_eq!(route["route"]["free_mbps"], 1000);
    let nh = json!({"links": ["l1"], "bandwidth_mbps": 700, "start": in_hours(1), "end": in_hours(2)});
    let r = app.post("/v1/network/holds", &svc, &nh).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let nid = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let route: Value = app.get(&q, &svc).await.json().await.unwrap();
    assert_eq!(route["route"], Value::Null, "400 Mbit/s no longer fit next to the 700 held");
    problem(app.post("/v1/network/holds", &svc, &nh).await, StatusCode::CONFLICT).await;
    let bad_link = json!({"links": ["l9"], "bandwidth_mbps": 1, "start": in_hours(1), "end": in_hours(2)});
    problem(app.post("/v1/network/holds", &svc, &bad_link).await, StatusCode::NOT_FOUND).await;
    assert_eq!(
        app.post(&format!("/v1/holds/{nid}/extend"), &svc, &json!({"lease_s": 30})).await.status(),
        StatusCode::OK
    );
    assert_eq!(app.post(&format!("/v1/holds/{nid}/commit"), &svc, &json!({})).await.status(), StatusCode::OK);
    problem(app.get("/v1/network/route?from_site=s1&to_site=zz&bandwidth_mbps=1&start=2030-01-01T00:00:00Z&end=2030-01-01T01:00:00Z", &svc).await,
        StatusCode::UNPROCESSABLE_ENTITY).await;
    let q =
        format!("/v1/network/route?from_site=s1&to_site=zz&bandwidth_mbps=1&start={}&end={}", in_hours(1), in_hours(2));
    problem(app.get(&q, &svc).await, StatusCode::NOT_FOUND).await;
    let text = app.metrics().await;
    assert!(text.contains("coreserve_holds_outstanding 0"), "{text}");
}

/// The lease runs out on the service's clock: a manual one here, moved past it.
#[tokio::test]
async fn an_expired_hold_cannot_be_committed_and_its_capacity_is_free() {
    let clock = Arc::new(ManualClock::new(Utc::now().timestamp()));
    let service_clock = ServiceClock(clock.clone());
    let app = TestApp::spawn_with(|c| {
        c.lease_s = 1;
        c.clock = service_clock;
    })
    .await;
    let body = json!({"cpus": 16, "start": in_hours(1), "end": in_hours(2)});
    let h: Value = app.post("/v1/sites/s2/holds", ADMIN, &body).await.json().await.unwrap();
    let id = h["id"].as_str().unwrap();
    assert_eq!(app.reservations("s2").await.len(), 1);
    clock.advance_to(clock.now() + 2);
    let p = problem(app.post(&format!("/v1/holds/{id}/commit"), ADMIN, &json!({})).await, StatusCode::CONFLICT).await;
    assert_eq!(p["type"], "urn:coreserve:problem:hold-expired");
    assert!(app.reservations("s2").await.is_empty());
    let q = format!("/v1/sites/s2/availability?from={}&to={}&cpus=16&duration_s=3600", in_hours(1), in_hours(3));
    let a: Value = app.get(&q, ADMIN).await.json().await.unwrap();
    assert!(a["earliest_start"].is_string(), "all 16 CPUs are free again: {a}");
    assert_eq!(app.post("/v1/sites/s2/holds", ADMIN, &body).await.status(), StatusCode::CREATED);
}

#[tokio::test]
async fn concurrent_retries_with_one_key_book_once() {
    let app = TestApp::spawn_with(|c| c.workers = Some(2)).await;
    let body = workflow(); // one body: a retry sends the same bytes
    let send = || {
        let req =
            app.client.post(format!("{}/v1/plans", app.base)).bearer_auth(ADMIN).header("Idempotency-Key", "same");
        let req = req.json(&body);
        async move { req.send().await.unwrap() }
    };
    let answers = futures::future::join_all((0..4).map(|_| send())).await;
    let mut ids = std::collections::BTreeSet::new();
    for r in answers {
        match r.status() {
            StatusCode::CREATED => {
                ids.insert(r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned());
            }
            StatusCode::CONFLICT => {
                let p = problem(r, StatusCode::CONFLICT).await;
                assert_eq!(p["type"], "urn:coreserve:problem:idempotency-in-progress");
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(ids.len(), 1, "every created answer is the same plan");
    assert_eq!(app.booked_anywhere().await, 2, "booked once");
    assert_eq!(app.plans(ADMIN, "").await.len(), 1);
}

/// The HTTP transport of the participant protocol against the all-in-one service: every
/// refusal comes back as the same typed [`ParticipantError`] an in-process participant gives,
/// and the unchanged planner books a plan over HTTP participants.
#[tokio::test]
async fn http_participants_speak_the_protocol_with_typed_errors() {
    use coreserve::model::{PlanRequest, PlanStatus};
    use coreserve::planner::{Planner, PlannerConfig};
    use coreserve::protocol::http::{HttpCatalogue, HttpParticipant};
    use coreserve::protocol::{
        Catalogue, ComputeHoldRequest, HoldId, HoldLifecycle, NetworkHoldRequest, Participant, ParticipantError as P,
        TxnId,
    };

    let app = TestApp::spawn().await;
    let token = Some(ADMIN.to_owned());
    let s1 = HttpParticipant::site(&app.base, "s1", token.clone());
    let nis = HttpParticipant::network(&app.base, token.clone());
    let t0 = Utc::now().timestamp() + 3600;
    let (start, end) = (t0, t0 + 3600);
    let txn = TxnId::new();

    let too_big = ComputeHoldRequest {
        replaces: None,
        reservation_name: None,
        txn,
        site: "s1".into(),
        cpus: 17,
        start,
        end,
        gpus: None,
        user: None,
    };
    assert!(matches!(s1.prepare(&too_big).await, Err(P::Capacity { requested: 17, .. })));
    let wide = NetworkHoldRequest {
        replaces: None,
        port: None,
        txn,
        links: vec!["l1".into()],
        bandwidth_mbps: 2000,
        start,
        end,
        sites: None,
    };
    assert!(matches!(nis.prepare(&wide).await, Err(P::LinkCapacity { link, .. }) if link == "l1"));
    let h = s1
        .prepare(&ComputeHoldRequest {
            replaces: None,
            reservation_name: None,
            txn,
            site: "s1".into(),
            cpus: 4,
            start,
            end,
            gpus: None,
            user: None,
        })
        .await
        .unwrap();
    s1.abort(h.id).await.unwrap();
    s1.abort(h.id).await.unwrap();
    assert_eq!(s1.commit(h.id).await, Err(P::Aborted(h.id)));
    let h = s1
        .prepare(&ComputeHoldRequest {
            replaces: None,
            reservation_name: None,
            txn,
            site: "s1".into(),
            cpus: 4,
            start,
            end,
            gpus: None,
            user: None,
        })
        .await
        .unwrap();
    s1.commit(h.id).await.unwrap();
    assert_eq!(s1.abort(h.id).await, Err(P::AlreadyCommitted(h.id)));
    s1.release(h.id).await.unwrap();
    // Aborts of several holds in one message (`POST {base}/holds/abort`): an answer per hold.
    let hold = |cpus| ComputeHoldRequest {
        replaces: None,
        reservation_name: None,
        txn,
        site: "s1".into(),
        cpus,
        start,
        end,
        gpus: None,
        user: None,
    };
    let (a, b, c) =
        (s1.prepare(&hold(4)).await.unwrap(), s1.prepare(&hold(8)).await.unwrap(), s1.prepare(&hold(2)).await.unwrap());
    s1.commit(c.id).await.unwrap();
    assert_eq!(s1.abort_all(&[a.id, b.id, c.id]).await, vec![Ok(()), Ok(()), Err(P::AlreadyCommitted(c.id))]);
    assert_eq!(app.state.participants.lis["s1"].usage_at(start), 2, "both holds given back, the booking kept");
    s1.release(c.id).await.unwrap();
    let ghost = HoldId::new();
    assert_eq!(s1.commit(ghost).await, Err(P::UnknownHold(ghost)));
    let nowhere = HttpParticipant::site(&app.base, "s9", token.clone());
    assert_eq!(nowhere.commit(ghost).await, Err(P::UnknownHold(ghost)), "404 for an unknown site's hold");
    let unauthorised = HttpParticipant::site(&app.base, "s1", None);
    assert!(matches!(unauthorised.commit(ghost).await, Err(P::Transport(_))));
    let dead = HttpParticipant::site("http://127.0.0.1:9", "s1", token.clone());
    assert!(matches!(dead.commit(ghost).await, Err(P::Transport(_))));

    // The GIS answers several demands in one message as it answers each.
    let gis = HttpCatalogue::new(&app.base, token.clone());
    let demands: Vec<coreserve::model::ComputeDemand> = serde_json::from_value(json!([
        {"name": "a", "os": "linux", "cpus": 8, "offset_s": 0, "duration_s": 60},
        {"name": "b", "os": "plan9", "cpus": 8, "offset_s": 0, "duration_s": 60}
    ]))
    .unwrap();
    let mut one_by_one = Vec::new();
    for d in &demands {
        one_by_one.push(gis.candidates(d).await.unwrap());
    }
    assert_eq!(gis.candidates_all(&demands).await.unwrap(), one_by_one);
    assert!(!one_by_one[0].sites.is_empty() && one_by_one[1].sites.is_empty());

    // The NIS answers several path questions in one message (`POST {base}/queries`, the
    // planner's batched network checks) as it answers each, "no path" included.
    let path = |to: &str, bandwidth_mbps| coreserve::protocol::NetworkQuery {
        from_site: "s1".into(),
        to_site: to.into(),
        bandwidth_mbps,
        start,
        end,
    };
    let questions = [path("s2", 100), path("s3", 100_000), path("s3", 100)];
    let mut one_by_one = Vec::new();
    for q in &questions {
        one_by_one.push(nis.query(q).await);
    }
    assert!(one_by_one[0].as_ref().is_ok_and(Option::is_some) && one_by_one[1] == Ok(None), "{one_by_one:?}");
    assert_eq!(nis.query_all(&questions).await, one_by_one);

    // The planner, unchanged, over HTTP participants.
    let services = http_services(&app.base, &token);
    let planner = Planner::new(PlannerConfig { w_interval_s: 60, ..PlannerConfig::default() }, services);
    let req: PlanRequest = serde_json::from_value(json!({
        "id": "over-http", "user": "u", "submitted_at": ts(Utc::now()), "deadline": in_hours(4),
        "jobs": [{"name": "a", "os": "linux", "cpus": 16, "offset_s": 0, "duration_s": 3600},
                 {"name": "b", "os": "linux", "cpus": 16, "offset_s": 0, "duration_s": 3600}],
        "transfers": [{"from": "a", "to": "b", "bandwidth_mbps": 600, "offset_s": 0, "duration_s": 600}]
    }))
    .unwrap();
    let o = planner.plan(&req).await;
    assert_eq!(o.status, PlanStatus::Committed, "{o:?}");
    assert_eq!(o.transfers[0].path, vec!["l1".to_string()]);
    let booked: u64 =
        ["s1", "s2"].iter().flat_map(|s| app.state.participants.lis[*s].booked(0, i64::MAX)).map(|r| r.cpus).sum();
    assert_eq!(booked, 32);
    assert_eq!(app.state.participants.holds_outstanding(), 0);
}

/// A planner's services over the HTTP participants of the service at `base` (sites s1-s3,
/// the NIS and the GIS), as a role-separated planner has them.
fn http_services(base: &str, token: &Option<String>) -> coreserve::planner::Services {
    use coreserve::protocol::http::{HttpCatalogue, HttpParticipant};
    use coreserve::protocol::{Compute, Participant};
    coreserve::planner::Services {
        gis: Arc::new(HttpCatalogue::new(base, token.clone())),
        lis: ["s1", "s2", "s3"]
            .iter()
            .map(|s| {
                ((*s).into(), Arc::new(HttpParticipant::site(base, s, token.clone())) as Arc<dyn Participant<Compute>>)
            })
            .collect(),
        nis: Arc::new(HttpParticipant::network(base, token.clone())),
        clock: Arc::new(coreserve::clock::SystemClock),
    }
}

/// Issue 53 over HTTP: a LIS's and the NIS's snapshots (`POST {base}/snapshot`) are their
/// calendars as their own queries read them, a replica built from one answers a query as the
/// participant does, a batch of prepares (`POST {base}/prepares`) answers each hold on its own
/// (granted holds are real: they book and abort), and a planner that plans from snapshots over
/// HTTP books the plan that the planner asking as it searches would, its search sending
/// nothing: the catalogue, the snapshots, the prepares, then the commits (without a decision
/// log, one per part, one after the other).
#[tokio::test]
async fn http_participants_give_snapshots_and_prepare_batches() {
    use coreserve::clock::SystemClock;
    use coreserve::lis::Lis;
    use coreserve::model::{PlanRequest, PlanStatus};
    use coreserve::nis::Nis;
    use coreserve::planner::{Planner, PlannerConfig};
    use coreserve::protocol::http::HttpParticipant;
    use coreserve::protocol::{
        ComputeHoldRequest, ComputeQuery, HoldLifecycle, NetworkQuery, Participant, ParticipantError as P,
        SnapshotWindow, TxnId, UsageStep,
    };

    let app = TestApp::spawn().await;
    let token = Some(ADMIN.to_owned());
    let s1 = HttpParticipant::site(&app.base, "s1", token.clone());
    let nis = HttpParticipant::network(&app.base, token.clone());
    let t0 = Utc::now().timestamp() + 3600;
    let hold = |cpus: u32, start: i64, end: i64| ComputeHoldRequest {
        replaces: None,
        reservation_name: None,
        txn: TxnId::new(),
        site: "s1".into(),
        cpus,
        start,
        end,
        gpus: None,
        user: None,
    };
    // One prepare message, three holds: the second cannot fit beside the first, the third can.
    let answers =
        s1.prepare_all(&[hold(10, t0, t0 + 600), hold(10, t0 + 300, t0 + 900), hold(6, t0 + 300, t0 + 900)]).await;
    assert!(matches!(answers[1], Err(P::Capacity { requested: 10, free: 6, .. })), "{answers:?}");
    let (a, c) = (answers[0].clone().unwrap(), answers[2].clone().unwrap());
    let window = SnapshotWindow { from: t0 - 100, to: t0 + 3600 };
    let snapshot = s1.snapshot(&window).await.unwrap().expect("a LIS gives snapshots");
    let step = |start, end, booked| UsageStep { start, end, booked };
    assert_eq!(snapshot.cpus, vec![step(t0, t0 + 300, 10), step(t0 + 300, t0 + 600, 16), step(t0 + 600, t0 + 900, 6)]);
    assert_eq!(snapshot.site.id.as_str(), "s1");
    // A replica answers as the LIS, inside the window.
    let replica = Lis::replica(&snapshot, Arc::new(SystemClock), 60).unwrap();
    for (cpus, duration_s) in [(6, 600), (8, 300), (16, 60)] {
        let q = ComputeQuery {
            site: "s1".into(),
            cpus,
            duration_s,
            window_start: t0 - 100,
            deadline: t0 + 3600,
            gpus: None,
        };
        assert_eq!(replica.query(&q).await, s1.query(&q).await, "{q:?}");
    }
    s1.abort_all(&[a.id, c.id]).await.into_iter().for_each(|r| r.unwrap());
    assert!(s1.snapshot(&window).await.unwrap().unwrap().cpus.is_empty(), "aborted holds are gone");
    // The NIS: its topology, routing and link calendars; a replica routes as it does.
    let nis_snapshot = nis.snapshot(&window).await.unwrap().expect("a NIS without a data plane gives snapshots");
    assert_eq!(nis_snapshot.routing, "shortest");
    assert!(nis_snapshot.links_booked.is_empty());
    let nis_replica = Nis::replica(&nis_snapshot, Arc::new(SystemClock), 60).unwrap();
    for bandwidth_mbps in [100, 1000, 1001] {
        let q = NetworkQuery { from_site: "s1".into(), to_site: "s3".into(), bandwidth_mbps, start: t0, end: t0 + 60 };
        assert_eq!(nis_replica.query(&q).await, nis.query(&q).await, "{q:?}");
    }

    // A planner over HTTP participants, from snapshots, and the one that asks as it searches.
    let services = || http_services(&app.base, &token);
    let req = |id: &str| -> PlanRequest {
        serde_json::from_value(json!({
            "id": id, "user": "u", "submitted_at": ts(Utc::now()), "deadline": in_hours(4), "policy": "cost",
            "jobs": [{"name": "a", "os": "linux", "cpus": 16, "offset_s": 0, "duration_s": 3600},
                     {"name": "b", "os": "linux", "cpus": 16, "offset_s": 0, "duration_s": 3600}],
            "transfers": [{"from": "a", "to": "b", "bandwidth_mbps": 600, "offset_s": 0, "duration_s": 600}]
        }))
        .unwrap()
    };
    let cfg = |plan_from_snapshots| PlannerConfig { w_interval_s: 60, plan_from_snapshots, ..PlannerConfig::default() };
    let dry = coreserve::planner::PlanOptions { dry_run: true, ..Default::default() };
    let asking = Planner::new(cfg(false), services()).plan_with(&req("asking"), dry).await.outcome;
    assert_eq!(asking.status, PlanStatus::Planned, "{asking:?}");
    let o = Planner::new(cfg(true), services()).plan(&req("snapped")).await;
    assert_eq!(o.status, PlanStatus::Committed, "{o:?}");
    assert_eq!(
        (&o.jobs.iter().map(|j| &j.site).collect::<Vec<_>>(), &o.transfers[0].path),
        (&asking.jobs.iter().map(|j| &j.site).collect::<Vec<_>>(), &asking.transfers[0].path)
    );
    // Catalogue, snapshots (the 2 linux sites' LIS + NIS), prepares (2 LIS + NIS), then 3
    // commits one by one.
    assert_eq!((o.rounds, o.messages), (3 + 3, 3 + 3 + 3), "{o:?}");
    assert_eq!(o.holds_aborted, 0);
    let booked: u64 =
        ["s1", "s2"].iter().flat_map(|s| app.state.participants.lis[*s].booked(0, i64::MAX)).map(|r| r.cpus).sum();
    assert_eq!(booked, 32);
    assert_eq!(app.state.participants.holds_outstanding(), 0);
}

// ---- Issue 8, item 4: inputs that broke the service. One test per defect. ----

/// A plan body with job A's `field` set to `value` (raw JSON text, so that numbers beyond
/// what `serde_json::Value` keeps exactly reach the server as written).
fn workflow_with(field: &str, value: &str) -> String {
    workflow().to_string().replacen(&format!("\"{field}\":3600"), &format!("\"{field}\":{value}"), 1)
}

#[tokio::test]
async fn a_duration_of_2_pow_53_is_422_not_a_dropped_connection() {
    let app = TestApp::spawn().await;
    let body = workflow_with("duration_s", "9007199254740992");
    assert!(body.contains("9007199254740992"));
    let p = problem(app.post_raw("/v1/plans", ADMIN, body).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert!(p["detail"].as_str().unwrap().contains("job `A`: duration_s must be at most"), "{p}");
    assert_eq!(app.booked_anywhere().await, 0);
}

#[tokio::test]
async fn an_offset_of_i64_max_is_422_without_panic_text() {
    let app = TestApp::spawn().await;
    let mut body = workflow();
    body["jobs"][0]["offset_s"] = json!(i64::MAX);
    let p = problem(app.post("/v1/plans", ADMIN, &body).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    let detail = p["detail"].as_str().unwrap();
    assert!(detail.contains("job `A`: offset_s must be at most"), "{p}");
    assert!(!detail.contains("overflow") && !detail.contains("panic"), "{p}");
    let text = app.metrics().await;
    assert!(text.contains("coreserve_handler_panics_total 0"), "{text}");
}

#[tokio::test]
async fn a_duration_of_i64_max_is_422_not_a_rejected_plan() {
    let app = TestApp::spawn().await;
    let mut body = workflow();
    body["jobs"][1]["duration_s"] = json!(i64::MAX);
    let p = problem(app.post("/v1/plans", ADMIN, &body).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert!(p["detail"].as_str().unwrap().contains("job `B`: duration_s must be at most"), "{p}");
    assert!(app.plans(ADMIN, "").await.is_empty(), "nothing stored");
}

#[tokio::test]
async fn a_huge_price_is_refused_and_plans_stay_readable() {
    let app = TestApp::spawn().await;
    let put = |price: Value| {
        let body = json!({"node": "n1", "cpus": 16, "os": "linux", "price_per_cpu_hour": price});
        app.client.put(format!("{}/v1/sites/s1", app.base)).bearer_auth(ADMIN).json(&body).send()
    };
    let p = problem(put(json!(1e308)).await.unwrap(), StatusCode::UNPROCESSABLE_ENTITY).await;
    assert!(p["detail"].as_str().unwrap().contains("price_per_cpu_hour"), "{p}");
    problem(put(json!(-1.0)).await.unwrap(), StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(put(json!(1e6)).await.unwrap().status(), StatusCode::OK, "the documented bound is accepted");
    let r = app.post("/v1/plans", ADMIN, &workflow()).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let plan: Value = r.json().await.unwrap();
    assert_eq!(plan["status"], "committed", "{plan}");
    assert!(plan["cost"].as_f64().unwrap().is_finite(), "{plan}");
    let id = plan["id"].as_str().unwrap();
    assert_eq!(app.plans(ADMIN, "").await.len(), 1);
    assert_eq!(app.get(&format!("/v1/plans/{id}"), ADMIN).await.status(), StatusCode::OK);
    let r = app.call(Method::DELETE, &format!("/v1/plans/{id}"), Some(ADMIN), None).await;
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn the_os_of_a_site_cannot_change_under_committed_plans() {
    let app = TestApp::spawn().await;
    let plan: Value = app.post("/v1/plans", ADMIN, &workflow()).await.json().await.unwrap();
    assert_eq!(plan["status"], "committed", "{plan}");
    let id = plan["id"].as_str().unwrap();
    let put = |os: &str| {
        let body = json!({"node": "n1", "cpus": 16, "os": os, "price_per_cpu_hour": 1.0});
        app.client.put(format!("{}/v1/sites/s1", app.base)).bearer_auth(ADMIN).json(&body).send()
    };
    let p = problem(put("bsd").await.unwrap(), StatusCode::CONFLICT).await;
    assert!(p["detail"].as_str().unwrap().contains(id), "the plan is named: {p}");
    let s1: Value = app.get("/v1/sites/s1", ADMIN).await.json().await.unwrap();
    assert_eq!(s1["os"], "linux", "unchanged");
    assert_eq!(put("linux").await.unwrap().status(), StatusCode::OK, "a price change alone is fine");
    let r = app.call(Method::DELETE, &format!("/v1/plans/{id}"), Some(ADMIN), None).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(put("bsd").await.unwrap().status(), StatusCode::OK, "free once the plan is cancelled");
}

#[tokio::test]
async fn nul_bytes_in_ids_names_and_users_are_422_and_reach_no_store() {
    let app = TestApp::spawn().await;
    let mut id = workflow();
    id["id"] = json!("wf\u{0}1");
    let p = problem(app.post("/v1/plans", ADMIN, &id).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert!(p["detail"].as_str().unwrap().contains("$.id contains a control character"), "{p}");
    let mut job = workflow();
    job["jobs"][0]["name"] = json!("A\u{0}");
    job["transfers"][0]["from"] = json!("A\u{0}");
    problem(app.post("/v1/plans", ADMIN, &job).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    let p =
        problem(app.post("/v1/tokens", ADMIN, &json!({"user": "eve\u{0}"})).await, StatusCode::UNPROCESSABLE_ENTITY)
            .await;
    assert!(!p["detail"].as_str().unwrap().contains("0x00"), "no database text: {p}");
    problem(app.post("/v1/tokens", ADMIN, &json!({"user": "eve\u{1b}[31m"})).await, StatusCode::UNPROCESSABLE_ENTITY)
        .await;
    assert!(app.plans(ADMIN, "").await.is_empty(), "no plan stored, not even a rejected one");
}

#[tokio::test]
async fn a_hold_that_starts_in_the_past_is_422() {
    let app = TestApp::spawn().await;
    let body = json!({"cpus": 1, "start": in_hours(-2), "end": in_hours(1)});
    let p = problem(app.post("/v1/sites/s1/holds", ADMIN, &body).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert!(p["detail"].as_str().unwrap().contains("in the past"), "{p}");
    let body = json!({"links": ["l1"], "bandwidth_mbps": 10, "start": in_hours(-2), "end": in_hours(1)});
    problem(app.post("/v1/network/holds", ADMIN, &body).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(app.booked_anywhere().await, 0);
    let body = json!({"cpus": 1, "start": in_hours(1), "end": in_hours(2)});
    assert_eq!(app.post("/v1/sites/s1/holds", ADMIN, &body).await.status(), StatusCode::CREATED);
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let app = TestApp::spawn().await;
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let r = app.client.get(format!("{}/v1/sites", app.base)).header("authorization", format!("{scheme} {ADMIN}"));
        assert_eq!(r.send().await.unwrap().status(), StatusCode::OK, "{scheme}");
    }
    let r = app.client.get(format!("{}/v1/sites", app.base)).header("authorization", format!("Basic {ADMIN}"));
    problem(r.send().await.unwrap(), StatusCode::UNAUTHORIZED).await;
}

#[tokio::test]
async fn json_arrays_are_422_where_objects_are_required() {
    let app = TestApp::spawn().await;
    let w = workflow();
    let as_array = json!([w["id"], w["deadline"], null, w["jobs"], w["transfers"]]);
    let p = problem(app.post("/v1/plans", ADMIN, &as_array).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert!(p["detail"].as_str().unwrap().contains("expected a JSON object"), "{p}");
    problem(app.post("/v1/tokens", ADMIN, &json!(["mallory", true, true])).await, StatusCode::UNPROCESSABLE_ENTITY)
        .await;
    assert!(app.plans(ADMIN, "").await.is_empty());
}

#[tokio::test]
async fn an_empty_job_name_is_422() {
    let app = TestApp::spawn().await;
    let mut body = workflow();
    body["jobs"][0]["name"] = json!("");
    body["transfers"][0]["from"] = json!("");
    let p = problem(app.post("/v1/plans", ADMIN, &body).await, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert!(p["detail"].as_str().unwrap().contains("jobs[0].name: must not be empty"), "{p}");
    assert!(app.plans(ADMIN, "").await.is_empty());
}

#[tokio::test]
async fn a_405_lists_the_allowed_methods_and_head_answers_every_get() {
    let app = TestApp::spawn().await;
    let r = app.call(Method::PATCH, "/v1/plans", Some(ADMIN), None).await;
    assert_eq!(r.headers()["allow"], "GET, HEAD, POST");
    problem(r, StatusCode::METHOD_NOT_ALLOWED).await;
    let r = app.call(Method::POST, "/v1/sites/s1", Some(ADMIN), None).await;
    assert_eq!(r.headers()["allow"], "GET, HEAD, PUT");
    let r = app.call(Method::DELETE, "/healthz", None, None).await;
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers()["allow"], "GET, HEAD");
    // Every participant-protocol route, from the list its registration reads.
    let paths: Vec<String> = coreserve::api::routes::participant::paths().collect();
    assert_eq!(paths.len(), 18, "8 LIS, 8 NIS (drift, prepares, snapshot among them) and 2 GIS endpoints: {paths:?}");
    for template in paths {
        let path = format!("/v1{template}")
            .replace("{site}", "s1")
            .replace("{id}", "0190b2d8-0000-7000-8000-000000000000")
            .replace("{verb}", "commit");
        let r = app.call(Method::GET, &path, Some(ADMIN), None).await;
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "{path}");
        assert_eq!(r.headers()["allow"], "POST", "{path}");
    }

    let get = app.get("/v1/sites/s1", ADMIN).await;
    let length = get.headers()["content-length"].clone();
    let r = app.call(Method::HEAD, "/v1/sites/s1", Some(ADMIN), None).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-length"], length, "the GET's length");
    assert!(r.bytes().await.unwrap().is_empty(), "no body");
    for path in ["/healthz", "/readyz", "/metrics", "/openapi.json"] {
        assert_eq!(app.call(Method::HEAD, path, None, None).await.status(), StatusCode::OK, "{path}");
    }
    let r = app.call(Method::HEAD, "/v1/plans", None, None).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "HEAD is authenticated like GET");
    assert_eq!(r.headers()["content-type"], "application/problem+json");
}

// ---- The command line client and `serve --config` (real processes) ----

/// `coreserve ARGS` with `env`, off the runtime's thread: (exit code, stdout, stderr).
pub(crate) async fn coreserve(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let (args, env): (Vec<String>, Vec<(String, String)>) = (
        args.iter().map(|a| a.to_string()).collect(),
        env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    );
    tokio::task::spawn_blocking(move || {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_coreserve"))
            .args(&args)
            .env_remove("CORESERVE_URL")
            .env_remove("CORESERVE_TOKEN")
            .envs(env)
            .output()
            .unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into(),
            String::from_utf8_lossy(&o.stderr).into(),
        )
    })
    .await
    .unwrap()
}

/// The client commands the issue names, their tables, `--json`, problem details and exit
/// codes (0 done, 3 rejected, 4 refused, 6 unreachable).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_client_submits_lists_shows_and_cancels_plans() {
    let app = TestApp::spawn().await;
    let token = app.token("alice", false).await;
    let env = [("CORESERVE_URL", app.base.as_str()), ("CORESERVE_TOKEN", token.as_str())];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wf.json");
    std::fs::write(&file, workflow().to_string()).unwrap();
    let file = file.to_str().unwrap();

    // One request, JSON out; the same key again answers the same plan.
    let (code, out, err) = coreserve(&["plans", "submit", file, "--idempotency-key", "k-1", "--json"], &env).await;
    assert_eq!(code, 0, "{out}{err}");
    let plan: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(plan["status"], "committed", "{plan}");
    let id = plan["id"].as_str().unwrap().to_string();
    let (code, out, _) = coreserve(&["plans", "submit", file, "--idempotency-key", "k-1"], &env).await;
    assert_eq!(code, 0);
    assert!(out.starts_with(&format!("plan {id}")) && out.contains("COMMITTED"), "{out}");
    for job in ["A ", "B "] {
        assert!(out.lines().any(|l| l.starts_with(job) && (l.contains("s1") || l.contains("s2"))), "job table: {out}");
    }
    assert_eq!(app.plans(ADMIN, "").await.len(), 1, "booked once");

    // A dry run plans and books nothing.
    let (code, out, _) = coreserve(&["plans", "submit", file, "--dry-run", "--json"], &env).await;
    assert_eq!((code, serde_json::from_str::<Value>(&out).unwrap()["status"].clone()), (0, json!("planned")));

    // list, show, cancel.
    let (code, out, _) = coreserve(&["plans", "list"], &env).await;
    assert_eq!(code, 0);
    assert!(out.lines().next().unwrap().starts_with("plan") && out.contains(&id) && out.contains("committed"), "{out}");
    let (_, out, _) = coreserve(&["plans", "list", "--json", "--status", "committed"], &env).await;
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap().as_array().unwrap().len(), 1);
    let (code, out, _) = coreserve(&["plans", "show", &id], &env).await;
    assert!(code == 0 && out.contains("transfer") && out.contains("A -> B"), "{out}");
    let (code, out, _) = coreserve(&["plans", "cancel", &id], &env).await;
    assert_eq!((code, out.trim()), (0, format!("plan {id} cancelled").as_str()));

    // Problems: plainly on stderr, with exit codes scripts can test.
    let (code, _, err) = coreserve(&["plans", "show", "00000000-0000-0000-0000-000000000000"], &env).await;
    assert!(code == 4 && err.starts_with("error: 404"), "{code} {err}");
    let (code, _, err) = coreserve(&["plans", "list", "--server", &app.base], &[]).await;
    assert!(code == 4 && err.contains("401"), "no token: {code} {err}");
    let (code, _, err) = coreserve(&["sites", "--server", "http://127.0.0.1:1"], &[]).await;
    assert!(code == 6 && err.contains("cannot connect"), "unreachable: {code} {err}");
    let big = dir.path().join("big.json");
    std::fs::write(&big, too_tight().to_string()).unwrap();
    let (code, out, _) = coreserve(&["plans", "submit", big.to_str().unwrap()], &env).await;
    assert!(code == 3 && out.contains("REJECTED") && out.contains("reason:"), "rejected: {code} {out}");
    let mut bad = workflow();
    bad["jobs"][0]["cpus"] = json!(0);
    let bad_file = dir.path().join("bad.json");
    std::fs::write(&bad_file, bad.to_string()).unwrap();
    let (code, _, err) = coreserve(&["plans", "submit", bad_file.to_str().unwrap()], &env).await;
    assert!(code == 4 && err.contains("422"), "invalid: {code} {err}");

    // JSON lines: many requests, one table, the worst exit code.
    let lines: String = (0..3)
        .map(|i| {
            let mut r = workflow();
            r["id"] = json!(format!("line-{i}"));
            format!("{r}\n")
        })
        .collect::<String>()
        + &format!("{}\n", too_tight());
    let many = dir.path().join("many.jsonl");
    std::fs::write(&many, lines).unwrap();
    let (code, out, err) =
        coreserve(&["plans", "submit", many.to_str().unwrap(), "--idempotency-key", "batch"], &env).await;
    assert_eq!(code, 3, "one of four rejected: {out}{err}");
    assert!(out.contains("line-0") && out.contains("line-2") && out.contains("3 committed, 1 rejected"), "{out}");

    // sites, availability, route.
    let (code, out, _) = coreserve(&["sites"], &env).await;
    assert!(code == 0 && ["s1", "s2", "s3", "bsd"].iter().all(|w| out.contains(w)), "{out}");
    let (code, out, _) = coreserve(&["availability", "s1", "--cpus", "4", "--duration-s", "3600"], &env).await;
    assert!(code == 0 && out.contains("earliest start of 4 CPUs"), "{out}");
    let (code, out, _) = coreserve(&["route", "s1", "s2", "--bandwidth-mbps", "100", "--json"], &env).await;
    assert_eq!(code, 0);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["route"]["links"], json!(["l1"]));
}

/// `coreserve ARGS` with `env`, stdout a pipe whose reader is gone before anything is
/// written: (exit code, stderr).
async fn coreserve_into_a_closed_pipe(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let (args, env): (Vec<String>, Vec<(String, String)>) = (
        args.iter().map(|a| a.to_string()).collect(),
        env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    );
    tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_coreserve"))
            .args(&args)
            .env_remove("CORESERVE_URL")
            .env_remove("CORESERVE_TOKEN")
            .envs(env)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        (child.wait().unwrap().code().unwrap_or(-1), err)
    })
    .await
    .unwrap()
}

/// Issue 29: the client is safe to script. A closed pipe ends it quietly (exit 0, no panic);
/// no connection stops at once with exit code 6 (a 50-line file, not 50 x 10 s of retries);
/// running the same `plans submit` twice books once (the key is derived from the request);
/// `plans show` / `cancel` take the request id; ids are one path segment each
/// (`../plans?status=committed` reads no other endpoint); `/dev/zero` is refused after 1 MiB;
/// `-o ids`, short flags, completions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_is_safe_to_script() {
    let app = TestApp::spawn().await;
    let token = app.token("alice", false).await;
    let env = [("CORESERVE_URL", app.base.as_str()), ("CORESERVE_TOKEN", token.as_str())];
    let dir = tempfile::tempdir().unwrap();

    // A closed pipe: `coreserve sites | head -0`.
    for args in [&["sites"][..], &["sites", "-o", "json"], &["completions", "bash"]] {
        let (code, err) = coreserve_into_a_closed_pipe(args, &env).await;
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(!err.contains("Broken pipe") && !err.contains("panicked"), "{args:?}: {err}");
    }

    // No connection: exit code 6 at once, for a file of 50 requests too.
    let lines: String = (0..50)
        .map(|i| {
            let mut r = workflow();
            r["id"] = json!(format!("n-{i}"));
            format!("{r}\n")
        })
        .collect();
    let fifty = dir.path().join("fifty.jsonl");
    std::fs::write(&fifty, lines).unwrap();
    let started = std::time::Instant::now();
    let (code, _, err) =
        coreserve(&["plans", "submit", fifty.to_str().unwrap(), "-s", "http://127.0.0.1:1"], &[]).await;
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("cannot connect") && err.contains("refused"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "no retries: {:?}", started.elapsed());
    let (code, _, err) = coreserve(&["plans", "list", "--server", "http://127.0.0.1:1"], &[]).await;
    assert!(code == 6 && err.contains("cannot connect"), "{code} {err}");
    let help = coreserve(&["--help"], &[]).await.1;
    assert!(help.contains("Exit codes") && help.contains("6  no connection") && help.contains("Retries:"), "{help}");

    // The same file twice: one plan (the key is derived from the request's id and body).
    let file = dir.path().join("wf.json");
    std::fs::write(&file, serde_json::to_string_pretty(&workflow()).unwrap()).unwrap();
    let file = file.to_str().unwrap();
    let (code, first, err) = coreserve(&["plans", "submit", file, "-o", "ids"], &env).await;
    assert_eq!(code, 0, "{first}{err}");
    let (code, second, err) = coreserve(&["plans", "submit", file, "-o", "ids"], &env).await;
    assert_eq!(code, 0, "{second}{err}");
    assert_eq!(first, second, "the same plan");
    let id = first.trim().to_owned();
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
    assert_eq!(app.plans(ADMIN, "").await.len(), 1, "booked once");

    // show and cancel by request id; the server filters by request id.
    let (code, out, err) = coreserve(&["plans", "show", "wf-1"], &env).await;
    assert!(code == 0 && out.starts_with(&format!("plan {id}")), "{code} {out}{err}");
    assert_eq!(app.plans(&token, "?request_id=wf-1").await.len(), 1);
    assert!(app.plans(&token, "?request_id=wf-2").await.is_empty());
    let (code, out, _) = coreserve(&["plans", "ls", "-o", "ids", "-r", "wf-1"], &env).await;
    assert_eq!((code, out.trim()), (0, id.as_str()));
    // Not a path: one segment (and no plan has that request id).
    let (code, out, err) = coreserve(&["plans", "show", "../plans?status=committed"], &env).await;
    assert!(code == 4 && out.is_empty() && err.contains("no plan with id or request id"), "{code} {out} {err}");
    let (code, out, err) = coreserve(&["plans", "cancel", "wf-1"], &env).await;
    assert_eq!((code, out.trim()), (0, format!("plan {id} cancelled").as_str()), "{err}");

    // Input read line by line: /dev/zero is refused after 1 MiB, with the line named.
    let started = std::time::Instant::now();
    let (code, _, err) = coreserve(&["plans", "submit", "/dev/zero"], &env).await;
    assert!(code == 1 && err.contains("line 1") && err.contains("longer than"), "{code} {err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, format!("{}\nnot json\n", workflow())).unwrap();
    let (code, _, err) = coreserve(&["plans", "submit", bad.to_str().unwrap()], &env).await;
    assert!(code == 1 && err.contains("line 2: not JSON"), "{code} {err}");

    // Completions.
    let (code, out, _) = coreserve(&["completions", "bash"], &[]).await;
    assert!(code == 0 && out.contains("complete -F") && out.contains("availability"), "{out}");
}

/// Issue 29: `plans create` books from flags (relative times), prints the plan and the
/// timeline's URL, and the same command again shows the plan instead of booking twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_create_books_from_flags_once() {
    let app = TestApp::spawn().await;
    let token = app.token("alice", false).await;
    let env = [("CORESERVE_URL", app.base.as_str()), ("CORESERVE_TOKEN", token.as_str())];
    let args = ["plans", "create", "-j", "sim:8:1h", "-j", "post:4:30m", "-T", "sim:post:100:10m", "--start", "now+2h"];
    let (code, out, err) = coreserve(&args, &env).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("COMMITTED") && out.contains("sim -> post"), "{out}");
    assert!(err.contains("/ui#plan="), "the timeline's URL: {err}");
    let plans = app.plans(ADMIN, "").await;
    assert_eq!(plans.len(), 1);
    let start: DateTime<Utc> = plans[0]["jobs"][0]["start"].as_str().unwrap().parse().unwrap();
    assert!(start >= Utc::now() + chrono::Duration::minutes(115), "--start now+2h: {start}");
    // Every time is 24-hour UTC: `HH:MM`, no am/pm.
    assert!(!out.contains("AM") && !out.contains("PM") && out.contains("start (UTC)"), "{out}");
    let (code, again, err) = coreserve(&args, &env).await;
    assert_eq!(code, 0, "{again}{err}");
    assert!(err.contains("already booked") && again.contains(plans[0]["id"].as_str().unwrap()), "{again}{err}");
    assert_eq!(app.plans(ADMIN, "").await.len(), 1, "booked once");
    let (code, _, err) = coreserve(&["plans", "create", "-c", "4", "--start", "2030-01-01T00:00:00"], &env).await;
    assert!(code == 1 && err.contains("naive timestamp"), "{code} {err}");
}

/// Issue 29: every deserialisation failure of the API says which field, what it takes and an
/// example, in the user's words: no "Path deserialize error", "Query deserialize error",
/// "UUID parsing failed" or "premature end of input".
#[tokio::test]
async fn deserialisation_failures_name_the_field_in_the_users_words() {
    let app = TestApp::spawn().await;
    let framework = ["deserialize error", "UUID parsing failed", "premature end of input", "invalid digit"];
    let words = |p: &Value| {
        let d = p["detail"].as_str().unwrap().to_owned();
        assert!(!framework.iter().any(|f| d.contains(f)), "framework wording: {d}");
        d
    };
    // Path.
    let p = problem(app.get("/v1/plans/wf-1", ADMIN).await, StatusCode::NOT_FOUND).await;
    let d = words(&p);
    assert!(
        d.contains("`wf-1` is not a plan id") && d.contains("UUID such as") && d.contains("request_id=wf-1"),
        "{d}"
    );
    let p = problem(app.post_empty("/v1/holds/nope/commit", ADMIN).await, StatusCode::NOT_FOUND).await;
    assert!(words(&p).contains("`nope` is not a hold id"), "{p}");
    // Query: a missing parameter, a naive timestamp, a number that is not one.
    let p = problem(app.get("/v1/sites/s1/availability?to=2030-01-01T00:00:00Z", ADMIN).await, StatusCode::BAD_REQUEST)
        .await;
    let d = words(&p);
    assert!(d.contains("`from` is missing") && d.contains("e.g. 2030-01-01T12:00:00Z"), "{d}");
    let q = format!("/v1/sites/s1/availability?from=2026-11-27T00:00:00&to={}&cpus=1&duration_s=60", in_hours(2));
    let d = words(&problem(app.get(&q, ADMIN).await, StatusCode::BAD_REQUEST).await);
    assert!(
        d.contains("`from` = `2026-11-27T00:00:00` is a naive timestamp") && d.contains("2026-11-27T00:00:00Z"),
        "{d}"
    );
    let q = format!("/v1/sites/s1/availability?from={}&to={}&cpus=many&duration_s=60", in_hours(1), in_hours(2));
    let d = words(&problem(app.get(&q, ADMIN).await, StatusCode::BAD_REQUEST).await);
    assert!(d.contains("`cpus` = `many`") && d.contains("e.g. 16"), "{d}");
    let d = words(&problem(app.get("/v1/plans?from=yesterday", ADMIN).await, StatusCode::BAD_REQUEST).await);
    assert!(d.contains("`from` = `yesterday` is not a timestamp"), "{d}");
    // Body: a naive deadline (422), a wrong type deep inside, a bad enum value.
    let mut naive = workflow();
    naive["deadline"] = json!("2026-11-27T00:00:00");
    let d = words(&problem(app.post("/v1/plans", ADMIN, &naive).await, StatusCode::UNPROCESSABLE_ENTITY).await);
    assert!(d.contains("`deadline` = `2026-11-27T00:00:00` is a naive timestamp") && d.contains("add `Z`"), "{d}");
    let mut wrong = workflow();
    wrong["jobs"][1]["cpus"] = json!("twelve");
    let d = words(&problem(app.post("/v1/plans", ADMIN, &wrong).await, StatusCode::UNPROCESSABLE_ENTITY).await);
    assert!(d.contains("`jobs[1].cpus`: expected a whole number of CPUs, e.g. 16"), "{d}");
    let mut policy = workflow();
    policy["policy"] = json!("fastest");
    let d = words(&problem(app.post("/v1/plans", ADMIN, &policy).await, StatusCode::UNPROCESSABLE_ENTITY).await);
    assert!(d.contains("`policy` = `fastest` is not valid") && d.contains("time"), "{d}");
    let mut missing = workflow();
    missing["transfers"][0].as_object_mut().unwrap().remove("bandwidth_mbps");
    let d = words(&problem(app.post("/v1/plans", ADMIN, &missing).await, StatusCode::UNPROCESSABLE_ENTITY).await);
    assert!(d.contains("`transfers[0].bandwidth_mbps` is missing"), "{d}");
    assert!(app.plans(ADMIN, "").await.is_empty());
}

/// Issue 29: availability answers no start before now + the W interval (60 s here), and more
/// CPUs than the site has is 422 naming its size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn availability_starts_after_the_w_interval_and_knows_the_sites_size() {
    let app = TestApp::spawn().await;
    let before = Utc::now();
    let q = format!("/v1/sites/s1/availability?from={}&to={}&cpus=4&duration_s=60", ts(before), in_hours(2));
    let a: Value = app.get(&q, ADMIN).await.json().await.unwrap();
    let earliest: DateTime<Utc> = a["earliest_start"].as_str().unwrap().parse().unwrap();
    assert!(earliest >= before + chrono::Duration::seconds(59), "not before now + w_interval: {a}");
    let q = format!("/v1/sites/s1/availability?from={}&to={}&cpus=100000&duration_s=60", ts(before), in_hours(2));
    let d = problem(app.get(&q, ADMIN).await, StatusCode::UNPROCESSABLE_ENTITY).await["detail"].to_string();
    assert!(d.contains("has 16 CPUs"), "{d}");
    let env = [("CORESERVE_URL", app.base.as_str()), ("CORESERVE_TOKEN", ADMIN)];
    let (code, _, err) = coreserve(&["availability", "s1", "-c", "100000", "-d", "1h"], &env).await;
    assert!(code == 4 && err.contains("has 16 CPUs"), "{code} {err}");
    let (code, out, _) = coreserve(&["availability", "s1", "-c", "4", "-d", "1h"], &env).await;
    assert!(code == 0 && out.contains(" UTC;"), "{out}");
}

/// Issue 29: `route` prints its price rounded (three links at 0.1 are 0.3, not
/// 0.30000000000000004).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_prints_prices_rounded() {
    let grid: coreserve::model::Grid = serde_json::from_value(json!({
        "nodes": [{"id": "n1"}, {"id": "n2"}, {"id": "n3"}, {"id": "n4"}],
        "links": [
            {"id": "l1", "a": "n1", "b": "n2", "capacity_mbps": 1000, "price_per_gbps_hour": 0.1},
            {"id": "l2", "a": "n2", "b": "n3", "capacity_mbps": 1000, "price_per_gbps_hour": 0.1},
            {"id": "l3", "a": "n3", "b": "n4", "capacity_mbps": 1000, "price_per_gbps_hour": 0.1}
        ],
        "sites": [
            {"id": "a", "node": "n1", "cpus": 4, "os": "linux", "price_per_cpu_hour": 1.0},
            {"id": "b", "node": "n4", "cpus": 4, "os": "linux", "price_per_cpu_hour": 1.0}
        ]
    }))
    .unwrap();
    let app = TestApp::memory(grid, |_| {}).await;
    let env = [("CORESERVE_URL", app.base.as_str()), ("CORESERVE_TOKEN", ADMIN)];
    let (code, out, err) = coreserve(&["route", "a", "b", "-b", "100"], &env).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("l1 l2 l3") && out.contains(", 0.3 per Gbit/s-hour"), "{out}");
    let (code, out, _) = coreserve(&["route", "a", "b", "-b", "100", "-o", "ids"], &env).await;
    assert_eq!((code, out.as_str()), (0, "l1\nl2\nl3\n"));
}

/// Issue 29: `workload` without `--start` writes requests a running broker accepts (the first
/// arrival after now + the W interval), so its file can go to `plans submit` as the README
/// says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_starts_after_now_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.json");
    std::fs::write(&grid, serde_json::to_string(&support::grid()).unwrap()).unwrap();
    let out = dir.path().join("r.jsonl");
    let trace = concat!(env!("CARGO_MANIFEST_DIR"), "/data/swf/SDSC-BLUE-2000-4.2-cln.swf.gz");
    let before = Utc::now();
    let args = ["workload", "--trace", trace, "--grid", grid.to_str().unwrap(), "--requests", "3", "--out"];
    let (code, o, err) = coreserve(&[&args[..], &[out.to_str().unwrap()]].concat(), &[]).await;
    assert_eq!(code, 0, "{o}{err}");
    let first: Value = serde_json::from_str(std::fs::read_to_string(&out).unwrap().lines().next().unwrap()).unwrap();
    let at: DateTime<Utc> = first["submitted_at"].as_str().unwrap().parse().unwrap();
    assert!(at >= before + chrono::Duration::seconds(1800), "after now + w_interval: {at}");
    assert!(at <= before + chrono::Duration::seconds(1800 + 700), "{at}");
}

/// A TCP proxy to 127.0.0.1:`target` that stops forwarding (holds every byte) while its flag
/// is set: a PostgreSQL that hangs, as when its host is gone. (port, flag)
async fn pausable_proxy(target: u16) -> (u16, Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let paused = Arc::new(AtomicBool::new(false));
    let flag = paused.clone();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let flag = flag.clone();
            tokio::spawn(async move {
                let Ok(outbound) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await else { return };
                let ((ri, wi), (ro, wo)) = (inbound.into_split(), outbound.into_split());
                async fn pipe(
                    mut r: tokio::net::tcp::OwnedReadHalf,
                    mut w: tokio::net::tcp::OwnedWriteHalf,
                    paused: Arc<AtomicBool>,
                ) {
                    let mut buf = vec![0u8; 16 * 1024];
                    while let Ok(n @ 1..) = r.read(&mut buf).await {
                        while paused.load(Ordering::SeqCst) {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        if w.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                }
                tokio::join!(pipe(ri, wo, flag.clone()), pipe(ro, wi, flag));
            });
        }
    });
    (port, paused)
}

/// Issue 29: `/readyz` answers 503 within about a second while PostgreSQL does not answer
/// (load balancers' probes time out after a few seconds; the pool would wait 10 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_answers_within_a_second_while_postgres_hangs() {
    use sqlx::ConnectOptions;
    let db = support::TestDb::new().await;
    let options: sqlx::postgres::PgConnectOptions = db.url.parse().unwrap();
    let (port, paused) = pausable_proxy(options.get_port()).await;
    let proxied = options.host("127.0.0.1").port(port).to_url_lossy().to_string();
    let app = TestApp::on_database(&proxied, |_| {}).await;
    assert_eq!(app.call(Method::GET, "/readyz", None, None).await.status(), StatusCode::OK);
    paused.store(true, std::sync::atomic::Ordering::SeqCst);
    let started = std::time::Instant::now();
    let r = app.call(Method::GET, "/readyz", None, None).await;
    let took = started.elapsed();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(took < Duration::from_millis(2500), "answered after {took:?}");
    let p = problem(r, StatusCode::SERVICE_UNAVAILABLE).await;
    assert!(p["detail"].as_str().unwrap().contains("within 1 s"), "{p}");
    paused.store(false, std::sync::atomic::Ordering::SeqCst);
}

/// Issue 29: text logs carry no ANSI colours when stderr is not a terminal, and at `info`
/// every request is one access-log line (method, path, status).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_logs_are_plain_off_a_terminal_with_one_line_per_request() {
    use std::io::BufRead;
    // Its reqwest client is the test's first when run alone.
    coreserve::protocol::http::install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.json");
    std::fs::write(&grid, serde_json::to_string(&support::grid()).unwrap()).unwrap();
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_coreserve"))
        .args([
            "serve",
            "--grid",
            grid.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--admin-token",
            "log-admin-token-0123",
        ])
        .env("RUST_LOG", "info")
        .env_remove("DATABASE_URL")
        .env_remove("CORESERVE_LOG_FORMAT")
        .env_remove("CORESERVE_CONFIG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let child = Killed(child);
    // Every stderr line, as it comes.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    let mut until = |done: &dyn Fn(&str) -> bool| loop {
        let line = rx.recv_timeout(Duration::from_secs(60)).expect("a line of serve's stderr");
        lines.push(line.clone());
        if done(&line) {
            return line;
        }
    };
    let started = until(&|l| l.contains("http://"));
    let base = started.split_whitespace().find(|w| w.starts_with("http://")).unwrap().to_owned();
    assert_eq!(Client::new().get(format!("{base}/healthz")).send().await.unwrap().status(), StatusCode::OK);
    // The access-log line comes (or the wait fails).
    until(&|l| l.contains("/healthz"));
    drop(child);
    let access = lines.last().unwrap();
    assert!(access.contains("INFO") && access.contains("status=200"), "an access-log line: {access}");
    assert!(lines.iter().all(|l| !l.contains('\u{1b}')), "no ANSI escapes: {lines:?}");
}

/// `serve --config FILE`: the file's settings apply; the environment wins over the file and the
/// command line over both; `log_format = "json"` writes one JSON object per stderr line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_reads_a_config_file_below_the_environment_and_the_command_line() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.json");
    std::fs::write(&grid, serde_json::to_string(&support::grid()).unwrap()).unwrap();
    let config = dir.path().join("coreserve.toml");
    std::fs::write(
        &config,
        format!(
            "grid = {:?}\nlisten = \"127.0.0.1:1\"\nadmin_token = \"file-admin-token-1\"\nhorizon_days = 30\nw_interval_s = 60\nlog_format = \"json\"\nplanners = 2\n",
            grid.to_str().unwrap()
        ),
    )
    .unwrap();
    coreserve::protocol::http::install_crypto_provider();
    /// Kills the server also when an assertion fails.
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_coreserve"))
        .args(["serve", "--config", config.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .env("CORESERVE_HORIZON_DAYS", "2")
        .env("RUST_LOG", "info")
        .env_remove("DATABASE_URL")
        .env_remove("CORESERVE_ADMIN_TOKEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let child = Killed(child);
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://")) {
                let _ = tx.send(url.trim_end_matches(['"', ',']).to_string());
            }
            lines.push(line);
        }
        lines
    });
    let base = rx.recv_timeout(Duration::from_secs(60)).expect("serve started");
    let client = Client::new();
    let get = |token: &'static str| client.get(format!("{base}/v1/plans")).bearer_auth(token).send();
    assert_eq!(get("file-admin-token-1").await.unwrap().status(), StatusCode::OK, "the file's admin token");
    let mut body = workflow();
    body["deadline"] = json!(in_hours(24 * 10));
    let r = client
        .post(format!("{base}/v1/plans?dry_run=true"))
        .bearer_auth("file-admin-token-1")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "10 days is beyond the environment's 2-day horizon (the file says 30)"
    );
    drop(child);
    let lines = reader.join().unwrap();
    assert!(lines.len() >= 2, "{lines:?}");
    for line in lines.iter().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
        assert!(v["level"].is_string() && v["timestamp"].is_string(), "{line}");
    }

    // An unknown key is refused before anything starts, by name.
    std::fs::write(&config, "listn = \"127.0.0.1:0\"\n").unwrap();
    let (code, _, err) = coreserve(&["serve", "--config", config.to_str().unwrap()], &[]).await;
    assert!(code == 2 && err.contains("unknown setting `listn`"), "{code} {err}");
}

/// Planned-Use fair share over REST: an admin sets a project's allocation; its member's plans
/// are charged to it, the plan that would go past it is rejected (`allocation exceeded`) and
/// books nothing, a cancellation gives the hours back, the usage report shows booked against
/// allocated with the paper's quantities, and a restarted broker finds the allocation and the
/// usage in PostgreSQL. Bad allocations are 422 and change nothing; only admins set them and
/// only members and admins read them.
#[tokio::test]
async fn a_project_cannot_book_past_its_allocation_and_its_usage_is_reported() {
    let app = TestApp::spawn().await;
    let alice = app.token("alice", false).await;
    let bob = app.token("bob", false).await;
    let period_start = (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339();
    let lab = json!({"allocation": {"cpu_hours": 30.0, "period_s": 2_592_000, "period_start": period_start}, "members": ["alice"]});
    let put = |token: &str, body: &Value| {
        app.client.put(format!("{}/v1/projects/lab", app.base)).bearer_auth(token.to_owned()).json(body).send()
    };
    assert_eq!(put(&alice, &lab).await.unwrap().status(), StatusCode::FORBIDDEN);
    for bad in [
        json!({"allocation": {"cpu_hours": -1.0}}),
        json!({"allocation": {"cpu_hours": 1.0, "period_s": 0}}),
        json!({"allocation": {"cpu_hours": 1.0}, "extra": 1}),
    ] {
        assert_eq!(put(ADMIN, &bad).await.unwrap().status(), StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    }
    assert_eq!(
        app.get("/v1/projects/lab", ADMIN).await.status(),
        StatusCode::NOT_FOUND,
        "the bad ones changed nothing"
    );
    assert_eq!(put(ADMIN, &lab).await.unwrap().status(), StatusCode::OK);

    // 24 CPU-hours of 30: committed. The next 24 would make 48: rejected, nothing booked.
    let plan = |id: &str| {
        let mut b = workflow();
        b["id"] = json!(id);
        b
    };
    let first: Value = app.post("/v1/plans", &alice, &plan("wf-1")).await.json().await.unwrap();
    assert_eq!(first["status"], "committed", "{first}");
    let held = app.reservations("s1").await.len() + app.reservations("s2").await.len();
    let second: Value = app.post("/v1/plans", &alice, &plan("wf-2")).await.json().await.unwrap();
    assert_eq!(second["status"], "rejected", "{second}");
    assert!(second["reason"].as_str().unwrap().starts_with("allocation exceeded: project `lab`"), "{second}");
    assert_eq!(
        app.reservations("s1").await.len() + app.reservations("s2").await.len(),
        held,
        "the rejected plan holds nothing"
    );
    // bob is a project of his own, without an allocation: not limited.
    let bobs: Value = app.post("/v1/plans", &bob, &plan("wf-b")).await.json().await.unwrap();
    assert_eq!(bobs["status"], "committed", "{bobs}");

    let usage: Value = app.get("/v1/projects/lab/usage", &alice).await.json().await.unwrap();
    assert_eq!(
        (usage["booked_cpu_hours"].as_f64(), usage["allocated_cpu_hours"].as_f64()),
        (Some(24.0), Some(30.0)),
        "{usage}"
    );
    assert_eq!(usage["priority"], 0.0, "booked in advance, not used yet: {usage}");
    assert_eq!(usage["usage_index"], 0.0, "{usage}");
    assert!(usage["entitled_cpus"].as_f64().unwrap() > 0.0, "{usage}");
    assert_eq!(app.get("/v1/projects/lab/usage", &bob).await.status(), StatusCode::FORBIDDEN);
    let bob_usage: Value = app.get("/v1/projects/bob/usage", &bob).await.json().await.unwrap();
    assert_eq!(
        (bob_usage["booked_cpu_hours"].as_f64(), bob_usage["entitled_cpus"].as_f64()),
        (Some(24.0), Some(0.0)),
        "{bob_usage}"
    );

    // A restarted broker has the allocation and the usage: still no room for 24 more.
    let again = app.restarted().await;
    let u: Value = again.get("/v1/projects/lab/usage", ADMIN).await.json().await.unwrap();
    assert_eq!(u["booked_cpu_hours"].as_f64(), Some(24.0), "{u}");
    let third: Value = again.post("/v1/plans", &alice, &plan("wf-3")).await.json().await.unwrap();
    assert_eq!(third["status"], "rejected", "{third}");

    // Cancelling gives the hours back.
    let id = first["id"].as_str().unwrap();
    let r = again.client.delete(format!("{}/v1/plans/{id}", again.base)).bearer_auth(&alice).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let fourth: Value = again.post("/v1/plans", &alice, &plan("wf-4")).await.json().await.unwrap();
    assert_eq!(fourth["status"], "committed", "{fourth}");
    let projects: Value = again.get("/v1/projects", ADMIN).await.json().await.unwrap();
    assert_eq!(projects[0]["members"], json!(["alice"]), "{projects}");
}
