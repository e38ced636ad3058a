//! The heterogeneity runs over seeds: `summary.csv` per arm, and the single queue against
//! per-type queues paired by seed.

use std::collections::BTreeMap;

use serde::Serialize;

use super::arms::Arm;
use super::measure::HetRow;
use crate::algorithm::Algorithm;
use crate::report::{ci95_half_width, fixed, Keyed, RowKey};

/// The runs of one topology x kind x algorithm x arm x load over seeds: mean and 95 % CI
/// half-width ([`ci95_half_width`]). Validity and wait are averaged over the runs that
/// committed something. A line of `summary.csv`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HetSummary {
    pub topology: String,
    pub kind: String,
    pub algorithm: Algorithm,
    pub arm: Arm,
    #[serde(serialize_with = "fixed")]
    pub load: f64,
    pub runs: u64,
    /// Mean counted requests per run.
    #[serde(serialize_with = "fixed")]
    pub requests_mean: f64,
    /// Share of all the group's requests that are runnable, and (per-type) split.
    #[serde(serialize_with = "fixed")]
    pub runnable_share: f64,
    #[serde(serialize_with = "fixed")]
    pub split_share: f64,
    #[serde(serialize_with = "fixed")]
    pub success_rate_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub success_rate_ci95: f64,
    #[serde(serialize_with = "fixed")]
    pub placement_validity_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub placement_validity_ci95: f64,
    #[serde(serialize_with = "fixed")]
    pub job_validity_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub job_validity_ci95: f64,
    #[serde(serialize_with = "fixed")]
    pub valid_success_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub valid_success_ci95: f64,
    #[serde(serialize_with = "fixed")]
    pub wait_s_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub wait_s_ci95: f64,
}

/// Column names of the heterogeneity experiment's `summary.csv`: the fields of [`HetSummary`].
pub const SUMMARY_HEADER: [&str; 19] = [
    "topology",
    "kind",
    "algorithm",
    "arm",
    "load",
    "runs",
    "requests_mean",
    "runnable_share",
    "split_share",
    "success_rate_mean",
    "success_rate_ci95",
    "placement_validity_mean",
    "placement_validity_ci95",
    "job_validity_mean",
    "job_validity_ci95",
    "valid_success_mean",
    "valid_success_ci95",
    "wait_s_mean",
    "wait_s_ci95",
];

crate::keyed!(HetRow, load);

/// The order of the tables: [`crate::report::RowKey`], then arm.
fn key(r: &HetRow) -> (RowKey<'_>, Arm) {
    (r.row_key(), r.arm)
}

/// Rows sorted by (topology, kind, algorithm, load, arm, seed).
pub fn sorted(rows: &[HetRow]) -> Vec<&HetRow> {
    let mut v: Vec<&HetRow> = rows.iter().collect();
    v.sort_by(|a, b| key(a).cmp(&key(b)).then(a.seed.cmp(&b.seed)));
    v
}

/// Groups runs over seeds (sorted by topology, kind, algorithm, load, arm).
pub fn summarise(rows: &[HetRow]) -> Vec<HetSummary> {
    let sorted = sorted(rows);
    let mut out = Vec::new();
    for g in sorted.chunk_by(|a, b| key(a) == key(b)) {
        let f = g[0];
        let all = |v: fn(&HetRow) -> f64| ci95_half_width(&g.iter().map(|r| v(r)).collect::<Vec<_>>());
        let booked = |v: fn(&HetRow) -> f64| {
            ci95_half_width(&g.iter().filter(|r| r.committed > 0).map(|r| v(r)).collect::<Vec<_>>())
        };
        let requests: u64 = g.iter().map(|r| r.requests).sum();
        let share = |v: fn(&HetRow) -> u64| g.iter().map(|r| v(r)).sum::<u64>() as f64 / requests.max(1) as f64;
        let (success_rate_mean, success_rate_ci95) = all(|r| r.success_rate);
        let (placement_validity_mean, placement_validity_ci95) = booked(|r| r.placement_validity);
        let (job_validity_mean, job_validity_ci95) = booked(|r| r.job_validity);
        let (valid_success_mean, valid_success_ci95) = all(|r| r.valid_success);
        let (wait_s_mean, wait_s_ci95) = booked(|r| r.mean_wait_s);
        out.push(HetSummary {
            topology: f.topology.clone(),
            kind: f.kind.clone(),
            algorithm: f.algorithm,
            arm: f.arm,
            load: f.load,
            runs: g.len() as u64,
            requests_mean: requests as f64 / g.len() as f64,
            runnable_share: share(|r| r.runnable),
            split_share: share(|r| r.split),
            success_rate_mean,
            success_rate_ci95,
            placement_validity_mean,
            placement_validity_ci95,
            job_validity_mean,
            job_validity_ci95,
            valid_success_mean,
            valid_success_ci95,
            wait_s_mean,
            wait_s_ci95,
        });
    }
    out
}

/// The single queue (`filter`) against per-type queues on the same workloads: per-seed
/// differences of one topology x kind x algorithm x load.
#[derive(Debug, Clone, PartialEq)]
pub struct Paired {
    pub topology: String,
    pub kind: String,
    pub algorithm: Algorithm,
    pub load: f64,
    /// Seeds with both arms.
    pub seeds: usize,
    /// Mean and 95 % CI of success(filter) - success(per-type).
    pub success: (f64, f64),
    /// Seeds where the single queue booked more.
    pub ahead: usize,
    /// Mean and 95 % CI of wait(per-type) - wait(filter), seconds, over the seeds where both
    /// committed something (`waits` of them).
    pub wait: (f64, f64),
    pub waits: usize,
    /// Of those, the seeds where per-type requests waited longer.
    pub longer: usize,
}

/// [`Paired`] for every topology x kind x algorithm x load of `rows`, sorted.
pub fn paired(rows: &[HetRow]) -> Vec<Paired> {
    let sorted = sorted(rows);
    let same = |a: &HetRow, b: &HetRow| {
        (&a.topology, &a.kind, a.algorithm) == (&b.topology, &b.kind, b.algorithm) && a.load.total_cmp(&b.load).is_eq()
    };
    let mut out = Vec::new();
    for g in sorted.chunk_by(|a, b| same(a, b)) {
        let arm =
            |arm: Arm| -> BTreeMap<u64, &HetRow> { g.iter().filter(|r| r.arm == arm).map(|r| (r.seed, *r)).collect() };
        let (single, typed) = (arm(Arm::Filter), arm(Arm::PerType));
        let pairs: Vec<(&HetRow, &HetRow)> =
            single.iter().filter_map(|(seed, f)| typed.get(seed).map(|p| (*f, *p))).collect();
        if pairs.is_empty() {
            continue;
        }
        let success: Vec<f64> = pairs.iter().map(|(f, p)| f.success_rate - p.success_rate).collect();
        let wait: Vec<f64> = pairs
            .iter()
            .filter(|(f, p)| f.committed > 0 && p.committed > 0)
            .map(|(f, p)| p.mean_wait_s - f.mean_wait_s)
            .collect();
        let f = g[0];
        out.push(Paired {
            topology: f.topology.clone(),
            kind: f.kind.clone(),
            algorithm: f.algorithm,
            load: f.load,
            seeds: pairs.len(),
            success: ci95_half_width(&success),
            ahead: success.iter().filter(|d| **d > 0.0).count(),
            wait: ci95_half_width(&wait),
            waits: wait.len(),
            longer: wait.iter().filter(|d| **d > 0.0).count(),
        });
    }
    out
}
