//! Synthetic plan-request workloads following the paper's experiment (Ando & Aida, section 4,
//! Table 1; see docs/simulator.md).
//!
//! Every request is one application (a workflow or a co-allocation) whose shape is a small graph
//! of jobs ([`Shape`]). Per compute demand: OS `linux:solaris:bsd = 1:1:1`, CPU count drawn from
//! an SWF trace's processor counts modelled into `[8, 128]` ([`CpuModel`]), duration
//! `600:1200:1800:3600:5400:7200 s = 2:2:2:2:1:1`. Per network demand: bandwidth
//! `500:1000:2000 Mbit/s = 6:3:1`, duration from the same duration distribution. Deadline:
//! `submitted_at + w_interval + span * f`, `f ~ Normal(5, 1.02)` (95 % in `[3, 7]`). Arrivals are
//! Poisson with the rate that makes the offered load equal to [`WorkloadParams::load`].
//!
//! # Random streams (independent, as the Bricks simulator taught; docs/simulator.md)
//! Every random component has its own ChaCha8 stream, derived from one seed with
//! [`ChaCha8Rng::set_stream`]: arrivals (1), CPU counts (2), job durations (3), transfer
//! durations (4), OS (5), bandwidths (6), deadline factors (7), users (8). The number of draws a
//! request takes from each stream depends only on the shape, so changing `load` changes only the
//! arrival times (and with them the absolute deadlines, by the same shift), and generating more
//! requests keeps the demands of the first ones.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::str::FromStr;

use rand::distributions::{Distribution, WeightedIndex};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Exp, Normal};
use serde::{Deserialize, Serialize};

use crate::model::{from_time, ComputeDemand, NetworkDemand, PlanRequest, RawPlanRequest, RequestError, Time};

/// The two application kinds of Ando & Aida (section 4, Figs. 5 and 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AppKind {
    /// Jobs feed each other along the edges of a DAG; a transfer runs while both of its jobs run,
    /// so consecutive jobs overlap by at least the transfer time (docs/model.md).
    #[default]
    Workflow,
    /// MPI-like: every job and every transfer has offset 0 and one common duration.
    Coallocation,
}

impl AppKind {
    /// Every variant, in declaration order.
    pub const ALL: &'static [AppKind] = &[AppKind::Workflow, AppKind::Coallocation];

    /// The default request graph of the kind (docs/simulator.md): a 4-job diamond for workflows,
    /// 4 jobs with all 6 pairs communicating for co-allocations.
    pub fn default_shape(self) -> Shape {
        match self {
            AppKind::Workflow => Shape::Diamond,
            AppKind::Coallocation => Shape::AllPairs(4),
        }
    }
}

impl fmt::Display for AppKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AppKind::Workflow => "workflow",
            AppKind::Coallocation => "coallocation",
        })
    }
}

impl FromStr for AppKind {
    type Err = String;
    /// Case-insensitive `workflow` / `coallocation`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "workflow" => Ok(AppKind::Workflow),
            "coallocation" => Ok(AppKind::Coallocation),
            other => Err(format!("unknown application kind `{other}`; expected one of: workflow, coallocation")),
        }
    }
}

/// The graph of one application: jobs are numbered `0..jobs()`, named `A`, `B`, ... (or `J1`,
/// `J2`, ... beyond 26 jobs, see [`Shape::job_name`]); each edge `(u, v)` is one transfer from job
/// `u` to job `v`.
///
/// For a workflow every edge must point forward (`u < v`), so job indices are a topological
/// order and job 0 is a source (offset 0). JSON (externally tagged): `"diamond"`,
/// `{"all_pairs":4}`, `{"chain":3}`, `{"edges":{"jobs":3,"edges":[[0,1],[1,2]]}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// 4 jobs: A->B, A->C, B->D, C->D (the default for workflows; docs/simulator.md).
    Diamond,
    /// `n` jobs, one edge `i->j` for every pair `i < j` (`n(n-1)/2` edges; the default
    /// for co-allocation with `n = 4`).
    AllPairs(usize),
    /// `n` jobs in a line: `0->1->...->n-1`.
    Chain(usize),
    /// An explicit graph.
    Edges {
        /// Number of jobs, >= 1.
        jobs: usize,
        /// Transfers as `(from, to)` job indices.
        edges: Vec<(usize, usize)>,
    },
}

impl Shape {
    /// Number of jobs.
    pub fn jobs(&self) -> usize {
        match self {
            Shape::Diamond => 4,
            Shape::AllPairs(n) | Shape::Chain(n) => *n,
            Shape::Edges { jobs, .. } => *jobs,
        }
    }

    /// The transfers as `(from, to)` job indices, in a fixed order.
    pub fn edges(&self) -> Vec<(usize, usize)> {
        match self {
            Shape::Diamond => vec![(0, 1), (0, 2), (1, 3), (2, 3)],
            Shape::AllPairs(n) => (0..*n).flat_map(|i| (i + 1..*n).map(move |j| (i, j))).collect(),
            Shape::Chain(n) => (1..*n).map(|i| (i - 1, i)).collect(),
            Shape::Edges { edges, .. } => edges.clone(),
        }
    }

    /// The name of job `i` in a shape of `n` jobs: `A`..`Z` when `n <= 26`, else `J1`..`Jn`.
    pub fn job_name(i: usize, n: usize) -> String {
        if n <= 26 {
            char::from(b'A' + i as u8).to_string()
        } else {
            format!("J{}", i + 1)
        }
    }

    /// Checks the shape for `kind`: at least one job; edges join two distinct existing jobs; no
    /// pair joined twice (in either direction); for [`AppKind::Workflow`] every edge `u < v`.
    ///
    /// # Errors
    /// [`WorkloadError::BadShape`] naming the problem.
    pub fn validate(&self, kind: AppKind) -> Result<(), WorkloadError> {
        let n = self.jobs();
        if n == 0 {
            return Err(WorkloadError::BadShape("a shape needs at least one job".into()));
        }
        let mut seen = std::collections::HashSet::new();
        for (u, v) in self.edges() {
            if u >= n || v >= n {
                return Err(WorkloadError::BadShape(format!("edge ({u}, {v}) names a job >= {n}")));
            }
            if u == v {
                return Err(WorkloadError::BadShape(format!("edge ({u}, {v}) is a self-loop")));
            }
            if !seen.insert((u.min(v), u.max(v))) {
                return Err(WorkloadError::BadShape(format!("jobs {u} and {v} are joined twice")));
            }
            if kind == AppKind::Workflow && u > v {
                return Err(WorkloadError::BadShape(format!(
                    "workflow edge ({u}, {v}) points backwards; number the jobs in topological order"
                )));
            }
        }
        Ok(())
    }
}

/// How trace processor counts are brought into [`WorkloadParams::cpu_range`] (Ando & Aida say only
/// "modelled into [8, 128]").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CpuModel {
    /// Values below the range become the minimum, values above become the maximum (keeps every
    /// trace job; on SDSC-BLUE 13,030 of 243,306 jobs (5.4 %) are above 128 and become 128). The
    /// default.
    #[default]
    Clamp,
    /// Values outside the range are dropped and the rest sampled uniformly.
    Discard,
}

/// Parameters of [`generate`]. `Default` gives the paper's set-up; in JSON (a scenario file)
/// every field is optional and falls back to its default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkloadParams {
    /// Application kind. Default [`AppKind::Workflow`].
    pub kind: AppKind,
    /// Request graph; `None` = [`AppKind::default_shape`]. Default `None`.
    pub shape: Option<Shape>,
    /// Number of requests to generate. Default 1000.
    pub requests: usize,
    /// Offered load `L` > 0: expected requested CPU-seconds per second divided by the grid's
    /// total CPUs. Default 0.5.
    pub load: f64,
    /// Seed of every random stream. Default 1.
    pub seed: u64,
    /// Arrival time of the first request (seconds since the Unix epoch). Default
    /// 2026-01-01T00:00:00Z (1 767 225 600).
    pub start: Time,
    /// The planners' `w_interval` in seconds (>= 0), added to the deadline so that the span
    /// scaled by the deadline factor is measured from the earliest possible plan start (Ando & Aida,
    /// section 3.1). Default 1800 (30 min).
    pub w_interval_s: i64,
    /// Number of users `user-1`..`user-N`, each request's user drawn uniformly. Default 10.
    pub users: usize,
    /// Inclusive CPU range of a compute demand, `1 <= min <= max`. Default `(8, 128)`.
    pub cpu_range: (u32, u32),
    /// How trace values outside `cpu_range` are handled. Default [`CpuModel::Clamp`].
    pub cpu_model: CpuModel,
    /// `(os, weight)` choices of a compute demand. Default `linux`, `solaris`, `bsd`, 1:1:1.
    pub os: Vec<(String, u32)>,
    /// `(seconds, weight)` choices of a job or transfer duration. Default
    /// 600, 1200, 1800, 3600, 5400, 7200 with weights 2:2:2:2:1:1.
    pub durations_s: Vec<(i64, u32)>,
    /// `(Mbit/s, weight)` choices of a transfer's bandwidth. Default 500, 1000, 2000 with weights
    /// 6:3:1.
    pub bandwidths_mbps: Vec<(u64, u32)>,
    /// Mean of the deadline factor `f`. Default 5.0.
    pub deadline_factor_mean: f64,
    /// Standard deviation of `f`. Default 1.02 (so that 95 % of `f` lies in `[3, 7]`).
    pub deadline_factor_sd: f64,
    /// Lower clamp of `f`, >= 1.0 (a smaller factor makes a request no planner can satisfy; the
    /// normal law goes below 1 with probability about 4e-5). Default 1.0.
    pub deadline_factor_min: f64,
}

/// 2026-01-01T00:00:00Z in seconds since the Unix epoch.
pub const DEFAULT_START: Time = 1_767_225_600;

impl Default for WorkloadParams {
    fn default() -> Self {
        WorkloadParams {
            kind: AppKind::Workflow,
            shape: None,
            requests: 1000,
            load: 0.5,
            seed: 1,
            start: DEFAULT_START,
            w_interval_s: 1800,
            users: 10,
            cpu_range: (8, 128),
            cpu_model: CpuModel::Clamp,
            os: ["linux", "solaris", "bsd"].iter().map(|s| ((*s).to_owned(), 1)).collect(),
            durations_s: vec![(600, 2), (1200, 2), (1800, 2), (3600, 2), (5400, 1), (7200, 1)],
            bandwidths_mbps: vec![(500, 6), (1000, 3), (2000, 1)],
            deadline_factor_mean: 5.0,
            deadline_factor_sd: 1.02,
            deadline_factor_min: 1.0,
        }
    }
}

impl WorkloadParams {
    /// The default parameters for `kind` (its default shape).
    pub fn for_kind(kind: AppKind) -> Self {
        WorkloadParams { kind, ..Self::default() }
    }

    /// The effective shape: `shape` or the kind's default.
    pub fn effective_shape(&self) -> Shape {
        self.shape.clone().unwrap_or_else(|| self.kind.default_shape())
    }

    /// Checks every parameter (not the trace).
    ///
    /// # Errors
    /// [`WorkloadError::BadParam`] or [`WorkloadError::BadShape`] for the first problem found.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let bad = |name: &'static str, reason: String| Err(WorkloadError::BadParam { name, reason });
        if !(self.load.is_finite() && self.load > 0.0) {
            return bad("load", format!("must be a finite number > 0 (got {})", self.load));
        }
        if self.w_interval_s < 0 {
            return bad("w_interval_s", format!("must be >= 0 (got {})", self.w_interval_s));
        }
        if self.users == 0 {
            return bad("users", "must be >= 1".into());
        }
        let (lo, hi) = self.cpu_range;
        if lo == 0 || lo > hi {
            return bad("cpu_range", format!("must satisfy 1 <= min <= max (got ({lo}, {hi}))"));
        }
        weights_ok("os", self.os.iter().map(|c| c.1))?;
        if self.os.iter().any(|c| c.0.trim().is_empty()) {
            return bad("os", "an OS name is empty".into());
        }
        weights_ok("durations_s", self.durations_s.iter().map(|c| c.1))?;
        if let Some(d) = self.durations_s.iter().find(|c| c.0 <= 0) {
            return bad("durations_s", format!("durations must be > 0 (got {})", d.0));
        }
        weights_ok("bandwidths_mbps", self.bandwidths_mbps.iter().map(|c| c.1))?;
        if self.bandwidths_mbps.iter().any(|c| c.0 == 0) {
            return bad("bandwidths_mbps", "bandwidths must be > 0".into());
        }
        if !(self.deadline_factor_mean.is_finite()
            && self.deadline_factor_sd.is_finite()
            && self.deadline_factor_sd >= 0.0)
        {
            return bad("deadline_factor_sd", "mean and sd must be finite and sd >= 0".into());
        }
        if !(self.deadline_factor_min.is_finite() && self.deadline_factor_min >= 1.0) {
            return bad("deadline_factor_min", format!("must be >= 1.0 (got {})", self.deadline_factor_min));
        }
        self.effective_shape().validate(self.kind)
    }
}

fn weights_ok(name: &'static str, weights: impl Iterator<Item = u32>) -> Result<(), WorkloadError> {
    let total: u64 = weights.map(u64::from).sum();
    if total == 0 {
        return Err(WorkloadError::BadParam { name, reason: "needs at least one choice with weight > 0".into() });
    }
    Ok(())
}

/// Why a workload could not be generated, written or read.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The trace's CPU list is empty.
    #[error("the trace has no processor counts")]
    EmptyTrace,
    /// With [`CpuModel::Discard`], no trace value lies in the range.
    #[error("no trace processor count lies in [{min}, {max}]")]
    NoCpusInRange {
        /// Range minimum.
        min: u32,
        /// Range maximum.
        max: u32,
    },
    /// `total_cpus` is 0 (the offered load would be undefined).
    #[error("the grid has no CPUs")]
    ZeroTotalCpus,
    /// A [`WorkloadParams`] field is out of its domain.
    #[error("workload parameter `{name}`: {reason}")]
    BadParam {
        /// Field name.
        name: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The request graph is unusable for the kind.
    #[error("bad request shape: {0}")]
    BadShape(String),
    /// A generated request failed [`PlanRequest::new`] (a generator bug).
    #[error("generated request {id} is invalid: {source}")]
    Invalid {
        /// Request id.
        id: String,
        /// The validation error.
        source: RequestError,
    },
    /// Reading or writing a JSON-lines file failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
    /// A JSON line could not be parsed or is not a valid request.
    #[error("JSON line {line}: {source}")]
    Json {
        /// 1-based line number.
        line: usize,
        /// The parse / validation error.
        source: serde_json::Error,
    },
}

/// Stream numbers of the random components (see the module documentation).
mod stream {
    pub const ARRIVALS: u64 = 1;
    pub const CPUS: u64 = 2;
    pub const JOB_DURATIONS: u64 = 3;
    pub const TRANSFER_DURATIONS: u64 = 4;
    pub const OS: u64 = 5;
    pub const BANDWIDTHS: u64 = 6;
    pub const DEADLINE_FACTORS: u64 = 7;
    pub const USERS: u64 = 8;
}

fn rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// A discrete distribution over `values` with integer weights.
struct Weighted<T> {
    values: Vec<T>,
    index: WeightedIndex<u32>,
}

impl<T: Clone> Weighted<T> {
    fn new(choices: &[(T, u32)]) -> Self {
        let index = WeightedIndex::new(choices.iter().map(|c| c.1)).expect("weights checked by validate");
        Weighted { values: choices.iter().map(|c| c.0.clone()).collect(), index }
    }
    fn sample(&self, r: &mut ChaCha8Rng) -> T {
        self.values[self.index.sample(r)].clone()
    }
}

/// The trace's processor counts modelled into `range` (see [`CpuModel`]); the generator samples
/// this list uniformly, so its empirical distribution is the CPU-count distribution.
///
/// # Errors
/// [`WorkloadError::EmptyTrace`] for an empty list; [`WorkloadError::NoCpusInRange`] when
/// [`CpuModel::Discard`] leaves nothing.
pub fn model_cpus(trace_cpus: &[u32], range: (u32, u32), model: CpuModel) -> Result<Vec<u32>, WorkloadError> {
    if trace_cpus.is_empty() {
        return Err(WorkloadError::EmptyTrace);
    }
    let (lo, hi) = range;
    let pool: Vec<u32> = match model {
        CpuModel::Clamp => trace_cpus.iter().map(|&c| c.clamp(lo, hi)).collect(),
        CpuModel::Discard => trace_cpus.iter().copied().filter(|c| (lo..=hi).contains(c)).collect(),
    };
    if pool.is_empty() {
        return Err(WorkloadError::NoCpusInRange { min: lo, max: hi });
    }
    Ok(pool)
}

/// The demands of one request before its arrival time is known.
struct Demands {
    user: String,
    jobs: Vec<ComputeDemand>,
    transfers: Vec<NetworkDemand>,
    factor: f64,
}

/// Generates `params.requests` plan requests (Ando & Aida, section 4; docs/simulator.md).
///
/// - `trace_cpus`: processor counts of an SWF trace (e.g. [`super::swf::procs_of`] of
///   SDSC-BLUE), modelled into `params.cpu_range` by [`model_cpus`] and sampled uniformly.
/// - `total_cpus`: CPUs of the whole grid, the denominator of the offered load.
///
/// Timing of a **co-allocation**: one duration `d` is drawn; every job and transfer has offset 0
/// and duration `d`. Timing of a **workflow** (jobs in index order, a topological order):
/// durations `d_v` are drawn per job and `t_uv` per transfer, `t_uv` capped at `min(d_u, d_v)`;
/// a job without predecessors has offset 0; otherwise `offset(v) = min over predecessors u of
/// (end_u - t_uv)`, and the transfer `u->v` occupies `[end_u - t_uv, end_u)` (it ends when its
/// sender ends). If some predecessor ends after `offset(v) + d_v`, `d_v` is extended to that
/// end, so every transfer lies inside both of its jobs. All offsets are relative to the
/// application start.
///
/// Deadline: `submitted_at + w_interval_s + round(span * f)`, `span` the latest job end offset,
/// `f ~ Normal(deadline_factor_mean, deadline_factor_sd)` clamped to `>= deadline_factor_min`.
///
/// Arrivals: Poisson with rate `lambda = load * total_cpus / mean cpu-seconds per request`, the
/// mean taken over the generated requests, so the expected requested CPU-seconds per second is
/// `load * total_cpus`. The first request arrives at `start`; exponential inter-arrival gaps are
/// accumulated in real numbers and each arrival time rounded to whole seconds (no rounding drift).
/// Ids are `req-000001`, `req-000002`, ...; users `user-1`..`user-N` drawn uniformly.
///
/// Deterministic: the same arguments give the same output. Each random component has its own
/// stream (module documentation), so `load` changes only the arrival times.
///
/// # Errors
/// Parameter, shape and trace errors ([`WorkloadError`]); `requests == 0` gives an empty list.
pub fn generate(
    trace_cpus: &[u32],
    total_cpus: u64,
    params: &WorkloadParams,
) -> Result<Vec<PlanRequest>, WorkloadError> {
    params.validate()?;
    let pool = model_cpus(trace_cpus, params.cpu_range, params.cpu_model)?;
    if total_cpus == 0 {
        return Err(WorkloadError::ZeroTotalCpus);
    }
    if params.requests == 0 {
        return Ok(vec![]);
    }
    let shape = params.effective_shape();
    let (n, edges) = (shape.jobs(), shape.edges());
    let names: Vec<String> = (0..n).map(|i| Shape::job_name(i, n)).collect();

    let seed = params.seed;
    let mut r_cpus = rng(seed, stream::CPUS);
    let mut r_jdur = rng(seed, stream::JOB_DURATIONS);
    let mut r_tdur = rng(seed, stream::TRANSFER_DURATIONS);
    let mut r_os = rng(seed, stream::OS);
    let mut r_bw = rng(seed, stream::BANDWIDTHS);
    let mut r_factor = rng(seed, stream::DEADLINE_FACTORS);
    let mut r_users = rng(seed, stream::USERS);
    let mut r_arrivals = rng(seed, stream::ARRIVALS);

    let os = Weighted::new(&params.os);
    let durations = Weighted::new(&params.durations_s);
    let bandwidths = Weighted::new(&params.bandwidths_mbps);
    let factor = Normal::new(params.deadline_factor_mean, params.deadline_factor_sd)
        .map_err(|e| WorkloadError::BadParam { name: "deadline_factor_sd", reason: e.to_string() })?;

    let mut all = Vec::with_capacity(params.requests);
    for _ in 0..params.requests {
        let user = format!("user-{}", r_users.gen_range(1..=params.users));
        let oses: Vec<String> = (0..n).map(|_| os.sample(&mut r_os)).collect();
        let cpus: Vec<u32> = (0..n).map(|_| pool[r_cpus.gen_range(0..pool.len())]).collect();
        let bws: Vec<u64> = edges.iter().map(|_| bandwidths.sample(&mut r_bw)).collect();
        let (offsets, durs, transfer_times) = match params.kind {
            AppKind::Coallocation => {
                let d = durations.sample(&mut r_jdur);
                (vec![0; n], vec![d; n], vec![(0, d); edges.len()])
            }
            AppKind::Workflow => {
                let d: Vec<i64> = (0..n).map(|_| durations.sample(&mut r_jdur)).collect();
                let t: Vec<i64> = edges.iter().map(|_| durations.sample(&mut r_tdur)).collect();
                workflow_timing(d, &edges, &t)
            }
        };
        let jobs = (0..n)
            .map(|i| ComputeDemand {
                name: names[i].clone(),
                os: oses[i].clone(),
                cpus: cpus[i],
                offset_s: offsets[i],
                duration_s: durs[i],
            })
            .collect();
        let transfers = edges
            .iter()
            .zip(&transfer_times)
            .zip(&bws)
            .map(|((&(u, v), &(offset_s, duration_s)), &bandwidth_mbps)| NetworkDemand {
                from: names[u].clone(),
                to: names[v].clone(),
                bandwidth_mbps,
                offset_s,
                duration_s,
            })
            .collect();
        let f = factor.sample(&mut r_factor).max(params.deadline_factor_min);
        all.push(Demands { user, jobs, transfers, factor: f });
    }

    let cpu_seconds = |d: &Demands| d.jobs.iter().map(|j| f64::from(j.cpus) * j.duration_s as f64).sum::<f64>();
    let mean = all.iter().map(cpu_seconds).sum::<f64>() / all.len() as f64;
    let lambda = params.load * total_cpus as f64 / mean;
    let gap = Exp::new(lambda).map_err(|e| WorkloadError::BadParam { name: "load", reason: e.to_string() })?;

    let mut t = 0.0f64;
    let mut out = Vec::with_capacity(all.len());
    for (i, d) in all.into_iter().enumerate() {
        if i > 0 {
            t += gap.sample(&mut r_arrivals);
        }
        let submitted = params.start + t.round() as i64;
        let span = d.jobs.iter().map(ComputeDemand::end_offset_s).max().unwrap_or(0);
        let deadline = submitted + params.w_interval_s + (span as f64 * d.factor).round() as i64;
        let id = format!("req-{:06}", i + 1);
        let raw = RawPlanRequest {
            id: id.clone(),
            user: d.user,
            submitted_at: from_time(submitted),
            deadline: from_time(deadline),
            not_before: None,
            jobs: d.jobs,
            transfers: d.transfers,
            policy: None,
            method: None,
        };
        out.push(PlanRequest::new(raw).map_err(|source| WorkloadError::Invalid { id, source })?);
    }
    Ok(out)
}

/// Workflow offsets (see [`generate`]): returns `(job offsets, job durations (possibly
/// extended), (offset, duration) of every transfer)`. `edges` must point forward (`u < v`).
fn workflow_timing(
    mut dur: Vec<i64>,
    edges: &[(usize, usize)],
    t_drawn: &[i64],
) -> (Vec<i64>, Vec<i64>, Vec<(i64, i64)>) {
    let n = dur.len();
    let mut offset = vec![0i64; n];
    let mut t_eff = vec![0i64; edges.len()];
    for v in 0..n {
        let mut start: Option<i64> = None;
        let mut latest_pred_end = 0i64;
        for (k, &(u, _)) in edges.iter().enumerate().filter(|(_, e)| e.1 == v) {
            let end_u = offset[u] + dur[u];
            let t = t_drawn[k].min(dur[u]).min(dur[v]);
            t_eff[k] = t;
            start = Some(start.map_or(end_u - t, |s| s.min(end_u - t)));
            latest_pred_end = latest_pred_end.max(end_u);
        }
        if let Some(s) = start {
            offset[v] = s;
            if s + dur[v] < latest_pred_end {
                dur[v] = latest_pred_end - s;
            }
        }
    }
    let transfers = edges.iter().zip(&t_eff).map(|(&(u, _), &t)| (offset[u] + dur[u] - t, t)).collect();
    (offset, dur, transfers)
}

/// Writes requests as JSON lines (one raw request object per line, the format
/// [`read_jsonl`] and the CLI read) to any writer.
///
/// # Errors
/// [`WorkloadError::Io`] if writing fails.
pub fn write_jsonl_to<W: Write>(reqs: &[PlanRequest], mut w: W) -> Result<(), WorkloadError> {
    let io_err = |source| WorkloadError::Io { context: "writing JSON lines".into(), source };
    for r in reqs {
        serde_json::to_writer(&mut w, r).map_err(|e| io_err(io::Error::other(e)))?;
        w.write_all(b"\n").map_err(io_err)?;
    }
    w.flush().map_err(io_err)
}

/// Writes requests to `path` as JSON lines (creating or truncating the file).
///
/// # Errors
/// [`WorkloadError::Io`] (with the path) if the file cannot be created or written.
pub fn write_jsonl(reqs: &[PlanRequest], path: &Path) -> Result<(), WorkloadError> {
    let file = File::create(path)
        .map_err(|source| WorkloadError::Io { context: format!("cannot create {}", path.display()), source })?;
    write_jsonl_to(reqs, BufWriter::new(file)).map_err(|e| match e {
        WorkloadError::Io { source, .. } => {
            WorkloadError::Io { context: format!("writing {}", path.display()), source }
        }
        other => other,
    })
}

/// Parses JSON lines of requests from a reader; blank lines are skipped; every request is
/// validated ([`PlanRequest::new`]).
///
/// # Errors
/// [`WorkloadError::Json`] with the 1-based line number of the first bad line;
/// [`WorkloadError::Io`] if reading fails.
pub fn parse_jsonl<R: BufRead>(reader: R) -> Result<Vec<PlanRequest>, WorkloadError> {
    let mut out = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|source| WorkloadError::Io { context: format!("reading line {}", i + 1), source })?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(serde_json::from_str(&line).map_err(|source| WorkloadError::Json { line: i + 1, source })?);
    }
    Ok(out)
}

/// Reads a JSON-lines request file written by [`write_jsonl`] (or by hand).
///
/// # Errors
/// As [`parse_jsonl`]; [`WorkloadError::Io`] names the path.
pub fn read_jsonl(path: &Path) -> Result<Vec<PlanRequest>, WorkloadError> {
    let file = File::open(path)
        .map_err(|source| WorkloadError::Io { context: format!("cannot open {}", path.display()), source })?;
    parse_jsonl(BufReader::new(file)).map_err(|e| match e {
        WorkloadError::Io { context, source } => {
            WorkloadError::Io { context: format!("{}: {context}", path.display()), source }
        }
        other => other,
    })
}

#[cfg(test)]
mod tests;
