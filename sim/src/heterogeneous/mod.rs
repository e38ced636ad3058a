//! `experiment = "heterogeneity"` (`sim/scenarios/heterogeneous.toml`): the measurement of Saito
//! & Hirotsu's heterogeneous multi-cluster scheduler (seed 003; sim/RESULTS.md, "Heterogeneous
//! sites (seed 003)") with the production planner.
//!
//! Every (topology, seed) grid gets site attributes (the scenario's `heterogeneity`) and every
//! site a label `type:KEY` naming its type ([`arms::site_type`]: architecture and whether it has
//! GPUs). Every (kind, load, seed) workload is drawn once, with requirements (`[workload]
//! requirements`), and planned three times on the same grid with the same planner, dispatch and
//! latency streams; only the requests differ ([`Arm`]):
//!
//! * `filter`: as drawn; the GIS offers only sites that meet every requirement. One queue over
//!   all sites.
//! * `os-only`: every job's `requires` removed ([`os_only`]): what round 1 could express (the OS
//!   and the CPUs). Each committed job is then checked against the job as drawn
//!   (`coreserve::model::unmet`): the seed's "existing scheduler" that ignores heterogeneity.
//! * `per-type`: one queue per site type ([`pin_to_types`]): each request is pinned to one type
//!   that can run all its jobs (a job's requirements are kept, and a `type:KEY` label is added),
//!   so it competes only for that type's sites: the seed's multi-queue baseline.
//!
//! Per run: requests, committed, success rate, placement validity (committed requests whose
//! every job sits on a site that can run it, over committed; also per job), valid success
//! (valid over requests) and the mean wait to start (earliest job start minus `submitted_at`,
//! over committed requests). The simulator changes only inputs (the requests' requirements and
//! the sites' labels), never the algorithm. Outputs: `runs.csv`, `summary.csv` (mean and 95 %
//! CI over seeds) and `heterogeneous.md`.
//!
//! The files: [`arms`] (the arms and their inputs), [`measure`] (one run and its row),
//! [`summary`] (over seeds, and paired by seed), [`mod@markdown`] (`heterogeneous.md`); this one
//! plugs the experiment into the runner (`crate::experiment`).

pub mod arms;
pub mod markdown;
pub mod measure;
pub mod summary;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::fmt;
use std::path::Path;

use anyhow::Result;
use coreserve::model::{Grid, Outcome, PlanRequest};
use coreserve::workload::generate;

pub use arms::Arm;
use arms::{arm_requests, label_types, os_only, pin_to_types, runnable, Pinned};
use markdown::markdown;
use measure::{one_run, HetRow, RUNS_HEADER};
use summary::{paired, sorted, summarise, SUMMARY_HEADER};

use crate::experiment::{self, Cell, Experiment};
use crate::report::write_csv;
use crate::run::RunKey;
use crate::scenario::Scenario;

/// The heterogeneity experiment on scenario `s` with the trace's CPU counts `cpus`.
pub struct Heterogeneity<'a> {
    pub s: &'a Scenario,
    pub cpus: &'a [u32],
}

/// A cell's workload as each arm plans it, and what is counted.
pub struct ArmInputs {
    /// The requests as drawn (the `filter` arm's, and what every arm is judged against).
    pub drawn: Vec<PlanRequest>,
    /// The `os-only` arm's requests.
    pub stripped: Vec<PlanRequest>,
    /// The `per-type` arm's requests.
    pub pinned: Pinned,
    /// The ids of the requests past the warm-up.
    pub counted: HashSet<String>,
    /// Counted requests every job of which some site can run ([`runnable`]).
    pub runnable: u64,
    /// Counted requests the `per-type` arm pinned job by job.
    pub split: u64,
}

impl Experiment for Heterogeneity<'_> {
    type Arm = Arm;
    type Workload = ArmInputs;
    type Run = HetRow;

    fn scenario(&self) -> &Scenario {
        self.s
    }

    /// The scenario's grid with every site labelled with its type ([`label_types`]).
    fn grid(&self, topology: &str, seed: u64) -> Result<Grid> {
        Ok(label_types(self.s.grid(topology, seed)?))
    }

    fn arms(&self) -> Vec<Arm> {
        Arm::ALL.to_vec()
    }

    fn arm_name(arm: &Arm) -> Option<&dyn fmt::Display> {
        Some(arm)
    }

    fn workload(&self, cell: &Cell) -> Result<ArmInputs> {
        let s = self.s;
        let params = s.workload_params(cell.kind, cell.load, cell.seed);
        let drawn = generate(self.cpus, cell.grid.total_cpus(), &params)?;
        let stripped = os_only(&drawn);
        let pinned = pin_to_types(&cell.grid, &drawn, cell.seed, s.type_choice);
        let warmup = s.warmup_requests.min(drawn.len());
        let counted = drawn[warmup..].iter().map(|r| r.id().to_owned()).collect();
        let runnable = drawn[warmup..].iter().filter(|r| runnable(&cell.grid, r)).count() as u64;
        let split = pinned.split[warmup..].iter().filter(|x| **x).count() as u64;
        Ok(ArmInputs { drawn, stripped, pinned, counted, runnable, split })
    }

    fn run(&self, cell: &Cell, key: &RunKey, arm: Arm, w: &ArmInputs) -> Result<(HetRow, Vec<Outcome>)> {
        let requests = arm_requests(arm, &w.drawn, &w.stripped, &w.pinned);
        let split = if arm == Arm::PerType { w.split } else { 0 };
        one_run(self.s, key, arm, &cell.grid, &w.drawn, requests, &w.counted, split, w.runnable)
    }
}

/// Runs the experiment of scenario `s` (CPU counts `cpus`) and writes `runs.csv`,
/// `summary.csv` and `heterogeneous.md` to `out` (and every run's outcomes to `out/outcomes/`
/// with `keep_outcomes`). Returns the number of runs.
///
/// # Errors
/// A grid or workload cannot be built, an output cannot be written, the outcome checker finds
/// a violation, or a plan of the `filter` or `per-type` arm puts a job on a site that cannot
/// run it (a bug).
pub fn run(s: &Scenario, cpus: &[u32], out: &Path, keep_outcomes: bool) -> Result<usize> {
    let experiment = Heterogeneity { s, cpus };
    let cells = experiment::cells(&experiment)?;
    let rows = experiment::run(&experiment, &cells, out, keep_outcomes)?;
    write_csv(&out.join("runs.csv"), &RUNS_HEADER, sorted(&rows))?;
    let summary = summarise(&rows);
    write_csv(&out.join("summary.csv"), &SUMMARY_HEADER, &summary)?;
    std::fs::write(out.join("heterogeneous.md"), markdown(s, &summary, &paired(&rows)))?;
    Ok(rows.len())
}
