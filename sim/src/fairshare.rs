//! `experiment = "fairshare"` (`sim/scenarios/fairshare.toml`): the measurement of Planned-Use
//! fair share (seed 002: Nakajima, Iwata, Sekizawa, Uno & Yamamoto, *A proposal of a
//! fair-share function based on allocated resource amounts*; sim/RESULTS.md, "Planned-Use fair
//! share (seed 002)") with the production planner, ledger and dispatch.
//!
//! Two projects share the grid, each with the same allocation: the planned use of `steady`
//! (its offered load `steady_load` x the grid's CPUs x the allocation period) plus `margin`.
//!
//! * `steady` books at its planned pace all along the run: the generator's Poisson stream at
//!   offered load `steady_load` over `days` virtual days.
//! * `flood` is idle until `flood_from_day`, then floods the grid to the end of the run: the
//!   generator's stream at the scenario's `loads` (one point per load, e.g. 2.0 = twice the
//!   grid). Over its pace, its usage index `u_i` climbs past 1 and its priority drops below
//!   steady's (0) -- after days, since `u_i` decays by the paper's `D = 10^(-1/15)` per day
//!   and counts a job only once it has started.
//!
//! Every (topology, kind, flood load, seed) workload is drawn once and planned by every arm
//! ([`Arm`]) on the same grid with the same planner, dispatch and latency streams: `fcfs`
//! (no fair share), `planned-use` (priority order in an admission window of `window_s`, and
//! the allocation limit per `period_days`), `planned-use-no-limit` (the same with `overdraft`
//! on both projects: the priority alone) and `planned-use-daily` (the same pace allocated per
//! day: the limit as a cap on each day's bookings).
//!
//! Measured per arm, project and phase (`before` the flood, during the `flood`): requests,
//! success rate, mean start delay of the committed plans (plan start minus `submitted_at`,
//! seconds), the share of the grid the project's committed jobs use in the phase, the
//! rejections by the allocation limit and by `w_interval`, and both projects' `u_i` and `p_i`
//! at the end of the run (from a ledger of the committed plans, the same quantities the
//! planned-use arms decide by; for `fcfs` what they would be). Per day, the same per project
//! (`daily.csv`). Outputs: `runs.csv`, `summary.csv` (mean and 95 % CI over seeds),
//! `daily.csv` (means over seeds) and `fairshare.md`. Every run must pass the outcome checker,
//! and the arms with an allocation limit the allocation checker (`check::check_allocations`).

use std::collections::HashMap;
use std::fmt;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use coreserve::check::check_allocations;
use coreserve::fairshare::{Allocation, FairShareConfig, Ledger, Project, Usage, DAY_S};
use coreserve::model::{from_time, to_time, Grid, Outcome, OutcomeStatus, PlanRequest, Time};
use coreserve::workload::{generate, AppKind, WorkloadParams};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use serde::{Deserialize, Serialize, Serializer};

use crate::algorithm::Algorithm;
use crate::report::{ci95_half_width, fixed, write_csv};
use crate::run::{simulate_with, FairShare, RunKey};
use crate::scenario::Scenario;

/// The project that books at its planned pace, and the one that floods.
pub const STEADY: &str = "steady";
pub const FLOOD: &str = "flood";

/// Stream salt of the flood's workload (docs/simulator.md, random streams).
const FLOOD_SEED: u64 = 0x666c_6f6f_6400_0000;

/// How requests are taken (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arm {
    /// First come, first served (`fair_share: None`).
    Fcfs,
    /// Planned-Use priority in admission windows, and the allocation limit.
    PlannedUse,
    /// The priority only: both allocations allow `overdraft`.
    PlannedUseNoLimit,
    /// As `planned-use` with allocation periods of one day (the same pace): the limit as a cap
    /// on each day's bookings.
    PlannedUseDaily,
}

impl Arm {
    pub const ALL: [Arm; 4] = [Arm::Fcfs, Arm::PlannedUse, Arm::PlannedUseNoLimit, Arm::PlannedUseDaily];
}

impl fmt::Display for Arm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arm::Fcfs => "fcfs",
            Arm::PlannedUse => "planned-use",
            Arm::PlannedUseNoLimit => "planned-use-no-limit",
            Arm::PlannedUseDaily => "planned-use-daily",
        })
    }
}

impl Serialize for Arm {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Before the flood, or during it (by a request's `submitted_at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    Before,
    Flood,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Before => "before",
            Phase::Flood => "flood",
        })
    }
}

impl Serialize for Phase {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The scenario's `[fairshare]` table (every field optional).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FairShareParams {
    /// Length of the run (arrivals), virtual days. Default 30.
    pub days: f64,
    /// When `flood` starts, days from the run's start (it floods to the end). Default 10.
    pub flood_from_day: f64,
    /// Offered load of `steady` over the whole run: its planned pace. Default 0.4.
    pub steady_load: f64,
    /// Both allocations are `steady_load` x the grid's CPUs x the period, plus this share.
    /// Default 0.2.
    pub margin: f64,
    /// The allocation period, days, from the run's start. Default: the whole run (one
    /// period, the paper's set-up: the flood is a project that saved its allocation).
    pub period_days: Option<f64>,
    /// The planned-use arms' admission window, seconds. Default 600.
    pub window_s: i64,
    /// The arms to run. Default all four.
    pub arms: Vec<Arm>,
}

impl Default for FairShareParams {
    fn default() -> Self {
        FairShareParams {
            days: 30.0,
            flood_from_day: 10.0,
            steady_load: 0.4,
            margin: 0.2,
            period_days: None,
            window_s: 600,
            arms: Arm::ALL.to_vec(),
        }
    }
}

/// Whole seconds of `days` days.
fn seconds(days: f64) -> i64 {
    (days * DAY_S as f64).round() as i64
}

impl FairShareParams {
    /// Checks the ranges.
    ///
    /// # Errors
    /// The first field out of range.
    pub fn validate(&self) -> Result<()> {
        if !(self.days.is_finite() && self.days > 0.0 && seconds(self.days) > 0) {
            bail!("days must be > 0");
        }
        if !(self.flood_from_day > 0.0 && self.flood_from_day < self.days) {
            bail!("flood_from_day must be inside the run: 0 < flood_from_day < days ({})", self.days);
        }
        if !(self.steady_load.is_finite() && self.steady_load > 0.0) {
            bail!("steady_load must be > 0");
        }
        if !(self.margin.is_finite() && self.margin >= 0.0) {
            bail!("margin must be >= 0");
        }
        if self.period_days.is_some_and(|p| !(p.is_finite() && seconds(p) > 0)) {
            bail!("period_days must be > 0");
        }
        if self.window_s < 0 {
            bail!("window_s must be >= 0");
        }
        if self.arms.is_empty() {
            bail!("arms must not be empty");
        }
        Ok(())
    }

    /// The allocation period, seconds.
    pub fn period_s(&self) -> i64 {
        seconds(self.period_days.unwrap_or(self.days))
    }

    /// CPU-hours per period of `period_s` of either project on a grid of `grid_cpus` CPUs.
    pub fn allocation_cpu_hours(&self, grid_cpus: u64, period_s: i64) -> f64 {
        self.steady_load * grid_cpus as f64 * period_s as f64 / 3600.0 * (1.0 + self.margin)
    }

    /// A ledger with both projects as `arm` sets them (the paper's decay and interval),
    /// periods from `start`. `fcfs` gets `planned-use`'s (what its plans would be judged by).
    pub fn ledger(&self, grid_cpus: u64, start: Time, arm: Arm) -> Arc<Ledger> {
        let ledger = Ledger::new(FairShareConfig::default(), grid_cpus);
        let period_s = if arm == Arm::PlannedUseDaily { DAY_S } else { self.period_s() };
        for id in [STEADY, FLOOD] {
            let allocation = Allocation {
                cpu_hours: self.allocation_cpu_hours(grid_cpus, period_s),
                gpu_hours: None,
                period_s,
                period_start: from_time(start),
                overdraft: arm == Arm::PlannedUseNoLimit,
            };
            ledger
                .set_project(Project { id: id.into(), allocation, members: vec![id.into()] })
                .expect("validated allocations");
        }
        Arc::new(ledger)
    }
}

/// One run's requests and its phases.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Both projects' requests by arrival (then id).
    pub requests: Vec<PlanRequest>,
    pub start: Time,
    pub flood_start: Time,
    /// The end of the run's arrivals (and of the flood).
    pub end: Time,
}

impl Workload {
    /// The phase of an arrival at `t`.
    pub fn phase(&self, t: Time) -> Phase {
        if t < self.flood_start {
            Phase::Before
        } else {
            Phase::Flood
        }
    }

    /// `[from, to)` of `phase`.
    pub fn span(&self, phase: Phase) -> (Time, Time) {
        match phase {
            Phase::Before => (self.start, self.flood_start),
            Phase::Flood => (self.flood_start, self.end),
        }
    }
}

/// `project`'s requests: the generator's stream (`base` with `load`, `seed`) from `from`,
/// those arriving before `until`, each with user `project` and id `PROJECT-NNNNNN`.
fn project_requests(
    cpus: &[u32],
    grid_cpus: u64,
    base: &WorkloadParams,
    project: &str,
    load: f64,
    seed: u64,
    (from, until): (Time, Time),
) -> Result<Vec<PlanRequest>> {
    // The stream is drawn for a number of requests; draw more until it reaches `until`.
    let mut n = 256;
    let drawn = loop {
        let params = WorkloadParams { requests: n, load, seed, start: from, ..base.clone() };
        let drawn = generate(cpus, grid_cpus, &params)?;
        if drawn.last().is_none_or(|r| r.submitted_at() >= until) {
            break drawn;
        }
        if n >= 1 << 24 {
            bail!("project {project}: over {n} requests to fill the run");
        }
        n *= 2;
    };
    drawn
        .into_iter()
        .filter(|r| r.submitted_at() < until)
        .map(|r| {
            let mut raw = r.raw().clone();
            raw.id = format!("{project}-{}", raw.id.trim_start_matches("req-"));
            raw.user = project.into();
            PlanRequest::new(raw).with_context(|| format!("renaming a request of {project}"))
        })
        .collect()
}

/// The workload of one run: `steady` at its pace over the whole run, `flood` at `flood_load`
/// from `flood_from_day` (its own stream), on a grid of `grid_cpus` CPUs.
///
/// # Errors
/// The generator's.
pub fn workload(
    s: &Scenario,
    cpus: &[u32],
    grid_cpus: u64,
    kind: AppKind,
    flood_load: f64,
    seed: u64,
) -> Result<Workload> {
    let p = &s.fairshare;
    let start = s.workload.start;
    let (flood_start, end) = (start + seconds(p.flood_from_day), start + seconds(p.days));
    let base = WorkloadParams { kind, w_interval_s: s.w_interval_s, users: 1, ..s.workload.clone() };
    let mut requests = project_requests(cpus, grid_cpus, &base, STEADY, p.steady_load, seed, (start, end))?;
    requests.extend(project_requests(
        cpus,
        grid_cpus,
        &base,
        FLOOD,
        flood_load,
        seed ^ FLOOD_SEED,
        (flood_start, end),
    )?);
    requests.sort_by(|a, b| (a.submitted_at(), a.id()).cmp(&(b.submitted_at(), b.id())));
    Ok(Workload { requests, start, flood_start, end })
}

/// One run's figures for one project and phase: a line of `runs.csv`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FairRow {
    pub topology: String,
    pub kind: String,
    pub algorithm: Algorithm,
    /// The flood's offered load (the scenario's `loads`).
    #[serde(serialize_with = "fixed")]
    pub flood_load: f64,
    pub arm: Arm,
    pub seed: u64,
    pub project: String,
    pub phase: Phase,
    /// Requests that arrived in the phase.
    pub requests: u64,
    pub committed: u64,
    #[serde(serialize_with = "fixed")]
    pub success_rate: f64,
    /// Mean plan start minus `submitted_at` over the committed requests, seconds (0 when none).
    #[serde(serialize_with = "fixed")]
    pub start_delay_s: f64,
    /// Requested CPU-seconds per second of the phase over the grid's CPUs.
    #[serde(serialize_with = "fixed")]
    pub offered_load: f64,
    /// CPU-seconds of the project's committed jobs inside the phase (whenever they were
    /// requested) over the grid's CPU-seconds in the phase.
    #[serde(serialize_with = "fixed")]
    pub used_share: f64,
    /// Rejected by the allocation limit ("allocation exceeded").
    pub rejected_allocation: u64,
    /// Rejected because planning (queueing included) took longer than `w_interval`.
    pub rejected_time_limit: u64,
    /// Any other rejection (no plan before the deadline, mostly).
    pub rejected_other: u64,
    /// The project's `u_i` and `p_i` at the end of the run (the same on both phases' rows).
    #[serde(serialize_with = "fixed")]
    pub usage_index_end: f64,
    #[serde(serialize_with = "fixed")]
    pub priority_end: f64,
}

/// Column names of `runs.csv`: the fields of [`FairRow`].
pub const RUNS_HEADER: [&str; 19] = [
    "topology",
    "kind",
    "algorithm",
    "flood_load",
    "arm",
    "seed",
    "project",
    "phase",
    "requests",
    "committed",
    "success_rate",
    "start_delay_s",
    "offered_load",
    "used_share",
    "rejected_allocation",
    "rejected_time_limit",
    "rejected_other",
    "usage_index_end",
    "priority_end",
];

/// One run's day of one project (`daily.csv` averages these over seeds).
#[derive(Debug, Clone, PartialEq)]
pub struct DayRow {
    pub topology: String,
    pub kind: String,
    pub algorithm: Algorithm,
    pub flood_load: f64,
    pub arm: Arm,
    pub seed: u64,
    pub project: String,
    /// Days since the run's start.
    pub day: u64,
    pub requests: u64,
    pub committed: u64,
    /// CPU-seconds of the project's committed jobs inside the day over the grid's.
    pub used_share: f64,
    /// `u_i` and `p_i` at the end of the day.
    pub usage_index: f64,
    pub priority: f64,
}

/// CPU-seconds of `u` inside `[a, b)`.
fn cpu_s_inside(u: &Usage, a: Time, b: Time) -> f64 {
    (u.end.min(b) - u.start.max(a)).max(0) as f64 * f64::from(u.cpus)
}

/// The plan start of a committed outcome: its `start`, else its earliest job.
fn plan_start(o: &Outcome) -> Option<Time> {
    o.start.as_ref().map(to_time).or_else(|| o.jobs.iter().map(|j| to_time(&j.start)).min())
}

/// What the runs share of a run's key.
struct RunId<'a> {
    key: &'a RunKey,
    arm: Arm,
}

/// Judges one run: its rows (per project and phase) and its days. `ledger` is the run's own
/// (planned-use arms): the end-of-run `u_i` recomputed from the committed plans must match it.
fn measure(
    p: &FairShareParams,
    id: &RunId<'_>,
    grid_cpus: u64,
    w: &Workload,
    outcomes: &[Outcome],
    ledger: Option<&Ledger>,
) -> Result<(Vec<FairRow>, Vec<DayRow>)> {
    let requests = &w.requests;
    // The ledger of the committed plans: every arm's u_i and p_i (what planned-use decides by).
    let book = p.ledger(grid_cpus, w.start, Arm::PlannedUseNoLimit);
    let mut usage: HashMap<&str, Vec<Usage>> = HashMap::new();
    for (i, (r, o)) in requests.iter().zip(outcomes).enumerate() {
        if o.status == OutcomeStatus::Committed {
            let u = Usage::of_outcome(o);
            usage.entry(r.user()).or_default().extend(u.iter().copied());
            book.record(&i.to_string(), r.user(), u);
        }
    }
    let index = |project: &str, at: Time| {
        let rep = book.report(project, at);
        (rep.usage_index.unwrap_or(f64::INFINITY), rep.priority.unwrap_or(f64::NEG_INFINITY))
    };
    if let Some(l) = ledger {
        for project in [STEADY, FLOOD] {
            let (mine, theirs) =
                (index(project, w.end).0, l.report(project, w.end).usage_index.unwrap_or(f64::INFINITY));
            if (mine - theirs).abs() > 1e-9 * mine.abs().max(1.0) {
                bail!(
                    "{:?}, arm {}: {project}'s u_i from the committed plans {mine} != the run's ledger {theirs}",
                    id.key,
                    id.arm
                );
            }
        }
    }
    let used = |project: &str, a: Time, b: Time| {
        usage.get(project).map_or(0.0, |us| us.iter().map(|u| cpu_s_inside(u, a, b)).sum::<f64>())
            / (grid_cpus as f64 * (b - a) as f64)
    };
    let key = id.key;
    let mut rows = Vec::new();
    for project in [STEADY, FLOOD] {
        let (u_end, p_end) = index(project, w.end);
        for phase in [Phase::Before, Phase::Flood] {
            let (a, b) = w.span(phase);
            let mine: Vec<usize> = (0..requests.len())
                .filter(|&i| requests[i].user() == project && w.phase(requests[i].submitted_at()) == phase)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let committed: Vec<usize> =
                mine.iter().copied().filter(|&i| outcomes[i].status == OutcomeStatus::Committed).collect();
            let delays: Vec<f64> = committed
                .iter()
                .map(|&i| {
                    let start = plan_start(&outcomes[i]).expect("a committed plan has jobs");
                    (start - requests[i].submitted_at()) as f64
                })
                .collect();
            let reason_starts = |prefix: &str| {
                mine.iter()
                    .filter(|&&i| {
                        outcomes[i].status != OutcomeStatus::Committed
                            && outcomes[i].reason.as_deref().is_some_and(|r| r.starts_with(prefix))
                    })
                    .count() as u64
            };
            let n = mine.len() as u64;
            let (rejected_allocation, rejected_time_limit) =
                (reason_starts("allocation exceeded"), reason_starts("planning took longer than w_interval"));
            rows.push(FairRow {
                topology: key.topology.clone(),
                kind: key.kind.clone(),
                algorithm: key.algorithm,
                flood_load: key.load,
                arm: id.arm,
                seed: key.seed,
                project: project.into(),
                phase,
                requests: n,
                committed: committed.len() as u64,
                success_rate: committed.len() as f64 / n as f64,
                start_delay_s: if delays.is_empty() { 0.0 } else { delays.iter().sum::<f64>() / delays.len() as f64 },
                offered_load: mine.iter().map(|&i| requests[i].cpu_seconds()).sum::<f64>()
                    / (grid_cpus as f64 * (b - a) as f64),
                used_share: used(project, a, b),
                rejected_allocation,
                rejected_time_limit,
                rejected_other: n - committed.len() as u64 - rejected_allocation - rejected_time_limit,
                usage_index_end: u_end,
                priority_end: p_end,
            });
        }
    }
    let mut days = Vec::new();
    let n_days = (w.end - w.start + DAY_S - 1) / DAY_S;
    for project in [STEADY, FLOOD] {
        for day in 0..n_days {
            let (a, b) = (w.start + day * DAY_S, (w.start + (day + 1) * DAY_S).min(w.end));
            let mine: Vec<usize> = (0..requests.len())
                .filter(|&i| requests[i].user() == project && (a..b).contains(&requests[i].submitted_at()))
                .collect();
            let (usage_index, priority) = index(project, b);
            days.push(DayRow {
                topology: key.topology.clone(),
                kind: key.kind.clone(),
                algorithm: key.algorithm,
                flood_load: key.load,
                arm: id.arm,
                seed: key.seed,
                project: project.into(),
                day: day as u64,
                requests: mine.len() as u64,
                committed: mine.iter().filter(|&&i| outcomes[i].status == OutcomeStatus::Committed).count() as u64,
                used_share: used(project, a, b),
                usage_index,
                priority,
            });
        }
    }
    Ok((rows, days))
}

/// A point of `summary.csv`: one (topology, kind, algorithm, flood load, arm, project, phase)
/// over seeds; `_ci95` the half-width of the 95 % confidence interval (Student's t).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FairSummary {
    pub topology: String,
    pub kind: String,
    pub algorithm: Algorithm,
    #[serde(serialize_with = "fixed")]
    pub flood_load: f64,
    pub arm: Arm,
    pub project: String,
    pub phase: Phase,
    pub runs: u64,
    #[serde(serialize_with = "fixed")]
    pub requests_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub offered_load_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub success_rate_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub success_rate_ci95: f64,
    /// Over the runs that committed something in the phase.
    #[serde(serialize_with = "fixed")]
    pub start_delay_s_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub start_delay_s_ci95: f64,
    #[serde(serialize_with = "fixed")]
    pub used_share_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub used_share_ci95: f64,
    /// Shares of the group's requests rejected by the allocation limit and by `w_interval`.
    #[serde(serialize_with = "fixed")]
    pub rejected_allocation_share: f64,
    #[serde(serialize_with = "fixed")]
    pub rejected_time_limit_share: f64,
    #[serde(serialize_with = "fixed")]
    pub usage_index_end_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub usage_index_end_ci95: f64,
    #[serde(serialize_with = "fixed")]
    pub priority_end_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub priority_end_ci95: f64,
}

/// Column names of `summary.csv`: the fields of [`FairSummary`].
pub const SUMMARY_HEADER: [&str; 22] = [
    "topology",
    "kind",
    "algorithm",
    "flood_load",
    "arm",
    "project",
    "phase",
    "runs",
    "requests_mean",
    "offered_load_mean",
    "success_rate_mean",
    "success_rate_ci95",
    "start_delay_s_mean",
    "start_delay_s_ci95",
    "used_share_mean",
    "used_share_ci95",
    "rejected_allocation_share",
    "rejected_time_limit_share",
    "usage_index_end_mean",
    "usage_index_end_ci95",
    "priority_end_mean",
    "priority_end_ci95",
];

/// A line of `daily.csv`: one day of one project, means over seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DaySummary {
    pub topology: String,
    pub kind: String,
    pub algorithm: Algorithm,
    #[serde(serialize_with = "fixed")]
    pub flood_load: f64,
    pub arm: Arm,
    pub project: String,
    pub day: u64,
    pub runs: u64,
    #[serde(serialize_with = "fixed")]
    pub requests_mean: f64,
    /// Committed over requests of all the seeds' day.
    #[serde(serialize_with = "fixed")]
    pub success_rate: f64,
    #[serde(serialize_with = "fixed")]
    pub used_share_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub usage_index_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub priority_mean: f64,
}

/// Column names of `daily.csv`: the fields of [`DaySummary`].
pub const DAILY_HEADER: [&str; 13] = [
    "topology",
    "kind",
    "algorithm",
    "flood_load",
    "arm",
    "project",
    "day",
    "runs",
    "requests_mean",
    "success_rate",
    "used_share_mean",
    "usage_index_mean",
    "priority_mean",
];

/// The group of a row without its seed (and phase or day).
type Group<'a> = (&'a str, &'a str, Algorithm, f64, Arm, &'a str);

fn cmp_group(a: Group<'_>, b: Group<'_>) -> std::cmp::Ordering {
    a.0.cmp(b.0)
        .then_with(|| a.1.cmp(b.1))
        .then_with(|| a.2.cmp(&b.2))
        .then(a.3.total_cmp(&b.3))
        .then(a.4.cmp(&b.4))
        .then_with(|| project_order(a.5).cmp(&project_order(b.5)))
}

/// Steady first.
fn project_order(p: &str) -> (bool, &str) {
    (p != STEADY, p)
}

fn group(r: &FairRow) -> Group<'_> {
    (&r.topology, &r.kind, r.algorithm, r.flood_load, r.arm, &r.project)
}

fn day_group(r: &DayRow) -> Group<'_> {
    (&r.topology, &r.kind, r.algorithm, r.flood_load, r.arm, &r.project)
}

/// Rows sorted by (topology, kind, algorithm, flood load, arm, project, phase, seed).
fn sorted(rows: &[FairRow]) -> Vec<&FairRow> {
    let mut v: Vec<&FairRow> = rows.iter().collect();
    v.sort_by(|a, b| cmp_group(group(a), group(b)).then(a.phase.cmp(&b.phase)).then(a.seed.cmp(&b.seed)));
    v
}

/// Groups the runs over seeds.
pub fn summarise(rows: &[FairRow]) -> Vec<FairSummary> {
    let mut out = Vec::new();
    for g in sorted(rows).chunk_by(|a, b| cmp_group(group(a), group(b)).is_eq() && a.phase == b.phase) {
        let f = g[0];
        let all = |v: fn(&FairRow) -> f64| ci95_half_width(&g.iter().map(|r| v(r)).collect::<Vec<_>>());
        let (start_delay_s_mean, start_delay_s_ci95) =
            ci95_half_width(&g.iter().filter(|r| r.committed > 0).map(|r| r.start_delay_s).collect::<Vec<_>>());
        let requests: u64 = g.iter().map(|r| r.requests).sum();
        let share = |v: fn(&FairRow) -> u64| g.iter().map(|r| v(r)).sum::<u64>() as f64 / requests.max(1) as f64;
        let (success_rate_mean, success_rate_ci95) = all(|r| r.success_rate);
        let (used_share_mean, used_share_ci95) = all(|r| r.used_share);
        let (usage_index_end_mean, usage_index_end_ci95) = all(|r| r.usage_index_end);
        let (priority_end_mean, priority_end_ci95) = all(|r| r.priority_end);
        out.push(FairSummary {
            topology: f.topology.clone(),
            kind: f.kind.clone(),
            algorithm: f.algorithm,
            flood_load: f.flood_load,
            arm: f.arm,
            project: f.project.clone(),
            phase: f.phase,
            runs: g.len() as u64,
            requests_mean: requests as f64 / g.len() as f64,
            offered_load_mean: all(|r| r.offered_load).0,
            success_rate_mean,
            success_rate_ci95,
            start_delay_s_mean,
            start_delay_s_ci95,
            used_share_mean,
            used_share_ci95,
            rejected_allocation_share: share(|r| r.rejected_allocation),
            rejected_time_limit_share: share(|r| r.rejected_time_limit),
            usage_index_end_mean,
            usage_index_end_ci95,
            priority_end_mean,
            priority_end_ci95,
        });
    }
    out
}

/// Groups the days over seeds.
pub fn summarise_days(rows: &[DayRow]) -> Vec<DaySummary> {
    let mut v: Vec<&DayRow> = rows.iter().collect();
    v.sort_by(|a, b| cmp_group(day_group(a), day_group(b)).then(a.day.cmp(&b.day)).then(a.seed.cmp(&b.seed)));
    let mut out = Vec::new();
    for g in v.chunk_by(|a, b| cmp_group(day_group(a), day_group(b)).is_eq() && a.day == b.day) {
        let f = g[0];
        let n = g.len() as f64;
        let mean = |v: fn(&DayRow) -> f64| g.iter().map(|r| v(r)).sum::<f64>() / n;
        let requests: u64 = g.iter().map(|r| r.requests).sum();
        let committed: u64 = g.iter().map(|r| r.committed).sum();
        out.push(DaySummary {
            topology: f.topology.clone(),
            kind: f.kind.clone(),
            algorithm: f.algorithm,
            flood_load: f.flood_load,
            arm: f.arm,
            project: f.project.clone(),
            day: f.day,
            runs: g.len() as u64,
            requests_mean: requests as f64 / n,
            success_rate: if requests == 0 { 0.0 } else { committed as f64 / requests as f64 },
            used_share_mean: mean(|r| r.used_share),
            usage_index_mean: mean(|r| r.usage_index),
            priority_mean: mean(|r| r.priority),
        });
    }
    out
}

/// `mean ± ci` with `d` decimals.
fn pm(mean: f64, ci: f64, d: usize) -> String {
    format!("{mean:.d$} ± {ci:.d$}")
}

/// The summary as Markdown: per (topology, kind, algorithm, flood load) the table of arms,
/// projects and phases, then steady's days.
pub fn markdown(s: &Scenario, grid_cpus: &[u64], summary: &[FairSummary], days: &[DaySummary]) -> String {
    let p = &s.fairshare;
    let cpus = grid_cpus.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    let mut md = format!(
        "# Planned-Use fair share (seed 002): scenario `{}`\n\n\
         Written by `coreserve-sim` (experiment `fairshare`). {} virtual days; `steady` books at \
         offered load {} all along, `flood` is idle until day {} and then floods at the offered \
         load of each table. Both projects have the same allocation: {} x the grid's CPUs ({}) x \
         {} days x {} CPU-hours per period of {} days from the run's start. `planned-use`: \
         priority by `p_i` (paper's `D` per day, `dt` one day) in admission windows of {} s, and \
         the allocation limit; `planned-use-no-limit`: the same with `overdraft` (the priority \
         alone); `planned-use-daily`: the same pace allocated per day (the limit caps each \
         day); `fcfs`: first come, first served. Mean ± 95 % CI half-width over {} seeds. \
         Phase: when the requests \
         arrived. Start delay: plan start minus `submitted_at`, hours, over the runs that \
         committed something. Used: the share of the grid's CPU-time the project's committed \
         jobs take in the phase. Rejections: shares of the phase's requests refused by the \
         allocation limit / by `w_interval`. `u_i`, `p_i`: at the end of the run, from the \
         committed plans (for `fcfs` what they would be).\n",
        s.name,
        p.days,
        p.steady_load,
        p.flood_from_day,
        p.steady_load,
        cpus,
        p.period_s() as f64 / DAY_S as f64,
        1.0 + p.margin,
        p.period_s() as f64 / DAY_S as f64,
        p.window_s,
        s.seeds
    );
    type Point<'a> = (&'a str, &'a str, Algorithm, f64);
    let point = |r: &FairSummary| -> (String, String, Algorithm, u64) {
        (r.topology.clone(), r.kind.clone(), r.algorithm, r.flood_load.to_bits())
    };
    for g in summary.chunk_by(|a, b| point(a) == point(b)) {
        let f = &g[0];
        let here: Point<'_> = (&f.topology, &f.kind, f.algorithm, f.flood_load);
        let _ = write!(
            md,
            "\n## {} / {} / {} / flood load {}\n\n\
             | arm | project | phase | requests | offered load | success | start delay (h) | used | rejected: allocation / w_interval | `u_i` end | `p_i` end |\n\
             |---|---|---|---|---|---|---|---|---|---|---|\n",
            here.0, here.1, here.2, here.3
        );
        for r in g {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.0} | {:.2} | {} | {} | {:.3} | {:.3} / {:.3} | {} | {} |",
                r.arm,
                r.project,
                r.phase,
                r.requests_mean,
                r.offered_load_mean,
                pm(r.success_rate_mean, r.success_rate_ci95, 3),
                pm(r.start_delay_s_mean / 3600.0, r.start_delay_s_ci95 / 3600.0, 2),
                r.used_share_mean,
                r.rejected_allocation_share,
                r.rejected_time_limit_share,
                pm(r.usage_index_end_mean, r.usage_index_end_ci95, 2),
                pm(r.priority_end_mean, r.priority_end_ci95, 2),
            );
        }
        // Steady's days: success and used share per arm, and the flood's u_i.
        let of = |arm: Arm, project: &str| -> Vec<&DaySummary> {
            days.iter()
                .filter(|d| {
                    (d.topology.as_str(), d.kind.as_str(), d.algorithm, d.flood_load) == here
                        && d.arm == arm
                        && d.project == project
                })
                .collect()
        };
        let arms: Vec<Arm> = p.arms.iter().copied().filter(|a| !of(*a, STEADY).is_empty()).collect();
        let names = |what: &str| arms.iter().map(|a| format!("{what} {a}")).collect::<Vec<_>>().join(" | ");
        let _ = write!(
            md,
            "\nBy day (arrivals of the day; `u_i` at its end), means over seeds:\n\n\
             | day | {} | {} | {} |\n|---|{}\n",
            names("steady success"),
            names("steady used"),
            names("flood `u_i`"),
            "---|".repeat(3 * arms.len())
        );
        let n_days = of(arms[0], STEADY).len();
        for day in 0..n_days {
            let mut cells = Vec::new();
            for a in &arms {
                cells.push(format!("{:.3}", of(*a, STEADY)[day].success_rate));
            }
            for a in &arms {
                cells.push(format!("{:.3}", of(*a, STEADY)[day].used_share_mean));
            }
            for a in &arms {
                cells.push(format!("{:.2}", of(*a, FLOOD)[day].usage_index_mean));
            }
            let _ = writeln!(md, "| {day} | {} |", cells.join(" | "));
        }
    }
    md
}

/// Runs the experiment of scenario `s` (CPU counts `cpus`) and writes `runs.csv`,
/// `summary.csv`, `daily.csv` and `fairshare.md` to `out` (and every run's outcomes to
/// `out/outcomes/` with `keep_outcomes`). Returns the number of runs.
///
/// # Errors
/// A grid or workload cannot be built, an output cannot be written, or the outcome checker
/// finds a violation (a bug).
pub fn run(s: &Scenario, cpus: &[u32], out: &Path, keep_outcomes: bool) -> Result<usize> {
    let p = &s.fairshare;
    let mut cells: Vec<(String, Grid, AppKind, f64, u64)> = Vec::new();
    let mut grid_cpus = Vec::new();
    for topology in &s.topologies {
        for seed in s.run_seeds() {
            let grid = s.grid(topology, seed)?;
            if !grid_cpus.contains(&grid.total_cpus()) {
                grid_cpus.push(grid.total_cpus());
            }
            for kind in &s.kinds {
                for &load in &s.loads {
                    cells.push((topology.clone(), grid.clone(), *kind, load, seed));
                }
            }
        }
    }
    let runs = cells.len() * s.algorithms.len() * p.arms.len();
    let bar = ProgressBar::new(runs as u64);
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {elapsed} elapsed, eta {eta}")?);
    let rows = Mutex::new(Vec::new());
    let days = Mutex::new(Vec::new());
    cells.par_iter().try_for_each(|(topology, grid, kind, load, seed)| -> Result<()> {
        let n = grid.total_cpus();
        let w = workload(s, cpus, n, *kind, *load, *seed)?;
        let jobs: Vec<(Algorithm, Arm)> =
            s.algorithms.iter().flat_map(|a| p.arms.iter().map(move |arm| (*a, *arm))).collect();
        jobs.par_iter().try_for_each(|&(algorithm, arm)| -> Result<()> {
            let key = RunKey {
                topology: Scenario::topology_label(topology),
                kind: kind.to_string(),
                algorithm,
                load: *load,
                seed: *seed,
            };
            let fair = match arm {
                Arm::Fcfs => None,
                Arm::PlannedUse | Arm::PlannedUseNoLimit | Arm::PlannedUseDaily => {
                    Some(FairShare { ledger: p.ledger(n, w.start, arm), window_s: p.window_s })
                }
            };
            let (_, outcomes) =
                simulate_with(s, &key, grid, &w.requests, fair.as_ref()).with_context(|| format!("arm {arm}"))?;
            if let Some(f) = &fair {
                // The allocation limit, recounted from the placements (overdraft: nothing to check).
                let v = check_allocations(&f.ledger.projects(), &w.requests, &outcomes);
                if let Some(first) = v.first() {
                    bail!("{key:?}, arm {arm}: the allocation checker found {} violations, first: {first}", v.len());
                }
            }
            let id = RunId { key: &key, arm };
            let (r, d) = measure(p, &id, n, &w, &outcomes, fair.as_ref().map(|f| f.ledger.as_ref()))?;
            if keep_outcomes {
                crate::report::write_outcomes(out, &key, Some(&arm), &outcomes)?;
            }
            rows.lock().expect("rows lock").extend(r);
            days.lock().expect("days lock").extend(d);
            bar.inc(1);
            Ok(())
        })
    })?;
    bar.finish_and_clear();
    let rows = rows.into_inner().expect("rows lock");
    let days = summarise_days(&days.into_inner().expect("days lock"));
    write_csv(&out.join("runs.csv"), &RUNS_HEADER, sorted(&rows))?;
    let summary = summarise(&rows);
    write_csv(&out.join("summary.csv"), &SUMMARY_HEADER, &summary)?;
    write_csv(&out.join("daily.csv"), &DAILY_HEADER, &days)?;
    std::fs::write(out.join("fairshare.md"), markdown(s, &grid_cpus, &summary, &days))?;
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use coreserve::model::{Link, Node, RawPlanRequest, ReservationMethod, SelectionPolicy, Site};

    use super::*;

    const T0: i64 = 1_767_225_600;

    /// One planner working on one request at a time (the scenario's set-up).
    fn scenario(extra: &str) -> Scenario {
        let mut s: Scenario = toml::from_str(&format!(
            "name = 't'\ntrace = 'unused'\nloads = [1.0]\nseeds = 1\nrequests = 1\nplanners = 1\n\
             experiment = 'fairshare'\n{extra}"
        ))
        .unwrap();
        s.dir = ".".into();
        s.validate().unwrap();
        s
    }

    /// One 8-CPU linux site, one link.
    fn grid() -> Grid {
        Grid::new(
            vec![Node::new("a", ""), Node::new("b", "")],
            vec![Link { id: "ab".into(), a: "a".into(), b: "b".into(), capacity_mbps: 1000, price_per_gbps_hour: 0.5 }],
            vec![Site::new("lx", "a", 8, "linux", 1.0)],
        )
        .unwrap()
    }

    /// `user`'s request at `T0 + at` for the whole site over one hour, its deadline leaving no
    /// room to shift past another such hour.
    fn request(user: &str, at: i64) -> PlanRequest {
        let raw: RawPlanRequest = serde_json::from_value(serde_json::json!({
            "id": format!("{user}-{at}"), "user": user,
            "submitted_at": from_time(T0 + at), "deadline": from_time(T0 + at + 1800 + 3600 + 10),
            "jobs": [{"name": "A", "os": "linux", "cpus": 8, "offset_s": 0, "duration_s": 3600}],
        }))
        .unwrap();
        PlanRequest::new(raw).unwrap()
    }

    fn key() -> RunKey {
        RunKey {
            topology: "t".into(),
            kind: "workflow".into(),
            algorithm: Algorithm { method: ReservationMethod::Bir, policy: SelectionPolicy::Time },
            load: 1.0,
            seed: 1,
        }
    }

    /// Who got the site: the users of the committed requests.
    fn winners(requests: &[PlanRequest], outcomes: &[Outcome]) -> Vec<String> {
        requests
            .iter()
            .zip(outcomes)
            .filter(|(_, o)| o.status == OutcomeStatus::Committed)
            .map(|(r, _)| r.user().to_owned())
            .collect()
    }

    /// A flood request and then a steady one, in the same 600-s admission window, both for the
    /// only site's same hour. First come, first served: the flood's (it arrived first). With
    /// Planned-Use fair share and the flood over its pace (`u_i` > 1 from yesterday's usage,
    /// `p_i` < 0 = steady's): the steady request is planned first and gets the site. With
    /// both projects within their pace (`p_i` = 0 for both), ties go by arrival: the flood's
    /// again, so it is the priority that decides, not the window.
    #[test]
    fn planned_use_gives_the_window_to_the_project_within_its_pace() {
        let s = scenario("");
        let reqs = vec![request(FLOOD, 10), request(STEADY, 20)];
        let (_, fcfs) = simulate_with(&s, &key(), &grid(), &reqs, None).unwrap();
        assert_eq!(winners(&reqs, &fcfs), vec![FLOOD]);

        let p = FairShareParams::default();
        let over = p.ledger(8, T0 - 10 * DAY_S, Arm::PlannedUseNoLimit);
        // Yesterday the flood ran 64 CPUs all day: u = (1 - D) / (4 CPUs x 1 day) x D x 64 CPU-days.
        over.record("past", FLOOD, vec![Usage { start: T0 - DAY_S, end: T0, cpus: 64, gpus: 0 }]);
        assert!(over.priority_of(FLOOD, T0) < -0.5, "{}", over.priority_of(FLOOD, T0));
        assert_eq!(over.priority_of(STEADY, T0), 0.0);
        let fair = FairShare { ledger: over.clone(), window_s: 600 };
        let (_, planned) = simulate_with(&s, &key(), &grid(), &reqs, Some(&fair)).unwrap();
        assert_eq!(winners(&reqs, &planned), vec![STEADY], "{planned:?}");
        // The committed plan is charged to its project.
        assert_eq!(over.report(STEADY, T0 + 86_400).booked_cpu_hours, 8.0);

        let within = FairShare { ledger: p.ledger(8, T0 - 10 * DAY_S, Arm::PlannedUse), window_s: 600 };
        let (_, tie) = simulate_with(&s, &key(), &grid(), &reqs, Some(&within)).unwrap();
        assert_eq!(winners(&reqs, &tie), vec![FLOOD]);
    }

    /// A plan that would take the flood past its allocation is rejected by the limit, and the
    /// site stays free for steady's request of the same hour (arriving later).
    #[test]
    fn the_allocation_limit_refuses_the_flood_past_its_allocation() {
        let s = scenario("");
        let reqs = vec![request(FLOOD, 10), request(STEADY, 20)];
        // 80 CPU-hours per day each (steady_load 1/3 x 8 CPUs x 24 h x (1 + 0.25)); the flood
        // has 73 booked today (elsewhere), so the site's hour (8 more) would take it past.
        let p = FairShareParams { steady_load: 1.0 / 3.0, margin: 0.25, ..Default::default() };
        let ledger = p.ledger(8, T0, Arm::PlannedUseDaily);
        assert!((ledger.project(FLOOD).unwrap().allocation.cpu_hours - 80.0).abs() < 1e-9);
        let booked = vec![
            Usage { start: T0 + 10 * 3600, end: T0 + 19 * 3600, cpus: 8, gpus: 0 },
            Usage { start: T0 + 20 * 3600, end: T0 + 21 * 3600, cpus: 1, gpus: 0 },
        ];
        ledger.record("earlier", FLOOD, booked);
        let fair = FairShare { ledger: ledger.clone(), window_s: 0 };
        let (_, o) = simulate_with(&s, &key(), &grid(), &reqs, Some(&fair)).unwrap();
        assert_eq!(winners(&reqs, &o), vec![STEADY]);
        assert!(o[0].reason.as_deref().unwrap_or("").starts_with("allocation exceeded"), "{:?}", o[0].reason);
        assert!(check_allocations(&ledger.projects(), &reqs, &o).is_empty());
    }

    /// Steady's arrivals span the run, the flood's start at `flood_from_day`; users and ids
    /// are the projects'; arrivals in order; the offered loads are about the set ones.
    #[test]
    fn the_workload_has_a_steady_project_and_a_late_flood() {
        let mut s = scenario("[fairshare]\ndays = 4\nflood_from_day = 2\nsteady_load = 0.4");
        s.workload.durations_s = vec![(3600, 1)];
        s.workload.shape = Some(coreserve::workload::Shape::Chain(1));
        let cpus = [8, 16, 32];
        let w = workload(&s, &cpus, 512, AppKind::Workflow, 2.0, 7).unwrap();
        assert_eq!((w.start, w.flood_start, w.end), (T0, T0 + 2 * DAY_S, T0 + 4 * DAY_S));
        assert!(w.requests.windows(2).all(|p| p[0].submitted_at() <= p[1].submitted_at()));
        let of = |u: &str| w.requests.iter().filter(move |r| r.user() == u).collect::<Vec<_>>();
        let (steady, flood) = (of(STEADY), of(FLOOD));
        assert_eq!(steady.len() + flood.len(), w.requests.len());
        assert!(steady.iter().all(|r| r.id().starts_with("steady-") && r.submitted_at() < w.end));
        assert!(flood.iter().all(|r| r.id().starts_with("flood-") && r.submitted_at() >= w.flood_start));
        assert!(steady[0].submitted_at() < T0 + 3600 && steady.last().unwrap().submitted_at() > w.end - 3 * 3600);
        let load =
            |rs: &[&PlanRequest], span: i64| rs.iter().map(|r| r.cpu_seconds()).sum::<f64>() / (512.0 * span as f64);
        let (ls, lf) = (load(&steady, 4 * DAY_S), load(&flood, 2 * DAY_S));
        assert!((0.3..0.5).contains(&ls), "{ls}");
        assert!((1.7..2.3).contains(&lf), "{lf}");
        assert_eq!(w.phase(T0 + DAY_S), Phase::Before);
        assert_eq!(w.phase(w.flood_start), Phase::Flood);
        // Deterministic.
        let again = workload(&s, &cpus, 512, AppKind::Workflow, 2.0, 7).unwrap();
        assert_eq!(again.requests, w.requests);
    }

    #[test]
    fn bad_settings_are_refused() {
        let bad = |extra: &str| {
            let s: Scenario = toml::from_str(&format!(
                "name = 't'\ntrace = 'unused'\nloads = [1.0]\nexperiment = 'fairshare'\n[fairshare]\n{extra}"
            ))
            .unwrap();
            s.validate().unwrap_err().to_string()
        };
        assert!(bad("flood_from_day = 25\ndays = 20").contains("fairshare"));
        assert!(bad("steady_load = 0").contains("fairshare"));
        assert!(bad("arms = []").contains("fairshare"));
        let s: Result<Scenario, _> = toml::from_str("name = 't'\ntrace = 'u'\nloads = [1.0]\n[fairshare]\nwindow = 1");
        assert!(s.is_err(), "unknown fields are refused");
    }

    /// The CSV headers are the rows' serde field names, in order.
    #[test]
    fn csv_headers_match_the_rows() {
        fn names<T: Serialize>(row: &T) -> Vec<String> {
            let mut w = csv::WriterBuilder::new().has_headers(true).from_writer(vec![]);
            w.serialize(row).unwrap();
            let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
            text.lines().next().unwrap().split(',').map(str::to_owned).collect()
        }
        let row = FairRow {
            topology: "t".into(),
            kind: "workflow".into(),
            algorithm: key().algorithm,
            flood_load: 2.0,
            arm: Arm::PlannedUse,
            seed: 1,
            project: STEADY.into(),
            phase: Phase::Flood,
            requests: 1,
            committed: 1,
            success_rate: 1.0,
            start_delay_s: 1.0,
            offered_load: 0.4,
            used_share: 0.4,
            rejected_allocation: 0,
            rejected_time_limit: 0,
            rejected_other: 0,
            usage_index_end: 0.5,
            priority_end: 0.0,
        };
        assert_eq!(names(&row), RUNS_HEADER);
        let summary = summarise(&[row]);
        assert_eq!(names(&summary[0]), SUMMARY_HEADER);
        let day = DayRow {
            topology: "t".into(),
            kind: "workflow".into(),
            algorithm: key().algorithm,
            flood_load: 2.0,
            arm: Arm::Fcfs,
            seed: 1,
            project: FLOOD.into(),
            day: 3,
            requests: 2,
            committed: 1,
            used_share: 0.1,
            usage_index: 1.2,
            priority: -0.2,
        };
        let days = summarise_days(&[day]);
        assert_eq!(names(&days[0]), DAILY_HEADER);
        assert_eq!(days[0].success_rate, 0.5);
    }
}
