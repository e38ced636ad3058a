//! `serve --service-times`: every message of the participant protocol waits a draw from its
//! service-time range before it is handled (the validation's regime of slow messages,
//! sim/VALIDATION.md); without it nothing waits.

use std::time::{Duration, Instant};

use coreserve::protocol::ServiceTimes;
use reqwest::StatusCode;
use serde_json::json;
use uuid::Uuid;

use crate::support::TestApp;

const SERVICE: &str = "service-times-test-token";

/// The time `path` takes to answer `body` (as the service principal), and its status.
async fn timed(app: &TestApp, path: &str, body: &serde_json::Value) -> (Duration, StatusCode) {
    let started = Instant::now();
    let r = app.post(path, SERVICE, body).await;
    (started.elapsed(), r.status())
}

#[tokio::test]
async fn participant_messages_wait_their_service_time() {
    let now = chrono::Utc::now().timestamp();
    let query =
        json!({"site": "s1", "cpus": 1, "duration_s": 600, "window_start": now + 3600, "deadline": now + 86_400});
    let hold = json!({"kind": "compute", "txn": Uuid::new_v4(), "site": "s1", "cpus": 1, "start": now + 7200, "end": now + 7800});
    let times = ServiceTimes {
        free_slot: (0.6, 0.7),
        hold: (0.3, 0.35),
        availability: (0.0, 0.0),
        commit: (0.0, 0.0),
        cancel: (0.0, 0.0),
    };
    let slow = TestApp::spawn_with(|c| {
        c.service_token = Some(SERVICE.into());
        c.service_times = Some(times);
    })
    .await;
    let (took, status) = timed(&slow, "/v1/participant/sites/s1/query", &query).await;
    assert_eq!(status, StatusCode::OK);
    assert!(took >= Duration::from_millis(600), "a free-slot query waits 0.6-0.7 s: {took:?}");
    let (took, status) = timed(&slow, "/v1/participant/sites/s1/prepare", &hold).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        (Duration::from_millis(300)..Duration::from_millis(600)).contains(&took),
        "a prepare waits 0.3-0.35 s: {took:?}"
    );

    let fast = TestApp::spawn_with(|c| c.service_token = Some(SERVICE.into())).await;
    let (took, status) = timed(&fast, "/v1/participant/sites/s1/query", &query).await;
    assert_eq!(status, StatusCode::OK);
    assert!(took < Duration::from_millis(300), "no service times, no wait: {took:?}");
}
