//! Judging one fair-share run: its rows per project and phase (`runs.csv`) and per day, from
//! the requests, their outcomes and a ledger of the committed plans.

use std::collections::HashMap;

use anyhow::{bail, Result};
use coreserve::fairshare::{Ledger, Usage, DAY_S};
use coreserve::model::{to_time, Outcome, PlanStatus, Time};
use serde::Serialize;

use super::projects::{ledger, FLOOD, STEADY};
use super::workload::{Phase, Workload};
use crate::algorithm::Algorithm;
use crate::report::fixed;
use crate::run::RunKey;
use crate::scenario::fairshare::{Arm, FairShareParams};

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
    /// Days of the phase (each day from the run's start, cut to the phase) on which none of
    /// the project's committed jobs runs: the paper's measure of a starved user.
    pub idle_days: u64,
    /// The project's `u_i` and `p_i` at the end of the run (the same on both phases' rows).
    #[serde(serialize_with = "fixed")]
    pub usage_index_end: f64,
    #[serde(serialize_with = "fixed")]
    pub priority_end: f64,
}

/// Column names of `runs.csv`: the fields of [`FairRow`].
pub const RUNS_HEADER: [&str; 20] = [
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
    "idle_days",
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
pub struct RunId<'a> {
    pub key: &'a RunKey,
    pub arm: Arm,
}

/// Judges one run: its rows (per project and phase) and its days. `run_ledger` is the run's own
/// (planned-use arms): the end-of-run `u_i` recomputed from the committed plans must match it.
pub fn measure(
    p: &FairShareParams,
    id: &RunId<'_>,
    grid_cpus: u64,
    w: &Workload,
    outcomes: &[Outcome],
    run_ledger: Option<&Ledger>,
) -> Result<(Vec<FairRow>, Vec<DayRow>)> {
    let requests = &w.requests;
    // The ledger of the committed plans: every arm's u_i and p_i (what planned-use decides by).
    let book = ledger(p, grid_cpus, w.start, Arm::PlannedUseNoLimit);
    // With the run's own ledger: its index (the arm's priority function) recomputed from the
    // committed plans, to check against it.
    let own = run_ledger.map(|_| ledger(p, grid_cpus, w.start, id.arm));
    let mut usage: HashMap<&str, Vec<Usage>> = HashMap::new();
    for (i, (r, o)) in requests.iter().zip(outcomes).enumerate() {
        if o.status == PlanStatus::Committed {
            let u = Usage::of_outcome(o);
            usage.entry(r.user()).or_default().extend(u.iter().copied());
            if let Some(own) = &own {
                own.record(&i.to_string(), r.user(), u.clone());
            }
            book.record(&i.to_string(), r.user(), u);
        }
    }
    let index = |project: &str, at: Time| {
        let rep = book.report(project, at);
        (rep.usage_index.unwrap_or(f64::INFINITY), rep.priority.unwrap_or(f64::NEG_INFINITY))
    };
    if let (Some(l), Some(own)) = (run_ledger, &own) {
        for project in [STEADY, FLOOD] {
            let (mine, theirs) = (
                own.report(project, w.end).usage_index.unwrap_or(f64::INFINITY),
                l.report(project, w.end).usage_index.unwrap_or(f64::INFINITY),
            );
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
                mine.iter().copied().filter(|&i| outcomes[i].status == PlanStatus::Committed).collect();
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
                        outcomes[i].status != PlanStatus::Committed
                            && outcomes[i].reason.as_deref().is_some_and(|r| r.starts_with(prefix))
                    })
                    .count() as u64
            };
            let n = mine.len() as u64;
            let idle_days = (0..)
                .map(|day| (w.start + day * DAY_S).max(a)..(w.start + (day + 1) * DAY_S).min(b))
                .skip_while(|d| d.end <= a)
                .take_while(|d| d.start < b)
                .filter(|d| d.start < d.end && used(project, d.start, d.end) == 0.0)
                .count() as u64;
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
                idle_days,
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
                committed: mine.iter().filter(|&&i| outcomes[i].status == PlanStatus::Committed).count() as u64,
                used_share: used(project, a, b),
                usage_index,
                priority,
            });
        }
    }
    Ok((rows, days))
}
