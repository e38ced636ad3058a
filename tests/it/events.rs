//! Plan states through time and the event stream (`GET /v1/events`, Server-Sent Events):
//! resumed with `Last-Event-ID` across a `kill -9` of the service, every event of the caller's
//! plans arrives once and in order, and another user's never; bad input is a 400.

use std::time::Duration;

use chrono::Utc;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::support::serve::{Server, ADMIN};
use crate::support::{in_hours, machine, problem, ts, ApiClient, TestApp, TestDb};

/// One SSE message: (id, event, data).
type Message = (i64, String, Value);

/// Reads the stream of `GET /v1/events` at `base` as `token`, after `after`, until `stop`
/// messages have come or `wait` has passed, or the connection ends.
async fn read_events(base: &str, token: &str, after: Option<i64>, stop: usize, wait: Duration) -> Vec<Message> {
    read_stream(open_events(base, token, after).await, stop, wait).await
}

/// Opens the event stream (after event `after`, or from now on). Once it answers, the stream's
/// position is fixed (the service reads the log's end before its headers): every event
/// written later reaches it.
async fn open_events(base: &str, token: &str, after: Option<i64>) -> reqwest::Response {
    let mut rb = reqwest::Client::new().get(format!("{base}/v1/events")).bearer_auth(token);
    if let Some(n) = after {
        rb = rb.header("Last-Event-ID", n.to_string());
    }
    let r = rb.send().await.expect("the stream opens");
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    r
}

/// Reads `stop` events of an open stream `r`, or what comes within `wait`.
async fn read_stream(mut r: reqwest::Response, stop: usize, wait: Duration) -> Vec<Message> {
    let (mut got, mut buf) = (Vec::new(), String::new());
    let deadline = tokio::time::Instant::now() + wait;
    while got.len() < stop {
        let chunk = match tokio::time::timeout_at(deadline, r.chunk()).await {
            Ok(Ok(Some(c))) => c,
            _ => break,
        };
        buf.push_str(std::str::from_utf8(&chunk).unwrap());
        while let Some(i) = buf.find("\n\n") {
            let block: String = buf.drain(..i + 2).collect();
            let field = |name: &str| block.lines().find_map(|l| l.strip_prefix(name).map(str::to_owned));
            if let (Some(id), Some(event), Some(data)) = (field("id: "), field("event: "), field("data: ")) {
                got.push((id.parse().unwrap(), event, serde_json::from_str(&data).unwrap()));
            }
        }
    }
    got
}

/// A one-job plan of `cpus` CPUs for `duration_s`, starting `offset_s` from now at the
/// earliest.
fn plan(id: &str, cpus: u32, offset_s: i64, duration_s: i64) -> Value {
    json!({
        "id": id,
        "deadline": in_hours(6),
        "not_before": ts(Utc::now() + chrono::Duration::seconds(offset_s)),
        "jobs": [{"name": "A", "os": "linux", "cpus": cpus, "offset_s": 0, "duration_s": duration_s}],
        "transfers": []
    })
}

fn grid_file(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("grid.json");
    std::fs::write(&path, serde_json::to_string(&crate::support::grid()).unwrap()).unwrap();
    path
}

async fn token(api: &ApiClient, user: &str) -> String {
    let r = api.post("/v1/tokens", ADMIN, &json!({"user": user})).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    r.json::<Value>().await.unwrap()["token"].as_str().unwrap().to_owned()
}

/// Issue 25: an SSE client that disconnects and resumes with `Last-Event-ID` across a `kill -9`
/// and restart of the service sees every event of its plans exactly once, in order (committed,
/// active at the start, its job running then ended, completed at the end, cancelled), and
/// another user's never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_resumed_across_a_kill_9_sees_each_of_its_events_once_in_order() {
    let _machine = machine::reserve("crash").await;
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let grid = grid_file(dir.path());
    // Plans may start 1 s after receipt (w_interval), so that one starts and ends in the test.
    let server = Server::start(&db.url, Some(&grid), &["--w-interval-s", "1"], None);
    let api = server.api();
    let (alice, bob) = (token(&api, "alice").await, token(&api, "bob").await);

    // Alice's plans: one far ahead (cancelled later), one that starts in 2 s and lasts 3 s.
    let reader = tokio::spawn({
        let (url, alice) = (server.url.clone(), alice.clone());
        async move { read_events(&url, &alice, Some(0), 6, Duration::from_secs(30)).await }
    });
    let later = api.post("/v1/plans", &alice, &plan("later", 4, 3 * 3600, 3600)).await.json::<Value>().await.unwrap();
    let soon = api.post("/v1/plans", &alice, &plan("soon", 4, 2, 3)).await.json::<Value>().await.unwrap();
    let theirs = api.post("/v1/plans", &bob, &plan("theirs", 4, 3600, 600)).await.json::<Value>().await.unwrap();
    for p in [&later, &soon, &theirs] {
        assert_eq!(p["status"], "committed", "{p}");
    }
    // committed x2, then soon's active, its job's start and end, and completed (the service's
    // clock, every second).
    let first = reader.await.unwrap();
    assert_eq!(first.len(), 6, "{first:?}");
    let last_seen = first.last().unwrap().0;

    // Meanwhile, with no reader: a cancel; then the service dies and comes back.
    assert_eq!(api.delete(&format!("/v1/plans/{}", later["id"].as_str().unwrap()), &alice).await.status(), 200);
    server.kill();
    let server = Server::start(&db.url, None, &["--w-interval-s", "1"], None);
    let api = server.api();
    let again =
        api.post("/v1/plans", &alice, &plan("after-restart", 2, 3600, 600)).await.json::<Value>().await.unwrap();
    assert_eq!(again["status"], "committed", "{again}");
    let rest = read_events(&server.url, &alice, Some(last_seen), 2, Duration::from_secs(20)).await;
    // Nothing more comes for Alice (Bob's events are filtered out on the way).
    let extra = api.post("/v1/plans", &bob, &plan("theirs-2", 2, 3600, 600)).await;
    assert_eq!(extra.status(), StatusCode::CREATED);
    let none =
        read_events(&server.url, &alice, Some(rest.last().map_or(last_seen, |m| m.0)), 1, Duration::from_secs(3)).await;
    assert!(none.is_empty(), "{none:?}");

    let seen: Vec<(String, String)> = first
        .iter()
        .chain(&rest)
        .map(|(_, event, data)| (data["request_id"].as_str().unwrap().to_owned(), event.clone()))
        .collect();
    let want: Vec<(String, String)> = [
        ("later", "plan.committed"),
        ("soon", "plan.committed"),
        ("soon", "plan.active"),
        ("soon", "job.running"),
        ("soon", "job.ended"),
        ("soon", "plan.completed"),
        ("later", "plan.cancelled"),
        ("after-restart", "plan.committed"),
    ]
    .iter()
    .map(|(r, e)| (r.to_string(), e.to_string()))
    .collect();
    assert_eq!(seen, want);
    let ids: Vec<i64> = first.iter().chain(&rest).map(|m| m.0).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "in order, none twice: {ids:?}");
    for (id, event, data) in first.iter().chain(&rest) {
        assert_eq!(data["id"], *id);
        assert_eq!(data["type"], *event);
        assert_eq!(data["user"], "alice");
    }
    // Each event carries its jobs' states at the time: soon's job ran while it was active and
    // had ended when it completed.
    let job_state = |rid: &str, event: &str| {
        first.iter().chain(&rest).find(|m| m.2["request_id"] == rid && m.1 == event).unwrap().2["jobs"][0]["state"]
            .clone()
    };
    assert_eq!(job_state("soon", "plan.committed"), "scheduled");
    assert_eq!(job_state("soon", "plan.active"), "running");
    assert_eq!(job_state("soon", "plan.completed"), "ended");
    // A part's event names its part; a plan's names none.
    let part = |event: &str| first.iter().find(|m| m.1 == event).unwrap().2.get("part").cloned();
    assert_eq!(part("job.running"), Some(json!("A")));
    assert_eq!(part("job.ended"), Some(json!("A")));
    assert_eq!(part("plan.active"), None);
    assert_eq!(job_state("later", "plan.cancelled"), "cancelled");
    // The plan itself says so too.
    let soon = api.json(&format!("/v1/plans/{}", soon["id"].as_str().unwrap()), &alice).await;
    assert_eq!(soon["status"], "completed", "{soon}");
    assert_eq!(soon["jobs"][0]["state"], "ended", "{soon}");
    // The admin sees Bob's events as well.
    // later x2, soon x5, theirs, after-restart, theirs-2.
    let everyone = read_events(&server.url, ADMIN, Some(0), 11, Duration::from_secs(5)).await;
    assert_eq!(everyone.len(), 10, "{everyone:?}");
}

/// Bad input to `GET /v1/events`: a Last-Event-ID or `after` that is not an event id is a 400
/// problem; no token is a 401. A stream opened without a position starts at the log's end;
/// a completed plan cannot be cancelled (409) and an active one can.
#[tokio::test]
async fn events_refuse_bad_positions_and_plans_follow_the_clock() {
    let app = TestApp::memory(crate::support::grid(), |c| c.w_interval_s = 1).await;
    for header in ["abc", "-1", "1.5", ""] {
        let r = app
            .api
            .client
            .get(format!("{}/v1/events", app.api.base))
            .bearer_auth(crate::support::ADMIN)
            .header("Last-Event-ID", header)
            .send()
            .await
            .unwrap();
        let p = problem(r, StatusCode::BAD_REQUEST).await;
        assert!(p["detail"].as_str().unwrap().contains("Last-Event-ID"), "{p}");
    }
    let r = app.get("/v1/events?after=-3", crate::support::ADMIN).await;
    problem(r, StatusCode::BAD_REQUEST).await;
    let r = app.get("/v1/events?after=x", crate::support::ADMIN).await;
    problem(r, StatusCode::BAD_REQUEST).await;
    let r = app.api.client.get(format!("{}/v1/events", app.api.base)).send().await.unwrap();
    problem(r, StatusCode::UNAUTHORIZED).await;

    let admin = crate::support::ADMIN;
    let old = app.post("/v1/plans", admin, &plan("old", 2, 3600, 600)).await.json::<Value>().await.unwrap();
    // From now on: the old plan's event is not replayed; the next one comes.
    let stream = open_events(&app.api.base, admin, None).await;
    let reader = tokio::spawn(read_stream(stream, 1, Duration::from_secs(10)));
    let short = app.post("/v1/plans", admin, &plan("short", 2, 1, 2)).await.json::<Value>().await.unwrap();
    let got = reader.await.unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].2["request_id"].as_str(), got[0].1.as_str()), (Some("short"), "plan.committed"));
    assert_ne!(got[0].2["plan_id"], old["id"]);

    // Active once started (cancellable), completed once ended (not).
    let id = short["id"].as_str().unwrap().to_owned();
    let wait_for = |status: &'static str| {
        let (app, id) = (&app, id.clone());
        async move {
            for _ in 0..100 {
                if app.json(&format!("/v1/plans/{id}"), admin).await["status"] == status {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("plan {id} never became {status}");
        }
    };
    wait_for("completed").await;
    let r = app.delete(&format!("/v1/plans/{id}"), admin).await;
    let p = problem(r, StatusCode::CONFLICT).await;
    assert!(p["detail"].as_str().unwrap().contains("ended"), "{p}");
    let running = app.post("/v1/plans", admin, &plan("running", 2, 1, 600)).await.json::<Value>().await.unwrap();
    let id = running["id"].as_str().unwrap().to_owned();
    let (app_ref, id2) = (&app, id.clone());
    for _ in 0..100 {
        if app_ref.json(&format!("/v1/plans/{id2}"), admin).await["status"] == "active" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(app.json(&format!("/v1/plans/{id}"), admin).await["status"], "active");
    let r = app.delete(&format!("/v1/plans/{id}"), admin).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.json::<Value>().await.unwrap()["status"], "cancelled");
}

/// Issue 25: `coreserve plans watch ID` prints the plan's whole history and follows it to its
/// end, one line per event (a job's event names the job), across a `kill -9` and restart of the
/// service on the same address: it reconnects with `Last-Event-ID`, so no event is printed
/// twice or missed, and it exits 0 once the plan has completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_watch_follows_one_plan_to_its_end_across_a_restart() {
    use std::io::BufRead;
    let _machine = machine::reserve("crash").await;
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let grid = grid_file(dir.path());
    let server = Server::start(&db.url, Some(&grid), &["--w-interval-s", "1"], None);
    let api = server.api();
    let alice = token(&api, "alice").await;
    // Starts in 6 s and lasts 3 s.
    let booked = api.post("/v1/plans", &alice, &plan("watched", 4, 6, 3)).await.json::<Value>().await.unwrap();
    assert_eq!(booked["status"], "committed", "{booked}");

    let mut watch = std::process::Command::new(env!("CARGO_BIN_EXE_coreserve"))
        .args(["plans", "watch", "watched", "-s", &server.url, "-t", &alice])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(15)).expect("the plan's history comes first");
    assert!(first.contains("plan.committed") && first.contains("watched"), "{first}");

    // kill -9 before the plan starts; the same address again.
    let listen = server.url.trim_start_matches("http://").to_owned();
    server.kill();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let server = Server::start(&db.url, Some(&grid), &["--w-interval-s", "1", "--listen", &listen], None);

    let mut status = None;
    for _ in 0..300 {
        if let Some(s) = watch.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = status.unwrap_or_else(|| {
        let _ = watch.kill();
        panic!("plans watch did not end with its plan")
    });
    assert!(status.success(), "{status}");
    let mut lines = vec![first];
    // The rest, until the reader sees the end of the output.
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
        lines.push(line);
    }
    let kinds: Vec<&str> = lines.iter().map(|l| l.split_whitespace().nth(1).unwrap_or("")).collect();
    assert_eq!(kinds, ["plan.committed", "plan.active", "job.running", "job.ended", "plan.completed"], "{lines:#?}");
    assert!(lines[2].trim_end().ends_with("watched A"), "a job's event names the job: {}", lines[2]);
    drop(server);
}
