//! `experiment = "staged"` (`sim/scenarios/staged.toml`): concurrent against staged workflows
//! (issue 46), a finding of our own with the production planner.
//!
//! Every (topology, load, seed) workload of workflows is drawn once, as the paper's generator
//! draws them (`coreserve::workload::generate`): each transfer runs while **both** of its jobs
//! run (Ando & Aida's rule), so every consumer starts before its producers end and is
//! stretched back over them. Each request is planned in two arms, on the same grid with the
//! same planners, dispatch and latency streams:
//!
//! * `concurrent`: as drawn (offsets from one start, every part at `st + offset`).
//! * `staged`: its twin as a workflow engine states it ([`staged_twin`]): the same jobs, CPUs
//!   and DAG, each job `after` its producers, each transfer `mode: "staged"` with the same
//!   bandwidth and duration, no offsets (the planner places every job but the first per job,
//!   docs/algorithm.md "Per-job placement"). A consumer's reservation is its drawn duration
//!   less the part that overlapped its producers (what the concurrent form reserves before
//!   its inputs exist); its deadline keeps the drawn slack after its earliest end.
//!
//! Per run: requests (after the warm-up), committed, success rate, mean cost per CPU-hour,
//! reserved core-seconds per committed plan and in all, and the mean makespan. Outputs:
//! `runs.csv`, `summary.csv` (mean and 95 % CI over seeds) and `staged.md`.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use anyhow::{Context, Result};
use coreserve::model::{to_time, Outcome, PlanRequest, PlanStatus, RawPlanRequest, TransferMode};
use coreserve::workload::generate;
use serde::{Serialize, Serializer};

use crate::algorithm::Algorithm;
use crate::experiment::{self, Cell, Experiment};
use crate::report::{ci95_half_width, fixed, write_csv, Keyed, RowKey};
use crate::run::{simulate, RunKey};
use crate::scenario::Scenario;

/// How a workflow is stated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Arm {
    /// As drawn: every transfer inside both of its jobs, every job at a fixed offset.
    Concurrent,
    /// Its staged twin ([`staged_twin`]).
    Staged,
}

impl Arm {
    /// Every arm, in the order of the tables.
    pub const ALL: [Arm; 2] = [Arm::Concurrent, Arm::Staged];
}

impl fmt::Display for Arm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arm::Concurrent => "concurrent",
            Arm::Staged => "staged",
        })
    }
}

impl Serialize for Arm {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The staged twin of a drawn (concurrent) workflow `r`: the same id, arrival, jobs (name, OS,
/// CPUs, requirements) and transfers (ends, bandwidth, duration); each job `after` the jobs it
/// receives from, with no offset; each transfer staged, with no offset. A job's duration is
/// its drawn one less its overlap with its producers (the latest producer end minus its start,
/// kept below its duration); the deadline moves by the difference of the two layouts' spans
/// (the same slack after the earliest end).
///
/// # Errors
/// The twin is not a valid request (a bug).
pub fn staged_twin(r: &PlanRequest) -> Result<PlanRequest> {
    let mut raw: RawPlanRequest = r.raw().clone();
    let index: HashMap<&str, usize> = r.jobs().iter().enumerate().map(|(i, j)| (j.name.as_str(), i)).collect();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); r.jobs().len()];
    for t in r.transfers() {
        let (from, to) = (index[t.from.as_str()], index[t.to.as_str()]);
        if !preds[to].contains(&from) {
            preds[to].push(from);
        }
    }
    for (v, job) in raw.jobs.iter_mut().enumerate() {
        let span = r.job_span(v);
        let latest_input = preds[v].iter().map(|&u| r.job_span(u).end_s()).max();
        let overlap = latest_input.map_or(0, |e| (e - span.offset_s).clamp(0, span.duration_s - 1));
        job.duration_s -= overlap;
        job.offset_s = None;
        job.after = preds[v].iter().map(|&u| r.jobs()[u].name.clone()).collect();
    }
    for (e, t) in raw.transfers.iter_mut().enumerate() {
        t.duration_s = Some(r.transfer_span(e).duration_s);
        t.offset_s = None;
        t.mode = TransferMode::Staged;
        t.size_mb = None;
    }
    // The twin's span, laid out with the drawn deadline pushed far enough not to matter.
    let far = {
        let mut x = raw.clone();
        x.deadline = raw.deadline + chrono::Duration::days(3650);
        PlanRequest::new(x).context("staged twin")?.span_s()
    };
    raw.deadline += chrono::Duration::seconds((far - r.span_s()).max(0));
    PlanRequest::new(raw).context("staged twin")
}

/// Reserved core-seconds of a committed outcome: CPUs times reservation length, summed.
fn reserved_cpu_s(o: &Outcome) -> i64 {
    o.jobs.iter().map(|j| i64::from(j.cpus) * (to_time(&j.end) - to_time(&j.start))).sum()
}

/// One run: topology x kind x algorithm x arm x offered load x seed. A line of `runs.csv`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StagedRow {
    pub topology: String,
    pub kind: String,
    pub algorithm: Algorithm,
    pub arm: Arm,
    #[serde(serialize_with = "fixed")]
    pub load: f64,
    pub seed: u64,
    /// Counted requests (after the warm-up).
    pub requests: u64,
    pub committed: u64,
    #[serde(serialize_with = "fixed")]
    pub success_rate: f64,
    /// Mean over committed plans of cost per CPU-hour (as the paper's runs).
    #[serde(serialize_with = "fixed")]
    pub mean_cost: f64,
    /// Core-seconds reserved by the committed plans, in all.
    pub reserved_cpu_s: i64,
    /// Per committed plan (0 when none).
    #[serde(serialize_with = "fixed")]
    pub reserved_cpu_s_per_plan: f64,
    /// Mean over committed plans of first start to last end, seconds (0 when none).
    #[serde(serialize_with = "fixed")]
    pub makespan_s: f64,
    /// Participant messages of all plans (as the paper's runs).
    pub messages: u64,
}

/// Column names of `runs.csv`: the fields of [`StagedRow`].
pub const RUNS_HEADER: [&str; 14] = [
    "topology",
    "kind",
    "algorithm",
    "arm",
    "load",
    "seed",
    "requests",
    "committed",
    "success_rate",
    "mean_cost",
    "reserved_cpu_s",
    "reserved_cpu_s_per_plan",
    "makespan_s",
    "messages",
];

/// Means (and 95 % CI half-widths) over seeds of one topology x kind x algorithm x arm x load:
/// a line of `summary.csv`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StagedSummary {
    pub topology: String,
    pub kind: String,
    pub algorithm: Algorithm,
    pub arm: Arm,
    #[serde(serialize_with = "fixed")]
    pub load: f64,
    pub runs: u64,
    #[serde(serialize_with = "fixed")]
    pub success_rate_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub success_rate_ci95: f64,
    #[serde(serialize_with = "fixed")]
    pub mean_cost_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub reserved_cpu_s_per_plan_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub reserved_cpu_s_mean: f64,
    #[serde(serialize_with = "fixed")]
    pub makespan_s_mean: f64,
}

/// Column names of `summary.csv`: the fields of [`StagedSummary`].
pub const SUMMARY_HEADER: [&str; 12] = [
    "topology",
    "kind",
    "algorithm",
    "arm",
    "load",
    "runs",
    "success_rate_mean",
    "success_rate_ci95",
    "mean_cost_mean",
    "reserved_cpu_s_per_plan_mean",
    "reserved_cpu_s_mean",
    "makespan_s_mean",
];

/// The experiment on scenario `s` with the trace's CPU counts `cpus`.
pub struct Staged<'a> {
    pub s: &'a Scenario,
    pub cpus: &'a [u32],
}

/// A cell's workflows in both forms.
pub struct Twins {
    pub concurrent: Vec<PlanRequest>,
    pub staged: Vec<PlanRequest>,
}

impl Experiment for Staged<'_> {
    type Arm = Arm;
    type Workload = Twins;
    type Run = StagedRow;

    fn scenario(&self) -> &Scenario {
        self.s
    }

    fn arms(&self) -> Vec<Arm> {
        Arm::ALL.to_vec()
    }

    fn arm_name(arm: &Arm) -> Option<&dyn fmt::Display> {
        Some(arm)
    }

    fn workload(&self, cell: &Cell) -> Result<Twins> {
        let params = self.s.workload_params(cell.kind, cell.load, cell.seed);
        let concurrent = generate(self.cpus, cell.grid.total_cpus(), &params)?;
        let staged = concurrent.iter().map(staged_twin).collect::<Result<_>>()?;
        Ok(Twins { concurrent, staged })
    }

    fn run(&self, cell: &Cell, key: &RunKey, arm: Arm, w: &Twins) -> Result<(StagedRow, Vec<Outcome>)> {
        let requests = match arm {
            Arm::Concurrent => &w.concurrent,
            Arm::Staged => &w.staged,
        };
        let (run, outcomes) = simulate(self.s, key, &cell.grid, requests).with_context(|| format!("arm {arm}"))?;
        let counted = &outcomes[self.s.warmup_requests.min(outcomes.len())..];
        let committed: Vec<&Outcome> = counted.iter().filter(|o| o.status == PlanStatus::Committed).collect();
        let reserved: i64 = committed.iter().map(|o| reserved_cpu_s(o)).sum();
        let makespan: i64 = committed
            .iter()
            .map(|o| {
                let first = o.jobs.iter().map(|j| to_time(&j.start)).min().unwrap_or(0);
                o.jobs.iter().map(|j| to_time(&j.end)).max().unwrap_or(0) - first
            })
            .sum();
        let per = |x: i64| if committed.is_empty() { 0.0 } else { x as f64 / committed.len() as f64 };
        let row = StagedRow {
            topology: key.topology.clone(),
            kind: key.kind.clone(),
            algorithm: key.algorithm,
            arm,
            load: key.load,
            seed: key.seed,
            requests: run.requests,
            committed: run.committed,
            success_rate: run.success_rate,
            mean_cost: run.mean_cost,
            reserved_cpu_s: reserved,
            reserved_cpu_s_per_plan: per(reserved),
            makespan_s: per(makespan),
            messages: run.messages,
        };
        Ok((row, outcomes))
    }
}

crate::keyed!(StagedRow, load);

/// The order of the tables: [`crate::report::RowKey`], then arm.
fn key(r: &StagedRow) -> (RowKey<'_>, Arm) {
    (r.row_key(), r.arm)
}

/// Rows sorted by [`key`], then seed.
pub fn sorted(rows: &[StagedRow]) -> Vec<&StagedRow> {
    let mut v: Vec<&StagedRow> = rows.iter().collect();
    v.sort_by(|a, b| key(a).cmp(&key(b)).then(a.seed.cmp(&b.seed)));
    v
}

/// Means over seeds per topology x kind x algorithm x arm x load.
pub fn summarise(rows: &[StagedRow]) -> Vec<StagedSummary> {
    let sorted = sorted(rows);
    let mut out = Vec::new();
    for g in sorted.chunk_by(|a, b| key(a) == key(b)) {
        let f = g[0];
        let mean = |v: fn(&StagedRow) -> f64| ci95_half_width(&g.iter().map(|r| v(r)).collect::<Vec<_>>());
        let booked = |v: fn(&StagedRow) -> f64| {
            ci95_half_width(&g.iter().filter(|r| r.committed > 0).map(|r| v(r)).collect::<Vec<_>>()).0
        };
        let (success_rate_mean, success_rate_ci95) = mean(|r| r.success_rate);
        out.push(StagedSummary {
            topology: f.topology.clone(),
            kind: f.kind.clone(),
            algorithm: f.algorithm,
            arm: f.arm,
            load: f.load,
            runs: g.len() as u64,
            success_rate_mean,
            success_rate_ci95,
            mean_cost_mean: booked(|r| r.mean_cost),
            reserved_cpu_s_per_plan_mean: booked(|r| r.reserved_cpu_s_per_plan),
            reserved_cpu_s_mean: mean(|r| r.reserved_cpu_s as f64).0,
            makespan_s_mean: booked(|r| r.makespan_s),
        });
    }
    out
}

/// `staged.md`: per topology and algorithm, one line per load with both arms side by side.
pub fn markdown(s: &Scenario, summary: &[StagedSummary]) -> String {
    let mut md = format!(
        "# Concurrent against staged workflows (scenario `{}`)\n\n\
         Generated by the simulator (`sim/src/staged.rs`; docs/simulator.md). Each workflow as drawn \
         (`concurrent`: every transfer inside both jobs, Ando & Aida's rule) and its staged twin (`staged`: \
         the same DAG, jobs `after` their producers, transfers staged, no offsets, each consumer's \
         reservation less its overlap with its producers), on the same grid, arrivals and planners. \
         {} seeds, {} requests a run of which the first {} are a warm-up. Means over seeds; success \
         with its 95 % CI half-width; cost per CPU-hour, core-seconds and makespan over committed plans.\n",
        s.name, s.seeds, s.requests, s.warmup_requests
    );
    let mut groups: Vec<(&str, &str, Algorithm)> = Vec::new();
    for r in summary {
        let g = (r.topology.as_str(), r.kind.as_str(), r.algorithm);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    for (topology, kind, algorithm) in groups {
        md += &format!(
            "\n## {topology}, {kind}, {algorithm}\n\n| load | success concurrent | success staged | cost concurrent | \
             cost staged | core-s per plan concurrent | core-s per plan staged | makespan concurrent (s) | makespan \
             staged (s) |\n|---|---|---|---|---|---|---|---|---|\n"
        );
        let rows: Vec<&StagedSummary> = summary
            .iter()
            .filter(|r| (r.topology.as_str(), r.kind.as_str(), r.algorithm) == (topology, kind, algorithm))
            .collect();
        let mut loads: Vec<f64> = rows.iter().map(|r| r.load).collect();
        loads.dedup();
        for load in loads {
            let arm = |a: Arm| rows.iter().find(|r| r.load == load && r.arm == a);
            let (Some(c), Some(st)) = (arm(Arm::Concurrent), arm(Arm::Staged)) else { continue };
            md += &format!(
                "| {load:.1} | {:.3} ± {:.3} | {:.3} ± {:.3} | {:.3} | {:.3} | {:.0} | {:.0} | {:.0} | {:.0} |\n",
                c.success_rate_mean,
                c.success_rate_ci95,
                st.success_rate_mean,
                st.success_rate_ci95,
                c.mean_cost_mean,
                st.mean_cost_mean,
                c.reserved_cpu_s_per_plan_mean,
                st.reserved_cpu_s_per_plan_mean,
                c.makespan_s_mean,
                st.makespan_s_mean,
            );
        }
    }
    md
}

/// Runs the experiment of scenario `s` (CPU counts `cpus`) and writes `runs.csv`,
/// `summary.csv` and `staged.md` to `out` (and every run's outcomes with `keep_outcomes`).
/// Returns the number of runs.
///
/// # Errors
/// A grid or workload cannot be built, an output cannot be written, or the outcome checker
/// finds a violation (a bug).
pub fn run(s: &Scenario, cpus: &[u32], out: &Path, keep_outcomes: bool) -> Result<usize> {
    let experiment = Staged { s, cpus };
    let cells = experiment::cells(&experiment)?;
    let lines = experiment::run(&experiment, &cells, out, keep_outcomes)?;
    write_csv(&out.join("runs.csv"), &RUNS_HEADER, sorted(&lines))?;
    let summary = summarise(&lines);
    write_csv(&out.join("summary.csv"), &SUMMARY_HEADER, &summary)?;
    std::fs::write(out.join("staged.md"), markdown(s, &summary))?;
    Ok(lines.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use coreserve::workload::{AppKind, WorkloadParams};

    /// The twin of every drawn workflow is valid, keeps its jobs, CPUs and transfers, lays
    /// every consumer out after its producers, and reserves no more core-seconds.
    #[test]
    fn a_staged_twin_keeps_the_dag_and_reserves_no_more() {
        let params = WorkloadParams { requests: 100, seed: 7, ..WorkloadParams::for_kind(AppKind::Workflow) };
        let drawn = generate(&[8, 16, 64], 1000, &params).unwrap();
        for r in &drawn {
            let t = staged_twin(r).unwrap();
            assert_eq!((t.id(), t.jobs().len(), t.transfers().len()), (r.id(), r.jobs().len(), r.transfers().len()));
            assert!(t.transfers().iter().all(|x| x.mode == TransferMode::Staged));
            let cpu_s = |q: &PlanRequest| {
                (0..q.jobs().len()).map(|j| i64::from(q.jobs()[j].cpus) * q.job_span(j).duration_s).sum::<i64>()
            };
            assert!(cpu_s(&t) <= cpu_s(r), "{}", r.id());
            for e in 0..t.transfers().len() {
                let (a, b) = t.transfer_ends(e);
                assert!(t.job_span(b).offset_s >= t.job_span(a).end_s() + t.transfer_span(e).duration_s);
                assert!(t.floats(b));
            }
            assert!(t.deadline() - t.span_s() >= r.deadline() - r.span_s());
        }
    }
}
