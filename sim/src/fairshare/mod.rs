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
//!
//! The files: `crate::scenario::fairshare` (the `[fairshare]` settings and the arms),
//! [`projects`] (the two projects and their ledger), [`mod@workload`] (their requests and the
//! phases), [`mod@measure`] (one run's rows and days), [`summary`] (over seeds), [`mod@markdown`]
//! (`fairshare.md`); this one plugs the experiment into the runner (`crate::experiment`).

pub mod markdown;
pub mod measure;
pub mod projects;
pub mod summary;
#[cfg(test)]
mod tests;
pub mod workload;

use std::fmt;
use std::path::Path;

use anyhow::{bail, Context, Result};
use coreserve::check::check_allocations;
use coreserve::model::Outcome;

use markdown::markdown;
use measure::{measure, DayRow, FairRow, RunId, RUNS_HEADER};
use projects::ledger;
use summary::{sorted, summarise, summarise_days, DAILY_HEADER, SUMMARY_HEADER};
use workload::{workload, Workload};

use crate::experiment::{self, Cell, Experiment};
use crate::report::write_csv;
use crate::run::{simulate_with, FairShare, RunKey};
use crate::scenario::fairshare::Arm;
use crate::scenario::Scenario;

/// The fair-share experiment on scenario `s` with the trace's CPU counts `cpus`.
pub struct Fairshare<'a> {
    pub s: &'a Scenario,
    pub cpus: &'a [u32],
}

impl Experiment for Fairshare<'_> {
    type Arm = Arm;
    type Workload = Workload;
    /// The run's rows (per project and phase) and days.
    type Run = (Vec<FairRow>, Vec<DayRow>);

    fn scenario(&self) -> &Scenario {
        self.s
    }

    fn arms(&self) -> Vec<Arm> {
        self.s.fairshare.arms.clone()
    }

    fn arm_name(arm: &Arm) -> Option<&dyn fmt::Display> {
        Some(arm)
    }

    fn workload(&self, cell: &Cell) -> Result<Workload> {
        workload(self.s, self.cpus, cell.grid.total_cpus(), cell.kind, cell.load, cell.seed)
    }

    /// Runs `arm` (its ledger fresh), checks the allocations of the arms with a limit, and
    /// measures the run.
    fn run(&self, cell: &Cell, key: &RunKey, arm: Arm, w: &Workload) -> Result<(Self::Run, Vec<Outcome>)> {
        let (s, p, grid) = (self.s, &self.s.fairshare, &cell.grid);
        let n = grid.total_cpus();
        let fair = arm.has_priority().then(|| FairShare { ledger: ledger(p, n, w.start, arm), window_s: p.window_s });
        let (_, outcomes) =
            simulate_with(s, key, grid, &w.requests, fair.as_ref()).with_context(|| format!("arm {arm}"))?;
        if let Some(f) = &fair {
            // The allocation limit, recounted from the placements (overdraft: nothing to check).
            let v = check_allocations(&f.ledger.projects(), &w.requests, &outcomes);
            if let Some(first) = v.first() {
                bail!("{key:?}, arm {arm}: the allocation checker found {} violations, first: {first}", v.len());
            }
        }
        let id = RunId { key, arm };
        let measured = measure(p, &id, n, w, &outcomes, fair.as_ref().map(|f| f.ledger.as_ref()))?;
        Ok((measured, outcomes))
    }
}

/// Runs the experiment of scenario `s` (CPU counts `cpus`) and writes `runs.csv`,
/// `summary.csv`, `daily.csv` and `fairshare.md` to `out` (and every run's outcomes to
/// `out/outcomes/` with `keep_outcomes`). Returns the number of runs.
///
/// # Errors
/// A grid or workload cannot be built, an output cannot be written, or the outcome checker
/// finds a violation (a bug).
pub fn run(s: &Scenario, cpus: &[u32], out: &Path, keep_outcomes: bool) -> Result<usize> {
    let experiment = Fairshare { s, cpus };
    let cells = experiment::cells(&experiment)?;
    // The grids' sizes, each once, in the order of the cells.
    let mut grid_cpus = Vec::new();
    for cell in &cells {
        if !grid_cpus.contains(&cell.grid.total_cpus()) {
            grid_cpus.push(cell.grid.total_cpus());
        }
    }
    let runs = experiment::run(&experiment, &cells, out, keep_outcomes)?;
    let n_runs = runs.len();
    let (mut rows, mut days) = (Vec::new(), Vec::new());
    for (r, d) in runs {
        rows.extend(r);
        days.extend(d);
    }
    let days = summarise_days(&days);
    write_csv(&out.join("runs.csv"), &RUNS_HEADER, sorted(&rows))?;
    let summary = summarise(&rows);
    write_csv(&out.join("summary.csv"), &SUMMARY_HEADER, &summary)?;
    write_csv(&out.join("daily.csv"), &DAILY_HEADER, &days)?;
    std::fs::write(out.join("fairshare.md"), markdown(s, &grid_cpus, &summary, &days))?;
    Ok(n_runs)
}
