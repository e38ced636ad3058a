//! The fair-share runs over seeds: `summary.csv` (per arm, project and phase) and `daily.csv`
//! (per arm, project and day).

use serde::Serialize;

use super::measure::{DayRow, FairRow};
use super::projects::STEADY;
use super::workload::Phase;
use crate::algorithm::Algorithm;
use crate::report::{ci95_half_width, fixed, Keyed, RowKey};
use crate::scenario::fairshare::Arm;

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
    /// Days of the phase on which none of the project's jobs runs.
    #[serde(serialize_with = "fixed")]
    pub idle_days_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub idle_days_ci95: f64,
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
pub const SUMMARY_HEADER: [&str; 24] = [
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
    "idle_days_mean",
    "idle_days_ci95",
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

crate::keyed!(FairRow, flood_load);
crate::keyed!(DayRow, flood_load);

/// A group of runs over seeds: [`crate::report::RowKey`] (the flood's load), arm, then project
/// (steady first).
type Group<'a> = (RowKey<'a>, Arm, (bool, &'a str));

/// Steady first.
fn project_order(p: &str) -> (bool, &str) {
    (p != STEADY, p)
}

fn group(r: &FairRow) -> Group<'_> {
    (r.row_key(), r.arm, project_order(&r.project))
}

fn day_group(r: &DayRow) -> Group<'_> {
    (r.row_key(), r.arm, project_order(&r.project))
}

/// Rows sorted by (topology, kind, algorithm, flood load, arm, project, phase, seed).
pub fn sorted(rows: &[FairRow]) -> Vec<&FairRow> {
    let mut v: Vec<&FairRow> = rows.iter().collect();
    v.sort_by(|a, b| group(a).cmp(&group(b)).then(a.phase.cmp(&b.phase)).then(a.seed.cmp(&b.seed)));
    v
}

/// Groups the runs over seeds.
pub fn summarise(rows: &[FairRow]) -> Vec<FairSummary> {
    let mut out = Vec::new();
    for g in sorted(rows).chunk_by(|a, b| group(a).cmp(&group(b)).is_eq() && a.phase == b.phase) {
        let f = g[0];
        let all = |v: fn(&FairRow) -> f64| ci95_half_width(&g.iter().map(|r| v(r)).collect::<Vec<_>>());
        let (start_delay_s_mean, start_delay_s_ci95) =
            ci95_half_width(&g.iter().filter(|r| r.committed > 0).map(|r| r.start_delay_s).collect::<Vec<_>>());
        let requests: u64 = g.iter().map(|r| r.requests).sum();
        let share = |v: fn(&FairRow) -> u64| g.iter().map(|r| v(r)).sum::<u64>() as f64 / requests.max(1) as f64;
        let (success_rate_mean, success_rate_ci95) = all(|r| r.success_rate);
        let (used_share_mean, used_share_ci95) = all(|r| r.used_share);
        let (idle_days_mean, idle_days_ci95) = all(|r| r.idle_days as f64);
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
            idle_days_mean,
            idle_days_ci95,
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
    v.sort_by(|a, b| day_group(a).cmp(&day_group(b)).then(a.day.cmp(&b.day)).then(a.seed.cmp(&b.seed)));
    let mut out = Vec::new();
    for g in v.chunk_by(|a, b| day_group(a).cmp(&day_group(b)).is_eq() && a.day == b.day) {
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
