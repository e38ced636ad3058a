use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::attributes::{AttributeError, SiteAttributes};
use super::limits::{price_ok, MAX_AMOUNT};
use super::{LinkId, NodeId, SiteId};

/// A topology node, e.g. a PoP of a research network.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Node {
    /// Unique node id.
    pub id: NodeId,
    /// Human-readable label (city name in Topology Zoo graphs).
    #[serde(default)]
    pub label: String,
    /// Latitude in degrees, `-90 ..= 90` (north positive), when known (Topology Zoo's
    /// `Latitude`). Only used to draw the topology.
    #[schema(minimum = -90, maximum = 90)]
    pub latitude: Option<f64>,
    /// Longitude in degrees, `-180 ..= 180` (east positive), when known (Topology Zoo's
    /// `Longitude`). Only used to draw the topology.
    #[schema(minimum = -180, maximum = 180)]
    pub longitude: Option<f64>,
}

impl Node {
    /// A node without coordinates.
    pub fn new(id: impl Into<NodeId>, label: impl Into<String>) -> Self {
        Node { id: id.into(), label: label.into(), latitude: None, longitude: None }
    }
}

/// Is `v` a valid latitude (`max` = 90) or longitude (`max` = 180): finite and in
/// `-max ..= max` degrees?
fn degrees_ok(v: f64, max: f64) -> bool {
    v.is_finite() && (-max..=max).contains(&v)
}

/// An undirected link; its capacity is shared by both directions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Link {
    /// Unique link id (parallel links between the same nodes have distinct ids).
    pub id: LinkId,
    /// One end (a node id).
    pub a: NodeId,
    /// The other end (a node id).
    pub b: NodeId,
    /// Reservable bandwidth in Mbit/s, > 0.
    pub capacity_mbps: u64,
    /// Price of 1 Gbit/s for one hour on this link, in `0 ..= MAX_PRICE` (10^6).
    pub price_per_gbps_hour: f64,
}

/// A compute resource: a cluster of identical nodes reserved in CPUs (see docs/model.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Site {
    /// Unique site id.
    pub id: SiteId,
    /// The topology node the site is attached to.
    pub node: NodeId,
    /// Number of CPUs, > 0.
    pub cpus: u32,
    /// Operating system, e.g. `linux`, `solaris`, `bsd` (compared case-insensitively).
    pub os: String,
    /// Price of one CPU for one hour, in `0 ..= MAX_PRICE` (10^6).
    pub price_per_cpu_hour: f64,
    /// Architecture, extensions, GPUs, software and labels (all optional; JSON: flattened into
    /// the site). See `SiteAttributes`.
    #[serde(flatten)]
    pub attributes: SiteAttributes,
}

impl Site {
    /// A site with default attributes (`x86_64`, no GPUs, no software, no labels).
    pub fn new(id: impl Into<SiteId>, node: impl Into<NodeId>, cpus: u32, os: &str, price_per_cpu_hour: f64) -> Self {
        Site {
            id: id.into(),
            node: node.into(),
            cpus,
            os: os.to_owned(),
            price_per_cpu_hour,
            attributes: SiteAttributes::default(),
        }
    }
}

/// Why a grid description was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GridError {
    #[error("duplicate {kind} id `{id}`")]
    DuplicateId { kind: &'static str, id: String },
    #[error("link `{link}` names unknown node `{node}`")]
    LinkUnknownNode { link: String, node: String },
    #[error("site `{site}` names unknown node `{node}`")]
    SiteUnknownNode { site: String, node: String },
    #[error("link `{0}` has zero capacity")]
    ZeroCapacity(String),
    #[error("unknown site `{0}`")]
    UnknownSite(String),
    #[error("site `{0}` has zero CPUs")]
    ZeroCpus(String),
    #[error("`{id}`: capacity {value} is above the supported {max}")]
    CapacityTooLarge { id: String, value: u64, max: u64 },
    #[error("{what} of `{id}` must be a finite number in 0..=1000000")]
    BadPrice { what: &'static str, id: String },
    #[error("{what} of node `{id}` must be a finite number of degrees in -{max}..={max} (got {value})")]
    BadCoordinate { what: &'static str, id: String, value: f64, max: f64 },
    #[error("site `{site}`: {reason}")]
    BadAttributes { site: String, reason: AttributeError },
    #[error("{what} `{value}`: {reason}")]
    BadText { what: &'static str, value: String, reason: super::text::TextError },
}

/// The whole resource description: topology plus the sites attached to it (grid.json).
///
/// JSON: `{"nodes":[{"id","label"}], "links":[{"id","a","b","capacity_mbps",
/// "price_per_gbps_hour"}], "sites":[{"id","node","cpus","os","price_per_cpu_hour"}]}`.
/// Deserialisation validates (see [`Grid::new`]); the fields are private, so every `Grid`
/// went through that check and the rest of the crate relies on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawGrid")]
pub struct Grid {
    nodes: Vec<Node>,
    links: Vec<Link>,
    sites: Vec<Site>,
}

#[derive(Deserialize)]
struct RawGrid {
    nodes: Vec<Node>,
    links: Vec<Link>,
    sites: Vec<Site>,
}

impl TryFrom<RawGrid> for Grid {
    type Error = GridError;
    fn try_from(r: RawGrid) -> Result<Self, GridError> {
        Grid::new(r.nodes, r.links, r.sites)
    }
}

fn unique<'a>(kind: &'static str, ids: impl Iterator<Item = &'a str>) -> Result<(), GridError> {
    let mut seen = HashSet::new();
    for id in ids {
        if !seen.insert(id) {
            return Err(GridError::DuplicateId { kind, id: id.to_owned() });
        }
    }
    Ok(())
}

impl Grid {
    /// Builds a grid, checking: unique node / link / site ids, links and sites name existing
    /// nodes, capacities and CPU counts > 0, prices finite and in `0 ..= MAX_PRICE`, node
    /// coordinates (when given) finite, latitudes in `-90 ..= 90` and longitudes in
    /// `-180 ..= 180` degrees, ids and
    /// site OS names valid text ([`crate::model::check_text`]: 1-128 characters, not blank, no
    /// control characters).
    ///
    /// # Errors
    /// The first [`GridError`] found.
    pub fn new(nodes: Vec<Node>, links: Vec<Link>, sites: Vec<Site>) -> Result<Self, GridError> {
        let texts = nodes
            .iter()
            .map(|n| ("node id", n.id.as_str()))
            .chain(links.iter().map(|l| ("link id", l.id.as_str())))
            .chain(sites.iter().flat_map(|s| [("site id", s.id.as_str()), ("os", s.os.as_str())]));
        for (what, value) in texts {
            super::text::check_text(value).map_err(|reason| GridError::BadText {
                what,
                value: value.escape_debug().to_string(),
                reason,
            })?;
        }
        unique("node", nodes.iter().map(|n| n.id.as_str()))?;
        for n in &nodes {
            for (what, value, max) in [("latitude", n.latitude, 90.0), ("longitude", n.longitude, 180.0)] {
                if let Some(value) = value.filter(|v| !degrees_ok(*v, max)) {
                    return Err(GridError::BadCoordinate { what, id: n.id.to_string(), value, max });
                }
            }
        }
        unique("link", links.iter().map(|l| l.id.as_str()))?;
        unique("site", sites.iter().map(|s| s.id.as_str()))?;
        let node_ids: HashSet<&NodeId> = nodes.iter().map(|n| &n.id).collect();
        for l in &links {
            for end in [&l.a, &l.b] {
                if !node_ids.contains(end) {
                    return Err(GridError::LinkUnknownNode { link: l.id.to_string(), node: end.to_string() });
                }
            }
            if l.capacity_mbps == 0 {
                return Err(GridError::ZeroCapacity(l.id.to_string()));
            }
            if l.capacity_mbps > MAX_AMOUNT {
                return Err(GridError::CapacityTooLarge {
                    id: l.id.to_string(),
                    value: l.capacity_mbps,
                    max: MAX_AMOUNT,
                });
            }
            if !price_ok(l.price_per_gbps_hour) {
                return Err(GridError::BadPrice { what: "price_per_gbps_hour", id: l.id.to_string() });
            }
        }
        for s in &sites {
            if !node_ids.contains(&s.node) {
                return Err(GridError::SiteUnknownNode { site: s.id.to_string(), node: s.node.to_string() });
            }
            if s.cpus == 0 {
                return Err(GridError::ZeroCpus(s.id.to_string()));
            }
            if u64::from(s.cpus) > MAX_AMOUNT {
                return Err(GridError::CapacityTooLarge {
                    id: s.id.to_string(),
                    value: s.cpus.into(),
                    max: MAX_AMOUNT,
                });
            }
            if !price_ok(s.price_per_cpu_hour) {
                return Err(GridError::BadPrice { what: "price_per_cpu_hour", id: s.id.to_string() });
            }
            s.attributes.validate().map_err(|reason| GridError::BadAttributes { site: s.id.to_string(), reason })?;
        }
        Ok(Grid { nodes, links, sites })
    }

    /// The topology's nodes.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The topology's links.
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// The sites.
    pub fn sites(&self) -> &[Site] {
        &self.sites
    }

    /// The grid's parts, to build another grid from them with [`Grid::new`].
    pub fn into_parts(self) -> (Vec<Node>, Vec<Link>, Vec<Site>) {
        (self.nodes, self.links, self.sites)
    }

    /// This grid with only the sites `keep` accepts (a LIS process keeps its own site). Always
    /// valid: nothing in a grid refers to a site.
    pub fn retain_sites(mut self, keep: impl FnMut(&Site) -> bool) -> Grid {
        self.sites.retain(keep);
        self
    }

    /// This grid with `site` replacing the site of the same id.
    ///
    /// # Errors
    /// [`GridError::UnknownSite`] if no site has that id; what [`Grid::new`] finds wrong with
    /// the new site (unknown node, zero CPUs, bad price or text). `self` is unchanged then.
    pub fn with_site(&self, site: Site) -> Result<Grid, GridError> {
        let (nodes, links, mut sites) = self.clone().into_parts();
        let slot =
            sites.iter_mut().find(|s| s.id == site.id).ok_or_else(|| GridError::UnknownSite(site.id.to_string()))?;
        *slot = site;
        Grid::new(nodes, links, sites)
    }

    /// Total GPUs over all sites and pools.
    pub fn total_gpus(&self) -> u64 {
        self.sites.iter().flat_map(|s| &s.attributes.gpus).map(|g| u64::from(g.count)).sum()
    }

    /// Total CPUs over all sites (the denominator of offered load).
    pub fn total_cpus(&self) -> u64 {
        self.sites.iter().map(|s| u64::from(s.cpus)).sum()
    }

    /// Site by id.
    pub fn site(&self, id: &str) -> Option<&Site> {
        self.sites.iter().find(|s| s.id == id)
    }

    /// Link by id, through an index built on demand (use [`Grid::link_index`] in loops).
    pub fn link_index(&self) -> HashMap<&str, &Link> {
        self.links.iter().map(|l| (l.id.as_str(), l)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str) -> Node {
        Node::new(id, "")
    }

    #[test]
    fn rejects_dangling_link_and_zero_capacity() {
        let l = Link { id: "l".into(), a: "x".into(), b: "y".into(), capacity_mbps: 10, price_per_gbps_hour: 0.0 };
        assert_eq!(
            Grid::new(vec![node("x")], vec![l.clone()], vec![]),
            Err(GridError::LinkUnknownNode { link: "l".into(), node: "y".into() })
        );
        let l0 = Link { capacity_mbps: 0, ..l };
        assert_eq!(Grid::new(vec![node("x"), node("y")], vec![l0], vec![]), Err(GridError::ZeroCapacity("l".into())));
    }

    #[test]
    fn json_round_trip_validates() {
        let json = r#"{"nodes":[{"id":"n1","label":"A"}],"links":[],
            "sites":[{"id":"s1","node":"n1","cpus":64,"os":"linux","price_per_cpu_hour":1.5}]}"#;
        let g: Grid = serde_json::from_str(json).unwrap();
        assert_eq!(g.total_cpus(), 64);
        let bad = json.replace("\"cpus\":64", "\"cpus\":0");
        assert!(serde_json::from_str::<Grid>(&bad).unwrap_err().to_string().contains("zero CPUs"));
        let dup = r#"{"nodes":[{"id":"n1"},{"id":"n1"}],"links":[],"sites":[]}"#;
        assert!(serde_json::from_str::<Grid>(dup).is_err());
    }

    #[test]
    fn coordinates_are_optional_and_checked() {
        let json = r#"{"nodes":[{"id":"n1","latitude":52.37,"longitude":4.89},{"id":"n2"}],"links":[],"sites":[]}"#;
        let g: Grid = serde_json::from_str(json).unwrap();
        assert_eq!((g.nodes[0].latitude, g.nodes[0].longitude), (Some(52.37), Some(4.89)));
        assert_eq!((g.nodes[1].latitude, g.nodes[1].longitude), (None, None));
        let out = serde_json::to_string(&g.nodes).unwrap();
        assert_eq!(out, r#"[{"id":"n1","label":"","latitude":52.37,"longitude":4.89},{"id":"n2","label":""}]"#);
        for (lat, lon) in
            [(90.5, 0.0), (-91.0, 0.0), (0.0, 180.5), (0.0, -181.0), (f64::NAN, 0.0), (0.0, f64::INFINITY)]
        {
            let n = Node { latitude: Some(lat), longitude: Some(lon), ..node("x") };
            let e = Grid::new(vec![n], vec![], vec![]).unwrap_err();
            assert!(matches!(e, GridError::BadCoordinate { .. }), "{lat} {lon}: {e}");
        }
        let edge = Node { latitude: Some(-90.0), longitude: Some(180.0), ..node("x") };
        assert!(Grid::new(vec![edge], vec![], vec![]).is_ok());
    }
}
