//! The one runner of the simulator's experiments (the paper's, heterogeneity's, fair share's):
//! a scenario's cells (topology x seed grids, kinds, offered loads) x algorithms x the
//! experiment's arms, in parallel, each run's outcomes kept on request.
//!
//! An experiment says what differs ([`Experiment`]): the grid of a cell, its arms, the workload
//! a cell's runs share, and one run with what it measures. [`run`] does the rest: every workload
//! (topology x kind x load x seed) is drawn once and every algorithm and arm runs on the same
//! one; the runs' results come back in the order the runs finished, for the experiment to sort
//! and summarise.

use std::fmt;
use std::fs;
use std::path::Path;
use std::sync::Mutex;

use anyhow::Result;
use coreserve::model::{Grid, Outcome};
use coreserve::workload::AppKind;
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;

use crate::algorithm::Algorithm;
use crate::run::RunKey;
use crate::scenario::Scenario;

/// One workload of a scenario: a topology's grid for a seed, a kind and an offered load.
#[derive(Debug, Clone)]
pub struct Cell {
    /// The topology as the scenario names it.
    pub topology: String,
    /// The grid of (topology, seed).
    pub grid: Grid,
    pub kind: AppKind,
    pub load: f64,
    pub seed: u64,
}

impl Cell {
    /// The key of the run of `algorithm` on this cell.
    pub fn key(&self, algorithm: Algorithm) -> RunKey {
        RunKey {
            topology: Scenario::topology_label(&self.topology),
            kind: self.kind.to_string(),
            algorithm,
            load: self.load,
            seed: self.seed,
        }
    }
}

/// What an experiment adds to the runner: its grids, arms, workloads and runs.
pub trait Experiment: Sync {
    /// How one workload is planned besides the algorithm (the experiment's treatments).
    type Arm: Copy + Send + Sync;
    /// What the runs of one cell share (drawn once per cell).
    type Workload: Sync;
    /// What one run measures.
    type Run: Send;

    /// The scenario the experiment runs.
    fn scenario(&self) -> &Scenario;

    /// The grid of `topology` for run seed `seed` (default: the scenario's).
    ///
    /// # Errors
    /// The grid cannot be built.
    fn grid(&self, topology: &str, seed: u64) -> Result<Grid> {
        self.scenario().grid(topology, seed)
    }

    /// The arms every algorithm runs, in order.
    fn arms(&self) -> Vec<Self::Arm>;

    /// The arm as it appears in the names of the outcome files (`None`: not in the names).
    fn arm_name(arm: &Self::Arm) -> Option<&dyn fmt::Display>;

    /// The workload of `cell`, shared by all its runs.
    ///
    /// # Errors
    /// The workload cannot be drawn.
    fn workload(&self, cell: &Cell) -> Result<Self::Workload>;

    /// Runs `arm` of run `key` on `cell`'s grid and `workload`: what it measures and the
    /// outcomes (in the order of the requests planned).
    ///
    /// # Errors
    /// The run fails or its outcomes fail a check (a bug).
    fn run(
        &self,
        cell: &Cell,
        key: &RunKey,
        arm: Self::Arm,
        workload: &Self::Workload,
    ) -> Result<(Self::Run, Vec<Outcome>)>;
}

/// The cells of `e`'s scenario: for every topology and seed its grid ([`Experiment::grid`]),
/// with every kind and load; in that order.
///
/// # Errors
/// A grid cannot be built.
pub fn cells<E: Experiment>(e: &E) -> Result<Vec<Cell>> {
    let s = e.scenario();
    let mut cells = Vec::new();
    for topology in &s.topologies {
        for seed in s.run_seeds() {
            let grid = e.grid(topology, seed)?;
            for kind in &s.kinds {
                for &load in &s.loads {
                    cells.push(Cell { topology: topology.clone(), grid: grid.clone(), kind: *kind, load, seed });
                }
            }
        }
    }
    Ok(cells)
}

/// Runs every cell x algorithm x arm of `e` in parallel (a progress bar on the terminal) and
/// returns what the runs measured, in the order they finished; with `keep_outcomes`, every
/// run's outcomes go to `out/outcomes/` ([`write_outcomes`]).
///
/// # Errors
/// The first run, workload or outcome file that fails.
pub fn run<E: Experiment>(e: &E, cells: &[Cell], out: &Path, keep_outcomes: bool) -> Result<Vec<E::Run>> {
    let arms = e.arms();
    let runs = cells.len() * e.scenario().algorithms.len() * arms.len();
    let bar = ProgressBar::new(runs as u64);
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {elapsed} elapsed, eta {eta}")?);
    let results = Mutex::new(Vec::with_capacity(runs));
    cells.par_iter().try_for_each(|cell| -> Result<()> {
        let workload = e.workload(cell)?;
        let jobs: Vec<(Algorithm, E::Arm)> =
            e.scenario().algorithms.iter().flat_map(|a| arms.iter().map(move |arm| (*a, *arm))).collect();
        jobs.par_iter().try_for_each(|&(algorithm, arm)| -> Result<()> {
            let key = cell.key(algorithm);
            let (result, outcomes) = e.run(cell, &key, arm, &workload)?;
            if keep_outcomes {
                write_outcomes(out, &key, E::arm_name(&arm), &outcomes)?;
            }
            results.lock().expect("results lock").push(result);
            bar.inc(1);
            Ok(())
        })
    })?;
    bar.finish_and_clear();
    Ok(results.into_inner().expect("results lock"))
}

/// Writes one run's outcomes (`--keep-outcomes`) to
/// `out/outcomes/TOPOLOGY-KIND-ALGORITHM[-ARM]-LOAD-SEED.jsonl`, one JSON outcome a line.
///
/// # Errors
/// The folder or file cannot be written.
pub fn write_outcomes(out: &Path, key: &RunKey, arm: Option<&dyn fmt::Display>, outcomes: &[Outcome]) -> Result<()> {
    let dir = out.join("outcomes");
    fs::create_dir_all(&dir)?;
    let arm = arm.map(|a| format!("-{a}")).unwrap_or_default();
    let name = format!("{}-{}-{}{arm}-{}-{}.jsonl", key.topology, key.kind, key.algorithm, key.load, key.seed);
    let lines: Vec<String> = outcomes.iter().map(serde_json::to_string).collect::<Result<_, _>>()?;
    fs::write(dir.join(name), lines.join("\n") + "\n")?;
    Ok(())
}
