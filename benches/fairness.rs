//! Fairness benchmark: how long one user's small plan request takes while another user floods
//! the same all-in-one broker with heavy requests (issue 8, "fair limits"; issue 28; issue 49).
//!
//! One process, an all-in-one `coreserve serve` (in-process, memory store, 2 HTTP workers,
//! 3 planners, the default limits: 16 planning permits, 8 requests in flight per user, at most
//! one planning per core per user, a user's requests beside another of theirs in the
//! background lane) on Geant2012 (40 sites, imported as `coreserve demo` does), phases on a
//! fresh application each:
//! 1. **alone**: user `small` sends `SMALL_REQUESTS` 4-job diamond workflows one after the
//!    other (the baseline);
//! 2. **8 connections**: user `flood` keeps 8 64-job co-allocations (63 transfers) in flight at
//!    all times (its in-flight limit: no 429) while `small` does the same as in 1;
//! 3. **48 connections, pause after 429**: the flood keeps 48 connections busy, pausing 0.2 s
//!    after each 429 before sending again;
//! 4. **48 connections, re-send at once**: the same, ignoring the 429s (the next request as
//!    soon as the last one is answered).
//!
//! Every request is a dry run (`?dry_run=true`: planned with tentative holds, nothing booked), so
//! the calendars are the same in every phase and the phases differ only by the flood. The
//! small request's latency is the client's (send to answer); the clients run in the same
//! process, on the same 2 cores. Writes its section of BENCHMARKS.md, with each phase's p99
//! as a ratio to the alone phase's (issue 49's goal: at most 3x).
//!
//! Environment: `CORESERVE_FAIRNESS_SMALL` (requests of the small user per phase, 200),
//! `CORESERVE_FAIRNESS_FLOOD` (connections of the flood in phases 3 and 4, 48),
//! `CORESERVE_FAIRNESS_HEAVY_CPUS` (CPUs per job of a flood request, 4).

#[path = "report.rs"]
mod report;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use chrono::Utc;
use coreserve::api::{Application, ServeConfig};
use coreserve::grid::{import_graphml, ImportOptions};
use coreserve::store::MemoryStore;
use serde_json::{json, Value};

const COMMAND: &str = "cargo bench --bench fairness";
const ADMIN: &str = "fairness-admin-token";
/// How long a flood client waits after a 429 (but in the phase that ignores them).
const BACKOFF: Duration = Duration::from_millis(200);
/// The flood's connections in phase 2: its in-flight limit (the default).
const AT_THE_LIMIT: usize = coreserve::api::config::DEFAULT_MAX_IN_FLIGHT_PER_USER;
/// A phase's flood runs this long before the small user starts.
const FLOOD_WARMUP: Duration = Duration::from_secs(3);

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn ts(offset_s: i64) -> String {
    (Utc::now() + chrono::Duration::seconds(offset_s)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A 4-job diamond workflow (A -> B, C -> D), 8 CPUs a job, 100 Mbit/s transfers.
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
/// between every two consecutive jobs: the largest request the service admits.
fn heavy_request(i: u64) -> Value {
    let cpus = env_or("CORESERVE_FAIRNESS_HEAVY_CPUS", 4);
    let jobs: Vec<Value> = (0..64)
        .map(|j| json!({"name": format!("j{j}"), "os": "linux", "cpus": cpus, "offset_s": 0, "duration_s": 3600}))
        .collect();
    let transfers: Vec<Value> = (1..64)
        .map(|j| {
            json!({"from": format!("j{}", j - 1), "to": format!("j{j}"), "bandwidth_mbps": 100, "offset_s": 0, "duration_s": 3600})
        })
        .collect();
    json!({"id": format!("heavy-{i}"), "deadline": ts(2 * 86_400), "jobs": jobs, "transfers": transfers})
}

struct App {
    base: String,
    small: String,
    flood: String,
}

/// Starts an all-in-one application on 127.0.0.1:0 and makes the two users' tokens.
async fn start(client: &reqwest::Client) -> Result<App> {
    let xml = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/topology-zoo/Geant2012.graphml"))
        .context("data/topology-zoo/Geant2012.graphml")?;
    let grid = import_graphml(&xml, &ImportOptions { seed: 1, ..Default::default() })?;
    let config = ServeConfig {
        listen: "127.0.0.1:0".into(),
        admin_token: Some(ADMIN.into()),
        workers: Some(2),
        ..ServeConfig::default()
    };
    let app = Application::build(config, grid, Arc::new(MemoryStore::new())).await?;
    let base = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run_until_stopped());
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
    Ok(App { base, small: tokens.pop().unwrap(), flood })
}

/// What one phase measured.
struct Phase {
    name: &'static str,
    /// The small user's latencies, sorted (ms).
    small_ms: Vec<f64>,
    /// Flood requests answered 200 (planned or not) and 429, while the small user ran.
    flood_done: u64,
    flood_refused: u64,
    /// The flood's requests answered while measured: median latency.
    flood_p50_ms: Option<f64>,
}

async fn phase(
    client: &reqwest::Client,
    name: &'static str,
    flood_clients: usize,
    small_n: usize,
    backoff: Duration,
) -> Result<Phase> {
    let app = Arc::new(start(client).await?);
    let stop = Arc::new(AtomicBool::new(false));
    let (done, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let flood_ms = Arc::new(std::sync::Mutex::new(Vec::new()));
    let counting = Arc::new(AtomicBool::new(false));
    let mut flooders = Vec::new();
    for c in 0..flood_clients as u64 {
        let (client, app, stop, done, refused, counting, flood_ms) = (
            client.clone(),
            app.clone(),
            stop.clone(),
            done.clone(),
            refused.clone(),
            counting.clone(),
            flood_ms.clone(),
        );
        flooders.push(tokio::spawn(async move {
            let mut i = c * 1_000_000;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let t = Instant::now();
                let r = client
                    .post(format!("{}/v1/plans?dry_run=true", app.base))
                    .bearer_auth(&app.flood)
                    .json(&heavy_request(i))
                    .send()
                    .await;
                let status = match r {
                    Ok(r) => r.status().as_u16(),
                    Err(_) => 0,
                };
                let counted = counting.load(Ordering::Relaxed);
                if status == 429 {
                    if counted {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                    tokio::time::sleep(backoff).await;
                } else if counted && status == 200 {
                    done.fetch_add(1, Ordering::Relaxed);
                    flood_ms.lock().unwrap().push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
        }));
    }
    if flood_clients > 0 {
        tokio::time::sleep(FLOOD_WARMUP).await;
    }
    counting.store(true, Ordering::Relaxed);
    let mut small_ms = Vec::with_capacity(small_n);
    for i in 0..small_n {
        let t = Instant::now();
        let r = client
            .post(format!("{}/v1/plans?dry_run=true", app.base))
            .bearer_auth(&app.small)
            .json(&small_request(i))
            .send()
            .await?;
        let status = r.status();
        let body: Value = r.json().await?;
        if status != reqwest::StatusCode::OK {
            bail!("{name}: the small request answered {status}: {body}");
        }
        small_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    counting.store(false, Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    for f in flooders {
        f.await?;
    }
    small_ms.sort_by(f64::total_cmp);
    let mut flood_ms = std::mem::take(&mut *flood_ms.lock().unwrap());
    flood_ms.sort_by(f64::total_cmp);
    let flood_p50_ms = if flood_ms.is_empty() { None } else { Some(report::percentile(&flood_ms, 0.50)) };
    Ok(Phase {
        name,
        small_ms,
        flood_done: done.load(Ordering::Relaxed),
        flood_refused: refused.load(Ordering::Relaxed),
        flood_p50_ms,
    })
}

fn write(phases: &[Phase], flood_clients: usize, small_n: usize) {
    let heavy_cpus = env_or("CORESERVE_FAIRNESS_HEAVY_CPUS", 4);
    let base_p99 = report::percentile(&phases[0].small_ms, 0.99);
    let mut body = format!(
        "{}\nOne all-in-one broker in process (memory store, 2 HTTP workers, 3 planners, BIR, policy `time`, the default limits) on Geant2012. User `small` sends {small_n} 4-job diamond workflows one after the other; user `flood` keeps {AT_THE_LIMIT} (its in-flight limit) or {flood_clients} connections busy with 64-job co-allocations ({heavy_cpus} CPUs a job, 63 transfers), pausing {} ms after each 429 or re-sending at once. All requests are dry runs (planned with tentative holds, nothing booked), so every phase sees the same calendars; each phase runs on a fresh application in the same process, clients included. Baseline: the small user alone, in the same run; goal (issue 49): p99 at most 3x the baseline's.\n\n\
| phase | small request p50 | p90 | p99 | max | p99 ÷ alone | flood answered / refused (429) while measured | flood request p50 |\n|---|---|---|---|---|---|---|---|\n",
        report::heading("Fairness: a small request while another user floods", COMMAND),
        BACKOFF.as_millis()
    );
    for p in phases {
        let s = &p.small_ms;
        body.push_str(&format!(
            "| {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.1}x | {} / {} | {} |\n",
            p.name,
            report::percentile(s, 0.50),
            report::percentile(s, 0.90),
            report::percentile(s, 0.99),
            s[s.len() - 1],
            report::percentile(s, 0.99) / base_p99,
            p.flood_done,
            p.flood_refused,
            p.flood_p50_ms.map_or("-".into(), |ms| format!("{ms:.0} ms"))
        ));
    }
    report::write_markdown("fairness", &body);
    print!("{body}");
}

fn main() -> Result<()> {
    // `cargo bench` passes `--bench`; nothing to parse.
    let small_n = env_or("CORESERVE_FAIRNESS_SMALL", 200).max(1);
    let flood_clients = env_or("CORESERVE_FAIRNESS_FLOOD", 48);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build()?;
        let phases = vec![
            phase(&client, "alone", 0, small_n, BACKOFF).await?,
            phase(&client, "flood: 8 connections (its limit, no 429)", AT_THE_LIMIT, small_n, BACKOFF).await?,
            phase(&client, "flood: 48 connections, pause 0.2 s after a 429", flood_clients, small_n, BACKOFF).await?,
            phase(&client, "flood: 48 connections, re-send at once", flood_clients, small_n, Duration::ZERO).await?,
        ];
        write(&phases, flood_clients, small_n);
        Ok(())
    })
}
