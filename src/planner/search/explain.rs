//! The explanations of conflict-directed backjumping: which fixed jobs made a branch of the
//! search fail ([`crate::planner::Backtrack`], docs/algorithm.md "Backjumping").
//!
//! Fig. 3 as written (`Chronological`) undoes a failed candidate and tries the next candidate of the same job,
//! whatever made it fail. When the failure was caused by a job fixed earlier (a transfer from
//! the root that no site of a deep job can carry, say), every candidate of every job in
//! between is tried in vain, each time asking all their sites again: the 4-job diamonds of
//! `benches/planner.rs` that did so took up to 20,000 fixes (the budget) and half a second,
//! and were rejected. The default (`ConflictDirected`) is conflict-directed backjumping
//! (Prosser, 1993) fitted to Fig. 3, with the same candidate order, the same delays and the
//! same `st` loop:
//!
//! - every NOTFOUND carries an explanation: the jobs whose fixes made it fail (`failure`).
//!   A check of transfer `e` that the NIS refuses is explained by `e`'s two ends, plus (BIR,
//!   BBR-overlay) the ends of the plan's own transfers held over an overlapping interval,
//!   which may have taken the bandwidth, unless a probe clears them (below). A refused hold
//!   of a job, or a site that offered no slot, is explained by the plan's own jobs held at
//!   that site over an overlapping interval (none under plain BBR: its queries do not see
//!   them). A job whose candidates all failed is explained by the union of their
//!   explanations, less itself.
//! - when the failure below candidate `c` of job `v` is explained by jobs fixed before `v`
//!   only, no other candidate of `v` can change it: `v` skips its remaining on-time
//!   candidates and returns what Fig. 3's loop would have returned after them, the delay of
//!   its next late candidate or NOTFOUND with the same explanation. Otherwise `v` tries its
//!   next candidate, as in Fig. 3.
//! - a check the NIS refused is remembered (`infeasible`) with the plan's own overlapping
//!   held transfers at the time, until the next shift of `st`; while they are all still held
//!   the answer could only be "no" again, so it is not asked again, and a candidate of `v`
//!   that such a remembered "no" rules out is skipped before it is held.
//! - the checks of `v`'s transfers to already fixed jobs are all asked before any is held
//!   (BIR; under BBR nothing is held anyway), so that a refused check is explained by fixes
//!   made before `v`, not by `v`'s own sibling holds. A hold refused after its check (a
//!   sibling took the bandwidth, or another planner) is checked again and held once more.
//! - the probe: a check of bandwidth `b` refused while the plan holds at most `m < b` on any
//!   one link over that interval is asked once more for `b - m`. If that is refused too, no
//!   path could carry `b` even without the plan's holds (each link would have at most `m`
//!   more free), so the holds are cleared of the blame. This relies on the NIS answering
//!   whether some path of its path set has the bandwidth free over the interval, as both
//!   routings do (docs/algorithm.md).
//!
//! What it keeps from Fig. 3: the candidates, their order and their delays; a skipped
//! candidate is one Fig. 3 would have tried and seen fail for the same reason (up to the
//! plan's own holds making a site late in a branch that was skipped, which would have
//! delayed `st` instead: under BIR the search can then reject a request at this `st` where
//! Fig. 3 would have shifted).

use std::collections::HashMap;

use super::Attempt;
use crate::model::{rfc3339, LinkId, SiteId, Time};
use crate::planner::fixes::TentativeBook;
use crate::protocol::{ComputeOffer, NetworkQuery};

/// A set of job (or transfer) indices of one request, as a bitset: the explanation of a
/// failure under conflict-directed backjumping (the jobs whose fixes made it fail).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(in crate::planner) struct IndexSet(Vec<u64>);

impl IndexSet {
    pub(in crate::planner) fn insert(&mut self, i: usize) {
        let (w, b) = (i / 64, i % 64);
        if self.0.len() <= w {
            self.0.resize(w + 1, 0);
        }
        self.0[w] |= 1 << b;
    }
    #[cfg(test)]
    pub(in crate::planner) fn contains(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
    pub(in crate::planner) fn union(&mut self, other: &IndexSet) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a |= b;
        }
    }
    /// Every element of `self` is in `other`.
    pub(in crate::planner) fn is_subset(&self, other: &IndexSet) -> bool {
        self.0.iter().enumerate().all(|(i, a)| a & !other.0.get(i).copied().unwrap_or(0) == 0)
    }
    pub(in crate::planner) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0
            .iter()
            .enumerate()
            .flat_map(|(w, &bits)| (0..64).filter(move |b| bits & (1 << b) != 0).map(move |b| w * 64 + b))
    }
}

/// Why a transfer needs no NIS question (see `Attempt::nis_question`).
pub(super) enum Answered {
    /// Both ends on one site: the empty route.
    SameSite,
    /// A recorded "no path" that still stands, with its explanation.
    Infeasible(IndexSet),
}

impl<B: TentativeBook> Attempt<'_, B> {
    /// Why job `v` could not be placed: no candidate site has its CPUs (and GPUs) free for its
    /// reservation between `t_bgn` and the deadline. Names the job, its demand, the sites
    /// asked and the window, in RFC 3339.
    pub(super) fn no_site_for(&self, v: usize, t_bgn: Time) -> String {
        let job = &self.req.jobs()[v];
        let gpus = if job.gpus() > 0 { format!(" and {} GPUs", job.gpus()) } else { String::new() };
        let sites: Vec<String> = self.candidates[v].iter().map(|s| format!("`{s}`")).collect();
        format!(
            "job `{}`: no site that can run it ({}) has {} CPUs{gpus} free for {} s from {} until {}",
            job.name,
            sites.join(", "),
            job.cpus,
            self.req.job_span(v).duration_s,
            rfc3339(&t_bgn),
            rfc3339(&self.req.deadline())
        )
    }

    /// Why transfer `e` could not be placed: no path between its sites has the bandwidth free
    /// over its interval (`q`, the question the NIS answered "no").
    pub(super) fn no_path_for(&self, e: usize, q: &NetworkQuery) -> String {
        let t = &self.req.transfers()[e];
        format!(
            "transfer {}->{}: no path from site `{}` to site `{}` has {} Mbit/s free over [{}, {})",
            t.from,
            t.to,
            q.from_site,
            q.to_site,
            t.bandwidth_mbps,
            rfc3339(&q.start),
            rfc3339(&q.end)
        )
    }

    /// Whether the participants see the plan's own fixes in their answers: under BIR as holds,
    /// under BBR-overlay through the overlay added to every query; under plain BBR not at all.
    pub(super) fn own_fixes_visible(&self) -> bool {
        self.style.hold_each_fix || self.style.overlay
    }

    /// The fixed jobs at `site` whose run overlaps `[start, end)`, when the plan's own fixes
    /// are visible: what may have made that site refuse or not offer a slot.
    pub(super) fn own_jobs_at(&self, site: &SiteId, start: Time, end: Time) -> IndexSet {
        let mut set = IndexSet::default();
        if !self.own_fixes_visible() {
            return set;
        }
        for (w, fix) in self.book.fixes().jobs.iter().enumerate() {
            let Some(fix) = fix else { continue };
            let (s, e) = (fix.start, fix.start + self.req.job_span(w).duration_s);
            if &fix.site == site && s < end && start < e {
                set.insert(w);
            }
        }
        set
    }

    /// The explanation of the candidate sites of `v` that offered no slot before the deadline:
    /// the plan's own jobs at those sites over `[t_bgn, deadline)`.
    pub(super) fn absent_sites_conflict(&self, v: usize, t_bgn: Time, offers: &[(Time, ComputeOffer)]) -> IndexSet {
        let mut set = IndexSet::default();
        if !self.own_fixes_visible() {
            return set;
        }
        for site in &self.candidates[v] {
            if !offers.iter().any(|(_, o)| &o.site == site) {
                set.union(&self.own_jobs_at(site, t_bgn, self.req.deadline()));
            }
        }
        set
    }

    /// The plan's own transfers that may narrow the NIS's answer for `[start, end)`: those held
    /// (BIR) or in the overlay (BBR-overlay) over an overlapping interval, on some link.
    pub(super) fn own_transfers_over(&self, start: Time, end: Time) -> IndexSet {
        let mut set = IndexSet::default();
        for (f, fix) in self.book.fixes().transfers.iter().enumerate() {
            let Some(fix) = fix else { continue };
            if !fix.seen_by_answers() {
                continue;
            }
            let (s, e) = fix.interval;
            if s < end && start < e {
                set.insert(f);
            }
        }
        set
    }

    /// The question [`Self::transfer_route`] asks the NIS about transfer `e` (both ends fixed)
    /// over its interval ([`crate::planner::fixes::Fixes::transfer_interval`]); or why it needs none.
    pub(super) fn nis_question(&self, e: usize) -> Result<NetworkQuery, Answered> {
        let (a, b) = self.req.transfer_ends(e);
        let site_a = &self.book.fixes().jobs[a].as_ref().expect("fixed").site;
        let site_b = &self.book.fixes().jobs[b].as_ref().expect("fixed").site;
        if site_a == site_b {
            return Err(Answered::SameSite);
        }
        self.question(e, site_a, site_b).map_err(Answered::Infeasible)
    }

    /// The NIS question about transfer `e` from `site_a` to `site_b` (two different sites) at
    /// the current `st`; `Err`, with its explanation, when a "no path" recorded for it in
    /// `infeasible` still stands (only [`crate::planner::Backtrack::ConflictDirected`] records
    /// them).
    pub(super) fn question(&self, e: usize, site_a: &SiteId, site_b: &SiteId) -> Result<NetworkQuery, IndexSet> {
        let t = &self.req.transfers()[e];
        let (start, end) = self.book.fixes().transfer_interval_at(self.req, e, false);
        // BBR-overlay: on top of the plan's own peak on any link it uses (the route is not
        // known before the answer, so this bound covers every link of it).
        let own = if self.style.overlay { self.book.own_peak_on_links(start, end) } else { 0 };
        let q = NetworkQuery {
            from_site: site_a.clone(),
            to_site: site_b.clone(),
            bandwidth_mbps: t.bandwidth_mbps + own,
            start,
            end,
        };
        match self.infeasible.get(&q) {
            Some(then) if then.is_subset(&self.own_transfers_over(start, end)) => Err(self.ends_of(e, then)),
            _ => Ok(q),
        }
    }

    /// If job `v` fixed at `site` has a transfer to a fixed neighbour whose check is recorded
    /// in `infeasible` (and still valid), the explanation of that failure.
    pub(super) fn known_infeasible(&self, v: usize, site: &SiteId) -> Option<IndexSet> {
        if self.infeasible.is_empty() {
            return None;
        }
        for &e in &self.incident[v] {
            let (Some(fu), None) = (&self.book.fixes().jobs[self.other_end(e, v)], &self.book.fixes().transfers[e])
            else {
                continue;
            };
            let (site_a, site_b) = if self.req.transfer_ends(e).0 == v { (site, &fu.site) } else { (&fu.site, site) };
            if site_a == site_b {
                continue;
            }
            if let Err(why) = self.question(e, site_a, site_b) {
                return Some(why);
            }
        }
        None
    }

    /// The ends of transfer `e` and of the transfers in `others`: the jobs a network failure
    /// of `e` is blamed on.
    pub(super) fn ends_of(&self, e: usize, others: &IndexSet) -> IndexSet {
        let mut set = IndexSet::default();
        for f in std::iter::once(e).chain(others.iter()) {
            let (a, b) = self.req.transfer_ends(f);
            set.insert(a);
            set.insert(b);
        }
        set
    }

    /// The most bandwidth the held transfers `held` take together on any one link (their
    /// routes are known; each counted whole, whatever part of the interval it overlaps).
    pub(super) fn own_peak_on_a_link(&self, held: &IndexSet) -> u64 {
        let mut per_link: HashMap<&LinkId, u64> = HashMap::new();
        for f in held.iter() {
            let fix = self.book.fixes().transfers[f].as_ref().expect("held transfer is fixed");
            for l in &fix.route.links {
                *per_link.entry(l).or_default() += self.req.transfers()[f].bandwidth_mbps;
            }
        }
        per_link.into_values().max().unwrap_or(0)
    }

    /// The explanation of a refused hold of transfer `e` on `route`: its ends, and the ends of
    /// the plan's own held transfers over an overlapping interval on a link of `route`.
    pub(super) fn hold_conflict(&self, e: usize, route: &[LinkId]) -> IndexSet {
        let (start, end) = self.book.fixes().transfer_interval(self.req, e);
        let mut sharing = IndexSet::default();
        for f in self.own_transfers_over(start, end).iter() {
            let fix = self.book.fixes().transfers[f].as_ref().expect("held transfer is fixed");
            if fix.route.links.iter().any(|l| route.contains(l)) {
                sharing.insert(f);
            }
        }
        self.ends_of(e, &sharing)
    }
}
