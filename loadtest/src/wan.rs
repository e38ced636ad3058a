//! The WAN benchmark (issue 53; `cargo bench --bench wan`): what a wide-area round trip between
//! the planner and its participants costs a plan.
//!
//! Deployment: the role-separated one of the load test ([`Mode::Roles`] on the 8-site `gridg-w`
//! grid: a `coreserve serve --role lis` per site, the NIS, the GIS, one planner; all on one fresh
//! PostgreSQL database), with a [`DelayProxy`] between the planner and every participant (each
//! LIS, the NIS, the GIS): the planner's `--lis`, `--nis` and `--gis` URLs are the proxies'.
//! PostgreSQL and the clients' HTTP to the planner are not delayed. Every cell gets a fresh
//! database and fresh processes (empty calendars).
//!
//! Cells: one-way delay 0 (through the proxy, undelayed: the baseline), 5, 15 and 50 ms × 1 and
//! 8 closed-loop clients × two request shapes:
//! - a **4-job diamond** workflow: A; B and C `after` A; D `after` B and C; `staged` transfers
//!   A->B, A->C, B->D, C->D of 1,000 MB at 100 Mbit/s (80 s each); A and D need `linux`, B
//!   `solaris`, C `bsd` (so its jobs sit at different sites and its transfers cross links);
//! - an **8-job co-allocation**: 8 jobs at `offset_s` 0 for 30 min, their OS cycling through
//!   `linux`, `solaris`, `bsd`, joined in a **ring** of concurrent 100 Mbit/s transfers
//!   (j0-j1, ..., j6-j7, j7-j0) for the whole run.
//!
//! Every job asks 32 CPUs (a site has 128 to 512). Request `i` of a cell has `not_before` 6 h
//! after request `i - 1`'s, and a window of 6 h: no two requests compete for a moment of the
//! grid, so it never fills and plans keep committing. Requests go through `POST /v1/plans` with
//! a user's token, as the load test's clients do.
//!
//! Per cell: a warm-up of one plan per client (not counted), then at most
//! `CORESERVE_WAN_PLANS` answers (default 200) within at most `CORESERVE_WAN_SECONDS` (default
//! 40) s (the whole bench: about 8 minutes on 2 cores); requests still in flight when the cell stops are dropped. Figures: p50 and p99 of
//! the answers' latency, plans/s (answers counted / time measured), commit rate, the mean and
//! p50 of each answer's `messages` and `rounds` (sequential message rounds; `-` when the server
//! does not report them), the p50's ratio to the 0 ms cell of the same shape and client count,
//! and the implied round trips per plan, `(p50(d) - p50(0)) / 2d`.
//!
//! Environment: `CORESERVE_TEST_PG` (as the load test), `CORESERVE_WAN_PLANS`,
//! `CORESERVE_WAN_SECONDS`, and, to run part of the grid while developing,
//! `CORESERVE_WAN_DELAYS_MS` (default `0,5,15,50`), `CORESERVE_WAN_CLIENTS` (`1,8`),
//! `CORESERVE_WAN_SHAPES` (`diamond,coallocation`). Traffic goes to 127.0.0.1 only.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use chrono::Utc;
use coreserve::grid::save_grid;
use coreserve::model::{Grid, PlanRequest};
use futures::FutureExt;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::database::{server_info, Databases};
use crate::delay::DelayProxy;
use crate::deploy::{wait_ready, Mode, Procs};
use crate::drive::{reason_kind, user_tokens, PlanAnswer};
use crate::settings::{env_or, BASE_MARGIN_S, DEFAULT_SERVER, HORIZON_DAYS, W_INTERVAL_S};
use crate::workload::{rfc3339, small_grid, Workload};

/// Seconds between two requests' `not_before`, and each request's window after it: more than a
/// request's span (diamond about 61 min, co-allocation 30 min), so requests never overlap.
const SPACING_S: i64 = 6 * 3600;
const WINDOW_S: i64 = 6 * 3600;
/// Requests made per shape; a cell that uses them all starts over one span later.
const POOL: usize = 256;
/// CPUs of every job.
const JOB_CPUS: u32 = 32;
/// The longest a cell's warm-up may take, in seconds, before the cell gives up.
const WARMUP_LIMIT_S: u64 = 120;

/// A request shape of the bench.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Diamond,
    CoAllocation,
}

impl Shape {
    /// Its name in `CORESERVE_WAN_SHAPES`.
    fn key(self) -> &'static str {
        match self {
            Shape::Diamond => "diamond",
            Shape::CoAllocation => "coallocation",
        }
    }

    /// Its name in the report.
    fn label(self) -> &'static str {
        match self {
            Shape::Diamond => "4-job diamond",
            Shape::CoAllocation => "8-job co-allocation (ring)",
        }
    }

    /// The `jobs` and `transfers` of a request of this shape.
    fn demands(self) -> (serde_json::Value, serde_json::Value) {
        use serde_json::json;
        match self {
            Shape::Diamond => {
                let job = |name: &str, os: &str, after: &[&str]| json!({"name": name, "os": os, "cpus": JOB_CPUS, "duration_s": 1200, "after": after});
                let staged = |from: &str, to: &str| json!({"from": from, "to": to, "mode": "staged", "size_mb": 1000.0, "bandwidth_mbps": 100});
                (
                    json!([
                        job("A", "linux", &[]),
                        job("B", "solaris", &["A"]),
                        job("C", "bsd", &["A"]),
                        job("D", "linux", &["B", "C"])
                    ]),
                    json!([staged("A", "B"), staged("A", "C"), staged("B", "D"), staged("C", "D")]),
                )
            }
            Shape::CoAllocation => {
                const JOBS: usize = 8;
                const DURATION_S: i64 = 1800;
                let os = ["linux", "solaris", "bsd"];
                let jobs: Vec<_> = (0..JOBS)
                    .map(|j| {
                        json!({"name": format!("j{j}"), "os": os[j % os.len()], "cpus": JOB_CPUS,
                               "offset_s": 0, "duration_s": DURATION_S})
                    })
                    .collect();
                let ring: Vec<_> = (0..JOBS)
                    .map(|j| {
                        json!({"from": format!("j{j}"), "to": format!("j{}", (j + 1) % JOBS), "bandwidth_mbps": 100,
                               "offset_s": 0, "duration_s": DURATION_S})
                    })
                    .collect();
                (json!(jobs), json!(ring))
            }
        }
    }

    /// [`POOL`] requests of this shape, [`SPACING_S`] apart, as the load test's [`Workload`]
    /// (which stamps each with a cell's times).
    fn workload(self) -> Result<Workload> {
        let (jobs, transfers) = self.demands();
        // Any timeline will do: only the offsets between requests are kept.
        let t0 = 1_900_000_000;
        let reqs = (0..POOL)
            .map(|i| {
                let submitted = t0 + i as i64 * SPACING_S;
                let raw = serde_json::json!({
                    "id": format!("wan-{}-{i}", self.key()),
                    "user": "wan",
                    "submitted_at": rfc3339(submitted),
                    "deadline": rfc3339(submitted + W_INTERVAL_S + WINDOW_S),
                    "jobs": jobs,
                    "transfers": transfers,
                });
                serde_json::from_value::<PlanRequest>(raw).with_context(|| format!("a {} request", self.label()))
            })
            .collect::<Result<Vec<_>>>()?;
        Workload::new(&reqs)
    }
}

/// The run's settings (see the module's documentation).
struct WanSettings {
    server: String,
    plans: usize,
    seconds: u64,
    delays_ms: Vec<u64>,
    clients: Vec<usize>,
    shapes: Vec<Shape>,
}

/// A comma-separated list of `name`, or `default`'s.
fn list<T: std::str::FromStr>(name: &str, default: &str) -> Result<Vec<T>> {
    let text = env_or(name, default.to_owned())?;
    let items: Vec<T> = text
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| v.parse().map_err(|_| anyhow::anyhow!("{name}={text}: `{v}` is not valid")))
        .collect::<Result<_>>()?;
    if items.is_empty() {
        bail!("{name} is empty");
    }
    Ok(items)
}

impl WanSettings {
    fn from_env() -> Result<Self> {
        let shapes = list::<String>("CORESERVE_WAN_SHAPES", "diamond,coallocation")?
            .iter()
            .map(|k| {
                [Shape::Diamond, Shape::CoAllocation]
                    .into_iter()
                    .find(|s| s.key() == k)
                    .with_context(|| format!("CORESERVE_WAN_SHAPES: unknown shape `{k}` (diamond, coallocation)"))
            })
            .collect::<Result<_>>()?;
        let s = WanSettings {
            server: env_or("CORESERVE_TEST_PG", DEFAULT_SERVER.to_owned())?,
            plans: env_or("CORESERVE_WAN_PLANS", 200)?,
            seconds: env_or("CORESERVE_WAN_SECONDS", 40)?,
            delays_ms: list("CORESERVE_WAN_DELAYS_MS", "0,5,15,50")?,
            clients: list("CORESERVE_WAN_CLIENTS", "1,8")?,
            shapes,
        };
        if s.plans == 0 || s.seconds == 0 || s.clients.contains(&0) {
            bail!("CORESERVE_WAN_PLANS, CORESERVE_WAN_SECONDS and CORESERVE_WAN_CLIENTS must be > 0");
        }
        Ok(s)
    }
}

/// One answered plan (`201`) of a cell's measured window.
struct Sample {
    latency_ms: f64,
    messages: u64,
    rounds: Option<u64>,
    committed: bool,
}

/// What the clients of a cell share.
#[derive(Default)]
struct Tally {
    /// Answers (and failures) so far, the warm-up's included.
    done: usize,
    /// The end of the warm-up: the measured window's start.
    from: Option<Instant>,
    /// When the count cap stopped the cell.
    full_at: Option<Instant>,
    samples: Vec<Sample>,
    errors: BTreeMap<String, usize>,
    reasons: BTreeMap<String, usize>,
}

/// A cell of the bench: a request shape, a client count and a one-way delay.
#[derive(Clone, Copy)]
struct Cell {
    shape: Shape,
    clients: usize,
    /// One-way delay of the proxies, milliseconds.
    delay_ms: u64,
}

/// A cell's figures.
struct CellResult {
    cell: Cell,
    samples: Vec<Sample>,
    errors: BTreeMap<String, usize>,
    reasons: BTreeMap<String, usize>,
    /// Seconds from the warm-up's end to the cell's stop.
    measured_s: f64,
    /// Mean time a chunk spent in the proxies, from read to write, ms (the one-way delay as
    /// delivered).
    hop_ms: f64,
    /// Log lines of the processes that looked like trouble.
    problems: usize,
}

/// The `q`-quantile (0 < q <= 1) of `sorted` by the nearest-rank method; NaN for none.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn sorted(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

impl CellResult {
    fn latencies(&self) -> Vec<f64> {
        sorted(self.samples.iter().map(|s| s.latency_ms))
    }

    fn p50_ms(&self) -> f64 {
        percentile(&self.latencies(), 0.5)
    }

    fn plans_per_s(&self) -> f64 {
        self.samples.len() as f64 / self.measured_s
    }

    fn commit_rate(&self) -> f64 {
        self.samples.iter().filter(|s| s.committed).count() as f64 / self.samples.len() as f64
    }

    /// Mean and p50 of the messages per plan.
    fn messages(&self) -> (f64, f64) {
        let v = sorted(self.samples.iter().map(|s| s.messages as f64));
        (mean(&v), percentile(&v, 0.5))
    }

    /// Mean and p50 of the rounds per plan, if every answer reported them.
    fn rounds(&self) -> Option<(f64, f64)> {
        let v: Option<Vec<f64>> = self.samples.iter().map(|s| s.rounds.map(|r| r as f64)).collect();
        let v = sorted(v.filter(|v| !v.is_empty())?.into_iter());
        Some((mean(&v), percentile(&v, 0.5)))
    }

    fn errors(&self) -> usize {
        self.errors.values().sum()
    }
}

/// POSTs `body` and reads the answer.
async fn post(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    body: String,
) -> reqwest::Result<(reqwest::StatusCode, Vec<u8>)> {
    let r = client
        .post(url)
        .bearer_auth(token)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await?;
    let status = r.status();
    Ok((status, r.bytes().await?.to_vec()))
}

/// Drives one cell's clients against the planner at `url`: the warm-up, then the measured
/// window; returns the tally and the window's length in seconds.
async fn drive(s: &WanSettings, clients: usize, url: &str, token: &str, workload: Arc<Workload>) -> (Tally, f64) {
    let client = reqwest::Client::builder().pool_max_idle_per_host(clients).build().expect("an HTTP client");
    let base = Utc::now().timestamp() + BASE_MARGIN_S;
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let (stop, _) = watch::channel(false);
    let stop = Arc::new(stop);
    let (warm, plans, measure) = (clients, s.plans, Duration::from_secs(s.seconds));
    // However the cell goes, it ends.
    let started = Instant::now();
    let guard = {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(WARMUP_LIMIT_S) + measure).await;
            stop.send_replace(true);
        })
    };
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (client, next, tally, stop, workload) =
            (client.clone(), next.clone(), tally.clone(), stop.clone(), workload.clone());
        let (url, token) = (format!("{url}/v1/plans"), token.to_owned());
        tasks.push(tokio::spawn(async move {
            let mut stopped = stop.subscribe();
            while !*stopped.borrow() {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let (_, body) = workload.body(i, base);
                let sent = Instant::now();
                let answer = tokio::select! {
                    biased;
                    _ = stopped.wait_for(|s| *s) => break,
                    a = post(&client, &url, &token, body) => a,
                };
                let now = Instant::now();
                let mut t = tally.lock().unwrap();
                t.done += 1;
                if t.done <= warm {
                    if t.done == warm {
                        t.from = Some(now);
                        let stop = stop.clone();
                        tokio::spawn(async move {
                            tokio::time::sleep_until(now + measure).await;
                            stop.send_replace(true);
                        });
                    }
                    continue;
                }
                let from = t.from.expect("set at the warm-up's end");
                let counted = t.samples.len() + t.errors.values().sum::<usize>();
                if now >= from + measure || counted >= plans {
                    continue;
                }
                match answer {
                    Ok((status, bytes)) if status == reqwest::StatusCode::CREATED => {
                        match serde_json::from_slice::<PlanAnswer>(&bytes) {
                            Ok(a) if a.status == "committed" || a.status == "rejected" => {
                                if a.status == "rejected" {
                                    let reason = reason_kind(a.reason.as_deref().unwrap_or_default());
                                    *t.reasons.entry(reason).or_default() += 1;
                                }
                                t.samples.push(Sample {
                                    latency_ms: (now - sent).as_secs_f64() * 1e3,
                                    messages: a.messages,
                                    rounds: a.rounds,
                                    committed: a.status == "committed",
                                });
                            }
                            _ => *t.errors.entry("201 with an unexpected body".into()).or_default() += 1,
                        }
                    }
                    Ok((status, bytes)) => {
                        let e = t.errors.entry(format!("HTTP {}", status.as_u16())).or_default();
                        if *e == 0 {
                            eprintln!("  HTTP {status}: {}", String::from_utf8_lossy(&bytes));
                        }
                        *e += 1;
                    }
                    Err(e) => {
                        *t.errors.entry(format!("transport: {}", reason_kind(&e.to_string()))).or_default() += 1;
                    }
                }
                if counted + 1 >= plans {
                    t.full_at = Some(now);
                    stop.send_replace(true);
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    guard.abort();
    let t = std::mem::take(&mut *tally.lock().unwrap());
    let measured_s = match t.from {
        Some(from) => (t.full_at.unwrap_or(from + measure).min(Instant::now()) - from).as_secs_f64(),
        None => {
            eprintln!("  the warm-up did not end within {} s", started.elapsed().as_secs());
            f64::NAN
        }
    };
    (t, measured_s)
}

/// One cell: a fresh database, the deployment with its proxies, the clients, all torn down.
async fn cell(
    s: &WanSettings,
    bin: &Path,
    dbs: &Databases,
    (grid, grid_path): (&Grid, &Path),
    workload: Arc<Workload>,
    c: Cell,
) -> Result<CellResult> {
    let db = dbs.create("wan").await?;
    let admin = format!("wan-admin-{}", uuid::Uuid::new_v4().simple());
    let service = format!("wan-service-{}", uuid::Uuid::new_v4().simple());
    let common = ["--horizon-days", HORIZON_DAYS, "--w-interval-s", &W_INTERVAL_S.to_string()].map(String::from);
    let mut procs = Procs::new(bin, &db, &admin, &service, &common);
    let mut proxies = Vec::new();
    let url = procs.deploy_via(Mode::Roles, grid, grid_path, |_, upstream| {
        let p = DelayProxy::start(upstream, Duration::from_millis(c.delay_ms))?;
        let url = p.url().to_owned();
        proxies.push(p);
        Ok(url)
    })?;
    let client = reqwest::Client::new();
    wait_ready(&client, &url).await?;
    let token = user_tokens(&client, &url, &admin, &workload.users).await?.remove(0);
    let (tally, measured_s) = drive(s, c.clients, &url, &token, workload).await;
    let (chunks, held_ms) = proxies
        .iter()
        .map(DelayProxy::measured_ms)
        .filter(|(n, _)| *n > 0)
        .fold((0u64, 0.0), |(n, sum), (k, ms)| (n + k, sum + k as f64 * ms));
    let problems = procs.problems.load(std::sync::atomic::Ordering::Relaxed);
    drop(procs);
    drop(proxies);
    dbs.drop_all().await?;
    Ok(CellResult {
        cell: c,
        samples: tally.samples,
        errors: tally.errors,
        reasons: tally.reasons,
        measured_s,
        hop_ms: held_ms / chunks.max(1) as f64,
        problems,
    })
}

fn fmt(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        "-".into()
    }
}

/// The 0 ms cell of `r`'s shape and client count, if it ran.
fn baseline<'a>(all: &'a [CellResult], r: &CellResult) -> Option<&'a CellResult> {
    all.iter().find(|b| b.cell.delay_ms == 0 && b.cell.shape == r.cell.shape && b.cell.clients == r.cell.clients)
}

/// The p50's ratio to the baseline's, and the implied sequential round trips per plan.
fn against_baseline(all: &[CellResult], r: &CellResult) -> (String, String) {
    let Some(b) = baseline(all, r) else { return ("-".into(), "-".into()) };
    let ratio = format!("{}x", fmt(r.p50_ms() / b.p50_ms(), 1));
    if r.cell.delay_ms == 0 {
        return (ratio, "-".into());
    }
    (ratio, fmt((r.p50_ms() - b.p50_ms()) / (2.0 * r.cell.delay_ms as f64), 1))
}

fn row(all: &[CellResult], r: &CellResult) -> String {
    let lat = r.latencies();
    let (m_mean, m_p50) = r.messages();
    let rounds = r.rounds().map_or("-".to_owned(), |(m, p)| format!("{} / {}", fmt(m, 1), fmt(p, 0)));
    let (ratio, trips) = against_baseline(all, r);
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} |\n",
        r.cell.shape.label(),
        r.cell.clients,
        r.cell.delay_ms,
        fmt(r.hop_ms, 2),
        r.samples.len(),
        fmt(percentile(&lat, 0.5), 0),
        fmt(percentile(&lat, 0.99), 0),
        fmt(r.plans_per_s(), 2),
        fmt(r.commit_rate(), 3),
        fmt(m_mean, 1),
        fmt(m_p50, 0),
        rounds,
        ratio,
        trips,
        r.errors(),
    )
}

fn markdown(s: &WanSettings, pg_info: &str, all: &[CellResult], elapsed_s: f64, load: &str) -> String {
    let mut out = format!(
        "\nThe role-separated deployment of the load bench (8-site `gridg-w` grid: 8 LIS + NIS + GIS + 1 planner, \
         11 processes, one fresh database per cell on {pg_info}) with a delaying TCP proxy of the bench's own \
         (`loadtest/src/delay.rs`; this kernel has no `netem`) between the planner and every participant; \
         PostgreSQL and the clients are not delayed. Closed-loop clients POST `/v1/plans` (serve's defaults: policy \
         `time`, method `bir`). Shapes: a 4-job diamond workflow (A; B, C after A; D after B, C; 4 staged 1,000 MB \
         transfers) and an 8-job co-allocation (`offset_s` 0, a **ring** of 8 concurrent transfers), 32 CPUs a job, \
         jobs on `linux`, `solaris` and `bsd` sites so that transfers cross links; requests 6 h apart, so the grid \
         never fills. Per cell: a warm-up of one plan per client, then at most {} answers in at most {} s (requests \
         in flight at the end are dropped; `plans` is what was counted). \"one-way measured\" is the mean time a \
         chunk spent in the proxies, the delay as delivered. Rounds: the answers' sequential message rounds (`-`: \
         the server does not report them). Round trips per plan = (p50(d) - p50(0 ms)) / 2d, against the same \
         run's 0 ms cell of the same shape and clients. The whole bench took {:.0} s; load average {load} at its \
         start.\n\n",
        s.plans, s.seconds, elapsed_s
    );
    out.push_str(
        "| request | clients | one-way delay (ms) | one-way measured (ms) | plans | p50 (ms) | p99 (ms) | plans/s | \
         commit rate | messages / plan, mean / p50 | rounds / plan, mean / p50 | p50 / p50(0 ms) | round trips per \
         plan | errors |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in all {
        out.push_str(&row(all, r));
    }
    let mut notes = Vec::new();
    for r in all {
        if !r.errors.is_empty() {
            notes.push(format!(
                "{} / {} clients / {} ms: errors {:?}",
                r.cell.shape.label(),
                r.cell.clients,
                r.cell.delay_ms,
                r.errors
            ));
        }
        if !r.reasons.is_empty() {
            notes.push(format!(
                "{} / {} clients / {} ms: rejected {:?}",
                r.cell.shape.label(),
                r.cell.clients,
                r.cell.delay_ms,
                r.reasons
            ));
        }
    }
    if !notes.is_empty() {
        out.push_str(&format!("\n{}\n", notes.iter().map(|n| format!("- {n}")).collect::<Vec<_>>().join("\n")));
    }
    out.push_str(
        "\nOn a larger machine: here 2 cores carry 11 `coreserve serve` processes, PostgreSQL, the clients and the \
         proxies, so the 0 ms baseline (and with 8 clients, every cell) includes queueing for a CPU; with a core per \
         process the baseline falls and 8 clients' plans/s at 0 ms rise, but the delayed cells change little: a plan \
         at 5-50 ms one way waits on the wire, not for a CPU, so its latency is the implied round trips × 2d \
         whatever the machine, and only fewer sequential rounds (issue 53) bring it down. With 8 clients the \
         implied round trips also hold the queueing at the participants and the planner, which a larger machine \
         shortens.\n\nBefore plans from snapshots (issue 53; the run of 2026-12-07 07:23 UTC, same machine and \
         command): the diamond took 16 rounds and the 8-job co-allocation 28, at p50 13 / 176 / 483 / 1535 ms and \
         32 / 326 / 859 / 2756 ms (1 client; 0, 5, 15, 50 ms one way), 84.1 / 39.8 / 16.0 / 5.2 and \
         63.8 / 22.5 / 9.0 / 2.8 plans/s with 8 clients (that run's PostgreSQL had fsync on; a run on `.ci/test --run`'s throwaway \
         cluster has it off, which shortens the persists' and commits' writes alike at every delay). The planner now asks every candidate LIS and the NIS \
         for a snapshot of its calendars in one round, searches replicas of them without a message, and \
         prepares the plan in one round (docs/algorithm.md, \"Plans from snapshots\").\n",
    );
    out
}

async fn run(s: &WanSettings, bin: &Path, dbs: &Databases) -> Result<String> {
    let started = std::time::Instant::now();
    // The 1, 5 and 15 minute load averages: what else ran on the machine.
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" / "))
        .unwrap_or_else(|_| "unknown".into());
    let pg_info = server_info(dbs).await?;
    eprintln!("{pg_info} at {}", s.server);
    if !bin.exists() {
        bail!("{} is missing (cargo bench builds it)", bin.display());
    }
    let dir = tempfile::tempdir()?;
    let grid_path = dir.path().join("gridg-w-8.json");
    let grid = small_grid();
    save_grid(&grid, &grid_path)?;
    coreserve::protocol::http::install_crypto_provider();
    let mut all = Vec::new();
    for &shape in &s.shapes {
        let workload = Arc::new(shape.workload()?);
        for &clients in &s.clients {
            for &delay_ms in &s.delays_ms {
                eprintln!("{}, {clients} clients, {delay_ms} ms one way", shape.label());
                let c = Cell { shape, clients, delay_ms };
                let r = cell(s, bin, dbs, (&grid, &grid_path), workload.clone(), c).await?;
                let (ratio, trips) = against_baseline(&all, &r);
                eprintln!(
                    "  {} plans in {:.1} s: p50 {:.0} ms, p99 {:.0} ms, {:.2} plans/s, commit rate {:.3}, \
                     messages {:.1}, rounds {}, {ratio} of 0 ms, {trips} round trips; one-way {:.2} ms; errors {}, \
                     log problems {}",
                    r.samples.len(),
                    r.measured_s,
                    r.p50_ms(),
                    percentile(&r.latencies(), 0.99),
                    r.plans_per_s(),
                    r.commit_rate(),
                    r.messages().0,
                    r.rounds().map_or("-".into(), |(m, _)| format!("{m:.1}")),
                    r.hop_ms,
                    r.errors(),
                    r.problems
                );
                all.push(r);
            }
        }
    }
    let section = markdown(s, &pg_info, &all, started.elapsed().as_secs_f64(), &load);
    println!("{section}");
    Ok(section)
}

/// Runs the WAN bench (settings from the environment, see above) with the `coreserve`
/// executable `bin` and returns its section of BENCHMARKS.md without the heading; the databases
/// it made are dropped, also after a failure.
///
/// # Errors
/// A setting is not valid, PostgreSQL is unreachable, a server does not start or does not
/// answer.
pub fn main(bin: &Path) -> Result<String> {
    let s = WanSettings::from_env()?;
    let dbs = Databases::new(&s.server);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async {
        let result = std::panic::AssertUnwindSafe(run(&s, bin, &dbs)).catch_unwind().await;
        let dropped = dbs.drop_all().await;
        match result {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(r) => r.and_then(|section| dropped.map(|()| section)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_shapes_are_valid_requests_and_keep_their_layout() {
        for shape in [Shape::Diamond, Shape::CoAllocation] {
            let w = shape.workload().unwrap();
            assert_eq!(w.items.len(), POOL);
            let (_, a) = w.body(0, 1_000_000);
            let (_, b) = w.body(1, 1_000_000);
            let a: serde_json::Value = serde_json::from_str(&a).unwrap();
            let b: serde_json::Value = serde_json::from_str(&b).unwrap();
            let t =
                |v: &serde_json::Value, f: &str| chrono::DateTime::parse_from_rfc3339(v[f].as_str().unwrap()).unwrap();
            assert_eq!((t(&b, "not_before") - t(&a, "not_before")).num_seconds(), SPACING_S);
            assert_eq!((t(&a, "deadline") - t(&a, "not_before")).num_seconds(), WINDOW_S);
            let transfers = a["transfers"].as_array().unwrap();
            match shape {
                Shape::Diamond => {
                    assert_eq!(a["jobs"][3]["after"], serde_json::json!(["B", "C"]));
                    assert!(transfers.iter().all(|t| t["mode"] == "staged"));
                }
                Shape::CoAllocation => {
                    assert_eq!(a["jobs"].as_array().unwrap().len(), 8);
                    assert_eq!(transfers.len(), 8);
                    assert!(transfers.iter().all(|t| t.get("mode").is_none()));
                }
            }
        }
    }
}
