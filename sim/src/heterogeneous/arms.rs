//! The three arms of the heterogeneity experiment and what each plans: the requests as drawn
//! (`filter`), without their requirements (`os-only`) or pinned to one site type
//! (`per-type`), on a grid whose sites are labelled with their types.

use std::collections::BTreeMap;
use std::fmt;

use coreserve::model::{unmet, ComputeDemand, Grid, PlanRequest, Requirements, Site};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Serialize, Serializer};

use crate::scenario::heterogeneity::TypeChoice;

/// Stream salt of the per-type arm's choice of a type (docs/simulator.md, random streams).
const PIN_SEED: u64 = 0x7479_7065_7069_6e00;

/// How a run's requests reach the planner (`crate::heterogeneous`'s module docs).
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
    /// Every arm, in the order of the tables.
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

/// The requests of `arm` for a workload drawn as `drawn`.
pub fn arm_requests<'a>(
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
