//! Issue 28, point 2: allocation limits exact across planner processes. Three brokers (each
//! with calendars of its own, so that capacity never binds and only the allocation does) on
//! one PostgreSQL database: a project's allocation set through one is in force at all three,
//! and plans booked through all three at once never commit more than it.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::support::{in_hours, TestApp, ADMIN};

/// One 1-CPU job of an hour: 1 CPU-hour.
fn one_cpu_hour(id: &str) -> Value {
    json!({
        "id": id,
        "deadline": in_hours(24),
        "jobs": [{"name": "A", "os": "linux", "cpus": 1, "offset_s": 0, "duration_s": 3600}],
        "transfers": []
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_planners_sharing_one_allocation_never_commit_more_than_it() {
    let first = TestApp::spawn().await;
    let db = first.db_url().to_owned();
    let second = TestApp::on_database(&db, |_| {}).await;
    let third = TestApp::on_database(&db, |_| {}).await;
    let apps = [&first, &second, &third];
    let alice = first.token("alice", false).await;
    // 10 CPU-hours, one period of ten years starting a day ago: every plan below is in it.
    let period_start = (chrono::Utc::now() - chrono::Duration::days(1)).to_rfc3339();
    let lab = json!({"allocation": {"cpu_hours": 10.0, "period_s": 315_360_000, "period_start": period_start},
                     "members": ["alice"]});
    let r = first.client.put(format!("{}/v1/projects/lab", first.base)).bearer_auth(ADMIN).json(&lab).send().await;
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    // Set through the first, known at once to the others (they answered 404 until restarted).
    for app in apps {
        let p: Value = app.get("/v1/projects/lab", &alice).await.json().await.unwrap();
        assert_eq!(p["allocation"]["cpu_hours"], 10.0, "{p}");
    }

    // 24 plans of one CPU-hour each, 8 per broker (its limit of requests in flight per user),
    // all at once.
    let mut tasks = Vec::new();
    for (k, app) in apps.iter().enumerate() {
        for n in 0..8 {
            let (client, base, alice) = (app.client.clone(), app.base.clone(), alice.clone());
            tasks.push(tokio::spawn(async move {
                let r = client
                    .post(format!("{base}/v1/plans"))
                    .bearer_auth(alice)
                    .json(&one_cpu_hour(&format!("p{k}-{n}")))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), StatusCode::CREATED);
                r.json::<Value>().await.unwrap()
            }));
        }
    }
    let mut committed = 0;
    for t in tasks {
        let plan = t.await.unwrap();
        match plan["status"].as_str().unwrap() {
            "committed" => committed += 1,
            "rejected" => {
                assert!(plan["reason"].as_str().unwrap().starts_with("allocation exceeded: project `lab`"), "{plan}")
            }
            other => panic!("{other}: {plan}"),
        }
    }
    assert_eq!(committed, 10, "exactly the allocation, through three brokers (was up to 24)");
    for app in apps {
        let u: Value = app.get("/v1/projects/lab/usage", &alice).await.json().await.unwrap();
        assert_eq!(u["booked_cpu_hours"].as_f64(), Some(10.0), "every broker reports every charge: {u}");
    }
    // Each broker's ledger (the priorities' cache) catches up with every broker's charges at
    // its next refresh (every 15 s in the recovery loop; called here at once).
    for app in apps {
        assert_eq!(app.state.refresh_charges().await.unwrap(), 10);
        let now = chrono::Utc::now().timestamp();
        assert!((app.state.ledger.report("lab", now).booked_cpu_hours - 10.0).abs() < 1e-6);
    }
    // A cancellation at one broker gives the hour back to all: one more fits, at another. (A
    // plan is cancelled at the broker that booked it: here each keeps calendars of its own.)
    let mine = first.plans(&alice, "?status=committed").await;
    let (k, plan) = mine
        .iter()
        .find_map(|p| {
            let k = p["request_id"].as_str()?.strip_prefix('p')?.split('-').next()?.parse::<usize>().ok()?;
            Some((k, p))
        })
        .expect("a committed plan");
    let id = plan["id"].as_str().unwrap();
    let booked_by = apps[k];
    let r = booked_by.client.delete(format!("{}/v1/plans/{id}", booked_by.base)).bearer_auth(&alice).send().await;
    let r = r.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let again: Value = third.post("/v1/plans", &alice, &one_cpu_hour("again")).await.json().await.unwrap();
    assert_eq!(again["status"], "committed", "{again}");
    let over: Value = second.post("/v1/plans", &alice, &one_cpu_hour("over")).await.json().await.unwrap();
    assert_eq!(over["status"], "rejected", "{over}");
}
