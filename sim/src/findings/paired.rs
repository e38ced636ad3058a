//! Paired comparisons over seeds: every "beats", "is cheapest" and "rises" verdict of the
//! findings compares two arms run on the same workloads (same topology, kind, offered load and
//! seed, so the same requests) by a one-sided paired t-test at [`ALPHA`], and says when the two
//! arms made the same plans, which is no evidence either way.

use std::collections::BTreeMap;

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::report::RunRow;

/// The significance level of every one-sided paired test of the findings.
pub const ALPHA: f64 = 0.05;

/// Arm A against arm B over the workloads both ran: differences A - B of one metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paired {
    /// Mean of A - B.
    pub mean: f64,
    /// Pairs compared.
    pub n: usize,
    /// One-sided p-value that A is above B, from Student's t with `n - 1` degrees of freedom
    /// (`None`: fewer than 2 pairs; 0 or 1 when every difference is the same).
    pub p_above: Option<f64>,
    /// One-sided p-value that A is below B.
    pub p_below: Option<f64>,
    /// Every pair committed the same plans as far as `runs.csv` tells (commits, cost and
    /// messages equal in every run): the arms did not differ on these workloads.
    pub identical: bool,
}

/// What a [`Paired`] comparison shows at [`ALPHA`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// A is significantly above B.
    Above,
    /// A is significantly below B.
    Below,
    /// Neither at [`ALPHA`].
    Undecided,
    /// The arms made the same plans on every workload.
    Identical,
}

impl Comparison {
    /// The table symbol: `>`, `<`, `=` (undecided) or `≡` (identical plans).
    pub fn symbol(self) -> &'static str {
        match self {
            Comparison::Above => ">",
            Comparison::Below => "<",
            Comparison::Undecided => "=",
            Comparison::Identical => "≡",
        }
    }
}

/// One-sided p-value that the mean of `d` is above 0 (`None` with fewer than 2 values).
fn p_above(d: &[f64], mean: f64) -> Option<f64> {
    let n = d.len();
    if n < 2 {
        return None;
    }
    let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    Some(if sd == 0.0 {
        if mean > 0.0 {
            0.0
        } else {
            1.0
        }
    } else {
        let t = mean / (sd / (n as f64).sqrt());
        1.0 - StudentsT::new(0.0, 1.0, (n - 1) as f64).expect("df >= 1").cdf(t)
    })
}

impl Paired {
    /// The paired test of the differences `d` (A - B, one per workload).
    pub fn of(d: &[f64], identical: bool) -> Paired {
        let n = d.len();
        let mean = if n == 0 { 0.0 } else { d.iter().sum::<f64>() / n as f64 };
        let negated: Vec<f64> = d.iter().map(|x| -x).collect();
        Paired { mean, n, p_above: p_above(d, mean), p_below: p_above(&negated, -mean), identical: identical && n > 0 }
    }

    /// The verdict at [`ALPHA`].
    pub fn comparison(&self) -> Comparison {
        if self.identical {
            Comparison::Identical
        } else if self.p_above.is_some_and(|p| p < ALPHA) {
            Comparison::Above
        } else if self.p_below.is_some_and(|p| p < ALPHA) {
            Comparison::Below
        } else {
            Comparison::Undecided
        }
    }
}

/// Pairs every run matching `a` with the run matching `b` that has the same `key` (the
/// workload), and returns `metric(a) - metric(b)` per key (pairs where either metric is `None`,
/// such as the cost of a run that committed nothing, are left out) and whether every pair made
/// the same plans.
pub fn differences<K: Ord>(
    runs: &[RunRow],
    a: impl Fn(&RunRow) -> bool,
    b: impl Fn(&RunRow) -> bool,
    key: impl Fn(&RunRow) -> K,
    metric: impl Fn(&RunRow) -> Option<f64>,
) -> (BTreeMap<K, f64>, bool) {
    let bs: BTreeMap<K, &RunRow> = runs.iter().filter(|r| b(r)).map(|r| (key(r), r)).collect();
    let (mut d, mut identical) = (BTreeMap::new(), true);
    for ra in runs.iter().filter(|r| a(r)) {
        let k = key(ra);
        let Some(rb) = bs.get(&k) else { continue };
        identical &= ra.committed == rb.committed && ra.mean_cost == rb.mean_cost && ra.messages == rb.messages;
        if let (Some(x), Some(y)) = (metric(ra), metric(rb)) {
            d.insert(k, x - y);
        }
    }
    (d, identical)
}

/// [`differences`] tested: A against B on the workloads both ran.
pub fn compare<K: Ord>(
    runs: &[RunRow],
    a: impl Fn(&RunRow) -> bool,
    b: impl Fn(&RunRow) -> bool,
    key: impl Fn(&RunRow) -> K,
    metric: impl Fn(&RunRow) -> Option<f64>,
) -> Paired {
    let (d, identical) = differences(runs, a, b, key, metric);
    Paired::of(&d.into_values().collect::<Vec<_>>(), identical)
}

/// A run's success rate (every run has one).
pub fn success(r: &RunRow) -> Option<f64> {
    Some(r.success_rate)
}

/// A run's average cost, `None` when it committed nothing.
pub fn cost(r: &RunRow) -> Option<f64> {
    (r.committed > 0 && r.mean_cost > 0.0).then_some(r.mean_cost)
}
