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

use crate::model::{Grid, Link, Outcome, OutcomeStatus, PlanRequest, Site};

/// Checks a whole batch of outcomes; returns every violation (empty = valid).
///
/// Per outcome:
/// - its request id is known (`requests`) and no other outcome answers the same request;
/// - **rejected**: no start, no placements, cost 0;
/// - **committed**: a start exists and is `>= max(submitted_at + w_interval_s, not_before)`;
///   every job of the request is placed exactly once, on an existing site whose OS equals the
///   job's (case-insensitive), with the job's CPUs, over exactly
///   `[start + offset_s, start + offset_s + duration_s)`; every transfer is placed exactly once
///   (placements are matched to transfers by their `(from, to)` job names, in order, so the
///   direction must be the request's), with the transfer's bandwidth, over its exact interval,
///   along a path of existing links that walks from the node of the sender's site to the node of
///   the receiver's site (each link may be crossed in either direction, no link twice), or an
///   empty path when both sites are on the same node; nothing ends after the deadline; `cost`
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
            OutcomeStatus::Rejected => plan::check_rejected(o, &mut found),
            // A dry run books nothing: its placements are not checked.
            OutcomeStatus::Planned => {}
            OutcomeStatus::Committed => {
                if let Some(req) = req {
                    plan::check_committed(&res, grid, req, o, w_interval_s, &mut found);
                }
            }
        }
        out.extend(found.drain(..).map(|kind| Violation::plan(rid, kind)));
    }
    out.extend(capacity::overbookings(&res, outcomes));
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
