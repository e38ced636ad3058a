//! The generator's random streams: one seeded ChaCha8 stream per random component (see the
//! parent module), and discrete distributions with integer weights.

use rand::distributions::{Distribution, WeightedIndex};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Stream numbers of the random components (see the module documentation).
pub(super) mod stream {
    pub const ARRIVALS: u64 = 1;
    pub const CPUS: u64 = 2;
    pub const JOB_DURATIONS: u64 = 3;
    pub const TRANSFER_DURATIONS: u64 = 4;
    pub const OS: u64 = 5;
    pub const BANDWIDTHS: u64 = 6;
    pub const DEADLINE_FACTORS: u64 = 7;
    pub const USERS: u64 = 8;
    pub const REQUIREMENTS: u64 = 9;
}

pub(super) fn rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// A discrete distribution over `values` with integer weights.
pub(super) struct Weighted<T> {
    values: Vec<T>,
    index: WeightedIndex<u32>,
}

impl<T: Clone> Weighted<T> {
    pub(super) fn new(choices: &[(T, u32)]) -> Self {
        let index = WeightedIndex::new(choices.iter().map(|c| c.1)).expect("weights checked by validate");
        Weighted { values: choices.iter().map(|c| c.0.clone()).collect(), index }
    }
    pub(super) fn sample(&self, r: &mut ChaCha8Rng) -> T {
        self.values[self.index.sample(r)].clone()
    }
}
