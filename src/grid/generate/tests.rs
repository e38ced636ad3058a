use std::collections::{HashMap, HashSet};

use petgraph::graph::UnGraph;

use super::gridg::power_law_targets;
use super::*;
use crate::grid::SiteParams;
use crate::model::{Grid, Link};

fn petgraph_of(g: &Grid) -> (UnGraph<(), ()>, HashMap<&str, petgraph::graph::NodeIndex>) {
    let mut pg = UnGraph::new_undirected();
    let idx: HashMap<&str, _> = g.nodes().iter().map(|n| (n.id.as_str(), pg.add_node(()))).collect();
    for l in g.links() {
        pg.add_edge(idx[l.a.as_str()], idx[l.b.as_str()], ());
    }
    (pg, idx)
}

fn degrees(g: &Grid) -> HashMap<&str, usize> {
    let mut d: HashMap<&str, usize> = g.nodes().iter().map(|n| (n.id.as_str(), 0)).collect();
    for l in g.links() {
        *d.get_mut(l.a.as_str()).unwrap() += 1;
        *d.get_mut(l.b.as_str()).unwrap() += 1;
    }
    d
}

fn is_access(g: &Grid, l: &Link) -> bool {
    g.sites().iter().any(|s| s.node == l.a || s.node == l.b)
}

#[test]
fn gridg_is_deterministic_and_seed_sensitive() {
    let p = GridgParams::default();
    for v in [GridgVariant::Narrow, GridgVariant::Wide] {
        assert_eq!(gridg(v, 11, &p), gridg(v, 11, &p));
    }
    let (a, b) = (gridg(GridgVariant::Narrow, 1, &p), gridg(GridgVariant::Narrow, 2, &p));
    assert_ne!(a.links(), b.links());
    assert_ne!(a.sites(), b.sites());
}

#[test]
fn gridg_default_shape_and_sites() {
    let p = GridgParams::default();
    for seed in 0..10 {
        let g = gridg(GridgVariant::Narrow, seed, &p);
        assert_eq!(g.nodes().len(), 4 + 8 + 16 + 32);
        assert_eq!(g.sites().len(), 32);
        let deg = degrees(&g);
        for s in g.sites() {
            assert!(s.node.starts_with("host-"));
            assert_eq!(s.id, format!("site-{}", s.node));
            assert_eq!(deg[s.node.as_str()], 1, "a host has exactly its access link");
            assert!(s.cpus >= 128);
        }
        assert!((5_000..=15_000).contains(&g.total_cpus()), "total {}", g.total_cpus());
        // Access links: 2.5 Gbit/s, to a LAN switch; every other link is router-router.
        for l in g.links() {
            if is_access(&g, l) {
                assert_eq!(l.capacity_mbps, 2_500);
                assert!(l.a.starts_with("lan-") && l.b.starts_with("host-"), "{}", l.id);
            } else {
                assert_eq!(l.capacity_mbps, 10_000, "router links are not the bottleneck");
            }
            if l.a.starts_with("wan-") && l.b.starts_with("wan-") {
                assert_eq!((l.capacity_mbps, l.price_per_gbps_hour), (10_000, 0.3));
            }
        }
        // No parallel links or self-loops.
        let pairs: HashSet<(&str, &str)> =
            g.links().iter().map(|l| if l.a < l.b { (&*l.a, &*l.b) } else { (&*l.b, &*l.a) }).collect();
        assert_eq!(pairs.len(), g.links().len());
        assert!(g.links().iter().all(|l| l.a != l.b));
    }
}

#[test]
fn gridg_connected_and_every_site_reachable() {
    let p = GridgParams::default();
    for seed in 0..10 {
        for v in [GridgVariant::Narrow, GridgVariant::Wide] {
            let g = gridg(v, seed, &p);
            let (pg, idx) = petgraph_of(&g);
            assert_eq!(petgraph::algo::connected_components(&pg), 1);
            let from = idx[g.sites()[0].node.as_str()];
            let mut bfs = petgraph::visit::Bfs::new(&pg, from);
            let mut seen = HashSet::new();
            while let Some(n) = bfs.next(&pg) {
                seen.insert(n);
            }
            assert!(g.sites().iter().all(|s| seen.contains(&idx[s.node.as_str()])));
        }
    }
}

#[test]
fn wide_differs_from_narrow_only_on_access_links() {
    let p = GridgParams::default();
    for seed in [0, 7, 99] {
        let n = gridg(GridgVariant::Narrow, seed, &p);
        let w = gridg(GridgVariant::Wide, seed, &p);
        assert_eq!(n.nodes(), w.nodes());
        assert_eq!(n.sites(), w.sites());
        assert_eq!(n.links().len(), w.links().len());
        let mut changed = 0;
        for (ln, lw) in n.links().iter().zip(w.links()) {
            assert_eq!((&ln.id, &ln.a, &ln.b, ln.price_per_gbps_hour), (&lw.id, &lw.a, &lw.b, lw.price_per_gbps_hour));
            if is_access(&n, ln) {
                assert_eq!((ln.capacity_mbps, lw.capacity_mbps), (2_500, 5_000));
                changed += 1;
            } else {
                assert_eq!(ln.capacity_mbps, lw.capacity_mbps, "{}", ln.id);
            }
        }
        assert_eq!(changed, n.sites().len());
    }
}

#[test]
fn gridg_degrees_are_heavy_tailed() {
    let p = GridgParams::default();
    for seed in 0..20 {
        let g = gridg(GridgVariant::Narrow, seed, &p);
        let deg = degrees(&g);
        let mean = deg.values().sum::<usize>() as f64 / deg.len() as f64;
        let max = *deg.values().max().unwrap();
        assert!(max as f64 >= 3.0 * mean, "seed {seed}: max {max}, mean {mean:.2}");
        // Frequency falls with degree: many low-degree nodes, few hubs.
        let low = deg.values().filter(|&&d| d <= 3).count();
        let high = deg.values().filter(|&&d| d >= 8).count();
        assert!(low > 5 * high && high >= 1, "seed {seed}: low {low}, high {high}");
        // The power-law step did add links beyond the Tiers tree + ring.
        assert!(g.links().len() > 60, "seed {seed}: {} links", g.links().len());
    }
}

#[test]
fn power_law_targets_shape() {
    let t = power_law_targets(28, 3, 27, 2.2);
    assert_eq!(t.len(), 28);
    assert!(t.windows(2).all(|w| w[0] >= w[1]));
    assert_eq!(*t.last().unwrap(), 3);
    assert!(t[0] >= 15, "{t:?}");
    assert!(t.iter().filter(|&&d| d == 3).count() >= 8, "{t:?}");
    assert_eq!(power_law_targets(3, 5, 4, 2.0), vec![5, 5, 5]);
}

#[test]
fn gridg_small_and_custom_params() {
    let p = GridgParams { wan_nodes: 1, man_per_wan: 1, lan_per_man: 1, hosts_per_lan: 3, ..GridgParams::default() };
    let g = gridg(GridgVariant::Wide, 0, &p);
    assert_eq!(g.sites().len(), 3);
    assert_eq!(g.links().iter().filter(|l| l.capacity_mbps == 5_000).count(), 3);
    let p2 = GridgParams { wan_nodes: 6, man_per_wan: 2, lan_per_man: 2, hosts_per_lan: 1, ..GridgParams::default() };
    let g2 = gridg(GridgVariant::Narrow, 0, &p2);
    assert_eq!(g2.sites().len(), 24);
    let (pg, _) = petgraph_of(&g2);
    assert_eq!(petgraph::algo::connected_components(&pg), 1);
}

#[test]
fn gridg_site_params_do_not_change_topology() {
    let p = GridgParams::default();
    let q = GridgParams { sites: SiteParams { cpus_choices: vec![64], ..SiteParams::default() }, ..p.clone() };
    let (a, b) = (gridg(GridgVariant::Narrow, 5, &p), gridg(GridgVariant::Narrow, 5, &q));
    assert_eq!(a.links(), b.links());
    assert!(b.sites().iter().all(|s| s.cpus == 64));
}

#[test]
fn gridg_params_validation() {
    let d = GridgParams::default();
    assert_eq!(d.validate(), Ok(()));
    assert_eq!(GridgParams { lan_per_man: 0, ..d.clone() }.validate(), Err(GridgParamsError::ZeroCount("lan_per_man")));
    assert!(GridgParams { degree_exponent: f64::NAN, ..d.clone() }.validate().is_err());
    let zero = LinkClass { capacity_mbps: 0, ..d.man };
    assert_eq!(GridgParams { man: zero, ..d.clone() }.validate(), Err(GridgParamsError::ZeroCapacity("man")));
    assert_eq!(
        GridgParams { wide_access_capacity_mbps: 0, ..d.clone() }.validate(),
        Err(GridgParamsError::ZeroCapacity("wide access"))
    );
    let neg = LinkClass { price_per_gbps_hour: -1.0, ..d.wan };
    assert_eq!(GridgParams { wan: neg, ..d.clone() }.validate(), Err(GridgParamsError::BadPrice("wan")));
}

#[test]
#[should_panic(expected = "hosts_per_lan")]
fn gridg_panics_on_invalid_params() {
    gridg(GridgVariant::Narrow, 0, &GridgParams { hosts_per_lan: 0, ..GridgParams::default() });
}

fn check_fat_tree(k: u32) {
    let g = fat_tree(k, 3, &SiteParams::default());
    let count = |p: &str| g.nodes().iter().filter(|n| n.id.starts_with(p)).count();
    let k = k as usize;
    assert_eq!(count("core-"), k * k / 4);
    assert_eq!(count("agg-"), k * k / 2);
    assert_eq!(count("edge-"), k * k / 2);
    assert_eq!(count("core-") + count("agg-") + count("edge-"), 5 * k * k / 4);
    assert_eq!(count("host-"), k * k * k / 4);
    assert_eq!(g.sites().len(), k * k * k / 4);
    assert_eq!(g.links().len(), 3 * k * k * k / 4);
    assert!(g.links().iter().all(|l| l.capacity_mbps == 10_000));
    let deg = degrees(&g);
    for (id, d) in &deg {
        let want = if id.starts_with("host-") { 1 } else { k };
        assert_eq!(*d, want, "{id}: every switch has k ports");
    }
    let (pg, _) = petgraph_of(&g);
    assert_eq!(petgraph::algo::connected_components(&pg), 1);
    assert_eq!(g, fat_tree(k as u32, 3, &SiteParams::default()));
}

#[test]
fn fat_tree_k4() {
    check_fat_tree(4);
    let g = fat_tree(4, 0, &SiteParams::default());
    assert_eq!((g.nodes().len() - g.sites().len(), g.sites().len(), g.links().len()), (20, 16, 48));
}

#[test]
fn fat_tree_k8_and_k2() {
    check_fat_tree(8);
    let g = fat_tree(8, 0, &SiteParams::default());
    assert_eq!((g.nodes().len() - g.sites().len(), g.sites().len(), g.links().len()), (80, 128, 384));
    check_fat_tree(2);
}

#[test]
#[should_panic(expected = "k must be even")]
fn fat_tree_rejects_odd_k() {
    fat_tree(3, 0, &SiteParams::default());
}
