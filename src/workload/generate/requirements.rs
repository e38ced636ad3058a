//! What generated jobs require of their sites (`workload --requirements`).
//!
//! [`RequirementsProfile::Mixed`] draws each job's requirements independently, from its own
//! random stream (so the other components of a workload stay the same with or without it):
//!
//! | share | `requires` |
//! |---|---|
//! | 55 % | nothing |
//! | 15 % | `extensions: ["avx2"]` |
//! | 10 % | `arch: "aarch64"` |
//! | 12 % | `gpus: {count: 1, 2 or 4, min_compute_capability: 7.0}` |
//! | 8 % | `software: ["tensorflow >=2.12, <3"], gpus: {count: 1}` |
//!
//! Against a `--heterogeneity mixed` grid (`crate::grid::heterogenize`) each kind of job can run
//! on some sites only; TensorFlow only where it is installed with CUDA, an AVX CPU and a GPU of
//! capability 3.5 or more.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::model::{Arch, GpuDemand, Requirements};

/// How generated jobs are constrained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum RequirementsProfile {
    /// No job requires anything beyond its OS and CPUs (round 1's workloads, unchanged).
    #[default]
    None,
    /// The distribution of the module docs.
    Mixed,
}

impl RequirementsProfile {
    /// One job's requirements, drawn from `r` (which is not touched for `None`).
    pub(super) fn draw(self, r: &mut ChaCha8Rng) -> Requirements {
        if self == RequirementsProfile::None {
            return Requirements::default();
        }
        let gpus =
            |count, min_cc| GpuDemand { count, min_compute_capability: min_cc, min_memory_gib: None, model: None };
        match r.gen_range(0..100) {
            0..55 => Requirements::default(),
            55..70 => Requirements { extensions: vec!["avx2".into()], ..Default::default() },
            70..80 => Requirements { arch: Some(Arch::Aarch64), ..Default::default() },
            80..92 => {
                let count = [1, 2, 4][r.gen_range(0..3)];
                Requirements { gpus: Some(gpus(count, Some(7.0))), ..Default::default() }
            }
            _ => Requirements {
                software: vec!["tensorflow >=2.12, <3".parse().expect("valid requirement")],
                gpus: Some(gpus(1, None)),
                ..Default::default()
            },
        }
    }
}
