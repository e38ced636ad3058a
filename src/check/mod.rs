//! Outcome checker: verifies a batch of plan outcomes against the grid and the requests they
//! answer. Used by tests and by the simulator to prove that whatever the planners committed is
//! a set of reservations the resources can actually honour (the rules of docs/model.md).
//!
//! [`check_outcomes`] checks every outcome on its own (placements match the request, times,
//! deadline, paths, cost) and the committed outcomes together (no site over its CPUs and no link
//! over its capacity at any instant). It returns every [`Violation`] found; an empty list means
//! the batch is valid.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};

use crate::model::{
    from_time, to_time, Grid, JobPlacement, Link, NetworkDemand, Outcome, OutcomeStatus, PlanRequest, Site, Time,
    TransferPlacement,
};

/// Relative tolerance of the cost comparison.
pub const COST_REL_TOLERANCE: f64 = 1e-6;

/// One rule broken by a batch of outcomes. `Display` gives a one-line English description.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Violation {
    /// An outcome answers a request id that is not among the requests.
    #[error("outcome for unknown request `{request_id}`")]
    UnknownRequest {
        /// The outcome's request id.
        request_id: String,
    },
    /// A second (or later) outcome for the same request.
    #[error("request `{request_id}` has more than one outcome")]
    DuplicateOutcome {
        /// The request answered more than once.
        request_id: String,
    },
    /// A rejected outcome that still carries a start, placements or a non-zero cost.
    #[error("rejected request `{request_id}` is not empty: {detail}")]
    RejectedNotEmpty {
        /// The rejected request.
        request_id: String,
        /// What it carries, e.g. `a start, 2 job placements, cost 3.5`.
        detail: String,
    },
    /// A committed outcome without an application start.
    #[error("committed request `{request_id}` has no start")]
    MissingStart {
        /// The committed request.
        request_id: String,
    },
    /// The plan starts before `max(submitted_at + w_interval, not_before)`.
    #[error("request `{request_id}` starts at {start}, before its earliest start {earliest}")]
    StartTooEarly {
        /// The request.
        request_id: String,
        /// The outcome's application start.
        start: DateTime<Utc>,
        /// `max(submitted_at + w_interval_s, not_before)`.
        earliest: DateTime<Utc>,
    },
    /// Some reservation of the plan ends after the deadline (the latest end is reported).
    #[error("request `{request_id}`: {what} ends at {end}, after the deadline {deadline}")]
    PastDeadline {
        /// The request.
        request_id: String,
        /// The placement that ends last, e.g. ``job `B` `` or `transfer A->B`.
        what: String,
        /// Its end.
        end: DateTime<Utc>,
        /// The request's deadline.
        deadline: DateTime<Utc>,
    },
    /// A job placement names a job the request does not have.
    #[error("request `{request_id}`: placement for unknown job `{job}`")]
    UnknownJob {
        /// The request.
        request_id: String,
        /// The placement's job name.
        job: String,
    },
    /// A job of the request has no placement.
    #[error("request `{request_id}`: job `{job}` is not placed")]
    JobNotPlaced {
        /// The request.
        request_id: String,
        /// The unplaced job.
        job: String,
    },
    /// A job of the request is placed more than once.
    #[error("request `{request_id}`: job `{job}` is placed {count} times")]
    JobPlacedTwice {
        /// The request.
        request_id: String,
        /// The job.
        job: String,
        /// Number of placements (>= 2).
        count: usize,
    },
    /// A job placement names a site the grid does not have.
    #[error("request `{request_id}`: job `{job}` is placed on unknown site `{site}`")]
    UnknownSite {
        /// The request.
        request_id: String,
        /// The job.
        job: String,
        /// The unknown site id.
        site: String,
    },
    /// The site's OS differs from the job's (compared case-insensitively).
    #[error("request `{request_id}`: job `{job}` needs OS `{job_os}` but site `{site}` runs `{site_os}`")]
    WrongOs {
        /// The request.
        request_id: String,
        /// The job.
        job: String,
        /// The site it is placed on.
        site: String,
        /// The OS the job requires.
        job_os: String,
        /// The OS the site runs.
        site_os: String,
    },
    /// The placement holds a different CPU count than the job asked for.
    #[error("request `{request_id}`: job `{job}` holds {placed} CPUs, requested {requested}")]
    WrongCpus {
        /// The request.
        request_id: String,
        /// The job.
        job: String,
        /// CPUs in the placement.
        placed: u32,
        /// CPUs in the request.
        requested: u32,
    },
    /// The job does not occupy exactly `[start + offset_s, start + offset_s + duration_s)`.
    #[error("request `{request_id}`: job `{job}` runs [{start}, {end}), expected [{expected_start}, {expected_end})")]
    JobTiming {
        /// The request.
        request_id: String,
        /// The job.
        job: String,
        /// The placement's start.
        start: DateTime<Utc>,
        /// The placement's end.
        end: DateTime<Utc>,
        /// Plan start + the job's offset.
        expected_start: DateTime<Utc>,
        /// Expected start + the job's duration.
        expected_end: DateTime<Utc>,
    },
    /// The number of placements of transfer `from->to` differs from the number of such transfers
    /// in the request (0 placed = missing; `requested` 0 = a transfer the request does not have;
    /// a reversed direction counts as a different transfer).
    #[error("request `{request_id}`: transfer {from}->{to} is placed {placed} times, requested {requested}")]
    TransferCount {
        /// The request.
        request_id: String,
        /// Sending job.
        from: String,
        /// Receiving job.
        to: String,
        /// Placements with these ends.
        placed: usize,
        /// Transfers of the request with these ends.
        requested: usize,
    },
    /// The placement reserves a different bandwidth than the transfer asked for.
    #[error("request `{request_id}`: transfer {from}->{to} holds {placed} Mbit/s, requested {requested}")]
    WrongBandwidth {
        /// The request.
        request_id: String,
        /// Sending job.
        from: String,
        /// Receiving job.
        to: String,
        /// Mbit/s in the placement.
        placed: u64,
        /// Mbit/s in the request.
        requested: u64,
    },
    /// The transfer does not occupy exactly `[start + offset_s, start + offset_s + duration_s)`.
    #[error(
        "request `{request_id}`: transfer {from}->{to} runs [{start}, {end}), expected [{expected_start}, {expected_end})"
    )]
    TransferTiming {
        /// The request.
        request_id: String,
        /// Sending job.
        from: String,
        /// Receiving job.
        to: String,
        /// The placement's start.
        start: DateTime<Utc>,
        /// The placement's end.
        end: DateTime<Utc>,
        /// Plan start + the transfer's offset.
        expected_start: DateTime<Utc>,
        /// Expected start + the transfer's duration.
        expected_end: DateTime<Utc>,
    },
    /// The path is not a chain of existing links from the sender's site node to the receiver's
    /// (or is not empty although both sites share a node).
    #[error("request `{request_id}`: transfer {from}->{to} has a broken path: {reason}")]
    BrokenPath {
        /// The request.
        request_id: String,
        /// Sending job.
        from: String,
        /// Receiving job.
        to: String,
        /// What is wrong with the path.
        reason: String,
    },
    /// The reported cost differs from the recomputed one by more than [`COST_REL_TOLERANCE`].
    #[error("request `{request_id}`: cost {reported} differs from the recomputed {expected}")]
    WrongCost {
        /// The request.
        request_id: String,
        /// The outcome's `cost`.
        reported: f64,
        /// [`plan_cost`] of the outcome.
        expected: f64,
    },
    /// Committed jobs on a site exceed its CPUs over `[from, to)` (peak reported).
    #[error("site `{site}` is overbooked over [{from}, {to}): {peak} CPUs of {capacity}")]
    SiteOverbooked {
        /// The site.
        site: String,
        /// Start of the overbooked interval.
        from: DateTime<Utc>,
        /// End of the overbooked interval (exclusive).
        to: DateTime<Utc>,
        /// Highest CPU count booked within it.
        peak: u64,
        /// The site's CPUs.
        capacity: u64,
    },
    /// Committed transfers on a link exceed its capacity over `[from, to)` (peak reported).
    #[error("link `{link}` is overbooked over [{from}, {to}): {peak} Mbit/s of {capacity}")]
    LinkOverbooked {
        /// The link.
        link: String,
        /// Start of the overbooked interval.
        from: DateTime<Utc>,
        /// End of the overbooked interval (exclusive).
        to: DateTime<Utc>,
        /// Highest bandwidth booked within it, Mbit/s.
        peak: u64,
        /// The link's `capacity_mbps`.
        capacity: u64,
    },
}

impl Violation {
    /// The request the violation is about; `None` for the capacity violations, which involve
    /// every outcome using the resource.
    pub fn request_id(&self) -> Option<&str> {
        use Violation::*;
        match self {
            UnknownRequest { request_id }
            | DuplicateOutcome { request_id }
            | RejectedNotEmpty { request_id, .. }
            | MissingStart { request_id }
            | StartTooEarly { request_id, .. }
            | PastDeadline { request_id, .. }
            | UnknownJob { request_id, .. }
            | JobNotPlaced { request_id, .. }
            | JobPlacedTwice { request_id, .. }
            | UnknownSite { request_id, .. }
            | WrongOs { request_id, .. }
            | WrongCpus { request_id, .. }
            | JobTiming { request_id, .. }
            | TransferCount { request_id, .. }
            | WrongBandwidth { request_id, .. }
            | TransferTiming { request_id, .. }
            | BrokenPath { request_id, .. }
            | WrongCost { request_id, .. } => Some(request_id),
            SiteOverbooked { .. } | LinkOverbooked { .. } => None,
        }
    }
}

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
    let ctx = Ctx { sites: grid.sites.iter().map(|s| (s.id.as_str(), s)).collect(), links: grid.link_index() };
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut site_use: BTreeMap<&str, Vec<(Time, Time, u64)>> = BTreeMap::new();
    let mut link_use: BTreeMap<&str, Vec<(Time, Time, u64)>> = BTreeMap::new();

    for o in outcomes {
        let rid = o.request_id.as_str();
        if !seen.insert(rid) {
            out.push(Violation::DuplicateOutcome { request_id: rid.to_owned() });
        }
        let req = by_id.get(rid).copied();
        if req.is_none() {
            out.push(Violation::UnknownRequest { request_id: rid.to_owned() });
        }
        match o.status {
            OutcomeStatus::Rejected => check_rejected(o, &mut out),
            // A dry run books nothing: its placements hold no capacity.
            OutcomeStatus::Planned => {}
            OutcomeStatus::Committed => {
                for j in &o.jobs {
                    if ctx.sites.contains_key(j.site.as_str()) {
                        site_use.entry(j.site.as_str()).or_default().push((
                            to_time(&j.start),
                            to_time(&j.end),
                            u64::from(j.cpus),
                        ));
                    }
                }
                for t in &o.transfers {
                    for l in &t.path {
                        if ctx.links.contains_key(l.as_str()) {
                            link_use.entry(l.as_str()).or_default().push((
                                to_time(&t.start),
                                to_time(&t.end),
                                t.bandwidth_mbps,
                            ));
                        }
                    }
                }
                if let Some(req) = req {
                    check_committed(&ctx, grid, req, o, w_interval_s, &mut out);
                }
            }
        }
    }

    for (site, spans) in site_use {
        let capacity = u64::from(ctx.sites[site].cpus);
        for (from, to, peak) in overbooked(spans, capacity) {
            out.push(Violation::SiteOverbooked {
                site: site.to_owned(),
                from: from_time(from),
                to: from_time(to),
                peak,
                capacity,
            });
        }
    }
    for (link, spans) in link_use {
        let capacity = ctx.links[link].capacity_mbps;
        for (from, to, peak) in overbooked(spans, capacity) {
            out.push(Violation::LinkOverbooked {
                link: link.to_owned(),
                from: from_time(from),
                to: from_time(to),
                peak,
                capacity,
            });
        }
    }
    out
}

/// Ids of the requests that no outcome answers, in request order.
pub fn missing_outcomes(requests: &[PlanRequest], outcomes: &[Outcome]) -> Vec<String> {
    let answered: HashSet<&str> = outcomes.iter().map(|o| o.request_id.as_str()).collect();
    requests.iter().filter(|r| !answered.contains(r.id())).map(|r| r.id().to_owned()).collect()
}

/// The cost of an outcome recomputed from its placements and the grid's prices: the sum over
/// jobs of `cpus * (end - start)/3600 s * price_per_cpu_hour` plus the sum over transfers of
/// `bandwidth_mbps/1000 * (end - start)/3600 s * sum of price_per_gbps_hour over its path`.
/// `None` if a placement names an unknown site or link. A rejected outcome has no placements and
/// costs 0.
pub fn plan_cost(grid: &Grid, outcome: &Outcome) -> Option<f64> {
    let links = grid.link_index();
    let mut cost = 0.0;
    for j in &outcome.jobs {
        let site = grid.site(&j.site)?;
        cost += f64::from(j.cpus) * hours(&j.start, &j.end) * site.price_per_cpu_hour;
    }
    for t in &outcome.transfers {
        let mut price = 0.0;
        for l in &t.path {
            price += links.get(l.as_str())?.price_per_gbps_hour;
        }
        cost += t.bandwidth_mbps as f64 / 1000.0 * hours(&t.start, &t.end) * price;
    }
    Some(cost)
}

fn hours(start: &DateTime<Utc>, end: &DateTime<Utc>) -> f64 {
    (to_time(end) - to_time(start)) as f64 / 3600.0
}

struct Ctx<'g> {
    sites: HashMap<&'g str, &'g Site>,
    links: HashMap<&'g str, &'g Link>,
}

fn check_rejected(o: &Outcome, out: &mut Vec<Violation>) {
    let mut parts = Vec::new();
    if o.start.is_some() {
        parts.push("a start".to_owned());
    }
    if !o.jobs.is_empty() {
        parts.push(format!("{} job placements", o.jobs.len()));
    }
    if !o.transfers.is_empty() {
        parts.push(format!("{} transfer placements", o.transfers.len()));
    }
    if o.cost != 0.0 {
        parts.push(format!("cost {}", o.cost));
    }
    if !parts.is_empty() {
        out.push(Violation::RejectedNotEmpty { request_id: o.request_id.clone(), detail: parts.join(", ") });
    }
}

fn check_committed(
    ctx: &Ctx<'_>,
    grid: &Grid,
    req: &PlanRequest,
    o: &Outcome,
    w_interval_s: i64,
    out: &mut Vec<Violation>,
) {
    let rid = || req.id().to_owned();
    let start = o.start.as_ref().map(to_time);
    match start {
        None => out.push(Violation::MissingStart { request_id: rid() }),
        Some(st) => {
            let earliest = req
                .not_before()
                .map_or(req.submitted_at() + w_interval_s, |nb| nb.max(req.submitted_at() + w_interval_s));
            if st < earliest {
                out.push(Violation::StartTooEarly {
                    request_id: rid(),
                    start: from_time(st),
                    earliest: from_time(earliest),
                });
            }
        }
    }

    // jobs: exactly one placement each
    let mut placed: HashMap<&str, Vec<&JobPlacement>> = HashMap::new();
    for p in &o.jobs {
        placed.entry(p.name.as_str()).or_default().push(p);
    }
    let known: HashSet<&str> = req.jobs().iter().map(|j| j.name.as_str()).collect();
    for p in &o.jobs {
        if !known.contains(p.name.as_str()) {
            out.push(Violation::UnknownJob { request_id: rid(), job: p.name.clone() });
        }
    }
    // the unique placement of each job, for the path checks
    let mut unique: HashMap<&str, &JobPlacement> = HashMap::new();
    for j in req.jobs() {
        let ps = placed.get(j.name.as_str()).map_or(&[][..], Vec::as_slice);
        match ps {
            [] => out.push(Violation::JobNotPlaced { request_id: rid(), job: j.name.clone() }),
            [p] => {
                unique.insert(j.name.as_str(), p);
            }
            _ => out.push(Violation::JobPlacedTwice { request_id: rid(), job: j.name.clone(), count: ps.len() }),
        }
        for p in ps {
            match ctx.sites.get(p.site.as_str()) {
                None => {
                    out.push(Violation::UnknownSite { request_id: rid(), job: j.name.clone(), site: p.site.clone() })
                }
                Some(site) if !site.os.eq_ignore_ascii_case(&j.os) => out.push(Violation::WrongOs {
                    request_id: rid(),
                    job: j.name.clone(),
                    site: site.id.clone(),
                    job_os: j.os.clone(),
                    site_os: site.os.clone(),
                }),
                Some(_) => {}
            }
            if p.cpus != j.cpus {
                out.push(Violation::WrongCpus {
                    request_id: rid(),
                    job: j.name.clone(),
                    placed: p.cpus,
                    requested: j.cpus,
                });
            }
            if let Some(st) = start {
                let (es, ee) = (st + j.offset_s, st + j.offset_s + j.duration_s);
                if to_time(&p.start) != es || to_time(&p.end) != ee {
                    out.push(Violation::JobTiming {
                        request_id: rid(),
                        job: j.name.clone(),
                        start: p.start,
                        end: p.end,
                        expected_start: from_time(es),
                        expected_end: from_time(ee),
                    });
                }
            }
        }
    }

    // transfers: matched by (from, to), in order
    let mut wanted: BTreeMap<(&str, &str), Vec<&NetworkDemand>> = BTreeMap::new();
    for t in req.transfers() {
        wanted.entry((t.from.as_str(), t.to.as_str())).or_default().push(t);
    }
    let mut got: BTreeMap<(&str, &str), Vec<&TransferPlacement>> = BTreeMap::new();
    for p in &o.transfers {
        got.entry((p.from.as_str(), p.to.as_str())).or_default().push(p);
    }
    for (&(from, to), ps) in &got {
        let requested = wanted.get(&(from, to)).map_or(0, Vec::len);
        if ps.len() > requested {
            out.push(Violation::TransferCount {
                request_id: rid(),
                from: from.to_owned(),
                to: to.to_owned(),
                placed: ps.len(),
                requested,
            });
        }
    }
    for (&(from, to), ds) in &wanted {
        let ps = got.get(&(from, to)).map_or(&[][..], Vec::as_slice);
        if ps.len() < ds.len() {
            out.push(Violation::TransferCount {
                request_id: rid(),
                from: from.to_owned(),
                to: to.to_owned(),
                placed: ps.len(),
                requested: ds.len(),
            });
        }
        for (d, p) in ds.iter().zip(ps) {
            if p.bandwidth_mbps != d.bandwidth_mbps {
                out.push(Violation::WrongBandwidth {
                    request_id: rid(),
                    from: from.to_owned(),
                    to: to.to_owned(),
                    placed: p.bandwidth_mbps,
                    requested: d.bandwidth_mbps,
                });
            }
            if let Some(st) = start {
                let (es, ee) = (st + d.offset_s, st + d.offset_s + d.duration_s);
                if to_time(&p.start) != es || to_time(&p.end) != ee {
                    out.push(Violation::TransferTiming {
                        request_id: rid(),
                        from: from.to_owned(),
                        to: to.to_owned(),
                        start: p.start,
                        end: p.end,
                        expected_start: from_time(es),
                        expected_end: from_time(ee),
                    });
                }
            }
            let node =
                |job: &str| unique.get(job).and_then(|jp| ctx.sites.get(jp.site.as_str())).map(|s| s.node.as_str());
            if let (Some(a), Some(b)) = (node(from), node(to)) {
                if let Some(reason) = path_problem(&ctx.links, a, b, &p.path) {
                    out.push(Violation::BrokenPath {
                        request_id: rid(),
                        from: from.to_owned(),
                        to: to.to_owned(),
                        reason,
                    });
                }
            }
        }
    }

    // deadline: the latest end of anything placed
    let ends = o
        .jobs
        .iter()
        .map(|j| (to_time(&j.end), format!("job `{}`", j.name)))
        .chain(o.transfers.iter().map(|t| (to_time(&t.end), format!("transfer {}->{}", t.from, t.to))));
    if let Some((end, what)) = ends.max_by_key(|e| e.0) {
        if end > req.deadline() {
            out.push(Violation::PastDeadline {
                request_id: rid(),
                what,
                end: from_time(end),
                deadline: from_time(req.deadline()),
            });
        }
    }

    if let Some(expected) = plan_cost(grid, o) {
        let diff = (o.cost - expected).abs();
        let tol = COST_REL_TOLERANCE * expected.abs().max(o.cost.abs()) + 1e-9;
        if diff.is_nan() || diff > tol {
            out.push(Violation::WrongCost { request_id: rid(), reported: o.cost, expected });
        }
    }
}

/// Why `path` does not join node `from` to node `to`, or `None` if it does.
fn path_problem(links: &HashMap<&str, &Link>, from: &str, to: &str, path: &[String]) -> Option<String> {
    if path.is_empty() {
        return (from != to).then(|| format!("empty path, but the sites are on different nodes `{from}` and `{to}`"));
    }
    if from == to {
        return Some(format!("both sites are on node `{from}`, so the path must be empty"));
    }
    let mut at = from;
    let mut used = HashSet::new();
    for (i, id) in path.iter().enumerate() {
        let Some(link) = links.get(id.as_str()) else {
            return Some(format!("link #{} `{id}` does not exist", i + 1));
        };
        if !used.insert(id.as_str()) {
            return Some(format!("link `{id}` is used twice"));
        }
        at = if link.a == at {
            &link.b
        } else if link.b == at {
            &link.a
        } else {
            return Some(format!("link #{} `{id}` ({}-{}) does not touch node `{at}`", i + 1, link.a, link.b));
        };
    }
    (at != to).then(|| format!("path ends at node `{at}`, not at `{to}`"))
}

/// Maximal intervals `[from, to)` where the summed amount of `spans` (half-open `[start, end)`)
/// exceeds `capacity`, with the peak reached in each. Empty spans (`end <= start`) count for
/// nothing.
fn overbooked(spans: Vec<(Time, Time, u64)>, capacity: u64) -> Vec<(Time, Time, u64)> {
    let mut delta: BTreeMap<Time, i128> = BTreeMap::new();
    for (s, e, amount) in spans {
        if s < e {
            *delta.entry(s).or_insert(0) += i128::from(amount);
            *delta.entry(e).or_insert(0) -= i128::from(amount);
        }
    }
    let mut out = Vec::new();
    let mut usage: i128 = 0;
    let mut open: Option<(Time, i128)> = None;
    for (t, d) in delta {
        usage += d;
        if usage > i128::from(capacity) {
            open = Some(open.map_or((t, usage), |(from, peak)| (from, peak.max(usage))));
        } else if let Some((from, peak)) = open.take() {
            out.push((from, t, u64::try_from(peak).unwrap_or(u64::MAX)));
        }
    }
    debug_assert!(open.is_none(), "usage returns to 0 after the last end");
    out
}

#[cfg(test)]
mod tests;
