//! Fairness benchmark: how long one user's small plan request takes while another user floods
//! the same all-in-one broker with heavy requests (issue 8, "fair limits"; issue 28; issue 49).
//!
//! Issue 49's setting: a real `coreserve serve` process, all-in-one, on PostgreSQL (a fresh
//! database per phase, on the server of `CORESERVE_TEST_PG`), default flags, on Geant2012
//! (40 sites, imported as `coreserve demo` does); the clients run in this process, on the
//! same cores. Phases, each on a fresh database and a fresh process:
//! 1. **alone**: user `small` books `SMALL_REQUESTS` 4-job diamond workflows one after the
//!    other (the baseline);
//! 2. **8 connections**: user `flood` keeps 8 64-job co-allocations (63 transfers) in flight at
//!    all times (its in-flight limit: no 429) while `small` does the same as in 1;
//! 3. **48 connections, pause after 429**: the flood keeps 48 connections busy, pausing 0.2 s
//!    after each 429 before sending again;
//! 4. **48 connections, re-send at once**: the same, ignoring the 429s (the next request as
//!    soon as the last one is answered).
//!
//! Every request books for real (`POST /v1/plans`): the small user's in the next two days, the
//! same sequence in every phase; the flood's each in a window of its own, days ahead, so that
//! the two users compete for the service (its HTTP workers, planners, CPU and database), not
//! for the same CPUs of the calendars. The small request's latency is the client's (send to
//! answer); beside it the answer's `planning_ms` (the planner's own time inside the service),
//! which tells the time spent planning from the time spent around it (HTTP, admission,
//! database). Writes its section of BENCHMARKS.md, with each phase's p99 as a ratio to the
//! alone phase's (issue 49's goal: at most 3x), and the machine's load average at the end of
//! each phase (other work on the machine shows there).
//!
//! Environment: `CORESERVE_TEST_PG` (PostgreSQL server, default
//! `postgres://postgres@127.0.0.1:5432/postgres`; unreachable = failure),
//! `CORESERVE_FAIRNESS_SMALL` (requests of the small user per phase, 300),
//! `CORESERVE_FAIRNESS_FLOOD` (connections of the flood in phases 3 and 4, 48),
//! `CORESERVE_FAIRNESS_HEAVY_CPUS` (CPUs per job of a flood request, 4),
//! `CORESERVE_FAIRNESS_ONLY` (comma-separated phase numbers to run, e.g. `1,4`; default all),
//! `CORESERVE_FAIRNESS_SERVE_ARGS` (extra `coreserve serve` flags, space-separated: to try a
//! setting; the section then names them).

#[path = "report.rs"]
mod report;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use chrono::Utc;
use coreserve::grid::{import_graphml, ImportOptions};
use coreserve_loadtest::database::Databases;
use coreserve_loadtest::deploy::{wait_ready, Mode, Procs};
use serde_json::{json, Value};

const COMMAND: &str = "cargo bench --bench fairness";
const ADMIN: &str = "fairness-admin-token-0123456789";
const SERVICE: &str = "fairness-service-token-0123456789";
/// How long a flood client waits after a 429 (but in the phase that ignores them).
const BACKOFF: Duration = Duration::from_millis(200);
/// The flood's connections in phase 2: its in-flight limit (the default).
const AT_THE_LIMIT: usize = coreserve::api::config::DEFAULT_MAX_IN_FLIGHT_PER_USER;
/// A phase's flood runs this long before the small user starts.
const FLOOD_WARMUP: Duration = Duration::from_secs(3);
/// Distinct flood bodies, cycled (made before the phase, so the flood's clients cost little
/// CPU to send them).
const FLOOD_BODIES: usize = 400;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn ts(offset_s: i64) -> String {
    (Utc::now() + chrono::Duration::seconds(offset_s)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A 4-job diamond workflow (A -> B, C -> D), 8 CPUs a job, 100 Mbit/s transfers, within the
/// next two days.
fn small_request(i: usize) -> Value {
    let job = |name: &str, offset_s: i64| json!({"name": name, "os": "linux", "cpus": 8, "offset_s": offset_s, "duration_s": 3600});
    let transfer = |from: &str, to: &str, offset_s: i64| json!({"from": from, "to": to, "bandwidth_mbps": 100, "offset_s": offset_s, "duration_s": 600});
    json!({
        "id": format!("small-{i}"),
        "deadline": ts(2 * 86_400),
        "jobs": [job("A", 0), job("B", 3000), job("C", 3000), job("D", 6000)],
        "transfers": [transfer("A", "B", 3000), transfer("A", "C", 3000), transfer("B", "D", 6000), transfer("C", "D", 6000)],
    })
}

/// A 64-job co-allocation (`HEAVY_CPUS` CPUs a job, all for the same hour) with a transfer
/// between every two consecutive jobs: the largest request the service admits. Request `i`
/// books in a window of its own (a day, starting 5 days + `i` x 2 hours ahead).
fn heavy_request(i: usize) -> Value {
    let cpus = env_or("CORESERVE_FAIRNESS_HEAVY_CPUS", 4);
    let jobs: Vec<Value> = (0..64)
        .map(|j| json!({"name": format!("j{j}"), "os": "linux", "cpus": cpus, "offset_s": 0, "duration_s": 3600}))
        .collect();
    let transfers: Vec<Value> = (1..64)
        .map(|j| {
            json!({"from": format!("j{}", j - 1), "to": format!("j{j}"), "bandwidth_mbps": 100, "offset_s": 0, "duration_s": 3600})
        })
        .collect();
    let start = 5 * 86_400 + i as i64 * 7200;
    json!({"id": format!("heavy-{i}"), "not_before": ts(start), "deadline": ts(start + 86_400), "jobs": jobs, "transfers": transfers})
}

/// The 1-minute load average now (/proc/loadavg).
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

struct App {
    base: String,
    small: String,
    flood: String,
    /// The serve process (killed when dropped).
    _procs: Procs,
}

/// Starts `coreserve serve` all-in-one on a fresh database of `dbs` and makes the two users'
/// tokens.
async fn start(client: &reqwest::Client, dbs: &Databases, grid_path: &Path, extra: &[String]) -> Result<App> {
    let grid: coreserve::model::Grid = serde_json::from_str(&std::fs::read_to_string(grid_path)?)?;
    let db = dbs.create("fairness").await?;
    let mut procs = Procs::new(Path::new(env!("CARGO_BIN_EXE_coreserve")), &db, ADMIN, SERVICE, extra);
    let base = procs.deploy(Mode::AllInOne, &grid, grid_path)?;
    wait_ready(client, &base).await?;
    let mut tokens = Vec::new();
    for user in ["small", "flood"] {
        let r =
            client.post(format!("{base}/v1/tokens")).bearer_auth(ADMIN).json(&json!({ "user": user })).send().await?;
        if r.status() != reqwest::StatusCode::CREATED {
            bail!("POST /v1/tokens answered {}", r.status());
        }
        tokens.push(r.json::<Value>().await?["token"].as_str().context("token")?.to_string());
    }
    let flood = tokens.pop().unwrap();
    Ok(App { base, small: tokens.pop().unwrap(), flood, _procs: procs })
}

/// What one phase measured.
struct Phase {
    name: &'static str,
    /// The small user's latencies, sorted (ms).
    small_ms: Vec<f64>,
    /// The small user's answers' `planning_ms`, sorted.
    small_planning_ms: Vec<f64>,
    /// The small user's plans committed.
    small_committed: usize,
    /// Flood requests answered 201 and 429, while the small user ran.
    flood_done: u64,
    flood_refused: u64,
    /// The flood's requests answered 201 while measured: median latency.
    flood_p50_ms: Option<f64>,
    /// The 1-minute load average at the end of the phase.
    load: f64,
}

#[allow(clippy::too_many_arguments)]
async fn phase(
    dbs: &Databases,
    grid_path: &Path,
    extra: &[String],
    name: &'static str,
    flood_clients: usize,
    small_n: usize,
    backoff: Duration,
) -> Result<Phase> {
    eprintln!("fairness: {name}");
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build()?;
    let app = Arc::new(start(&client, dbs, grid_path, extra).await?);
    // The flood's own connection pool (up to 48 connections); the small user keeps its one.
    let flood_client = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .pool_max_idle_per_host(flood_clients.max(1))
        .build()?;
    let bodies: Arc<Vec<actix_web::web::Bytes>> =
        Arc::new((0..FLOOD_BODIES).map(|i| serde_json::to_vec(&heavy_request(i)).unwrap().into()).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let (done, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let flood_ms = Arc::new(std::sync::Mutex::new(Vec::new()));
    let counting = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicU64::new(0));
    let mut flooders = Vec::new();
    for _ in 0..flood_clients {
        let (client, app, stop, done, refused, counting, flood_ms, bodies, next) = (
            flood_client.clone(),
            app.clone(),
            stop.clone(),
            done.clone(),
            refused.clone(),
            counting.clone(),
            flood_ms.clone(),
            bodies.clone(),
            next.clone(),
        );
        flooders.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize % bodies.len();
                let t = Instant::now();
                let r = client
                    .post(format!("{}/v1/plans", app.base))
                    .bearer_auth(&app.flood)
                    .header("Content-Type", "application/json")
                    .body(bodies[i].clone())
                    .send()
                    .await;
                let status = match r {
                    Ok(r) => {
                        let s = r.status().as_u16();
                        let _ = r.bytes().await;
                        s
                    }
                    Err(_) => 0,
                };
                let counted = counting.load(Ordering::Relaxed);
                if status == 429 {
                    if counted {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                    tokio::time::sleep(backoff).await;
                } else if counted && status == 201 {
                    done.fetch_add(1, Ordering::Relaxed);
                    flood_ms.lock().unwrap().push(t.elapsed().as_secs_f64() * 1e3);
                } else if status == 0 {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }));
    }
    if flood_clients > 0 {
        tokio::time::sleep(FLOOD_WARMUP).await;
    }
    counting.store(true, Ordering::Relaxed);
    let mut small_ms = Vec::with_capacity(small_n);
    let mut small_planning_ms = Vec::with_capacity(small_n);
    let mut small_committed = 0;
    for i in 0..small_n {
        let body = serde_json::to_vec(&small_request(i))?;
        let t = Instant::now();
        let r = client
            .post(format!("{}/v1/plans", app.base))
            .bearer_auth(&app.small)
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await?;
        let status = r.status();
        let body: Value = r.json().await?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if status != reqwest::StatusCode::CREATED {
            bail!("{name}: the small request answered {status}: {body}");
        }
        small_ms.push(ms);
        small_planning_ms.push(body["planning_ms"].as_f64().unwrap_or(f64::NAN));
        small_committed += usize::from(body["status"] == "committed");
    }
    counting.store(false, Ordering::Relaxed);
    let load = load_average();
    stop.store(true, Ordering::Relaxed);
    for f in flooders {
        f.await?;
    }
    drop(app);
    small_ms.sort_by(f64::total_cmp);
    small_planning_ms.sort_by(f64::total_cmp);
    let mut flood_ms = std::mem::take(&mut *flood_ms.lock().unwrap());
    flood_ms.sort_by(f64::total_cmp);
    let flood_p50_ms = if flood_ms.is_empty() { None } else { Some(report::percentile(&flood_ms, 0.50)) };
    let p = Phase {
        name,
        small_ms,
        small_planning_ms,
        small_committed,
        flood_done: done.load(Ordering::Relaxed),
        flood_refused: refused.load(Ordering::Relaxed),
        flood_p50_ms,
        load,
    };
    eprintln!(
        "  small p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; planning p99 {:.1} ms; flood {} / {} (429); load {:.2}",
        report::percentile(&p.small_ms, 0.5),
        report::percentile(&p.small_ms, 0.99),
        p.small_ms.last().copied().unwrap_or(f64::NAN),
        report::percentile(&p.small_planning_ms, 0.99),
        p.flood_done,
        p.flood_refused,
        p.load
    );
    Ok(p)
}

fn write(phases: &[Phase], flood_clients: usize, small_n: usize, pg: &str, extra: &[String]) {
    let heavy_cpus = env_or("CORESERVE_FAIRNESS_HEAVY_CPUS", 4);
    let base_p99 = phases.iter().find(|p| p.name == ALONE).map(|p| report::percentile(&p.small_ms, 0.99));
    let flags = if extra.is_empty() { "default flags".to_owned() } else { format!("flags `{}`", extra.join(" ")) };
    let mut body = format!(
        "{}\n`coreserve serve` all-in-one ({flags}: 3 planners, BIR, policy `time`, the default limits) on {pg}, on Geant2012, a fresh database and process per phase; the clients run in the bench's process on the same cores. User `small` books {small_n} 4-job diamond workflows one after the other (the same sequence in every phase); user `flood` keeps {AT_THE_LIMIT} (its in-flight limit) or {flood_clients} connections busy booking 64-job co-allocations ({heavy_cpus} CPUs a job, 63 transfers, each in a window of its own days ahead), pausing {} ms after each 429 or re-sending at once. Baseline: the small user alone, in the same run; goal (issue 49): p99 at most 3x the baseline's. `planning` is the answers' `planning_ms` (the planner's own time inside the service); load: the machine's 1-minute load average at the end of the phase (other work on the machine included).\n\n\
| phase | small request p50 | p90 | p99 | max | p99 ÷ alone | planning p50 / p99 | small committed | flood answered / refused (429) while measured | flood request p50 | load average |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
        report::heading("Fairness: a small request while another user floods", COMMAND),
        BACKOFF.as_millis()
    );
    for p in phases {
        let s = &p.small_ms;
        let p99 = report::percentile(s, 0.99);
        body.push_str(&format!(
            "| {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {} | {:.1} / {:.1} ms | {} / {} | {} / {} | {} | {:.2} |\n",
            p.name,
            report::percentile(s, 0.50),
            report::percentile(s, 0.90),
            p99,
            s[s.len() - 1],
            base_p99.map_or("-".into(), |b| format!("{:.1}x", p99 / b)),
            report::percentile(&p.small_planning_ms, 0.50),
            report::percentile(&p.small_planning_ms, 0.99),
            p.small_committed,
            s.len(),
            p.flood_done,
            p.flood_refused,
            p.flood_p50_ms.map_or("-".into(), |ms| format!("{ms:.0} ms")),
            p.load,
        ));
    }
    report::write_markdown("fairness", &body);
    print!("{body}");
}

const ALONE: &str = "alone";

fn main() -> Result<()> {
    // `cargo bench` passes `--bench`; nothing to parse.
    let small_n = env_or("CORESERVE_FAIRNESS_SMALL", 300).max(1);
    let flood_clients = env_or("CORESERVE_FAIRNESS_FLOOD", 48);
    let only: Vec<usize> = std::env::var("CORESERVE_FAIRNESS_ONLY")
        .unwrap_or_default()
        .split(',')
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    let extra: Vec<String> = std::env::var("CORESERVE_FAIRNESS_SERVE_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect();
    let server = std::env::var("CORESERVE_TEST_PG")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir()?;
    let xml = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/topology-zoo/Geant2012.graphml"))
        .context("data/topology-zoo/Geant2012.graphml")?;
    let grid = import_graphml(&xml, &ImportOptions { seed: 1, ..Default::default() })?;
    let grid_path = dir.path().join("geant2012.json");
    std::fs::write(&grid_path, serde_json::to_string(&grid)?)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let dbs = Databases::new(&server);
    let result = rt.block_on(async {
        let pg = {
            use sqlx::Connection;
            let mut c = sqlx::PgConnection::connect(&server).await.with_context(|| {
                format!("PostgreSQL is required and is unreachable at {server} (see CORESERVE_TEST_PG)")
            })?;
            let v: String = sqlx::query_scalar("SHOW server_version").fetch_one(&mut c).await?;
            format!("PostgreSQL {} (this machine)", v.split_whitespace().next().unwrap_or_default())
        };
        let arms: [(&'static str, usize, Duration); 4] = [
            (ALONE, 0, BACKOFF),
            ("flood: 8 connections (its limit, no 429)", AT_THE_LIMIT, BACKOFF),
            ("flood: 48 connections, pause 0.2 s after a 429", flood_clients, BACKOFF),
            ("flood: 48 connections, re-send at once", flood_clients, Duration::ZERO),
        ];
        let mut phases = Vec::new();
        for (k, (name, clients, backoff)) in arms.into_iter().enumerate() {
            if !only.is_empty() && !only.contains(&(k + 1)) {
                continue;
            }
            let p = phase(&dbs, &grid_path, &extra, name, clients, small_n, backoff).await;
            dbs.drop_all().await?;
            phases.push(p?);
        }
        write(&phases, flood_clients, small_n, &pg, &extra);
        anyhow::Ok(())
    });
    let dropped = rt.block_on(dbs.drop_all());
    result.and(dropped)
}
