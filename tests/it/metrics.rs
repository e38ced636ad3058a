//! `/metrics` after real traffic (all-in-one on PostgreSQL): the HTTP histograms by route
//! pattern and status, the database pool gauges, the sites' CPUs booked now and the build
//! information, with values that agree with what the test did.

use std::collections::BTreeMap;

use reqwest::{Method, StatusCode};
use serde_json::Value;
use uuid::Uuid;

use crate::support::{workflow, TestApp};

/// The samples of `text` (`name{labels} value`, comments skipped), by series.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap_or_else(|| panic!("a sample line: {l}"));
            (series.to_owned(), value.parse::<f64>().unwrap_or_else(|e| panic!("{l}: {e}")))
        })
        .collect()
}

/// Every sample of family `name`: a metric and its labels, as written.
fn family<'a>(all: &'a BTreeMap<String, f64>, name: &str) -> Vec<(&'a str, f64)> {
    all.iter()
        .filter(|(s, _)| s.as_str() == name || s.starts_with(&format!("{name}{{")))
        .map(|(s, v)| (s.as_str(), *v))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_by_route_and_status_and_show_pool_sites_and_build() {
    // No W interval: the workflow's jobs start now, so its CPUs are booked at scrape time.
    let app = TestApp::spawn_with(|c| c.w_interval_s = 0).await;
    let alice = app.token("alice", false).await;
    let r = app.post("/v1/plans", &alice, &workflow()).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let plan: Value = r.json().await.unwrap();
    assert_eq!(plan["status"], "committed", "{plan}");
    let id = plan["id"].as_str().unwrap().to_owned();
    for _ in 0..3 {
        assert_eq!(app.get(&format!("/v1/plans/{id}"), &alice).await.status(), StatusCode::OK);
    }
    let stranger = Uuid::new_v4();
    assert_eq!(app.get(&format!("/v1/plans/{stranger}"), &alice).await.status(), StatusCode::NOT_FOUND);
    assert_eq!(app.call(Method::GET, "/v1/plans", None, None).await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(app.call(Method::GET, "/nowhere/at/all", None, None).await.status(), StatusCode::NOT_FOUND);
    assert_eq!(app.call(Method::GET, "/docs", None, None).await.status(), StatusCode::OK);

    let text = app.metrics().await;
    let all = samples(&text);
    let count = |labels: &str| {
        all.get(&format!("coreserve_http_request_duration_seconds_count{{{labels}}}")).copied().unwrap_or_else(|| {
            panic!("no series {labels} in {:#?}", family(&all, "coreserve_http_request_duration_seconds_count"))
        })
    };
    assert_eq!(count(r#"method="POST",route="/v1/plans",status="201""#), 1.0);
    assert_eq!(count(r#"method="GET",route="/v1/plans/{id}",status="200""#), 3.0);
    assert_eq!(count(r#"method="GET",route="/v1/plans/{id}",status="404""#), 1.0);
    assert_eq!(count(r#"method="GET",route="/v1/plans",status="401""#), 1.0);
    assert_eq!(count(r#"method="GET",route="unmatched",status="404""#), 1.0);
    assert_eq!(count(r#"method="GET",route="/docs",status="200""#), 1.0);
    assert!(!text.contains(&id) && !text.contains(&stranger.to_string()), "no raw path is a label");
    let post = r#"method="POST",route="/v1/plans",status="201""#;
    let inf = all[&format!("coreserve_http_request_duration_seconds_bucket{{{post},le=\"+Inf\"}}")];
    assert_eq!(inf, 1.0, "the +Inf bucket holds every request");
    let sum = all[&format!("coreserve_http_request_duration_seconds_sum{{{post}}}")];
    assert!(sum > 0.0 && sum < 30.0, "planning and booking took {sum} s");
    let seconds = family(&all, "coreserve_http_request_duration_seconds_count");
    assert!(seconds.iter().all(|(s, _)| s.contains("route=\"") && s.contains("status=\"")), "{seconds:?}");

    let gauge = |name: &str| all.get(name).copied().unwrap_or_else(|| panic!("no {name} in\n{text}"));
    let (size, idle, max) = (
        gauge("coreserve_db_pool_connections"),
        gauge("coreserve_db_pool_idle_connections"),
        gauge("coreserve_db_pool_max_connections"),
    );
    assert!(size >= 1.0 && idle <= size && size <= max && max == 8.0, "pool: {size} open, {idle} idle, max {max}");

    // The workflow's two 12-CPU jobs sit on s1 and s2 (16 CPUs each), s3 (8 CPUs) is free.
    let sites: BTreeMap<String, String> = plan["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| (j["name"].as_str().unwrap().into(), j["site"].as_str().unwrap().into()))
        .collect();
    assert_eq!(sites.values().collect::<std::collections::BTreeSet<_>>().len(), 2, "{plan}");
    for (site, cpus, booked) in [("s1", 16.0, 12.0), ("s2", 16.0, 12.0), ("s3", 8.0, 0.0)] {
        assert_eq!(gauge(&format!("coreserve_site_cpus{{site=\"{site}\"}}")), cpus, "{site}");
        assert_eq!(gauge(&format!("coreserve_site_cpus_booked{{site=\"{site}\"}}")), booked, "{site} now");
        assert_eq!(gauge(&format!("coreserve_site_cpu_utilisation{{site=\"{site}\"}}")), booked / cpus, "{site}");
    }

    let build = family(&all, "coreserve_build_info");
    assert_eq!(build.len(), 1, "{build:?}");
    assert!(build[0].0.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))) && build[0].1 == 1.0);

    // The families a scrape shows, and its size (for the report).
    let families = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
    eprintln!("/metrics: {} bytes, {families} families, {} samples", text.len(), all.len());
    assert!(families >= 14, "{families} families");
}

/// Issue 50: every background task of an all-in-one process (retention on) is named in
/// `/metrics`, with its period, rounds, errors, last run and running gauge; and the rounds move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_name_every_background_task() {
    let app = TestApp::spawn_with(|c| {
        c.retention_days = 30;
        c.retention_every_s = 3600;
    })
    .await;
    let names: Vec<String> = app.state.metrics.background_tasks().iter().map(|t| t.name().to_owned()).collect();
    let want = [
        "lease_sweep",
        "claim_renewal",
        "retention",
        "plan_clock",
        "webhook_delivery",
        "recovery",
        "charges_refresh",
        "token_watch",
    ];
    assert_eq!(names, want, "the tasks of an all-in-one process without Slurm sites or a data plane");
    // The plan clock runs every second: wait for a round or two.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let runs = |all: &BTreeMap<String, f64>| all.get("coreserve_background_runs_total{task=\"plan_clock\"}").copied();
    loop {
        let all = samples(&app.metrics().await);
        if runs(&all).unwrap_or(0.0) >= 1.0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the plan clock never ran: {all:#?}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let all = samples(&app.metrics().await);
    for name in &names {
        for family in [
            "coreserve_background_period_seconds",
            "coreserve_background_runs_total",
            "coreserve_background_errors_total",
            "coreserve_background_last_run_timestamp_seconds",
            "coreserve_background_running",
        ] {
            let series = format!("{family}{{task=\"{name}\"}}");
            assert!(all.contains_key(&series), "no {series} in /metrics");
        }
        assert_eq!(all[&format!("coreserve_background_running{{task=\"{name}\"}}")], 1.0, "{name} runs");
        assert_eq!(all[&format!("coreserve_background_errors_total{{task=\"{name}\"}}")], 0.0, "{name}: no error");
    }
    assert_eq!(all["coreserve_background_period_seconds{task=\"plan_clock\"}"], 1.0);
    assert_eq!(all["coreserve_background_period_seconds{task=\"retention\"}"], 3600.0);
    let last = all["coreserve_background_last_run_timestamp_seconds{task=\"plan_clock\"}"];
    let now = chrono::Utc::now().timestamp() as f64;
    assert!(last > now - 30.0 && last <= now + 1.0, "the plan clock last ran at {last}, now is {now}");
    for name in names {
        let tasks = family(&all, "coreserve_background_runs_total");
        assert_eq!(tasks.iter().filter(|(s, _)| s.contains(&format!("task=\"{name}\""))).count(), 1, "{name} once");
    }
}

/// Issue 50: once the server stops (as on `SIGTERM`: `stop(true)`), `run_until_stopped`
/// returns only after every background task has ended, and no round runs after that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_server_stops_no_background_task_runs() {
    use coreserve::api::{Application, ServeConfig};
    use std::time::Duration;
    let config = ServeConfig {
        listen: "127.0.0.1:0".into(),
        planners: 1,
        admin_token: Some(crate::support::ADMIN.into()),
        workers: Some(1),
        claim_lease_s: 1,
        lease_s: 1,
        ..ServeConfig::default()
    };
    let store = std::sync::Arc::new(coreserve::store::MemoryStore::new());
    let app = Application::build(config, crate::support::grid(), store).await.unwrap();
    let (state, handle) = (app.state(), app.handle());
    let served = tokio::spawn(app.run_until_stopped());
    let tasks = state.metrics.background_tasks();
    assert!(tasks.len() >= 6, "{:?}", tasks.iter().map(|t| t.name()).collect::<Vec<_>>());
    // Every task with a period of a second or less has run at least once.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while tasks.iter().any(|t| t.period() <= Duration::from_secs(1) && t.runs() == 0) {
        assert!(std::time::Instant::now() < deadline, "a task never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(tasks.iter().all(|t| t.running()));

    handle.stop(true).await;
    tokio::time::timeout(Duration::from_secs(30), served).await.expect("stopped in time").unwrap().unwrap();
    let stopped: Vec<_> = tasks.iter().filter(|t| t.running()).map(|t| t.name().to_owned()).collect();
    assert!(stopped.is_empty(), "still running after the server stopped: {stopped:?}");
    let runs: Vec<u64> = tasks.iter().map(|t| t.runs()).collect();
    // Longer than the periods of the plan clock (1 s), the claim renewal (0.25 s here) and the
    // lease sweep (1 s here).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(tasks.iter().map(|t| t.runs()).collect::<Vec<_>>(), runs, "a round ran after the stop");
    let text = state.metrics.render(0);
    for t in &tasks {
        assert!(text.contains(&format!("coreserve_background_running{{task=\"{}\"}} 0", t.name())), "{text}");
    }
}
