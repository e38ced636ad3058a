//! The simulator checked against the running service (`coreserve-sim SCENARIO --validate`):
//! Takefusa et al.'s lesson from Bricks, that a grid simulator is only as good as its
//! agreement with measurements of the real thing (docs/simulator.md, "Validation").
//!
//! For every run of the scenario (topology x kind x offered load x seed x algorithm):
//!
//! 1. **The service**: a fresh database and a role-separated deployment (a LIS process per
//!    site, the NIS, the GIS and a planner process with the scenario's planners, talking HTTP)
//!    with the run's method and policy, `w_interval_s` and lease of the scenario. The run's
//!    requests are POSTed in real time: request `i` leaves `submitted_at(i) - submitted_at(0)`
//!    seconds after the start, its `not_before` and `deadline` shifted by the same amount, so
//!    the service sees the simulated workload on its own clock. Times in a validation scenario
//!    are therefore compressed: its `[workload] durations_s` and `w_interval_s` are the paper's
//!    divided by a factor the scenario states (its offered load is unchanged by that).
//! 2. **Calibration**: the planner process's `/metrics` histograms of its participant calls
//!    (`coreserve_participant_call_seconds`, by kind and message) give each message type's
//!    mean latency over all service runs; the simulator's service times become uniform ranges
//!    `[0.5 m, 1.5 m]` around those means.
//! 3. **The simulator**: the same requests, grid and seeds, with the calibrated service times.
//!
//! Written to `OUT`: `validation.md` (per algorithm: success rate, average cost, messages per
//! plan and planning time, service vs simulator, means with 95 % confidence intervals over the
//! seeds, and whether the intervals overlap), `validation-service-runs.csv` and
//! `validation-simulator-runs.csv` (one row per run, as `runs.csv`) and `service-times.toml` (the calibrated `[service_times]`, to paste into a scenario).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use chrono::{DateTime, SecondsFormat, Utc};
use coreserve::check::check_outcomes;
use coreserve::grid::save_grid;
use coreserve::model::{Grid, Outcome, OutcomeStatus, PlanRequest, Time};
use coreserve::store::PlanStatus;
use coreserve::workload::generate;
use coreserve_loadtest::database::Databases;
use coreserve_loadtest::deploy::{wait_ready, Mode, Procs};

use crate::algorithm::Algorithm;
use crate::report::{ci95_half_width, write_runs_csv, RunRow};
use crate::run::{simulate, RunKey};
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

/// The simulator's service times from measured latencies: a uniform range `[0.5 m, 1.5 m]`
/// around each message type's mean `m`; a type never measured keeps `fallback`'s range.
fn calibrate(lat: &Latencies, fallback: &ServiceTimes) -> ServiceTimes {
    let mean = |pairs: &[(&str, &str)]| {
        let l = pairs
            .iter()
            .filter_map(|(p, m)| lat.get(&(p.to_string(), m.to_string())))
            .fold(Latency::default(), |a, b| Latency { sum_s: a.sum_s + b.sum_s, count: a.count + b.count });
        l.mean()
    };
    let range = |m: Option<f64>, fb: (f64, f64)| m.map_or(fb, |m| (0.5 * m, 1.5 * m));
    ServiceTimes {
        availability: range(mean(&[("nis", "query")]), fallback.availability),
        free_slot: range(mean(&[("lis", "query")]), fallback.free_slot),
        hold: range(mean(&[("lis", "prepare"), ("nis", "prepare")]), fallback.hold),
        commit: range(mean(&[("lis", "commit"), ("nis", "commit")]), fallback.commit),
        cancel: range(
            mean(&[("lis", "abort"), ("nis", "abort"), ("lis", "release"), ("nis", "release")]),
            fallback.cancel,
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

/// One service run: deploys, replays `requests` in real time, returns their outcomes (placements
/// shifted back to the requests' timeline) and adds the planner's call latencies to `lat`.
async fn service_run(
    svc: &Service,
    dbs: &Databases,
    s: &Scenario,
    grid: (&Grid, &Path),
    algorithm: Algorithm,
    requests: &[PlanRequest],
    lat: &mut Latencies,
) -> Result<Vec<Outcome>> {
    let db = dbs.create("validate").await?;
    let (admin, service) = (format!("admin-{}", uuid()), format!("service-{}", uuid()));
    let common: Vec<String> = [
        ("--w-interval-s", s.w_interval_s.to_string()),
        ("--lease-s", s.lease_s().to_string()),
        ("--method", algorithm.method.to_string()),
        ("--policy", algorithm.policy.to_string()),
        ("--planners", s.planners.to_string()),
        ("--routing", s.routing.clone()),
    ]
    .into_iter()
    .flat_map(|(k, v)| [k.to_owned(), v])
    .collect();
    let mut procs = Procs::new(&svc.bin, &db, &admin, &service, &common);
    let url = procs.deploy(Mode::Roles, grid.0, grid.1)?;
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

/// Runs the validation (see the module docs) and writes its files into `out`.
///
/// # Errors
/// PostgreSQL or the service cannot be reached or started; a request is not answered `201`;
/// the outcome checker finds a violation in either side's outcomes; a file cannot be written.
pub fn validate(s: &Scenario, svc: &Service, cpus: &[u32], out: &Path) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let dbs = Databases::new(&svc.postgres);
    let dir = tempfile::tempdir()?;
    let mut lat = Latencies::new();
    // (key, grid, requests, the service's outcomes) of every run.
    let mut runs = Vec::new();
    for topology in &s.topologies {
        for seed in s.run_seeds() {
            let grid = s.grid(topology, seed)?;
            let path = dir.path().join(format!("{}-{seed}.json", Scenario::topology_label(topology)));
            save_grid(&grid, &path)?;
            for kind in &s.kinds {
                for &load in &s.loads {
                    let params = s.workload_params(*kind, load, seed);
                    let requests = generate(cpus, grid.total_cpus(), &params)?;
                    for &algorithm in &s.algorithms {
                        let key = RunKey {
                            topology: Scenario::topology_label(topology),
                            kind: kind.to_string(),
                            algorithm,
                            load,
                            seed,
                        };
                        eprintln!("service: {key:?}");
                        let outcomes = rt
                            .block_on(service_run(svc, &dbs, s, (&grid, &path), algorithm, &requests, &mut lat))
                            .with_context(|| format!("service run {key:?}"))?;
                        let violations = check_outcomes(&grid, &requests, &outcomes, s.w_interval_s);
                        if let Some(v) = violations.first() {
                            bail!(
                                "{key:?}: the service's outcomes break a rule ({} violations), first: {v}",
                                violations.len()
                            );
                        }
                        runs.push((key, grid.clone(), requests.clone(), outcomes));
                    }
                }
            }
        }
    }
    rt.block_on(dbs.drop_all())?;

    let calibrated = calibrate(&lat, &s.service_times);
    let sim = Scenario { service_times: calibrated.clone(), ..s.clone() };
    let mut rows = Vec::new();
    for (key, grid, requests, outcomes) in &runs {
        let (sim_row, _) = simulate(&sim, key, grid, requests)?;
        rows.push(ValidationRow { side: "service", run: RunRow::of(key, grid, requests, outcomes, s.warmup_requests) });
        rows.push(ValidationRow { side: "simulator", run: sim_row });
    }
    for side in ["service", "simulator"] {
        let side_rows: Vec<RunRow> = rows.iter().filter(|r| r.side == side).map(|r| r.run.clone()).collect();
        write_runs_csv(&side_rows, &out.join(format!("validation-{side}-runs.csv")))?;
    }
    std::fs::write(out.join("service-times.toml"), service_times_toml(&calibrated, &lat))?;
    std::fs::write(out.join("validation.md"), report(s, &rows, &calibrated))?;
    Ok(())
}

/// The calibrated `[service_times]` table, with the measured means as comments.
fn service_times_toml(t: &ServiceTimes, lat: &Latencies) -> String {
    let mut s = String::from("# Measured mean latency of the planner's participant calls (seconds, calls):\n");
    for ((p, m), l) in lat {
        if let Some(mean) = l.mean() {
            let _ = writeln!(s, "#   {p} {m}: {mean:.6} s over {} calls", l.count);
        }
    }
    s.push_str("[service_times]\n");
    for (name, (lo, hi)) in [
        ("availability", t.availability),
        ("free_slot", t.free_slot),
        ("hold", t.hold),
        ("commit", t.commit),
        ("cancel", t.cancel),
    ] {
        let _ = writeln!(s, "{name} = [{lo:.6}, {hi:.6}]");
    }
    s
}

/// Mean and 95 % CI of one metric over a group's runs, formatted.
fn cell(values: &[f64], digits: usize) -> (String, (f64, f64)) {
    let (m, h) = ci95_half_width(values);
    (format!("{m:.digits$} ± {h:.digits$}"), (m - h, m + h))
}

/// A service-time range in milliseconds.
fn ms((lo, hi): (f64, f64)) -> String {
    format!("{:.3}-{:.3}", lo * 1e3, hi * 1e3)
}

/// A compared metric: its name, its value in a run, the digits shown.
type Metric = (&'static str, fn(&RunRow) -> f64, usize);

/// validation.md's table: one line per algorithm and metric.
fn report(s: &Scenario, rows: &[ValidationRow], t: &ServiceTimes) -> String {
    let mut md = format!(
        "Scenario `{}`: {} requests per run, seeds {}..={}, loads {:?}, w_interval {} s, lease {} s, {} planners.\n\n\
         Calibrated service times (uniform ranges, ms): availability {}, free slot {}, hold {}, commit {}, \
         cancel {}.\n\n\
         | algorithm | metric | service | simulator | intervals overlap |\n|---|---|---|---|---|\n",
        s.name,
        s.requests,
        s.seed_offset + 1,
        s.seed_offset + s.seeds,
        s.loads,
        s.w_interval_s,
        s.lease_s(),
        s.planners,
        ms(t.availability),
        ms(t.free_slot),
        ms(t.hold),
        ms(t.commit),
        ms(t.cancel)
    );
    let metrics: [Metric; 4] = [
        ("success rate", |r| r.success_rate, 3),
        ("average cost per CPU-hour", |r| r.mean_cost, 3),
        ("messages per plan", |r| r.messages as f64 / r.requests.max(1) as f64, 1),
        ("planning time per plan (s)", |r| r.planning_s_mean, 3),
    ];
    for &algorithm in &s.algorithms {
        for (name, f, digits) in metrics {
            let side = |side: &str| -> Vec<f64> {
                rows.iter().filter(|r| r.side == side && r.run.algorithm == algorithm).map(|r| f(&r.run)).collect()
            };
            let (a, (alo, ahi)) = cell(&side("service"), digits);
            let (b, (blo, bhi)) = cell(&side("simulator"), digits);
            let overlap = if alo <= bhi && blo <= ahi { "yes" } else { "**no**" };
            let _ = writeln!(md, "| {algorithm} | {name} | {a} | {b} | {overlap} |");
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
        let t = calibrate(&lat, &ServiceTimes::default());
        assert_eq!(t.free_slot, (0.0005, 0.0015));
        assert_eq!(t.hold, (0.001, 0.003), "prepares of both kinds: mean 2 ms");
        assert_eq!(t.commit, ServiceTimes::default().commit, "never measured: the scenario's range");
    }
}
