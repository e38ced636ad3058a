//! The generator's parameters: application kinds, request shapes, the CPU model and
//! [`WorkloadParams`] with its validation.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{RequirementsProfile, WorkloadError};
use crate::model::{Time, UnknownValue};

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
    type Err = UnknownValue;
    /// Case-insensitive `workflow` / `coallocation`.
    fn from_str(s: &str) -> Result<Self, UnknownValue> {
        match s.to_ascii_lowercase().as_str() {
            "workflow" => Ok(AppKind::Workflow),
            "coallocation" => Ok(AppKind::Coallocation),
            other => Err(UnknownValue::new("application kind", other, "one of: workflow, coallocation")),
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

/// Parameters of [`generate`](super::generate). `Default` gives the paper's set-up; in JSON (a scenario file)
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
    /// What jobs require of their sites. Default [`RequirementsProfile::None`].
    pub requirements: RequirementsProfile,
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
            requirements: RequirementsProfile::None,
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
