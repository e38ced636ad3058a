//! The fair-share experiment's workload: `steady`'s requests over the whole run and `flood`'s
//! from `flood_from_day`, and the phases (before the flood, during it) of the run.

use std::fmt;

use anyhow::{bail, Context, Result};
use coreserve::model::{PlanRequest, Time};
use coreserve::workload::{generate, AppKind, WorkloadParams};
use serde::{Serialize, Serializer};

use super::projects::{FLOOD, STEADY};
use crate::scenario::fairshare::seconds;
use crate::scenario::Scenario;

/// Stream salt of the flood's workload (docs/simulator.md, random streams).
const FLOOD_SEED: u64 = 0x666c_6f6f_6400_0000;

/// Before the flood, or during it (by a request's `submitted_at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    Before,
    Flood,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Before => "before",
            Phase::Flood => "flood",
        })
    }
}

impl Serialize for Phase {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One run's requests and its phases.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Both projects' requests by arrival (then id).
    pub requests: Vec<PlanRequest>,
    pub start: Time,
    pub flood_start: Time,
    /// The end of the run's arrivals (and of the flood).
    pub end: Time,
}

impl Workload {
    /// The phase of an arrival at `t`.
    pub fn phase(&self, t: Time) -> Phase {
        if t < self.flood_start {
            Phase::Before
        } else {
            Phase::Flood
        }
    }

    /// `[from, to)` of `phase`.
    pub fn span(&self, phase: Phase) -> (Time, Time) {
        match phase {
            Phase::Before => (self.start, self.flood_start),
            Phase::Flood => (self.flood_start, self.end),
        }
    }
}

/// `project`'s requests: the generator's stream (`base` with `load`, `seed`) from `from`,
/// those arriving before `until`, each with user `project` and id `PROJECT-NNNNNN`.
fn project_requests(
    cpus: &[u32],
    grid_cpus: u64,
    base: &WorkloadParams,
    project: &str,
    load: f64,
    seed: u64,
    (from, until): (Time, Time),
) -> Result<Vec<PlanRequest>> {
    // The stream is drawn for a number of requests; draw more until it reaches `until`.
    let mut n = 256;
    let drawn = loop {
        let params = WorkloadParams { requests: n, load, seed, start: from, ..base.clone() };
        let drawn = generate(cpus, grid_cpus, &params)?;
        if drawn.last().is_none_or(|r| r.submitted_at() >= until) {
            break drawn;
        }
        if n >= 1 << 24 {
            bail!("project {project}: over {n} requests to fill the run");
        }
        n *= 2;
    };
    drawn
        .into_iter()
        .filter(|r| r.submitted_at() < until)
        .map(|r| {
            let mut raw = r.raw().clone();
            raw.id = format!("{project}-{}", raw.id.trim_start_matches("req-"));
            raw.user = project.into();
            PlanRequest::new(raw).with_context(|| format!("renaming a request of {project}"))
        })
        .collect()
}

/// The workload of one run: `steady` at its pace over the whole run, `flood` at `flood_load`
/// from `flood_from_day` (its own stream), on a grid of `grid_cpus` CPUs.
///
/// # Errors
/// The generator's.
pub fn workload(
    s: &Scenario,
    cpus: &[u32],
    grid_cpus: u64,
    kind: AppKind,
    flood_load: f64,
    seed: u64,
) -> Result<Workload> {
    let p = &s.fairshare;
    let start = s.workload.start;
    let (flood_start, end) = (start + seconds(p.flood_from_day), start + seconds(p.days));
    let base = WorkloadParams { kind, w_interval_s: s.w_interval_s, users: 1, ..s.workload.clone() };
    let mut requests = project_requests(cpus, grid_cpus, &base, STEADY, p.steady_load, seed, (start, end))?;
    requests.extend(project_requests(
        cpus,
        grid_cpus,
        &base,
        FLOOD,
        flood_load,
        seed ^ FLOOD_SEED,
        (flood_start, end),
    )?);
    requests.sort_by(|a, b| (a.submitted_at(), a.id()).cmp(&(b.submitted_at(), b.id())));
    Ok(Workload { requests, start, flood_start, end })
}
