//! The static check before the search ([`crate::planner::PlannerConfig::static_check`],
//! issue 46): a request that can never fit on this grid, whatever is booked, told apart from
//! one that does not fit now.
//!
//! Two necessary conditions, each from what the participants' static capacity allows:
//!
//! - **Peak demand**: jobs that do not float ([`PlanRequest::floats`]) run at fixed offsets
//!   from one start, so those whose laid-out intervals overlap at some offset run together in
//!   every plan. Their CPUs together must fit in all the sites that can run any of them (the
//!   catalogue's candidates and their CPUs). Floating jobs can wait for each other: they are
//!   left out. Checked at each such job's start offset (where the running set grows).
//! - **A transfer above every path's capacity**: a transfer whose two jobs have no candidate
//!   site in common needs the network in every plan; if the widest path between every pair
//!   of their candidate sites carries less than its bandwidth (the NIS's
//!   [`crate::protocol::Participant::ceilings`], one message for the whole request), it
//!   never fits. Jobs with a common candidate site may share it and need no network: not
//!   checked.
//!
//! Both are sound (a request they refuse has no plan on this grid) and not complete (a
//! request they pass may still never fit: GPUs, the combination of several transfers on one
//! link, a site's CPUs shared by jobs of several groups).

use std::collections::{BTreeMap, HashMap};

use super::Attempt;
use crate::model::{PlanRequest, SiteId};
use crate::planner::fixes::TentativeBook;
use crate::protocol::NetworkQuery;

/// At most this many names in a list of a reason (then "and N more").
const NAMES: usize = 5;

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<String> = it.map(|n| format!("`{n}`")).collect();
    if all.len() > NAMES {
        format!("{} and {} more", all[..NAMES].join(", "), all.len() - NAMES)
    } else {
        all.join(", ")
    }
}

/// The first group of non-floating jobs of `req` that run together and need more CPUs than
/// the sites that can run them have (`ever[j]`: job `j`'s candidate sites and their CPUs):
/// the reason.
pub(in crate::planner) fn peak_demand(req: &PlanRequest, ever: &[Vec<(SiteId, u32)>]) -> Option<String> {
    let rigid: Vec<usize> = (0..req.jobs().len()).filter(|&j| !req.floats(j)).collect();
    let mut instants: Vec<i64> = rigid.iter().map(|&j| req.job_span(j).offset_s).collect();
    instants.sort_unstable();
    instants.dedup();
    for t in instants {
        let running: Vec<usize> = rigid
            .iter()
            .copied()
            .filter(|&j| {
                let s = req.job_span(j);
                s.offset_s <= t && t < s.end_s()
            })
            .collect();
        let need: u64 = running.iter().map(|&j| u64::from(req.jobs()[j].cpus)).sum();
        let mut sites: BTreeMap<&SiteId, u32> = BTreeMap::new();
        for &j in &running {
            for (s, cpus) in &ever[j] {
                sites.insert(s, *cpus);
            }
        }
        let have: u64 = sites.values().map(|&c| u64::from(c)).sum();
        if need > have {
            return Some(format!(
                "jobs {} run together (from offset {t} s) and need {need} CPUs; the sites that can run them ({}) have \
                 {have} in all",
                names(running.iter().map(|&j| req.jobs()[j].name.as_str())),
                names(sites.keys().map(|s| s.as_str())),
            ));
        }
    }
    None
}

impl<B: TentativeBook> Attempt<'_, B> {
    /// Why the request can never fit on this grid (see the module docs), or `None`.
    pub(super) async fn never_fits(&mut self, ever: &[Vec<(SiteId, u32)>]) -> Option<String> {
        let req = self.req;
        if let Some(why) = peak_demand(req, ever) {
            return Some(why);
        }
        // Transfers that need the network in every plan, and the site pairs they may use.
        let mut must: Vec<(usize, Vec<(SiteId, SiteId)>)> = Vec::new();
        for e in 0..req.transfers().len() {
            let (a, b) = req.transfer_ends(e);
            if ever[a].iter().any(|(s, _)| ever[b].iter().any(|(t, _)| s == t)) {
                continue;
            }
            let pairs = ever[a].iter().flat_map(|(s, _)| ever[b].iter().map(move |(t, _)| (s.clone(), t.clone())));
            must.push((e, pairs.collect()));
        }
        if must.is_empty() {
            return None;
        }
        let mut index: HashMap<(SiteId, SiteId), usize> = HashMap::new();
        let mut questions = Vec::new();
        for (_, pairs) in &must {
            for (s, t) in pairs {
                index.entry((s.clone(), t.clone())).or_insert_with(|| {
                    questions.push(NetworkQuery {
                        from_site: s.clone(),
                        to_site: t.clone(),
                        bandwidth_mbps: 1,
                        start: req.submitted_at(),
                        end: req.submitted_at() + 1,
                    });
                    questions.len() - 1
                });
            }
        }
        let ceilings = self.book.ceilings(questions).await?;
        for (e, pairs) in must {
            let t = &req.transfers()[e];
            let widest = pairs.iter().map(|p| ceilings.get(index[p]).copied().unwrap_or(u64::MAX)).max().unwrap_or(0);
            if widest < t.bandwidth_mbps {
                return Some(format!(
                    "transfer {}->{} needs {} Mbit/s; the widest path between a site that can run `{}` and one \
                     that can run `{}` carries {widest}",
                    t.from, t.to, t.bandwidth_mbps, t.from, t.to
                ));
            }
        }
        None
    }
}
