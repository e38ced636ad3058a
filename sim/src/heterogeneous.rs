//! `experiment = "heterogeneity"` (`sim/scenarios/heterogeneous.toml`): the measurement of Saito
//! & Hirotsu's heterogeneous multi-cluster scheduler (seed 003; sim/RESULTS.md, "Heterogeneous
//! sites (seed 003)") with the production planner.
//!
//! Every (topology, seed) grid gets site attributes (the scenario's `heterogeneity`) and every
//! site a label `type:KEY` naming its type ([`site_type`]: architecture and whether it has
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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use coreserve::model::{to_time, unmet, ComputeDemand, Grid, Outcome, OutcomeStatus, PlanRequest, Requirements, Site};
use coreserve::workload::{generate, AppKind, WorkloadParams};
use indicatif::{ProgressBar, ProgressStyle};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Serialize, Serializer};

use crate::algorithm::Algorithm;
use crate::report::{ci95_half_width, fixed, write_csv};
use crate::run::{simulate, RunKey};
use crate::scenario::Scenario;

/// Stream salt of the per-type arm's choice of a type (docs/simulator.md, random streams).
const PIN_SEED: u64 = 0x7479_7065_7069_6e00;

/// How a run's requests reach the planner (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Arm {
    /// Requirements enforced by the GIS, one queue over all sites.
    Filter,
    /// Requirements removed (OS and CPUs only), placements checked against them afterwards.
    OsOnly,
    /// One queue per site type: each request pinned to one type.
    PerType,
}

impl Arm {
    pub const ALL: [Arm; 3] = [Arm::Filter, Arm::OsOnly, Arm::PerType];
}

impl fmt::Display for Arm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arm::Filter => "filter",
            Arm::OsOnly => "os-only",
            Arm::PerType => "per-type",
        })
    }
}

impl Serialize for Arm {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The type of a site, the key of its queue in the per-type arm: `ARCH-gpu` when it has a GPU
/// pool, else `ARCH-cpu` (e.g. `x86_64-gpu`, `aarch64-cpu`): the partitions an operator would
/// draw (one per kind of node), not one per combination of extensions and software (sites of
/// one type may still differ in generation, GPU model and software; the filter sorts that out
/// within the type).
pub fn site_type(site: &Site) -> String {
    let a = &site.attributes;
    format!("{}-{}", a.arch, if a.gpus.is_empty() { "cpu" } else { "gpu" })
}

/// The label that names type `t` on a site and pins a job to it.
pub fn type_label(t: &str) -> String {
    format!("type:{t}")
}

/// `grid` with every site labelled `type:KEY` ([`site_type`]); nothing else changes.
pub fn label_types(grid: Grid) -> Grid {
    let (nodes, links, mut sites) = grid.into_parts();
    for s in &mut sites {
        let label = type_label(&site_type(s));
        if !s.attributes.labels.contains(&label) {
            s.attributes.labels.push(label);
        }
    }
    Grid::new(nodes, links, sites).expect("a label keeps a valid grid valid")
}

/// `r` with `edit` applied to every job (index, job).
fn edit_jobs(r: &PlanRequest, mut edit: impl FnMut(usize, &mut ComputeDemand)) -> PlanRequest {
    let mut raw = r.raw().clone();
    for (i, j) in raw.jobs.iter_mut().enumerate() {
        edit(i, j);
    }
    PlanRequest::new(raw).expect("requirements do not enter a request's validity beyond their own values")
}

/// The requests with every job's `requires` removed (the `os-only` arm).
pub fn os_only(requests: &[PlanRequest]) -> Vec<PlanRequest> {
    requests.iter().map(|r| edit_jobs(r, |_, j| j.requires = Requirements::default())).collect()
}

/// True when every job of `r` has a site of `grid` that can run it (OS, CPUs, requirements):
/// the most any arm that honours the requirements can book.
pub fn runnable(grid: &Grid, r: &PlanRequest) -> bool {
    r.jobs().iter().all(|j| grid.sites().iter().any(|s| unmet(s, j).is_none()))
}

/// The requests of the `per-type` arm and which were pinned job by job.
#[derive(Debug, Clone)]
pub struct Pinned {
    pub requests: Vec<PlanRequest>,
    /// Parallel to `requests`: no single type can run every job of the request, but every job
    /// has a type, so each job was pinned on its own (a heterogeneous job spanning queues).
    pub split: Vec<bool>,
}

/// How the `per-type` arm picks a queue when several site types can run a request (scenario
/// field `type_choice`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TypeChoice {
    /// At random, weighted by the types' CPUs (the default): each queue gets a share of the
    /// requests it can take in proportion to its capacity.
    #[default]
    Weighted,
    /// The type with the most CPUs (the "default partition"; ties: the first type by name).
    Largest,
}

/// Pins every request to one site type of `grid` (its sites labelled by [`label_types`]): the
/// `per-type` arm. A type can run a job when one of its sites can ([`unmet`] is `None`:
/// OS, CPUs and requirements). Each request goes to a type that can run all its jobs; when
/// several can, `choice` picks one: [`TypeChoice::Weighted`] draws it at random weighted by the
/// types' CPUs (the static share of the load a per-type set-up gives each queue in proportion
/// to its capacity) from the stream `seed ^ PIN_SEED`, one draw per request in arrival order.
/// A request no single type can run has each job pinned on its own the same way (`split`: a
/// heterogeneous job spanning queues); a job no type can run is left unpinned (the GIS rejects
/// the request in every arm that honours requirements). Requirements are kept: the label is
/// added to them.
pub fn pin_to_types(grid: &Grid, requests: &[PlanRequest], seed: u64, choice: TypeChoice) -> Pinned {
    let mut types: BTreeMap<String, (u64, Vec<&Site>)> = BTreeMap::new();
    for s in grid.sites() {
        let e = types.entry(site_type(s)).or_default();
        e.0 += u64::from(s.cpus);
        e.1.push(s);
    }
    let can_run = |t: &str, j: &ComputeDemand| types[t].1.iter().any(|s| unmet(s, j).is_none());
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ PIN_SEED);
    let mut draw = |eligible: &[&str]| -> String {
        if choice == TypeChoice::Largest {
            let most = eligible.iter().map(|t| types[*t].0).max().expect("a non-empty choice");
            return eligible.iter().find(|t| types[**t].0 == most).expect("the maximum is there").to_string();
        }
        let total: u64 = eligible.iter().map(|t| types[*t].0).sum();
        let mut x = rng.gen_range(0..total);
        for t in eligible {
            if x < types[*t].0 {
                return (*t).to_owned();
            }
            x -= types[*t].0;
        }
        unreachable!("x < total")
    };
    let mut split = Vec::with_capacity(requests.len());
    let pinned = requests
        .iter()
        .map(|r| {
            let per_job: Vec<Vec<&str>> =
                r.jobs().iter().map(|j| types.keys().map(String::as_str).filter(|t| can_run(t, j)).collect()).collect();
            let common: Vec<&str> =
                types.keys().map(String::as_str).filter(|t| per_job.iter().all(|e| e.contains(t))).collect();
            let pins: Vec<Option<String>> = if common.is_empty() {
                split.push(per_job.iter().all(|e| !e.is_empty()));
                per_job.iter().map(|e| (!e.is_empty()).then(|| draw(e))).collect()
            } else {
                split.push(false);
                vec![Some(draw(&common)); per_job.len()]
            };
            edit_jobs(r, |i, j| {
                if let Some(t) = &pins[i] {
                    j.requires.labels.push(type_label(t));
                }
            })
        })
        .collect();
    Pinned { requests: pinned, split }
}

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
    for o in outcomes.iter().filter(|o| o.status == OutcomeStatus::Committed) {
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
    /// Of those, the requests every job of which some site can run ([`runnable`]).
    pub runnable: u64,
    /// Per-type arm: requests pinned job by job ([`Pinned::split`]); 0 in the other arms.
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

type Key<'a> = (&'a str, &'a str, Algorithm, f64, Arm);

fn key(r: &HetRow) -> Key<'_> {
    (&r.topology, &r.kind, r.algorithm, r.load, r.arm)
}

fn cmp_key(a: Key<'_>, b: Key<'_>) -> std::cmp::Ordering {
    a.0.cmp(b.0).then_with(|| a.1.cmp(b.1)).then_with(|| a.2.cmp(&b.2)).then(a.3.total_cmp(&b.3)).then(a.4.cmp(&b.4))
}

/// Rows sorted by (topology, kind, algorithm, load, arm, seed).
fn sorted(rows: &[HetRow]) -> Vec<&HetRow> {
    let mut v: Vec<&HetRow> = rows.iter().collect();
    v.sort_by(|a, b| cmp_key(key(a), key(b)).then(a.seed.cmp(&b.seed)));
    v
}

/// Groups runs over seeds (sorted by topology, kind, algorithm, load, arm).
pub fn summarise(rows: &[HetRow]) -> Vec<HetSummary> {
    let sorted = sorted(rows);
    let mut out = Vec::new();
    for g in sorted.chunk_by(|a, b| cmp_key(key(a), key(b)).is_eq()) {
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

/// `mean ± ci` with three decimals.
fn pm(mean: f64, ci: f64) -> String {
    format!("{mean:.3} ± {ci:.3}")
}

/// The summary as Markdown: one table per (topology, kind, algorithm), a row per load and arm,
/// then the paired comparison of the single queue with per-type queues.
pub fn markdown(s: &Scenario, summary: &[HetSummary], paired: &[Paired]) -> String {
    let mut md = format!(
        "# Heterogeneous sites (seed 003): scenario `{}`\n\n\
         Written by `coreserve-sim` (experiment `heterogeneity`). Mean ± 95 % CI half-width over \
         {} seeds of {} requests; validity and wait over the runs that committed something. \
         `filter`: requirements enforced, one queue over all sites; `os-only`: requirements \
         removed (OS and CPUs only), placements judged against them; `per-type`: one queue per \
         site type (architecture, GPU or not). Validity: committed requests (jobs) on sites that \
         can run them; valid success: such requests over all requests; wait: earliest job start \
         minus arrival, seconds (at least `w_interval_s` = {} s). Runnable: requests every job of \
         which some site can run; split: per-type requests no single type can run, pinned job by \
         job.\n",
        s.name, s.seeds, s.requests, s.w_interval_s
    );
    for g in summary.chunk_by(|a, b| (&a.topology, &a.kind, a.algorithm) == (&b.topology, &b.kind, b.algorithm)) {
        let f = &g[0];
        let _ = write!(
            md,
            "\n## {} / {} / {}\n\n| load | arm | success | validity (requests) | validity (jobs) | valid success | wait to start (s) | runnable | split |\n\
             |---|---|---|---|---|---|---|---|---|\n",
            f.topology, f.kind, f.algorithm
        );
        for r in g {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {:.0} ± {:.0} | {:.3} | {:.3} |",
                r.load,
                r.arm,
                pm(r.success_rate_mean, r.success_rate_ci95),
                pm(r.placement_validity_mean, r.placement_validity_ci95),
                pm(r.job_validity_mean, r.job_validity_ci95),
                pm(r.valid_success_mean, r.valid_success_ci95),
                r.wait_s_mean,
                r.wait_s_ci95,
                r.runnable_share,
                r.split_share
            );
        }
    }
    let _ = write!(
        md,
        "\n## One queue against per-type queues, paired by seed\n\n\
         Same grid, workload and planner streams in both arms; success: filter minus per-type; \
         wait: per-type minus filter (seconds, seeds where both arms committed something).\n\n\
         | topology | kind | algorithm | load | success gain of one queue | seeds one queue ahead | extra wait per-type (s) | seeds per-type waits longer |\n\
         |---|---|---|---|---|---|---|---|\n"
    );
    for p in paired {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {:+.3} ± {:.3} | {} / {} | {:+.0} ± {:.0} | {} / {} |",
            p.topology,
            p.kind,
            p.algorithm,
            p.load,
            p.success.0,
            p.success.1,
            p.ahead,
            p.seeds,
            p.wait.0,
            p.wait.1,
            p.longer,
            p.waits
        );
    }
    md
}

/// The requests of `arm` for a workload drawn as `drawn`.
fn arm_requests<'a>(
    arm: Arm,
    drawn: &'a [PlanRequest],
    stripped: &'a [PlanRequest],
    pinned: &'a Pinned,
) -> &'a [PlanRequest] {
    match arm {
        Arm::Filter => drawn,
        Arm::OsOnly => stripped,
        Arm::PerType => &pinned.requests,
    }
}

/// Runs `arm` with `algorithm` on one workload and judges it. `drawn` are the requests as
/// drawn, `counted` the ids past the warm-up.
#[allow(clippy::too_many_arguments)]
fn one_run(
    s: &Scenario,
    key: &RunKey,
    arm: Arm,
    grid: &Grid,
    drawn: &[PlanRequest],
    requests: &[PlanRequest],
    counted: &HashSet<&str>,
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

/// Runs the experiment of scenario `s` (CPU counts `cpus`) and writes `runs.csv`,
/// `summary.csv` and `heterogeneous.md` to `out` (and every run's outcomes to `out/outcomes/`
/// with `keep_outcomes`). Returns the number of runs.
///
/// # Errors
/// A grid or workload cannot be built, an output cannot be written, the outcome checker finds
/// a violation, or a plan of the `filter` or `per-type` arm puts a job on a site that cannot
/// run it (a bug).
pub fn run(s: &Scenario, cpus: &[u32], out: &Path, keep_outcomes: bool) -> Result<usize> {
    let mut cells: Vec<(String, Grid, AppKind, f64, u64)> = Vec::new();
    for topology in &s.topologies {
        for seed in s.run_seeds() {
            let grid = label_types(s.grid(topology, seed)?);
            for kind in &s.kinds {
                for &load in &s.loads {
                    cells.push((topology.clone(), grid.clone(), *kind, load, seed));
                }
            }
        }
    }
    let runs = cells.len() * s.algorithms.len() * Arm::ALL.len();
    let bar = ProgressBar::new(runs as u64);
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {elapsed} elapsed, eta {eta}")?);
    let rows = Mutex::new(Vec::with_capacity(runs));
    cells.par_iter().try_for_each(|(topology, grid, kind, load, seed)| -> Result<()> {
        let params = WorkloadParams {
            kind: *kind,
            requests: s.requests,
            load: *load,
            seed: *seed,
            w_interval_s: s.w_interval_s,
            ..s.workload.clone()
        };
        let drawn = generate(cpus, grid.total_cpus(), &params)?;
        let stripped = os_only(&drawn);
        let pinned = pin_to_types(grid, &drawn, *seed, s.type_choice);
        let warmup = s.warmup_requests.min(drawn.len());
        let counted: HashSet<&str> = drawn[warmup..].iter().map(PlanRequest::id).collect();
        let n_runnable = drawn[warmup..].iter().filter(|r| runnable(grid, r)).count() as u64;
        let n_split = pinned.split[warmup..].iter().filter(|x| **x).count() as u64;
        let jobs: Vec<(Algorithm, Arm)> =
            s.algorithms.iter().flat_map(|a| Arm::ALL.iter().map(move |arm| (*a, *arm))).collect();
        jobs.par_iter().try_for_each(|&(algorithm, arm)| -> Result<()> {
            let key = RunKey {
                topology: Scenario::topology_label(topology),
                kind: kind.to_string(),
                algorithm,
                load: *load,
                seed: *seed,
            };
            let requests = arm_requests(arm, &drawn, &stripped, &pinned);
            let split = if arm == Arm::PerType { n_split } else { 0 };
            let (row, outcomes) = one_run(s, &key, arm, grid, &drawn, requests, &counted, split, n_runnable)?;
            if keep_outcomes {
                crate::report::write_outcomes(out, &key, Some(&arm), &outcomes)?;
            }
            rows.lock().expect("rows lock").push(row);
            bar.inc(1);
            Ok(())
        })
    })?;
    bar.finish_and_clear();
    let rows = rows.into_inner().expect("rows lock");
    write_csv(&out.join("runs.csv"), &RUNS_HEADER, sorted(&rows))?;
    let summary = summarise(&rows);
    write_csv(&out.join("summary.csv"), &SUMMARY_HEADER, &summary)?;
    std::fs::write(out.join("heterogeneous.md"), markdown(s, &summary, &paired(&rows)))?;
    Ok(rows.len())
}

#[cfg(test)]
mod tests {
    use coreserve::model::{from_time, Arch, GpuPool, Link, Node, RawPlanRequest, ReservationMethod, SelectionPolicy};

    use super::*;

    const T0: i64 = 1_767_225_600;

    fn scenario() -> Scenario {
        let mut s: Scenario =
            toml::from_str("name = 't'\ntrace = 'unused'\nloads = [1.0]\nseeds = 1\nrequests = 1\nplanners = 1")
                .unwrap();
        s.dir = ".".into();
        s
    }

    fn key(policy: SelectionPolicy) -> RunKey {
        RunKey {
            topology: "t".into(),
            kind: "workflow".into(),
            algorithm: Algorithm { method: ReservationMethod::Bir, policy },
            load: 1.0,
            seed: 1,
        }
    }

    /// A linux site of 16 CPUs at `price` on its own node, with `arch` and optionally 4 A100s.
    fn site(id: &str, price: f64, arch: Arch, gpu: bool) -> Site {
        let mut s = Site::new(id, id, 16, "linux", price);
        s.attributes.arch = arch;
        if gpu {
            s.attributes.gpus =
                vec![GpuPool { model: "a100".into(), count: 4, compute_capability: 8.0, memory_gib: 40 }];
        }
        s
    }

    /// `sites` on a star of 10 Gbit/s links around a router `hub`.
    fn grid(sites: Vec<Site>) -> Grid {
        let mut nodes = vec![Node::new("hub", "")];
        let mut links = Vec::new();
        for s in &sites {
            nodes.push(Node::new(s.node.as_str(), ""));
            links.push(Link {
                id: format!("l-{}", s.id).into(),
                a: "hub".into(),
                b: s.node.clone(),
                capacity_mbps: 10_000,
                price_per_gbps_hour: 0.1,
            });
        }
        label_types(Grid::new(nodes, links, sites).unwrap())
    }

    /// A request arriving at `T0 + at` with `jobs` (no transfers), 8 CPUs each for 10 min.
    fn request(id: &str, at: i64, jobs: &[serde_json::Value]) -> PlanRequest {
        let jobs: Vec<serde_json::Value> = jobs
            .iter()
            .enumerate()
            .map(|(i, requires)| {
                serde_json::json!({"name": format!("J{i}"), "os": "linux", "cpus": 8, "offset_s": 0,
                    "duration_s": 600, "requires": requires})
            })
            .collect();
        let raw: RawPlanRequest = serde_json::from_value(serde_json::json!({
            "id": id, "submitted_at": from_time(T0 + at), "deadline": from_time(T0 + at + 86_400),
            "jobs": jobs, "transfers": [],
        }))
        .unwrap();
        PlanRequest::new(raw).unwrap()
    }

    /// The CSV headers are the rows' serde field names, in order.
    #[test]
    fn csv_headers_match_the_rows() {
        let row = HetRow {
            topology: "t".into(),
            kind: "workflow".into(),
            algorithm: "bir-time".parse().unwrap(),
            arm: Arm::PerType,
            load: 1.0,
            seed: 1,
            requests: 1,
            runnable: 1,
            split: 0,
            committed: 1,
            valid: 1,
            jobs: 1,
            valid_jobs: 1,
            success_rate: 1.0,
            placement_validity: 1.0,
            job_validity: 1.0,
            valid_success: 1.0,
            mean_wait_s: 1800.0,
        };
        assert_eq!(serde_header(&row), RUNS_HEADER.join(","));
        let summary = summarise(&[row.clone(), HetRow { seed: 2, ..row.clone() }]);
        assert_eq!(summary.len(), 1);
        assert_eq!((summary[0].runs, summary[0].wait_s_mean, summary[0].wait_s_ci95), (2, 1800.0, 0.0));
        assert_eq!(serde_header(&summary[0]), SUMMARY_HEADER.join(","));
        let single = HetRow { arm: Arm::Filter, success_rate: 0.9, mean_wait_s: 1900.0, ..row.clone() };
        let typed = HetRow { success_rate: 0.7, mean_wait_s: 2000.0, ..row.clone() };
        let p = paired(&[typed.clone(), single.clone(), HetRow { seed: 2, ..typed }, HetRow { seed: 2, ..single }]);
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].seeds, p[0].ahead, p[0].waits, p[0].longer), (2, 2, 2, 2));
        assert!((p[0].success.0 - 0.2).abs() < 1e-12 && (p[0].wait.0 - 100.0).abs() < 1e-9, "{p:?}");
    }

    fn serde_header<T: Serialize>(row: &T) -> String {
        let mut w = csv::Writer::from_writer(vec![]);
        w.serialize(row).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        text.lines().next().unwrap().to_owned()
    }

    /// A cheap x86_64 site without GPUs and a dear aarch64 one with GPUs; one job needs aarch64
    /// and a GPU, one needs nothing. With `cost`, OS-only matching puts the first on the cheap
    /// site, which cannot run it (validity 1/2); the filter puts it on the GPU site (2/2).
    #[test]
    fn os_only_matching_misplaces_a_gpu_job_and_the_filter_does_not() {
        let g = grid(vec![site("cheap", 0.5, Arch::X86_64, false), site("gpu", 1.5, Arch::Aarch64, true)]);
        let needs = serde_json::json!({"arch": "aarch64", "gpus": {"count": 1}});
        let drawn = vec![request("r0", 0, &[needs]), request("r1", 10, &[serde_json::json!({})])];
        let s = scenario();
        let k = key(SelectionPolicy::Cost);
        let counted: HashSet<&str> = drawn.iter().map(PlanRequest::id).collect();
        let (filter, fo) = one_run(&s, &k, Arm::Filter, &g, &drawn, &drawn, &counted, 0, 2).unwrap();
        assert_eq!((filter.committed, filter.valid), (2, 2), "{fo:?}");
        assert_eq!(fo[0].jobs[0].site.as_str(), "gpu");
        assert_eq!(fo[0].jobs[0].gpus.as_ref().map(|g| g.count), Some(1), "the filter arm reserves the GPU");
        assert_eq!(filter.placement_validity, 1.0);
        let stripped = os_only(&drawn);
        let (os, oo) = one_run(&s, &k, Arm::OsOnly, &g, &drawn, &stripped, &counted, 0, 2).unwrap();
        assert_eq!(oo[0].jobs[0].site.as_str(), "cheap", "OS-only matching picks the cheapest linux site");
        assert_eq!((os.committed, os.valid, os.jobs, os.valid_jobs), (2, 1, 2, 1));
        assert!(os.placement_validity < 1.0);
        assert_eq!((os.placement_validity, os.valid_success), (0.5, 0.5));
        assert_eq!(unmet(g.site("cheap").unwrap(), &drawn[0].jobs()[0]).map(|u| u.rank()), Some(2), "architecture");
    }

    /// Two x86_64 CPU sites, an x86_64 GPU site and an aarch64 site. Unconstrained requests are
    /// spread over the types by CPUs; a GPU job goes to the GPU type; a request with an
    /// aarch64 job and a GPU job is split. Every job lands on a site of its pinned type.
    #[test]
    fn a_pinned_request_lands_only_on_sites_of_its_type() {
        let g = grid(vec![
            site("x1", 1.0, Arch::X86_64, false),
            site("x2", 1.0, Arch::X86_64, false),
            site("g", 1.0, Arch::X86_64, true),
            site("r", 1.0, Arch::Aarch64, false),
        ]);
        let free = serde_json::json!({});
        let gpu = serde_json::json!({"gpus": {"count": 1}});
        let arm = serde_json::json!({"arch": "aarch64"});
        let mut drawn: Vec<PlanRequest> =
            (0..12).map(|i| request(&format!("u{i}"), 60 * i, std::slice::from_ref(&free))).collect();
        drawn.push(request("gpu", 900, &[gpu.clone(), free.clone()]));
        drawn.push(request("mixed", 960, &[arm, gpu]));
        let pinned = pin_to_types(&g, &drawn, 7, TypeChoice::Weighted);
        let label_of = |r: &PlanRequest, i: usize| -> String {
            let l: Vec<&String> = r.jobs()[i].requires.labels.iter().filter(|l| l.starts_with("type:")).collect();
            assert_eq!(l.len(), 1, "one type per job: {r:?}");
            l[0].clone()
        };
        let mut used = HashSet::new();
        for r in &pinned.requests[..12] {
            used.insert(label_of(r, 0));
        }
        assert!(used.len() >= 2, "unconstrained requests are spread over the types: {used:?}");
        let gpu_req = &pinned.requests[12];
        assert_eq!((label_of(gpu_req, 0), label_of(gpu_req, 1)), ("type:x86_64-gpu".into(), "type:x86_64-gpu".into()));
        let mixed = &pinned.requests[13];
        assert_eq!((label_of(mixed, 0), label_of(mixed, 1)), ("type:aarch64-cpu".into(), "type:x86_64-gpu".into()));
        assert_eq!(pinned.split, [vec![false; 13], vec![true]].concat());
        let largest = pin_to_types(&g, &drawn, 7, TypeChoice::Largest);
        assert!(
            largest.requests[..12].iter().all(|r| label_of(r, 0) == "type:x86_64-cpu"),
            "`largest` sends every unconstrained request to the type with the most CPUs"
        );
        assert_eq!(label_of(&largest.requests[12], 0), "type:x86_64-gpu");
        let counted: HashSet<&str> = drawn.iter().map(PlanRequest::id).collect();
        let (row, outcomes) = one_run(
            &scenario(),
            &key(SelectionPolicy::Time),
            Arm::PerType,
            &g,
            &drawn,
            &pinned.requests,
            &counted,
            1,
            14,
        )
        .unwrap();
        assert_eq!(row.committed, 14, "{outcomes:?}");
        for (o, r) in outcomes.iter().zip(&pinned.requests) {
            assert_eq!(o.request_id, r.id());
            for (i, j) in o.jobs.iter().enumerate() {
                let site = g.site(&j.site).unwrap();
                assert_eq!(type_label(&site_type(site)), label_of(r, i), "{} job {} on {}", r.id(), j.name, j.site);
            }
        }
    }
}
