//! The selection policies of Ando & Aida (`time`, `cost`, `load`, `random`): the
//! order in which the search tries a job's candidate sites, with ties broken at random.

use rand::seq::SliceRandom;

use super::Attempt;
use crate::model::{SelectionPolicy, Time};
use crate::planner::fixes::TentativeBook;
use crate::protocol::{ComputeOffer, ParticipantError};

/// The seed of a search's random stream (tie-breaks, the order transfers are checked in): the
/// request's `seed`, except under `time`, which draws from a stream of its own. Sharing one,
/// whenever CPUs did not bind (every site offering the job's own start), `time` booked exactly
/// what `random` booked under the same seed, and the simulator counted those cells as
/// evidence. A fixed tie-break instead (say, price then site id) piles a plan's jobs on one
/// site, which BBR pays for with refused batches (docs/algorithm.md).
pub(super) fn stream_seed(seed: u64, policy: SelectionPolicy) -> u64 {
    const TIME_STREAM: u64 = 0x7469_6d65_5f74_6965; // "time_tie"
    match policy {
        SelectionPolicy::Time => seed ^ TIME_STREAM,
        _ => seed,
    }
}

impl<B: TentativeBook> Attempt<'_, B> {
    /// The usable offers among `answers` for job `v`, ordered by the selection policy (ties
    /// at random, `time`'s from a stream of its own: [`stream_seed`]).
    pub(super) fn rank(
        &mut self,
        v: usize,
        answers: Vec<Result<ComputeOffer, ParticipantError>>,
    ) -> Vec<(Time, ComputeOffer)> {
        let job = &self.req.jobs()[v];
        let mut offers: Vec<(Time, ComputeOffer)> = answers
            .into_iter()
            .filter_map(|a| match a {
                Ok(o) => o.earliest_start.map(|t| (t, o)),
                Err(e) => {
                    tracing::warn!(error = %e, "LIS query failed; site skipped");
                    None
                }
            })
            .collect();
        // Ties are broken at random: a fixed tie-break (say, by site id) would pile every
        // demand of a plan onto the same site whenever several are equally good.
        offers.shuffle(&mut self.rng);
        match self.policy {
            SelectionPolicy::Time => offers.sort_by_key(|o| o.0),
            SelectionPolicy::Cost => {
                let price = |o: &ComputeOffer| o.price_per_hour(job.cpus, job.gpus());
                offers.sort_by(|a, b| price(&a.1).total_cmp(&price(&b.1)).then(a.0.cmp(&b.0)))
            }
            SelectionPolicy::Load => {
                offers.sort_by(|a, b| a.1.utilisation.total_cmp(&b.1.utilisation).then(a.0.cmp(&b.0)))
            }
            SelectionPolicy::Random => {}
        }
        offers
    }
}
