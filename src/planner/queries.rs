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
//! An answer stays exact for this planner: answers are kept for one `st` only, and the
//! answers from a site are dropped as soon as this attempt holds or aborts something there
//! (its own change would alter them). Other planners' changes since the batch make an answer
//! stale as they make any answer stale between query and prepare: a prepare that is refused
//! moves the search to the next candidate, as it always did. Not used under BBR-overlay (its
//! queries depend on the plan's own overlay, which changes at every fix).

use std::collections::HashMap;

use crate::model::{SiteId, Time};
use crate::protocol::ComputeOffer;

/// Answers of the current `st`, by (job index, site).
#[derive(Default)]
pub(super) struct QueryCache {
    st: Time,
    answers: HashMap<(usize, SiteId), ComputeOffer>,
}

impl QueryCache {
    /// Forgets every answer unless they are for `st`.
    pub(super) fn at(&mut self, st: Time) {
        if self.st != st {
            self.answers.clear();
            self.st = st;
        }
    }

    /// The answer for job `v` at `site`, if asked at the current `st`.
    pub(super) fn get(&self, v: usize, site: &SiteId) -> Option<&ComputeOffer> {
        self.answers.get(&(v, site.clone()))
    }

    /// Keeps `offer`, the answer for job `v` at `site`.
    pub(super) fn put(&mut self, v: usize, site: SiteId, offer: ComputeOffer) {
        self.answers.insert((v, site), offer);
    }

    /// Forgets the answers from `site` (this attempt changed its calendar).
    pub(super) fn forget_site(&mut self, site: &SiteId) {
        self.answers.retain(|(_, s), _| s != site);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(site: &str) -> ComputeOffer {
        ComputeOffer {
            site: site.into(),
            earliest_start: Some(1),
            utilisation: 0.0,
            price_per_cpu_hour: 1.0,
            gpu_model: None,
            price_per_gpu_hour: 0.0,
        }
    }

    #[test]
    fn answers_live_for_one_st_and_until_their_site_changes() {
        let mut c = QueryCache::default();
        c.at(10);
        c.put(0, "a".into(), offer("a"));
        c.put(1, "a".into(), offer("a"));
        c.put(1, "b".into(), offer("b"));
        c.at(10);
        assert!(c.get(0, &"a".into()).is_some(), "same st: kept");
        c.forget_site(&"a".into());
        assert!(c.get(0, &"a".into()).is_none() && c.get(1, &"a".into()).is_none());
        assert!(c.get(1, &"b".into()).is_some(), "other sites kept");
        c.at(11);
        assert!(c.get(1, &"b".into()).is_none(), "a new st forgets everything");
    }
}
