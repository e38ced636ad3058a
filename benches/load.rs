//! Load benchmark of the broker service: SDSC-BLUE-derived plan requests replayed over HTTP
//! (`POST /v1/plans`, keep-alive, N concurrent closed-loop clients) against real
//! `coreserve serve` processes on PostgreSQL, next to `pgbench` (tpcb-like) measured on the same
//! server in the same run. Writes its section of BENCHMARKS.md and prints a summary.
//!
//! Deployments, each measured `CORESERVE_LOAD_ROUNDS` times on a fresh database and fresh
//! processes (empty calendars):
//! - all-in-one on Geant2012 (Topology Zoo, 40 sites, as `coreserve demo` imports it);
//! - all-in-one on a small GridG-style `gridg-w` grid of 8 sites;
//! - role-separated on that small grid: one LIS per site, NIS, GIS and one planner process,
//!   every process on the same database.
//!
//! Requests: `coreserve workload` (the rules of Ando & Aida's experiment) draws workflow requests from the SDSC-BLUE
//! trace at offered load 0.5 relative to the grid. Their arrival times become `not_before`
//! from a base shortly after the run starts (the trace's timeline is laid onto the calendar
//! ahead, so the grid sees the offered load of the trace whatever the request rate) and each
//! deadline keeps its window (`deadline - submitted_at - w_interval`) after `not_before`. The
//! server stamps `submitted_at` itself. Each request carries the token of its workload user.
//!
//! Environment: `CORESERVE_TEST_PG` (PostgreSQL server, default
//! `postgres://postgres@127.0.0.1:5432/postgres`; unreachable = failure),
//! `CORESERVE_LOAD_CLIENTS` (8), `CORESERVE_LOAD_SECONDS` (20, measured per round),
//! `CORESERVE_LOAD_WARMUP_S` (5), `CORESERVE_LOAD_ROUNDS` (3), `CORESERVE_LOAD_PGBENCH_S` (15),
//! `CORESERVE_LOAD_IDEMPOTENCY` (`1`: every request carries an `Idempotency-Key`).
//! Needs `pgbench` on the PATH and the repository's `data/`.

mod report;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use chrono::{DateTime, SecondsFormat, Utc};
use coreserve::grid::{gridg, import_graphml, save_grid, GridgParams, GridgVariant, ImportOptions};
use coreserve::model::{Grid, PlanRequest};
use coreserve::workload::{generate, procs_of, read_swf, AppKind, WorkloadParams};
use futures::FutureExt;
use serde::Deserialize;
use sqlx::{Connection, Executor, PgConnection, Row};

const DEFAULT_SERVER: &str = "postgres://postgres@127.0.0.1:5432/postgres";
const COMMAND: &str = "cargo bench --bench load";
/// The planners' w_interval (serve's default); the workload's deadlines leave room for it.
const W_INTERVAL_S: i64 = 1800;
/// Offered load of the generated workload, relative to the grid's CPUs.
const OFFERED_LOAD: f64 = 0.5;
/// Requests generated per grid; a round that uses them all starts over one trace span later.
const POOL: usize = 40_000;
/// The first `not_before` lies this long after the round's start (so it stays after
/// `submitted_at + w_interval` for the whole round).
const BASE_MARGIN_S: i64 = W_INTERVAL_S + 600;
/// `--horizon-days` of the servers: the trace's timeline reaches months ahead.
const HORIZON_DAYS: &str = "3650";
/// Targets of the issue (all-in-one).
const TARGET_PLANS_PER_S: f64 = 1000.0;
const TARGET_P99_MS: f64 = 100.0;

// ---------------------------------------------------------------------------------------------
// Settings

struct Settings {
    server: String,
    clients: usize,
    warmup: Duration,
    measure: Duration,
    rounds: usize,
    pgbench_s: u64,
    idempotency: bool,
    data: PathBuf,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
    match std::env::var(name).ok().filter(|v| !v.trim().is_empty()) {
        None => Ok(default),
        Some(v) => v.trim().parse().map_err(|_| anyhow!("{name}={v} is not valid")),
    }
}

impl Settings {
    fn from_env() -> Result<Self> {
        let s = Settings {
            server: env_or("CORESERVE_TEST_PG", DEFAULT_SERVER.to_owned())?,
            clients: env_or("CORESERVE_LOAD_CLIENTS", 8)?,
            warmup: Duration::from_secs(env_or("CORESERVE_LOAD_WARMUP_S", 5)?),
            measure: Duration::from_secs(env_or("CORESERVE_LOAD_SECONDS", 20)?),
            rounds: env_or("CORESERVE_LOAD_ROUNDS", 3)?,
            pgbench_s: env_or("CORESERVE_LOAD_PGBENCH_S", 15)?,
            idempotency: env_or("CORESERVE_LOAD_IDEMPOTENCY", 0u8)? == 1,
            data: Path::new(env!("CARGO_MANIFEST_DIR")).join("data"),
        };
        if s.clients == 0 || s.rounds == 0 || s.measure.is_zero() || s.pgbench_s == 0 {
            bail!("clients, rounds, seconds and pgbench seconds must be > 0");
        }
        Ok(s)
    }
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL: fresh databases, pgbench

/// `server` with its database name replaced by `db`, every other part (user, host, port,
/// query parameters such as `sslmode`) as given: a URL both libpq (pgbench) and sqlx accept.
/// (sqlx's own `to_url_lossy` adds `statement-cache-capacity`, which pgbench refuses.)
fn url_of(server: &str, db: &str) -> String {
    let mut url = url::Url::parse(server).expect("a PostgreSQL URL");
    url.set_path(&format!("/{db}"));
    url.to_string()
}

/// The databases this run created (all dropped at the end, also after a failure).
struct Databases {
    server: String,
    names: Mutex<Vec<String>>,
}

impl Databases {
    async fn admin(&self) -> Result<PgConnection> {
        PgConnection::connect(&self.server).await.with_context(|| {
            format!(
                "PostgreSQL is required for the load benchmark and is unreachable at {} \
                 (start it, see .ci/run, or point CORESERVE_TEST_PG at a server)",
                self.server
            )
        })
    }

    /// Creates a fresh database `coreserve_load_<what>_<uuid>` and returns its URL.
    async fn create(&self, what: &str) -> Result<String> {
        let name = format!("coreserve_load_{what}_{}", uuid::Uuid::new_v4().simple());
        self.admin().await?.execute(format!("CREATE DATABASE {name}").as_str()).await?;
        self.names.lock().unwrap().push(name.clone());
        Ok(url_of(&self.server, &name))
    }

    async fn drop_all(&self) -> Result<()> {
        let names = std::mem::take(&mut *self.names.lock().unwrap());
        let mut conn = self.admin().await?;
        for n in names {
            conn.execute(format!("DROP DATABASE IF EXISTS {n} WITH (FORCE)").as_str()).await?;
        }
        Ok(())
    }
}

/// What the PostgreSQL server is and how it commits.
async fn server_info(dbs: &Databases) -> Result<String> {
    async fn show(c: &mut PgConnection, q: &str) -> Result<String> {
        Ok(sqlx::query(q).fetch_one(c).await?.try_get::<String, _>(0)?)
    }
    let mut c = dbs.admin().await?;
    let version = show(&mut c, "SHOW server_version").await?;
    let sync = show(&mut c, "SHOW synchronous_commit").await?;
    let fsync = show(&mut c, "SHOW fsync").await?;
    let version = version.split_whitespace().next().unwrap_or_default().to_owned();
    Ok(format!("PostgreSQL {version} (synchronous_commit {sync}, fsync {fsync})"))
}

/// Transactions committed or rolled back so far in database `name` (pg_stat_database).
async fn xacts(dbs: &Databases, name: &str) -> Result<i64> {
    let row = sqlx::query("SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database WHERE datname = $1")
        .bind(name)
        .fetch_one(&mut dbs.admin().await?)
        .await?;
    Ok(row.try_get(0)?)
}

struct Pgbench {
    tps: f64,
    latency_ms: f64,
    command: String,
}

/// `pgbench -i -s 8`, then tpcb-like with 8 clients on 2 threads, on a database of its own.
async fn pgbench(dbs: &Databases, seconds: u64) -> Result<Pgbench> {
    let url = dbs.create("pgbench").await?;
    let run = |args: &[&str]| -> Result<String> {
        let out = Command::new("pgbench")
            .args(args)
            .arg(&url)
            .output()
            .context("running pgbench (is it installed? Debian: postgresql-client)")?;
        if !out.status.success() {
            bail!("pgbench {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    eprintln!("pgbench: initialising scale 8");
    run(&["-i", "-s", "8", "-q"])?;
    let t = seconds.to_string();
    let args = ["-c", "8", "-j", "2", "-T", t.as_str()];
    eprintln!("pgbench: tpcb-like {} for {seconds} s", args.join(" "));
    let out = run(&args)?;
    let field = |prefix: &str| {
        out.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| anyhow!("no `{prefix}` in pgbench's output:\n{out}"))
    };
    Ok(Pgbench {
        tps: field("tps = ")?,
        latency_ms: field("latency average = ")?,
        command: format!("pgbench -i -s 8; pgbench {}", args.join(" ")),
    })
}

// ---------------------------------------------------------------------------------------------
// Grids and requests

struct Scenario {
    label: &'static str,
    grid: Grid,
    path: PathBuf,
    workload: Arc<Workload>,
}

/// One request without its times: the rest of its body is serialised once.
struct Item {
    id: String,
    user: usize,
    /// Arrival in the trace's timeline, seconds after the first request.
    offset_s: i64,
    /// `deadline - submitted_at - w_interval`: the time the plan has after `not_before`.
    window_s: i64,
    /// `"jobs":[...],"transfers":[...]`.
    demands: String,
}

struct Workload {
    items: Vec<Item>,
    users: Vec<String>,
    /// The trace timeline's length plus one mean gap: what each further pass adds.
    span_s: i64,
}

impl Workload {
    fn new(reqs: &[PlanRequest]) -> Result<Self> {
        let first = reqs.first().context("no requests")?.submitted_at();
        let mut users: Vec<String> = Vec::new();
        let mut items = Vec::with_capacity(reqs.len());
        for r in reqs {
            let user = match users.iter().position(|u| u == r.user()) {
                Some(i) => i,
                None => {
                    users.push(r.user().to_owned());
                    users.len() - 1
                }
            };
            let demands = format!(
                "\"jobs\":{},\"transfers\":{}",
                serde_json::to_string(r.jobs())?,
                serde_json::to_string(r.transfers())?
            );
            items.push(Item {
                id: r.id().to_owned(),
                user,
                offset_s: r.submitted_at() - first,
                window_s: r.deadline() - r.submitted_at() - W_INTERVAL_S,
                demands,
            });
        }
        let last = items.last().map_or(0, |i| i.offset_s);
        let span_s = last + last / items.len().max(1) as i64 + 1;
        Ok(Workload { items, users, span_s })
    }

    /// Request `i` (wrapping over the pool, one span later per pass) for a round whose timeline
    /// starts at `base` (Unix seconds): its user's index and its body.
    fn body(&self, i: usize, base: i64) -> (usize, String) {
        let (pass, item) = (i / self.items.len(), &self.items[i % self.items.len()]);
        let not_before = base + pass as i64 * self.span_s + item.offset_s;
        let deadline = not_before + item.window_s;
        let body = format!(
            "{{\"id\":\"{}-{pass}\",\"not_before\":\"{}\",\"deadline\":\"{}\",{}}}",
            item.id,
            rfc3339(not_before),
            rfc3339(deadline),
            item.demands
        );
        (item.user, body)
    }
}

fn rfc3339(t: i64) -> String {
    DateTime::<Utc>::from_timestamp(t, 0).expect("a valid time").to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn scenarios(data: &Path, dir: &Path) -> Result<Vec<Scenario>> {
    let trace = data.join("swf/SDSC-BLUE-2000-4.2-cln.swf.gz");
    let topology = data.join("topology-zoo/Geant2012.graphml");
    let cpus = procs_of(&read_swf(&trace).with_context(|| format!("reading {}", trace.display()))?);
    let xml = std::fs::read_to_string(&topology).with_context(|| format!("reading {}", topology.display()))?;
    let geant = import_graphml(&xml, &ImportOptions { seed: 1, ..Default::default() })?;
    // 2 WAN routers x 2 MAN x 1 LAN x 2 hosts: 8 sites, so 8 LIS processes in the separated mode.
    let small_params =
        GridgParams { wan_nodes: 2, man_per_wan: 2, lan_per_man: 1, hosts_per_lan: 2, ..Default::default() };
    let small = gridg(GridgVariant::Wide, 1, &small_params);
    let mut out = Vec::new();
    for (label, grid) in [("geant2012", geant), ("gridg-w-8", small)] {
        let path = dir.join(format!("{label}.json"));
        save_grid(&grid, &path)?;
        let params = WorkloadParams {
            requests: POOL,
            load: OFFERED_LOAD,
            seed: 1,
            w_interval_s: W_INTERVAL_S,
            ..WorkloadParams::for_kind(AppKind::Workflow)
        };
        let reqs = generate(&cpus, grid.total_cpus(), &params)?;
        let workload = Arc::new(Workload::new(&reqs)?);
        eprintln!(
            "{label}: {} sites, {} links, {} CPUs; {} workflow requests over {:.1} days of trace time",
            grid.sites().len(),
            grid.links().len(),
            grid.total_cpus(),
            reqs.len(),
            workload.span_s as f64 / 86_400.0
        );
        out.push(Scenario { label, grid, path, workload });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Processes

/// `coreserve serve` processes of one round; killed when dropped.
struct Procs {
    procs: Vec<(String, Child)>,
    /// Log lines that look like trouble (warnings, errors, failed participant calls).
    problems: Arc<AtomicUsize>,
}

impl Drop for Procs {
    fn drop(&mut self) {
        for (_, c) in &mut self.procs {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn coreserve_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_coreserve"))
}

impl Procs {
    fn new() -> Self {
        Procs { procs: Vec::new(), problems: Arc::new(AtomicUsize::new(0)) }
    }

    /// Starts `coreserve serve ARGS` on a free port with `DATABASE_URL=db` and returns its base
    /// URL (from the start line on stderr, printed once the listener is bound).
    fn serve(&mut self, label: &str, db: &str, admin: &str, service: &str, args: &[String]) -> Result<String> {
        let mut child = Command::new(coreserve_bin())
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--admin-token", admin, "--service-token", service])
            .args(["--horizon-days", HORIZON_DAYS, "--w-interval-s", &W_INTERVAL_S.to_string()])
            .args(args)
            .env("DATABASE_URL", db)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", coreserve_bin().display()))?;
        let stderr = child.stderr.take().expect("piped stderr");
        self.procs.push((label.to_owned(), child));
        let (tx, rx) = std::sync::mpsc::channel();
        let (label, problems) = (label.to_owned(), self.problems.clone());
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            let mut shown = 0;
            // Keep draining stderr so the child never blocks on a full pipe.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(i) = line.find(" on http://") {
                    let url = line[i + 4..].split_whitespace().next().unwrap_or_default().to_owned();
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(url);
                    }
                    continue;
                }
                let trouble = ["WARN", "ERROR", "panicked", "failed"].iter().any(|w| line.contains(w));
                if trouble {
                    problems.fetch_add(1, Ordering::Relaxed);
                }
                if (trouble || tx.is_some()) && shown < 10 && !line.starts_with("store: postgres") {
                    shown += 1;
                    eprintln!("  [{label}] {line}");
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(60))
            .map_err(|_| anyhow!("`coreserve serve` ({}) did not start", args.join(" ")))
    }

    fn pids(&self) -> Vec<(String, u32)> {
        self.procs.iter().map(|(l, c)| (l.clone(), c.id())).collect()
    }
}

async fn wait_ready(client: &reqwest::Client, url: &str) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = client.get(format!("{url}/readyz")).send().await {
            if r.status().is_success() {
                return Ok(());
            }
        }
        if Instant::now() > until {
            bail!("{url}/readyz did not answer 200 within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    AllInOne,
    Roles,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::AllInOne => "all-in-one",
            Mode::Roles => "role-separated",
        }
    }
}

/// Starts the deployment on database `db` and returns the processes and the planner's URL.
fn deploy(mode: Mode, sc: &Scenario, db: &str, admin: &str, service: &str) -> Result<(Procs, String)> {
    let mut procs = Procs::new();
    let grid = sc.path.to_str().context("grid path")?.to_owned();
    let url = match mode {
        Mode::AllInOne => procs.serve("all", db, admin, service, &["--grid".into(), grid])?,
        Mode::Roles => {
            let mut planner = vec!["--role".to_owned(), "planner".into()];
            for s in sc.grid.sites() {
                let args = ["--role", "lis", "--site", &s.id, "--grid", &grid].map(String::from);
                let u = procs.serve(&format!("lis {}", s.id), db, admin, service, &args)?;
                planner.extend(["--lis".to_owned(), format!("{}={u}", s.id)]);
            }
            let nis = procs.serve("nis", db, admin, service, &["--role", "nis", "--grid", &grid].map(String::from))?;
            let gis = procs.serve("gis", db, admin, service, &["--role", "gis", "--grid", &grid].map(String::from))?;
            planner.extend(["--nis".to_owned(), nis, "--gis".into(), gis]);
            procs.serve("planner", db, admin, service, &planner)?
        }
    };
    Ok((procs, url))
}

// ---------------------------------------------------------------------------------------------
// CPU accounting (/proc)

#[derive(Clone, Default)]
struct CpuSnap {
    /// Machine-wide busy and total ticks (/proc/stat).
    busy: u64,
    total: u64,
    /// This process (the load generator).
    generator: u64,
    /// The `coreserve serve` processes, by label.
    servers: Vec<(String, u64)>,
    /// Every `postgres` process.
    postgres: u64,
}

fn clk_tck() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of a process (every thread), in ticks.
fn proc_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

fn snapshot(servers: &[(String, u32)]) -> CpuSnap {
    let mut s = CpuSnap::default();
    if let Some(line) = std::fs::read_to_string("/proc/stat").ok().and_then(|t| t.lines().next().map(str::to_owned)) {
        let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
        // user nice system idle iowait irq softirq steal (guest is inside user)
        let get = |i: usize| v.get(i).copied().unwrap_or(0);
        s.busy = get(0) + get(1) + get(2) + get(5) + get(6) + get(7);
        s.total = s.busy + get(3) + get(4);
    }
    s.generator = proc_ticks("self").unwrap_or(0);
    s.servers = servers.iter().map(|(l, pid)| (l.clone(), proc_ticks(&pid.to_string()).unwrap_or(0))).collect();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.bytes().all(|b| b.is_ascii_digit())
                && std::fs::read_to_string(format!("/proc/{name}/comm")).is_ok_and(|c| c.trim() == "postgres")
            {
                s.postgres += proc_ticks(&name).unwrap_or(0);
            }
        }
    }
    s
}

/// CPU used during a window, in cores (CPU-seconds per second).
#[derive(Clone, Default)]
struct CpuSplit {
    generator: f64,
    /// coreserve processes grouped by role (`all`, `planner`, `lis`, `nis`, `gis`).
    servers: Vec<(String, f64)>,
    postgres: f64,
    /// Busy time of everything else on the machine (another build, the kernel's own threads).
    other: f64,
    idle: f64,
}

impl CpuSplit {
    fn of(a: &CpuSnap, b: &CpuSnap, secs: f64, tck: f64) -> Self {
        let cores = |t: u64| t as f64 / tck / secs;
        let d = |x: u64, y: u64| y.saturating_sub(x);
        let mut servers: Vec<(String, f64)> = Vec::new();
        for ((label, x), (_, y)) in a.servers.iter().zip(&b.servers) {
            let role = label.split_whitespace().next().unwrap_or_default().to_owned();
            match servers.iter_mut().find(|(r, _)| *r == role) {
                Some((_, c)) => *c += cores(d(*x, *y)),
                None => servers.push((role, cores(d(*x, *y)))),
            }
        }
        let (busy, total) = (cores(d(a.busy, b.busy)), cores(d(a.total, b.total)));
        let (generator, postgres) = (cores(d(a.generator, b.generator)), cores(d(a.postgres, b.postgres)));
        let known = generator + postgres + servers.iter().map(|s| s.1).sum::<f64>();
        CpuSplit { generator, servers, postgres, other: (busy - known).max(0.0), idle: (total - busy).max(0.0) }
    }

    fn coreserve(&self) -> f64 {
        self.servers.iter().map(|s| s.1).sum()
    }

    fn describe(&self) -> String {
        let roles: Vec<String> = self.servers.iter().map(|(r, c)| format!("{r} {c:.2}")).collect();
        format!(
            "coreserve {:.2} ({}), PostgreSQL {:.2}, load generator {:.2}, other {:.2}, idle {:.2}",
            self.coreserve(),
            roles.join(", "),
            self.postgres,
            self.generator,
            self.other,
            self.idle
        )
    }
}

// ---------------------------------------------------------------------------------------------
// The load

#[derive(Deserialize)]
struct PlanAnswer {
    status: String,
    #[serde(default)]
    reason: Option<String>,
    /// The planner's own time (search and two-phase commit), inside the server.
    planning_ms: f64,
    /// Participant messages the planner sent for this plan.
    messages: u64,
    /// Holds it made and aborted again (BIR's backtracking and shifts).
    holds_aborted: u64,
}

#[derive(Default)]
struct ClientLog {
    /// Milliseconds.
    latencies: Vec<f64>,
    planning: Vec<f64>,
    messages: u64,
    holds_aborted: u64,
    committed: usize,
    rejected: usize,
    reasons: BTreeMap<String, usize>,
    errors: BTreeMap<String, usize>,
}

struct RoundResult {
    plans_per_s: f64,
    committed: usize,
    rejected: usize,
    errors: BTreeMap<String, usize>,
    reasons: BTreeMap<String, usize>,
    /// p50, p90, p99, max in ms.
    latency_ms: [f64; 4],
    /// The planner's share of it (the answers' `planning_ms`): p50, p99.
    planning_ms: [f64; 2],
    /// Means over the measured plans.
    messages_per_plan: f64,
    holds_aborted_per_plan: f64,
    /// Transactions (commits and rollbacks, read-only ones too) in the round's database during
    /// the window, per plan (pg_stat_database; its counters lag by up to about a second).
    pg_xacts_per_plan: f64,
    cpu: CpuSplit,
    problems: usize,
}

impl RoundResult {
    fn completed(&self) -> usize {
        self.committed + self.rejected
    }

    fn commit_rate(&self) -> f64 {
        self.committed as f64 / self.completed().max(1) as f64
    }

    fn errors(&self) -> usize {
        self.errors.values().sum()
    }
}

/// The reason's kind: its text up to the first `:` or digit, shortened.
fn reason_kind(r: &str) -> String {
    let head: String = r.split(':').next().unwrap_or_default().chars().take_while(|c| !c.is_ascii_digit()).collect();
    head.trim().chars().take(60).collect()
}

/// One user token per workload user (POST /v1/tokens with the admin token).
async fn user_tokens(client: &reqwest::Client, url: &str, admin: &str, users: &[String]) -> Result<Vec<String>> {
    #[derive(Deserialize)]
    struct TokenView {
        token: String,
    }
    let mut out = Vec::new();
    for u in users {
        let r = client
            .post(format!("{url}/v1/tokens"))
            .bearer_auth(admin)
            .json(&serde_json::json!({ "user": u }))
            .send()
            .await?;
        if r.status() != reqwest::StatusCode::CREATED {
            bail!("POST /v1/tokens answered {}: {}", r.status(), r.text().await.unwrap_or_default());
        }
        out.push(r.json::<TokenView>().await?.token);
    }
    Ok(out)
}

/// `settings.clients` closed-loop clients POST the workload's requests (in order, from a shared
/// counter) for warm-up + measure; only requests that complete inside the measured window
/// count. The CPU of every process is sampled at the window's ends.
#[allow(clippy::too_many_arguments)]
async fn drive(
    s: &Settings,
    dbs: &Databases,
    db: &str,
    url: &str,
    tokens: Arc<Vec<String>>,
    workload: Arc<Workload>,
    procs: &Procs,
) -> Result<RoundResult> {
    let db = db.rsplit('/').next().unwrap_or_default().split('?').next().unwrap_or_default();
    coreserve::protocol::http::install_crypto_provider();
    let client = reqwest::Client::builder().pool_max_idle_per_host(s.clients).build()?;
    let base = Utc::now().timestamp() + BASE_MARGIN_S;
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let (from, to) = (start + s.warmup, start + s.warmup + s.measure);
    let mut tasks = Vec::new();
    for c in 0..s.clients {
        let (client, tokens, workload, next) = (client.clone(), tokens.clone(), workload.clone(), next.clone());
        let (url, idempotency) = (format!("{url}/v1/plans"), s.idempotency);
        tasks.push(tokio::spawn(async move {
            let mut log = ClientLog::default();
            while Instant::now() < to {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let (user, body) = workload.body(i, base);
                let mut req = client
                    .post(&url)
                    .bearer_auth(&tokens[user])
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body);
                if idempotency {
                    req = req.header("Idempotency-Key", format!("load-{i}"));
                }
                let sent = Instant::now();
                let answer = match req.send().await {
                    Ok(r) => {
                        let status = r.status();
                        r.bytes().await.map(|b| (status, b))
                    }
                    Err(e) => Err(e),
                };
                let done = Instant::now();
                if done < from || done >= to {
                    continue;
                }
                match answer {
                    Ok((status, bytes)) if status == reqwest::StatusCode::CREATED => {
                        let answer = serde_json::from_slice::<PlanAnswer>(&bytes);
                        if let Ok(a) = &answer {
                            log.planning.push(a.planning_ms);
                            log.messages += a.messages;
                            log.holds_aborted += a.holds_aborted;
                        }
                        match answer {
                            Ok(a) if a.status == "committed" => log.committed += 1,
                            Ok(a) if a.status == "rejected" => {
                                log.rejected += 1;
                                *log.reasons
                                    .entry(reason_kind(a.reason.as_deref().unwrap_or_default()))
                                    .or_default() += 1;
                            }
                            _ => *log.errors.entry("201 with an unexpected body".into()).or_default() += 1,
                        }
                        log.latencies.push((done - sent).as_secs_f64() * 1e3);
                    }
                    Ok((status, bytes)) => {
                        let e = log.errors.entry(format!("HTTP {}", status.as_u16())).or_default();
                        if *e == 0 && c == 0 {
                            eprintln!("  HTTP {status}: {}", String::from_utf8_lossy(&bytes));
                        }
                        *e += 1;
                    }
                    Err(e) => {
                        *log.errors.entry(format!("transport: {}", reason_kind(&e.to_string()))).or_default() += 1;
                    }
                }
            }
            log
        }));
    }
    // CPU at the ends of the measured window.
    let pids = procs.pids();
    tokio::time::sleep_until(from.into()).await;
    let a = snapshot(&pids);
    let xa = xacts(dbs, db).await?;
    tokio::time::sleep_until(to.into()).await;
    let b = snapshot(&pids);
    let xb = xacts(dbs, db).await?;
    let cpu = CpuSplit::of(&a, &b, s.measure.as_secs_f64(), clk_tck());

    let mut all = ClientLog::default();
    for t in tasks {
        let log = t.await?;
        all.latencies.extend(log.latencies);
        all.planning.extend(log.planning);
        all.messages += log.messages;
        all.holds_aborted += log.holds_aborted;
        all.committed += log.committed;
        all.rejected += log.rejected;
        for (k, v) in log.reasons {
            *all.reasons.entry(k).or_default() += v;
        }
        for (k, v) in log.errors {
            *all.errors.entry(k).or_default() += v;
        }
    }
    all.latencies.sort_unstable_by(f64::total_cmp);
    all.planning.sort_unstable_by(f64::total_cmp);
    let (l, p) = (&all.latencies, &all.planning);
    Ok(RoundResult {
        plans_per_s: (all.committed + all.rejected) as f64 / s.measure.as_secs_f64(),
        committed: all.committed,
        rejected: all.rejected,
        errors: all.errors,
        reasons: all.reasons,
        latency_ms: [
            report::percentile(l, 0.50),
            report::percentile(l, 0.90),
            report::percentile(l, 0.99),
            report::percentile(l, 1.0),
        ],
        planning_ms: [report::percentile(p, 0.50), report::percentile(p, 0.99)],
        messages_per_plan: all.messages as f64 / all.planning.len().max(1) as f64,
        holds_aborted_per_plan: all.holds_aborted as f64 / all.planning.len().max(1) as f64,
        pg_xacts_per_plan: (xb - xa) as f64 / (all.committed + all.rejected).max(1) as f64,
        cpu,
        problems: procs.problems.load(Ordering::Relaxed),
    })
}

/// One round: a fresh database, fresh processes, the load, then everything torn down.
async fn round(s: &Settings, dbs: &Databases, mode: Mode, sc: &Scenario) -> Result<RoundResult> {
    let db = dbs.create(if mode == Mode::Roles { "roles" } else { "all" }).await?;
    let admin = format!("load-admin-{}", uuid::Uuid::new_v4().simple());
    let service = format!("load-service-{}", uuid::Uuid::new_v4().simple());
    let (procs, url) = deploy(mode, sc, &db, &admin, &service)?;
    coreserve::protocol::http::install_crypto_provider();
    let client = reqwest::Client::new();
    wait_ready(&client, &url).await?;
    let tokens = Arc::new(user_tokens(&client, &url, &admin, &sc.workload.users).await?);
    let result = drive(s, dbs, &db, &url, tokens, sc.workload.clone(), &procs).await;
    drop(procs);
    result
}

// ---------------------------------------------------------------------------------------------
// Report

struct Measured {
    mode: Mode,
    scenario: &'static str,
    sites: usize,
    processes: String,
    rounds: Vec<RoundResult>,
}

impl Measured {
    /// The round with the median plans/s (the lower middle one for an even count).
    fn median(&self) -> &RoundResult {
        let mut idx: Vec<usize> = (0..self.rounds.len()).collect();
        idx.sort_by(|&a, &b| self.rounds[a].plans_per_s.total_cmp(&self.rounds[b].plans_per_s));
        &self.rounds[idx[(idx.len() - 1) / 2]]
    }

    fn range(&self) -> (f64, f64) {
        let it = self.rounds.iter().map(|r| r.plans_per_s);
        (it.clone().fold(f64::INFINITY, f64::min), it.fold(0.0, f64::max))
    }

    fn target(&self) -> String {
        if self.mode != Mode::AllInOne {
            return "-".into();
        }
        let m = self.median();
        let met = m.plans_per_s >= TARGET_PLANS_PER_S && m.latency_ms[2] <= TARGET_P99_MS && m.errors() == 0;
        format!(
            ">= {TARGET_PLANS_PER_S:.0} plans/s, p99 <= {TARGET_P99_MS:.0} ms {}",
            if met { "(met)" } else { "(MISSED)" }
        )
    }
}

fn summary_line(m: &Measured, pg: &Pgbench) -> String {
    let r = m.median();
    let (lo, hi) = m.range();
    let reasons: Vec<String> = r.reasons.iter().map(|(k, v)| format!("{v} {k}")).collect();
    let errors: Vec<String> = r.errors.iter().map(|(k, v)| format!("{v} {k}")).collect();
    format!(
        "{} on {} ({}): {:.0} plans/s (rounds {:.0}-{:.0}), ratio to pgbench {:.3}; latency p50 {:.2} ms, p90 {:.2} ms, \
         p99 {:.2} ms, max {:.2} ms (in the planner: p50 {:.2} ms, p99 {:.2} ms); {} committed, {} rejected (commit rate {:.3}{}{}), errors {}; per plan {:.0} messages, {:.1} holds aborted, \
         {:.1} PostgreSQL transactions; CPU in cores: {}; server log warnings {}",
        m.mode.name(),
        m.scenario,
        m.processes,
        r.plans_per_s,
        lo,
        hi,
        r.plans_per_s / pg.tps,
        r.latency_ms[0],
        r.latency_ms[1],
        r.latency_ms[2],
        r.latency_ms[3],
        r.planning_ms[0],
        r.planning_ms[1],
        r.committed,
        r.rejected,
        r.commit_rate(),
        if reasons.is_empty() { "" } else { "; rejected: " },
        reasons.join(", "),
        if errors.is_empty() { "0".to_owned() } else { errors.join(", ") },
        r.messages_per_plan,
        r.holds_aborted_per_plan,
        r.pg_xacts_per_plan,
        r.cpu.describe(),
        r.problems
    )
}

fn write_report(s: &Settings, pg_info: &str, pg: &Pgbench, measured: &[Measured]) {
    let idem = if s.idempotency { " and an `Idempotency-Key`" } else { "" };
    let mut body = report::heading("Service load: POST /v1/plans over HTTP on PostgreSQL", COMMAND);
    body.push_str(&format!(
        "- database: {pg_info}, on this machine\n\n\
         {clients} closed-loop clients (tokio + reqwest, keep-alive, in the bench process) POST SDSC-BLUE-derived \
         workflow requests (`coreserve workload` rules: 4-job diamonds, CPUs from the trace clamped to 8-128, offered \
         load {OFFERED_LOAD} of the grid's CPUs) to `coreserve serve` with `DATABASE_URL` (default flags: 3 planners, \
         BIR, policy `time`, 2 HTTP workers per process). The trace's arrival times become `not_before` from a base \
         {margin} min after the run starts; each deadline keeps its window; every request carries its workload user's \
         token{idem}. Each deployment runs {rounds} rounds on a fresh database and fresh processes: {warmup} s warm-up, \
         then {measure} s measured. plans/s = `201` answers (committed or rejected plans) completed in the measured \
         window per second; the figures are those of the median round by plans/s (range over the rounds beside it). \
         Ceiling: each plan needs at least one durable commit, so pgbench's TPS on the same server, measured in the \
         same run just before, bounds it. CPU from /proc; planner time: the answers' `planning_ms` (search and \
         two-phase commit inside the server).\n\n",
        clients = s.clients,
        margin = BASE_MARGIN_S / 60,
        rounds = s.rounds,
        warmup = s.warmup.as_secs(),
        measure = s.measure.as_secs(),
    ));
    body.push_str(
        "| deployment | grid | processes | plans/s (range) | p50 | p90 | p99 | max | commit rate | errors | \
         plans/s ÷ pgbench TPS | target |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    body.push_str(&format!(
        "| pgbench tpcb-like (`{}`) | - | - | {:.0} TPS | latency average {:.2} ms | - | - | - | - | - | 1 | - |\n",
        pg.command, pg.tps, pg.latency_ms
    ));
    for m in measured {
        let r = m.median();
        let (lo, hi) = m.range();
        body.push_str(&format!(
            "| {} | {} ({} sites) | {} | {:.0} ({:.0}-{:.0}) | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.3} | {} | {:.3} | {} |\n",
            m.mode.name(),
            m.scenario,
            m.sites,
            m.processes,
            r.plans_per_s,
            lo,
            hi,
            r.latency_ms[0],
            r.latency_ms[1],
            r.latency_ms[2],
            r.latency_ms[3],
            r.commit_rate(),
            r.errors(),
            r.plans_per_s / pg.tps,
            m.target()
        ));
    }
    body.push_str(
        "\nCPU during the measured window, in cores (of 2):\n\n| deployment | grid | coreserve | PostgreSQL | \
         load generator | other | idle |\n|---|---|---|---|---|---|---|\n",
    );
    for m in measured {
        let c = &m.median().cpu;
        let roles: Vec<String> = c.servers.iter().map(|(role, v)| format!("{role} {v:.2}")).collect();
        body.push_str(&format!(
            "| {} | {} | {:.2} ({}) | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            m.mode.name(),
            m.scenario,
            c.coreserve(),
            roles.join(", "),
            c.postgres,
            c.generator,
            c.other,
            c.idle
        ));
    }
    body.push_str(
        "\nPer plan: the planner's own time, its participant messages and aborted holds (means), PostgreSQL \
         transactions in the deployment's database (commits and rollbacks, read-only ones included), CPU time.\n\n\
         | deployment | grid | planner time p50 / p99 | messages | holds aborted | PostgreSQL transactions | CPU \
         coreserve / PostgreSQL |\n|---|---|---|---|---|---|---|\n",
    );
    for m in measured {
        let r = m.median();
        let per_plan = |cores: f64| cores / r.plans_per_s.max(f64::MIN_POSITIVE) * 1e3;
        body.push_str(&format!(
            "| {} | {} | {:.2} / {:.2} ms | {:.0} | {:.1} | {:.1} | {:.2} / {:.2} ms |\n",
            m.mode.name(),
            m.scenario,
            r.planning_ms[0],
            r.planning_ms[1],
            r.messages_per_plan,
            r.holds_aborted_per_plan,
            r.pg_xacts_per_plan,
            per_plan(r.cpu.coreserve()),
            per_plan(r.cpu.postgres)
        ));
    }
    report::write_markdown("load", &body);
}

// ---------------------------------------------------------------------------------------------

async fn run(s: &Settings, dbs: &Databases) -> Result<()> {
    let pg_info = server_info(dbs).await?;
    eprintln!("{pg_info} at {}", s.server);
    let dir = tempfile::tempdir()?;
    let scenarios = scenarios(&s.data, dir.path())?;
    if !coreserve_bin().exists() {
        bail!("{} is missing (cargo bench builds it)", coreserve_bin().display());
    }

    let pg = pgbench(dbs, s.pgbench_s).await?;
    eprintln!("pgbench: {:.0} TPS (latency average {:.2} ms)", pg.tps, pg.latency_ms);
    dbs.drop_all().await?;

    let plan = [(Mode::AllInOne, 0), (Mode::AllInOne, 1), (Mode::Roles, 1)];
    let mut measured = Vec::new();
    for (mode, i) in plan {
        let sc = &scenarios[i];
        let processes = match mode {
            Mode::AllInOne => "1".to_owned(),
            Mode::Roles => format!("{} LIS + NIS + GIS + 1 planner", sc.grid.sites().len()),
        };
        let mut m = Measured { mode, scenario: sc.label, sites: sc.grid.sites().len(), processes, rounds: Vec::new() };
        for k in 1..=s.rounds {
            eprintln!("{} on {}: round {k} of {}", mode.name(), sc.label, s.rounds);
            let r = round(s, dbs, mode, sc).await?;
            dbs.drop_all().await?;
            eprintln!(
                "  {:.0} plans/s, p50 {:.2} ms, p99 {:.2} ms, commit rate {:.3}, errors {}; per plan {:.0} messages, \
                 {:.1} PostgreSQL transactions; CPU: {}",
                r.plans_per_s,
                r.latency_ms[0],
                r.latency_ms[2],
                r.commit_rate(),
                r.errors(),
                r.messages_per_plan,
                r.pg_xacts_per_plan,
                r.cpu.describe()
            );
            m.rounds.push(r);
        }
        measured.push(m);
    }

    println!(
        "\nLoad benchmark ({} clients, {} s measured per round, median of {} rounds)",
        s.clients,
        s.measure.as_secs(),
        s.rounds
    );
    println!("{pg_info}; pgbench tpcb-like: {:.0} TPS ({})", pg.tps, pg.command);
    for m in &measured {
        println!("- {}", summary_line(m, &pg));
    }
    write_report(s, &pg_info, &pg, &measured);
    println!("section `load` of BENCHMARKS.md written");
    Ok(())
}

fn main() -> Result<()> {
    let s = Settings::from_env()?;
    let dbs = Databases { server: s.server.clone(), names: Mutex::new(Vec::new()) };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let result = std::panic::AssertUnwindSafe(run(&s, &dbs)).catch_unwind().await;
        let dropped = dbs.drop_all().await;
        match result {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(r) => r.and(dropped),
        }
    })
}
