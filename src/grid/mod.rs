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

use std::path::{Path, PathBuf};

use crate::model::Grid;

pub use generate::{
    fat_tree, gridg, GridgParams, GridgParamsError, GridgVariant, LinkClass, FAT_TREE_CAPACITY_MBPS,
    FAT_TREE_PRICE_PER_GBPS_HOUR,
};
pub use graphml::{import_graphml, node_id_for, GraphmlError, ImportOptions};
pub use heterogeneity::{heterogenize, Heterogeneity};
pub use sites::{attach_sites, site_id_for, SiteParams, SiteParamsError};

/// A grid file that could not be read or written; each names the path, the cause is its
/// source.
#[derive(Debug, thiserror::Error)]
pub enum GridFileError {
    /// The file cannot be read.
    #[error("reading grid file {}", .path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// Not JSON of the `grid.json` shape, or the grid fails validation ([`Grid::new`]).
    #[error("parsing grid file {}", .path.display())]
    Parse { path: PathBuf, source: serde_json::Error },
    /// The file cannot be written.
    #[error("writing grid file {}", .path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// Reads a grid from a JSON file (the `grid.json` format documented on [`Grid`]).
///
/// The grid is validated while parsing ([`Grid::new`]).
///
/// # Errors
/// [`GridFileError::Read`] or [`GridFileError::Parse`].
pub fn load_grid(path: &Path) -> Result<Grid, GridFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| GridFileError::Read { path: path.into(), source })?;
    serde_json::from_str(&text).map_err(|source| GridFileError::Parse { path: path.into(), source })
}

/// Writes a grid as pretty-printed JSON (with a final newline), replacing the file if present.
///
/// # Errors
/// [`GridFileError::Write`].
pub fn save_grid(grid: &Grid, path: &Path) -> Result<(), GridFileError> {
    let mut text = serde_json::to_string_pretty(grid).expect("a Grid serialises to JSON (string keys, finite numbers)");
    text.push('\n');
    std::fs::write(path, text).map_err(|source| GridFileError::Write { path: path.into(), source })
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
        let e = load_grid(&missing).unwrap_err();
        assert!(matches!(e, GridFileError::Read { .. }) && e.to_string().contains("nope.json"), "{e}");
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, r#"{"nodes":[{"id":"a"}],"links":[],"sites":[{"id":"s","node":"zz","cpus":1,"os":"linux","price_per_cpu_hour":1}]}"#).unwrap();
        let e = load_grid(&bad).unwrap_err();
        assert!(matches!(e, GridFileError::Parse { .. }) && e.to_string().contains("bad.json"), "{e}");
        // The cause is the error's source (anyhow's `{:#}` prints both).
        let cause = std::error::Error::source(&e).expect("a source").to_string();
        assert!(cause.contains("unknown node"), "{cause}");
        let chain = format!("{:#}", anyhow::Error::from(e));
        assert!(chain.contains("bad.json") && chain.contains("unknown node"), "{chain}");
    }
}
