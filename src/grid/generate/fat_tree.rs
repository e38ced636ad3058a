//! k-ary fat-trees (Al-Fares et al., SIGCOMM 2008; see [`fat_tree`]).

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::grid::sites::{attach_sites, SiteParams};
use crate::model::{Grid, Link, Node, NodeId};

/// Capacity of every fat-tree link: 10 Gbit/s (a 10 GbE data-centre fabric; Al-Fares et al.
/// use 1 GbE, we scale up so hosts with hundreds of CPUs are not starved).
pub const FAT_TREE_CAPACITY_MBPS: u64 = 10_000;

/// Price of every fat-tree link per Gbit/s-hour: 0.1, the same as the importer's default.
pub const FAT_TREE_PRICE_PER_GBPS_HOUR: f64 = 0.1;

/// Generates a k-ary fat-tree (Al-Fares et al., SIGCOMM 2008) with one site per host.
///
/// Shape: `k` pods, each with `k/2` aggregation switches `agg-{p}-{i}` and `k/2` edge switches
/// `edge-{p}-{i}`; `(k/2)^2` core switches `core-{c}`: `5k^2/4` switches in all. Every edge
/// switch serves `k/2` hosts `host-{p}-{e}-{h}`: `k^3/4` hosts. Links (`3k^3/4` in all,
/// ids `{a}--{b}`): core `c = i*(k/2) + j` to aggregation switch `i` of every pod; every
/// aggregation switch to every edge switch of its pod; every edge switch to its hosts. All
/// links [`FAT_TREE_CAPACITY_MBPS`] at [`FAT_TREE_PRICE_PER_GBPS_HOUR`]. Each host carries
/// a site `site-{host id}` drawn by [`attach_sites`] with a `ChaCha8Rng` seeded from `seed`
/// (the topology itself is not random).
///
/// Example: `k = 4` gives 4 core + 8 aggregation + 8 edge = 20 switches, 16 hosts, 48 links.
///
/// # Panics
/// If `k` is 0 or odd, or `params` is invalid (see [`SiteParams::validate`]).
pub fn fat_tree(k: u32, seed: u64, params: &SiteParams) -> Grid {
    assert!(k > 0 && k.is_multiple_of(2), "fat_tree: k must be even and > 0, got {k}");
    let half = (k / 2) as usize;
    let mut nodes = Vec::new();
    let mut links = Vec::new();
    let mut hosts = Vec::new();
    let mut add_node = |id: String, label: String| {
        nodes.push(Node::new(id.clone(), label));
        id
    };
    let link = |a: &str, b: &str| Link {
        id: format!("{a}--{b}").into(),
        a: a.into(),
        b: b.into(),
        capacity_mbps: FAT_TREE_CAPACITY_MBPS,
        price_per_gbps_hour: FAT_TREE_PRICE_PER_GBPS_HOUR,
    };
    let cores: Vec<String> =
        (0..half * half).map(|c| add_node(format!("core-{c}"), format!("core switch {c}"))).collect();
    for p in 0..k as usize {
        let aggs: Vec<String> =
            (0..half).map(|i| add_node(format!("agg-{p}-{i}"), format!("aggregation switch {p}.{i}"))).collect();
        let edges: Vec<String> =
            (0..half).map(|i| add_node(format!("edge-{p}-{i}"), format!("edge switch {p}.{i}"))).collect();
        for (i, agg) in aggs.iter().enumerate() {
            for core in &cores[i * half..(i + 1) * half] {
                links.push(link(core, agg));
            }
            for edge in &edges {
                links.push(link(agg, edge));
            }
        }
        for (e, edge) in edges.iter().enumerate() {
            for h in 0..half {
                let host = add_node(format!("host-{p}-{e}-{h}"), format!("host {p}.{e}.{h}"));
                links.push(link(edge, &host));
                hosts.push(NodeId::from(host));
            }
        }
    }
    let sites = attach_sites(&hosts, params, &mut ChaCha8Rng::seed_from_u64(seed));
    Grid::new(nodes, links, sites).expect("fat_tree builds a valid grid")
}
