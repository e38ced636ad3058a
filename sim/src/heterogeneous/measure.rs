//! Running one arm of the heterogeneity experiment and judging it: where the committed plans
//! landed against the requests as drawn (a line of `runs.csv`).

use std::collections::{HashMap, HashSet};

use anyhow::{bail, Context, Result};
use coreserve::model::{to_time, unmet, Grid, Outcome, PlanRequest, PlanStatus};
use serde::Serialize;

use super::arms::Arm;
use crate::algorithm::Algorithm;
use crate::report::fixed;
use crate::run::{simulate, RunKey};
use crate::scenario::Scenario;

/// Where a run's committed plans landed, judged against the requests as drawn.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Placement {
    /// Committed requests.
    pub committed: u64,
    /// Committed requests whose every job sits on a site that can run it.
    pub valid: u64,
    /// Jobs of committed requests.
    pub jobs: u64,
    /// Of those, the jobs on a site that can run them.
    pub valid_jobs: u64,
    /// Sum over committed requests of (earliest job start - submitted_at), seconds.
    pub wait_s: f64,
}

/// Judges the committed `outcomes` against `drawn` (the requests with their requirements;
/// matched by request id, outcomes of other ids ignored) on `grid`.
pub fn placement(grid: &Grid, drawn: &[PlanRequest], outcomes: &[Outcome]) -> Placement {
    let by_id: HashMap<&str, &PlanRequest> = drawn.iter().map(|r| (r.id(), r)).collect();
    let mut p = Placement::default();
    for o in outcomes.iter().filter(|o| o.status == PlanStatus::Committed) {
        let Some(r) = by_id.get(o.request_id.as_str()) else { continue };
        p.committed += 1;
        let mut all = true;
        for j in &o.jobs {
            let demand = r.jobs().iter().find(|d| d.name == j.name).expect("a placement names a job of its request");
            let ok = grid.site(&j.site).is_some_and(|s| unmet(s, demand).is_none());
            p.jobs += 1;
            p.valid_jobs += u64::from(ok);
            all &= ok;
        }
        p.valid += u64::from(all);
        let start = o.jobs.iter().map(|j| to_time(&j.start)).min().expect("a committed plan has jobs");
        p.wait_s += (start - r.submitted_at()) as f64;
    }
    p
}

/// One run: one topology x kind x algorithm x arm x offered load x seed. A line of `runs.csv`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HetRow {
    pub topology: String,
    pub kind: String,
    pub algorithm: Algorithm,
    pub arm: Arm,
    #[serde(serialize_with = "fixed")]
    pub load: f64,
    pub seed: u64,
    /// Counted requests (after the warm-up).
    pub requests: u64,
    /// Of those, the requests every job of which some site can run ([`super::arms::runnable`]).
    pub runnable: u64,
    /// Per-type arm: requests pinned job by job ([`super::arms::Pinned::split`]); 0 in the
    /// other arms.
    pub split: u64,
    pub committed: u64,
    /// Committed requests with every job on a site that can run it.
    pub valid: u64,
    pub jobs: u64,
    pub valid_jobs: u64,
    /// committed / requests.
    #[serde(serialize_with = "fixed")]
    pub success_rate: f64,
    /// valid / committed (1 when nothing was committed).
    #[serde(serialize_with = "fixed")]
    pub placement_validity: f64,
    /// valid_jobs / jobs (1 when nothing was committed).
    #[serde(serialize_with = "fixed")]
    pub job_validity: f64,
    /// valid / requests: what was booked where it can run.
    #[serde(serialize_with = "fixed")]
    pub valid_success: f64,
    /// Mean over committed requests of (earliest job start - submitted_at), seconds (0 when
    /// nothing was committed).
    #[serde(serialize_with = "fixed")]
    pub mean_wait_s: f64,
}

/// Column names of the heterogeneity experiment's `runs.csv`: the fields of [`HetRow`].
pub const RUNS_HEADER: [&str; 18] = [
    "topology",
    "kind",
    "algorithm",
    "arm",
    "load",
    "seed",
    "requests",
    "runnable",
    "split",
    "committed",
    "valid",
    "jobs",
    "valid_jobs",
    "success_rate",
    "placement_validity",
    "job_validity",
    "valid_success",
    "mean_wait_s",
];

/// Runs `arm` with `algorithm` on one workload and judges it. `drawn` are the requests as
/// drawn, `counted` the ids past the warm-up.
#[allow(clippy::too_many_arguments)]
pub fn one_run(
    s: &Scenario,
    key: &RunKey,
    arm: Arm,
    grid: &Grid,
    drawn: &[PlanRequest],
    requests: &[PlanRequest],
    counted: &HashSet<String>,
    split: u64,
    runnable: u64,
) -> Result<(HetRow, Vec<Outcome>)> {
    let (_, outcomes) = simulate(s, key, grid, requests).with_context(|| format!("arm {arm}"))?;
    let kept: Vec<Outcome> = outcomes.iter().filter(|o| counted.contains(o.request_id.as_str())).cloned().collect();
    let p = placement(grid, drawn, &kept);
    if arm != Arm::OsOnly && p.valid != p.committed {
        bail!(
            "{key:?}, arm {arm}: {} of {} committed plans put a job where it cannot run",
            p.committed - p.valid,
            p.committed
        );
    }
    let n = counted.len() as u64;
    let ratio = |a: u64, b: u64, none: f64| if b == 0 { none } else { a as f64 / b as f64 };
    let row = HetRow {
        topology: key.topology.clone(),
        kind: key.kind.clone(),
        algorithm: key.algorithm,
        arm,
        load: key.load,
        seed: key.seed,
        requests: n,
        runnable,
        split,
        committed: p.committed,
        valid: p.valid,
        jobs: p.jobs,
        valid_jobs: p.valid_jobs,
        success_rate: ratio(p.committed, n, 0.0),
        placement_validity: ratio(p.valid, p.committed, 1.0),
        job_validity: ratio(p.valid_jobs, p.jobs, 1.0),
        valid_success: ratio(p.valid, n, 0.0),
        mean_wait_s: if p.committed == 0 { 0.0 } else { p.wait_s / p.committed as f64 },
    };
    Ok((row, outcomes))
}
