//! Synthetic grids: a GridG-style generator (`gridg-n`, `gridg-w`) and k-ary fat-trees.
//!
//! **GridG** (D. Lu and P. A. Dinda, "GridG: Generating Realistic Computational Grids", ACM
//! SIGMETRICS PER 30(4), 2003; "Synthesizing Realistic Computational Grids", SC 2003) builds a
//! grid in two steps: a structured topology from Tiers (M. Doar, "A Better Model for Generating
//! Test Networks", GLOBECOM 1996) — WAN, MAN and LAN networks in a hierarchy — to which extra
//! links are added until the node degrees follow the Internet's outdegree power law
//! (Faloutsos, Faloutsos & Faloutsos, SIGCOMM 1999: the number of nodes of degree `d` is
//! proportional to `d^-alpha`), then annotation of hosts with attributes. GridG itself is not
//! available to us (docs/simulator.md), so [`gridg`] is our reconstruction from that description;
//! the exact rules are documented on [`gridg`].
//!
//! **Fat-tree**: M. Al-Fares, A. Loukissas, A. Vahdat, "A Scalable, Commodity Data Center
//! Network Architecture", SIGCOMM 2008 (Watashiba's thesis uses it; docs/README.md).

use std::collections::BTreeSet;

use rand::distributions::WeightedIndex;
use rand::prelude::Distribution;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::sites::{attach_sites, SiteParams, SiteParamsError};
use crate::model::{Grid, Link, Node};

/// The two topologies of Ando & Aida's experiment (section 4; docs/simulator.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GridgVariant {
    /// `gridg-n`: the generated grid as is (site access links at
    /// [`GridgParams::access`] capacity, 2.5 Gbit/s by default).
    Narrow,
    /// `gridg-w`: the same grid (same seed => same nodes, links, sites, prices) with every link
    /// that attaches a compute resource (site access link) at
    /// [`GridgParams::wide_access_capacity_mbps`] (5 Gbit/s by default).
    Wide,
}

/// Capacity and price of one class of links.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkClass {
    /// Mbit/s, > 0.
    pub capacity_mbps: u64,
    /// Price of 1 Gbit/s for one hour, finite and >= 0.
    pub price_per_gbps_hour: f64,
}

/// Parameters of [`gridg`]. See [`GridgParams::default`].
#[derive(Debug, Clone, PartialEq)]
pub struct GridgParams {
    /// Routers in the WAN core, >= 1. They form a ring (a single link for 2, none for 1).
    pub wan_nodes: usize,
    /// MAN routers under each WAN router, >= 1.
    pub man_per_wan: usize,
    /// LAN switches under each MAN router, >= 1.
    pub lan_per_man: usize,
    /// Hosts (sites) under each LAN switch, >= 1.
    pub hosts_per_lan: usize,
    /// Exponent `alpha` of the target degree distribution `P(d) ~ d^-alpha`; finite, > 0.
    pub degree_exponent: f64,
    /// Links between two WAN routers.
    pub wan: LinkClass,
    /// Links whose lower end (in the hierarchy) is a MAN router: MAN uplinks to the WAN.
    pub man: LinkClass,
    /// Links whose lower end is a LAN switch: LAN uplinks to a MAN, extra links to LANs.
    pub lan: LinkClass,
    /// Site access links (LAN switch - host) in [`GridgVariant::Narrow`].
    pub access: LinkClass,
    /// Capacity of site access links in [`GridgVariant::Wide`], Mbit/s, > 0.
    pub wide_access_capacity_mbps: u64,
    /// How site attributes are drawn.
    pub sites: SiteParams,
}

impl Default for GridgParams {
    /// Size: 4 WAN routers x 2 MAN x 2 LAN x 2 hosts = 4 + 8 + 16 routers and **32 sites**;
    /// with [`SiteParams::default`] (128 / 256 / 512 CPUs) the expected total is 9,557 CPUs
    /// (standard deviation about 900 over seeds), i.e. about 10,000.
    /// `degree_exponent = 2.2` (the Internet's outdegree exponent is about 2.2, Faloutsos et
    /// al. 1999). Capacities: WAN, MAN and LAN links 10 Gbit/s, site access links 2.5 Gbit/s
    /// (`gridg-n`, "narrow") or 5 Gbit/s (`gridg-w`). Ando & Aida say only that gridg-w sets the
    /// links attaching compute resources to 5 Gbit/s and that this removes gridg-n's network
    /// bottleneck, so the bottleneck must be those access links: the router links are sized
    /// not to be one. 2.5 Gbit/s is our choice for the narrow access (one 2 Gbit/s demand, or
    /// a few smaller ones, fit); at 1 Gbit/s no co-allocation (3 transfers per job, 0.5-2
    /// Gbit/s each) fits unless its jobs share sites, and the comparison degenerates. Prices per Gbit/s-hour (our choice, the paper gives none; scarcer
    /// long-haul capacity costs more): WAN 0.3, MAN 0.2, LAN 0.1, access 0.1.
    fn default() -> Self {
        GridgParams {
            wan_nodes: 4,
            man_per_wan: 2,
            lan_per_man: 2,
            hosts_per_lan: 2,
            degree_exponent: 2.2,
            wan: LinkClass { capacity_mbps: 10_000, price_per_gbps_hour: 0.3 },
            man: LinkClass { capacity_mbps: 10_000, price_per_gbps_hour: 0.2 },
            lan: LinkClass { capacity_mbps: 10_000, price_per_gbps_hour: 0.1 },
            access: LinkClass { capacity_mbps: 2_500, price_per_gbps_hour: 0.1 },
            wide_access_capacity_mbps: 5_000,
            sites: SiteParams::default(),
        }
    }
}

/// Why a [`GridgParams`] cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GridgParamsError {
    /// One of the tier counts is 0.
    #[error("gridg parameters: `{0}` must be >= 1")]
    ZeroCount(&'static str),
    /// `degree_exponent` is not finite and > 0.
    #[error("gridg parameters: degree_exponent {0} must be finite and > 0")]
    BadExponent(f64),
    /// A link capacity is 0.
    #[error("gridg parameters: capacity of `{0}` links must be > 0")]
    ZeroCapacity(&'static str),
    /// A link price is not finite and >= 0.
    #[error("gridg parameters: price of `{0}` links must be finite and >= 0")]
    BadPrice(&'static str),
    /// The site parameters are invalid.
    #[error(transparent)]
    Sites(#[from] SiteParamsError),
}

impl GridgParams {
    /// Checks the parameters (rules in the field docs).
    ///
    /// # Errors
    /// The first [`GridgParamsError`] found.
    pub fn validate(&self) -> Result<(), GridgParamsError> {
        for (name, v) in [
            ("wan_nodes", self.wan_nodes),
            ("man_per_wan", self.man_per_wan),
            ("lan_per_man", self.lan_per_man),
            ("hosts_per_lan", self.hosts_per_lan),
        ] {
            if v == 0 {
                return Err(GridgParamsError::ZeroCount(name));
            }
        }
        if !(self.degree_exponent.is_finite() && self.degree_exponent > 0.0) {
            return Err(GridgParamsError::BadExponent(self.degree_exponent));
        }
        for (name, c) in [("wan", self.wan), ("man", self.man), ("lan", self.lan), ("access", self.access)] {
            if c.capacity_mbps == 0 {
                return Err(GridgParamsError::ZeroCapacity(name));
            }
            if !(c.price_per_gbps_hour.is_finite() && c.price_per_gbps_hour >= 0.0) {
                return Err(GridgParamsError::BadPrice(name));
            }
        }
        if self.wide_access_capacity_mbps == 0 {
            return Err(GridgParamsError::ZeroCapacity("wide access"));
        }
        self.sites.validate()?;
        Ok(())
    }
}

/// Level in the Tiers hierarchy; a higher value is lower in the hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Tier {
    Wan,
    Man,
    Lan,
    Host,
}

/// Graph under construction: nodes with tiers, links as node-index pairs.
struct Builder {
    ids: Vec<String>,
    labels: Vec<String>,
    tiers: Vec<Tier>,
    degree: Vec<usize>,
    edges: Vec<(usize, usize)>,
    adjacent: BTreeSet<(usize, usize)>,
}

impl Builder {
    fn new() -> Self {
        Builder {
            ids: Vec::new(),
            labels: Vec::new(),
            tiers: Vec::new(),
            degree: Vec::new(),
            edges: Vec::new(),
            adjacent: BTreeSet::new(),
        }
    }

    fn node(&mut self, id: String, label: String, tier: Tier) -> usize {
        self.ids.push(id);
        self.labels.push(label);
        self.tiers.push(tier);
        self.degree.push(0);
        self.ids.len() - 1
    }

    fn is_adjacent(&self, a: usize, b: usize) -> bool {
        self.adjacent.contains(&(a.min(b), a.max(b)))
    }

    fn link(&mut self, a: usize, b: usize) {
        debug_assert!(a != b && !self.is_adjacent(a, b));
        self.edges.push((a, b));
        self.adjacent.insert((a.min(b), a.max(b)));
        self.degree[a] += 1;
        self.degree[b] += 1;
    }
}

/// `n` target degrees, in descending order, from the discrete power law
/// `P(d) ~ d^-alpha` on `[dmin, dmax]`: the inverse CDF evaluated at the stratified points
/// `(i + 0.5) / n`, `i = 0..n` (a deterministic sample with exactly the law's shape).
fn power_law_targets(n: usize, dmin: usize, dmax: usize, alpha: f64) -> Vec<usize> {
    if n == 0 || dmax < dmin {
        return vec![dmin; n];
    }
    let weights: Vec<f64> = (dmin..=dmax).map(|d| (d as f64).powf(-alpha)).collect();
    let total: f64 = weights.iter().sum();
    let mut cdf = Vec::with_capacity(weights.len());
    let mut acc = 0.0;
    for w in &weights {
        acc += w / total;
        cdf.push(acc);
    }
    let mut out: Vec<usize> = (0..n)
        .map(|i| {
            let p = (i as f64 + 0.5) / n as f64;
            dmin + cdf.iter().position(|&c| c >= p).unwrap_or(cdf.len() - 1)
        })
        .collect();
    out.sort_unstable_by(|a, b| b.cmp(a));
    out
}

/// Adds extra router-router links until the router degrees follow a power law (the GridG step
/// after Tiers). See [`gridg`] for the rule.
fn add_power_law_links(b: &mut Builder, alpha: f64, rng: &mut ChaCha8Rng) {
    let routers: Vec<usize> = (0..b.ids.len()).filter(|&i| b.tiers[i] != Tier::Host).collect();
    let n = routers.len();
    if n < 2 {
        return;
    }
    let dmin = routers.iter().map(|&r| b.degree[r]).min().unwrap_or(0);
    let targets = power_law_targets(n, dmin, n - 1, alpha);
    let keys: Vec<u64> = routers.iter().map(|_| rng.gen()).collect();
    let mut ranked: Vec<usize> = (0..n).collect();
    ranked.sort_by_key(|&i| (std::cmp::Reverse(b.degree[routers[i]]), b.tiers[routers[i]], keys[i]));
    let mut target = vec![0usize; b.ids.len()];
    for (rank, &i) in ranked.iter().enumerate() {
        let r = routers[i];
        target[r] = targets[rank].max(b.degree[r]);
    }
    loop {
        let short: Vec<(usize, usize)> =
            routers.iter().filter(|&&r| target[r] > b.degree[r]).map(|&r| (r, target[r] - b.degree[r])).collect();
        if short.is_empty() {
            break;
        }
        let u = short[WeightedIndex::new(short.iter().map(|s| s.1)).expect("positive").sample(rng)].0;
        let partners: Vec<(usize, usize)> =
            short.iter().copied().filter(|&(v, _)| v != u && !b.is_adjacent(u, v)).collect();
        if partners.is_empty() {
            target[u] = b.degree[u];
            continue;
        }
        let v = partners[WeightedIndex::new(partners.iter().map(|s| s.1)).expect("positive").sample(rng)].0;
        b.link(u, v);
    }
}

/// Generates a GridG-style grid (`gridg-n` or `gridg-w`; docs/simulator.md).
///
/// Construction (our reading of Lu & Dinda 2003; see the module docs):
/// 1. **Tiers hierarchy.** WAN routers `wan-{w}` joined in a ring (Tiers joins each network's
///    nodes by a spanning tree plus redundancy links; a ring is a path plus one redundancy
///    link). Under each WAN router, `man_per_wan` MAN routers `man-{w}-{m}`, each linked to
///    its WAN router; under each MAN router, `lan_per_man` LAN switches `lan-{w}-{m}-{l}`; under
///    each LAN switch, `hosts_per_lan` hosts `host-{w}-{m}-{l}-{h}`, each with exactly one
///    access link to its switch. One site per host (id `site-{host id}`, see
///    [`attach_sites`]); sites sit on their own node so the access link is identifiable.
/// 2. **Power-law links (GridG).** Over the routers (WAN, MAN, LAN; hosts never get extra
///    links, so each site keeps a single access link), target degrees are the stratified
///    sample of `P(d) ~ d^-alpha` on `[min router degree, routers - 1]` (`alpha` =
///    `degree_exponent`). Routers are ranked by current degree (descending), then tier (WAN
///    first), then a seeded random key; the largest target goes to the first, and so on
///    (a target never lowers a degree). Then repeatedly: pick a router `u` still short of its
///    target with probability proportional to its shortfall, and a partner `v` also short,
///    not yet adjacent to `u`, with probability proportional to its shortfall, and link them;
///    if `u` has no possible partner its shortfall is dropped. This ends when no router is
///    short. Hubs (the WAN core first) thus gain most links: max degree is several times the
///    mean while most nodes keep degree 1-4.
/// 3. **Annotation.** A link's class is that of its lower end in the hierarchy (WAN-WAN ->
///    `wan`, ->MAN -> `man`, ->LAN -> `lan`, ->host -> `access`), giving capacity and price.
///    `Wide` then sets every access link to `wide_access_capacity_mbps`. Sites get attributes
///    from [`attach_sites`] with `params.sites`.
///
/// Ids: link `{a}--{b}` (node ids; no parallel links are generated). Order: nodes WAN, then
/// depth-first MAN / LAN / hosts; links tree links in creation order, then extra links.
///
/// Randomness: two independent `ChaCha8Rng` streams from `seed` (stream 0: topology; stream
/// 1: site attributes), so the same seed gives an identical grid, and changing the site
/// parameters does not change the topology. `Narrow` and `Wide` differ only in access-link
/// capacities.
///
/// # Panics
/// If `params` is invalid (see [`GridgParams::validate`]).
pub fn gridg(variant: GridgVariant, seed: u64, params: &GridgParams) -> Grid {
    if let Err(e) = params.validate() {
        panic!("gridg: {e}");
    }
    let mut topo_rng = ChaCha8Rng::seed_from_u64(seed);
    topo_rng.set_stream(0);
    let mut site_rng = ChaCha8Rng::seed_from_u64(seed);
    site_rng.set_stream(1);

    let mut b = Builder::new();
    let wans: Vec<usize> =
        (0..params.wan_nodes).map(|w| b.node(format!("wan-{w}"), format!("WAN router {w}"), Tier::Wan)).collect();
    match wans.len() {
        1 => {}
        2 => b.link(wans[0], wans[1]),
        n => (0..n).for_each(|i| b.link(wans[i], wans[(i + 1) % n])),
    }
    let mut hosts = Vec::new();
    for (w, &wan) in wans.iter().enumerate() {
        for m in 0..params.man_per_wan {
            let man = b.node(format!("man-{w}-{m}"), format!("MAN router {w}.{m}"), Tier::Man);
            b.link(wan, man);
            for l in 0..params.lan_per_man {
                let lan = b.node(format!("lan-{w}-{m}-{l}"), format!("LAN switch {w}.{m}.{l}"), Tier::Lan);
                b.link(man, lan);
                for h in 0..params.hosts_per_lan {
                    let host = b.node(format!("host-{w}-{m}-{l}-{h}"), format!("host {w}.{m}.{l}.{h}"), Tier::Host);
                    b.link(lan, host);
                    hosts.push(host);
                }
            }
        }
    }
    add_power_law_links(&mut b, params.degree_exponent, &mut topo_rng);

    let links = b
        .edges
        .iter()
        .map(|&(x, y)| {
            let lower = b.tiers[x].max(b.tiers[y]);
            let class = match lower {
                Tier::Wan => params.wan,
                Tier::Man => params.man,
                Tier::Lan => params.lan,
                Tier::Host => params.access,
            };
            let capacity_mbps = match (lower, variant) {
                (Tier::Host, GridgVariant::Wide) => params.wide_access_capacity_mbps,
                _ => class.capacity_mbps,
            };
            Link {
                id: format!("{}--{}", b.ids[x], b.ids[y]),
                a: b.ids[x].clone(),
                b: b.ids[y].clone(),
                capacity_mbps,
                price_per_gbps_hour: class.price_per_gbps_hour,
            }
        })
        .collect();
    let host_ids: Vec<String> = hosts.iter().map(|&h| b.ids[h].clone()).collect();
    let sites = attach_sites(&host_ids, &params.sites, &mut site_rng);
    let nodes = b.ids.into_iter().zip(b.labels).map(|(id, label)| Node::new(id, label)).collect();
    Grid::new(nodes, links, sites).expect("gridg builds a valid grid from validated parameters")
}

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
        id: format!("{a}--{b}"),
        a: a.to_string(),
        b: b.to_string(),
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
                hosts.push(host);
            }
        }
    }
    let sites = attach_sites(&hosts, params, &mut ChaCha8Rng::seed_from_u64(seed));
    Grid::new(nodes, links, sites).expect("fat_tree builds a valid grid")
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use petgraph::graph::UnGraph;

    use super::*;

    fn petgraph_of(g: &Grid) -> (UnGraph<(), ()>, HashMap<&str, petgraph::graph::NodeIndex>) {
        let mut pg = UnGraph::new_undirected();
        let idx: HashMap<&str, _> = g.nodes.iter().map(|n| (n.id.as_str(), pg.add_node(()))).collect();
        for l in &g.links {
            pg.add_edge(idx[l.a.as_str()], idx[l.b.as_str()], ());
        }
        (pg, idx)
    }

    fn degrees(g: &Grid) -> HashMap<&str, usize> {
        let mut d: HashMap<&str, usize> = g.nodes.iter().map(|n| (n.id.as_str(), 0)).collect();
        for l in &g.links {
            *d.get_mut(l.a.as_str()).unwrap() += 1;
            *d.get_mut(l.b.as_str()).unwrap() += 1;
        }
        d
    }

    fn is_access(g: &Grid, l: &Link) -> bool {
        g.sites.iter().any(|s| s.node == l.a || s.node == l.b)
    }

    #[test]
    fn gridg_is_deterministic_and_seed_sensitive() {
        let p = GridgParams::default();
        for v in [GridgVariant::Narrow, GridgVariant::Wide] {
            assert_eq!(gridg(v, 11, &p), gridg(v, 11, &p));
        }
        let (a, b) = (gridg(GridgVariant::Narrow, 1, &p), gridg(GridgVariant::Narrow, 2, &p));
        assert_ne!(a.links, b.links);
        assert_ne!(a.sites, b.sites);
    }

    #[test]
    fn gridg_default_shape_and_sites() {
        let p = GridgParams::default();
        for seed in 0..10 {
            let g = gridg(GridgVariant::Narrow, seed, &p);
            assert_eq!(g.nodes.len(), 4 + 8 + 16 + 32);
            assert_eq!(g.sites.len(), 32);
            let deg = degrees(&g);
            for s in &g.sites {
                assert!(s.node.starts_with("host-"));
                assert_eq!(s.id, format!("site-{}", s.node));
                assert_eq!(deg[s.node.as_str()], 1, "a host has exactly its access link");
                assert!(s.cpus >= 128);
            }
            assert!((5_000..=15_000).contains(&g.total_cpus()), "total {}", g.total_cpus());
            // Access links: 2.5 Gbit/s, to a LAN switch; every other link is router-router.
            for l in &g.links {
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
                g.links.iter().map(|l| if l.a < l.b { (&*l.a, &*l.b) } else { (&*l.b, &*l.a) }).collect();
            assert_eq!(pairs.len(), g.links.len());
            assert!(g.links.iter().all(|l| l.a != l.b));
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
                let from = idx[g.sites[0].node.as_str()];
                let mut bfs = petgraph::visit::Bfs::new(&pg, from);
                let mut seen = HashSet::new();
                while let Some(n) = bfs.next(&pg) {
                    seen.insert(n);
                }
                assert!(g.sites.iter().all(|s| seen.contains(&idx[s.node.as_str()])));
            }
        }
    }

    #[test]
    fn wide_differs_from_narrow_only_on_access_links() {
        let p = GridgParams::default();
        for seed in [0, 7, 99] {
            let n = gridg(GridgVariant::Narrow, seed, &p);
            let w = gridg(GridgVariant::Wide, seed, &p);
            assert_eq!(n.nodes, w.nodes);
            assert_eq!(n.sites, w.sites);
            assert_eq!(n.links.len(), w.links.len());
            let mut changed = 0;
            for (ln, lw) in n.links.iter().zip(&w.links) {
                assert_eq!(
                    (&ln.id, &ln.a, &ln.b, ln.price_per_gbps_hour),
                    (&lw.id, &lw.a, &lw.b, lw.price_per_gbps_hour)
                );
                if is_access(&n, ln) {
                    assert_eq!((ln.capacity_mbps, lw.capacity_mbps), (2_500, 5_000));
                    changed += 1;
                } else {
                    assert_eq!(ln.capacity_mbps, lw.capacity_mbps, "{}", ln.id);
                }
            }
            assert_eq!(changed, n.sites.len());
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
            assert!(g.links.len() > 60, "seed {seed}: {} links", g.links.len());
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
        let p =
            GridgParams { wan_nodes: 1, man_per_wan: 1, lan_per_man: 1, hosts_per_lan: 3, ..GridgParams::default() };
        let g = gridg(GridgVariant::Wide, 0, &p);
        assert_eq!(g.sites.len(), 3);
        assert_eq!(g.links.iter().filter(|l| l.capacity_mbps == 5_000).count(), 3);
        let p2 =
            GridgParams { wan_nodes: 6, man_per_wan: 2, lan_per_man: 2, hosts_per_lan: 1, ..GridgParams::default() };
        let g2 = gridg(GridgVariant::Narrow, 0, &p2);
        assert_eq!(g2.sites.len(), 24);
        let (pg, _) = petgraph_of(&g2);
        assert_eq!(petgraph::algo::connected_components(&pg), 1);
    }

    #[test]
    fn gridg_site_params_do_not_change_topology() {
        let p = GridgParams::default();
        let q = GridgParams { sites: SiteParams { cpus_choices: vec![64], ..SiteParams::default() }, ..p.clone() };
        let (a, b) = (gridg(GridgVariant::Narrow, 5, &p), gridg(GridgVariant::Narrow, 5, &q));
        assert_eq!(a.links, b.links);
        assert!(b.sites.iter().all(|s| s.cpus == 64));
    }

    #[test]
    fn gridg_params_validation() {
        let d = GridgParams::default();
        assert_eq!(d.validate(), Ok(()));
        assert_eq!(
            GridgParams { lan_per_man: 0, ..d.clone() }.validate(),
            Err(GridgParamsError::ZeroCount("lan_per_man"))
        );
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
        let count = |p: &str| g.nodes.iter().filter(|n| n.id.starts_with(p)).count();
        let k = k as usize;
        assert_eq!(count("core-"), k * k / 4);
        assert_eq!(count("agg-"), k * k / 2);
        assert_eq!(count("edge-"), k * k / 2);
        assert_eq!(count("core-") + count("agg-") + count("edge-"), 5 * k * k / 4);
        assert_eq!(count("host-"), k * k * k / 4);
        assert_eq!(g.sites.len(), k * k * k / 4);
        assert_eq!(g.links.len(), 3 * k * k * k / 4);
        assert!(g.links.iter().all(|l| l.capacity_mbps == 10_000));
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
        assert_eq!((g.nodes.len() - g.sites.len(), g.sites.len(), g.links.len()), (20, 16, 48));
    }

    #[test]
    fn fat_tree_k8_and_k2() {
        check_fat_tree(8);
        let g = fat_tree(8, 0, &SiteParams::default());
        assert_eq!((g.nodes.len() - g.sites.len(), g.sites.len(), g.links.len()), (80, 128, 384));
        check_fat_tree(2);
    }

    #[test]
    #[should_panic(expected = "k must be even")]
    fn fat_tree_rejects_odd_k() {
        fat_tree(3, 0, &SiteParams::default());
    }
}
