//! Crash tests of durable two-phase commit: real `coreserve serve` processes on PostgreSQL,
//! killed with SIGKILL (`kill -9`) or aborted at a fault-injection point
//! (`CORESERVE_CRASH_AT=after-prepare|after-decision`, see `coreserve::protocol::decision`), then
//! restarted on the same database. After every restart:
//! - every plan a client saw committed is still committed, and booked in full;
//! - no site is overbooked (the calendars rebuilt from the journal are checked against every
//!   committed plan);
//! - no hold outlives its lease (`coreserve_holds_outstanding` and the journal's rows).
//!
//! Each test runs on a fresh database ([`TestDb`]; `.ci/test` provides the server) and shares
//! the machine only with the other crash tests ([`machine::reserve`]): its leases and restarts
//! are timed in seconds.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};
use sqlx::{Connection, PgConnection, Row};

use crate::support::serve::{Server, ADMIN, LEASE_S, SERVICE};
use crate::support::{machine, ts, ApiClient, TestDb};

/// Sites s1 (16 CPUs, linux) and s2 (16 CPUs, linux) on a 1 Gbit/s link.
fn write_grid(dir: &std::path::Path) -> std::path::PathBuf {
    let g = json!({
        "nodes": [{"id": "n1", "label": "one"}, {"id": "n2", "label": "two"}],
        "links": [{"id": "l1", "a": "n1", "b": "n2", "capacity_mbps": 1000, "price_per_gbps_hour": 0.1}],
        "sites": [
            {"id": "s1", "node": "n1", "cpus": 16, "os": "linux", "price_per_cpu_hour": 1.0},
            {"id": "s2", "node": "n2", "cpus": 16, "os": "linux", "price_per_cpu_hour": 2.0}
        ]
    });
    let path = dir.join("grid.json");
    std::fs::write(&path, g.to_string()).unwrap();
    path
}

/// A co-allocation of two `cpus`-CPU jobs for an hour plus a transfer, due in 3 days.
fn pair(id: &str, cpus: u32) -> Value {
    json!({
        "id": id,
        "deadline": ts(Utc::now() + chrono::Duration::days(3)),
        "jobs": [
            {"name": "A", "os": "linux", "cpus": cpus, "offset_s": 0, "duration_s": 3600},
            {"name": "B", "os": "linux", "cpus": cpus, "offset_s": 0, "duration_s": 3600}
        ],
        "transfers": [{"from": "A", "to": "B", "bandwidth_mbps": 100, "offset_s": 0, "duration_s": 600}]
    })
}

async fn post_plan(c: &ApiClient, body: &Value, key: &str) -> reqwest::Result<reqwest::Response> {
    let url = format!("{}/v1/plans", c.base);
    c.client.post(url).bearer_auth(ADMIN).header("Idempotency-Key", key).json(body).send().await
}

/// Every plan (admin view).
async fn plans(c: &ApiClient) -> Vec<Value> {
    c.json("/v1/plans", ADMIN).await.as_array().unwrap().clone()
}

/// Reservations and holds of a site over the next week.
async fn reservations(c: &ApiClient, site: &str) -> Vec<Value> {
    let (from, to) = (ts(Utc::now() - chrono::Duration::hours(1)), ts(Utc::now() + chrono::Duration::days(7)));
    c.site_reservations(site, ADMIN, &from, &to).await
}

async fn holds_outstanding(c: &ApiClient) -> u64 {
    c.gauge("coreserve_holds_outstanding").await
}

/// The journal's rows per state.
async fn journal_states(db: &str) -> HashMap<String, i64> {
    let mut conn = PgConnection::connect(db).await.unwrap();
    let rows = sqlx::query("SELECT state, count(*) AS n FROM reservations GROUP BY state").fetch_all(&mut conn).await;
    rows.unwrap().iter().map(|r| (r.get::<String, _>("state"), r.get::<i64, _>("n"))).collect()
}

/// The checks after a restart: every site's committed reservations are exactly the jobs of
/// the committed plans placed there, no site is overbooked at any instant, and every plan in
/// `seen_committed` is still committed.
async fn check_consistent(c: &ApiClient, seen_committed: &[String]) {
    let all = plans(c).await;
    let by_id: HashMap<&str, &Value> = all.iter().map(|p| (p["id"].as_str().unwrap(), p)).collect();
    for id in seen_committed {
        let p = by_id.get(id.as_str()).unwrap_or_else(|| panic!("plan {id} the client saw is gone"));
        assert_eq!(p["status"], "committed", "plan {id} the client saw committed: {p}");
    }
    for site in ["s1", "s2"] {
        // Expected: every job of every committed plan at this site, as (start, end, cpus).
        let mut want: Vec<(String, String, u64)> = all
            .iter()
            .filter(|p| p["status"] == "committed")
            .flat_map(|p| p["jobs"].as_array().unwrap().clone())
            .filter(|j| j["site"] == site)
            .map(|j| {
                (j["start"].as_str().unwrap().into(), j["end"].as_str().unwrap().into(), j["cpus"].as_u64().unwrap())
            })
            .collect();
        let res = reservations(c, site).await;
        let mut got: Vec<(String, String, u64)> = res
            .iter()
            .filter(|r| r["state"] == "committed")
            .map(|r| {
                (r["start"].as_str().unwrap().into(), r["end"].as_str().unwrap().into(), r["cpus"].as_u64().unwrap())
            })
            .collect();
        want.sort();
        got.sort();
        assert_eq!(got, want, "{site}: the rebuilt calendar holds exactly the committed plans' jobs");
        // Peak usage over every reservation and hold.
        let mut events: Vec<(DateTime<Utc>, i64)> = res
            .iter()
            .flat_map(|r| {
                let cpus = r["cpus"].as_i64().unwrap();
                let at = |k: &str| r[k].as_str().unwrap().parse::<DateTime<Utc>>().unwrap();
                [(at("start"), cpus), (at("end"), -cpus)]
            })
            .collect();
        events.sort();
        let mut usage = 0;
        for (t, d) in events {
            usage += d;
            assert!(usage <= 16, "{site} overbooked at {t}: {usage} CPUs of 16");
        }
    }
}

#[tokio::test]
async fn a_crash_after_the_decision_keeps_the_plan_and_its_retry_books_nothing_more() {
    let _machine = machine::reserve("crash").await;
    let test_db = TestDb::new().await;
    let db = test_db.url.as_str();
    let dir = tempfile::tempdir().unwrap();
    let grid = write_grid(dir.path());
    let s = Server::start(db, Some(&grid), &[], Some("after-decision"));
    // 12 + 12 CPUs: one job per site, and the path between them.
    let body = pair("p1", 12);
    let r = post_plan(&s.api(), &body, "key-1").await;
    assert!(r.is_err(), "the server died before answering: {r:?}");
    s.wait_for_crash();

    // Restart without --grid: the grid comes from the database.
    let s = Server::start(db, None, &[], None);
    let all = plans(&s.api()).await;
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["status"], "committed", "the decision was durable: the plan stands");
    let id = all[0]["id"].as_str().unwrap().to_owned();
    check_consistent(&s.api(), std::slice::from_ref(&id)).await;
    // The client's retry finds the plan: booked once.
    let r = post_plan(&s.api(), &body, "key-1").await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(r.json::<Value>().await.unwrap()["id"], id.as_str());
    assert_eq!(plans(&s.api()).await.len(), 1);
    assert_eq!(holds_outstanding(&s.api()).await, 0);
    assert_eq!(journal_states(db).await, HashMap::from([("committed".into(), 3)]), "2 jobs + 1 path");
}

#[tokio::test]
async fn a_crash_between_prepare_and_commit_books_nothing_and_the_retry_plans_again() {
    let _machine = machine::reserve("crash").await;
    let test_db = TestDb::new().await;
    let db = test_db.url.as_str();
    let dir = tempfile::tempdir().unwrap();
    let grid = write_grid(dir.path());
    let s = Server::start(db, Some(&grid), &[], Some("after-prepare"));
    assert!(post_plan(&s.api(), &pair("p1", 16), "key-1").await.is_err());
    s.wait_for_crash();

    let s = Server::start(db, None, &[], None);
    assert!(plans(&s.api()).await.is_empty(), "no decision, no plan (presumed abort)");
    assert!(reservations(&s.api(), "s1").await.is_empty(), "the holds died with the process");
    assert_eq!(holds_outstanding(&s.api()).await, 0);
    // The key's claim died with its request: the retry plans and books, all 16 CPUs free.
    let r = post_plan(&s.api(), &pair("p1", 16), "key-1").await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let plan: Value = r.json().await.unwrap();
    assert_eq!(plan["status"], "committed", "{plan}");
    check_consistent(&s.api(), &[plan["id"].as_str().unwrap().to_owned()]).await;
}

#[tokio::test]
async fn a_prepared_hold_survives_kill_9_until_its_lease_ends() {
    let _machine = machine::reserve("crash").await;
    let test_db = TestDb::new().await;
    let db = test_db.url.as_str();
    let dir = tempfile::tempdir().unwrap();
    let grid = write_grid(dir.path());
    let (start, end) = (Utc::now() + chrono::Duration::hours(2), Utc::now() + chrono::Duration::hours(3));
    let hold = |cpus: u32| json!({"cpus": cpus, "start": ts(start), "end": ts(end)});
    let prepare = |api: ApiClient, body: Value| async move { api.post("/v1/sites/s1/holds", SERVICE, &body).await };

    // Prepare-OK for all 16 CPUs, then kill -9 before commit.
    let s = Server::start(db, Some(&grid), &[], None);
    let r = prepare(s.api(), hold(16)).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let h1 = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    s.kill();

    // The promise holds across the crash: the hold is back, its CPUs are taken.
    let s = Server::start(db, None, &[], None);
    let res = reservations(&s.api(), "s1").await;
    assert_eq!(res.len(), 1);
    assert_eq!((res[0]["hold"].as_str().unwrap(), &res[0]["state"]), (h1.as_str(), &json!("held")));
    assert_eq!(prepare(s.api(), hold(1)).await.status(), StatusCode::CONFLICT, "no overbooking");
    assert_eq!(holds_outstanding(&s.api()).await, 1);
    for _ in 0..2 {
        let r = s.api().post_empty(&format!("/v1/holds/{h1}/commit"), SERVICE).await;
        assert_eq!(r.status(), StatusCode::OK, "commit after the restart, idempotent");
    }
    let r = s.api().post_empty(&format!("/v1/holds/{h1}/abort"), SERVICE).await;
    assert_eq!(r.status(), StatusCode::CONFLICT, "abort after commit");

    // A second hold on the other site, never committed: kill -9, restart, wait out its lease.
    let r = s.api().post("/v1/sites/s2/holds", SERVICE, &hold(4)).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    s.kill();
    let s = Server::start(db, None, &[], None);
    assert_eq!(holds_outstanding(&s.api()).await, 1, "the hold is back");
    tokio::time::sleep(Duration::from_secs(LEASE_S as u64 + 1)).await;
    assert_eq!(holds_outstanding(&s.api()).await, 0, "no orphan hold after the lease");
    assert!(reservations(&s.api(), "s2").await.is_empty());
    assert_eq!(reservations(&s.api(), "s1").await.len(), 1, "the committed one stays");
    // The sweeper marks it in the journal too (it runs every min(lease, 10) s).
    tokio::time::sleep(Duration::from_secs(LEASE_S as u64)).await;
    let states = journal_states(db).await;
    assert_eq!(states.get("held"), None, "{states:?}");
    assert_eq!(states.get("expired"), Some(&1), "{states:?}");
    assert_eq!(states.get("committed"), Some(&1), "{states:?}");
    // And after yet another restart nothing comes back.
    s.kill();
    let s = Server::start(db, None, &[], None);
    assert_eq!(holds_outstanding(&s.api()).await, 0);
    assert_eq!(reservations(&s.api(), "s1").await.len(), 1);
}

#[tokio::test]
async fn kill_9_under_load_loses_no_committed_plan_and_overbooks_nothing() {
    let _machine = machine::reserve("crash").await;
    let test_db = TestDb::new().await;
    let db = test_db.url.as_str();
    let dir = tempfile::tempdir().unwrap();
    let grid = write_grid(dir.path());
    let mut seen_committed = Vec::new();
    let mut sent = 0usize;
    for round in 0..3u64 {
        let s = Server::start(db, if round == 0 { Some(&grid) } else { None }, &[], None);
        // 6 clients plan as fast as they can; the server is killed mid-stream.
        let clients: Vec<_> = (0..6)
            .map(|k| {
                let api = s.api();
                tokio::spawn(async move {
                    let mut committed = Vec::new();
                    let mut n = 0;
                    loop {
                        let body = pair(&format!("r{round}-{k}-{n}"), 2 + (n as u32 % 5));
                        let Ok(r) = post_plan(&api, &body, &format!("k{round}-{k}-{n}")).await else {
                            return (committed, n); // the server is gone
                        };
                        n += 1;
                        if r.status() != StatusCode::CREATED {
                            continue;
                        }
                        let Ok(p) = r.json::<Value>().await else { return (committed, n) };
                        if p["status"] == "committed" {
                            committed.push(p["id"].as_str().unwrap().to_owned());
                        }
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(700 + 300 * round)).await;
        s.kill();
        for t in clients {
            let (committed, n) = t.await.unwrap();
            seen_committed.extend(committed);
            sent += n;
        }
        let s = Server::start(db, None, &[], None);
        check_consistent(&s.api(), &seen_committed).await;
        assert_eq!(holds_outstanding(&s.api()).await, 0, "round {round}");
        s.kill();
    }
    assert!(seen_committed.len() >= 10, "the load committed plans: {} of {sent}", seen_committed.len());
}

#[tokio::test]
async fn a_separated_planner_recovers_its_in_doubt_transactions_and_participants_keep_their_holds() {
    let _machine = machine::reserve("crash").await;
    let test_db = TestDb::new().await;
    let db = test_db.url.as_str();
    let dir = tempfile::tempdir().unwrap();
    let grid = write_grid(dir.path());
    // Participants on the shared database; the planner talks to them over HTTP.
    // Leases of 8 s: long enough for the restarts of step 1, short enough to wait out.
    let lis = |site: &'static str| ["--role", "lis", "--site", site, "--lease-s", "8"];
    let gis = Server::start(db, Some(&grid), &["--role", "gis"], None);
    let nis = Server::start(db, Some(&grid), &["--role", "nis", "--lease-s", "8"], None);
    let s1 = Server::start(db, Some(&grid), &lis("s1"), None);
    let s2 = Server::start(db, Some(&grid), &lis("s2"), None);
    let (s1_url, s2_url, nis_url) = (s1.url.clone(), s2.url.clone(), nis.url.clone());
    let planner_args = |gis: &str| {
        vec![
            "--role".to_owned(),
            "planner".into(),
            "--gis".into(),
            gis.to_owned(),
            "--nis".into(),
            nis_url.clone(),
            "--lis".into(),
            format!("s1={s1_url}"),
            "--lis".into(),
            format!("s2={s2_url}"),
            "--claim-lease-s".into(),
            "2".into(),
        ]
    };
    let args = planner_args(&gis.url);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    // 1. The planner dies right after logging its decision: the participants hold durable
    //    holds, and the restarted planner commits them.
    // 12 + 12 CPUs: one job per site, and the path between them.
    let p = Server::start(db, None, &args, Some("after-decision"));
    assert!(post_plan(&p.api(), &pair("p1", 12), "key-1").await.is_err());
    p.wait_for_crash();
    let held = reservations(&s1.api(), "s1").await;
    assert_eq!(held.len(), 1);
    assert_eq!(held[0]["state"], "held", "prepared, not committed yet");
    // The LIS crashes too, between prepare and commit: its hold survives.
    s1.kill();
    let mut restart = lis("s1").to_vec();
    restart.extend(["--listen", &s1_url["http://".len()..]]);
    let s1 = Server::start(db, None, &restart, None);
    assert_eq!(reservations(&s1.api(), "s1").await[0]["state"], "held");
    let p = Server::start(db, None, &args, None);
    // The dead planner's claim on the transaction lapses (--claim-lease-s 2 below), then
    // the restarted planner's recovery loop takes it over and commits it.
    let mut all = plans(&p.api()).await;
    for _ in 0..100 {
        if all.len() == 1 && all[0]["status"] != "pending" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        all = plans(&p.api()).await;
    }
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["status"], "committed");
    for (server, site) in [(&s1, "s1"), (&s2, "s2")] {
        let r = reservations(&server.api(), site).await;
        assert_eq!(r.len(), 1, "{site}");
        assert_eq!(r[0]["state"], "committed", "{site}: recovery sent the commit");
    }

    // 2. The planner dies after prepare, before any decision: the participants' holds end
    //    at their lease (presumed abort), and nothing is committed.
    p.kill();
    let p = Server::start(db, None, &args, Some("after-prepare"));
    assert!(post_plan(&p.api(), &pair("p2", 12), "key-2").await.is_err());
    p.wait_for_crash();
    assert_eq!(holds_outstanding(&s1.api()).await + holds_outstanding(&s2.api()).await, 2, "p2's jobs are held");
    tokio::time::sleep(Duration::from_secs(9)).await;
    for server in [&s1, &s2, &nis] {
        let base = &server.url;
        assert_eq!(holds_outstanding(&server.api()).await, 0, "{base}: no orphan hold after the lease");
    }
    let p = Server::start(db, None, &args, None);
    assert_eq!(plans(&p.api()).await.len(), 1, "p2 was never decided");
    for (server, site) in [(&s1, "s1"), (&s2, "s2")] {
        assert_eq!(reservations(&server.api(), site).await.len(), 1, "{site}: only p1");
    }
    // 3. The dead planner's claim on key-2 lapsed with it: the client's retry plans within
    //    seconds (it used to wait w_interval + lease, 32 min by default).
    let started = std::time::Instant::now();
    let plan = loop {
        let r = post_plan(&p.api(), &pair("p2", 4), "key-2").await.unwrap();
        if r.status() != StatusCode::CONFLICT {
            assert_eq!(r.status(), StatusCode::CREATED);
            break r.json::<Value>().await.unwrap();
        }
        assert!(started.elapsed() < Duration::from_secs(10), "key-2 still claimed after 10 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(plan["status"], "committed", "{plan}");
    drop((gis, nis, s2));
}

/// Issue 28, point 1: one token per planner (what docs/deploy.md recommends). Planner A
/// crashes right after its decision; planner B, with a token of its own, takes the
/// transaction over and settles the plan as committed within seconds (it used to be refused
/// with 403 "belongs to another principal" for as long as A was down), the client's key then
/// answers the plan, and B may cancel it too.
#[tokio::test]
async fn another_planner_with_its_own_token_settles_a_crashed_planners_plan_within_seconds() {
    let _machine = machine::reserve("crash").await;
    // Right after the decision (no commit sent), and once every part is committed (the end
    // not recorded): either way the plan is settled by the other planner.
    for point in ["after-decision", "after-commit"] {
        settled_by_another_planner(point).await;
    }
}

async fn settled_by_another_planner(point: &str) {
    use coreserve::api::auth::Roles;
    let test_db = TestDb::new().await;
    let db = test_db.url.as_str();
    let dir = tempfile::tempdir().unwrap();
    let grid = write_grid(dir.path());
    let lis = |site: &'static str| ["--role", "lis", "--site", site, "--lease-s", "30"];
    let gis = Server::start(db, Some(&grid), &["--role", "gis"], None);
    let nis = Server::start(db, Some(&grid), &["--role", "nis", "--lease-s", "30"], None);
    let s1 = Server::start(db, Some(&grid), &lis("s1"), None);
    let s2 = Server::start(db, Some(&grid), &lis("s2"), None);
    let planner = Roles { planner: true, service: true, admin: false };
    let (token_a, _) = coreserve::cli::token_create(db, "planner-a", planner, None).await.unwrap();
    let (token_b, _) = coreserve::cli::token_create(db, "planner-b", planner, None).await.unwrap();
    let args = |token: &str| {
        let mut a: Vec<String> = ["--role", "planner", "--gis", &gis.url, "--nis", &nis.url, "--claim-lease-s", "2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(["--lis".into(), format!("s1={}", s1.url), "--lis".into(), format!("s2={}", s2.url)]);
        a.extend(["--participant-token".into(), token.to_owned()]);
        a
    };
    let (args_a, args_b) = (args(&token_a), args(&token_b));
    let args_a: Vec<&str> = args_a.iter().map(String::as_str).collect();
    let args_b: Vec<&str> = args_b.iter().map(String::as_str).collect();
    let b = Server::start(db, None, &args_b, None);
    let a = Server::start(db, None, &args_a, Some(point));
    let body = pair("p1", 12);
    assert!(post_plan(&a.api(), &body, "key-1").await.is_err());
    a.wait_for_crash();
    let crashed = std::time::Instant::now();

    // A stays down. B's recovery loop takes the transaction over once A's claim lapses (2 s).
    let plan = loop {
        let all = plans(&b.api()).await;
        assert_eq!(all.len(), 1, "{all:?}");
        if all[0]["status"] == "committed" {
            break all[0].clone();
        }
        assert_eq!(all[0]["status"], "pending", "{all:?}");
        assert!(crashed.elapsed() < Duration::from_secs(10), "{point}: still pending after 10 s with planner A down");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for (server, site) in [(&s1, "s1"), (&s2, "s2")] {
        let r = reservations(&server.api(), site).await;
        assert_eq!(r.len(), 1, "{site}");
        assert_eq!(r[0]["state"], "committed", "{point}, {site}: committed");
    }
    // The client's key, retried at B, answers the plan: booked once.
    let r = post_plan(&b.api(), &body, "key-1").await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(r.json::<Value>().await.unwrap()["id"], plan["id"]);
    assert!(crashed.elapsed() < Duration::from_secs(10), "the key answered {:?} after the crash", crashed.elapsed());
    // And B may cancel what A booked: the holds belong to the deployment's planners.
    let id = plan["id"].as_str().unwrap();
    let r = b.api().client.delete(format!("{}/v1/plans/{id}", b.url)).bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());
    for (server, site) in [(&s1, "s1"), (&s2, "s2")] {
        assert!(reservations(&server.api(), site).await.is_empty(), "{site}: released");
    }
}

/// Issue 49, point 3: planner A dies after deciding a `PATCH` (its decision logged, at
/// `after-decision` before any commit, at `after-commit` with every part committed and the end
/// not recorded). The client's retry with the same `Idempotency-Key` through planner B never
/// answers 200 with the plan's old shape: `503 plan-in-doubt` with `Retry-After` while the
/// modification is unsettled (and `GET` shows the old shape only with `modification_pending`), then,
/// once B's recovery has finished it, 200 with the new shape, which is what the sites hold.
#[tokio::test]
async fn a_retried_modification_in_doubt_is_answered_in_doubt_never_with_the_old_shape() {
    let _machine = machine::reserve("crash").await;
    for point in ["after-decision", "after-commit"] {
        modification_in_doubt_through_another_planner(point).await;
    }
}

async fn modification_in_doubt_through_another_planner(point: &str) {
    use coreserve::api::auth::Roles;
    let test_db = TestDb::new().await;
    let db = test_db.url.as_str();
    let dir = tempfile::tempdir().unwrap();
    let grid = write_grid(dir.path());
    let lis = |site: &'static str| ["--role", "lis", "--site", site, "--lease-s", "30"];
    let gis = Server::start(db, Some(&grid), &["--role", "gis"], None);
    let nis = Server::start(db, Some(&grid), &["--role", "nis", "--lease-s", "30"], None);
    let s1 = Server::start(db, Some(&grid), &lis("s1"), None);
    let s2 = Server::start(db, Some(&grid), &lis("s2"), None);
    let planner = Roles { planner: true, service: true, admin: false };
    let (token_a, _) = coreserve::cli::token_create(db, "planner-a", planner, None).await.unwrap();
    let (token_b, _) = coreserve::cli::token_create(db, "planner-b", planner, None).await.unwrap();
    let args = |token: &str| {
        let mut a: Vec<String> = ["--role", "planner", "--gis", &gis.url, "--nis", &nis.url, "--claim-lease-s", "3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(["--lis".into(), format!("s1={}", s1.url), "--lis".into(), format!("s2={}", s2.url)]);
        a.extend(["--participant-token".into(), token.to_owned()]);
        a
    };
    let (args_a, args_b) = (args(&token_a), args(&token_b));
    let args_a: Vec<&str> = args_a.iter().map(String::as_str).collect();
    let args_b: Vec<&str> = args_b.iter().map(String::as_str).collect();
    let b = Server::start(db, None, &args_b, None);
    let r = post_plan(&b.api(), &pair("p1", 12), "key-1").await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let plan: Value = r.json().await.unwrap();
    assert_eq!(plan["status"], "committed", "{plan}");
    let id = plan["id"].as_str().unwrap().to_owned();
    let at = |v: &Value| v.as_str().unwrap().parse::<DateTime<Utc>>().unwrap();
    let (old_end, new_end) = (at(&plan["jobs"][1]["end"]), at(&plan["jobs"][1]["start"]) + chrono::Duration::hours(2));
    let change = json!({"jobs": [{"name": "B", "duration_s": 7200}]});
    let patch = |base: &str| {
        let url = format!("{base}/v1/plans/{id}");
        b.api().client.patch(url).bearer_auth(ADMIN).header("Idempotency-Key", "mod-1").json(&change).send()
    };

    let a = Server::start(db, None, &args_a, Some(point));
    assert!(patch(&a.url).await.is_err(), "{point}: the request ends with planner A");
    a.wait_for_crash();
    let crashed = std::time::Instant::now();

    let mut in_doubt = 0;
    let modified = loop {
        let r = patch(&b.url).await.unwrap();
        let status = r.status();
        let retry_after = r.headers().get("retry-after").is_some();
        let body: Value = r.json().await.unwrap();
        if status == StatusCode::OK {
            break body;
        }
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{point}: {body}");
        assert!(body["type"].as_str().unwrap().ends_with(":plan-in-doubt"), "{point}: {body}");
        assert!(retry_after, "{point}: Retry-After");
        in_doubt += 1;
        let now: Value = b.api().json(&format!("/v1/plans/{id}"), ADMIN).await;
        if at(&now["jobs"][1]["end"]) == old_end {
            assert_eq!(now["modification_pending"], true, "{point}: the old shape shown as pending: {now}");
        }
        assert!(crashed.elapsed() < Duration::from_secs(20), "{point}: still in doubt 20 s after the crash");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(in_doubt > 0, "{point}: the retry right after the crash found the modification in doubt");
    assert_eq!(at(&modified["jobs"][1]["end"]), new_end, "{point}: 200 only with the new shape: {modified}");
    assert_eq!(modified["modification_pending"], false, "{point}: settled: {modified}");
    let now: Value = b.api().json(&format!("/v1/plans/{id}"), ADMIN).await;
    assert_eq!(at(&now["jobs"][1]["end"]), new_end, "{point}: {now}");
    let site = now["jobs"][1]["site"].as_str().unwrap().to_owned();
    let server = if site == "s1" { &s1 } else { &s2 };
    let ends: Vec<DateTime<Utc>> = reservations(&server.api(), &site)
        .await
        .iter()
        .filter(|r| r["state"] == "committed")
        .map(|r| at(&r["end"]))
        .collect();
    assert!(ends.contains(&new_end) && !ends.contains(&old_end), "{point}: {site} holds the new shape: {ends:?}");
    drop((gis, nis));
}
