//! `experiment = "paper"` (the default): Ando & Aida's experiment. Every algorithm plans every
//! workload; one [`RunRow`] per run, and the outputs `runs.csv`, `summary.csv`, the figures
//! (`crate::report`) and `findings.md` (`crate::findings`).

use std::fmt;
use std::path::Path;

use anyhow::Result;
use coreserve::model::{Outcome, PlanRequest};
use coreserve::workload::generate;

use crate::experiment::{self, Cell, Experiment};
use crate::findings;
use crate::report::{self, RunRow, XAxis};
use crate::run::{simulate, RunKey};
use crate::scenario::Scenario;
use crate::steady;

/// The paper's experiment on scenario `s` with the trace's CPU counts `cpus`.
pub struct Paper<'a> {
    pub s: &'a Scenario,
    pub cpus: &'a [u32],
}

impl Experiment for Paper<'_> {
    /// No arms: the algorithms are the treatments.
    type Arm = ();
    type Workload = Vec<PlanRequest>;
    type Run = RunRow;

    fn scenario(&self) -> &Scenario {
        self.s
    }

    fn arms(&self) -> Vec<()> {
        vec![()]
    }

    fn arm_name(_: &()) -> Option<&dyn fmt::Display> {
        None
    }

    fn workload(&self, cell: &Cell) -> Result<Vec<PlanRequest>> {
        let params = self.s.workload_params(cell.kind, cell.load, cell.seed);
        Ok(generate(self.cpus, cell.grid.total_cpus(), &params)?)
    }

    fn run(&self, cell: &Cell, key: &RunKey, _: (), requests: &Vec<PlanRequest>) -> Result<(RunRow, Vec<Outcome>)> {
        simulate(self.s, key, &cell.grid, requests)
    }
}

/// Runs the paper's experiment of scenario `s` (CPU counts `cpus`) and writes `runs.csv`,
/// `summary.csv`, the figures (their x axis `x_axis`) and `findings.md` to `out` (and every
/// run's outcomes to `out/outcomes/` with `keep_outcomes`). Returns the number of runs.
///
/// # Errors
/// A grid or workload cannot be built, an output cannot be written, or the outcome checker
/// finds a violation (a bug).
pub fn run(s: &Scenario, cpus: &[u32], out: &Path, keep_outcomes: bool, x_axis: XAxis) -> Result<usize> {
    let paper = Paper { s, cpus };
    let cells = experiment::cells(&paper)?;
    let rows = experiment::run(&paper, &cells, out, keep_outcomes)?;
    write_outputs(&rows, out, x_axis)?;
    Ok(rows.len())
}

/// Writes the runs' `runs.csv`, `summary.csv`, figures, `findings.md` and `steady-state.md` to
/// `out`.
fn write_outputs(rows: &[RunRow], out: &Path, x_axis: XAxis) -> Result<()> {
    report::write_runs_csv(rows, &out.join("runs.csv"))?;
    let summary = report::summarise(rows);
    report::write_summary_csv(&summary, &out.join("summary.csv"))?;
    std::fs::write(out.join("findings.md"), findings::findings(&summary, rows))?;
    // From runs.csv, as `--steady` and `--replot` read a finished folder: the same files either way.
    let quarters = steady::read_runs_csv(&out.join("runs.csv"))?;
    std::fs::write(out.join("steady-state.md"), steady::report(&quarters))?;
    report::write_figures(&summary, out, x_axis, &steady::drifting(&quarters))?;
    Ok(())
}
