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
use coreserve::model::{Grid, Outcome, OutcomeStatus, PlanRequest, Time};
use coreserve::replay::DispatchRule;
use coreserve::store::PlanStatus;
use coreserve::workload::generate;
use coreserve_loadtest::database::Databases;
use coreserve_loadtest::deploy::{wait_ready, Mode, Procs};

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
            Ok(serde_json::from_str::<Outcome<PlanStatus>>(&text)?)
        }));
    }
    let mut outcomes = Vec::with_capacity(tasks.len());
    for t in tasks {
        let o = t.await??;
        let status = if o.status == PlanStatus::Committed { OutcomeStatus::Committed } else { OutcomeStatus::Rejected };
        let mut o = o.with_status(status);
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
    std::fs::write(out.join("validation.md"), report(s, &rows, &calibrated))?;
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

/// A compared metric: its name, its value in a run, the digits shown, its tolerance and
/// whether that is relative to the service's mean.
struct Metric {
    name: &'static str,
    value: fn(&RunRow) -> f64,
    digits: usize,
    tolerance: f64,
    relative: bool,
}

/// The paired comparison of one metric over the seeds: the service's and the simulator's
/// means, the mean difference (simulator - service) with its 95 % half-width, the tolerance in
/// the metric's unit, and whether the difference's interval lies within it.
struct Agreement {
    service: f64,
    simulator: f64,
    difference: (f64, f64),
    tolerance: f64,
    agrees: Option<bool>,
}

impl Agreement {
    fn of(metric: &Metric, service: &[f64], simulator: &[f64]) -> Self {
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let d: Vec<f64> = simulator.iter().zip(service).map(|(b, a)| b - a).collect();
        let difference = ci95_half_width(&d);
        let tolerance = if metric.relative { metric.tolerance * mean(service).abs() } else { metric.tolerance };
        let agrees = (metric.tolerance > 0.0)
            .then(|| difference.0 - difference.1 >= -tolerance && difference.0 + difference.1 <= tolerance);
        Agreement { service: mean(service), simulator: mean(simulator), difference, tolerance, agrees }
    }
}

/// validation.md's table: one line per algorithm and metric.
fn report(s: &Scenario, rows: &[ValidationRow], t: &ServiceTimes) -> String {
    let tol = &s.validation.tolerance;
    let mut md = format!(
        "Scenario `{}`: {} requests per run, compared seeds {}..={} (calibrated on {} more), loads {:?}, \
         w_interval {} s, lease {} s, {} planners x {} requests at once, service times injected: {}.\n\n\
         Calibrated service times (uniform ranges, ms): availability {}, free slot {}, hold {}, commit {}, \
         cancel {}.\n\n\
         Differences are simulator minus service, paired by seed: mean ± 95 % half-width (Student's t). \
         A metric agrees when that interval lies within ± the tolerance, fixed before the runs.\n\n\
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
    let metrics = [
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
            value: |r| r.rejected.rejected_time_limit as f64 / r.requests.max(1) as f64,
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
    ];
    for &algorithm in &s.algorithms {
        for m in &metrics {
            // Both sides' rows are in the same (key) order: pairs are the same seed.
            let side = |side: &str| -> Vec<f64> {
                rows.iter()
                    .filter(|r| r.side == side && r.run.algorithm == algorithm)
                    .map(|r| (m.value)(&r.run))
                    .collect()
            };
            let a = Agreement::of(m, &side("service"), &side("simulator"));
            let digits = m.digits;
            let verdict = match a.agrees {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "(not judged)",
            };
            let tolerance = if m.tolerance > 0.0 { format!("± {:.digits$}", a.tolerance) } else { "—".into() };
            let _ = writeln!(
                md,
                "| {algorithm} | {} | {:.digits$} | {:.digits$} | {:+.digits$} ± {:.digits$} | {tolerance} | {verdict} |",
                m.name, a.service, a.simulator, a.difference.0, a.difference.1
            );
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
