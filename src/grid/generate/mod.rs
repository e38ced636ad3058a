//! Synthetic grids: a GridG-style generator (`gridg-n`, `gridg-w`) and k-ary fat-trees.
//!
//! **GridG** (D. Lu and P. A. Dinda, "GridG: Generating Realistic Computational Grids", ACM
//! SIGMETRICS PER 30(4), 2003; "Synthesizing Realistic Computational Grids", SC 2003) builds a
//! grid in two steps: a structured topology from Tiers (M. Doar, "A Better Model for Generating
//! Test Networks", GLOBECOM 1996) — WAN, MAN and LAN networks in a hierarchy — to which extra
//! links are added until the node degrees follow the Internet's outdegree power law
//! (Faloutsos, Faloutsos & Faloutsos, SIGCOMM 1999: the number of nodes of degree `d` is
//! proportional to `d^-alpha`), then annotation of hosts with attributes. GridG itself is not
//! available to us (docs/simulator.md), so [`gridg()`] is our reconstruction from that description;
//! the exact rules are documented on [`gridg()`].
//!
//! **Fat-tree**: M. Al-Fares, A. Loukissas, A. Vahdat, "A Scalable, Commodity Data Center
//! Network Architecture", SIGCOMM 2008 (Watashiba's thesis uses it; docs/README.md).
//!
//! Files: `gridg.rs` ([`gridg()`] and its parameters), `fat_tree.rs` ([`fat_tree()`]), `tests.rs`.

mod fat_tree;
mod gridg;
#[cfg(test)]
mod tests;

pub use fat_tree::{fat_tree, FAT_TREE_CAPACITY_MBPS, FAT_TREE_PRICE_PER_GBPS_HOUR};
pub use gridg::{gridg, GridgParams, GridgParamsError, GridgVariant, LinkClass};
