//! Compute resources (sites) attached to topology nodes.
//!
//! The attributes follow Ando & Aida's experiment (docs/simulator.md): three operating systems in
//! the ratio Linux : Solaris : BSD = 1 : 1 : 1, a fixed price per CPU-hour per site, and enough
//! CPUs at every site for the largest compute demand (128 CPUs, the top of the range into which
//! the SDSC-BLUE CPU counts are modelled).

use rand::seq::SliceRandom;
use rand::Rng;

use crate::model::{NodeId, Site, SiteAttributes, SiteId};

/// How [`attach_sites`] draws the attributes of each site.
///
/// See [`SiteParams::default`] for the values used by the importers and generators unless
/// told otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteParams {
    /// CPU counts to draw from, each with equal probability. Must be non-empty, all > 0.
    pub cpus_choices: Vec<u32>,
    /// Operating systems, assigned so that their counts differ by at most one
    /// (see [`attach_sites`]). Must be non-empty.
    pub os_choices: Vec<String>,
    /// `(low, high)`: the price of one CPU for one hour is drawn uniformly from the closed
    /// interval `[low, high]` (currency units per CPU-hour). Needs `0 <= low <= high`, finite.
    pub price_per_cpu_hour_range: (f64, f64),
}

impl Default for SiteParams {
    /// `cpus_choices = [128, 256, 512]` (mean 298.7 CPUs per site; every site can hold the
    /// largest compute demand of 128 CPUs), `os_choices = ["linux", "solaris", "bsd"]`
    /// (balanced 1:1:1 as in Ando & Aida), `price_per_cpu_hour_range = (0.5, 1.5)`.
    fn default() -> Self {
        SiteParams {
            cpus_choices: vec![128, 256, 512],
            os_choices: vec!["linux".into(), "solaris".into(), "bsd".into()],
            price_per_cpu_hour_range: (0.5, 1.5),
        }
    }
}

/// Why a [`SiteParams`] cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SiteParamsError {
    /// `cpus_choices` is empty.
    #[error("site parameters: cpus_choices is empty")]
    NoCpuChoices,
    /// `cpus_choices` contains 0.
    #[error("site parameters: cpus_choices contains 0")]
    ZeroCpus,
    /// `os_choices` is empty.
    #[error("site parameters: os_choices is empty")]
    NoOsChoices,
    /// The price range is not `0 <= low <= high` with both finite.
    #[error("site parameters: price_per_cpu_hour_range ({0}, {1}) must satisfy 0 <= low <= high, finite")]
    BadPriceRange(f64, f64),
}

impl SiteParams {
    /// Checks the parameters (see the field docs for the rules).
    ///
    /// # Errors
    /// The first [`SiteParamsError`] found.
    pub fn validate(&self) -> Result<(), SiteParamsError> {
        if self.cpus_choices.is_empty() {
            return Err(SiteParamsError::NoCpuChoices);
        }
        if self.cpus_choices.contains(&0) {
            return Err(SiteParamsError::ZeroCpus);
        }
        if self.os_choices.is_empty() {
            return Err(SiteParamsError::NoOsChoices);
        }
        let (lo, hi) = self.price_per_cpu_hour_range;
        if !(lo.is_finite() && hi.is_finite() && lo >= 0.0 && lo <= hi) {
            return Err(SiteParamsError::BadPriceRange(lo, hi));
        }
        Ok(())
    }
}

/// Site id used for the site attached to topology node `node_id`: `site-{node_id}`.
pub fn site_id_for(node_id: &str) -> SiteId {
    format!("site-{node_id}").into()
}

/// Attaches one site to every node in `node_ids`, in that order.
///
/// Output: one [`Site`] per input node, same order, with id `site-{node id}`
/// ([`site_id_for`]) and `node` = the node id. Attributes:
/// - **OS**: the node indices are shuffled with `rng` (Fisher-Yates), then the OSes are dealt
///   round-robin over the shuffled order, so every OS occurs `n / k` or `n / k + 1` times
///   (`k = os_choices.len()`): the 1:1:1 ratio of Ando & Aida, exact up to rounding.
/// - **CPUs**: then, for each site in input order, one uniform draw from `cpus_choices`;
/// - **price**: then one uniform draw from `[low, high]`, rounded to cents (0.01) so grid
///   files stay readable (the rounded value is clamped back into the range).
///
/// The draws consume `rng` in exactly this order, so the same generator state (e.g. a
/// `rand_chacha::ChaCha8Rng` from the same seed) gives identical sites.
///
/// # Panics
/// If `params` is invalid (see [`SiteParams::validate`]).
pub fn attach_sites(node_ids: &[NodeId], params: &SiteParams, rng: &mut impl Rng) -> Vec<Site> {
    if let Err(e) = params.validate() {
        panic!("attach_sites: {e}");
    }
    let n = node_ids.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(rng);
    let mut os_of = vec![0usize; n];
    for (rank, &idx) in order.iter().enumerate() {
        os_of[idx] = rank % params.os_choices.len();
    }
    let (lo, hi) = params.price_per_cpu_hour_range;
    node_ids
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let cpus = *params.cpus_choices.choose(rng).expect("validated non-empty");
            let raw = if lo < hi { rng.gen_range(lo..=hi) } else { lo };
            let price = ((raw * 100.0).round() / 100.0).clamp(lo, hi);
            Site {
                id: site_id_for(node),
                node: node.clone(),
                cpus,
                os: params.os_choices[os_of[i]].clone(),
                price_per_cpu_hour: price,
                attributes: SiteAttributes::default(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn ids(n: usize) -> Vec<NodeId> {
        (0..n).map(|i| format!("n{i}").into()).collect()
    }

    #[test]
    fn same_seed_same_sites_and_different_seed_differs() {
        let p = SiteParams::default();
        let a = attach_sites(&ids(40), &p, &mut ChaCha8Rng::seed_from_u64(5));
        let b = attach_sites(&ids(40), &p, &mut ChaCha8Rng::seed_from_u64(5));
        let c = attach_sites(&ids(40), &p, &mut ChaCha8Rng::seed_from_u64(6));
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn defaults_ids_ranges_and_balanced_os() {
        let p = SiteParams::default();
        for n in [0usize, 1, 2, 3, 10, 11, 40, 68] {
            let sites = attach_sites(&ids(n), &p, &mut ChaCha8Rng::seed_from_u64(n as u64));
            assert_eq!(sites.len(), n);
            let mut counts = [0usize; 3];
            for (i, s) in sites.iter().enumerate() {
                assert_eq!(s.id, format!("site-n{i}"));
                assert_eq!(s.node, format!("n{i}"));
                assert!([128, 256, 512].contains(&s.cpus), "{}", s.cpus);
                assert!(s.cpus >= 128);
                assert!((0.5..=1.5).contains(&s.price_per_cpu_hour), "{}", s.price_per_cpu_hour);
                let k = p.os_choices.iter().position(|o| *o == s.os).expect("known os");
                counts[k] += 1;
            }
            let (mn, mx) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            assert!(mx - mn <= 1, "n={n} counts={counts:?}");
        }
    }

    #[test]
    fn all_cpu_choices_and_prices_spread() {
        let sites = attach_sites(&ids(300), &SiteParams::default(), &mut ChaCha8Rng::seed_from_u64(1));
        for c in [128, 256, 512] {
            assert!(sites.iter().any(|s| s.cpus == c));
        }
        assert!(sites.iter().any(|s| s.price_per_cpu_hour < 0.7));
        assert!(sites.iter().any(|s| s.price_per_cpu_hour > 1.3));
    }

    #[test]
    fn degenerate_price_range_and_validation() {
        let p = SiteParams { price_per_cpu_hour_range: (1.0, 1.0), ..SiteParams::default() };
        let s = attach_sites(&ids(5), &p, &mut ChaCha8Rng::seed_from_u64(0));
        assert!(s.iter().all(|s| s.price_per_cpu_hour == 1.0));
        let bad = SiteParams { cpus_choices: vec![], ..SiteParams::default() };
        assert_eq!(bad.validate(), Err(SiteParamsError::NoCpuChoices));
        let bad = SiteParams { cpus_choices: vec![0, 4], ..SiteParams::default() };
        assert_eq!(bad.validate(), Err(SiteParamsError::ZeroCpus));
        let bad = SiteParams { os_choices: vec![], ..SiteParams::default() };
        assert_eq!(bad.validate(), Err(SiteParamsError::NoOsChoices));
        let bad = SiteParams { price_per_cpu_hour_range: (2.0, 1.0), ..SiteParams::default() };
        assert_eq!(bad.validate(), Err(SiteParamsError::BadPriceRange(2.0, 1.0)));
        let bad = SiteParams { price_per_cpu_hour_range: (f64::NAN, 1.0), ..SiteParams::default() };
        assert!(bad.validate().is_err());
    }

    #[test]
    #[should_panic(expected = "os_choices is empty")]
    fn attach_panics_on_invalid_params() {
        let bad = SiteParams { os_choices: vec![], ..SiteParams::default() };
        attach_sites(&ids(2), &bad, &mut ChaCha8Rng::seed_from_u64(0));
    }
}
