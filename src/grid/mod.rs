//! Grid importers and generators: where the [`Grid`] of an experiment comes from.
//!
//! - [`import_graphml`]: real research-network topologies from the Internet Topology Zoo
//!   (GraphML), with one synthetic site per node;
//! - [`gridg`]: `gridg-n` / `gridg-w`, a GridG-style generator (Lu & Dinda 2003) for the
//!   topologies of Ando & Aida's experiment (docs/simulator.md);
//! - [`fat_tree`]: k-ary fat-trees (Al-Fares et al. 2008), the data-centre case of Watashiba's thesis;
//! - [`attach_sites`]: the site attributes shared by all of them (CPUs, OS, CPU price);
//! - [`heterogenize`]: architectures, extensions, GPUs, software and labels (`--heterogeneity`);
//! - [`load_grid`] / [`save_grid`]: `grid.json` files (format on [`Grid`]).
//!
//! Randomness: every function takes a seed and uses `rand_chacha::ChaCha8Rng`, so the same
//! seed gives the same grid on every platform (reproducible runs; docs/simulator.md).

mod generate;
mod graphml;
mod heterogeneity;
mod sites;

use std::path::Path;

use anyhow::Context;

use crate::model::Grid;

pub use generate::{
    fat_tree, gridg, GridgParams, GridgParamsError, GridgVariant, LinkClass, FAT_TREE_CAPACITY_MBPS,
    FAT_TREE_PRICE_PER_GBPS_HOUR,
};
pub use graphml::{import_graphml, node_id_for, GraphmlError, ImportOptions};
pub use heterogeneity::{heterogenize, Heterogeneity};
pub use sites::{attach_sites, site_id_for, SiteParams, SiteParamsError};

/// Reads a grid from a JSON file (the `grid.json` format documented on [`Grid`]).
///
/// The grid is validated while parsing ([`Grid::new`]).
///
/// # Errors
/// The file cannot be read, is not valid JSON of that shape, or fails validation; the message
/// names the path.
pub fn load_grid(path: &Path) -> anyhow::Result<Grid> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading grid file {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing grid file {}", path.display()))
}

/// Writes a grid as pretty-printed JSON (with a final newline), replacing the file if present.
///
/// # Errors
/// Serialisation or writing fails; the message names the path.
pub fn save_grid(grid: &Grid, path: &Path) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(grid).context("serialising grid")?;
    text.push('\n');
    std::fs::write(path, text).with_context(|| format!("writing grid file {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_then_load_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        for (name, g) in [
            ("gridg-n.json", gridg(GridgVariant::Narrow, 1, &GridgParams::default())),
            ("gridg-w.json", gridg(GridgVariant::Wide, 1, &GridgParams::default())),
            ("fat4.json", fat_tree(4, 1, &SiteParams::default())),
        ] {
            let path = dir.path().join(name);
            save_grid(&g, &path).unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.starts_with("{\n") && text.ends_with("}\n"));
            assert_eq!(load_grid(&path).unwrap(), g);
        }
    }

    #[test]
    fn load_reports_path_and_validation_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.json");
        let e = format!("{:#}", load_grid(&missing).unwrap_err());
        assert!(e.contains("nope.json"), "{e}");
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, r#"{"nodes":[{"id":"a"}],"links":[],"sites":[{"id":"s","node":"zz","cpus":1,"os":"linux","price_per_cpu_hour":1}]}"#).unwrap();
        let e = format!("{:#}", load_grid(&bad).unwrap_err());
        assert!(e.contains("bad.json") && e.contains("unknown node"), "{e}");
    }
}
