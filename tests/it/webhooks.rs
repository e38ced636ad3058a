//! Webhooks (`/v1/webhooks`): a receiver in the test verifies every delivery's signature, sees
//! every event of its owner's plans at least once across an outage of its own and a `kill -9`
//! of the service, and de-duplicates by event id; another user's events never reach it; a
//! webhook failing for too long is disabled; bad input is refused.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use chrono::Utc;
use coreserve::api::webhooks::{verify, EVENT_ID_HEADER, SIGNATURE_HEADER};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::support::serve::{Server, ADMIN};
use crate::support::{in_hours, machine, problem, ts, ApiClient, TestApp, TestDb};

/// What the receiver saw.
#[derive(Default)]
struct Seen {
    /// The secret deliveries must be signed with (known once the webhook is made).
    secret: String,
    /// Every delivery: (event id from the header, the body's id, the body's user, the
    /// signature verifies with the secret, it verifies with a wrong secret, answered 2xx).
    deliveries: Vec<(i64, i64, String, bool, bool, bool)>,
    /// Answer 503 while true (an outage of the receiver's application).
    failing: bool,
}

/// A webhook receiver on 127.0.0.1 (a real HTTP server): its URL and what it saw.
async fn receiver() -> (String, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let data = web::Data::from(seen.clone());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let server = HttpServer::new(move || {
        App::new().app_data(data.clone()).route(
            "/hook",
            web::post().to(|seen: web::Data<Mutex<Seen>>, req: HttpRequest, body: web::Bytes| async move {
                let mut s = seen.lock().unwrap();
                let header =
                    |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                let ok = verify(&s.secret, &header(SIGNATURE_HEADER), &body, Utc::now(), 300);
                let wrong = verify("not-the-secret-0123", &header(SIGNATURE_HEADER), &body, Utc::now(), 300);
                let v: Value = serde_json::from_slice(&body).unwrap_or_default();
                let id = header(EVENT_ID_HEADER).parse().unwrap_or(-1);
                let user = v["user"].as_str().unwrap_or("").to_owned();
                let acknowledged = !s.failing;
                s.deliveries.push((id, v["id"].as_i64().unwrap_or(-2), user, ok, wrong, acknowledged));
                if s.failing {
                    HttpResponse::ServiceUnavailable().finish()
                } else {
                    HttpResponse::NoContent().finish()
                }
            }),
        )
    })
    .workers(1)
    .listen(listener)
    .unwrap()
    .run();
    tokio::spawn(server);
    (url, seen)
}

fn plan(id: &str, offset_s: i64) -> Value {
    json!({
        "id": id,
        "deadline": in_hours(6),
        "not_before": ts(Utc::now() + chrono::Duration::seconds(offset_s)),
        "jobs": [{"name": "A", "os": "linux", "cpus": 2, "offset_s": 0, "duration_s": 600}],
        "transfers": []
    })
}

async fn token(api: &ApiClient, admin: &str, user: &str) -> String {
    let r = api.post("/v1/tokens", admin, &json!({"user": user})).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    r.json::<Value>().await.unwrap()["token"].as_str().unwrap().to_owned()
}

/// Alice's events, as the log has them (SSE from the start, read until `n` came).
async fn events_of(api: &ApiClient, token: &str, n: usize) -> Vec<i64> {
    let mut r = api
        .client
        .get(format!("{}/v1/events", api.base))
        .bearer_auth(token)
        .header("Last-Event-ID", "0")
        .send()
        .await
        .unwrap();
    let (mut ids, mut buf) = (Vec::new(), String::new());
    while ids.len() < n {
        let Ok(Ok(Some(c))) = tokio::time::timeout(Duration::from_secs(10), r.chunk()).await else { break };
        buf.push_str(std::str::from_utf8(&c).unwrap());
        while let Some(i) = buf.find("\n\n") {
            let block: String = buf.drain(..i + 2).collect();
            ids.extend(block.lines().find_map(|l| l.strip_prefix("id: ")).map(|v| v.parse::<i64>().unwrap()));
        }
    }
    ids
}

/// Waits until the receiver acknowledged (answered 2xx to) every one of `want`.
async fn until_delivered(seen: &Mutex<Seen>, want: &BTreeSet<i64>) {
    for _ in 0..300 {
        let got: BTreeSet<i64> = seen.lock().unwrap().deliveries.iter().filter(|d| d.5).map(|d| d.0).collect();
        if want.is_subset(&got) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("not delivered: {want:?}, got {:?}", seen.lock().unwrap().deliveries);
}

/// Issue 25: every event of Alice's plans reaches her webhook at least once, signed, in order
/// of first delivery, across a 503 outage of the receiver and a `kill -9` of the service; the
/// receiver de-duplicates by id; Bob's events never come; the delivery log shows the failures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_reaches_the_webhook_signed_across_outages_and_a_kill_9() {
    let _machine = machine::reserve("crash").await;
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.json");
    std::fs::write(&grid, serde_json::to_string(&crate::support::grid()).unwrap()).unwrap();
    // The receiver is on 127.0.0.1: allowed explicitly, as an admin allows an in-house one.
    let args = ["--w-interval-s", "1", "--webhook-retry-base-ms", "200", "--webhook-allow", "127.0.0.1"];
    let server = Server::start(&db.url, Some(&grid), &args, None);
    let api = server.api();
    let (alice, bob) = (token(&api, ADMIN, "alice").await, token(&api, ADMIN, "bob").await);
    let (url, seen) = receiver().await;

    let r = api.post("/v1/webhooks", &alice, &json!({"url": url})).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let hook: Value = r.json().await.unwrap();
    let secret = hook["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{hook}");
    seen.lock().unwrap().secret = secret;
    let hook_id = hook["id"].as_str().unwrap().to_owned();

    // Two plans of Alice's, one of Bob's.
    let p1 = api.post("/v1/plans", &alice, &plan("p1", 3600)).await.json::<Value>().await.unwrap();
    api.post("/v1/plans", &alice, &plan("p2", 7200)).await;
    api.post("/v1/plans", &bob, &plan("b1", 3600)).await;
    until_delivered(&seen, &events_of(&api, &alice, 2).await.into_iter().collect()).await;

    // The receiver fails for 2 s: the cancel's event is retried until it is acknowledged.
    seen.lock().unwrap().failing = true;
    assert_eq!(api.delete(&format!("/v1/plans/{}", p1["id"].as_str().unwrap()), &alice).await.status(), 200);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let failed = seen.lock().unwrap().deliveries.len();
    seen.lock().unwrap().failing = false;
    until_delivered(&seen, &events_of(&api, &alice, 3).await.into_iter().collect()).await;
    let log: Vec<Value> =
        api.json(&format!("/v1/webhooks/{hook_id}/deliveries"), &alice).await.as_array().unwrap().clone();
    assert!(log.iter().any(|d| d["status_code"] == 503 && d["error"].is_string()), "{log:?}");
    assert!(log[0]["error"].is_null() && log[0]["status_code"] == 204, "newest first, delivered: {log:?}");
    assert!(failed >= 3, "retried while failing (backoff 200 ms doubling): {failed}");

    // kill -9, restart: what comes after is delivered by the new process.
    server.kill();
    let server = Server::start(&db.url, None, &args, None);
    let api = server.api();
    api.post("/v1/plans", &alice, &plan("p3", 3600)).await;
    let all = events_of(&api, &alice, 4).await;
    assert_eq!(all.len(), 4, "p1 committed, p2 committed, p1 cancelled, p3 committed: {all:?}");
    until_delivered(&seen, &all.iter().copied().collect()).await;

    let deliveries = seen.lock().unwrap().deliveries.clone();
    let s = Seen { deliveries, ..Seen::default() };
    assert!(
        s.deliveries.iter().all(|d| d.3 && !d.4),
        "every signature verifies, with the secret only: {:?}",
        s.deliveries
    );
    assert!(s.deliveries.iter().all(|d| d.0 == d.1 && d.2 == "alice"), "Alice's own, id in header and body");
    // De-duplicated by id, in the order first delivered: exactly the log's events, in order.
    let mut first = Vec::new();
    for d in &s.deliveries {
        if !first.contains(&d.0) {
            first.push(d.0);
        }
    }
    assert_eq!(first, all);
    // The receiver saw the last event before the service read its 2xx and recorded it.
    let mut w = Value::Null;
    for _ in 0..100 {
        w = api.json(&format!("/v1/webhooks/{hook_id}"), &alice).await;
        if w["delivered_through"] == *all.last().unwrap() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!((w["enabled"].as_bool(), w["failures"].as_i64()), (Some(true), Some(0)), "{w}");
    assert_eq!(w["delivered_through"], *all.last().unwrap(), "{w}");
    assert!(w.get("secret").is_none(), "the secret is shown once: {w}");
}

/// A webhook whose receiver keeps failing is disabled after `--webhook-disable-after-s`;
/// another user's webhook is 403; bad URLs and secrets are 422; delete stops it.
#[tokio::test]
async fn a_failing_webhook_is_disabled_and_bad_input_is_refused() {
    let app = TestApp::memory(crate::support::grid(), |c| {
        c.w_interval_s = 1;
        c.webhook_retry_base_ms = 100;
        c.webhook_disable_after_s = 1;
        c.webhook_allow = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    let admin = crate::support::ADMIN;
    let (alice, bob) = (app.token("alice", false).await, app.token("bob", false).await);
    for bad in [
        json!({"url": "ftp://example.org/x"}),
        json!({"url": "nats://127.0.0.1:4222/"}),
        json!({"url": "nats://127.0.0.1:4222/a..b"}),
        json!({"url": "nats://127.0.0.1:4222/events.>"}),
        json!({"url": "not a url"}),
        json!({"url": "http://"}),
        json!({"url": format!("https://example.org/{}", "a".repeat(2100))}),
        json!({"url": "https://example.org/x", "secret": "short"}),
        json!({"url": "https://example.org/x", "secret": "has spaces in it, sixteen+"}),
        json!({"url": "https://example.org/x", "extra": 1}),
    ] {
        let r = app.post("/v1/webhooks", &alice, &bad).await;
        assert!(r.status().is_client_error(), "{bad}: {}", r.status());
    }
    assert!(app.json("/v1/webhooks", &alice).await.as_array().unwrap().is_empty(), "nothing made");

    let (url, seen) = receiver().await;
    seen.lock().unwrap().failing = true;
    let hook: Value = app
        .post("/v1/webhooks", &alice, &json!({"url": url, "secret": "a-secret-of-my-own"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(hook["secret"], "a-secret-of-my-own");
    seen.lock().unwrap().secret = "a-secret-of-my-own".into();
    let id = hook["id"].as_str().unwrap().to_owned();
    let r = app.get(&format!("/v1/webhooks/{id}"), &bob).await;
    problem(r, StatusCode::FORBIDDEN).await;
    assert!(app.json("/v1/webhooks", &bob).await.as_array().unwrap().is_empty());
    assert_eq!(app.json("/v1/webhooks", admin).await.as_array().unwrap().len(), 1, "an admin sees all");

    app.post("/v1/plans", &alice, &plan("x", 3600)).await;
    let mut w = Value::Null;
    for _ in 0..100 {
        w = app.json(&format!("/v1/webhooks/{id}"), &alice).await;
        if w["enabled"] == false {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(w["enabled"], false, "{w}");
    assert!(w["last_error"].as_str().unwrap().contains("503"), "{w}");
    assert!(w["failures"].as_i64().unwrap() >= 2, "{w}");
    let tried = seen.lock().unwrap().deliveries.len();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(seen.lock().unwrap().deliveries.len(), tried, "a disabled webhook gets nothing");
    assert!(seen.lock().unwrap().deliveries.iter().all(|d| d.3), "signed with the given secret");

    let r = app.delete(&format!("/v1/webhooks/{id}"), &bob).await;
    problem(r, StatusCode::FORBIDDEN).await;
    assert_eq!(app.delete(&format!("/v1/webhooks/{id}"), &alice).await.status(), StatusCode::NO_CONTENT);
    let r = app.get(&format!("/v1/webhooks/{id}"), &alice).await;
    problem(r, StatusCode::NOT_FOUND).await;
}

/// Issue 25 (a bus for operators): a `nats://host:port/<subject>` webhook publishes every event
/// of its owner's plans to NATS JetStream on `<subject>.<type>`, with the event id as
/// `Nats-Msg-Id` and the webhook's signature in the headers. Before a stream captures the
/// subject, each publish fails ("no responders") and is retried with backoff and logged; once
/// one does, every event is in it, in order, once (a re-send is dropped by the stream).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_webhook_publishes_every_event_to_jetstream_signed_and_in_order() {
    // .ci/test points CORESERVE_TEST_NATS at the machine's NATS or a throwaway one.
    let address = std::env::var("CORESERVE_TEST_NATS").unwrap_or_else(|_| "127.0.0.1:4222".into());
    let nats = async_nats::connect(address.as_str())
        .await
        .unwrap_or_else(|e| panic!("NATS with JetStream at {address} (CORESERVE_TEST_NATS; .ci/test starts one): {e}"));
    let js = async_nats::jetstream::new(nats);
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let subject = format!("cs{tag}");

    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.json");
    std::fs::write(&grid, serde_json::to_string(&crate::support::grid()).unwrap()).unwrap();
    // The NATS server is an in-house one: allowed explicitly.
    let nats_host = address.rsplit_once(':').map_or(address.as_str(), |(h, _)| h).to_owned();
    let args = ["--webhook-retry-base-ms", "200", "--webhook-allow", nats_host.as_str()];
    let server = Server::start(&db.url, Some(&grid), &args, None);
    let api = server.api();
    let alice = token(&api, ADMIN, "alice").await;
    let bob = token(&api, ADMIN, "bob").await;
    let r = api.post("/v1/webhooks", &alice, &json!({"url": format!("nats://{address}/{subject}")})).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let hook: Value = r.json().await.unwrap();
    let (hook_id, secret) = (hook["id"].as_str().unwrap().to_owned(), hook["secret"].as_str().unwrap().to_owned());

    let p1 = api.post("/v1/plans", &alice, &plan("n1", 3600)).await.json::<Value>().await.unwrap();
    api.post("/v1/plans", &bob, &plan("theirs", 3600)).await;
    // No stream yet: the publish is refused, logged and retried.
    let mut refused = false;
    for _ in 0..100 {
        let log = api.json(&format!("/v1/webhooks/{hook_id}/deliveries"), &alice).await;
        if log.as_array().unwrap().iter().any(|d| d["error"].is_string()) {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(refused, "a publish no stream takes is a failed delivery");

    let name = format!("CS{tag}");
    let config = async_nats::jetstream::stream::Config {
        name: name.clone(),
        subjects: vec![format!("{subject}.>")],
        ..Default::default()
    };
    let mut stream = js.create_stream(config).await.unwrap();
    api.post("/v1/plans", &alice, &plan("n2", 7200)).await;
    assert_eq!(api.delete(&format!("/v1/plans/{}", p1["id"].as_str().unwrap()), &alice).await.status(), 200);
    let want = events_of(&api, &alice, 3).await;
    assert_eq!(want.len(), 3);
    let mut messages = 0;
    for _ in 0..200 {
        messages = stream.info().await.unwrap().state.messages;
        if messages >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(stream.info().await.unwrap().state.messages, 3, "every event once: {messages}");
    let mut kinds = Vec::new();
    for (seq, want_id) in (1..=3u64).zip(&want) {
        let m = stream.get_raw_message(seq).await.unwrap();
        let header = |k: &str| m.headers.get(k).map(|v| v.as_str().to_owned()).unwrap_or_default();
        let body: Value = serde_json::from_slice(&m.payload).unwrap();
        assert_eq!(header("Nats-Msg-Id"), want_id.to_string());
        assert_eq!(header(EVENT_ID_HEADER), want_id.to_string());
        assert_eq!(body["id"], *want_id);
        assert_eq!(body["user"], "alice", "only the owner's events");
        assert_eq!(m.subject.as_str(), format!("{subject}.{}", body["type"].as_str().unwrap()));
        assert!(verify(&secret, &header(SIGNATURE_HEADER), &m.payload, Utc::now(), 300), "signed");
        assert!(!verify("not-the-secret-0123", &header(SIGNATURE_HEADER), &m.payload, Utc::now(), 300));
        kinds.push(body["type"].as_str().unwrap().to_owned());
    }
    assert_eq!(kinds, ["plan.committed", "plan.committed", "plan.cancelled"]);
    js.delete_stream(&name).await.unwrap();
}

/// Issue 49 (SSRF): with no `--webhook-allow`, a webhook whose destination is, or resolves to,
/// an address inside (loopback, private, link-local, unique-local, multicast, unspecified; in
/// every spelling: decimal and hex IPv4, IPv4-mapped IPv6, `localhost`; `nats://` too) is
/// refused at registration with a 422 naming the reason, and nothing is made.
#[tokio::test]
async fn destinations_inside_the_network_are_refused_at_registration() {
    let app = TestApp::memory(crate::support::grid(), |_| {}).await;
    let alice = app.token("alice", false).await;
    for (url, kind) in [
        ("http://127.0.0.1:5432/", "loopback"),
        ("http://2130706433/", "loopback"),
        ("http://0x7f.0.0.1/", "loopback"),
        ("http://127.1/", "loopback"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://[::1]/", "loopback"),
        ("http://[::]/", "unspecified"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),
        ("http://[::ffff:a9fe:a9fe]/", "link-local"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("https://10.0.0.1/hook", "private"),
        ("http://172.16.5.4/", "private"),
        ("http://192.168.0.10/", "private"),
        ("http://[fd12:3456::1]/", "unique-local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://224.0.0.1/", "multicast"),
        ("http://[ff02::1]/", "multicast"),
        ("http://localhost:8080/hook", "loopback"),
        ("nats://127.0.0.1:4222/events", "loopback"),
        ("nats://2130706433:4222/events", "loopback"),
        ("nats://[::1]:4222/events", "loopback"),
        ("nats://localhost:4222/events", "loopback"),
        ("nats://10.0.0.1:4222/events", "private"),
    ] {
        let r = app.post("/v1/webhooks", &alice, &json!({ "url": url })).await;
        let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert!(p["type"].as_str().unwrap().ends_with(":destination-not-allowed"), "{url}: {p}");
        assert!(p["detail"].as_str().unwrap().contains(&format!(" {kind} address")), "{url}: {p}");
    }
    assert!(app.json("/v1/webhooks", &alice).await.as_array().unwrap().is_empty(), "nothing made");
}

/// Issue 49 (SSRF, DNS rebinding): a webhook registered while its name resolved elsewhere and
/// that now resolves to 127.0.0.1 (`localhost` here) is checked again at every connection: the
/// receiver on 127.0.0.1 never gets a delivery, and the log says only that there was no
/// answer (no "connection refused" or timing to probe ports with). A literal inside address
/// that reached the store is refused as well.
#[tokio::test]
async fn a_name_resolving_inside_at_delivery_is_not_connected_to() {
    let app = TestApp::memory(crate::support::grid(), |c| {
        c.w_interval_s = 1;
        c.webhook_retry_base_ms = 100;
    })
    .await;
    let alice = app.token("alice", false).await;
    let (url, seen) = receiver().await;
    let port = url.rsplit(':').next().unwrap().split('/').next().unwrap().to_owned();
    let owner = app.state.store.token(&coreserve::api::auth::hash_token(&alice)).await.unwrap().unwrap().principal;
    let cursor = app.state.store.last_event_id().await.unwrap();
    let mut ids = Vec::new();
    for url in [format!("http://localhost:{port}/hook"), format!("http://127.0.0.1:{port}/hook")] {
        let w = coreserve::store::WebhookRecord {
            id: uuid::Uuid::new_v4(),
            owner,
            user: "alice".into(),
            admin: false,
            url,
            secret: "a-secret-of-my-own".into(),
            created_at: Utc::now(),
            enabled: true,
            cursor,
            attempts: 0,
            next_attempt_at: Utc::now(),
            failing_since: None,
            last_error: None,
        };
        ids.push(w.id);
        app.state.store.insert_webhook(w, None).await.unwrap();
    }
    app.post("/v1/plans", &alice, &plan("x", 3600)).await;
    for id in &ids {
        let mut log = Vec::new();
        for _ in 0..100 {
            log = app.json(&format!("/v1/webhooks/{id}/deliveries"), &alice).await.as_array().unwrap().clone();
            if log.len() >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(log.len() >= 2, "attempted and retried: {log:?}");
        for d in &log {
            assert_eq!(d["error"], coreserve::api::webhooks::NO_ANSWER, "{d}");
            assert!(d.get("status_code").is_none(), "{d}");
            assert_eq!(d["duration_ms"], 0.0, "no timing: {d}");
        }
        let w = app.json(&format!("/v1/webhooks/{id}"), &alice).await;
        assert_eq!(w["last_error"], coreserve::api::webhooks::NO_ANSWER, "{w}");
    }
    assert!(seen.lock().unwrap().deliveries.is_empty(), "nothing reached 127.0.0.1");
}

/// Issue 49: an admin's `--webhook-allow` lets an in-house receiver in: a network (CIDR) for
/// a name that resolves into it (`localhost` in 127.0.0.0/8), a host name for itself; other
/// inside addresses stay refused.
#[tokio::test]
async fn an_allowed_network_or_host_is_delivered_to() {
    let app = TestApp::memory(crate::support::grid(), |c| {
        c.w_interval_s = 1;
        c.webhook_allow = vec!["127.0.0.0/8".parse().unwrap()];
    })
    .await;
    let alice = app.token("alice", false).await;
    let (url, seen) = receiver().await;
    let port = url.rsplit(':').next().unwrap().split('/').next().unwrap().to_owned();
    let r = app.post("/v1/webhooks", &alice, &json!({"url": format!("http://localhost:{port}/hook")})).await;
    assert_eq!(r.status(), StatusCode::CREATED, "{}", r.text().await.unwrap());
    let hook: Value = r.json().await.unwrap();
    seen.lock().unwrap().secret = hook["secret"].as_str().unwrap().to_owned();
    let r = app.post("/v1/webhooks", &alice, &json!({"url": "http://10.0.0.1/"})).await;
    problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    app.post("/v1/plans", &alice, &plan("x", 3600)).await;
    until_delivered(&seen, &events_of(&app.api, &alice, 1).await.into_iter().collect()).await;
    let log = app.json(&format!("/v1/webhooks/{}/deliveries", hook["id"].as_str().unwrap()), &alice).await;
    assert_eq!(log[0]["status_code"], 204, "{log}");

    let app = TestApp::memory(crate::support::grid(), |c| {
        c.w_interval_s = 1;
        c.webhook_allow = vec!["LocalHost".parse().unwrap()];
    })
    .await;
    let alice = app.token("alice", false).await;
    let r = app.post("/v1/webhooks", &alice, &json!({"url": format!("http://localhost:{port}/hook")})).await;
    assert_eq!(r.status(), StatusCode::CREATED, "an allowed host");
    let r = app.post("/v1/webhooks", &alice, &json!({"url": format!("http://127.0.0.1:{port}/hook")})).await;
    problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
}

/// Issue 49: at most `--webhook-max-per-user` webhooks per user (one more: 422 naming the
/// limit; an admin is not limited; deleting one makes room), and an event is attempted at
/// most `--webhook-max-attempts-per-event` times per webhook before it is given up and the
/// next event is delivered.
#[tokio::test]
async fn webhooks_per_user_and_attempts_per_event_are_limited() {
    let app = TestApp::memory(crate::support::grid(), |c| {
        c.w_interval_s = 1;
        c.webhook_retry_base_ms = 50;
        c.webhook_max_per_user = 2;
        c.webhook_max_attempts_per_event = 3;
        c.webhook_allow = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    let admin = crate::support::ADMIN;
    let alice = app.token("alice", false).await;
    let (url, seen) = receiver().await;
    let mut made = Vec::new();
    for _ in 0..2 {
        let r = app.post("/v1/webhooks", &alice, &json!({ "url": url })).await;
        assert_eq!(r.status(), StatusCode::CREATED);
        made.push(r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned());
    }
    let r = app.post("/v1/webhooks", &alice, &json!({ "url": url })).await;
    let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert!(p["type"].as_str().unwrap().ends_with(":webhook-limit"), "{p}");
    assert!(p["detail"].as_str().unwrap().contains("--webhook-max-per-user 2"), "{p}");
    assert_eq!(app.json("/v1/webhooks", &alice).await.as_array().unwrap().len(), 2);
    let r = app.post("/v1/webhooks", admin, &json!({ "url": url })).await;
    assert_eq!(r.status(), StatusCode::CREATED, "an admin is not limited");
    let admins = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    assert_eq!(app.delete(&format!("/v1/webhooks/{admins}"), admin).await.status(), StatusCode::NO_CONTENT);
    assert_eq!(app.delete(&format!("/v1/webhooks/{}", made[1]), &alice).await.status(), StatusCode::NO_CONTENT);

    // One webhook left; the receiver fails: each event is tried 3 times, then the next.
    seen.lock().unwrap().failing = true;
    app.post("/v1/plans", &alice, &plan("a", 3600)).await;
    app.post("/v1/plans", &alice, &plan("b", 7200)).await;
    let events = events_of(&app.api, &alice, 2).await;
    let mut log = Vec::new();
    for _ in 0..100 {
        log = app.json(&format!("/v1/webhooks/{}/deliveries", made[0]), &alice).await.as_array().unwrap().clone();
        if log.len() >= 6 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for e in &events {
        let attempts: Vec<i64> =
            log.iter().filter(|d| d["event_id"] == *e).map(|d| d["attempt"].as_i64().unwrap()).collect();
        assert_eq!(attempts.len(), 3, "event {e}: {log:?}");
        assert!(attempts.iter().all(|a| *a <= 3), "event {e}: {attempts:?}");
    }
    assert!(log[0]["error"].as_str().unwrap().contains("given up after 3 attempts"), "{:?}", log[0]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let received = seen.lock().unwrap().deliveries.len();
    assert_eq!(received, 6, "3 attempts per event, no more");
}

/// Issue 49: `--webhook-max-per-user` holds across processes: two `coreserve serve` processes
/// on one database, each sent half of many registrations of one user at once, store exactly
/// the limit together (the count and the insert are one step in PostgreSQL, not per process).
/// Three users, each its own chance for a race to show.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_one_database_keep_the_webhook_limit_together() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.json");
    std::fs::write(&grid, serde_json::to_string(&crate::support::grid()).unwrap()).unwrap();
    let args = ["--webhook-max-per-user", "3", "--webhook-allow", "127.0.0.1"];
    let first = Server::start(&db.url, Some(&grid), &args, None);
    let second = Server::start(&db.url, None, &args, None);
    let apis = [first.api(), second.api()];
    for user in ["alice", "bob", "carol"] {
        let t = token(&apis[0], ADMIN, user).await;
        let sent = (0..24).map(|i| {
            let (api, t) = (&apis[i % 2], t.clone());
            async move { api.post("/v1/webhooks", &t, &json!({"url": format!("http://127.0.0.1:9/hook{i}")})).await }
        });
        let answers = futures::future::join_all(sent).await;
        let mut created = 0;
        for r in answers {
            match r.status() {
                StatusCode::CREATED => created += 1,
                _ => {
                    let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
                    assert!(p["type"].as_str().unwrap().ends_with(":webhook-limit"), "{p}");
                }
            }
        }
        assert_eq!(created, 3, "{user}: the limit, across both processes");
        for api in &apis {
            assert_eq!(api.json("/v1/webhooks", &t).await.as_array().unwrap().len(), 3, "{user}");
        }
    }
}
