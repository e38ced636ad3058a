//! Outcome checker: verifies a batch of plan outcomes against the grid and the requests they
//! answer. Used by tests and by the simulator to prove that whatever the planners committed is
//! a set of reservations the resources can actually honour (the rules of docs/model.md).
//!
//! [`check_outcomes`] checks every outcome on its own (placements match the request, times,
//! deadline, paths, cost) and the committed outcomes together (no site over its CPUs and no link
//! over its capacity at any instant). It returns every [`Violation`] found; an empty list means
//! the batch is valid.
//!
//! | module | what |
//! |---|---|
//! | `violation` | what is reported: [`Violation`] (a request's [`PlanViolation`], or an overbooked site or link) and its one-line text |
//! | `plan` | one outcome against its request; [`plan_cost`] |
//! | `capacity` | the committed outcomes together against the sites' CPUs and the links' capacities |

mod capacity;
mod plan;
mod violation;

use std::collections::{HashMap, HashSet};

pub use plan::{plan_cost, COST_REL_TOLERANCE};
pub use violation::{PlanViolation, Violation};

use crate::fairshare::Project;
use crate::model::{from_time, to_time, Grid, Link, Outcome, PlanRequest, PlanStatus, Site, Time};

/// Checks a whole batch of outcomes; returns every violation (empty = valid).
///
/// Per outcome:
/// - its request id is known (`requests`) and no other outcome answers the same request;
/// - **rejected**: no start, no placements, cost 0;
/// - **committed**: a start exists and is `>= max(submitted_at + w_interval_s, not_before)`;
///   every job of the request is placed exactly once, on an existing site whose OS equals the
///   job's (case-insensitive), with the job's CPUs, over exactly
///   `[start + offset_s, start + offset_s + duration_s)` (its laid-out offset) unless it
///   floats (dependencies, no `offset_s`, no concurrent or explicitly timed transfer: placed
///   per job, it is bound by its dependencies instead, reservation length
///   `duration_s + slack_s`); every job starts at least `dependency_gap_s` after each job it
///   is after ends; every transfer is placed exactly once
///   (placements are matched to transfers by their `(from, to)` job names, in order, so the
///   direction must be the request's), with the transfer's bandwidth, over its exact interval (as laid out; a floating job's staged transfer: below),
///   along a path of existing links that walks from the node of the sender's site to the node of
///   the receiver's site (each link may be crossed in either direction, no link twice), or an
///   empty path when both sites are on the same node; a staged transfer lies between its
///   producer's end and its consumer's start, a concurrent one inside both jobs; a staged
///   transfer of a floating job lasts its duration exactly, or at most that (possibly no
///   time) when both jobs share a site; nothing ends after the deadline; `cost`
///   equals the recomputed cost ([`plan_cost`]) within [`COST_REL_TOLERANCE`] relative.
///
/// Together, over all committed outcomes (including duplicates and unknown requests, since their
/// reservations would be booked too), using the placements as reported: at no instant does a
/// site hold more CPUs than it has, or a link carry more Mbit/s than its capacity (a transfer
/// adds its bandwidth on every link of its path; intervals are half-open, so back-to-back
/// reservations do not overlap).
///
/// Requests without any outcome are not reported here; see [`missing_outcomes`].
pub fn check_outcomes(
    grid: &Grid,
    requests: &[PlanRequest],
    outcomes: &[Outcome],
    w_interval_s: i64,
) -> Vec<Violation> {
    let mut by_id: HashMap<&str, &PlanRequest> = HashMap::new();
    for r in requests {
        by_id.entry(r.id()).or_insert(r);
    }
    let res = Resources { sites: grid.sites().iter().map(|s| (s.id.as_str(), s)).collect(), links: grid.link_index() };
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut found = Vec::new();
    for o in outcomes {
        let rid = o.request_id.as_str();
        if !seen.insert(rid) {
            found.push(PlanViolation::DuplicateOutcome);
        }
        let req = by_id.get(rid).copied();
        if req.is_none() {
            found.push(PlanViolation::UnknownRequest);
        }
        match o.status {
            PlanStatus::Rejected => plan::check_rejected(o, &mut found),
            // A dry run books nothing: its placements are not checked.
            PlanStatus::Planned => {}
            PlanStatus::Committed => {
                if let Some(req) = req {
                    plan::check_committed(&res, grid, req, o, w_interval_s, &mut found);
                }
            }
            other => found.push(PlanViolation::NotAnAnswer(other)),
        }
        out.extend(found.drain(..).map(|kind| Violation::plan(rid, kind)));
    }
    out.extend(capacity::overbookings(&res, outcomes));
    out
}

/// Checks fair share's allocation limit on committed outcomes: in no allocation period does a
/// project (its members' requests; a user no project names is a project of its own, without an
/// allocation) use more CPU-hours (or GPU-hours, when allocated) than its allocation, unless
/// it allows overdraft. A job counts in each period by its part inside it. Recounted here from
/// the placements, independently of [`crate::fairshare::Ledger`].
pub fn check_allocations(projects: &[Project], requests: &[PlanRequest], outcomes: &[Outcome]) -> Vec<Violation> {
    let user_of: HashMap<&str, &str> = requests.iter().map(|r| (r.id(), r.user())).collect();
    let member_of: HashMap<&str, &str> =
        projects.iter().flat_map(|p| p.members.iter().map(move |m| (m.as_str(), p.id.as_str()))).collect();
    let mut out = Vec::new();
    for p in projects.iter().filter(|p| !p.allocation.overdraft) {
        let a = &p.allocation;
        let in_project = |user: &str| member_of.get(user).copied().unwrap_or(user) == p.id;
        // period start -> (CPU-hours, GPU-hours)
        let mut used: std::collections::BTreeMap<Time, (f64, f64)> = Default::default();
        for o in outcomes.iter().filter(|o| o.status == PlanStatus::Committed) {
            if !user_of.get(o.request_id.as_str()).is_some_and(|u| in_project(u)) {
                continue;
            }
            for j in &o.jobs {
                let (start, end) = (to_time(&j.start), to_time(&j.end));
                let mut t = start;
                while t < end {
                    let (ps, pe) = a.period_of(t);
                    let hours = (end.min(pe) - t) as f64 / 3600.0;
                    let e = used.entry(ps).or_default();
                    e.0 += hours * f64::from(j.cpus);
                    e.1 += hours * f64::from(j.gpus.as_ref().map_or(0, |g| g.count));
                    t = pe;
                }
            }
        }
        for (ps, (cpu, gpu)) in used {
            let mut over = |unit, booked: f64, allocated: f64| {
                if booked > allocated + 1e-6 {
                    out.push(Violation::OverAllocation {
                        project: p.id.clone(),
                        unit,
                        period_start: from_time(ps),
                        booked,
                        allocated,
                    });
                }
            };
            over("CPU-hours", cpu, a.cpu_hours);
            if let Some(g) = a.gpu_hours {
                over("GPU-hours", gpu, g);
            }
        }
    }
    out
}

/// Ids of the requests that no outcome answers, in request order.
pub fn missing_outcomes(requests: &[PlanRequest], outcomes: &[Outcome]) -> Vec<String> {
    let answered: HashSet<&str> = outcomes.iter().map(|o| o.request_id.as_str()).collect();
    requests.iter().filter(|r| !answered.contains(r.id())).map(|r| r.id().to_owned()).collect()
}

/// The sites and links of the grid, by id.
struct Resources<'g> {
    sites: HashMap<&'g str, &'g Site>,
    links: HashMap<&'g str, &'g Link>,
}

#[cfg(test)]
mod tests;
