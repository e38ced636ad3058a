//! The simulator checked against the running service (`coreserve-sim SCENARIO --validate`):
//! Takefusa et al.'s lesson from Bricks, that a grid simulator is only as good as its
//! agreement with measurements of the real thing (docs/simulator.md, "Validation").
//!
//! Both sides run the same planner configuration: the scenario must say `batch_messages =
//! true`, `check_before_hold = true` and `dispatch = "least-busy"` (what the service's planner
//! process does), and the service gets the simulator's planner seeds (`--planner-seed`), as
//! many planning permits as the simulator's planners work on at once, and no per-user limit.
//!
//! 1. **Calibration runs** (seeds after the compared ones, `[validation] calibration_seeds`):
//!    service runs only, whose planner-side latencies (`/metrics`,
//!    `coreserve_participant_call_seconds`, by kind and message) set the simulator's service
//!    times: uniform ranges `[0.5 m, 1.5 m]` around each message type's mean `m`, or, when the
//!    service's participants wait injected service times (`inject_service_times`, `serve
//!    --service-times`: the paper's regime of slow messages), the injected ranges shifted by
//!    what the service took beyond them.
//! 2. **Compared runs** (the scenario's seeds), every topology x kind x offered load x
//!    algorithm, on both sides. The service: a fresh database and a role-separated deployment
//!    (a LIS process per site, the NIS, the GIS and a planner process, talking HTTP); the
//!    run's requests are POSTed in real time: request `i` leaves `submitted_at(i) -
//!    submitted_at(0)` seconds after the start, its `not_before` and `deadline` shifted by the
//!    same amount, so the service sees the simulated workload on its own clock. Times in a
//!    validation scenario are therefore compressed: its `[workload] durations_s` and
//!    `w_interval_s` are the paper's divided by a factor the scenario states (its offered
//!    load is unchanged by that). The simulator: the same requests, grid and seeds.
//! 3. **Judged** per algorithm and metric: the mean paired difference (simulator - service,
//!    by seed) and its 95 % interval against the tolerance the scenario fixed in advance
//!    (`[validation.tolerance]`).
//!
//! Written to `OUT`: `validation.md` (the table), `validation-service-runs.csv` and
//! `validation-simulator-runs.csv` (the compared runs, one row per run as in `runs.csv`) and
//! `service-times.toml` (the calibrated `[service_times]`, with the latencies measured in both
//! sets of runs).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use chrono::{DateTime, SecondsFormat, Utc};
use coreserve::check::check_outcomes;
use coreserve::grid::save_grid;
use coreserve::model::{Grid, Outcome, PlanRequest, PlanStatus, Time};
use coreserve::replay::DispatchRule;
use coreserve::workload::generate;
use coreserve_loadtest::database::Databases;
use coreserve_loadtest::deploy::{wait_ready, Mode, Procs};

use crate::algorithm::Algorithm;
use crate::report::{ci95_half_width, write_runs_csv, RunRow};
use crate::run::{planner_seed, simulate, RunKey};
use crate::scenario::Scenario;
use crate::transport::ServiceTimes;

/// Where the validation finds the service.
pub struct Service {
    /// The `coreserve` executable.
    pub bin: PathBuf,
    /// A PostgreSQL server URL (fresh databases are made on it and dropped after).
    pub postgres: String,
}

/// Seconds between the deployment being ready and the first request.
const LEAD_S: i64 = 2;

/// How long after a whole second of the wall clock the requests are sent (see `service_run`).
const SECOND_MARGIN: Duration = Duration::from_millis(5);

/// Sum and count of one message type's measured latencies, seconds.
#[derive(Debug, Default, Clone, Copy)]
struct Latency {
    sum_s: f64,
    count: u64,
}

impl Latency {
    fn mean(self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_s / self.count as f64)
    }
}

/// Per `(participant, message)` label pair of `coreserve_participant_call_seconds`.
type Latencies = BTreeMap<(String, String), Latency>;

/// The `_sum` and `_count` lines of `coreserve_participant_call_seconds` in a `/metrics` text.
fn parse_latencies(text: &str, into: &mut Latencies) {
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("coreserve_participant_call_seconds_") else { continue };
        let (what, rest) = rest.split_once('{').unwrap_or_default();
        let Some((labels, value)) = rest.split_once("} ") else { continue };
        let label =
            |name: &str| labels.split(',').find_map(|kv| kv.strip_prefix(name)?.strip_prefix("=\"")?.strip_suffix('"'));
        let (Some(p), Some(m), Ok(v)) = (label("participant"), label("message"), value.trim().parse::<f64>()) else {
            continue;
        };
        let e = into.entry((p.to_owned(), m.to_owned())).or_default();
        match what {
            "sum" => e.sum_s += v,
            "count" => e.count += v as u64,
            _ => {}
        }
    }
}

/// The simulator's service times from measured latencies. Without injected service times, a
/// uniform range `[0.5 m, 1.5 m]` around each message type's mean `m`; with them (`injected`,
/// the service's participants waited `scenario`'s ranges), each range shifted by what the
/// service took beyond its mean wait (the transport and the participant's own work). A type
/// never measured keeps `scenario`'s range.
fn calibrate(lat: &Latencies, scenario: &ServiceTimes, injected: bool) -> ServiceTimes {
    let mean = |pairs: &[(&str, &str)]| {
        let l = pairs
            .iter()
            .filter_map(|(p, m)| lat.get(&(p.to_string(), m.to_string())))
            .fold(Latency::default(), |a, b| Latency { sum_s: a.sum_s + b.sum_s, count: a.count + b.count });
        l.mean()
    };
    let range = |m: Option<f64>, (lo, hi): (f64, f64)| match m {
        None => (lo, hi),
        Some(m) if injected => {
            let beyond = (m - (lo + hi) / 2.0).max(0.0);
            (lo + beyond, hi + beyond)
        }
        Some(m) => (0.5 * m, 1.5 * m),
    };
    ServiceTimes {
        availability: range(mean(&[("nis", "query")]), scenario.availability),
        free_slot: range(mean(&[("lis", "query")]), scenario.free_slot),
        hold: range(mean(&[("lis", "prepare"), ("nis", "prepare")]), scenario.hold),
        commit: range(mean(&[("lis", "commit"), ("nis", "commit")]), scenario.commit),
        cancel: range(
            mean(&[("lis", "abort"), ("nis", "abort"), ("lis", "release"), ("nis", "release")]),
            scenario.cancel,
        ),
    }
}

fn rfc3339(t: Time) -> String {
    DateTime::<Utc>::from_timestamp(t, 0).expect("a valid time").to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The REST body of `r` with its times shifted by `shift` seconds.
fn body(r: &PlanRequest, shift: i64) -> Result<serde_json::Value> {
    let mut b = serde_json::json!({
        "id": r.id(),
        "deadline": rfc3339(r.deadline() + shift),
        "jobs": r.jobs(),
        "transfers": r.transfers(),
    });
    if let Some(t) = r.not_before() {
        b["not_before"] = rfc3339(t + shift).into();
    }
    Ok(b)
}

/// One service run's set-up.
struct ServiceRun<'a> {
    svc: &'a Service,
    s: &'a Scenario,
    /// The grid and the file it is saved in.
    grid: (&'a Grid, &'a Path),
    /// The run: its planners' seeds are the simulator's for the same run's seed.
    key: &'a RunKey,
    /// `serve --service-times` for every process
    /// ([`crate::scenario::validation::ValidationParams::inject_service_times`]).
    injected: Option<&'a Path>,
}

/// One service run: deploys, replays `requests` in real time, returns their outcomes (placements
/// shifted back to the requests' timeline) and adds the planner's call latencies to `lat`.
///
/// The service is configured as the simulator runs: the same planner seeds, as many planning
/// slots as the simulator's planners work on at once, no per-user limit (the simulator has
/// none); its planners batch and check before holding as the scenario's must (`batch_messages`,
/// `check_before_hold`), and hand a request to the least busy planner (`dispatch`).
async fn service_run(
    run: &ServiceRun<'_>,
    dbs: &Databases,
    requests: &[PlanRequest],
    lat: &mut Latencies,
) -> Result<Vec<Outcome>> {
    let (svc, s, algorithm) = (run.svc, run.s, run.key.algorithm);
    let db = dbs.create("validate").await?;
    let (admin, service) = (format!("admin-{}", uuid()), format!("service-{}", uuid()));
    let mut common: Vec<String> = [
        ("--w-interval-s", s.w_interval_s.to_string()),
        ("--lease-s", s.lease_s().to_string()),
        ("--method", algorithm.method.to_string()),
        ("--policy", algorithm.policy.to_string()),
        ("--planners", s.planners.to_string()),
        ("--routing", s.routing.clone()),
        ("--planner-seed", planner_seed(run.key.seed).to_string()),
        ("--planning-permits", (s.planners * s.planner_concurrency).to_string()),
        ("--max-in-flight-per-user", requests.len().max(1).to_string()),
    ]
    .into_iter()
    .flat_map(|(k, v)| [k.to_owned(), v])
    .collect();
    if let Some(file) = run.injected {
        common.extend(["--service-times".to_owned(), file.display().to_string()]);
    }
    let mut procs = Procs::new(&svc.bin, &db, &admin, &service, &common);
    let url = procs.deploy(Mode::Roles, run.grid.0, run.grid.1)?;
    coreserve::protocol::http::install_crypto_provider();
    let client = reqwest::Client::new();
    wait_ready(&client, &url).await?;

    // Each request is sent with its workload user's token, as a user would.
    let mut tokens: BTreeMap<&str, String> = BTreeMap::new();
    for r in requests {
        if !tokens.contains_key(r.user()) {
            let answer = client
                .post(format!("{url}/v1/tokens"))
                .bearer_auth(&admin)
                .json(&serde_json::json!({ "user": r.user() }))
                .send()
                .await?
                .error_for_status()?
                .json::<serde_json::Value>()
                .await?;
            let token = answer["token"].as_str().context("POST /v1/tokens answered no token")?.to_owned();
            tokens.insert(r.user(), token);
        }
    }
    let first = requests.first().context("no requests")?.submitted_at();
    // Start just after a whole second of the wall clock. The service stamps a request's
    // arrival in whole seconds (`model::Time`) and ends its search at arrival + w_interval by
    // the same clock, so a request received at x.9 s would have 0.1 s less than w_interval to
    // plan (0.5 s on average: a sixth of a compressed 3 s); the simulator's arrivals are whole
    // seconds of its virtual clock.
    let to_next_second = 1_000_000_000 - u64::from(Utc::now().timestamp_subsec_nanos());
    tokio::time::sleep(Duration::from_nanos(to_next_second) + SECOND_MARGIN).await;
    let t0 = Utc::now().timestamp() + LEAD_S;
    let start = tokio::time::Instant::now() + Duration::from_secs(LEAD_S as u64);
    let shift = t0 - first;
    let mut tasks = Vec::new();
    for r in requests {
        let at = start + Duration::from_secs((r.submitted_at() - first) as u64);
        let (client, url, token, body) = (client.clone(), url.clone(), tokens[r.user()].clone(), body(r, shift)?);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            let resp = client.post(format!("{url}/v1/plans")).bearer_auth(&token).json(&body).send().await?;
            let status = resp.status();
            let text = resp.text().await?;
            if status != reqwest::StatusCode::CREATED {
                bail!("POST /v1/plans answered {status}: {text}");
            }
            Ok(serde_json::from_str::<Outcome>(&text)?)
        }));
    }
    let mut outcomes = Vec::with_capacity(tasks.len());
    for t in tasks {
        let o = t.await??;
        // The service's own states (active, pending, ...) read as the simulator's two.
        let status = if o.status == PlanStatus::Committed { PlanStatus::Committed } else { PlanStatus::Rejected };
        let mut o = Outcome { status, ..o };
        for j in &mut o.jobs {
            j.start -= chrono::Duration::seconds(shift);
            j.end -= chrono::Duration::seconds(shift);
        }
        for x in &mut o.transfers {
            x.start -= chrono::Duration::seconds(shift);
            x.end -= chrono::Duration::seconds(shift);
        }
        o.start = o.start.map(|st| st - chrono::Duration::seconds(shift));
        outcomes.push(o);
    }
    let metrics = client.get(format!("{url}/metrics")).send().await?.text().await?;
    parse_latencies(&metrics, lat);
    drop(procs);
    dbs.drop_all().await?;
    Ok(outcomes)
}

fn uuid() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// One run's figures, from either side (`service` or `simulator`).
struct ValidationRow {
    side: &'static str,
    run: RunRow,
}

/// A run to make: its key, its grid and the file the grid is saved in, its requests.
type Run = (RunKey, Grid, PathBuf, Vec<PlanRequest>);

/// The runs of `seeds`: every topology x kind x load x algorithm, with its grid (saved in
/// `dir` for the service) and requests.
fn runs_of(s: &Scenario, cpus: &[u32], seeds: std::ops::RangeInclusive<u64>, dir: &Path) -> Result<Vec<Run>> {
    let mut runs = Vec::new();
    for topology in &s.topologies {
        for seed in seeds.clone() {
            let grid = s.grid(topology, seed)?;
            let path = dir.join(format!("{}-{seed}.json", Scenario::topology_label(topology)));
            save_grid(&grid, &path)?;
            for kind in &s.kinds {
                for &load in &s.loads {
                    let requests = generate(cpus, grid.total_cpus(), &s.workload_params(*kind, load, seed))?;
                    for &algorithm in &s.algorithms {
                        let topology = Scenario::topology_label(topology);
                        let key = RunKey { topology, kind: kind.to_string(), algorithm, load, seed };
                        runs.push((key, grid.clone(), path.clone(), requests.clone()));
                    }
                }
            }
        }
    }
    Ok(runs)
}

/// Runs the validation (see the module docs) and writes its files into `out`.
///
/// # Errors
/// PostgreSQL or the service cannot be reached or started; a request is not answered `201`;
/// the outcome checker finds a violation in either side's outcomes; a file cannot be written.
pub fn validate(s: &Scenario, svc: &Service, cpus: &[u32], out: &Path) -> Result<()> {
    if !(s.batch_messages && s.check_before_hold && s.dispatch == DispatchRule::LeastBusy) {
        bail!(
            "scenario {}: the simulator must run as the service's planner process does: \
             batch_messages = true, check_before_hold = true, dispatch = \"least-busy\"",
            s.name
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let dbs = Databases::new(&svc.postgres);
    let dir = tempfile::tempdir()?;
    let injected = if s.validation.inject_service_times {
        let file = dir.path().join("service-times.toml");
        std::fs::write(&file, toml::to_string(&s.service_times)?)?;
        Some(file)
    } else {
        None
    };
    let v = &s.validation;
    let last = s.seed_offset + s.seeds;
    let calibration = runs_of(s, cpus, last + 1..=last + v.calibration_seeds, dir.path())?;
    let compared = runs_of(s, cpus, s.run_seeds(), dir.path())?;
    // The calibration runs' latencies set the simulator's service times; the compared runs'
    // are measured apart and only reported.
    let (mut calibration_lat, mut compared_lat) = (Latencies::new(), Latencies::new());
    let mut service = Vec::new();
    for (i, (key, grid, path, requests)) in calibration.iter().chain(&compared).enumerate() {
        let calibrating = i < calibration.len();
        eprintln!("service ({}): {key:?}", if calibrating { "calibration" } else { "compared" });
        let lat = if calibrating { &mut calibration_lat } else { &mut compared_lat };
        let run = ServiceRun { svc, s, grid: (grid, path), key, injected: injected.as_deref() };
        let outcomes =
            rt.block_on(service_run(&run, &dbs, requests, lat)).with_context(|| format!("service run {key:?}"))?;
        let violations = check_outcomes(grid, requests, &outcomes, s.w_interval_s);
        if let Some(v) = violations.first() {
            bail!("{key:?}: the service's outcomes break a rule ({} violations), first: {v}", violations.len());
        }
        if !calibrating {
            service.push(outcomes);
        }
    }
    rt.block_on(dbs.drop_all())?;

    let calibrated = calibrate(&calibration_lat, &s.service_times, injected.is_some());
    let sim = Scenario { service_times: calibrated.clone(), ..s.clone() };
    let mut rows = Vec::new();
    for ((key, grid, _, requests), outcomes) in compared.iter().zip(&service) {
        let (sim_row, _) = simulate(&sim, key, grid, requests)?;
        rows.push(ValidationRow { side: "service", run: RunRow::of(key, grid, requests, outcomes, s.warmup_requests) });
        rows.push(ValidationRow { side: "simulator", run: sim_row });
    }
    for side in ["service", "simulator"] {
        let side_rows: Vec<RunRow> = rows.iter().filter(|r| r.side == side).map(|r| r.run.clone()).collect();
        write_runs_csv(&side_rows, &out.join(format!("validation-{side}-runs.csv")))?;
    }
    let toml = service_times_toml(&calibrated, &calibration_lat, &compared_lat);
    std::fs::write(out.join("service-times.toml"), toml)?;
    // Judged from the files just written, so that validation.md's numbers are the CSV's.
    std::fs::write(out.join("validation.md"), rejudge(s, out)?)?;
    Ok(())
}

/// The calibrated `[service_times]` table, with the measured means as comments: of the
/// calibration runs (which set it) and of the compared runs (which did not).
fn service_times_toml(t: &ServiceTimes, calibration: &Latencies, compared: &Latencies) -> String {
    let mut s = String::from("# Mean latency of the planner's participant calls (seconds, calls):\n");
    for ((p, m), l) in calibration {
        let other = compared.get(&(p.clone(), m.clone())).and_then(|c| c.mean());
        if let Some(mean) = l.mean() {
            let _ = write!(s, "#   {p} {m}: {mean:.6} s over {} calibration calls", l.count);
            let _ = match other {
                Some(o) => writeln!(s, "; {o:.6} s in the compared runs"),
                None => writeln!(s),
            };
        }
    }
    s.push_str("[service_times]\n");
    for (name, (lo, hi)) in t.named() {
        let _ = writeln!(s, "{name} = [{lo:.6}, {hi:.6}]");
    }
    s
}

/// A service-time range in milliseconds.
fn ms((lo, hi): (f64, f64)) -> String {
    format!("{:.3}-{:.3}", lo * 1e3, hi * 1e3)
}

/// The fewest compared seeds from which a metric's agreement is judged. One seed gives a
/// difference without an interval (a point value, shown as `± 0.000` before this rule), two an
/// interval of Student's t with one degree of freedom (12.7 standard errors wide): neither is
/// evidence of agreement, so below this the cell says "not judged".
pub const MIN_SEEDS_JUDGED: usize = 3;

/// What the validation compares of one run: the columns of a `validation-*-runs.csv` row
/// (`runs.csv`'s) that its metrics read. The report is computed from these rows as read back
/// from the CSV files, so that every number of `validation.md` is the CSV's.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
struct Compared {
    topology: String,
    kind: String,
    algorithm: Algorithm,
    load: f64,
    seed: u64,
    requests: u64,
    success_rate: f64,
    mean_cost: f64,
    messages: u64,
    planning_s_mean: f64,
    rejected_time_limit: u64,
}

/// The compared runs of one side, as `validate` wrote them to `dir` (`validation-{side}-runs.csv`).
fn read_compared(dir: &Path, side: &str) -> Result<Vec<Compared>> {
    let path = dir.join(format!("validation-{side}-runs.csv"));
    let mut reader = csv::Reader::from_path(&path).with_context(|| format!("reading {}", path.display()))?;
    reader.deserialize().collect::<Result<_, _>>().with_context(|| format!("parsing {}", path.display()))
}

/// The calibrated service times `validate` wrote to `dir` (`service-times.toml`).
fn read_service_times(dir: &Path) -> Result<ServiceTimes> {
    #[derive(serde::Deserialize)]
    struct File {
        service_times: ServiceTimes,
    }
    let path = dir.join("service-times.toml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(toml::from_str::<File>(&text).with_context(|| format!("parsing {}", path.display()))?.service_times)
}

/// Judges a finished validation again from its files in `dir` (`--rejudge`): the compared runs'
/// CSV files and the calibrated service times; returns `validation.md`'s text.
///
/// # Errors
/// A file is missing or unreadable; the two sides' runs do not pair up (see [`judge`]).
pub fn rejudge(s: &Scenario, dir: &Path) -> Result<String> {
    let (service, simulator) = (read_compared(dir, "service")?, read_compared(dir, "simulator")?);
    report(s, &service, &simulator, &read_service_times(dir)?)
}

/// A compared metric: its name, its value in a run, the digits shown, its tolerance and
/// whether that is relative to the service's mean.
struct Metric {
    name: &'static str,
    value: fn(&Compared) -> f64,
    digits: usize,
    tolerance: f64,
    relative: bool,
}

/// The paired comparison of one metric over the seeds: the service's and the simulator's
/// means, the mean difference (simulator - service) with its 95 % half-width, the tolerance in
/// the metric's unit, and whether the difference's interval lies within it (`None`: not judged,
/// because the metric has no tolerance or there are fewer than [`MIN_SEEDS_JUDGED`] seeds).
struct Agreement {
    service: f64,
    simulator: f64,
    difference: (f64, f64),
    tolerance: f64,
    seeds: usize,
    agrees: Option<bool>,
    /// The largest paired difference of a single seed, in absolute value.
    largest: f64,
}

impl Agreement {
    fn of(metric: &Metric, service: &[f64], simulator: &[f64]) -> Self {
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let d: Vec<f64> = simulator.iter().zip(service).map(|(b, a)| b - a).collect();
        let difference = ci95_half_width(&d);
        let tolerance = if metric.relative { metric.tolerance * mean(service).abs() } else { metric.tolerance };
        let agrees = (metric.tolerance > 0.0 && d.len() >= MIN_SEEDS_JUDGED)
            .then(|| difference.0 - difference.1 >= -tolerance && difference.0 + difference.1 <= tolerance);
        let largest = d.iter().fold(0.0_f64, |m, x| m.max(x.abs()));
        Agreement {
            service: mean(service),
            simulator: mean(simulator),
            difference,
            tolerance,
            seeds: d.len(),
            agrees,
            largest,
        }
    }

    /// The mean difference itself lies outside the tolerance (not only its interval).
    fn mean_outside(&self) -> bool {
        self.difference.0.abs() > self.tolerance
    }
}

/// One cell of the table: an algorithm's metric, judged.
struct Cell {
    algorithm: Algorithm,
    metric: &'static str,
    digits: usize,
    judged: bool,
    a: Agreement,
}

impl Cell {
    /// "mean ± half-width" as the table prints it; without an interval below two seeds.
    fn difference(&self) -> String {
        let digits = self.digits;
        if self.a.seeds < 2 {
            format!("{:+.digits$} (1 seed: no interval)", self.a.difference.0)
        } else {
            format!("{:+.digits$} ± {:.digits$}", self.a.difference.0, self.a.difference.1)
        }
    }

    /// "algorithm metric (difference against ± tolerance)", as the summary names a cell.
    fn named(&self) -> String {
        let digits = self.digits;
        format!("{} {} ({} against ± {:.digits$})", self.algorithm, self.metric, self.difference(), self.a.tolerance)
    }
}

/// The metrics compared, with the scenario's tolerances.
fn metrics(s: &Scenario) -> [Metric; 5] {
    let tol = &s.validation.tolerance;
    [
        Metric {
            name: "success rate",
            value: |r| r.success_rate,
            digits: 3,
            tolerance: tol.success_rate,
            relative: false,
        },
        Metric {
            name: "average cost per CPU-hour",
            value: |r| r.mean_cost,
            digits: 3,
            tolerance: tol.cost,
            relative: true,
        },
        Metric {
            name: "messages per plan",
            value: |r| r.messages as f64 / r.requests.max(1) as f64,
            digits: 1,
            tolerance: tol.messages,
            relative: true,
        },
        Metric {
            name: "rejected at w_interval (share)",
            value: |r| r.rejected_time_limit as f64 / r.requests.max(1) as f64,
            digits: 3,
            tolerance: tol.time_limit_share,
            relative: false,
        },
        Metric {
            name: "planning time per plan (s)",
            value: |r| r.planning_s_mean,
            digits: 3,
            tolerance: tol.planning_time,
            relative: true,
        },
    ]
}

/// Every algorithm x metric of the scenario, judged from the two sides' runs, paired by run
/// (the same topology, kind, load and seed).
///
/// # Errors
/// An algorithm's runs on the two sides are not the same runs.
fn judge(s: &Scenario, service: &[Compared], simulator: &[Compared]) -> Result<Vec<Cell>> {
    let mut cells = Vec::new();
    for &algorithm in &s.algorithms {
        let side = |rows: &[Compared]| -> Vec<Compared> {
            let mut v: Vec<Compared> = rows.iter().filter(|r| r.algorithm == algorithm).cloned().collect();
            v.sort_by(|a, b| {
                (&a.topology, &a.kind, a.seed).cmp(&(&b.topology, &b.kind, b.seed)).then(a.load.total_cmp(&b.load))
            });
            v
        };
        let (a, b) = (side(service), side(simulator));
        let key = |r: &Compared| (r.topology.clone(), r.kind.clone(), r.load.to_bits(), r.seed);
        if a.iter().map(key).ne(b.iter().map(key)) {
            bail!("{algorithm}: the service's and the simulator's runs are not the same runs");
        }
        for m in metrics(s) {
            let values = |rows: &[Compared]| rows.iter().map(m.value).collect::<Vec<f64>>();
            let a = Agreement::of(&m, &values(&a), &values(&b));
            cells.push(Cell { algorithm, metric: m.name, digits: m.digits, judged: m.tolerance > 0.0, a });
        }
    }
    Ok(cells)
}

/// validation.md: the set-up, one line per algorithm and metric, and the verdicts counted
/// (how many cells were judged and agree; of the others, which miss by an interval wider than
/// the tolerance around a mean inside it, and which by a mean outside it).
///
/// # Errors
/// See [`judge`].
fn report(s: &Scenario, service: &[Compared], simulator: &[Compared], t: &ServiceTimes) -> Result<String> {
    let mut md = format!(
        "Scenario `{}`: {} requests per run, compared seeds {}..={} (calibrated on {} more), loads {:?}, \
         w_interval {} s, lease {} s, {} planners x {} requests at once, service times injected: {}.\n\n\
         Calibrated service times (uniform ranges, ms): availability {}, free slot {}, hold {}, commit {}, \
         cancel {}.\n\n\
         Differences are simulator minus service, paired by seed: mean ± 95 % half-width (Student's t). \
         A metric agrees when that interval lies within ± the tolerance, fixed before the runs; it is \
         judged from {MIN_SEEDS_JUDGED} seeds up.\n\n\
         | algorithm | metric | service | simulator | difference | tolerance | agrees |\n\
         |---|---|---|---|---|---|---|\n",
        s.name,
        s.requests,
        s.seed_offset + 1,
        s.seed_offset + s.seeds,
        s.validation.calibration_seeds,
        s.loads,
        s.w_interval_s,
        s.lease_s(),
        s.planners,
        s.planner_concurrency,
        if s.validation.inject_service_times { "yes" } else { "no" },
        ms(t.availability),
        ms(t.free_slot),
        ms(t.hold),
        ms(t.commit),
        ms(t.cancel)
    );
    let cells = judge(s, service, simulator)?;
    for c in &cells {
        let (a, digits) = (&c.a, c.digits);
        let verdict = match a.agrees {
            Some(true) => "yes".to_owned(),
            Some(false) => "**no**".to_owned(),
            None if c.judged => format!("(not judged: {} of the {MIN_SEEDS_JUDGED} seeds needed)", a.seeds),
            None => "(not judged)".to_owned(),
        };
        let tolerance = if c.judged { format!("± {:.digits$}", a.tolerance) } else { "—".into() };
        let _ = writeln!(
            md,
            "| {} | {} | {:.digits$} | {:.digits$} | {} | {tolerance} | {verdict} |",
            c.algorithm,
            c.metric,
            a.service,
            a.simulator,
            c.difference()
        );
    }
    let judged: Vec<&Cell> = cells.iter().filter(|c| c.a.agrees.is_some()).collect();
    let agree = judged.iter().filter(|c| c.a.agrees == Some(true)).count();
    let list = |cs: Vec<&&Cell>| {
        if cs.is_empty() {
            "none".to_owned()
        } else {
            cs.iter().map(|c| c.named()).collect::<Vec<_>>().join("; ")
        }
    };
    let misses: Vec<&&Cell> = judged.iter().filter(|c| c.a.agrees == Some(false)).collect();
    let (outside, wide): (Vec<&&Cell>, Vec<&&Cell>) = misses.into_iter().partition(|c| c.a.mean_outside());
    let unjudged = cells.iter().filter(|c| c.judged && c.a.agrees.is_none()).count();
    let _ = write!(md, "\n**Verdicts.** {} judged cells, {agree} agree. ", judged.len());
    if unjudged > 0 {
        let _ = write!(
            md,
            "{unjudged} cells with a tolerance are not judged: {} compared seeds, and agreement is judged \
             from {MIN_SEEDS_JUDGED} up. ",
            cells.first().map_or(0, |c| c.a.seeds)
        );
    }
    let _ = write!(
        md,
        "Not agreeing with the mean inside the tolerance (the interval is wider): {}. Not agreeing with \
         the mean outside the tolerance: {}.",
        list(wide),
        list(outside)
    );
    let largest = cells.iter().filter(|c| c.metric == "success rate").map(|c| c.a.largest).fold(0.0, f64::max);
    let _ = writeln!(
        md,
        " The largest difference between the two sides' success rates in one seed's run: {largest:.3} \
         (one request is 1/{} of a run's success rate).",
        s.requests
    );
    Ok(md)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The decimal numbers of `text` as written (sign included when one is written: a `-` or
    /// `+` that does not join two numbers, as in a range `0.3-1.4`).
    pub(crate) fn decimals(text: &str) -> Vec<String> {
        let b = text.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i].is_ascii_digit() && (i == 0 || !(b[i - 1].is_ascii_digit() || b[i - 1] == b'.')) {
                let mut j = i;
                while j < b.len()
                    && (b[j].is_ascii_digit() || (b[j] == b'.' && j + 1 < b.len() && b[j + 1].is_ascii_digit()))
                {
                    j += 1;
                }
                let sign =
                    i > 0 && (b[i - 1] == b'-' || b[i - 1] == b'+') && (i < 2 || !b[i - 2].is_ascii_alphanumeric());
                let start = if sign { i - 1 } else { i };
                if text[i..j].contains('.') {
                    out.push(text[start..j].to_owned());
                }
                i = j;
            } else {
                i += 1;
            }
        }
        out
    }

    /// Whether the number `d` (as written, from [`decimals`]) is one of `printed` to the
    /// decimals it is written with, and of the same sign where it is written with one.
    pub(crate) fn printed_in(d: &str, printed: &[f64]) -> bool {
        let digits = d.split('.').nth(1).map_or(0, str::len);
        let signed = d.starts_with(['-', '+']);
        let p: f64 = d.parse().unwrap();
        printed.iter().any(|v| {
            format!("{:.digits$}", v.abs()) == format!("{:.digits$}", p.abs())
                && (!signed || *v == 0.0 || (v.is_sign_negative() == d.starts_with('-')))
        })
    }

    /// What is wrong with `prose` as a reading of the judged validations: a number quoted to
    /// three decimals or with a sign that no `validation.md` prints (at that precision, with
    /// that sign); a count of judged or agreeing cells that is neither a file's nor the total;
    /// a cell that misses its tolerance by a mean outside it, not named by its difference.
    fn prose_errors(prose: &str, judged: &[(Vec<Cell>, String)]) -> Vec<String> {
        let printed: Vec<f64> =
            judged.iter().flat_map(|(_, t)| decimals(t)).map(|d| d.parse::<f64>().unwrap()).collect();
        let mut errors = Vec::new();
        for d in decimals(prose) {
            let digits = d.split('.').nth(1).map_or(0, str::len);
            if digits < 3 && !d.starts_with(['-', '+']) {
                continue;
            }
            if !printed_in(&d, &printed) {
                errors.push(format!("{d}: printed by no validation.md"));
            }
        }
        let counts = |f: &dyn Fn(&Cell) -> bool| -> Vec<usize> {
            let per: Vec<usize> = judged.iter().map(|(c, _)| c.iter().filter(|c| f(c)).count()).collect();
            let total = per.iter().sum();
            per.into_iter().chain([total]).collect()
        };
        let judged_counts = counts(&|c| c.a.agrees.is_some());
        let agree_counts = counts(&|c| c.a.agrees == Some(true));
        let words: Vec<&str> = prose.split_whitespace().collect();
        for w in words.windows(3) {
            let n = w[0].trim_start_matches('(').parse::<usize>();
            let Ok(n) = n else { continue };
            if w[1] == "judged" && w[2].starts_with("cells") && !judged_counts.contains(&n) {
                errors.push(format!("{n} judged cells: the files judged {judged_counts:?}"));
            }
            if w[1].starts_with("agree") && !agree_counts.contains(&n) {
                errors.push(format!("{n} agree: the files' agreeing cells are {agree_counts:?}"));
            }
        }
        for (cells, _) in judged {
            for c in cells.iter().filter(|c| c.a.agrees == Some(false) && c.a.mean_outside()) {
                if !prose.contains(&c.difference()) {
                    errors.push(format!(
                        "{} misses its tolerance by its mean ({}), not named",
                        c.named(),
                        c.difference()
                    ));
                }
            }
        }
        errors
    }

    #[test]
    fn latencies_are_read_from_the_exposition_and_calibrate_the_service_times() {
        let text = "# TYPE coreserve_participant_call_seconds histogram\n\
            coreserve_participant_call_seconds_bucket{participant=\"lis\",message=\"query\",le=\"0.001\"} 3\n\
            coreserve_participant_call_seconds_sum{participant=\"lis\",message=\"query\"} 0.004\n\
            coreserve_participant_call_seconds_count{participant=\"lis\",message=\"query\"} 4\n\
            coreserve_participant_call_seconds_sum{participant=\"nis\",message=\"prepare\"} 0.003\n\
            coreserve_participant_call_seconds_count{participant=\"nis\",message=\"prepare\"} 1\n\
            coreserve_participant_call_seconds_sum{participant=\"lis\",message=\"prepare\"} 0.001\n\
            coreserve_participant_call_seconds_count{participant=\"lis\",message=\"prepare\"} 1\n";
        let mut lat = Latencies::new();
        parse_latencies(text, &mut lat);
        parse_latencies(text, &mut lat);
        let q = lat[&("lis".to_owned(), "query".to_owned())];
        assert_eq!((q.count, q.mean()), (8, Some(0.001)));
        let t = calibrate(&lat, &ServiceTimes::default(), false);
        assert_eq!(t.free_slot, (0.0005, 0.0015));
        assert_eq!(t.hold, (0.001, 0.003), "prepares of both kinds: mean 2 ms");
        assert_eq!(t.commit, ServiceTimes::default().commit, "never measured: the scenario's range");
    }

    /// With injected service times, the measured mean beyond the injected range's mean shifts
    /// the range; a mean below it (impossible but for rounding) leaves the range as it was.
    #[test]
    fn injected_service_times_are_shifted_by_the_measured_overhead() {
        let mut lat = Latencies::new();
        lat.insert(("lis".into(), "query".into()), Latency { sum_s: 0.0035 * 4.0, count: 4 });
        lat.insert(("nis".into(), "query".into()), Latency { sum_s: 0.001, count: 1 });
        let injected = ServiceTimes { free_slot: (0.002, 0.004), availability: (0.002, 0.003), ..Default::default() };
        let t = calibrate(&lat, &injected, true);
        assert!((t.free_slot.0 - 0.0025).abs() < 1e-12 && (t.free_slot.1 - 0.0045).abs() < 1e-12, "{:?}", t.free_slot);
        assert_eq!(t.availability, (0.002, 0.003));
    }

    /// A metric agrees when the interval of its mean paired difference lies within the
    /// tolerance; a relative tolerance scales with the service's mean.
    #[test]
    fn agreement_is_the_paired_interval_within_the_tolerance() {
        let m = |tolerance, relative| Metric { name: "m", value: |r| r.success_rate, digits: 3, tolerance, relative };
        let service = [0.80, 0.90, 0.70, 0.85];
        let close = [0.81, 0.90, 0.72, 0.84];
        let a = Agreement::of(&m(0.05, false), &service, &close);
        assert_eq!(a.agrees, Some(true));
        assert!((a.difference.0 - 0.005).abs() < 1e-12);
        let far = [0.70, 0.80, 0.61, 0.76];
        assert_eq!(Agreement::of(&m(0.05, false), &service, &far).agrees, Some(false));
        let rel = Agreement::of(&m(0.2, true), &service, &far);
        assert!((rel.tolerance - 0.2 * 0.8125).abs() < 1e-12);
        assert_eq!(rel.agrees, Some(true));
        assert_eq!(Agreement::of(&m(0.0, true), &service, &far).agrees, None, "tolerance 0: not judged");
    }

    /// Issue 51: one seed gave a point value, printed `± 0.000` and judged as agreement. Below
    /// three seeds nothing is judged, however close the values.
    #[test]
    fn fewer_than_three_seeds_are_not_judged() {
        let m = Metric { name: "m", value: |r| r.success_rate, digits: 3, tolerance: 0.05, relative: false };
        for n in 1..MIN_SEEDS_JUDGED {
            let service = vec![0.8; n];
            let a = Agreement::of(&m, &service, &service);
            assert_eq!((a.seeds, a.agrees), (n, None), "{n} seeds");
        }
        let three = [0.8, 0.81, 0.79];
        assert_eq!(Agreement::of(&m, &three, &three).agrees, Some(true), "three identical seeds: judged");
        let cell = Cell {
            algorithm: "bir-time".parse().unwrap(),
            metric: "m",
            digits: 3,
            judged: true,
            a: Agreement::of(&m, &[0.8], &[0.8]),
        };
        assert_eq!(cell.difference(), "+0.000 (1 seed: no interval)");
    }

    /// The committed validations (sim/validation/{fast,slow}/): each folder's `validation.md` is
    /// what its CSV files judge to, VALIDATION.md's tables are those, and its prose (and the
    /// paragraph of RESULTS.md citing it) quotes no number the CSV files do not give.
    mod committed {
        use super::*;

        fn root() -> &'static Path {
            Path::new(env!("CARGO_MANIFEST_DIR"))
        }

        /// Each folder's judged cells and `validation.md`, checked against the committed file.
        fn judged() -> Vec<(Vec<Cell>, String)> {
            [("validation/fast", "scenarios/validation.toml"), ("validation/slow", "scenarios/validation-slow.toml")]
                .into_iter()
                .map(|(dir, scenario)| {
                    let s = Scenario::load(&root().join(scenario)).unwrap();
                    let dir = root().join(dir);
                    let text = rejudge(&s, &dir).unwrap();
                    let committed = std::fs::read_to_string(dir.join("validation.md")).unwrap();
                    assert_eq!(committed, text, "{}: validation.md is not what its CSV files judge to", dir.display());
                    let cells =
                        judge(&s, &read_compared(&dir, "service").unwrap(), &read_compared(&dir, "simulator").unwrap())
                            .unwrap();
                    (cells, text)
                })
                .collect()
        }

        /// VALIDATION.md from "## Results" on, with its tables, without the subsection that
        /// quotes earlier runs (whose files are not committed).
        fn results_section(md: &str) -> &str {
            let from = md.find("## Results").expect("VALIDATION.md has a Results section");
            &md[from..]
        }

        fn without_earlier_runs(text: &str) -> String {
            let mut out = String::new();
            let mut skipping = false;
            for line in text.lines() {
                if line.starts_with('#') {
                    skipping = line.starts_with("### Earlier runs");
                }
                if !skipping && !line.starts_with('|') {
                    out.push_str(line);
                    out.push('\n');
                }
            }
            out
        }

        #[test]
        fn validation_md_is_its_csv_and_its_prose_quotes_it() {
            let judged = judged();
            let md = std::fs::read_to_string(root().join("VALIDATION.md")).unwrap();
            let results = results_section(&md);
            // Every table row is a row of a regenerated validation.md, and all of them are there.
            let rows: Vec<&str> =
                results.lines().filter(|l| l.starts_with("| bir-") || l.starts_with("| bbr-")).collect();
            let cells: usize = judged.iter().map(|(c, _)| c.len()).sum();
            assert_eq!(rows.len(), cells, "VALIDATION.md's tables have every cell once");
            for row in rows {
                assert!(judged.iter().any(|(_, t)| t.lines().any(|l| l == row)), "not the CSV's: {row}");
            }
            let errors = prose_errors(&without_earlier_runs(results), &judged);
            assert!(errors.is_empty(), "VALIDATION.md's prose:\n{}", errors.join("\n"));
            // RESULTS.md's paragraphs citing VALIDATION.md (by its link): their numbers must be
            // the files', and one that counts the verdicts ("... agree") must name every cell
            // missed by its mean.
            let results_md = std::fs::read_to_string(root().join("RESULTS.md")).unwrap();
            let citing: Vec<&str> =
                results_md.split("\n\n").filter(|p| p.contains("[VALIDATION.md](VALIDATION.md)")).collect();
            assert!(citing.iter().any(|p| p.contains(" agree")), "RESULTS.md states the validation's verdicts");
            for paragraph in citing {
                let errors: Vec<String> = prose_errors(paragraph, &judged)
                    .into_iter()
                    .filter(|e| paragraph.contains(" agree") || !e.ends_with("not named"))
                    .collect();
                assert!(
                    errors.is_empty(),
                    "RESULTS.md's paragraph on the validation:\n{}\n{paragraph}",
                    errors.join("\n")
                );
            }
        }

        /// Issue 51's false sentence: "the others by intervals too wide rather than means too
        /// far", while slow BBR-time's cost differs by -0.060 ± 0.064 against ± 0.057.
        #[test]
        fn a_cell_missed_by_its_mean_must_be_named() {
            let judged = judged();
            let old = "Of the 26 judged cells, 21 agree. The cells that do not agree are intervals wider \
                       than the tolerance, not means outside it.";
            let errors = prose_errors(old, &judged);
            assert!(errors.iter().any(|e| e.contains("-0.060 ± 0.064")), "{errors:?}");
            let wrong = "Of the 26 judged cells, 22 agree; slow BBR-time's cost is -0.060 ± 0.064 (-0.061 mean).";
            let errors = prose_errors(wrong, &judged);
            assert!(
                errors.iter().any(|e| e.contains("22 agree")) && errors.iter().any(|e| e.contains("-0.061")),
                "{errors:?}"
            );
        }
    }
}
