//! Importer for Internet Topology Zoo GraphML files.
//!
//! Source format: GraphML (<http://graphml.graphdrawing.org/>) as written by the Internet
//! Topology Zoo (S. Knight et al., "The Internet Topology Zoo", IEEE JSAC 29(9), 2011).
//! Data values are attached with `<data key="dNN">`; the key ids differ from file to file, so
//! keys are resolved through their declarations `<key id="dNN" attr.name="..." for="...">`
//! by `attr.name`, never by id. Attributes used:
//! - node `label` (city / PoP name) -> [`Node::label`](crate::model::Node);
//! - node `Latitude` / `Longitude` (degrees, doubles) -> [`Node::latitude`] /
//!   [`Node::longitude`](crate::model::Node) (used only to draw the topology);
//! - edge `LinkSpeedRaw` (bits per second, a double) -> [`Link::capacity_mbps`](crate::model::Link).
//!
//! Everything else (`LinkSpeed` / `LinkSpeedUnits` strings, graph metadata, the Zoo's
//! `hyperedge` marker) is ignored.

use std::collections::HashSet;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::sites::{attach_sites, SiteParams, SiteParamsError};
use crate::model::{Grid, GridError, Link, Node, NodeId};

/// Options of [`import_graphml`]. See [`ImportOptions::default`] for the defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportOptions {
    /// Seed of the `ChaCha8Rng` that draws the site attributes ([`attach_sites`]).
    pub seed: u64,
    /// Capacity in Mbit/s of links whose edge has no `LinkSpeedRaw`. Must be > 0.
    pub default_capacity_mbps: u64,
    /// How site attributes are drawn.
    pub sites: SiteParams,
    /// Price of 1 Gbit/s for one hour, the same on every imported link (the Zoo has no prices).
    pub price_per_gbps_hour: f64,
}

impl Default for ImportOptions {
    /// `seed = 0`, `default_capacity_mbps = 10_000` (10 Gbit/s, the most common speed in
    /// Geant2012 and Esnet), `sites = SiteParams::default()`, `price_per_gbps_hour = 0.1`
    /// (an arbitrary default: Ando & Aida give no link prices; with CPU prices of 0.5-1.5 per
    /// CPU-hour it keeps the network a minor but non-zero part of a plan's cost).
    fn default() -> Self {
        ImportOptions { seed: 0, default_capacity_mbps: 10_000, sites: SiteParams::default(), price_per_gbps_hour: 0.1 }
    }
}

/// Why a GraphML document was refused by [`import_graphml`].
#[derive(Debug, thiserror::Error)]
pub enum GraphmlError {
    /// Not well-formed XML.
    #[error("GraphML is not well-formed XML: {0}")]
    Xml(#[from] roxmltree::Error),
    /// The root element is not `<graphml>`.
    #[error("root element is `{0}`, expected `graphml`")]
    NotGraphml(String),
    /// No `<graph>` element under the root.
    #[error("no <graph> element in the GraphML document")]
    NoGraph,
    /// An element lacks a required attribute (`id` of a node, `source` / `target` of an edge).
    #[error("<{element}> number {index} has no `{attr}` attribute")]
    MissingAttribute {
        /// Element name.
        element: &'static str,
        /// 0-based position among elements of that name in the graph.
        index: usize,
        /// The missing attribute.
        attr: &'static str,
    },
    /// An edge names a node that is not declared in the graph.
    #[error("edge number {index} names unknown node `{node}`")]
    UnknownNode {
        /// 0-based position of the edge in the graph.
        index: usize,
        /// The GraphML node id.
        node: String,
    },
    /// A `LinkSpeedRaw` value is not a finite number >= 0.
    #[error("edge number {index} has LinkSpeedRaw `{value}`, expected a finite number >= 0")]
    BadSpeed {
        /// 0-based position of the edge in the graph.
        index: usize,
        /// The text found.
        value: String,
    },
    /// A `Latitude` or `Longitude` value is not a number (a number out of range is a
    /// [`GridError::BadCoordinate`]).
    #[error("node number {index} has {attr} `{value}`, expected a number of degrees")]
    BadCoordinate {
        /// 0-based position of the node in the graph.
        index: usize,
        /// `Latitude` or `Longitude`.
        attr: &'static str,
        /// The text found.
        value: String,
    },
    /// The site parameters are invalid.
    #[error(transparent)]
    Sites(#[from] SiteParamsError),
    /// The resulting grid does not validate (e.g. duplicate node ids, zero default capacity,
    /// negative price).
    #[error("imported grid is invalid: {0}")]
    Grid(#[from] GridError),
}

/// Grid node id for a GraphML node id: `n{id}` (Zoo node ids are bare numbers `0`, `1`, ...).
pub fn node_id_for(graphml_id: &str) -> String {
    format!("n{graphml_id}")
}

/// Converts `LinkSpeedRaw` (bit/s) to Mbit/s: `round(bps / 1e6)`, at least 1.
fn speed_to_mbps(bps: f64) -> u64 {
    // `as` saturates for huge values, which is what we want.
    ((bps / 1e6).round() as u64).max(1)
}

/// A declared `<key>`: its id, its `attr.name`, whom it applies to, and its `<default>` value.
struct KeyDecl<'a> {
    id: &'a str,
    name: &'a str,
    domain: &'a str,
    default: Option<&'a str>,
}

/// Value of the attribute called `attr_name` on `elem` (an element whose GraphML kind is
/// `domain`), taken from its `<data>` children, else from the key's `<default>`.
fn data_value<'a>(
    elem: roxmltree::Node<'a, 'a>,
    keys: &[KeyDecl<'a>],
    domain: &str,
    attr_name: &str,
) -> Option<String> {
    let applies = |k: &KeyDecl| k.name == attr_name && (k.domain == domain || k.domain == "all");
    for d in elem.children().filter(|c| c.has_tag_name_local("data")) {
        if let Some(k) = d.attribute("key").and_then(|id| keys.iter().find(|k| k.id == id)) {
            if applies(k) {
                return Some(d.text().unwrap_or("").to_string());
            }
        }
    }
    keys.iter().find(|k| applies(k)).and_then(|k| k.default.map(str::to_string))
}

trait LocalName {
    fn has_tag_name_local(&self, name: &str) -> bool;
}

impl LocalName for roxmltree::Node<'_, '_> {
    /// Element test on the local name only, so files with or without the GraphML namespace
    /// are both accepted.
    fn has_tag_name_local(&self, name: &str) -> bool {
        self.is_element() && self.tag_name().name() == name
    }
}

/// Imports an Internet Topology Zoo GraphML document into a [`Grid`].
///
/// Input: the XML text. Output: a validated grid with
/// - one [`Node`] per `<node>` of the first `<graph>`, in document order, id `n{GraphML id}`
///   ([`node_id_for`]), label = the node's `label` data (empty string when absent), latitude
///   and longitude = its `Latitude` and `Longitude` data when it has both (a node with one of
///   them only, like one with neither, gets no coordinates);
/// - one [`Link`] per `<edge>`, in document order, ids `l0`, `l1`, ... numbered over the kept
///   edges. Parallel edges are kept as distinct links. **Self-loops are skipped** (a loop
///   carries no traffic between sites) and do not consume an id. Edges are undirected whatever
///   the graph's `edgedefault` says (a [`Link`]'s capacity is shared by both directions).
///   Capacity: `LinkSpeedRaw` bit/s -> `round(bps / 1e6)` Mbit/s, at least 1; edges without
///   it get `opts.default_capacity_mbps`. Price: `opts.price_per_gbps_hour` on every link;
/// - one site per node ([`attach_sites`] over the node ids in document order, with a
///   `ChaCha8Rng` seeded from `opts.seed`), ids `site-n{GraphML id}`.
///
/// Nested graphs, hyperedges and ports are ignored.
///
/// # Errors
/// [`GraphmlError`]: malformed XML, no `<graphml>` root or `<graph>`, a node without `id`, an
/// edge without `source`/`target` or naming an undeclared node, a `LinkSpeedRaw` that is not
/// a finite number >= 0, a `Latitude` / `Longitude` that is not a number, invalid site
/// parameters, or a grid that fails [`Grid::new`] (duplicate node ids,
/// `default_capacity_mbps == 0`, a bad price, a coordinate out of range).
pub fn import_graphml(xml: &str, opts: &ImportOptions) -> Result<Grid, GraphmlError> {
    opts.sites.validate()?;
    let doc = roxmltree::Document::parse(xml)?;
    let root = doc.root_element();
    if !root.has_tag_name_local("graphml") {
        return Err(GraphmlError::NotGraphml(root.tag_name().name().to_string()));
    }
    let mut keys: Vec<KeyDecl> = Vec::new();
    for k in root.children().filter(|c| c.has_tag_name_local("key")) {
        if let (Some(id), Some(name)) = (k.attribute("id"), k.attribute("attr.name")) {
            let default = k.children().find(|c| c.has_tag_name_local("default")).map(|d| d.text().unwrap_or(""));
            keys.push(KeyDecl { id, name, domain: k.attribute("for").unwrap_or("all"), default });
        }
    }
    let graph = root.children().find(|c| c.has_tag_name_local("graph")).ok_or(GraphmlError::NoGraph)?;

    let mut nodes = Vec::new();
    let mut declared: HashSet<&str> = HashSet::new();
    for (index, n) in graph.children().filter(|c| c.has_tag_name_local("node")).enumerate() {
        let gid = n.attribute("id").ok_or(GraphmlError::MissingAttribute { element: "node", index, attr: "id" })?;
        declared.insert(gid);
        let label = data_value(n, &keys, "node", "label").unwrap_or_default();
        let degrees = |attr: &'static str| -> Result<Option<f64>, GraphmlError> {
            data_value(n, &keys, "node", attr)
                .map(|text| {
                    text.trim().parse::<f64>().map_err(|_| GraphmlError::BadCoordinate { index, attr, value: text })
                })
                .transpose()
        };
        let (latitude, longitude) = match (degrees("Latitude")?, degrees("Longitude")?) {
            (Some(lat), Some(lon)) => (Some(lat), Some(lon)),
            _ => (None, None),
        };
        nodes.push(Node { id: node_id_for(gid).into(), label, latitude, longitude });
    }

    let mut links = Vec::new();
    for (index, e) in graph.children().filter(|c| c.has_tag_name_local("edge")).enumerate() {
        let missing = |attr| GraphmlError::MissingAttribute { element: "edge", index, attr };
        let src = e.attribute("source").ok_or_else(|| missing("source"))?;
        let dst = e.attribute("target").ok_or_else(|| missing("target"))?;
        for end in [src, dst] {
            if !declared.contains(end) {
                return Err(GraphmlError::UnknownNode { index, node: end.to_string() });
            }
        }
        if src == dst {
            continue;
        }
        let capacity_mbps = match data_value(e, &keys, "edge", "LinkSpeedRaw") {
            None => opts.default_capacity_mbps,
            Some(text) => match text.trim().parse::<f64>() {
                Ok(bps) if bps.is_finite() && bps >= 0.0 => speed_to_mbps(bps),
                _ => return Err(GraphmlError::BadSpeed { index, value: text }),
            },
        };
        links.push(Link {
            id: format!("l{}", links.len()).into(),
            a: node_id_for(src).into(),
            b: node_id_for(dst).into(),
            capacity_mbps,
            price_per_gbps_hour: opts.price_per_gbps_hour,
        });
    }

    let node_ids: Vec<NodeId> = nodes.iter().map(|n| n.id.clone()).collect();
    let sites = attach_sites(&node_ids, &opts.sites, &mut ChaCha8Rng::seed_from_u64(opts.seed));
    Ok(Grid::new(nodes, links, sites)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZOO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/topology-zoo/");

    fn load(name: &str) -> Grid {
        let path = format!("{ZOO}{name}.graphml");
        let xml = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        import_graphml(&xml, &ImportOptions::default()).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn between<'g>(g: &'g Grid, a: &str, b: &str) -> Vec<&'g Link> {
        g.links().iter().filter(|l| (l.a == a && l.b == b) || (l.a == b && l.b == a)).collect()
    }

    /// Counts from `data/README.md`: (nodes, links, links carrying LinkSpeedRaw).
    #[test]
    fn real_zoo_counts_match_readme() {
        for (name, nodes, links, with_speed) in
            [("Geant2012", 40, 61, 39), ("Esnet", 68, 92, 10), ("Renater2010", 43, 56, 56), ("Abilene", 11, 14, 0)]
        {
            let g = load(name);
            assert_eq!(g.nodes().len(), nodes, "{name} nodes");
            assert_eq!(g.links().len(), links, "{name} links");
            assert_eq!(g.sites().len(), nodes, "{name} sites");
            // With the 10 Gbit/s default, count links whose speed came from the file by
            // re-importing with a sentinel default that no real speed rounds to.
            let xml = std::fs::read_to_string(format!("{ZOO}{name}.graphml")).unwrap();
            let opts = ImportOptions { default_capacity_mbps: 7, ..ImportOptions::default() };
            let s = import_graphml(&xml, &opts).unwrap();
            assert_eq!(s.links().iter().filter(|l| l.capacity_mbps != 7).count(), with_speed, "{name} speeds");
        }
    }

    #[test]
    fn geant2012_known_speeds_and_labels() {
        let g = load("Geant2012");
        // <edge source="0" target="34"> LinkSpeedRaw 2500000000.0 (key d42 in this file).
        let l = between(&g, "n0", "n34");
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].capacity_mbps, 2500);
        // <edge source="2" target="32"> 10 Gbps.
        assert_eq!(between(&g, "n2", "n32")[0].capacity_mbps, 10_000);
        // <edge source="0" target="1"> has no speed: default.
        assert_eq!(between(&g, "n0", "n1")[0].capacity_mbps, 10_000);
        assert_eq!(g.nodes()[0].id, "n0");
        assert_eq!(g.nodes()[0].label, "NL");
        // <node id="0">: Latitude 52.37403, Longitude 4.88969 (Amsterdam); 37 of 40 nodes
        // have coordinates.
        assert_eq!((g.nodes()[0].latitude, g.nodes()[0].longitude), (Some(52.37403), Some(4.88969)));
        assert_eq!(g.nodes().iter().filter(|n| n.latitude.is_some() && n.longitude.is_some()).count(), 37);
        assert_eq!(g.sites()[0].id, "site-n0");
        assert_eq!(g.sites()[0].node, "n0");
        let mut speeds: Vec<u64> = g.links().iter().map(|l| l.capacity_mbps).collect();
        speeds.sort_unstable();
        speeds.dedup();
        assert_eq!(speeds, vec![155, 1000, 2500, 10_000]);
        assert!(g.links().iter().all(|l| l.price_per_gbps_hour == 0.1));
    }

    #[test]
    fn other_real_files_speeds_parallel_edges_and_key_ids() {
        // Esnet declares LinkSpeedRaw as d38, Renater2010 as d40: resolution by attr.name.
        let esnet = load("Esnet");
        assert!(esnet.links().iter().any(|l| l.capacity_mbps == 45), "45 Mbit/s link");
        assert!(esnet.links().iter().any(|l| l.capacity_mbps == 155));
        let mut pairs = HashSet::new();
        let parallel = esnet
            .links()
            .iter()
            .filter(|l| {
                let k = if l.a < l.b { (l.a.clone(), l.b.clone()) } else { (l.b.clone(), l.a.clone()) };
                !pairs.insert(k)
            })
            .count();
        assert_eq!(parallel, 13, "Esnet parallel edges kept");
        let renater = load("Renater2010");
        assert!(renater.links().iter().all(|l| l.capacity_mbps == 155));
        let abilene = load("Abilene");
        assert!(abilene.links().iter().all(|l| l.capacity_mbps == 10_000));
        assert_eq!(abilene.nodes()[0].label, "New York");
    }

    #[test]
    fn same_seed_same_grid() {
        let xml = std::fs::read_to_string(format!("{ZOO}Geant2012.graphml")).unwrap();
        let a = import_graphml(&xml, &ImportOptions { seed: 3, ..ImportOptions::default() }).unwrap();
        let b = import_graphml(&xml, &ImportOptions { seed: 3, ..ImportOptions::default() }).unwrap();
        let c = import_graphml(&xml, &ImportOptions { seed: 4, ..ImportOptions::default() }).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.links(), c.links());
        assert_ne!(a.sites(), c.sites());
    }

    const SMALL: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key attr.name="LinkSpeedRaw" attr.type="double" for="edge" id="d7"/>
  <key attr.name="label" attr.type="string" for="node" id="d3"/>
  <key attr.name="label" attr.type="string" for="edge" id="d9"/>
  <key attr.name="Latitude" attr.type="double" for="node" id="d1"/>
  <key attr.name="Longitude" attr.type="double" for="node" id="d2"/>
  <graph edgedefault="undirected">
    <node id="0"><data key="d3">Tokyo</data><data key="d1">35.6895</data><data key="d2">139.69171</data></node>
    <node id="1"><data key="d3">Osaka</data><data key="d1">34.69374</data></node>
    <node id="2"/>
    <edge source="0" target="1"><data key="d7">2500000000.0</data><data key="d9">not a node label</data></edge>
    <edge source="1" target="0"><data key="d7">400000.0</data></edge>
    <edge source="1" target="1"><data key="d7">1e9</data></edge>
    <edge source="1" target="2"/>
  </graph>
</graphml>"#;

    #[test]
    fn small_handwritten_graph() {
        let opts = ImportOptions { default_capacity_mbps: 1234, price_per_gbps_hour: 0.25, ..ImportOptions::default() };
        let g = import_graphml(SMALL, &opts).unwrap();
        let ids: Vec<&str> = g.nodes().iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["n0", "n1", "n2"]);
        let labels: Vec<&str> = g.nodes().iter().map(|n| n.label.as_str()).collect();
        assert_eq!(labels, ["Tokyo", "Osaka", ""], "missing label -> empty; edge `label` key not used");
        let coords: Vec<(Option<f64>, Option<f64>)> = g.nodes().iter().map(|n| (n.latitude, n.longitude)).collect();
        assert_eq!(coords, [(Some(35.6895), Some(139.69171)), (None, None), (None, None)], "both or neither");
        // Self-loop 1-1 skipped; ids numbered over kept edges.
        let got: Vec<(&str, &str, &str, u64)> =
            g.links().iter().map(|l| (l.id.as_str(), l.a.as_str(), l.b.as_str(), l.capacity_mbps)).collect();
        assert_eq!(
            got,
            [("l0", "n0", "n1", 2500), ("l1", "n1", "n0", 1), ("l2", "n1", "n2", 1234)],
            "parallel edge kept, 0.4 Mbit/s rounds up to 1, missing speed -> default"
        );
        assert!(g.links().iter().all(|l| l.price_per_gbps_hour == 0.25));
        assert_eq!(g.sites().len(), 3);
        assert_eq!(g.sites()[2].id, "site-n2");
    }

    #[test]
    fn key_defaults_and_no_namespace() {
        let xml = r#"<graphml>
  <key attr.name="LinkSpeedRaw" for="edge" id="s"><default>1e8</default></key>
  <graph><node id="a"/><node id="b"/><edge source="a" target="b"/></graph></graphml>"#;
        let g = import_graphml(xml, &ImportOptions::default()).unwrap();
        assert_eq!(g.links()[0].capacity_mbps, 100);
    }

    #[test]
    fn errors() {
        let opts = ImportOptions::default();
        assert!(matches!(import_graphml("<graphml>", &opts), Err(GraphmlError::Xml(_))));
        assert!(matches!(import_graphml("<foo/>", &opts), Err(GraphmlError::NotGraphml(n)) if n == "foo"));
        assert!(matches!(import_graphml("<graphml/>", &opts), Err(GraphmlError::NoGraph)));
        let no_id = "<graphml><graph><node/></graph></graphml>";
        assert!(matches!(
            import_graphml(no_id, &opts),
            Err(GraphmlError::MissingAttribute { element: "node", index: 0, attr: "id" })
        ));
        let dangling = r#"<graphml><graph><node id="a"/><edge source="a" target="z"/></graph></graphml>"#;
        assert!(
            matches!(import_graphml(dangling, &opts), Err(GraphmlError::UnknownNode { index: 0, node }) if node == "z")
        );
        let bad_speed = r#"<graphml><key attr.name="LinkSpeedRaw" for="edge" id="k"/><graph><node id="a"/>
            <node id="b"/><edge source="a" target="b"><data key="k">fast</data></edge></graph></graphml>"#;
        assert!(matches!(import_graphml(bad_speed, &opts), Err(GraphmlError::BadSpeed { index: 0, .. })));
        let dup = r#"<graphml><graph><node id="a"/><node id="a"/></graph></graphml>"#;
        assert!(matches!(import_graphml(dup, &opts), Err(GraphmlError::Grid(GridError::DuplicateId { .. }))));
        let coord = |lat: &str| {
            format!(
                r#"<graphml><key attr.name="Latitude" for="node" id="y"/><key attr.name="Longitude" for="node" id="x"/>
                <graph><node id="a"><data key="y">{lat}</data><data key="x">4.9</data></node></graph></graphml>"#
            )
        };
        assert!(matches!(
            import_graphml(&coord("north"), &opts),
            Err(GraphmlError::BadCoordinate { index: 0, attr: "Latitude", .. })
        ));
        assert!(matches!(
            import_graphml(&coord("95.0"), &opts),
            Err(GraphmlError::Grid(GridError::BadCoordinate { what: "latitude", .. }))
        ));
        assert_eq!(import_graphml(&coord("52.4"), &opts).unwrap().nodes()[0].latitude, Some(52.4));
        let zero = ImportOptions { default_capacity_mbps: 0, ..ImportOptions::default() };
        assert!(matches!(import_graphml(SMALL, &zero), Err(GraphmlError::Grid(GridError::ZeroCapacity(_)))));
        let bad_sites = ImportOptions { sites: SiteParams { os_choices: vec![], ..SiteParams::default() }, ..opts };
        assert!(matches!(import_graphml(SMALL, &bad_sites), Err(GraphmlError::Sites(_))));
    }
}
