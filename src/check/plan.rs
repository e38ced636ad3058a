//! The checks of one outcome against the request it answers: a rejected outcome is empty; a
//! committed one places every job and transfer of the request exactly as asked (sites, OS,
//! CPUs, bandwidth, times, paths), starts no earlier and ends no later than allowed, and
//! reports the cost its placements add up to ([`plan_cost`]).

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::{PlanViolation, Resources};
use crate::model::{
    from_time, to_time, ComputeDemand, Grid, JobPlacement, Link, LinkId, NetworkDemand, Outcome, PlanRequest, Site,
    TransferMode, TransferPlacement, Unmet,
};

/// Relative tolerance of the cost comparison.
pub const COST_REL_TOLERANCE: f64 = 1e-6;

/// The cost of an outcome recomputed from its placements and the grid's prices: the sum over
/// jobs of `(end - start)/3600 s * (cpus * price_per_cpu_hour + gpus * price_per_gpu_hour)`
/// plus the sum over transfers of
/// `bandwidth_mbps/1000 * (end - start)/3600 s * sum of price_per_gbps_hour over its path`.
/// `None` if a placement names an unknown site or link. A rejected outcome has no placements and
/// costs 0.
pub fn plan_cost(grid: &Grid, outcome: &Outcome) -> Option<f64> {
    let links = grid.link_index();
    let mut cost = 0.0;
    for j in &outcome.jobs {
        let site = grid.site(&j.site)?;
        let gpus = j.gpus.as_ref().map_or(0, |g| g.count);
        let per_hour =
            f64::from(j.cpus) * site.price_per_cpu_hour + f64::from(gpus) * site.attributes.price_per_gpu_hour;
        cost += hours(&j.start, &j.end) * per_hour;
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

/// A placement's GPUs on `site` that are of no pool of the site, or of a pool that fails the
/// job's GPU bounds.
fn gpus_unmet(site: &Site, j: &ComputeDemand, p: &JobPlacement) -> Option<Unmet> {
    let (placed, wanted) = (p.gpus.as_ref()?, j.requires.gpus.as_ref()?);
    let ok = site.attributes.gpu_pool(&placed.model).is_some_and(|(_, pool)| wanted.accepts(pool));
    (!ok).then(|| Unmet::Gpus(format!("a GPU pool `{}` that meets the job's bounds", placed.model)))
}

/// A rejected outcome carries no start, no placements and no cost.
pub(super) fn check_rejected(o: &Outcome, out: &mut Vec<PlanViolation>) {
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
        out.push(PlanViolation::RejectedNotEmpty { detail: parts.join(", ") });
    }
}

/// A committed outcome `o` against its request `req` (the rules of
/// [`check_outcomes`](super::check_outcomes), capacity aside).
pub(super) fn check_committed(
    res: &Resources<'_>,
    grid: &Grid,
    req: &PlanRequest,
    o: &Outcome,
    w_interval_s: i64,
    out: &mut Vec<PlanViolation>,
) {
    let start = o.start.as_ref().map(to_time);
    match start {
        None => out.push(PlanViolation::MissingStart),
        Some(st) => {
            let earliest = req
                .not_before()
                .map_or(req.submitted_at() + w_interval_s, |nb| nb.max(req.submitted_at() + w_interval_s));
            if st < earliest {
                out.push(PlanViolation::StartTooEarly { start: from_time(st), earliest: from_time(earliest) });
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
            out.push(PlanViolation::UnknownJob { job: p.name.clone() });
        }
    }
    // the unique placement of each job, for the path checks
    let mut unique: HashMap<&str, &JobPlacement> = HashMap::new();
    let floating = floating_jobs(req);
    for (i, j) in req.jobs().iter().enumerate() {
        let ps = placed.get(j.name.as_str()).map_or(&[][..], Vec::as_slice);
        match ps {
            [] => out.push(PlanViolation::JobNotPlaced { job: j.name.clone() }),
            [p] => {
                unique.insert(j.name.as_str(), p);
            }
            _ => out.push(PlanViolation::JobPlacedTwice { job: j.name.clone(), count: ps.len() }),
        }
        for p in ps {
            match res.sites.get(p.site.as_str()) {
                None => out.push(PlanViolation::UnknownSite { job: j.name.clone(), site: p.site.clone() }),
                Some(site) if !site.os.eq_ignore_ascii_case(&j.os) => out.push(PlanViolation::WrongOs {
                    job: j.name.clone(),
                    site: site.id.clone(),
                    job_os: j.os.clone(),
                    site_os: site.os.clone(),
                }),
                Some(site) => {
                    let unmet = match crate::model::unmet(site, j) {
                        Some(Unmet::Os(_) | Unmet::Cpus(_)) | None => gpus_unmet(site, j, p),
                        other => other,
                    };
                    if let Some(unmet) = unmet {
                        out.push(PlanViolation::UnmetRequirement { job: j.name.clone(), site: site.id.clone(), unmet });
                    }
                }
            }
            let placed_gpus = p.gpus.as_ref().map_or(0, |g| g.count);
            if placed_gpus != j.gpus() {
                out.push(PlanViolation::WrongGpus { job: j.name.clone(), placed: placed_gpus, requested: j.gpus() });
            }
            if p.cpus != j.cpus {
                out.push(PlanViolation::WrongCpus { job: j.name.clone(), placed: p.cpus, requested: j.cpus });
            }
            // A floating job has no fixed offset: its dependencies place it (checked below).
            if let (Some(st), false) = (start, floating.contains(j.name.as_str())) {
                let span = req.job_span(i);
                let (es, ee) = (st + span.offset_s, st + span.end_s());
                if to_time(&p.start) != es || to_time(&p.end) != ee {
                    out.push(PlanViolation::JobTiming {
                        job: j.name.clone(),
                        start: p.start,
                        end: p.end,
                        expected_start: from_time(es),
                        expected_end: from_time(ee),
                    });
                }
            }
            // The length the request asks for, read from it as given (not from its layout).
            let length_s = to_time(&p.end) - to_time(&p.start);
            let expected_s = j.duration_s + j.slack_s.unwrap_or(req.raw().slack_s);
            if ps.len() == 1 && length_s != expected_s {
                out.push(PlanViolation::WrongLength { job: j.name.clone(), length_s, expected_s });
            }
        }
    }

    // transfers: matched by (from, to), in order
    let mut wanted: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
    for (e, t) in req.transfers().iter().enumerate() {
        wanted.entry((t.from.as_str(), t.to.as_str())).or_default().push(e);
    }
    let mut got: BTreeMap<(&str, &str), Vec<&TransferPlacement>> = BTreeMap::new();
    for p in &o.transfers {
        got.entry((p.from.as_str(), p.to.as_str())).or_default().push(p);
    }
    for (&(from, to), ps) in &got {
        let requested = wanted.get(&(from, to)).map_or(0, Vec::len);
        if ps.len() > requested {
            out.push(PlanViolation::TransferCount {
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
            out.push(PlanViolation::TransferCount {
                from: from.to_owned(),
                to: to.to_owned(),
                placed: ps.len(),
                requested: ds.len(),
            });
        }
        for (&e, p) in ds.iter().zip(ps) {
            let d = &req.transfers()[e];
            if p.bandwidth_mbps != d.bandwidth_mbps {
                out.push(PlanViolation::WrongBandwidth {
                    from: from.to_owned(),
                    to: to.to_owned(),
                    placed: p.bandwidth_mbps,
                    requested: d.bandwidth_mbps,
                });
            }
            let floats = d.mode == TransferMode::Staged && (floating.contains(from) || floating.contains(to));
            if let (Some(st), false) = (start, floats) {
                let span = req.transfer_span(e);
                let (es, ee) = (st + span.offset_s, st + span.end_s());
                if to_time(&p.start) != es || to_time(&p.end) != ee {
                    out.push(PlanViolation::TransferTiming {
                        from: from.to_owned(),
                        to: to.to_owned(),
                        start: p.start,
                        end: p.end,
                        expected_start: from_time(es),
                        expected_end: from_time(ee),
                    });
                }
            }
            transfer_in_place(d, p, &unique, floats, out);
            let node =
                |job: &str| unique.get(job).and_then(|jp| res.sites.get(jp.site.as_str())).map(|s| s.node.as_str());
            if let (Some(a), Some(b)) = (node(from), node(to)) {
                if let Some(reason) = path_problem(&res.links, a, b, &p.path) {
                    out.push(PlanViolation::BrokenPath { from: from.to_owned(), to: to.to_owned(), reason });
                }
            }
        }
    }

    check_dependencies(req, &unique, out);

    // deadline: the latest end of anything placed
    let ends = o
        .jobs
        .iter()
        .map(|j| (to_time(&j.end), format!("job `{}`", j.name)))
        .chain(o.transfers.iter().map(|t| (to_time(&t.end), format!("transfer {}->{}", t.from, t.to))));
    if let Some((end, what)) = ends.max_by_key(|e| e.0) {
        if end > req.deadline() {
            out.push(PlanViolation::PastDeadline { what, end: from_time(end), deadline: from_time(req.deadline()) });
        }
    }

    if let Some(expected) = plan_cost(grid, o) {
        let diff = (o.cost - expected).abs();
        let tol = COST_REL_TOLERANCE * expected.abs().max(o.cost.abs()) + 1e-9;
        if diff.is_nan() || diff > tol {
            out.push(PlanViolation::WrongCost { reported: o.cost, expected });
        }
    }
}

/// The workflow's dependencies, read from the request as given (not from its layout): a job
/// starts at least `dependency_gap_s` after each job it is `after` (or receives a staged
/// transfer from) ends.
fn check_dependencies(req: &PlanRequest, unique: &HashMap<&str, &JobPlacement>, out: &mut Vec<PlanViolation>) {
    let raw = req.raw();
    for j in &raw.jobs {
        let Some(p) = unique.get(j.name.as_str()) else { continue };
        let staged = raw.transfers.iter().filter(|t| t.to == j.name && t.mode == TransferMode::Staged);
        for before in j.after.iter().chain(staged.map(|t| &t.from)) {
            let Some(b) = unique.get(before.as_str()) else { continue };
            if to_time(&p.start) - to_time(&b.end) < raw.dependency_gap_s {
                out.push(PlanViolation::DependencyBroken {
                    job: j.name.clone(),
                    after: before.clone(),
                    after_end: b.end,
                    start: p.start,
                    gap_s: raw.dependency_gap_s,
                });
            }
        }
    }
}

/// The jobs of `req` that float, read from the request as given: a job with dependencies
/// (`after` or a staged transfer in), no `offset_s`, and no transfer that is concurrent or
/// has an `offset_s` (docs/model.md, "Workflows"). The planner places them per job: no fixed
/// offset from the plan's start, only their dependencies, transfers and the deadline bind them.
fn floating_jobs(req: &PlanRequest) -> HashSet<&str> {
    let raw = req.raw();
    let mut floating: HashSet<&str> = raw
        .jobs
        .iter()
        .filter(|j| {
            let staged_in = raw.transfers.iter().any(|t| t.to == j.name && t.mode == TransferMode::Staged);
            j.offset_s.is_none() && (!j.after.is_empty() || staged_in)
        })
        .map(|j| j.name.as_str())
        .collect();
    for t in raw.transfers.iter().filter(|t| t.mode == TransferMode::Concurrent || t.offset_s.is_some()) {
        floating.remove(t.from.as_str());
        floating.remove(t.to.as_str());
    }
    floating
}

/// Transfer `t` placed as `p`, by the request as given: a staged transfer lies between its
/// producer's end and its consumer's start, a concurrent one inside both jobs; with `size_mb`,
/// it lasts long enough to move it. A staged transfer of a floating job (`floats`) lasts its
/// `duration_s` (given, or from `size_mb`) exactly, or, both jobs on one site, at most that
/// (no network: it may take no time).
fn transfer_in_place(
    t: &NetworkDemand,
    p: &TransferPlacement,
    unique: &HashMap<&str, &JobPlacement>,
    floats: bool,
    out: &mut Vec<PlanViolation>,
) {
    let (Some(a), Some(b)) = (unique.get(t.from.as_str()), unique.get(t.to.as_str())) else { return };
    let same_site = a.site == b.site;
    let length_s = to_time(&p.end) - to_time(&p.start);
    let needed_s = t.size_mb.map(|size| (size * 8.0 / t.bandwidth_mbps as f64).ceil() as i64);
    if floats {
        let duration_s = t.duration_s.or(needed_s.map(|n| n.max(1))).unwrap_or_default();
        let ok = if same_site { (0..=duration_s).contains(&length_s) } else { length_s == duration_s };
        if !ok {
            let detail = format!("{length_s} s long, not its {duration_s} s");
            out.push(PlanViolation::TransferOutOfPlace { from: t.from.clone(), to: t.to.clone(), detail });
        }
    }
    let broken = match t.mode {
        TransferMode::Staged => (p.start < a.end || p.end > b.start)
            .then(|| format!("not between `{}`'s end and `{}`'s start", t.from, t.to)),
        TransferMode::Concurrent => [a, b]
            .into_iter()
            .find(|j| p.start < j.start || p.end > j.end)
            .map(|j| format!("not inside job `{}`", j.name)),
    };
    if let Some(detail) = broken {
        out.push(PlanViolation::TransferOutOfPlace { from: t.from.clone(), to: t.to.clone(), detail });
    }
    if let (Some(size), Some(needed_s), false) = (t.size_mb, needed_s, floats && same_site) {
        if length_s < needed_s {
            out.push(PlanViolation::TransferOutOfPlace {
                from: t.from.clone(),
                to: t.to.clone(),
                detail: format!("too short: {length_s} s for {size} MB (needs {needed_s} s)"),
            });
        }
    }
}

/// Why `path` does not join node `from` to node `to`, or `None` if it does.
fn path_problem(links: &HashMap<&str, &Link>, from: &str, to: &str, path: &[LinkId]) -> Option<String> {
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
