//! The Slurm LIS against a real Slurm cluster (`support::slurm`: munged, slurmctld, slurmd
//! from Debian's packages; no mock, no fake scontrol): committed means booked in Slurm, what
//! Slurm already has is not sold again, and drift is visible (docs/protocol.md, "A LIS in
//! front of Slurm"). Site `s1` of the test grid (16 CPUs) fronts a 16-core partition; `s2`
//! and `s3` stay calendars.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use coreserve::api::ServeConfig;
use coreserve::protocol::http::HttpParticipant;
use coreserve::protocol::{ComputeHoldRequest, HoldLifecycle, Participant, ParticipantError, TxnId};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::support::slurm::SlurmCluster;
use crate::support::{in_hours, TestApp, ADMIN};

/// The test grid's Slurm site and its CPUs.
const SITE: &str = "s1";
const CPUS: u32 = 16;

/// The all-in-one service with `s1` in front of `cluster` (synchronised every `sync_s`),
/// plans starting 10 s after receipt, and `tweak`.
async fn app(cluster: &SlurmCluster, sync_s: u64, tweak: impl FnOnce(&mut ServeConfig)) -> TestApp {
    let config = cluster.config(sync_s);
    TestApp::spawn_with(|c| {
        c.slurm = vec![(SITE.into(), config)];
        c.w_interval_s = 10;
        tweak(c);
    })
    .await
}

/// One job of `cpus` linux CPUs for `duration_s`, policy `cost` (so `s1`, the cheapest linux
/// site, when it has room).
fn one_job(id: &str, cpus: u32, duration_s: i64) -> Value {
    json!({
        "id": id,
        "deadline": in_hours(6),
        "policy": "cost",
        "jobs": [{"name": "A", "os": "linux", "cpus": cpus, "offset_s": 0, "duration_s": duration_s}],
        "transfers": []
    })
}

fn time(v: &Value) -> i64 {
    v.as_str().unwrap().parse::<DateTime<Utc>>().unwrap().timestamp()
}

async fn submit(app: &TestApp, body: &Value) -> Value {
    let r = app.post("/v1/plans", ADMIN, body).await;
    assert_eq!(r.status(), StatusCode::CREATED, "{:?}", r.text().await);
    r.json().await.unwrap()
}

/// Polls `check` every 200 ms until it holds or `within` passes; true if it held.
async fn eventually(within: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    check().await
}

/// 1: a committed plan creates exactly its Slurm reservations (name, window, CPUs, user); a
/// job at a calendar-only site gets none.
#[tokio::test]
async fn a_committed_plan_is_booked_in_slurm() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 3600, |_| {}).await;
    // Two 12-CPU jobs: one at s1 (Slurm), one at s2 (a calendar).
    let plan = submit(&app, &crate::support::workflow()).await;
    assert_eq!(plan["status"], "committed", "{plan}");
    let jobs = plan["jobs"].as_array().unwrap();
    let at = |site: &str| jobs.iter().find(|j| j["site"] == site).unwrap_or_else(|| panic!("{plan}"));
    assert!(at("s2").get("reservation_name").is_none(), "a calendar site has no Slurm reservation: {plan}");
    let job = at(SITE);
    let name = job["reservation_name"].as_str().expect("the Slurm job's reservation name");
    let ours = cluster.ours();
    assert_eq!(ours.len(), 1, "exactly the plan's reservation: {ours:?}");
    let r = &ours[0];
    assert_eq!(r.name, name);
    assert_eq!((r.start, r.end, r.cpus), (time(&job["start"]), time(&job["end"]), 12));
    assert_eq!(r.users.as_deref(), Some("root"));
    assert_eq!(r.partition.as_deref(), Some("batch"));
    // The site's listing names it too.
    let listed = app.reservations(SITE).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["reservation_name"], name);
    // GET answers the same.
    let got = app.json(&format!("/v1/plans/{}", plan["id"].as_str().unwrap()), ADMIN).await;
    assert_eq!(got["jobs"], plan["jobs"]);
}

/// 2: a job submitted with `sbatch --reservation=NAME` runs inside the booked window.
#[tokio::test]
async fn sbatch_into_the_reservation_runs_inside_the_window() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 3600, |_| {}).await;
    let plan = submit(&app, &one_job("sbatch-1", 4, 300)).await;
    assert_eq!(plan["status"], "committed", "{plan}");
    let job = &plan["jobs"][0];
    assert_eq!(job["site"], SITE);
    let (start, end) = (time(&job["start"]), time(&job["end"]));
    let name = job["reservation_name"].as_str().unwrap();
    let out = cluster.dir().join("job.out");
    let sbatch = cluster.run(
        "sbatch",
        &[
            &format!("--reservation={name}"),
            "-n",
            "1",
            "--time=1",
            "-o",
            out.to_str().unwrap(),
            "--wrap",
            "date -u +%s; echo $SLURM_JOB_RESERVATION",
        ],
    );
    assert!(sbatch.status.success(), "sbatch: {}", String::from_utf8_lossy(&sbatch.stderr));
    let wait = Duration::from_secs((start - Utc::now().timestamp()).max(0) as u64 + 45);
    let ran = eventually(wait, async || std::fs::read_to_string(&out).is_ok_and(|t| t.lines().count() >= 2)).await;
    assert!(
        ran,
        "the job did not run within its window (squeue: {})",
        String::from_utf8_lossy(&cluster.run("squeue", &[]).stdout)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    let ran_at: i64 = lines.next().unwrap().trim().parse().unwrap();
    assert!(ran_at >= start && ran_at < end, "ran at {ran_at}, window [{start}, {end})");
    assert_eq!(lines.next().unwrap().trim(), name);
}

/// 3: a reservation made directly in Slurm (an administrator's maintenance) keeps the
/// planner off that capacity; one made after the last sync makes the commit fail, never a
/// `committed` answer without the Slurm reservation.
#[tokio::test]
async fn slurm_s_own_reservations_are_not_sold_again() {
    let cluster = SlurmCluster::start(CPUS);
    cluster.scontrol(&[
        "create",
        "reservation",
        "ReservationName=maint",
        "StartTime=now",
        "Duration=2-00:00:00",
        "Nodes=ALL",
        "Flags=MAINT,IGNORE_JOBS",
        "Users=root",
    ]);
    let app = app(&cluster, 3600, |_| {}).await;
    let plan = submit(&app, &one_job("maint-1", 4, 600)).await;
    assert_eq!(plan["status"], "committed", "{plan}");
    assert_eq!(plan["jobs"][0]["site"], "s2", "s1 is sold out in Slurm, so the cheapest site is passed over: {plan}");
    assert!(cluster.ours().is_empty());
    let m = app.metrics().await;
    assert!(m.contains("coreserve_slurm_foreign_reservations{site=\"s1\"} 1"), "{m}");

    // The race: Slurm sells the cores after the LIS's last sync (sync_s = 3600).
    cluster.scontrol(&["delete", "ReservationName=maint"]);
    let app = app_after_sync(&cluster).await;
    cluster.scontrol(&[
        "create",
        "reservation",
        "ReservationName=admin-late",
        "StartTime=now",
        "Duration=2-00:00:00",
        "PartitionName=batch",
        "CoreCnt=16",
        "Users=root",
    ]);
    let plan = submit(&app, &one_job("race-1", 16, 600)).await;
    // Slurm refused s1's reservation: the plan is planned again without that window (issue
    // 45), so it ends at s2 (no Slurm there) or rejected, never committed at s1.
    let at_s1 = plan["status"] == "committed" && plan["jobs"][0]["site"] == SITE;
    assert!(!at_s1, "Slurm did not make the reservation: {plan}");
    if plan["status"] != "committed" {
        assert!(plan["reason"].as_str().unwrap().contains("local scheduler refused"), "{plan}");
    }
    assert!(cluster.ours().is_empty(), "{:?}", cluster.ours());
    assert!(app.reservations(SITE).await.is_empty(), "the refused hold is given back");
}

/// A service on `cluster` whose first (and, for an hour, only) sync has run.
async fn app_after_sync(cluster: &SlurmCluster) -> TestApp {
    app(cluster, 3600, |_| {}).await
}

/// 4: cancel deletes the Slurm reservation; an abort, and a lease that lapses after persist,
/// leave nothing in Slurm.
#[tokio::test]
async fn cancel_abort_and_lease_expiry_leave_nothing_in_slurm() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 1, |c| c.lease_s = 3).await;
    let plan = submit(&app, &one_job("cancel-1", 8, 600)).await;
    assert_eq!(plan["status"], "committed", "{plan}");
    assert_eq!(cluster.ours().len(), 1);
    let id = plan["id"].as_str().unwrap();
    let r = app.call(reqwest::Method::DELETE, &format!("/v1/plans/{id}"), Some(ADMIN), None).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(cluster.ours().is_empty(), "cancel deletes: {:?}", cluster.ours());

    // The participant protocol, as a remote planner speaks it.
    let s1 = HttpParticipant::site(&app.base, SITE, Some(ADMIN.to_owned()));
    let t0 = Utc::now().timestamp() + 600;
    let req = ComputeHoldRequest {
        replaces: None,
        reservation_name: None,
        txn: TxnId::new(),
        site: SITE.into(),
        cpus: 4,
        start: t0,
        end: t0 + 600,
        gpus: None,
        user: None,
    };
    let h = s1.prepare(&req).await.unwrap();
    assert!(cluster.ours().is_empty(), "a tentative hold is not in Slurm yet");
    s1.persist(&[h.id]).await.unwrap();
    assert_eq!(cluster.ours().len(), 1, "persist makes the reservation before the decision");
    s1.abort(h.id).await.unwrap();
    assert!(cluster.ours().is_empty(), "abort deletes it");

    let h = s1.prepare(&req).await.unwrap();
    s1.persist(&[h.id]).await.unwrap();
    assert_eq!(cluster.ours().len(), 1);
    // Nobody commits: the lease (3 s) lapses and the next sync deletes the stray.
    let gone = eventually(Duration::from_secs(15), async || cluster.ours().is_empty()).await;
    assert!(gone, "a lapsed hold's reservation stays in Slurm: {:?}", cluster.ours());
    assert!(app.metrics().await.contains("coreserve_slurm_reconciled_total{site=\"s1\",action=\"stray_deleted\"} 1"));
    assert_eq!(s1.commit(h.id).await, Err(ParticipantError::HoldExpired(h.id)));
}

/// 6: an administrator deletes a coreserve reservation: the plan reads `broken`, with the job
/// and the reason, within a sync and a drift round; it is never shown as committed again, and
/// can still be cancelled.
#[tokio::test]
async fn a_reservation_deleted_in_slurm_breaks_its_plan() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 1, |_| {}).await;
    let plan = submit(&app, &one_job("drift-1", 8, 600)).await;
    assert_eq!(plan["status"], "committed", "{plan}");
    let id = plan["id"].as_str().unwrap().to_owned();
    let name = plan["jobs"][0]["reservation_name"].as_str().unwrap().to_owned();
    cluster.scontrol(&["delete", &format!("ReservationName={name}")]);
    let path = format!("/v1/plans/{id}");
    let broken = eventually(Duration::from_secs(10), async || app.json(&path, ADMIN).await["status"] == "broken").await;
    let got = app.json(&path, ADMIN).await;
    assert!(broken, "{got}");
    let why = got["jobs"][0]["broken"].as_str().unwrap();
    assert!(why.contains(&name) && why.contains("deleted"), "{why}");
    let listed = app.plans(ADMIN, "?status=broken").await;
    assert_eq!(listed.len(), 1);
    assert!(app.plans(ADMIN, "?status=committed").await.is_empty(), "a broken plan is never listed as committed");
    assert!(app.metrics().await.contains("coreserve_slurm_broken_reservations{site=\"s1\"} 1"));
    let r = app.call(reqwest::Method::DELETE, &path, Some(ADMIN), None).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(app.json(&path, ADMIN).await["status"], "cancelled");
}

/// 6b: a node of a committed reservation goes down in Slurm: the plan reads `broken`, naming
/// the node and Slurm's reason.
#[tokio::test]
async fn a_node_going_down_breaks_the_plans_on_it() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 1, |_| {}).await;
    let plan = submit(&app, &one_job("node-1", 8, 600)).await;
    assert_eq!(plan["status"], "committed", "{plan}");
    cluster.scontrol(&["update", "NodeName=cs-node1", "State=DOWN", "Reason=disk-swap"]);
    let path = format!("/v1/plans/{}", plan["id"].as_str().unwrap());
    let broken = eventually(Duration::from_secs(10), async || app.json(&path, ADMIN).await["status"] == "broken").await;
    let got = app.json(&path, ADMIN).await;
    assert!(broken, "{got}");
    let why = got["jobs"][0]["broken"].as_str().unwrap();
    assert!(why.contains("cs-node1") && why.contains("DOWN") && why.contains("disk-swap"), "{why}");
}

/// 7: three planners race for the last CPUs of the Slurm site: Slurm never holds more than
/// the partition has, and every plan answered committed has its reservation.
#[tokio::test]
async fn racing_planners_never_overbook_the_partition() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 3600, |c| {
        c.planners = 3;
        c.workers = Some(2);
        c.max_in_flight_per_user = 16;
    })
    .await;
    // 12 requests of 6 CPUs for the same hour: at most two fit s1 at once (16 CPUs).
    let plans = futures::future::join_all((0..12).map(|i| {
        let body = one_job(&format!("race-{i}"), 6, 3600);
        let app = &app;
        async move { submit(app, &body).await }
    }))
    .await;
    let ours = cluster.ours();
    let mut points: Vec<i64> = ours.iter().flat_map(|r| [r.start, r.end]).collect();
    points.sort_unstable();
    for t in points {
        let used: u64 = ours.iter().filter(|r| r.start <= t && t < r.end).map(|r| r.cpus).sum();
        assert!(used <= u64::from(CPUS), "Slurm holds {used} CPUs at {t}: {ours:?}");
    }
    let booked_in_slurm: Vec<&str> = plans
        .iter()
        .filter(|p| p["status"] == "committed")
        .flat_map(|p| p["jobs"].as_array().unwrap())
        .filter(|j| j["site"] == SITE)
        .map(|j| j["reservation_name"].as_str().expect("a committed Slurm job names its reservation"))
        .collect();
    assert!(!booked_in_slurm.is_empty(), "{plans:?}");
    let mut names: Vec<&str> = ours.iter().map(|r| r.name.as_str()).collect();
    let mut expected = booked_in_slurm.clone();
    names.sort_unstable();
    expected.sort_unstable();
    assert_eq!(names, expected, "exactly the committed jobs' reservations, once each");
}

/// 8: slurmctld stopped: the LIS answers 503 (with Retry-After) to what needs Slurm, nothing
/// is answered committed at the Slurm site, and booking works again once it is back.
#[tokio::test]
async fn slurmctld_down_means_503_and_nothing_committed() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 1, |_| {}).await;
    cluster.stop_controller();
    let s1 = HttpParticipant::site(&app.base, SITE, Some(ADMIN.to_owned()));
    let t0 = Utc::now().timestamp() + 600;
    let req = ComputeHoldRequest {
        replaces: None,
        reservation_name: None,
        txn: TxnId::new(),
        site: SITE.into(),
        cpus: 4,
        start: t0,
        end: t0 + 600,
        gpus: None,
        user: None,
    };
    let h = s1.prepare(&req).await.unwrap();
    match s1.persist(&[h.id]).await {
        Err(ParticipantError::SchedulerUnavailable { site, .. }) => assert_eq!(site, SITE),
        other => panic!("persist with slurmctld down: {other:?}"),
    }
    s1.abort(h.id).await.unwrap();
    let r = app
        .post("/v1/participant/sites/s1/holds/persist", ADMIN, &json!({"holds": [s1.prepare(&req).await.unwrap().id]}))
        .await;
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.headers().get("retry-after").is_some());
    // The plan is not committed at s1: it goes to s2 (issue 45: s1 is left out), or is rejected.
    let plan = submit(&app, &one_job("down-1", 16, 600)).await;
    assert!(!(plan["status"] == "committed" && plan["jobs"][0]["site"] == SITE), "{plan}");
    cluster.start_controller();
    let plan = submit(&app, &one_job("up-1", 8, 600)).await;
    assert_eq!(plan["status"], "committed", "{plan}");
    assert_eq!(plan["jobs"][0]["site"], SITE);
    assert_eq!(cluster.ours().len(), 1, "{:?}", cluster.ours());
}

/// A user the Slurm site does not map is refused there with 403 naming the user; a grid
/// whose site and partition disagree does not start.
#[tokio::test]
async fn unmapped_users_and_mismatched_partitions_are_refused() {
    let cluster = SlurmCluster::start(CPUS);
    let mut config = cluster.config(3600);
    config.default_user = None;
    config.users.insert("alice".into(), "root".into());
    let app = TestApp::spawn_with(|c| c.slurm = vec![(SITE.into(), config)]).await;
    let bob = app.token("bob", true).await;
    let body = json!({"cpus": 2, "start": in_hours(1), "end": in_hours(2)});
    let r = app.post("/v1/sites/s1/holds", &bob, &body).await;
    let p = crate::support::problem(r, StatusCode::FORBIDDEN).await;
    assert!(p["detail"].as_str().unwrap().contains("`bob`"), "{p}");
    let alice = app.token("alice", true).await;
    assert_eq!(app.post("/v1/sites/s1/holds", &alice, &body).await.status(), StatusCode::CREATED);

    let small = SlurmCluster::start(8);
    let config = small.config(3600);
    let err = coreserve::api::Application::build(
        ServeConfig { listen: "127.0.0.1:0".into(), slurm: vec![(SITE.into(), config)], ..ServeConfig::default() },
        crate::support::grid(),
        Arc::new(coreserve::store::MemoryStore::new()),
    )
    .await
    .err()
    .expect("a 16-CPU site over an 8-CPU partition must not start")
    .to_string();
    assert!(err.contains("16") && err.contains("8") && err.contains("batch"), "{err}");
}

/// 5: `kill -9` of the all-in-one service at each step around Slurm's create (before it,
/// after it, after the decision), then a restart and the client's retry with its key: every
/// committed plan has its Slurm reservation exactly once, and no stray is left.
#[tokio::test]
async fn a_crash_around_slurm_s_create_leaves_each_booking_once() {
    use crate::support::serve::{Launch, Server, ADMIN as PROC_ADMIN};
    let _machine = crate::support::machine::reserve("crash").await;
    let cluster = SlurmCluster::start(CPUS);
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.json");
    std::fs::write(&grid, serde_json::to_string(&crate::support::grid()).unwrap()).unwrap();
    let slurm_args = |sync_s: &str| -> Vec<String> {
        [
            "--slurm",
            "s1=batch",
            "--slurm-conf",
            cluster.conf.to_str().unwrap(),
            "--slurm-default-user",
            "root",
            "--slurm-sync-s",
            sync_s,
        ]
        .map(str::to_owned)
        .to_vec()
    };
    for point in ["before-slurm-create", "after-slurm-create", "after-decision"] {
        let db = crate::support::TestDb::new().await;
        let first = Server::launch(&Launch {
            db: db.url.clone(),
            grid: Some(grid.clone()),
            args: slurm_args("3600"),
            crash_at: Some(point.into()),
            log: None,
        });
        let key = format!("crash-{point}");
        let body = one_job(&key, 8, 600);
        let url = format!("{}/v1/plans", first.url);
        let client = first.api().client;
        let answer = client.post(&url).bearer_auth(PROC_ADMIN).header("Idempotency-Key", &key).json(&body).send().await;
        assert!(answer.is_err(), "{point}: the process should have died before answering");
        first.wait_for_crash();
        let second = Server::launch(&Launch {
            db: db.url.clone(),
            grid: None,
            args: slurm_args("1"),
            crash_at: None,
            log: None,
        });
        let url = format!("{}/v1/plans", second.url);
        let mut plan = Value::Null;
        let settled = eventually(Duration::from_secs(30), async || {
            let r = client.post(&url).bearer_auth(PROC_ADMIN).header("Idempotency-Key", &key).json(&body).send().await;
            match r {
                Ok(r) if r.status() == StatusCode::CREATED => {
                    plan = r.json().await.unwrap();
                    true
                }
                _ => false,
            }
        })
        .await;
        assert!(settled, "{point}: the key never answered a plan");
        assert_eq!(plan["status"], "committed", "{point}: {plan}");
        let name = plan["jobs"][0]["reservation_name"].as_str().unwrap().to_owned();
        // One sync (1 s) deletes a stray of the crashed attempt, if any.
        let exactly_once = eventually(Duration::from_secs(10), async || {
            let ours = cluster.ours();
            ours.len() == 1 && ours[0].name == name
        })
        .await;
        assert!(exactly_once, "{point}: Slurm has {:?}, the plan names {name}", cluster.ours());
        drop(second);
        cluster.scontrol(&["delete", &format!("ReservationName={name}")]);
    }
}

/// Role-separated: a planner process books through a Slurm LIS process over HTTP (the
/// reservation is made at persist, before the decision) and learns of drift through the LIS's
/// drift endpoint.
#[tokio::test]
async fn a_role_separated_planner_books_through_a_slurm_lis() {
    use crate::support::serve::{Launch, Server, ADMIN as PROC_ADMIN};
    let _machine = crate::support::machine::reserve("roles").await;
    let cluster = SlurmCluster::start(CPUS);
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.json");
    std::fs::write(&grid, serde_json::to_string(&crate::support::grid()).unwrap()).unwrap();
    let db = crate::support::TestDb::new().await;
    let start = |args: Vec<String>| {
        Server::launch(&Launch { db: db.url.clone(), grid: Some(grid.clone()), args, crash_at: None, log: None })
    };
    let owned = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let gis = start(owned(&["--role", "gis"]));
    let nis = start(owned(&["--role", "nis"]));
    let conf = cluster.conf.to_str().unwrap().to_owned();
    let s1 = start(owned(&[
        "--role",
        "lis",
        "--site",
        "s1",
        "--slurm",
        "s1=batch",
        "--slurm-conf",
        &conf,
        "--slurm-default-user",
        "root",
        "--slurm-sync-s",
        "1",
    ]));
    let s2 = start(owned(&["--role", "lis", "--site", "s2"]));
    let s3 = start(owned(&["--role", "lis", "--site", "s3"]));
    let lis = format!("s1={},s2={},s3={}", s1.url, s2.url, s3.url);
    let planner = Server::launch(&Launch {
        db: db.url.clone(),
        grid: None,
        args: owned(&["--role", "planner", "--gis", &gis.url, "--nis", &nis.url, "--lis", &lis]),
        crash_at: None,
        log: None,
    });
    let api = planner.api();
    let r = api.post("/v1/plans", PROC_ADMIN, &one_job("separated-1", 8, 600)).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let plan: Value = r.json().await.unwrap();
    assert_eq!(plan["status"], "committed", "{plan}");
    assert_eq!(plan["jobs"][0]["site"], SITE);
    let name = plan["jobs"][0]["reservation_name"].as_str().expect("named").to_owned();
    let ours = cluster.ours();
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert_eq!(ours[0].name, name);
    cluster.scontrol(&["delete", &format!("ReservationName={name}")]);
    let path = format!("/v1/plans/{}", plan["id"].as_str().unwrap());
    let broken =
        eventually(Duration::from_secs(15), async || api.json(&path, PROC_ADMIN).await["status"] == "broken").await;
    assert!(broken, "{}", api.json(&path, PROC_ADMIN).await);
}

/// Site autonomy: the Slurm site's LIS runs on a PostgreSQL database of its own, with no token
/// of the planners in it; it trusts the planners by the CA that signed their client
/// certificates (`--tls-client-ca` with `--trust-client-certificates`). A planner on another
/// database books through it; one without a certificate cannot reach it.
#[tokio::test]
async fn a_planner_books_a_slurm_site_on_another_database_by_certificate() {
    use coreserve::api::config::{RemoteServices, Role, TlsFiles};
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    const BOOT: &str = "autonomy-bootstrap-token";
    let cluster = SlurmCluster::start(CPUS);
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, pem: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, pem).unwrap();
        p
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_pem = write("ca.pem", ca.self_signed(&ca_key).unwrap().pem());
    let issuer = Issuer::new(ca, ca_key);
    let leaf = |name: &str, cn: &str, sans: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(sans).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        let cert = p.signed_by(&key, &issuer).unwrap();
        TlsFiles {
            cert: write(&format!("{name}.pem"), cert.pem()),
            key: write(&format!("{name}-key.pem"), key.serialize_pem()),
        }
    };
    let server = leaf("server", "lis-s1", vec!["localhost".into(), "127.0.0.1".into()]);
    let client = leaf("client", "planner-east", vec![]);

    // The Slurm site: its own database, no planner token in it.
    let slurm = cluster.config(3600);
    let (ca_for_lis, server_files) = (ca_pem.clone(), server.clone());
    let s1 = TestApp::spawn_with(|c| {
        c.role = Role::Lis { site: SITE.into() };
        c.slurm = vec![(SITE.into(), slurm)];
        c.tls = Some(server_files);
        c.tls_client_ca = Some(ca_for_lis);
        c.trust_client_certificates = true;
    })
    .await;
    let plain = |role: Role| {
        TestApp::memory(crate::support::grid(), move |c| {
            c.role = role;
            c.service_token = Some(BOOT.into());
        })
    };
    let (s2, s3, nis, gis) = (
        plain(Role::Lis { site: "s2".into() }).await,
        plain(Role::Lis { site: "s3".into() }).await,
        plain(Role::Nis).await,
        plain(Role::Gis).await,
    );
    let remote = RemoteServices {
        gis: gis.base.clone(),
        nis: nis.base.clone(),
        lis: vec![
            (SITE.into(), format!("https://localhost:{}", s1.port)),
            ("s2".into(), s2.base.clone()),
            ("s3".into(), s3.base.clone()),
        ],
    };
    let planner_with = |identity: Option<TlsFiles>| {
        let (remote, ca) = (remote.clone(), ca_pem.clone());
        TestApp::spawn_with(move |c| {
            c.role = Role::Planner(remote);
            c.service_token = Some(BOOT.into());
            c.tls_ca = Some(ca);
            c.tls_client = identity;
        })
    };
    let east = planner_with(Some(client)).await;
    let plan = submit(&east, &one_job("autonomy-1", 8, 600)).await;
    assert_eq!(plan["status"], "committed", "{plan}");
    assert_eq!(plan["jobs"][0]["site"], SITE, "{plan}");
    let name = plan["jobs"][0]["reservation_name"].as_str().unwrap();
    assert_eq!(cluster.ours().iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), [name]);
    assert_ne!(s1.db_url(), east.db_url(), "two databases");

    // Without a certificate (and with a token the site does not know), s1 is out of reach.
    let anonymous = planner_with(None).await;
    let plan = submit(&anonymous, &one_job("autonomy-2", 8, 600)).await;
    assert_ne!(plan["jobs"][0]["site"], SITE, "{plan}");
    assert_eq!(cluster.ours().len(), 1);
}

/// Issues 25 and 45: a job modified at the Slurm site is booked in Slurm as modified, in its
/// reservation, under its name (changed in place, never made beside it with `Flags=OVERLAP`):
/// on a full partition (16 of 16 cores) it is made longer; a change the site cannot take
/// leaves Slurm as it was.
#[tokio::test]
async fn a_modified_job_keeps_its_reservation_in_slurm() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 3600, |_| {}).await;
    let plan = submit(&app, &one_job("m1", CPUS, 3600)).await;
    assert_eq!((plan["status"].as_str(), plan["jobs"][0]["site"].as_str()), (Some("committed"), Some(SITE)));
    let name = plan["jobs"][0]["reservation_name"].as_str().unwrap().to_owned();
    let id = plan["id"].as_str().unwrap();
    let path = format!("/v1/plans/{id}");

    let longer = json!({"jobs": [{"name": "A", "duration_s": 7200}]});
    let r = app.call(reqwest::Method::PATCH, &path, Some(ADMIN), Some(&longer)).await;
    assert_eq!(r.status(), StatusCode::OK);
    let modified: Value = r.json().await.unwrap();
    let job = &modified["jobs"][0];
    assert_eq!(job["reservation_name"], name.as_str(), "the job keeps its reservation: {modified}");
    let ours = cluster.ours();
    assert_eq!(ours.len(), 1, "one reservation, changed in place: {ours:?}");
    assert_eq!(ours[0].name, name);
    assert_eq!((ours[0].start, ours[0].end, ours[0].cpus), (time(&job["start"]), time(&job["end"]), 16));
    assert_eq!(time(&job["end"]) - time(&job["start"]), 7200);
    assert!(ours[0].flags.iter().all(|f| f != "OVERLAP"), "{ours:?}");

    // More cores than the partition has: refused, and Slurm keeps exactly the modified one.
    let wider = json!({"jobs": [{"name": "A", "cpus": 20}]});
    let r = app.call(reqwest::Method::PATCH, &path, Some(ADMIN), Some(&wider)).await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let after = cluster.ours();
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!((after[0].name.as_str(), after[0].end, after[0].cpus), (name.as_str(), time(&job["end"]), 16));
    let listed = app.reservations(SITE).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["reservation_name"], name.as_str());
}

/// Syncs run back to back while a plan is modified again and again: none of them judges a
/// reservation between a modification's commit (the hold swapped, no longer pending) and
/// Slurm's shrink from both shapes to the new one, so nothing is taken for drift and the plan
/// stays committed. Found by the engine test: two reservations of a workflow whose early ends
/// the Snakemake plugin followed read "changed in Slurm" (still grown) and broke its plan.
#[tokio::test]
async fn syncs_during_modifications_take_no_grown_reservation_for_drift() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 3600, |_| {}).await;
    let plan = submit(&app, &one_job("race", 4, 3600)).await;
    let path = format!("/v1/plans/{}", plan["id"].as_str().unwrap());
    let lis = app.state.lis(SITE).expect("s1 is a Slurm site").clone();
    let stop = Arc::new(AtomicBool::new(false));
    let syncing = tokio::spawn({
        let stop = stop.clone();
        async move {
            let (mut syncs, mut broken, mut strays) = (0, 0, 0);
            while !stop.load(Ordering::Relaxed) {
                let report = lis.sync().await.expect("Slurm answers");
                (syncs, broken, strays) = (syncs + 1, broken + report.newly_broken, strays + report.strays_deleted);
            }
            (syncs, broken, strays)
        }
    });
    let mut last = plan;
    for i in 0..12 {
        let duration_s = if i % 2 == 0 { 3000 } else { 3600 };
        let change = json!({"jobs": [{"name": "A", "duration_s": duration_s}]});
        let r = app.call(reqwest::Method::PATCH, &path, Some(ADMIN), Some(&change)).await;
        assert_eq!(r.status(), StatusCode::OK, "modification {i}");
        last = r.json().await.unwrap();
        assert_eq!(last["status"], "committed", "modification {i}: {last}");
    }
    stop.store(true, Ordering::Relaxed);
    let (syncs, broken, strays) = syncing.await.unwrap();
    assert!(syncs >= 12, "only {syncs} syncs ran beside 12 modifications");
    assert_eq!((broken, strays), (0, 0), "reservations broken, strays deleted over {syncs} syncs");
    let now: Value = app.get(&path, ADMIN).await.json().await.unwrap();
    assert_eq!(now["status"], "committed", "{now}");
    let job = &last["jobs"][0];
    let ours = cluster.ours();
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert_eq!((ours[0].start, ours[0].end, ours[0].cpus), (time(&job["start"]), time(&job["end"]), 4));
}

/// The one job of committed `plan` at `s1`, for a change made at the participant by hand:
/// its reservation's name, start and end, and `s1` over HTTP with the replacement of its hold
/// by one of `cpus` CPUs over `[start, end)` in transaction `txn`.
struct HandChange {
    name: String,
    start: i64,
    end: i64,
    s1: HttpParticipant<coreserve::protocol::Compute>,
    old: coreserve::protocol::HoldId,
}

impl HandChange {
    async fn of(app: &TestApp, plan: &Value) -> HandChange {
        assert_eq!(plan["status"], "committed", "{plan}");
        let job = &plan["jobs"][0];
        let listed = app.reservations(SITE).await;
        HandChange {
            name: job["reservation_name"].as_str().unwrap().to_owned(),
            start: time(&job["start"]),
            end: time(&job["end"]),
            s1: HttpParticipant::site(&app.base, SITE, Some(ADMIN.to_owned())),
            old: serde_json::from_value(listed[0]["hold"].clone()).unwrap(),
        }
    }

    fn replacement(&self, txn: TxnId, cpus: u32, start: i64, end: i64) -> ComputeHoldRequest {
        ComputeHoldRequest {
            replaces: Some(self.old),
            reservation_name: None,
            txn,
            site: SITE.into(),
            cpus,
            start,
            end,
            gpus: None,
            user: None,
        }
    }
}

/// A modification that ends undecided after Slurm grew the reservation to both shapes (its
/// replacement hold aborted while Slurm grew it, or its lease lapsed) gives the reservation back
/// its own shape, and the plan stays committed. Found by running a workflow through the
/// Snakemake plugin: an extension refused at another site left a job's reservation grown, the
/// next sync took that for drift and the whole plan read `broken`.
#[tokio::test]
async fn an_undecided_modification_gives_the_reservation_back_its_shape() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 1, |c| c.lease_s = 3).await;
    let plan = submit(&app, &one_job("undecided-1", 4, 600)).await;
    let change = HandChange::of(&app, &plan).await;
    let (name, start, end, s1) = (change.name.clone(), change.start, change.end, &change.s1);
    let longer = |txn| change.replacement(txn, 4, start, end + 120);
    let shape = || cluster.ours().iter().map(|r| (r.name.clone(), r.start, r.end, r.cpus)).collect::<Vec<_>>();
    let own = vec![(name.clone(), start, end, 4)];
    let path = format!("/v1/plans/{}", plan["id"].as_str().unwrap());
    // Committed (or active, once its window began), never broken.
    let committed = async || {
        let p = app.json(&path, ADMIN).await;
        ["committed", "active"].iter().any(|s| p["status"] == *s) && p["jobs"][0].get("broken").is_none()
    };

    // Grown at persist, then nobody decides: the lease (3 s) lapses.
    let h = s1.prepare(&longer(TxnId::new())).await.unwrap();
    s1.persist(&[h.id]).await.unwrap();
    assert_eq!(shape(), vec![(name.clone(), start, end + 120, 4)], "persist grows the reservation to both shapes");
    let back = eventually(Duration::from_secs(20), async || shape() == own).await;
    assert!(back, "a lapsed modification left the reservation grown: {:?}", shape());
    tokio::time::sleep(Duration::from_secs(3)).await; // two more syncs
    assert!(committed().await, "{}", app.json(&path, ADMIN).await);

    // Aborted while Slurm grows it (the coordinator's abort racing the persist).
    for _ in 0..3 {
        let h = s1.prepare(&longer(TxnId::new())).await.unwrap();
        let ids = [h.id];
        let (_, aborted) = tokio::join!(s1.persist(&ids), async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            s1.abort(h.id).await
        });
        aborted.unwrap();
        let back = eventually(Duration::from_secs(10), async || shape() == own).await;
        assert!(back, "an aborted modification left the reservation grown: {:?}", shape());
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(committed().await, "{}", app.json(&path, ADMIN).await);
    }
}

/// A job moved later by a modification whose reservation begins between persist (Slurm's
/// reservation grown to both shapes) and commit (shrunk to the new one): Slurm 22.05 cannot move
/// a started reservation's start, so the shrink keeps it and sets the new end, and the hold is
/// not broken. Found running a workflow through the Snakemake plugin: an extension moved a
/// successor whose window began while the change was decided; the commit's shrink was refused,
/// the plan read `broken` and the engine re-planned half the workflow. Then modified again
/// (below).
#[tokio::test]
async fn a_job_moved_later_whose_reservation_began_meanwhile_keeps_its_start() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 1, |c| c.lease_s = 60).await;
    let plan = submit(&app, &job_at("moved-1", 4, 600, Utc::now().timestamp() + 12)).await;
    let change = HandChange::of(&app, &plan).await;
    let (name, start, end, s1) = (change.name.clone(), change.start, change.end, &change.s1);
    let later = change.replacement(TxnId::new(), 4, start + 60, end + 60);
    let shape = || cluster.ours().iter().map(|r| (r.name.clone(), r.start, r.end, r.cpus)).collect::<Vec<_>>();
    let h = s1.prepare(&later).await.unwrap();
    s1.persist(&[h.id]).await.unwrap();
    assert_eq!(shape(), vec![(name.clone(), start, end + 60, 4)], "persist grows the reservation to both shapes");
    let wait = (start - Utc::now().timestamp() + 2).max(0) as u64;
    tokio::time::sleep(Duration::from_secs(wait)).await;
    s1.commit(h.id).await.unwrap();
    assert_eq!(shape(), vec![(name.clone(), start, end + 60, 4)], "Slurm keeps the start and takes the new end");
    tokio::time::sleep(Duration::from_secs(3)).await; // two syncs
    let metrics = app.metrics().await;
    assert!(metrics.contains("coreserve_slurm_broken_reservations{site=\"s1\"} 0"), "{metrics}");
    let now = app.reservations(SITE).await;
    assert!(now.iter().all(|r| r.get("broken").is_none_or(Value::is_null)), "{now:?}");

    // Modified again: while this modification is pending, Slurm holds the kept start to the
    // newest end, and the sync must take that for the pending change, not for drift. Found
    // running a WfCommons workflow through the plugin: a successor moved later whose
    // reservation began meanwhile was moved again by the next level's extension, and the sync
    // broke the whole plan in the middle of that extension.
    let again =
        ComputeHoldRequest { replaces: Some(h.id), ..change.replacement(TxnId::new(), 4, start + 60, end + 120) };
    let second = s1.prepare(&again).await.unwrap();
    s1.persist(&[second.id]).await.unwrap();
    assert_eq!(shape(), vec![(name.clone(), start, end + 120, 4)], "persist grows it from the kept start");
    tokio::time::sleep(Duration::from_secs(3)).await; // two syncs while it is pending
    let now = app.reservations(SITE).await;
    assert!(now.iter().all(|r| r.get("broken").is_none_or(Value::is_null)), "taken for drift: {now:?}");
    s1.commit(second.id).await.unwrap();
    assert_eq!(shape(), vec![(name.clone(), start, end + 120, 4)]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let metrics = app.metrics().await;
    assert!(metrics.contains("coreserve_slurm_broken_reservations{site=\"s1\"} 0"), "{metrics}");
}

/// A modification that ends undecided after the reservation's own end has passed: giving it
/// back its own shape asked Slurm for an end in the past, which it refuses ("Invalid time
/// specified"), so the reservation stayed grown, past its booking, at every sync. It now ends
/// at once. Found running a WfCommons workflow through the Snakemake plugin: an extension
/// refused too late left a job's reservation grown.
#[tokio::test]
async fn a_modification_undecided_past_the_reservation_s_end_gives_it_back_ended() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 1, |c| c.lease_s = 60).await;
    let plan = submit(&app, &job_at("over-1", 4, 10, Utc::now().timestamp() + 5)).await;
    let change = HandChange::of(&app, &plan).await;
    let (start, end, s1) = (change.start, change.end, &change.s1);
    let h = s1.prepare(&change.replacement(TxnId::new(), 4, start, end + 300)).await.unwrap();
    s1.persist(&[h.id]).await.unwrap();
    assert!(cluster.ours().iter().all(|r| r.end == end + 300), "{:?}", cluster.ours());
    tokio::time::sleep(Duration::from_secs((end - Utc::now().timestamp() + 2).max(0) as u64)).await;
    s1.abort(h.id).await.unwrap();
    let ended = eventually(Duration::from_secs(10), async || {
        cluster.ours().iter().all(|r| r.end <= Utc::now().timestamp() + 5)
    })
    .await;
    assert!(ended, "the reservation stayed grown past its booked end: {:?}", cluster.ours());
    tokio::time::sleep(Duration::from_secs(3)).await; // two syncs: the moment past its end is no drift
    let metrics = app.metrics().await;
    assert!(metrics.contains("coreserve_slurm_broken_reservations{site=\"s1\"} 0"), "{metrics}");
}

/// `squeue`'s state of job `id` (`RUNNING`, `PENDING`, ...) and its reason; empty once gone.
fn job_state(cluster: &SlurmCluster, id: &str) -> (String, String) {
    let out = cluster.run("squeue", &["-h", "-j", id, "-o", "%T %r"]);
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let (state, reason) = text.split_once(' ').unwrap_or((&text, ""));
    (state.to_owned(), reason.to_owned())
}

/// `scontrol show job ID`'s `JobState` (it keeps finished jobs for `MinJobAge`, 300 s).
fn job_state_of(cluster: &SlurmCluster, id: &str) -> String {
    let out = cluster.run("scontrol", &["show", "job", id, "--oneliner"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace().find_map(|w| w.strip_prefix("JobState=")).unwrap_or_default().to_owned()
}

/// `sbatch --reservation=NAME -n CPUS ARGS...`: the job id.
fn sbatch(cluster: &SlurmCluster, reservation: &str, cpus: u32, args: &[&str]) -> String {
    let (res, n) = (format!("--reservation={reservation}"), cpus.to_string());
    let mut all = vec!["--parsable", res.as_str(), "-n", n.as_str()];
    all.extend_from_slice(args);
    let out = cluster.run("sbatch", &all);
    assert!(out.status.success(), "sbatch: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().split(';').next().unwrap().to_owned()
}

/// Issue 45, test 1: a job running in its reservation, the plan extended by `PATCH`: the job
/// runs past the reservation's old end and completes inside the new one, under the same
/// reservation name (before: a new reservation beside it, the job killed at the old end).
#[tokio::test]
async fn an_extended_plan_keeps_its_running_job_alive() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 1, |_| {}).await;
    let plan = submit(&app, &one_job("extend-1", 2, 40)).await;
    assert_eq!((plan["status"].as_str(), plan["jobs"][0]["site"].as_str()), (Some("committed"), Some(SITE)));
    let job = &plan["jobs"][0];
    let name = job["reservation_name"].as_str().unwrap().to_owned();
    let (start, old_end) = (time(&job["start"]), time(&job["end"]));
    let out = cluster.dir().join("extended.out");
    // 70 s of work in a 40 s reservation: it needs the extension.
    let id = sbatch(
        &cluster,
        &name,
        2,
        &["--time=3", "-o", out.to_str().unwrap(), "--wrap", "date -u +%s; sleep 70; date -u +%s; echo done"],
    );
    let wait = Duration::from_secs((start - Utc::now().timestamp()).max(0) as u64 + 30);
    let running = eventually(wait, async || job_state(&cluster, &id).0 == "RUNNING").await;
    assert!(running, "the job did not start in its reservation: {:?}", job_state(&cluster, &id));

    let path = format!("/v1/plans/{}", plan["id"].as_str().unwrap());
    let longer = json!({"jobs": [{"name": "A", "duration_s": 150}]});
    let r = app.call(reqwest::Method::PATCH, &path, Some(ADMIN), Some(&longer)).await;
    assert_eq!(r.status(), StatusCode::OK, "{:?}", r.text().await);
    let modified: Value = r.json().await.unwrap();
    assert_eq!(modified["jobs"][0]["reservation_name"], name.as_str(), "{modified}");
    let new_end = time(&modified["jobs"][0]["end"]);
    assert_eq!(new_end, start + 150);
    let ours = cluster.ours();
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert_eq!((ours[0].name.as_str(), ours[0].start, ours[0].end), (name.as_str(), start, new_end));

    // Past the old end (and Slurm's KillWait after it), the job is still running, then ends
    // by itself inside the new window.
    let left = (old_end + 15 - Utc::now().timestamp()).max(0) as u64;
    tokio::time::sleep(Duration::from_secs(left)).await;
    assert_eq!(job_state(&cluster, &id).0, "RUNNING", "killed at the old end? {}", job_state_of(&cluster, &id));
    let done =
        eventually(Duration::from_secs(90), async || std::fs::read_to_string(&out).is_ok_and(|t| t.contains("done")))
            .await;
    assert!(done, "the job did not complete: {}", job_state_of(&cluster, &id));
    let finished = eventually(Duration::from_secs(10), async || job_state_of(&cluster, &id) == "COMPLETED").await;
    assert!(finished, "{}", job_state_of(&cluster, &id));
    let text = std::fs::read_to_string(&out).unwrap();
    let ended: i64 = text.lines().nth(1).unwrap().trim().parse().unwrap();
    assert!(ended > old_end && ended < new_end, "ended at {ended}, old end {old_end}, new end {new_end}");
    assert!(app.metrics().await.contains("coreserve_slurm_reconciled_total{site=\"s1\",action=\"stray_deleted\"} 0"));
}

/// A running job's reservation extended onto the cores of a later reservation (Slurm gave both
/// cores 0-7: their windows did not meet): the later one, not started and empty, is moved to
/// other cores under its name and the extension is made (before: refused, "Slurm cannot move a
/// started reservation to other cores", although 8 cores were free; a workflow engine's
/// overrunning task was then killed at its old end).
#[tokio::test]
async fn an_extension_moves_a_later_reservation_off_the_running_job_s_cores() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 3600, |_| {}).await;
    let a = submit(&app, &one_job("room-a", 8, 40)).await;
    assert_eq!((a["status"].as_str(), a["jobs"][0]["site"].as_str()), (Some("committed"), Some(SITE)), "{a}");
    let (start, old_end) = (time(&a["jobs"][0]["start"]), time(&a["jobs"][0]["end"]));
    let b = submit(&app, &job_at("room-b", 8, 300, old_end)).await;
    assert_eq!((b["jobs"][0]["site"].as_str(), time(&b["jobs"][0]["start"])), (Some(SITE), old_end), "{b}");
    let (a_name, b_name) =
        (a["jobs"][0]["reservation_name"].as_str().unwrap(), b["jobs"][0]["reservation_name"].as_str().unwrap());
    let cores = |name: &str| cluster.ours().into_iter().find(|r| r.name == name).map(|r| r.cores).unwrap_or_default();
    let listed =
        eventually(Duration::from_secs(20), async || !cores(a_name).is_empty() && !cores(b_name).is_empty()).await;
    assert!(listed && cores(a_name) == cores(b_name), "Slurm placed them apart: {:?}", cluster.ours());

    let out = cluster.dir().join("room.out");
    let id = sbatch(&cluster, a_name, 8, &["--time=3", "-o", out.to_str().unwrap(), "--wrap", "sleep 60; echo done"]);
    let wait = Duration::from_secs((start - Utc::now().timestamp()).max(0) as u64 + 30);
    let running = eventually(wait, async || job_state(&cluster, &id).0 == "RUNNING").await;
    assert!(running, "the job did not start in its reservation: {:?}", job_state(&cluster, &id));

    let path = format!("/v1/plans/{}", a["id"].as_str().unwrap());
    let longer = json!({"jobs": [{"name": "A", "duration_s": 100}]});
    let r = app.call(reqwest::Method::PATCH, &path, Some(ADMIN), Some(&longer)).await;
    assert_eq!(r.status(), StatusCode::OK, "the extension was refused: {:?}", r.text().await);
    let ours = cluster.ours();
    assert_eq!(ours.len(), 2, "{ours:?}");
    let a_now = ours.iter().find(|r| r.name == a_name).expect("A's reservation under its name");
    assert_eq!((a_now.start, a_now.end), (start, start + 100));
    let b_now = ours.iter().find(|r| r.name == b_name).expect("B's reservation under its name");
    assert_eq!((b_now.start, b_now.end, b_now.cpus), (old_end, old_end + 300, 8));
    assert_eq!(core_overlaps(&cluster), vec![], "{ours:?}");
    let done =
        eventually(Duration::from_secs(90), async || std::fs::read_to_string(&out).is_ok_and(|t| t.contains("done")))
            .await;
    assert!(done, "the job did not complete past its old end: {}", job_state_of(&cluster, &id));
}

/// A running job's reservation extended while another plan's job runs beside it on the same
/// node, with a time limit (whole minutes, as `sbatch --time` takes it) past the new end: Slurm
/// counted that job's cores as busy for the new window, though its own reservation ends first,
/// and refused the change ("Requested nodes are busy"; a workflow engine's overrunning task
/// was killed at its old end while its siblings ran). The LIS's updates ignore running jobs
/// (`Flags=IGNORE_JOBS`): the extension is made and the job completes past its old end.
#[tokio::test]
async fn an_extension_beside_another_plan_s_running_job_is_made() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 3600, |_| {}).await;
    let a = submit(&app, &one_job("busy-a", 8, 40)).await;
    let d = submit(&app, &one_job("busy-d", 8, 40)).await;
    for p in [&a, &d] {
        assert_eq!((p["status"].as_str(), p["jobs"][0]["site"].as_str()), (Some("committed"), Some(SITE)), "{p}");
    }
    let (start, old_end) = (time(&a["jobs"][0]["start"]), time(&a["jobs"][0]["end"]));
    let name = |p: &Value| p["jobs"][0]["reservation_name"].as_str().unwrap().to_owned();
    let out = cluster.dir().join("busy.out");
    let id =
        sbatch(&cluster, &name(&a), 8, &["--time=3", "-o", out.to_str().unwrap(), "--wrap", "sleep 60; echo done"]);
    let beside = sbatch(&cluster, &name(&d), 8, &["--time=3", "--wrap", "sleep 30"]);
    let wait =
        Duration::from_secs((start.max(time(&d["jobs"][0]["start"])) - Utc::now().timestamp()).max(0) as u64 + 30);
    let running = eventually(wait, async || {
        job_state(&cluster, &id).0 == "RUNNING" && job_state(&cluster, &beside).0 == "RUNNING"
    })
    .await;
    assert!(running, "the jobs did not start: {:?} {:?}", job_state(&cluster, &id), job_state(&cluster, &beside));

    let path = format!("/v1/plans/{}", a["id"].as_str().unwrap());
    let longer = json!({"jobs": [{"name": "A", "duration_s": 100}]});
    let r = app.call(reqwest::Method::PATCH, &path, Some(ADMIN), Some(&longer)).await;
    assert_eq!(r.status(), StatusCode::OK, "the extension was refused: {:?}", r.text().await);
    let a_now = cluster.ours().into_iter().find(|r| r.name == name(&a)).expect("A's reservation under its name");
    assert_eq!((a_now.start, a_now.end), (start, start + 100));
    let done =
        eventually(Duration::from_secs(90), async || std::fs::read_to_string(&out).is_ok_and(|t| t.contains("done")))
            .await;
    assert!(done, "the job did not complete past its old end {old_end}: {}", job_state_of(&cluster, &id));
}

/// Issue 47: an extension that moves a chain of 10 reservations later (each grown to both
/// windows until the commit, so on the cores of the next ones) is made in Slurm together, in
/// three listings and a few calls per reservation, every reservation in its new window under
/// its name and none on another's cores. Before, each reservation was read, changed and
/// checked on its own, and each check waited up to 10 s for slurmctld to list the cores of
/// reservations made a moment before (it lists them about 5 s after a create): 200 listings
/// of 237 calls here, and an engine's `PATCH` of a level that overran together moved 25
/// reservations in 30-49 s while the overrunning tasks' reservations ended. `scontrol` is the
/// real one, behind a wrapper that logs its arguments.
#[tokio::test]
async fn an_extension_that_moves_a_chain_of_reservations_changes_them_together() {
    const N: usize = 10;
    let cluster = SlurmCluster::start(CPUS);
    let log = cluster.dir().join("scontrol.log");
    let logged = cluster.dir().join("scontrol-logged");
    std::fs::write(&logged, format!("#!/bin/sh\necho \"$*\" >> {}\nexec scontrol \"$@\"\n", log.display())).unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&logged).status().unwrap();
    let app = app(&cluster, 3600, |c| c.slurm[0].1.scontrol = logged.clone()).await;
    let jobs: Vec<Value> = (0..N)
        .map(|i| {
            let mut j = json!({"name": format!("t{i}"), "os": "linux", "cpus": 2, "duration_s": 30});
            if i > 0 {
                j["after"] = json!([format!("t{}", i - 1)]);
            }
            j
        })
        .collect();
    let body = json!({"id": "chain-moved", "deadline": in_hours(6), "policy": "cost", "jobs": jobs, "transfers": []});
    let plan = submit(&app, &body).await;
    assert_eq!(plan["status"], "committed", "{plan}");
    let booked = plan["jobs"].as_array().unwrap();
    assert!(booked.iter().all(|j| j["site"] == SITE), "{plan}");
    let origin = time(&plan["start"]);
    // t0 60 s longer, and every job after it 60 s later.
    let change: Vec<Value> = booked
        .iter()
        .map(|j| match j["name"].as_str().unwrap() {
            "t0" => json!({"name": "t0", "duration_s": 90}),
            n => json!({"name": n, "offset_s": time(&j["start"]) - origin + 60}),
        })
        .collect();
    let calls = || std::fs::read_to_string(&log).unwrap_or_default().lines().map(str::to_owned).collect::<Vec<_>>();
    let before = calls().len();
    let path = format!("/v1/plans/{}", plan["id"].as_str().unwrap());
    let r = app.call(reqwest::Method::PATCH, &path, Some(ADMIN), Some(&json!({"jobs": change}))).await;
    assert_eq!(r.status(), StatusCode::OK, "{:?}", r.text().await);
    let modified: Value = r.json().await.unwrap();
    let during = calls()[before..].to_vec();

    let ours = cluster.ours();
    assert_eq!(ours.len(), N, "{ours:?}");
    for (was, now) in booked.iter().zip(modified["jobs"].as_array().unwrap()) {
        assert_eq!(now["reservation_name"], was["reservation_name"], "{modified}");
        let moved = if was["name"] == "t0" { 0 } else { 60 };
        let (start, end) = (time(&was["start"]) + moved, time(&was["end"]) + 60);
        assert_eq!((time(&now["start"]), time(&now["end"])), (start, end), "{modified}");
        let r = ours.iter().find(|r| r.name == was["reservation_name"].as_str().unwrap()).unwrap();
        assert_eq!((r.start, r.end, r.cpus), (start, end, 2), "{ours:?}, after {during:#?}");
    }
    assert_eq!(core_overlaps(&cluster), vec![], "{ours:?}");
    let listings = during.iter().filter(|c| c.starts_with("show reservation")).count();
    assert!(listings <= 4, "{listings} listings of Slurm's reservations for one modification: {during:#?}");
    // Per reservation: grown in place, back in place, deleted, made again, shrunk at commit.
    assert!(during.len() <= 5 * N + 4, "{} scontrol calls for {N} reservations: {during:#?}", during.len());
}

/// Every pair of coreserve reservations that share a core of a node at a common instant
/// (`scontrol show reservation`'s core lists, waited for: slurmctld lists a reservation's
/// cores a moment after its create).
fn core_overlaps(cluster: &SlurmCluster) -> Vec<(String, String)> {
    let mut ours = cluster.ours();
    let end = Instant::now() + Duration::from_secs(30);
    while ours.iter().any(|r| r.cores.is_empty()) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(300));
        ours = cluster.ours();
    }
    assert!(ours.iter().all(|r| !r.cores.is_empty()), "Slurm lists no cores: {ours:?}");
    let mut out = Vec::new();
    for (i, a) in ours.iter().enumerate() {
        for b in &ours[i + 1..] {
            let together = a.start < b.end && b.start < a.end;
            let shared =
                a.cores.iter().any(|(n, c)| b.cores.iter().any(|(m, d)| n == m && c.iter().any(|x| d.contains(x))));
            if together && shared {
                out.push((a.name.clone(), b.name.clone()));
            }
        }
    }
    out
}

/// Issue 45, test 2: P books 8 CPUs and Q 4 in the same window, Q is modified to 6: a job
/// sized to each reservation starts at once in both (none waits `PENDING (Resources)`), and
/// no coreserve reservation shares a core with another (before: Q's new shape was made with
/// `Flags=OVERLAP` on P's cores).
#[tokio::test]
async fn a_modified_reservation_never_sits_on_another_s_cores() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 3600, |c| c.w_interval_s = 30).await;
    let p = submit(&app, &one_job("cores-p", 8, 300)).await;
    let q = submit(&app, &one_job("cores-q", 4, 300)).await;
    for plan in [&p, &q] {
        assert_eq!((plan["status"].as_str(), plan["jobs"][0]["site"].as_str()), (Some("committed"), Some(SITE)));
    }
    let q_name = q["jobs"][0]["reservation_name"].as_str().unwrap().to_owned();
    let path = format!("/v1/plans/{}", q["id"].as_str().unwrap());
    let r =
        app.call(reqwest::Method::PATCH, &path, Some(ADMIN), Some(&json!({"jobs": [{"name": "A", "cpus": 6}]}))).await;
    assert_eq!(r.status(), StatusCode::OK, "{:?}", r.text().await);
    let modified: Value = r.json().await.unwrap();
    assert_eq!(modified["jobs"][0]["reservation_name"], q_name.as_str());
    let ours = cluster.ours();
    assert_eq!(ours.len(), 2, "{ours:?}");
    let q_now = ours.iter().find(|r| r.name == q_name).expect("Q's reservation under its name");
    assert_eq!(q_now.cpus, 6);
    assert!(ours.iter().all(|r| r.flags.iter().all(|f| f != "OVERLAP")), "{ours:?}");
    assert_eq!(core_overlaps(&cluster), vec![], "{ours:?}");

    let p_name = p["jobs"][0]["reservation_name"].as_str().unwrap();
    let jobs = [
        sbatch(&cluster, p_name, 8, &["--time=1", "--wrap", "sleep 30"]),
        sbatch(&cluster, &q_name, 6, &["--time=1", "--wrap", "sleep 30"]),
    ];
    let start = time(&p["jobs"][0]["start"]).max(time(&modified["jobs"][0]["start"]));
    let wait = Duration::from_secs((start - Utc::now().timestamp()).max(0) as u64 + 20);
    let both = eventually(wait, async || jobs.iter().all(|j| job_state(&cluster, j).0 == "RUNNING")).await;
    assert!(
        both,
        "a job waits although its reservation has the cores: {:?}; {:?}",
        jobs.iter().map(|j| job_state(&cluster, j)).collect::<Vec<_>>(),
        cluster.ours()
    );
}

/// A plan body of one job of `cpus` CPUs for `duration_s` at no earlier than `not_before`
/// (policy `cost`: `s1` when it has room then).
fn job_at(id: &str, cpus: u32, duration_s: i64, not_before: i64) -> Value {
    let mut body = one_job(id, cpus, duration_s);
    body["not_before"] = json!(crate::support::ts(DateTime::from_timestamp(not_before, 0).unwrap()));
    body["deadline"] = json!(crate::support::ts(DateTime::from_timestamp(not_before + 7200, 0).unwrap()));
    body
}

/// Issue 45, test 3: the calendar counts CPUs, Slurm pins cores. X takes 8 CPUs at [T, T+10m)
/// (cores 0-7), Y and W 8 each at [T+10m, T+20m) (Y first: cores 0-7, W 8-15); Y is
/// cancelled. Z asks 8 CPUs for 20 min from T: the calendar has 8 free throughout from T, but
/// no core is free throughout in Slurm, which refuses ("Requested nodes are busy"). Before,
/// the whole plan was rejected; now the refusal is that candidate's: the LIS blocks the
/// window and the plan is booked again later, where Slurm has the cores.
#[tokio::test]
async fn a_plan_slurm_s_cores_refuse_is_booked_where_they_fit() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 3600, |_| {}).await;
    let t = Utc::now().timestamp() / 60 * 60 + 600;
    let x = submit(&app, &job_at("frag-x", 8, 600, t)).await;
    let y = submit(&app, &job_at("frag-y", 8, 600, t + 600)).await;
    let w = submit(&app, &job_at("frag-w", 8, 600, t + 600)).await;
    for (plan, start) in [(&x, t), (&y, t + 600), (&w, t + 600)] {
        assert_eq!(plan["status"], "committed", "{plan}");
        assert_eq!((plan["jobs"][0]["site"].as_str(), time(&plan["jobs"][0]["start"])), (Some(SITE), start), "{plan}");
    }
    let r =
        app.call(reqwest::Method::DELETE, &format!("/v1/plans/{}", y["id"].as_str().unwrap()), Some(ADMIN), None).await;
    assert_eq!(r.status(), StatusCode::OK);
    let z = submit(&app, &job_at("frag-z", 8, 1200, t)).await;
    assert_eq!(z["status"], "committed", "the plan is lost to core placement: {z}");
    let job = &z["jobs"][0];
    if job["site"] == SITE {
        let name = job["reservation_name"].as_str().unwrap();
        let ours = cluster.ours();
        let r = ours.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("{ours:?}"));
        assert_eq!((r.start, r.end, r.cpus), (time(&job["start"]), time(&job["end"]), 8));
        assert!(r.start >= t + 1200 || core_overlaps(&cluster).is_empty(), "{ours:?}");
    }
    assert_eq!(core_overlaps(&cluster), vec![], "{:?}", cluster.ours());
}

/// One plan's reservations are made in the order of their starts, not of its jobs. Four jobs
/// of 8 CPUs at `s1`, listed D [0, 100 s), A [50, 1000), X [1000, 2000), C [500, 1500): the
/// calendar has room for all (never more than 16 CPUs at once). Made in the jobs' order, Slurm
/// pins D to cores 0-7, A (which meets D) to 8-15, X (which meets nothing yet) to 0-7, and
/// finds no 8 cores free throughout C's window (A's until 1000, X's from then): "Requested
/// nodes are busy", and the plan was rejected (every new search met the same placement). Made
/// by start (D, A, C, X), C takes 0-7 and X 8-15.
/// Found by a 197-task WfCommons workflow that could not be booked on two 16-core clusters.
#[tokio::test]
async fn a_plan_s_reservations_are_made_in_the_order_of_their_starts() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 3600, |_| {}).await;
    let mut body = one_job("by-start", 8, 100);
    let job = |name: &str, offset_s: i64, end_s: i64| json!({"name": name, "os": "linux", "cpus": 8, "offset_s": offset_s, "duration_s": end_s - offset_s});
    body["jobs"] = json!([job("D", 0, 100), job("A", 50, 1000), job("X", 1000, 2000), job("C", 500, 1500)]);
    let plan = submit(&app, &body).await;
    assert_eq!(plan["status"], "committed", "{plan}");
    let jobs = plan["jobs"].as_array().unwrap();
    let sites: Vec<(&str, &str)> =
        jobs.iter().map(|j| (j["name"].as_str().unwrap(), j["site"].as_str().unwrap())).collect();
    assert!(sites.iter().all(|&(_, site)| site == SITE), "Slurm refused a job the calendar had room for: {sites:?}");
    let ours = cluster.ours();
    assert_eq!(ours.len(), 4, "{ours:?}");
    assert_booked_in_slurm(&ours, jobs, 8);
}

/// Each job of `jobs` (a plan answer's) has its reservation in `ours`, under its name, with its
/// window and `cpus` CPUs.
fn assert_booked_in_slurm(ours: &[coreserve::lis::slurm::SlurmReservation], jobs: &[Value], cpus: u64) {
    for j in jobs {
        let name = j["reservation_name"].as_str().unwrap();
        let r = ours.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("{} lost: {ours:?}", j["name"]));
        assert_eq!((r.start, r.end, r.cpus), (time(&j["start"]), time(&j["end"]), cpus), "{}", j["name"]);
    }
}

/// A modification whose reservations Slurm cannot all reshape loses none of them. One plan:
/// Y [300, 400 s) and X [400, 500), 8 CPUs each, both on cores 0-7 of 16; an administrator's
/// reservation made since the last sync holds cores 8-15 throughout. Y is extended to 450 and
/// X moved to [450, 550): the calendar has room, but Slurm's cores do not (Y's growth in place
/// sits on X's old cores, and X's new shape finds no 8 cores free). Before, X was deleted to be
/// made again, and neither its new shape nor its old one could be made while Y sat grown on
/// its cores: X was lost. The modification was refused, the shapes given back one by one (X
/// first, the plan's first job, while Y still sat there) could not make it again either, and
/// the next sync broke the plan ("deleted in Slurm behind coreserve"). Found by a 197-task
/// WfCommons workflow whose early ends moved many reservations at once. Now every clashing
/// growth goes back in place before any reservation is made again, and the plan stays whole.
#[tokio::test]
async fn a_modification_slurm_cannot_reshape_loses_no_reservation() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 3600, |_| {}).await;
    let mut body = one_job("reshape-loss", 8, 100);
    let job = |name: &str, offset_s: i64| json!({"name": name, "os": "linux", "cpus": 8, "offset_s": offset_s, "duration_s": 100});
    body["jobs"] = json!([job("X", 400), job("Y", 300)]);
    let plan = submit(&app, &body).await;
    assert_eq!(plan["status"], "committed", "{plan}");
    assert!(plan["jobs"].as_array().unwrap().iter().all(|j| j["site"] == SITE), "{plan}");
    // Slurm lists a reservation's cores a few seconds after making it.
    let listed = async || cluster.reservations().iter().all(|r| !r.cores.is_empty());
    assert!(eventually(Duration::from_secs(30), listed).await, "{:?}", cluster.reservations());
    cluster.scontrol(&[
        "create",
        "reservation",
        "ReservationName=admin-cores",
        "StartTime=now",
        "Duration=00:20:00",
        "PartitionName=batch",
        "CoreCnt=8",
        "Users=root",
    ]);
    assert!(eventually(Duration::from_secs(30), listed).await, "{:?}", cluster.reservations());
    let path = format!("/v1/plans/{}", plan["id"].as_str().unwrap());
    let change = json!({"jobs": [{"name": "Y", "duration_s": 150}, {"name": "X", "offset_s": 450}]});
    let r = app.call(reqwest::Method::PATCH, &path, Some(ADMIN), Some(&change)).await;
    assert_eq!(r.status(), StatusCode::CONFLICT, "Slurm has no cores for it: {:?}", r.text().await);
    let lis = app.state.lis(SITE).expect("s1 is a Slurm site").clone();
    let report = lis.sync().await.expect("Slurm answers");
    assert_eq!(report.newly_broken, 0, "{:?}", lis.drift());
    let now = app.json(&path, ADMIN).await;
    assert_eq!(now["status"], "committed", "{now}");
    let ours = cluster.ours();
    assert_booked_in_slurm(&ours, plan["jobs"].as_array().unwrap(), 8);
    assert_eq!(core_overlaps(&cluster), vec![], "{ours:?}");
}

/// Issue 45, GPUs another user reserved: `s1` fronts a 16-core cluster with 4 GPUs counted by
/// license `gpu` (4 `gpu` GPUs in the grid). An administrator's reservation of 3 of them, made
/// before the service's first sync, is blocked in the calendar: a 2-GPU plan from its start is
/// booked after its end. A second one made since that sync (the next is an hour away) is not in
/// the calendar yet, so Slurm refuses our create ("Invalid license specification"): that refusal
/// blocks the GPU pool's window, and the plan is booked after it rather than rejected (before,
/// each new search offered the same window again until the request ran out of searches). Slurm
/// never holds more than its 4 licenses at once.
#[tokio::test]
async fn another_user_s_gpu_licenses_are_never_sold_again() {
    use crate::support::slurm::{GPU_LICENSE, PARTITION};
    let cluster = SlurmCluster::start_with(CPUS, PARTITION, 4);
    let admin = |name: &str, start: i64, end: i64| {
        let at = |t: i64| DateTime::from_timestamp(t, 0).unwrap().format("%Y-%m-%dT%H:%M:%S").to_string();
        let out = cluster.run(
            "scontrol",
            &[
                "create",
                "reservation",
                &format!("ReservationName={name}"),
                &format!("StartTime={}", at(start)),
                &format!("EndTime={}", at(end)),
                &format!("PartitionName={PARTITION}"),
                "CoreCnt=1",
                &format!("Licenses={GPU_LICENSE}:3"),
                "Users=root",
            ],
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    let t = Utc::now().timestamp() / 60 * 60 + 600;
    admin("admin-seen", t, t + 600);
    let mut grid = serde_json::to_value(crate::support::grid()).unwrap();
    grid["sites"][0]["gpus"] = json!([{"model": GPU_LICENSE, "count": 4, "compute_capability": 7.5, "memory_gib": 16}]);
    let grid = serde_json::from_value(grid).unwrap();
    let config = cluster.config(3600);
    let app = TestApp::memory(grid, |c| {
        c.slurm = vec![(SITE.into(), config)];
        c.w_interval_s = 10;
    })
    .await;
    let gpu_job = |id: &str, not_before: i64| {
        let mut body = job_at(id, 2, 600, not_before);
        body["jobs"][0]["requires"] = json!({"gpus": {"count": 2, "model": GPU_LICENSE}});
        body
    };
    let licenses_at = |at: i64| -> u64 {
        cluster
            .reservations()
            .iter()
            .filter(|r| r.start <= at && at < r.end)
            .flat_map(|r| r.licenses.clone())
            .map(|(_, n)| n)
            .sum()
    };

    let seen = submit(&app, &gpu_job("gpu-after-seen", t)).await;
    assert_eq!((seen["status"].as_str(), seen["jobs"][0]["site"].as_str()), (Some("committed"), Some(SITE)), "{seen}");
    assert!(time(&seen["jobs"][0]["start"]) >= t + 600, "sold beside 3 of 4 GPUs reserved in Slurm: {seen}");

    admin("admin-since", t + 3600, t + 4200);
    let since = submit(&app, &gpu_job("gpu-after-since", t + 3600)).await;
    assert_eq!(
        (since["status"].as_str(), since["jobs"][0]["site"].as_str()),
        (Some("committed"), Some(SITE)),
        "the plan was lost to a license refusal: {since}"
    );
    let start = time(&since["jobs"][0]["start"]);
    assert!(start >= t + 4200, "booked beside 3 of 4 GPUs reserved in Slurm since the sync: {since}");
    let name = since["jobs"][0]["reservation_name"].as_str().unwrap();
    let ours = cluster.ours();
    let r = ours.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("{ours:?}"));
    assert_eq!((r.start, r.licenses.clone()), (start, vec![(GPU_LICENSE.to_owned(), 2)]), "{ours:?}");
    for at in [t, t + 600, t + 3600, t + 4200, start] {
        assert!(licenses_at(at) <= 4, "{} licenses at {at}: {:?}", licenses_at(at), cluster.reservations());
    }
}

/// Issue 45, test 4: two Slurm sites (s1 and s2, a cluster each), s1's slurmctld stopped: a
/// plan s1 would take (the cheapest) goes to s2, nothing is answered committed at s1, and a
/// plan neither can take names s1 as unavailable; once s1's slurmctld is back, s1 is used again.
#[tokio::test]
async fn a_site_whose_slurm_is_down_is_left_out_not_a_rejection() {
    let (one, two) = (SlurmCluster::start(CPUS), SlurmCluster::start(CPUS));
    let (c1, c2) = (one.config(1), two.config(1));
    let app = TestApp::spawn_with(|c| {
        c.slurm = vec![(SITE.into(), c1), ("s2".into(), c2)];
        // Room for a second search after the first commit at s1 waited for slurmctld (about
        // 17 s of scontrol timeouts and retries).
        c.w_interval_s = 120;
    })
    .await;
    one.stop_controller();
    let plan = submit(&app, &one_job("down-a", 8, 600)).await;
    assert_eq!(plan["status"], "committed", "{plan}");
    assert_eq!(plan["jobs"][0]["site"], "s2", "{plan}");
    assert_eq!(two.ours().len(), 1, "{:?}", two.ours());
    assert!(app.reservations(SITE).await.is_empty(), "nothing held at s1");
    // Two jobs of 12 CPUs at once: s1 and s2 needed, s1 down.
    let both = submit(&app, &crate::support::workflow()).await;
    assert_ne!(both["status"], "committed", "{both}");
    let reason = both["reason"].as_str().unwrap();
    assert!(reason.contains("`s1`") && reason.contains("unavailable"), "{reason}");
    one.start_controller();
    let plan = submit(&app, &one_job("down-b", 8, 600)).await;
    assert_eq!((plan["status"].as_str(), plan["jobs"][0]["site"].as_str()), (Some("committed"), Some(SITE)), "{plan}");
    assert_eq!(one.ours().len(), 1, "{:?}", one.ours());
}

/// Issue 45, test 5: two Slurm clusters in one all-in-one `coreserve serve` configured by a
/// TOML file (`[sites.ID.slurm]`), one of them a GPU site: `s1` fronts a 16-core cluster,
/// `s2` (4 `t4` GPUs in the grid) a 16-core cluster whose node declares 4 GPUs, counted by
/// license `gpu`. A GPU job's reservation holds its GPUs (`Licenses=gpu:2`), a GPU job
/// submitted into it gets them (`--gres=gpu:2 -L gpu:2`: two devices), a second booking
/// cannot take the same GPUs (coreserve refuses it, and so does Slurm: a reservation asking
/// 3 of them beside it is refused, a job outside the reservations waits for a license). A GPU
/// site whose license Slurm does not have is refused at start, naming it.
#[tokio::test]
async fn two_clusters_and_a_gpu_site_in_one_service_from_a_toml_file() {
    use crate::support::serve::{Launch, Server, ADMIN as PROC_ADMIN};
    use crate::support::slurm::GPU_LICENSE;
    let (cpu, gpu) = (SlurmCluster::start(CPUS), SlurmCluster::start_with(CPUS, "gpu", 4));
    let dir = tempfile::tempdir().unwrap();
    // The test grid, with 4 t4 GPUs at s2.
    let grid = json!({
        "nodes": [{"id": "n1", "label": "one"}, {"id": "n2", "label": "two"}],
        "links": [{"id": "l1", "a": "n1", "b": "n2", "capacity_mbps": 1000, "price_per_gbps_hour": 0.1}],
        "sites": [
            {"id": "s1", "node": "n1", "cpus": 16, "os": "linux", "price_per_cpu_hour": 1.0},
            {"id": "s2", "node": "n2", "cpus": 16, "os": "linux", "price_per_cpu_hour": 2.0,
             "gpus": [{"model": "t4", "count": 4, "compute_capability": 7.5, "memory_gib": 16}]},
            {"id": "s3", "node": "n2", "cpus": 8, "os": "bsd", "price_per_cpu_hour": 1.5}
        ]
    });
    let grid_path = dir.path().join("grid.json");
    std::fs::write(&grid_path, grid.to_string()).unwrap();
    let toml = |licenses: &str| {
        format!(
            "[sites.s1.slurm]\npartition = \"batch\"\nslurm_conf = \"{}\"\ndefault_user = \"root\"\nsync_s = 1\n\
             [sites.s2.slurm]\npartition = \"gpu\"\nslurm_conf = \"{}\"\ndefault_user = \"root\"\nsync_s = 1\n{licenses}",
            cpu.conf.display(),
            gpu.conf.display()
        )
    };
    let db = crate::support::TestDb::new().await;
    let launch = |file: &str, log: Option<std::path::PathBuf>| Launch {
        db: db.url.clone(),
        grid: Some(grid_path.clone()),
        args: vec![
            "--config".into(),
            dir.path().join(file).to_str().unwrap().into(),
            "--w-interval-s".into(),
            "10".into(),
        ],
        crash_at: None,
        log,
    };

    // The pool's model is not a license of the cluster: refused at start, naming it.
    std::fs::write(dir.path().join("unmapped.toml"), toml("")).unwrap();
    let log = dir.path().join("unmapped.log");
    let refused = Server::try_launch(&launch("unmapped.toml", Some(log.clone())));
    assert!(refused.is_err(), "a GPU site without its license in Slurm started");
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains("license `t4`") && said.contains("s2"), "{said}");

    std::fs::write(dir.path().join("coreserve.toml"), toml("gpu_licenses = { t4 = \"gpu\" }\n")).unwrap();
    let server = Server::launch(&launch("coreserve.toml", None));
    let api = server.api();
    let post = async |body: &Value| -> Value {
        let r = api.post("/v1/plans", PROC_ADMIN, body).await;
        assert_eq!(r.status(), StatusCode::CREATED, "{:?}", r.text().await);
        r.json().await.unwrap()
    };

    // A CPU job goes to s1 (the cheapest), booked in the first cluster only.
    let a = post(&one_job("toml-cpu", 8, 600)).await;
    assert_eq!((a["status"].as_str(), a["jobs"][0]["site"].as_str()), (Some("committed"), Some(SITE)), "{a}");
    let a_name = a["jobs"][0]["reservation_name"].as_str().unwrap();
    assert_eq!(cpu.ours().iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), [a_name]);
    assert!(gpu.ours().is_empty(), "{:?}", gpu.ours());

    // A GPU job goes to s2, the only GPU site: its reservation holds 2 of the 4 GPUs. It
    // starts in 45 s, so that the bookings beside it below are made before it starts.
    let mut g = job_at("toml-gpu", 4, 90, Utc::now().timestamp() + 45);
    g["jobs"][0]["requires"] = json!({"gpus": {"count": 2, "model": "t4"}});
    let g = post(&g).await;
    let job = &g["jobs"][0];
    assert_eq!((g["status"].as_str(), job["site"].as_str()), (Some("committed"), Some("s2")), "{g}");
    assert_eq!(job["gpus"], json!({"model": "t4", "count": 2}), "{g}");
    let (start, end) = (time(&job["start"]), time(&job["end"]));
    let g_name = job["reservation_name"].as_str().unwrap().to_owned();
    let ours = gpu.ours();
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert_eq!((ours[0].name.as_str(), ours[0].start, ours[0].end, ours[0].cpus), (g_name.as_str(), start, end, 4));
    assert_eq!(ours[0].licenses, vec![(GPU_LICENSE.to_owned(), 2)], "{ours:?}");
    assert_eq!(cpu.ours().len(), 1, "nothing more in the CPU cluster");

    // A second booking of 3 GPUs in that window: coreserve has only 2 left there.
    let mut more = job_at("toml-gpu-more", 2, end - start, start);
    more["deadline"] = json!(crate::support::ts(DateTime::from_timestamp(end, 0).unwrap()));
    more["jobs"][0]["requires"] = json!({"gpus": {"count": 3, "model": "t4"}});
    let more = post(&more).await;
    assert_ne!(more["status"], "committed", "3 of 4 GPUs sold beside 2: {more}");
    assert!(!more["reason"].as_str().unwrap().contains("no earlier than"), "refused for its GPUs: {more}");
    // The other 2 can be sold: Slurm then holds all 4 in reservations.
    let mut rest = job_at("toml-gpu-rest", 2, end - start, start);
    rest["deadline"] = json!(crate::support::ts(DateTime::from_timestamp(end, 0).unwrap()));
    rest["jobs"][0]["requires"] = json!({"gpus": {"count": 2, "model": "t4"}});
    let rest = post(&rest).await;
    assert_eq!((rest["status"].as_str(), rest["jobs"][0]["site"].as_str()), (Some("committed"), Some("s2")), "{rest}");
    let held: u64 = gpu.ours().iter().flat_map(|r| r.licenses.clone()).map(|(_, n)| n).sum();
    assert_eq!(held, 4, "{:?}", gpu.ours());
    // Slurm itself will not give a third reservation any of them.
    let (s, e) = (
        DateTime::from_timestamp(start, 0).unwrap().format("%Y-%m-%dT%H:%M:%S").to_string(),
        DateTime::from_timestamp(end, 0).unwrap().format("%Y-%m-%dT%H:%M:%S").to_string(),
    );
    let third = gpu.run(
        "scontrol",
        &[
            "create",
            "reservation",
            "ReservationName=admin-gpus",
            &format!("StartTime={s}"),
            &format!("EndTime={e}"),
            "PartitionName=gpu",
            "CoreCnt=1",
            "Licenses=gpu:1",
            "Users=root",
        ],
    );
    assert!(!third.status.success(), "Slurm reserved a GPU twice");
    assert!(String::from_utf8_lossy(&third.stderr).contains("license"), "{}", String::from_utf8_lossy(&third.stderr));

    // A GPU job in the reservation gets its two GPUs; one outside every reservation waits.
    let out = gpu.dir().join("gpu-job.out");
    let id = sbatch(
        &gpu,
        &g_name,
        2,
        &[
            "--gres=gpu:2",
            "-L",
            "gpu:2",
            "--time=1",
            "-o",
            out.to_str().unwrap(),
            "--wrap",
            "echo CUDA=$CUDA_VISIBLE_DEVICES; sleep 5",
        ],
    );
    let wait = Duration::from_secs((start - Utc::now().timestamp()).max(0) as u64 + 30);
    let ran = eventually(wait, async || std::fs::read_to_string(&out).is_ok_and(|t| t.contains("CUDA="))).await;
    assert!(ran, "the GPU job did not start in its reservation: {:?}", job_state(&gpu, &id));
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().next().unwrap().trim(), "CUDA=0,1", "{text}");
    let outside =
        gpu.run("sbatch", &["--parsable", "-n", "1", "-L", "gpu:1", "--time=1", "-o", "/dev/null", "--wrap", "true"]);
    assert!(outside.status.success(), "{}", String::from_utf8_lossy(&outside.stderr));
    let outside = String::from_utf8_lossy(&outside.stdout).trim().to_owned();
    tokio::time::sleep(Duration::from_secs(3)).await;
    if Utc::now().timestamp() < end - 2 {
        assert_eq!(job_state(&gpu, &outside), ("PENDING".to_owned(), "Licenses".to_owned()));
    }
    gpu.run("scancel", &[&outside]);
    let finished = eventually(Duration::from_secs(30), async || job_state_of(&gpu, &id) == "COMPLETED").await;
    assert!(finished, "{}", job_state_of(&gpu, &id));
    drop(server);
}

/// Issue 45, test 6: `kill -9` (a fault-injection abort) of the all-in-one service at each
/// step of a modification of a job at the Slurm site (before Slurm is touched, after Slurm's
/// reservation was grown to hold both shapes, after the durable decision, after the commit),
/// then a restart: the plan is committed in its old shape (before the decision) or its new
/// one (after it), and Slurm holds exactly that shape under the plan's reservation name, the
/// same name throughout. Each change shrinks the CPUs and lengthens the window, so that the
/// grown reservation (both shapes) is neither: before, the restart found it so and broke the
/// plan.
#[tokio::test]
async fn a_crash_at_each_step_of_a_modification_at_a_slurm_site_leaves_one_shape_in_slurm() {
    use crate::support::serve::{Launch, Server, ADMIN as PROC_ADMIN};
    let _machine = crate::support::machine::reserve("crash").await;
    let cluster = SlurmCluster::start(CPUS);
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.json");
    std::fs::write(&grid, serde_json::to_string(&crate::support::grid()).unwrap()).unwrap();
    let db = crate::support::TestDb::new().await;
    let launch = |crash_at: Option<&str>, sync_s: &str| {
        let args = [
            "--slurm",
            "s1=batch",
            "--slurm-conf",
            cluster.conf.to_str().unwrap(),
            "--slurm-default-user",
            "root",
            "--slurm-sync-s",
            sync_s,
        ];
        Server::launch(&Launch {
            db: db.url.clone(),
            grid: Some(grid.clone()),
            args: args.map(str::to_owned).to_vec(),
            crash_at: crash_at.map(str::to_owned),
            log: None,
        })
    };
    let first = launch(None, "3600");
    // An hour ahead: the reservation has not started, so Slurm can change its cores too.
    let body = job_at("crash-modify", 12, 600, Utc::now().timestamp() / 60 * 60 + 3600);
    let r = first.api().post("/v1/plans", PROC_ADMIN, &body).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let mut current: Value = r.json().await.unwrap();
    assert_eq!((current["status"].as_str(), current["jobs"][0]["site"].as_str()), (Some("committed"), Some(SITE)));
    let name = current["jobs"][0]["reservation_name"].as_str().unwrap().to_owned();
    let id = current["id"].as_str().unwrap().to_owned();
    first.kill();
    let shape = |plan: &Value| {
        let j = &plan["jobs"][0];
        (time(&j["start"]), time(&j["end"]), j["cpus"].as_u64().unwrap())
    };
    let points =
        [("after-prepare", false), ("after-slurm-reshape", false), ("after-decision", true), ("after-commit", true)];
    for (step, (point, survives)) in points.into_iter().enumerate() {
        let crashing = launch(Some(point), "3600");
        let (cpus, duration_s) = (if step % 2 == 0 { 10 } else { 12 }, 600 + 60 * (step as i64 + 1));
        let change = json!({"jobs": [{"name": "A", "cpus": cpus, "duration_s": duration_s}]});
        let send = crashing
            .api()
            .client
            .patch(format!("{}/v1/plans/{id}", crashing.url))
            .bearer_auth(PROC_ADMIN)
            .json(&change)
            .send();
        let r = tokio::time::timeout(Duration::from_secs(30), send).await;
        assert!(matches!(r, Ok(Err(_))), "{point}: the request ends with the process: {r:?}");
        crashing.wait_for_crash();

        let server = launch(None, "1");
        let api = server.api();
        let now: Value = api.json(&format!("/v1/plans/{id}"), PROC_ADMIN).await;
        assert_eq!(now["status"], "committed", "{point}: {now}");
        assert_eq!(now["jobs"][0]["reservation_name"], name.as_str(), "{point}: {now}");
        let (start, end, booked_cpus) = shape(&now);
        if survives {
            assert_eq!((end - start, booked_cpus), (duration_s, cpus as u64), "{point}: the plan as modified: {now}");
        } else {
            assert_eq!(shape(&now), shape(&current), "{point}: the plan as it was: {now}");
        }
        // Within a sync or two (1 s), Slurm holds exactly that shape under that name.
        let exact = eventually(Duration::from_secs(15), async || {
            let ours = cluster.ours();
            ours.len() == 1 && ours[0].name == name && (ours[0].start, ours[0].end, ours[0].cpus) == shape(&now)
        })
        .await;
        assert!(exact, "{point}: Slurm has {:?}, the plan {:?}", cluster.ours(), shape(&now));
        let later: Value = api.json(&format!("/v1/plans/{id}"), PROC_ADMIN).await;
        assert_eq!(later["status"], "committed", "{point}: not broken by what the crash left in Slurm: {later}");
        // What the restart gave back: the grown reservation, left by a crash between Slurm's
        // growth and its shrink.
        let reshaped = usize::from(matches!(point, "after-slurm-reshape" | "after-decision"));
        let metrics = api.metrics().await;
        let line = format!("coreserve_slurm_reconciled_total{{site=\"s1\",action=\"reshaped\"}} {reshaped}");
        assert!(metrics.contains(&line), "{point}: {line} in {metrics}");
        assert!(metrics.contains("coreserve_slurm_broken_reservations{site=\"s1\"} 0"), "{point}: {metrics}");
        current = later;
        server.kill();
    }
}

/// Issue 45, metrics: a reservation Slurm will not delete (a job was submitted into it) is
/// not counted as deleted: the cancelled plan's reservation stays in Slurm with its job,
/// counted in `coreserve_slurm_strays_in_use` at every sync, and is deleted (and counted
/// `stray_deleted`) only once the job is gone. Before, each refused delete counted as deleted.
#[tokio::test]
async fn a_delete_slurm_refuses_is_retried_and_not_counted_as_deleted() {
    let cluster = SlurmCluster::start(CPUS);
    let app = app(&cluster, 1, |_| {}).await;
    let plan = submit(&app, &one_job("in-use", 2, 600)).await;
    assert_eq!((plan["status"].as_str(), plan["jobs"][0]["site"].as_str()), (Some("committed"), Some(SITE)));
    let name = plan["jobs"][0]["reservation_name"].as_str().unwrap().to_owned();
    let job = sbatch(&cluster, &name, 2, &["--time=5", "--wrap", "sleep 300"]);
    let r = app
        .call(reqwest::Method::DELETE, &format!("/v1/plans/{}", plan["id"].as_str().unwrap()), Some(ADMIN), None)
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let stray = |n: u64| format!("coreserve_slurm_strays_in_use{{site=\"s1\"}} {n}");
    let deleted = |n: u64| format!("coreserve_slurm_reconciled_total{{site=\"s1\",action=\"stray_deleted\"}} {n}");
    let kept = eventually(Duration::from_secs(10), async || app.metrics().await.contains(&stray(1))).await;
    assert!(kept, "{}", app.metrics().await);
    // Several syncs later: still there, with its job, and never counted as deleted.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let metrics = app.metrics().await;
    assert!(metrics.contains(&stray(1)) && metrics.contains(&deleted(0)), "{metrics}");
    assert!(cluster.ours().iter().any(|r| r.name == name), "{:?}", cluster.ours());
    assert!(["PENDING", "RUNNING"].contains(&job_state(&cluster, &job).0.as_str()), "{:?}", job_state(&cluster, &job));
    // The job gone, the next sync deletes it, once.
    cluster.run("scancel", &[&job]);
    let gone = eventually(Duration::from_secs(20), async || {
        let m = app.metrics().await;
        cluster.ours().is_empty() && m.contains(&deleted(1)) && m.contains(&stray(0))
    })
    .await;
    assert!(gone, "{:?} {}", cluster.ours(), app.metrics().await);
}
