//! Workflows through the service on PostgreSQL (issue 46): dependencies (`after`), staged
//! transfers, `dependency_gap_s` and `slack_s`, 1,000-job requests, the 422s of bad workflow
//! input, and rejections that name the part and the resource.

use chrono::{DateTime, Utc};
use coreserve::check::check_outcomes;
use coreserve::model::{Outcome, PlanRequest, RawPlanRequest, MAX_JOBS};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::support::{grid, in_hours, problem, TestApp, ADMIN};

/// A WfCommons-shaped workflow of `levels * width` one-CPU tasks: level 0 fans out from one
/// task, every task of a level is after two tasks of the level before (fan-in) and receives a
/// staged file from the first of them.
fn levels(levels: usize, width: usize) -> Value {
    let name = |l: usize, i: usize| format!("t{l:02}_{i:02}");
    let mut jobs = Vec::new();
    let mut transfers = Vec::new();
    for l in 0..levels {
        for i in 0..width {
            let mut job = json!({"name": name(l, i), "os": "linux", "cpus": 1, "duration_s": 60});
            if l > 0 {
                let (a, b) = (name(l - 1, i), name(l - 1, (i + 1) % width));
                job["after"] = json!([a, b]);
                transfers
                    .push(json!({"from": a, "to": name(l, i), "bandwidth_mbps": 20, "mode": "staged", "size_mb": 10}));
            }
            jobs.push(job);
        }
    }
    json!({
        "id": format!("levels-{levels}x{width}"),
        "deadline": in_hours(24),
        "dependency_gap_s": 10,
        "slack_s": 15,
        "jobs": jobs,
        "transfers": transfers,
    })
}

/// The request the service planned for `body`, as the checker reads it (submitted when the
/// plan was created).
fn request_of(body: &Value, plan: &Value) -> PlanRequest {
    let mut raw = body.clone();
    raw["submitted_at"] = plan["created_at"].clone();
    raw["user"] = plan["user"].clone();
    PlanRequest::new(serde_json::from_value::<RawPlanRequest>(raw).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_job_workflow_is_booked_in_dependency_order() {
    let app = TestApp::spawn().await;
    let body = levels(50, 20);
    assert_eq!(body["jobs"].as_array().unwrap().len(), MAX_JOBS);
    let r = app.post("/v1/plans", ADMIN, &body).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let plan: Value = r.json().await.unwrap();
    assert_eq!(plan["status"], "committed", "{}", plan["reason"]);
    assert_eq!(plan["jobs"].as_array().unwrap().len(), 1000);
    assert_eq!(plan["transfers"].as_array().unwrap().len(), 980);
    // The independent checker proves every rule, dependencies, staging, gaps and slack
    // included, and the plan as stored reads back the same.
    let outcome: Outcome = serde_json::from_value(plan.clone()).unwrap();
    let req = request_of(&body, &plan);
    assert_eq!(check_outcomes(&grid(), &[req], &[outcome], 0), vec![]);
    let again: Value =
        app.get(&format!("/v1/plans/{}", plan["id"].as_str().unwrap()), ADMIN).await.json().await.unwrap();
    assert_eq!(again["jobs"], plan["jobs"]);
    // Each level: 60 s + 15 s of slack, then the 10 s gap (the 4 s staging fits in it).
    let start = |name: &str| -> DateTime<Utc> {
        let j = plan["jobs"].as_array().unwrap().iter().find(|j| j["name"] == name).unwrap();
        j["start"].as_str().unwrap().parse().unwrap()
    };
    assert_eq!((start("t49_00") - start("t00_00")).num_seconds(), 49 * 85);
    let f = &plan["footprint"];
    assert_eq!(f["booked_cpu_s"], 1000 * 75);
    assert_eq!(f["slack_cpu_s"], 1000 * 15);
    assert_eq!(f["critical_path_s"], 50 * 60);
    assert_eq!(f["makespan_s"], 49 * 85 + 75);
    assert_eq!(app.booked_anywhere().await, 1000, "one reservation per job");
}

#[tokio::test]
async fn bad_workflow_input_is_422_naming_the_fault_and_stores_nothing() {
    let app = TestApp::spawn().await;
    let base = levels(3, 2);
    type Mutation = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(Mutation, &str)> = vec![
        (Box::new(|b| b["jobs"][0]["after"] = json!(["t02_00"])), "cycle: t00_00 -> t01_00 -> t02_00 -> t00_00"),
        (Box::new(|b| b["jobs"][2]["after"] = json!(["ghost"])), "job `t01_00`: `after` names unknown job `ghost`"),
        (
            Box::new(|b| {
                b["jobs"][0]["offset_s"] = json!(600);
                b["jobs"][2]["offset_s"] = json!(0);
            }),
            "job `t01_00`: offset_s 0 is before 685",
        ),
        (Box::new(|b| b["transfers"][0]["size_mb"] = json!(0)), "size_mb must be a number > 0"),
        (Box::new(|b| b["transfers"][0]["size_mb"] = json!(-1)), "size_mb must be a number > 0"),
        (Box::new(|b| b["transfers"][0]["size_mb"] = json!(1e15)), "at most 1000000000"),
        (
            Box::new(|b| b["transfers"][0]["duration_s"] = json!(3)),
            "too short to move 10 MB at 20 Mbit/s (it needs 4 s)",
        ),
        (Box::new(|b| b["transfers"][0]["mode"] = json!("sometime")), "sometime"),
        (Box::new(|b| b["dependency_gap_s"] = json!(-1)), "dependency_gap_s"),
        (
            Box::new(|b| {
                b["jobs"] = json!((0..=MAX_JOBS)
                    .map(|i| json!({"name": format!("j{i}"), "os": "linux", "cpus": 1, "duration_s": 60}))
                    .collect::<Vec<_>>());
                b["transfers"] = json!([]);
            }),
            "jobs",
        ),
    ];
    for (mutate, expected) in cases {
        let mut body = base.clone();
        mutate(&mut body);
        let p = problem(app.post("/v1/plans", ADMIN, &body).await, StatusCode::UNPROCESSABLE_ENTITY).await;
        let detail = p["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(expected), "expected `{expected}` in {p}");
    }
    assert!(app.plans(ADMIN, "").await.is_empty(), "no plan stored");
    assert_eq!(app.booked_anywhere().await, 0);
}

#[tokio::test]
async fn a_rejection_names_the_transfer_its_sites_and_rfc3339_times() {
    let app = TestApp::spawn().await;
    // Two coupled 12-CPU jobs need both linux sites at once; 1,500 Mbit/s is more than their
    // 1 Gbit/s link (the transfer's offset defaults to the jobs' common start).
    let body = json!({
        "id": "too-wide",
        "deadline": in_hours(3),
        "jobs": [
            {"name": "A", "os": "linux", "cpus": 12, "duration_s": 600},
            {"name": "B", "os": "linux", "cpus": 12, "duration_s": 600}
        ],
        "transfers": [{"from": "A", "to": "B", "bandwidth_mbps": 1500, "size_mb": 100}]
    });
    let plan: Value = app.post("/v1/plans", ADMIN, &body).await.json().await.unwrap();
    assert_eq!(plan["status"], "rejected", "{plan}");
    let reason = plan["reason"].as_str().unwrap();
    assert!(reason.starts_with("no feasible plan before the deadline 20"), "{reason}");
    assert!(reason.contains("transfer A->B: no path from site `s"), "{reason}");
    assert!(reason.contains("has 1500 Mbit/s free over [20"), "{reason}");
    // No epoch seconds: every time is RFC 3339 UTC.
    assert!(!reason.split(|c: char| !c.is_ascii_digit()).any(|n| n.len() >= 9), "{reason}");
    let _: DateTime<Utc> = reason.rsplit("deadline ").next().unwrap()[..20].parse().unwrap();
}
