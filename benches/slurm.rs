//! Slurm LIS benchmark (issue 23): how much a LIS in front of Slurm costs against slurmctld
//! alone doing the same reservations, and against a calendar-only LIS, in one run.
//!
//! A local Slurm cluster (`scripts/slurm-local`, one node claiming 4096 cores so that no
//! reservation is refused for room) and, for each arm, `N` single-job bookings of 8 CPUs for
//! 10 minutes, each in its own window:
//! 1. **slurmctld alone**: `scontrol create reservation` run `N` times one after the other
//!    (the baseline: what the LIS asks of Slurm per job, with nothing of coreserve);
//! 2. **model LIS**: prepare + commit at a calendar-only LIS, in process;
//! 3. **Slurm LIS, sequential**: prepare + commit at a LIS bound to Slurm (the commit makes the
//!    reservation), one after the other;
//! 4. **Slurm LIS, 4 in flight**: the same from 4 concurrent clients (how the LIS overlaps
//!    scontrol's process start and slurmctld's work);
//! 5. **plans, model LIS / Slurm LIS**: whole plans (the planner's search, prepare, commit) of a
//!    one-job request, sequentially;
//! 6. **the service, Slurm LIS, memory store / PostgreSQL store**: the same plans posted to the
//!    all-in-one service over HTTP (`POST /v1/plans`), on the memory store and on a PostgreSQL
//!    database of its own (one durable transaction per plan beside the reservation's `scontrol
//!    create`): one client posting one after the other (latency), then 4 clients in flight
//!    (throughput: a service has many clients, and while one plan waits for slurmctld another's
//!    transaction commits).
//!
//! Writes the `slurm` section of BENCHMARKS.md. Environment: `CORESERVE_SLURM_BENCH_N` (bookings
//! per arm, 200); `CORESERVE_BENCH_PG`, a PostgreSQL server whose user may create databases
//! (default `postgres://postgres@127.0.0.1:5432/postgres`; the bench fails without one). Needs
//! root and Debian's slurm-wlm and munge (`.ci/test` installs them).

#[path = "report.rs"]
mod report;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use coreserve::clock::SystemClock;
use coreserve::in_process::InProcessGrid;
use coreserve::lis::slurm::{Slurm, SlurmConfig};
use coreserve::lis::Lis;
use coreserve::model::{Grid, PlanRequest};
use coreserve::nis::Routing;
use coreserve::planner::{Planner, PlannerConfig};
use coreserve::protocol::{Compute, ComputeHoldRequest, Participant, TxnId};
use serde_json::json;

const COMMAND: &str = "cargo bench --bench slurm";
const CPUS: u32 = 4096;
const ADMIN: &str = "slurm-bench-admin-token";
/// The service arms' names (their rows of the table; the prose reads their ratios by name).
const M1: &str = "service (POST /v1/plans), Slurm LIS, memory store";
const M4: &str = "service, Slurm LIS, memory store, 4 clients in flight";
const PG1: &str = "service (POST /v1/plans), Slurm LIS, PostgreSQL store";
const PG4: &str = "service, Slurm LIS, PostgreSQL store, 4 clients in flight";

struct Cluster(PathBuf);

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(&self.0).status();
    }
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm-local")
}

/// Latencies (seconds) summarised: p50, p99 (ms) and the rate over the wall time (per s).
struct Arm {
    name: &'static str,
    p50_ms: f64,
    p99_ms: f64,
    per_s: f64,
}

fn arm(name: &'static str, mut lat: Vec<f64>, wall_s: f64) -> Arm {
    lat.sort_by(f64::total_cmp);
    Arm {
        name,
        p50_ms: report::percentile(&lat, 0.5) * 1e3,
        p99_ms: report::percentile(&lat, 0.99) * 1e3,
        per_s: lat.len() as f64 / wall_s,
    }
}

fn grid() -> Grid {
    serde_json::from_value(json!({
        "nodes": [{"id": "n1", "label": "one"}],
        "links": [],
        "sites": [{"id": "s1", "node": "n1", "cpus": CPUS, "os": "linux", "price_per_cpu_hour": 1.0}]
    }))
    .expect("bench grid")
}

fn hold(i: usize, base: i64) -> ComputeHoldRequest {
    let start = base + i as i64 * 600;
    ComputeHoldRequest {
        replaces: None,
        reservation_name: None,
        txn: TxnId::new(),
        site: "s1".into(),
        cpus: 8,
        start,
        end: start + 600,
        gpus: None,
        user: None,
    }
}

/// The one-job request of booking `i` (8 CPUs for 10 minutes, in a window of its own from
/// `now` + 1 h).
fn plan_request(i: usize, now: chrono::DateTime<chrono::Utc>, tag: &str) -> serde_json::Value {
    json!({
        "id": format!("bench-{tag}-{i}"),
        "submitted_at": now,
        "not_before": now + chrono::Duration::seconds(3600 + 600 * i as i64),
        "deadline": now + chrono::Duration::days(30),
        "jobs": [{"name": "A", "os": "linux", "cpus": 8, "offset_s": 0, "duration_s": 600}],
        "transfers": []
    })
}

/// `n` plans posted to an all-in-one service on `store` whose site `s1` fronts Slurm
/// (`config`), by `clients` concurrent clients, each a user of its own (each posts its share
/// one after the other): the latencies (seconds) and the wall time.
async fn through_the_service(
    store: Arc<dyn coreserve::store::Store>,
    config: &SlurmConfig,
    n: usize,
    clients: usize,
    tag: &str,
) -> (Vec<f64>, f64) {
    let serve = coreserve::api::ServeConfig {
        listen: "127.0.0.1:0".into(),
        admin_token: Some(ADMIN.into()),
        w_interval_s: 60,
        slurm: vec![("s1".into(), SlurmConfig { sync_s: 3600, ..config.clone() })],
        ..coreserve::api::ServeConfig::default()
    };
    let app = coreserve::api::Application::build(serve, grid(), store).await.expect("the service starts");
    let url = format!("http://127.0.0.1:{}/v1/plans", app.port());
    tokio::spawn(app.run_until_stopped());
    let http = reqwest::Client::new();
    // One user per client: the service plans one user's requests at most `cores` at a time
    // (src/api/lanes.rs), as a fair share, so clients of one user would measure that cap.
    let mut tokens = Vec::new();
    for c in 0..clients {
        let base = url.trim_end_matches("/plans");
        let r =
            http.post(format!("{base}/tokens")).bearer_auth(ADMIN).json(&json!({"user": format!("bench-{tag}-{c}")}));
        let v: serde_json::Value = r.send().await.expect("POST /v1/tokens").json().await.expect("a token");
        tokens.push(v["token"].as_str().expect("a token").to_owned());
    }
    let now = chrono::Utc::now();
    let t0 = Instant::now();
    let client = |c: usize| {
        let (http, url, token) = (http.clone(), url.clone(), tokens[c].clone());
        async move {
            let mut lat = Vec::new();
            for i in (c..n).step_by(clients) {
                let t = Instant::now();
                let mut body = plan_request(i, now, tag);
                // The service stamps the receipt itself.
                body.as_object_mut().expect("an object").remove("submitted_at");
                let r = http.post(&url).bearer_auth(&token).json(&body).send().await.expect("POST");
                assert_eq!(r.status(), reqwest::StatusCode::CREATED, "{:?}", r.text().await);
                let o: serde_json::Value = r.json().await.expect("a plan");
                assert_eq!(o["status"], "committed", "{o}");
                lat.push(t.elapsed().as_secs_f64());
            }
            lat
        }
    };
    let lat = futures::future::join_all((0..clients).map(client)).await.concat();
    (lat, t0.elapsed().as_secs_f64())
}

async fn book(lis: &dyn Participant<Compute>, req: &ComputeHoldRequest) {
    let h = lis.prepare(req).await.expect("prepare");
    lis.commit(h.id).await.expect("commit");
}

fn main() {
    coreserve::protocol::http::install_crypto_provider();
    let n: usize = std::env::var("CORESERVE_SLURM_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let dir = tempfile::Builder::new().prefix("coreserve-slurm-bench.").tempdir().unwrap().keep();
    let out = Command::new(script()).arg("start").arg(&dir).arg(CPUS.to_string()).arg("batch").output().unwrap();
    assert!(out.status.success(), "scripts/slurm-local start: {}", String::from_utf8_lossy(&out.stderr));
    let cluster = Cluster(dir.clone());
    let conf = dir.join("slurm.conf");
    let config =
        SlurmConfig { slurm_conf: Some(conf.clone()), default_user: Some("root".into()), ..SlurmConfig::new("batch") };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let scontrol = |args: &[String]| {
        let out = Command::new("scontrol").args(args).env("SLURM_CONF", &conf).env("TZ", "UTC").output().unwrap();
        assert!(out.status.success(), "scontrol {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let clear = |prefix: &str| {
        let slurm = Slurm::new(config.clone());
        rt.block_on(async {
            for r in slurm.reservations().await.unwrap().into_iter().filter(|r| r.name.starts_with(prefix)) {
                slurm.delete(&r.name).await.unwrap();
            }
        });
    };
    let base = chrono::Utc::now().timestamp() + 3600;
    let mut arms = Vec::new();

    // 1. slurmctld alone.
    let mut lat = Vec::with_capacity(n);
    let t0 = Instant::now();
    for i in 0..n {
        let r = hold(i, base);
        let t = Instant::now();
        let fmt = |s: i64| coreserve::model::from_time(s).format("%Y-%m-%dT%H:%M:%S").to_string();
        scontrol(&[
            "create".into(),
            "reservation".into(),
            format!("ReservationName=alone_{i}"),
            format!("StartTime={}", fmt(r.start)),
            format!("EndTime={}", fmt(r.end)),
            "PartitionName=batch".into(),
            "CoreCnt=8".into(),
            "Users=root".into(),
        ]);
        lat.push(t.elapsed().as_secs_f64());
    }
    arms.push(arm("slurmctld alone (scontrol create, sequential)", lat, t0.elapsed().as_secs_f64()));
    clear("alone_");

    let site = grid().sites()[0].clone();
    let clock = Arc::new(SystemClock);
    // 2. model LIS.
    let model = Lis::new(site.clone(), clock.clone(), 120);
    let mut lat = Vec::with_capacity(n);
    let t0 = Instant::now();
    rt.block_on(async {
        for i in 0..n {
            let t = Instant::now();
            book(&model, &hold(i, base)).await;
            lat.push(t.elapsed().as_secs_f64());
        }
    });
    arms.push(arm("model LIS (prepare + commit, in memory)", lat, t0.elapsed().as_secs_f64()));

    // 3. Slurm LIS, sequential.
    let bound = Lis::new(site.clone(), clock.clone(), 120).with_slurm(Slurm::new(config.clone()));
    let mut lat = Vec::with_capacity(n);
    let t0 = Instant::now();
    rt.block_on(async {
        for i in 0..n {
            let t = Instant::now();
            book(&bound, &hold(i, base)).await;
            lat.push(t.elapsed().as_secs_f64());
        }
    });
    arms.push(arm("Slurm LIS (prepare + commit = scontrol create), sequential", lat, t0.elapsed().as_secs_f64()));
    clear("coreserve_");

    // 4. Slurm LIS, 4 in flight.
    let bound = Arc::new(Lis::new(site.clone(), clock.clone(), 120).with_slurm(Slurm::new(config.clone())));
    let t0 = Instant::now();
    let lat: Vec<f64> = rt.block_on(async {
        let tasks: Vec<_> = (0..4)
            .map(|k| {
                let bound = bound.clone();
                tokio::spawn(async move {
                    let mut lat = Vec::new();
                    for i in (k..n).step_by(4) {
                        let t = Instant::now();
                        book(bound.as_ref(), &hold(i, base)).await;
                        lat.push(t.elapsed().as_secs_f64());
                    }
                    lat
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        all
    });
    arms.push(arm("Slurm LIS, 4 clients in flight", lat, t0.elapsed().as_secs_f64()));
    clear("coreserve_");

    // 5. Whole plans.
    for (name, slurm) in [("plans, model LIS", false), ("plans, Slurm LIS", true)] {
        let g = grid();
        let mut local = InProcessGrid::new(&g, clock.clone(), 120, Routing::Shortest);
        if slurm {
            local.lis.insert(
                "s1".into(),
                Arc::new(Lis::new(site.clone(), clock.clone(), 120).with_slurm(Slurm::new(config.clone()))),
            );
        }
        let planner = Planner::new(PlannerConfig { w_interval_s: 60, ..PlannerConfig::default() }, local.services());
        let now = chrono::Utc::now();
        let mut lat = Vec::with_capacity(n);
        let t0 = Instant::now();
        rt.block_on(async {
            for i in 0..n {
                let req: PlanRequest = serde_json::from_value(plan_request(i, now, "p")).expect("bench request");
                let t = Instant::now();
                let o = planner.plan(&req).await;
                assert_eq!(o.status, coreserve::model::PlanStatus::Committed, "{:?}", o.reason);
                lat.push(t.elapsed().as_secs_f64());
            }
        });
        arms.push(arm(name, lat, t0.elapsed().as_secs_f64()));
        clear("coreserve_");
    }

    // 6. The service, memory store, then PostgreSQL: one client, then 4 in flight.
    for (clients, arm_name) in [(1, M1), (4, M4)] {
        let store = Arc::new(coreserve::store::MemoryStore::new());
        let (lat, wall) = rt.block_on(through_the_service(store, &config, n, clients, &format!("m{clients}")));
        arms.push(arm(arm_name, lat, wall));
        clear("coreserve_");
    }
    let server =
        std::env::var("CORESERVE_BENCH_PG").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    for (clients, arm_name) in [(1, PG1), (4, PG4)] {
        let db = format!("coreserve_bench_slurm_{}_{clients}", std::process::id());
        let (lat, wall) = rt.block_on(async {
            use sqlx::Executor;
            let admin = sqlx::PgPool::connect(&server).await.expect("CORESERVE_BENCH_PG: a PostgreSQL server");
            admin.execute(format!("DROP DATABASE IF EXISTS {db}").as_str()).await.unwrap();
            admin.execute(format!("CREATE DATABASE {db}").as_str()).await.unwrap();
            let url = format!("{}/{db}", server.rsplit_once('/').expect("CORESERVE_BENCH_PG: a URL").0);
            let store = Arc::new(coreserve::store::PgStore::connect(&url).await.expect("the bench database"));
            let result = through_the_service(store, &config, n, clients, &format!("pg{clients}")).await;
            admin.execute(format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)").as_str()).await.unwrap();
            result
        });
        arms.push(arm(arm_name, lat, wall));
        clear("coreserve_");
    }
    drop(cluster);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: String = load.split_whitespace().take(3).collect::<Vec<_>>().join(" ");

    let alone = arms[0].per_s;
    let find = |name: &str| arms.iter().find(|a| a.name == name).expect("an arm of that name");
    let ratio = |name: &str| find(name).per_s / alone;
    let p50 = |name: &str| find(name).p50_ms;
    let mut body = format!(
        "{}\n{n} bookings per arm, each of 8 CPUs for 10 minutes in a window of its own, against a \
         local one-node Slurm 22.05 (`scripts/slurm-local`, 4096 cores claimed, so nothing is refused \
         for room). `ratio` is the arm's rate over slurmctld alone's: the Slurm LIS's goal is >= 0.8, \
         so that Slurm, not coreserve, is the limit.\n\n| arm | p50 | p99 | per second | ratio to slurmctld alone |\n|---|---|---|---|---|\n",
        report::heading("Slurm LIS against slurmctld alone", COMMAND)
    );
    for a in &arms {
        let ms = |v: f64| if v < 1.0 { format!("{:.1} µs", v * 1e3) } else { format!("{v:.2} ms") };
        body.push_str(&format!(
            "| {} | {} | {} | {:.0} | {:.2} |\n",
            a.name,
            ms(a.p50_ms),
            ms(a.p99_ms),
            a.per_s,
            a.per_s / alone
        ));
    }
    body.push_str(&format!(
        "\nA booking at a Slurm site costs one `scontrol create reservation` (a process start and one \
         slurmctld RPC) on top of the calendar's microseconds; the LIS holds no lock while it waits, \
         and a persist of several holds runs up to 4 creates at once (`CREATES_IN_FLIGHT`). On this \
         2-core machine scontrol's process start shares the cores with slurmctld; a larger machine \
         gives the concurrent arm more room, while slurmctld handles RPCs one at a time, so the \
         sequential baseline stays the bound. The service arms add HTTP and, on PostgreSQL, one \
         durable transaction per plan (one `COMMIT`, one WAL flush); every ratio is against \
         slurmctld alone in the same run (load average at the end of the run: {load}).\n\n\
         The goal (>= 0.8 of slurmctld alone) is judged on the service's throughput, the arms with \
         4 clients in flight: PostgreSQL {pg4:.2}, memory {m4:.2} ({pg4_verdict}). One client \
         posting one plan after the other cannot reach it on any store: each plan then waits \
         for its `scontrol create` and then for its commit's WAL flush, one after the other \
         (PostgreSQL {pg1:.2}, memory {m1:.2}: the store adds {store_ms:.1} ms to the p50). With \
         several clients one plan's commit overlaps another's `scontrol`, as in any service with \
         more than one user.\n",
        pg4 = ratio(PG4),
        m4 = ratio(M4),
        pg1 = ratio(PG1),
        m1 = ratio(M1),
        pg4_verdict = if ratio(PG4) >= 0.8 { "met" } else { "MISSED" },
        store_ms = p50(PG1) - p50(M1),
    ));
    report::write_markdown("slurm", &body);
    println!("{body}");
    println!("section `slurm` of BENCHMARKS.md written");
}
