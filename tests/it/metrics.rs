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
