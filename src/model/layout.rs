//! Where in time each job and transfer of a plan request lies, relative to the application
//! start: the request's layout (docs/model.md, "Workflows").
//!
//! A job with an explicit `offset_s` keeps it (Ando & Aida's co-allocation: every part at a
//! fixed offset from one start). A job without one is laid out as early as its dependencies
//! allow: after every job it is `after` (their reservations' ends plus `dependency_gap_s`)
//! and after every staged transfer into it. A staged transfer starts at its producer's end
//! (or its own explicit offset, not before) and lasts `duration_s` or `size_mb * 8 /
//! bandwidth_mbps`; a concurrent one starts at the later of its two jobs' starts (or its
//! explicit offset) and must lie inside both. The planner then searches for one application
//! start `st` at which every part fits at `st + offset` (Ando & Aida, Fig. 2).
//!
//! A job **floats** ([`Layout::floats`]) when it has dependencies and no explicit `offset_s`,
//! and no transfer of its has an explicit offset or is concurrent: the planner may place it
//! later than its laid-out offset without moving the rest of the plan, as early as its placed
//! predecessors allow (docs/algorithm.md, "Per-job placement"). Its laid-out offset is then
//! only where the search starts looking. Every other job keeps `st + offset` exactly.
//!
//! The layout is the earliest schedule of the dependency graph (its longest paths), computed
//! once in topological order (Kahn's algorithm): O(jobs + transfers + dependencies).

use std::collections::HashMap;

use super::request::{ComputeDemand, NetworkDemand, RequestError, TransferMode};

/// An interval relative to the application start: `[offset_s, offset_s + duration_s)`, in
/// seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub offset_s: i64,
    pub duration_s: i64,
}

impl Span {
    /// The end's offset, seconds from the application start.
    pub fn end_s(&self) -> i64 {
        self.offset_s + self.duration_s
    }
}

/// The layout of a request: one reserved [`Span`] per job (its run plus its slack) and per
/// transfer, in request order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Layout {
    pub jobs: Vec<Span>,
    pub transfers: Vec<Span>,
    /// Each job's slack in seconds (the end of its reserved span that its run may not need).
    pub slack_s: Vec<i64>,
    /// Each job's dependencies: the jobs it is after (by `after` or a staged transfer), by index.
    pub after: Vec<Vec<usize>>,
    /// The staged transfers into each job, by index.
    pub staged_in: Vec<Vec<usize>>,
    /// Whether each job floats (see the module docs): placed per job, at or after the earliest
    /// start its placed predecessors allow, not at a fixed offset from the plan's start.
    pub floats: Vec<bool>,
}

/// The inputs [`lay_out`] reads beyond the jobs and transfers.
pub(super) struct Rules<'a> {
    pub jobs: &'a [ComputeDemand],
    pub transfers: &'a [NetworkDemand],
    /// `(from, to)` job indices of every transfer.
    pub ends: &'a [(usize, usize)],
    pub index: &'a HashMap<&'a str, usize>,
    pub dependency_gap_s: i64,
    pub slack_s: i64,
    /// Every transfer's duration, known before the layout (given, or from `size_mb`).
    pub transfer_duration_s: &'a [i64],
}

/// Lays out the request (see the module docs).
///
/// # Errors
/// [`RequestError::UnknownPredecessor`], [`RequestError::Cycle`] (naming the jobs of one
/// cycle), [`RequestError::BeforeDependency`] (an explicit offset before what a dependency
/// allows), [`RequestError::StagedBeforeProducer`] and, for a concurrent transfer outside one
/// of its jobs, [`RequestError::TransferOutsideJob`].
pub(super) fn lay_out(r: &Rules<'_>) -> Result<Layout, RequestError> {
    let n = r.jobs.len();
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (j, job) in r.jobs.iter().enumerate() {
        for name in &job.after {
            let p = *r
                .index
                .get(name.as_str())
                .ok_or_else(|| RequestError::UnknownPredecessor { job: job.name.clone(), after: name.clone() })?;
            if !after[j].contains(&p) {
                after[j].push(p);
            }
        }
    }
    // Staged transfers into each job (they imply `after`).
    let mut staged_in: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (e, t) in r.transfers.iter().enumerate() {
        if t.mode == TransferMode::Staged {
            let (p, c) = r.ends[e];
            staged_in[c].push(e);
            if !after[c].contains(&p) {
                after[c].push(p);
            }
        }
    }
    let order = topological_order(r.jobs, &after)?;
    let slack_s: Vec<i64> = r.jobs.iter().map(|j| j.slack_s.unwrap_or(r.slack_s)).collect();
    let mut jobs = vec![Span::default(); n];
    let mut transfers = vec![Span::default(); r.transfers.len()];
    for &j in &order {
        let job = &r.jobs[j];
        // The earliest start the dependencies allow, and what sets it.
        let (mut ready, mut cause) = (0, None);
        for &p in &after[j] {
            let at = jobs[p].end_s() + r.dependency_gap_s;
            if at > ready || cause.is_none() {
                (ready, cause) = (at.max(ready), Some(format!("job `{}`", r.jobs[p].name)));
            }
        }
        for &e in &staged_in[j] {
            let t = &r.transfers[e];
            let producer_end = jobs[r.ends[e].0].end_s();
            let offset = t.offset_s.unwrap_or(producer_end);
            if offset < producer_end {
                return Err(RequestError::StagedBeforeProducer {
                    from: t.from.clone(),
                    to: t.to.clone(),
                    offset_s: offset,
                    producer_end_s: producer_end,
                });
            }
            transfers[e] = Span { offset_s: offset, duration_s: r.transfer_duration_s[e] };
            if transfers[e].end_s() > ready {
                (ready, cause) = (transfers[e].end_s(), Some(format!("staged transfer {}->{}", t.from, t.to)));
            }
        }
        let offset = match job.offset_s {
            Some(o) if o < ready => {
                return Err(RequestError::BeforeDependency {
                    job: job.name.clone(),
                    offset_s: o,
                    ready_s: ready,
                    cause: cause.unwrap_or_default(),
                })
            }
            Some(o) => o,
            None => ready,
        };
        jobs[j] = Span { offset_s: offset, duration_s: job.duration_s + slack_s[j] };
    }
    for (e, t) in r.transfers.iter().enumerate() {
        if t.mode == TransferMode::Staged {
            continue;
        }
        let (a, b) = r.ends[e];
        let offset = t.offset_s.unwrap_or(jobs[a].offset_s.max(jobs[b].offset_s));
        transfers[e] = Span { offset_s: offset, duration_s: r.transfer_duration_s[e] };
        for j in [a, b] {
            if offset < jobs[j].offset_s || transfers[e].end_s() > jobs[j].end_s() {
                return Err(RequestError::TransferOutsideJob {
                    from: t.from.clone(),
                    to: t.to.clone(),
                    job: r.jobs[j].name.clone(),
                    offset_s: offset,
                    end_s: transfers[e].end_s(),
                });
            }
        }
    }
    // A job floats when nothing ties it to the plan's start: dependencies, no explicit offset,
    // and no transfer that is concurrent (inside both jobs: coupled) or at an explicit offset.
    let mut floats: Vec<bool> = r.jobs.iter().zip(&after).map(|(j, a)| j.offset_s.is_none() && !a.is_empty()).collect();
    for (e, t) in r.transfers.iter().enumerate() {
        if t.mode == TransferMode::Concurrent || t.offset_s.is_some() {
            let (a, b) = r.ends[e];
            floats[a] = false;
            floats[b] = false;
        }
    }
    Ok(Layout { jobs, transfers, slack_s, after, staged_in, floats })
}

/// The jobs in an order where every job comes after those it is `after` (Kahn's algorithm;
/// ties in request order).
///
/// # Errors
/// [`RequestError::Cycle`] with the names of the jobs of one cycle in dependency order, from
/// the one listed first in the request, which is repeated at the end.
fn topological_order(jobs: &[ComputeDemand], after: &[Vec<usize>]) -> Result<Vec<usize>, RequestError> {
    let n = jobs.len();
    let mut waiting: Vec<usize> = after.iter().map(Vec::len).collect();
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (j, ps) in after.iter().enumerate() {
        for &p in ps {
            next[p].push(j);
        }
    }
    let mut ready: std::collections::VecDeque<usize> = (0..n).filter(|&j| waiting[j] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(j) = ready.pop_front() {
        order.push(j);
        for &c in &next[j] {
            waiting[c] -= 1;
            if waiting[c] == 0 {
                ready.push_back(c);
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Every job left waits on another job left: walk back from one until a job repeats.
    let mut seen = vec![usize::MAX; n];
    let mut path = Vec::new();
    let mut j = (0..n).find(|&j| waiting[j] > 0).expect("a job is left");
    while seen[j] == usize::MAX {
        seen[j] = path.len();
        path.push(j);
        j = *after[j].iter().find(|&&p| waiting[p] > 0).expect("a job left waits on a job left");
    }
    // In dependency order, from the job listed first in the request.
    let mut cycle: Vec<usize> = path[seen[j]..].iter().rev().copied().collect();
    let first = (0..cycle.len()).min_by_key(|&i| cycle[i]).expect("a cycle has a job");
    cycle.rotate_left(first);
    cycle.push(cycle[0]);
    let cycle = cycle.into_iter().map(|k| jobs[k].name.clone()).collect();
    Err(RequestError::Cycle(cycle))
}
