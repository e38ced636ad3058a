//! Heterogeneous site attributes for imported and generated grids (`--heterogeneity`).
//!
//! [`Heterogeneity::Mixed`] gives every site attributes drawn from this documented distribution
//! (a grid of several procurement rounds; docs/model.md, "Heterogeneous sites"), one seeded
//! stream per grid, independent of the streams that drew the sites' CPUs, OS and prices:
//!
//! | attribute | distribution |
//! |---|---|
//! | architecture | `x86_64` 70 %, `aarch64` 20 %, `ppc64le` 10 % |
//! | generation, extensions | `x86_64`: generation 1-4 uniform, cumulative `sse4_2`, `avx`, `avx2`, `avx512f`; `aarch64`: 1-2, `neon`, then `sve`; `ppc64le`: 1, `vsx` |
//! | GPUs | 40 % of sites: one pool, model uniform among `k80` (capability 3.7, 12 GiB), `v100` (7.0, 16 GiB), `a100` (8.0, 40 GiB), `h100` (9.0, 80 GiB), count 4, 8 or 16; 2.0 per GPU-hour |
//! | software | `gcc 12.2`; with GPUs `cuda 12.1`; with GPUs, 50 %: `tensorflow 2.13` depending on `cuda >=11.8`, needing `avx` and capability 3.5 (so it is unusable on an `aarch64` site or beside a `k80`: Saito & Hirotsu's rule) |
//! | labels | `ssd` 30 %, `infiniband` 20 %, independently |
//!
//! [`Heterogeneity::None`] leaves the defaults (round 1's homogeneous grids, unchanged).

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::model::{Arch, GpuPool, Grid, Package, SiteAttributes};

/// How heterogeneous the sites of an imported or generated grid are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Heterogeneity {
    /// Default attributes everywhere (`x86_64`, no GPUs, no software, no labels).
    #[default]
    None,
    /// The distribution of the module docs.
    Mixed,
}

/// Separates this stream from the site generator's (same seed, another stream).
const STREAM: u64 = 0x4e7e_0003;

/// `grid` with every site's attributes drawn for `level` from `seed` (prices, CPUs, OS and the
/// topology unchanged).
pub fn heterogenize(grid: Grid, level: Heterogeneity, seed: u64) -> Grid {
    if level == Heterogeneity::None {
        return grid;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ STREAM);
    let (nodes, links, mut sites) = grid.into_parts();
    for s in &mut sites {
        s.attributes = mixed_site(&mut rng);
    }
    Grid::new(nodes, links, sites).expect("drawn attributes are valid")
}

fn mixed_site(rng: &mut ChaCha8Rng) -> SiteAttributes {
    let draw: f64 = rng.gen();
    let (arch, generations, ladder): (Arch, u32, &[&str]) = if draw < 0.7 {
        (Arch::X86_64, 4, &["sse4_2", "avx", "avx2", "avx512f"])
    } else if draw < 0.9 {
        (Arch::Aarch64, 2, &["neon", "sve"])
    } else {
        (Arch::Ppc64le, 1, &["vsx"])
    };
    let generation = rng.gen_range(1..=generations);
    let extensions: Vec<String> = ladder[..generation as usize].iter().map(|x| (*x).to_owned()).collect();
    let gpus: Vec<GpuPool> = if rng.gen_bool(0.4) {
        let (model, cc, mem) = *[("k80", 3.7, 12), ("v100", 7.0, 16), ("a100", 8.0, 40), ("h100", 9.0, 80)]
            .choose(rng)
            .expect("non-empty");
        let count = *[4, 8, 16].choose(rng).expect("non-empty");
        vec![GpuPool { model: model.into(), count, compute_capability: cc, memory_gib: mem }]
    } else {
        vec![]
    };
    let package = |name: &str, version: &str, depends: &[&str]| Package {
        name: name.into(),
        version: version.parse().expect("valid version"),
        depends: depends.iter().map(|d| d.parse().expect("valid requirement")).collect(),
        needs_extensions: vec![],
        needs_gpu_compute_capability: None,
    };
    let mut software = vec![package("gcc", "12.2", &[])];
    if !gpus.is_empty() {
        software.push(package("cuda", "12.1", &[]));
        if rng.gen_bool(0.5) {
            software.push(Package {
                needs_extensions: vec!["avx".into()],
                needs_gpu_compute_capability: Some(3.5),
                ..package("tensorflow", "2.13", &["cuda >=11.8"])
            });
        }
    }
    let mut labels = Vec::new();
    if rng.gen_bool(0.3) {
        labels.push("ssd".to_owned());
    }
    if rng.gen_bool(0.2) {
        labels.push("infiniband".to_owned());
    }
    let price_per_gpu_hour = if gpus.is_empty() { 0.0 } else { 2.0 };
    SiteAttributes { arch, cpu_generation: Some(generation), extensions, gpus, price_per_gpu_hour, software, labels }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::{gridg, GridgParams, GridgVariant};

    #[test]
    fn mixed_sites_are_reproducible_valid_and_varied() {
        let g = gridg(GridgVariant::Wide, 1, &GridgParams::default());
        assert_eq!(heterogenize(g.clone(), Heterogeneity::None, 7), g);
        let a = heterogenize(g.clone(), Heterogeneity::Mixed, 7);
        assert_eq!(a, heterogenize(g.clone(), Heterogeneity::Mixed, 7), "same seed, same grid");
        assert_ne!(a, heterogenize(g.clone(), Heterogeneity::Mixed, 8));
        let sites = a.sites();
        assert!(sites.iter().any(|s| !s.attributes.gpus.is_empty()));
        assert!(sites.iter().any(|s| s.attributes.gpus.is_empty()));
        assert!(sites.iter().any(|s| s.attributes.arch != Arch::X86_64));
        for (s, before) in sites.iter().zip(g.sites()) {
            assert_eq!((s.cpus, &s.os, s.price_per_cpu_hour), (before.cpus, &before.os, before.price_per_cpu_hour));
        }
    }
}
