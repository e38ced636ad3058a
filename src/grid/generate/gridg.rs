//! `gridg-n` / `gridg-w`: our reconstruction of GridG (Lu & Dinda 2003) on a Tiers hierarchy
//! (see the parent module and [`gridg`]).

use std::collections::BTreeSet;

use rand::distributions::WeightedIndex;
use rand::prelude::Distribution;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::grid::sites::{attach_sites, SiteParams, SiteParamsError};
use crate::model::{Grid, Link, Node, NodeId};

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
pub(super) fn power_law_targets(n: usize, dmin: usize, dmax: usize, alpha: f64) -> Vec<usize> {
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
                id: format!("{}--{}", b.ids[x], b.ids[y]).into(),
                a: b.ids[x].as_str().into(),
                b: b.ids[y].as_str().into(),
                capacity_mbps,
                price_per_gbps_hour: class.price_per_gbps_hour,
            }
        })
        .collect();
    let host_ids: Vec<NodeId> = hosts.iter().map(|&h| b.ids[h].as_str().into()).collect();
    let sites = attach_sites(&host_ids, &params.sites, &mut site_rng);
    let nodes = b.ids.into_iter().zip(b.labels).map(|(id, label)| Node::new(id, label)).collect();
    Grid::new(nodes, links, sites).expect("gridg builds a valid grid from validated parameters")
}
