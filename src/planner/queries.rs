//! Batched availability queries: one message per LIS per search step for every job the step
//! may still ask it about (issue 13; enabled by [`super::PlannerConfig::batch_queries`], which
//! the service turns on for planners whose participants are remote).
//!
//! When the search needs the offers of job `v` at the current `st` (Ando & Aida, Fig. 3,
//! "candidates of rm"), it asks each candidate site of `v` it has no answer from yet, and
//! with `v`'s query it sends the queries of every other unfixed job that can run there (their
//! windows are known: `st + offset`). Later steps at the same `st` find those answers here
//! instead of sending a message. Nothing is asked that the unbatched search would not ask at
//! some point at that `st` except for jobs the step never reaches (the answers of such jobs
//! are wasted, the message count is never higher).
//!
//! An answer stays exact for this planner: answers that a shift of `st` could change are
//! dropped at the shift (see [`QueryCache::at`]), and when this
//! attempt holds or aborts something at a site over `[a, b)`, the answers from that site
//! that the change could alter are dropped. An answer for a job of `d` seconds asked from
//! `w` depends only on the site's calendar over `[w, e + d)` when it named the earliest start
//! `e` (every start before `e` was refused over that range, and `e` fits in it), over
//! `[w, deadline)` when it named none: a change outside that range leaves it exact, so a
//! hold of the plan's first job does not make the site answer again for the jobs that run
//! after it. Its utilisation (over `[w, deadline)`) may be out of date: under the `load`
//! policy, which ranks by it, every answer from the site is dropped. Other planners' changes since the batch make an answer
//! stale as they make any answer stale between query and prepare: a prepare that is refused
//! moves the search to the next candidate, as it always did. Not used under BBR-overlay (its
//! queries depend on the plan's own overlay, which changes at every fix).
//!
//! A floating job's window (per-job placement, [`crate::model::PlanRequest::floats`]) is not
//! `st + offset` but what its placed predecessors allow, so its answers are kept by window:
//! the first message to a site that asks about one floating job also asks about every other
//! floating job that is ready there (all it is after fixed: a fan-out's siblings share one
//! window), each at its window, once per site and `st` (issues 46 and 53: a fan-out's jobs
//! cost the sites one message, not one each). A sibling placed later finds its answer here
//! if its window did not move and nothing this attempt held since touched the range the
//! answer depends on; otherwise it is asked again, alone.

use std::collections::{HashMap, HashSet};

use crate::model::{SiteId, Time};
use crate::protocol::{ComputeOffer, ComputeQuery};

/// An answer kept, with the range `[from, to)` of the site's calendar it depends on.
type Kept = (ComputeOffer, Time, Time);

/// Answers of the current `st`, by (job index, site), each with the range of the site's
/// calendar it depends on; floating jobs' by (job index, site, window).
#[derive(Default)]
pub(super) struct QueryCache {
    st: Time,
    answers: HashMap<(usize, SiteId), Kept>,
    /// By site, then (job, window). Kept by site so that a look-up clones no site id (a
    /// fan-out's siblings are looked up at every site for every job of the fan-out).
    floating: HashMap<SiteId, HashMap<(usize, Time), Kept>>,
    /// By site, the floating jobs asked about there ahead of their turn: never twice.
    asked_ahead: HashMap<SiteId, HashSet<usize>>,
}

impl QueryCache {
    /// Moves the answers to `st`. A shift of `st` later by `dt` moves every query's window
    /// start later by `dt`: an answer that named an earliest start at or after the new window
    /// start is still exact (the starts before it were refused, and it fits), and so is one
    /// that named none (the deadline did not move). The others are forgotten, and all of them
    /// when `keep` is false (the `load` policy: the utilisation is over the window) or `st`
    /// moved back.
    pub(super) fn at(&mut self, st: Time, keep: bool) {
        let dt = st - self.st;
        self.st = st;
        if dt == 0 {
            return;
        }
        self.floating.clear();
        self.asked_ahead.clear();
        if !keep || dt < 0 {
            self.answers.clear();
            return;
        }
        self.answers.retain(|_, (offer, from, _)| {
            *from += dt;
            offer.earliest_start.is_none_or(|e| e >= *from)
        });
    }

    /// The answer for job `v` at `site`, if asked at the current `st`.
    pub(super) fn get(&self, v: usize, site: &SiteId) -> Option<&ComputeOffer> {
        self.answers.get(&(v, site.clone())).map(|(offer, _, _)| offer)
    }

    /// Keeps `offer`, job `v`'s answer to `q` (a floating job's by window too: `floating`).
    pub(super) fn put(&mut self, v: usize, offer: ComputeOffer, q: &ComputeQuery, floating: bool) {
        let end = offer.earliest_start.map_or(q.deadline, |e| e + q.duration_s);
        let kept = (offer, q.window_start, end);
        if floating {
            self.floating.entry(q.site.clone()).or_default().insert((v, q.window_start), kept);
        } else {
            self.answers.insert((v, q.site.clone()), kept);
        }
    }

    /// The answer for floating job `v` at `site` asked from `window`, if kept.
    pub(super) fn get_floating(&self, v: usize, site: &SiteId, window: Time) -> Option<&ComputeOffer> {
        self.floating.get(site)?.get(&(v, window)).map(|(offer, _, _)| offer)
    }

    /// Whether floating job `v` was asked about at `site` ahead of its turn (at this `st`).
    pub(super) fn asked_ahead(&self, v: usize, site: &SiteId) -> bool {
        self.asked_ahead.get(site).is_some_and(|jobs| jobs.contains(&v))
    }

    /// Floating job `v` is asked about at `site` ahead of its turn: never again at this `st`.
    pub(super) fn ask_ahead(&mut self, v: usize, site: &SiteId) {
        match self.asked_ahead.get_mut(site) {
            Some(jobs) => {
                jobs.insert(v);
            }
            None => {
                self.asked_ahead.insert(site.clone(), HashSet::from([v]));
            }
        }
    }

    /// Forgets the answers from `site` (its calendar changed in ways this attempt cannot
    /// bound).
    pub(super) fn forget_site(&mut self, site: &SiteId) {
        self.answers.retain(|(_, s), _| s != site);
        self.floating.remove(site);
    }

    /// Forgets the answers from `site` that depend on its calendar over `[start, end)`, where
    /// this attempt just held or aborted something.
    pub(super) fn forget_over(&mut self, site: &SiteId, start: Time, end: Time) {
        let touched = |from: Time, to: Time| start < to && from < end;
        self.answers.retain(|(_, s), (_, from, to)| s != site || !touched(*from, *to));
        if let Some(at_site) = self.floating.get_mut(site) {
            at_site.retain(|_, (_, from, to)| !touched(*from, *to));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(site: &str, window_start: Time, duration_s: i64, deadline: Time) -> ComputeQuery {
        ComputeQuery { site: site.into(), cpus: 1, duration_s, window_start, deadline, gpus: None }
    }

    fn offer(site: &str) -> ComputeOffer {
        ComputeOffer {
            site: site.into(),
            earliest_start: Some(1),
            utilisation: 0.0,
            price_per_cpu_hour: 1.0,
            gpu_model: None,
            price_per_gpu_hour: 0.0,
            reservation_prefix: None,
        }
    }

    #[test]
    fn answers_live_for_one_st_and_until_their_site_changes() {
        let mut c = QueryCache::default();
        c.at(10, false);
        c.put(0, offer("a"), &query("a", 1, 5, 100), false);
        c.put(1, offer("a"), &query("a", 1, 5, 100), false);
        c.put(1, offer("b"), &query("b", 1, 5, 100), false);
        c.at(10, false);
        assert!(c.get(0, &"a".into()).is_some(), "same st: kept");
        c.forget_site(&"a".into());
        assert!(c.get(0, &"a".into()).is_none() && c.get(1, &"a".into()).is_none());
        assert!(c.get(1, &"b".into()).is_some(), "other sites kept");
        c.at(11, false);
        assert!(c.get(1, &"b".into()).is_none(), "a new st forgets everything (policy load)");
    }

    #[test]
    fn a_change_outside_an_answers_range_keeps_it() {
        let mut c = QueryCache::default();
        c.at(0, true);
        // Earliest start 1 for 5 s: depends on [1, 6). No slot: depends on [10, 50).
        c.put(0, offer("a"), &query("a", 1, 5, 50), false);
        let none = ComputeOffer { earliest_start: None, ..offer("a") };
        c.put(1, none, &query("a", 10, 5, 50), false);
        c.forget_over(&"a".into(), 6, 10);
        assert!(c.get(0, &"a".into()).is_some() && c.get(1, &"a".into()).is_some(), "[6, 10) touches neither");
        c.forget_over(&"b".into(), 0, 100);
        assert!(c.get(0, &"a".into()).is_some(), "another site");
        c.forget_over(&"a".into(), 49, 60);
        assert!(c.get(0, &"a".into()).is_some() && c.get(1, &"a".into()).is_none(), "[49, 60) overlaps [10, 50) only");
        c.forget_over(&"a".into(), 0, 2);
        assert!(c.get(0, &"a".into()).is_none());
    }

    #[test]
    fn a_shift_keeps_the_answers_it_cannot_change() {
        let mut c = QueryCache::default();
        c.at(100, true);
        // Window starts 100 (st + 0) and 400 (st + 300); earliest starts 150, 400 and none.
        c.put(0, ComputeOffer { earliest_start: Some(150), ..offer("a") }, &query("a", 100, 60, 1000), false);
        c.put(1, ComputeOffer { earliest_start: Some(400), ..offer("a") }, &query("a", 400, 60, 1000), false);
        c.put(0, ComputeOffer { earliest_start: None, ..offer("b") }, &query("b", 100, 60, 1000), false);
        c.at(150, true);
        assert!(c.get(0, &"a".into()).is_some(), "150 >= the new window start 150");
        assert!(c.get(0, &"b".into()).is_some(), "no slot before the deadline stays so");
        assert!(c.get(1, &"a".into()).is_none(), "400 < the new window start 450");
        c.at(160, false);
        assert!(c.get(0, &"b".into()).is_none(), "policy load: nothing kept");
    }

    /// Issue 53: a floating job's answers are kept by window, dropped with the site's range
    /// as the others are, and all of them at a shift of `st`; a job is asked ahead once per
    /// site and `st`.
    #[test]
    fn floating_answers_are_kept_by_window_until_their_range_changes_or_st_shifts() {
        let mut c = QueryCache::default();
        c.at(0, true);
        // From 100: earliest 100 for 5 s, depends on [100, 105); from 200: on [200, 205).
        let at = |t: Time| ComputeOffer { earliest_start: Some(t), ..offer("a") };
        c.put(3, at(100), &query("a", 100, 5, 500), true);
        c.put(3, at(200), &query("a", 200, 5, 500), true);
        assert!(c.get_floating(3, &"a".into(), 100).is_some() && c.get_floating(3, &"a".into(), 200).is_some());
        assert!(c.get_floating(3, &"a".into(), 150).is_none(), "another window: not asked");
        assert!(c.get(3, &"a".into()).is_none(), "not among the laid-out answers");
        c.forget_over(&"b".into(), 0, 300);
        assert!(c.get_floating(3, &"a".into(), 100).is_some(), "another site");
        c.forget_over(&"a".into(), 150, 210);
        assert!(c.get_floating(3, &"a".into(), 100).is_some(), "[150, 210) does not touch [100, 105)");
        assert!(c.get_floating(3, &"a".into(), 200).is_none(), "it touches [200, 205)");
        c.put(4, ComputeOffer { earliest_start: None, ..offer("a") }, &query("a", 100, 5, 500), true);
        c.forget_over(&"a".into(), 400, 450);
        assert!(c.get_floating(4, &"a".into(), 100).is_none(), "no slot: depends on [100, 500)");
        assert!(!c.asked_ahead(5, &"a".into()));
        c.ask_ahead(5, &"a".into());
        assert!(c.asked_ahead(5, &"a".into()) && !c.asked_ahead(5, &"b".into()));
        c.put(6, offer("a"), &query("a", 100, 5, 500), true);
        c.at(10, true);
        assert!(c.get_floating(6, &"a".into(), 100).is_none(), "a shift forgets floating answers");
        assert!(!c.asked_ahead(5, &"a".into()), "and what was asked ahead");
    }
}
