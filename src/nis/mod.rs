//! NIS — Network Information Service, the bandwidth manager (docs/model.md, docs/algorithm.md).
//!
//! Holds the topology as a petgraph graph and a capacity calendar of Mbit/s per link, all in
//! one [`MultiCalendar`] (links are undirected; both directions share the capacity). The
//! bandwidth that can be reserved on a path over an interval is the minimum over its links of
//! the link's free bandwidth (capacity minus the *peak* booked in the interval). Prepare books
//! every link of a path atomically, or none.
//!
//! Routing ([`Routing`]):
//! - `shortest` (default): fewest hops among the links that can carry the demand over the
//!   interval (the topology pruned to links with enough free bandwidth, as OSCARS does,
//!   then breadth-first search);
//! - `widest:K`: among the K shortest loopless paths by hop count (Yen's algorithm, computed
//!   once per node pair), the one whose bottleneck free bandwidth over the interval is largest
//!   (the widest-path metric of Watashiba's SDN-enhanced job manager, restricted to short paths).
//!
//! With a data plane that steers ([`dataplane::PathSteering::steers`]) the path chosen is the
//! path the transfer's packets take; with one that cannot, the NIS books only the path the
//! network routes ([`dataplane::PathSteering::routed_path`]), whatever the routing policy.

pub mod dataplane;
mod route;

use dataplane::PathSteering;

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use petgraph::graph::{NodeIndex, UnGraph};

use crate::calendar::{MultiCalendar, SpanId};
use crate::clock::Clock;
use crate::model::{Grid, Link, LinkId, NodeId, SiteId, Time, UnknownValue};
use crate::protocol::bookkeeping::{self, Bookkeeping, KeepsHolds};
use crate::protocol::{
    book_steps, usage_steps, Hold, HoldId, HoldState, Network, NetworkHoldRequest, NetworkQuery, NetworkSnapshot,
    Participant, ParticipantError, Route, SnapshotWindow,
};

/// How the NIS picks a path between two sites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Routing {
    /// Fewest hops over the links with enough free bandwidth.
    #[default]
    Shortest,
    /// The widest of the `k` shortest paths.
    Widest { k: usize },
}

impl fmt::Display for Routing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Routing::Shortest => f.write_str("shortest"),
            Routing::Widest { k } => write!(f, "widest:{k}"),
        }
    }
}

impl FromStr for Routing {
    type Err = UnknownValue;
    /// `shortest`, `widest` (k = 4) or `widest:K` with K >= 1.
    fn from_str(s: &str) -> Result<Self, UnknownValue> {
        match s.split_once(':') {
            None if s == "shortest" => Ok(Routing::Shortest),
            None if s == "widest" => Ok(Routing::Widest { k: 4 }),
            Some(("widest", k)) => match k.parse::<usize>() {
                Ok(k) if k >= 1 => Ok(Routing::Widest { k }),
                _ => Err(UnknownValue::new("routing", s, "widest:K with a path count K >= 1")),
            },
            _ => Err(UnknownValue::new("routing", s, "shortest, widest or widest:K")),
        }
    }
}

/// What the topology alone says about a node pair (bookings aside).
struct PairPaths {
    /// The widest-path bottleneck capacity: a demand above it can never be routed.
    max_capacity_mbps: u64,
    /// Up to k loopless paths, fewest hops first (k = 1 for `shortest`).
    paths: Vec<Vec<usize>>,
}

/// One link's share of a hold or reservation, as [`Nis::booked`] lists it: a hold on a
/// path of N links is N of these, with the same `hold`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkBooked {
    /// The link.
    pub link: LinkId,
    pub hold: HoldId,
    /// Start (inclusive) and end (exclusive), seconds since the epoch.
    pub start: Time,
    pub end: Time,
    /// Booked bandwidth in Mbit/s.
    pub bandwidth_mbps: u64,
    /// Held (with its lease end) or committed.
    pub state: HoldState,
    /// The principal that prepared it through the NIS's HTTP endpoints; `None` for holds of the
    /// process's own planners (all-in-one) and for holds journaled before owners were recorded
    /// (see [`crate::lis::Booked::owner`]).
    pub owner: Option<String>,
}

/// The network's state of holds: a calendar per link, by the link's index.
pub(crate) type State = Bookkeeping<usize, NetworkHoldRequest>;

/// What one hold booked: a span per link of its path, by the link's index (see
/// [`bookkeeping::HoldSpans`]).
type HoldSpans = bookkeeping::HoldSpans<usize, NetworkHoldRequest>;

/// The network bandwidth manager.
pub struct Nis {
    clock: Arc<dyn Clock>,
    lease_s: i64,
    routing: Routing,
    links: Vec<Link>,
    link_index: HashMap<LinkId, usize>,
    /// Nodes weighted by their id, edges by their index into `links`.
    graph: UnGraph<String, usize>,
    site_node: HashMap<SiteId, NodeIndex>,
    /// Static facts per node pair, computed on first use: see [`PairPaths`].
    pairs: Mutex<HashMap<(NodeIndex, NodeIndex), Arc<PairPaths>>>,
    state: Mutex<State>,
    /// The data plane the NIS programs, if any ([`Nis::with_dataplane`]).
    plane: Option<dataplane::TcPlane>,
}

impl Nis {
    /// A NIS over the grid's topology with empty link calendars.
    pub fn new(grid: &Grid, clock: Arc<dyn Clock>, lease_s: i64, routing: Routing) -> Self {
        let nodes: Vec<&str> = grid.nodes().iter().map(|n| n.id.as_str()).collect();
        let sites = grid.sites().iter().map(|s| (s.id.clone(), s.node.as_str()));
        Self::over(&nodes, grid.links(), sites, clock, lease_s, routing)
            .expect("a grid's links and sites name its nodes")
    }

    /// A NIS over the topology of `nodes` and `links` (in this order: paths are searched in
    /// it), with each site of `sites` at its node, and empty link calendars.
    ///
    /// # Errors
    /// `Invalid` for a link or site at a node not in `nodes`.
    fn over<'n>(
        nodes: &[&'n str],
        links: &[Link],
        sites: impl Iterator<Item = (SiteId, &'n str)>,
        clock: Arc<dyn Clock>,
        lease_s: i64,
        routing: Routing,
    ) -> Result<Self, ParticipantError> {
        let mut graph = UnGraph::<String, usize>::default();
        let index: HashMap<&str, NodeIndex> = nodes.iter().map(|&n| (n, graph.add_node(n.to_string()))).collect();
        let node =
            |n: &str| index.get(n).copied().ok_or_else(|| ParticipantError::Invalid(format!("unknown node `{n}`")));
        for (i, l) in links.iter().enumerate() {
            graph.add_edge(node(l.a.as_str())?, node(l.b.as_str())?, i);
        }
        let site_node = sites.map(|(s, n)| Ok((s, node(n)?))).collect::<Result<_, ParticipantError>>()?;
        let calendars = MultiCalendar::new(links.iter().map(|l| l.capacity_mbps).enumerate());
        Ok(Nis {
            clock,
            lease_s,
            routing,
            links: links.to_vec(),
            link_index: links.iter().enumerate().map(|(i, l)| (l.id.clone(), i)).collect(),
            graph,
            site_node,
            pairs: Mutex::new(HashMap::new()),
            state: Mutex::new(State::new(calendars, ())),
            plane: None,
        })
    }

    /// A local replica of the NIS from its snapshot (docs/algorithm.md, "Plans from
    /// snapshots"): a NIS over the snapshot's topology, with its routing, whose link calendars
    /// hold, over the snapshot's window, what the real one held when it took it. Its routing is
    /// this type's own, so inside the window it answers as the real NIS did; its holds are the
    /// planner's own tentative ones. Holds live `lease_s` seconds of `clock` time.
    ///
    /// # Errors
    /// `Invalid` for a snapshot whose routing, nodes or links do not make a topology, or
    /// that books more than a link carries.
    pub fn replica(snapshot: &NetworkSnapshot, clock: Arc<dyn Clock>, lease_s: i64) -> Result<Self, ParticipantError> {
        let routing: Routing =
            snapshot.routing.parse().map_err(|e: UnknownValue| ParticipantError::Invalid(e.to_string()))?;
        let nodes: Vec<&str> = snapshot.nodes.iter().map(|n| n.as_str()).collect();
        let sites = snapshot.site_nodes.iter().map(|(s, n)| (s.clone(), n.as_str()));
        let nis = Self::over(&nodes, &snapshot.links, sites, clock, lease_s, routing)?;
        {
            let mut st = nis.state.lock().expect("NIS state lock");
            for (link, steps) in &snapshot.links_booked {
                let &i = nis.link_index.get(link).ok_or_else(|| ParticipantError::UnknownLink(link.clone()))?;
                book_steps(st.calendars.get_mut(i), steps)
                    .map_err(|e| ParticipantError::Invalid(format!("snapshot of link `{link}`: {e}")))?;
            }
        }
        Ok(nis)
    }

    fn node_of(&self, site: &SiteId) -> Result<NodeIndex, ParticipantError> {
        self.site_node.get(site).copied().ok_or_else(|| ParticipantError::UnknownSite(site.clone()))
    }

    /// Booked Mbit/s on a link at instant `t` (holds included); `None` for an unknown link.
    pub fn usage_at(&self, link: &str, t: Time) -> Option<u64> {
        let i = *self.link_index.get(link)?;
        Some(self.state().calendars.get(i).usage_at(t))
    }

    /// Holds and reservations overlapping `[from, to)`, one entry per booked link, on every link
    /// (`link` = `None`) or on one; sorted by the link's position in the topology, then start,
    /// then hold id. Mirrors [`crate::lis::Lis::booked`].
    ///
    /// # Errors
    /// [`ParticipantError::UnknownLink`] for a `link` not in the topology.
    pub fn booked(&self, link: Option<&str>, from: Time, to: Time) -> Result<Vec<LinkBooked>, ParticipantError> {
        let only = link
            .map(|l| self.link_index.get(l).copied().ok_or_else(|| ParticipantError::UnknownLink(l.into())))
            .transpose()?;
        let st = self.state();
        let mut out: Vec<(usize, LinkBooked)> = Vec::new();
        for (hold, state, booked) in st.holds.active() {
            for &(l, span) in &booked.spans {
                if only.is_some_and(|o| o != l) {
                    continue;
                }
                let Some(mut s) = st.calendars.get(l).span(span) else { continue }; // pruned
                if let Some(g) = &booked.growth {
                    // A replacement hold: the new shape it holds.
                    (s.start, s.end, s.amount) = (g.request.start, g.request.end, g.request.bandwidth_mbps);
                }
                if s.start < to && s.end > from {
                    out.push((
                        l,
                        LinkBooked {
                            link: self.links[l].id.clone(),
                            hold,
                            start: s.start,
                            end: s.end,
                            bandwidth_mbps: s.amount,
                            state,
                            owner: st.holds.owner(hold).flatten().map(str::to_owned),
                        },
                    ));
                }
            }
        }
        out.sort_by_key(|(l, r)| (*l, r.start, r.hold));
        Ok(out.into_iter().map(|(_, r)| r).collect())
    }

    /// Puts back a hold or reservation read from a journal (at start, before any other call);
    /// see [`crate::lis::Lis::restore`].
    ///
    /// # Errors
    /// `UnknownLink`, `Invalid` (no links), or `LinkCapacity` if it does not fit (the journal
    /// contradicts the topology: the caller must stop).
    pub fn restore(&self, id: HoldId, req: &NetworkHoldRequest, state: HoldState) -> Result<(), ParticipantError> {
        bookkeeping::restore(&mut self.state(), id, req.txn, req.replaces, state, |st, over| self.book(st, req, over))?;
        self.note_endpoints(id, req);
        Ok(())
    }

    /// Books `req`'s bandwidth on every link of its path, all or none; a replacement hold
    /// books its growth over the committed reservation it replaces (`grows_over`), on the same
    /// links; `None` books `req`'s shape outright.
    fn book(
        &self,
        st: &mut State,
        req: &NetworkHoldRequest,
        grows_over: Option<HoldId>,
    ) -> Result<HoldSpans, ParticipantError> {
        let Some(old) = grows_over else { return self.book_new(st, req) };
        let base = bookkeeping::replaced(st, old)?;
        let links: Vec<&LinkId> = base.spans.iter().map(|(l, _)| &self.links[*l].id).collect();
        if links.len() != req.links.len() || links.iter().zip(&req.links).any(|(a, b)| *a != b) {
            return Err(ParticipantError::InvalidHold(format!("a modification keeps the path of reservation {old}")));
        }
        let grow: Vec<(usize, SpanId, u64)> =
            base.spans.iter().map(|&(l, span)| (l, span, req.bandwidth_mbps)).collect();
        let request = NetworkHoldRequest { replaces: None, ..req.clone() };
        st.add_growth(old, base, &grow, (req.start, req.end), request)
            .map_err(|(i, e)| ParticipantError::from_calendar(e, Some(&self.links[grow[i].0].id)))
    }

    fn book_new(&self, st: &mut State, req: &NetworkHoldRequest) -> Result<HoldSpans, ParticipantError> {
        if req.links.is_empty() {
            return Err(ParticipantError::Invalid("a network hold needs at least one link".into()));
        }
        let idx = req
            .links
            .iter()
            .map(|l| self.link_index.get(l).copied().ok_or_else(|| ParticipantError::UnknownLink(l.clone())))
            .collect::<Result<Vec<_>, _>>()?;
        let demand: Vec<(usize, u64)> = idx.iter().map(|&l| (l, req.bandwidth_mbps)).collect();
        let spans = st
            .calendars
            .add(req.start, req.end, &demand)
            .map_err(|(i, e)| ParticipantError::from_calendar(e, Some(&self.links[idx[i]].id)))?;
        Ok(HoldSpans { spans: idx.into_iter().zip(spans).collect(), growth: None })
    }

    /// Live holds (not committed, not expired).
    pub fn holds_outstanding(&self) -> usize {
        self.state().holds.outstanding()
    }

    /// The owner of hold `id`: `None` for an unknown hold, `Some(None)` for one without a
    /// recorded owner (see [`crate::lis::Lis::owner`]).
    pub fn owner(&self, id: HoldId) -> Option<Option<String>> {
        self.state().holds.owner(id).map(|o| o.map(str::to_owned))
    }

    /// Sets the owner of hold `id` (at start, after [`Nis::restore`], from the journal).
    pub fn set_owner(&self, id: HoldId, owner: Option<String>) {
        self.state().holds.set_owner(id, owner);
    }

    fn prepare_owned(&self, req: &NetworkHoldRequest, owner: Option<&str>) -> Result<Hold, ParticipantError> {
        let mut st = self.state();
        let booked = self.book(&mut st, req, req.replaces)?;
        let hold = Hold { id: HoldId::new(), expires_at: self.clock.now() + self.lease_s };
        st.holds.hold(hold.id, req.txn, booked, hold.expires_at);
        st.holds.set_owner(hold.id, owner.map(str::to_owned));
        drop(st);
        self.note_endpoints(hold.id, req);
        Ok(hold)
    }

    /// Forgets reservations (and holds) that ended at or before `horizon` on every link.
    /// Returns how many link spans were pruned.
    pub fn prune_before(&self, horizon: Time) -> usize {
        let mut st = self.state();
        let pruned: std::collections::HashSet<(usize, SpanId)> = st
            .calendars
            .prune_before(horizon)
            .into_iter()
            .enumerate()
            .flat_map(|(l, spans)| spans.into_iter().map(move |s| (l, s)))
            .collect();
        // Every span of a hold covers the same interval, so they are pruned together.
        st.holds.forget(|b| b.growth.is_none() && b.spans.iter().any(|s| pruned.contains(s)));
        pruned.len()
    }

    /// Finds a path per the routing policy; see the module docs.
    fn route(&self, from: NodeIndex, to: NodeIndex, bandwidth_mbps: u64, start: Time, end: Time) -> Option<Route> {
        if from == to {
            return Some(Route { links: vec![], price_per_gbps_hour: 0.0, free_mbps: u64::MAX, marking: None });
        }
        if let Some(plane) = self.plane.as_ref().filter(|p| !p.steers()) {
            // A data plane that cannot steer: only the path the network routes is delivered.
            let links = plane.routed_path(&self.graph[from], &self.graph[to])?;
            let path: Vec<usize> = links.iter().map(|l| self.link_index.get(l).copied()).collect::<Option<_>>()?;
            let free_mbps = {
                let st = self.state();
                path.iter().map(|&l| st.calendars.get(l).free_over(start, end)).min().unwrap_or(u64::MAX)
            };
            return (free_mbps >= bandwidth_mbps).then(|| Route {
                free_mbps,
                price_per_gbps_hour: path.iter().map(|&l| self.links[l].price_per_gbps_hour).sum(),
                links,
                marking: None,
            });
        }
        let pair = self.pair(from, to);
        if bandwidth_mbps > pair.max_capacity_mbps || pair.paths.is_empty() {
            return None;
        }
        let st = self.state();
        let free = |l: usize| st.calendars.get(l).free_over(start, end);
        let bottleneck = |p: &[usize]| p.iter().map(|&l| free(l)).min().unwrap_or(u64::MAX);
        let path = match self.routing {
            Routing::Shortest => {
                // The fewest-hop path of the bare topology usually fits: then it is a fewest-hop
                // path among the links that fit, and no search is needed.
                if bottleneck(&pair.paths[0]) >= bandwidth_mbps {
                    pair.paths[0].clone()
                } else {
                    // 0 = not yet known, 1 = fits, 2 = does not fit
                    let mut memo = vec![0u8; self.links.len()];
                    let mut fits = |l: usize| {
                        if memo[l] == 0 {
                            memo[l] = if free(l) >= bandwidth_mbps { 1 } else { 2 };
                        }
                        memo[l] == 1
                    };
                    route::bfs(&self.graph, from, to, &mut fits, &[])?
                }
            }
            Routing::Widest { .. } => {
                // max_by_key keeps the last maximum; iterate reversed so ties go to the shorter path.
                let best = pair.paths.iter().rev().max_by_key(|p| bottleneck(p))?;
                if bottleneck(best) < bandwidth_mbps {
                    return None;
                }
                best.clone()
            }
        };
        Some(Route {
            free_mbps: bottleneck(&path),
            links: path.iter().map(|&l| self.links[l].id.clone()).collect(),
            price_per_gbps_hour: path.iter().map(|&l| self.links[l].price_per_gbps_hour).sum(),
            marking: None,
        })
    }

    fn pair(&self, from: NodeIndex, to: NodeIndex) -> Arc<PairPaths> {
        let mut cache = self.pairs.lock().expect("path cache lock");
        cache
            .entry((from, to))
            .or_insert_with(|| {
                let k = match self.routing {
                    Routing::Shortest => 1,
                    Routing::Widest { k } => k,
                };
                let capacity: Vec<u64> = self.links.iter().map(|l| l.capacity_mbps).collect();
                Arc::new(PairPaths {
                    max_capacity_mbps: route::widest_capacities(&self.graph, &capacity, from)[to.index()],
                    paths: route::yen(&self.graph, from, to, k),
                })
            })
            .clone()
    }
}

#[async_trait]
impl Participant<Network> for Nis {
    async fn query(&self, q: &NetworkQuery) -> Result<Option<Route>, ParticipantError> {
        let (a, b) = (self.node_of(&q.from_site)?, self.node_of(&q.to_site)?);
        let mut route = self.route(a, b, q.bandwidth_mbps, q.start, q.end);
        if let (Some(r), Some(plane)) = (route.as_mut(), &self.plane) {
            if !r.links.is_empty() {
                r.marking = plane.marking(&q.from_site, &q.to_site);
            }
        }
        Ok(route)
    }

    async fn drift(&self) -> Result<Vec<crate::protocol::Drift>, ParticipantError> {
        Ok(self.dataplane_drift())
    }

    /// The topology and the link calendars over `window`, after lapsed holds are released.
    /// `None` with a data plane: a replica could not know its markings nor, where it does not
    /// steer, the paths the network routes.
    async fn snapshot(&self, window: &SnapshotWindow) -> Result<Option<NetworkSnapshot>, ParticipantError> {
        if self.plane.is_some() {
            return Ok(None);
        }
        let mut site_nodes: Vec<(SiteId, NodeId)> =
            self.site_node.iter().map(|(s, &n)| (s.clone(), NodeId::from(self.graph[n].as_str()))).collect();
        site_nodes.sort();
        let st = self.state();
        let links_booked = (0..self.links.len())
            .filter_map(|i| {
                let steps = usage_steps(st.calendars.get(i), *window);
                (!steps.is_empty()).then(|| (self.links[i].id.clone(), steps))
            })
            .collect();
        Ok(Some(NetworkSnapshot {
            window: *window,
            routing: self.routing.to_string(),
            nodes: self.graph.node_weights().map(|n| NodeId::from(n.as_str())).collect(),
            links: self.links.clone(),
            site_nodes,
            links_booked,
        }))
    }

    /// The widest path's bottleneck between each query's two sites (the topology alone):
    /// `u64::MAX` on one node, 0 between unknown or unjoined sites.
    async fn ceilings(&self, qs: &[NetworkQuery]) -> Option<Vec<u64>> {
        let ceiling = |q: &NetworkQuery| match (self.node_of(&q.from_site), self.node_of(&q.to_site)) {
            (Ok(a), Ok(b)) if a == b => u64::MAX,
            (Ok(a), Ok(b)) => {
                let pair = self.pair(a, b);
                if pair.paths.is_empty() {
                    0
                } else {
                    pair.max_capacity_mbps
                }
            }
            _ => 0,
        };
        Some(qs.iter().map(ceiling).collect())
    }

    /// The first of `qs` with a path, as [`Self::query`] answers each; `None` (not said) when
    /// one names a site the NIS does not know (its error is [`Self::query`]'s to give).
    async fn first_granted(&self, qs: &[NetworkQuery]) -> Option<Option<(usize, Option<Route>)>> {
        for (i, q) in qs.iter().enumerate() {
            match self.query(q).await {
                Ok(Some(r)) => return Some(Some((i, Some(r)))),
                Ok(None) => {}
                Err(_) => return None,
            }
        }
        Some(None)
    }

    async fn prepare(&self, req: &NetworkHoldRequest) -> Result<Hold, ParticipantError> {
        self.prepare_owned(req, None)
    }

    async fn prepare_for(&self, req: &NetworkHoldRequest, owner: &str) -> Result<Hold, ParticipantError> {
        self.prepare_owned(req, Some(owner))
    }
}

#[async_trait]
impl KeepsHolds for Nis {
    type Resource = usize;
    type Request = NetworkHoldRequest;
    type Local = ();

    fn kept(&self) -> (&Mutex<State>, &dyn Clock) {
        (&self.state, &*self.clock)
    }

    /// With a data plane, the transfer is admitted there first (see [`dataplane`]).
    async fn commit_hold(&self, hold: HoldId) -> Result<(), ParticipantError> {
        if self.plane.is_some() && matches!(self.state().holds.get(hold), Some((HoldState::Held { .. }, _))) {
            self.admit(&[hold]).await?;
        }
        let Some(replaced) = bookkeeping::commit(&mut *self.state(), hold, |st, g| self.book_new(st, &g.request))?
        else {
            return Ok(());
        };
        // The data plane follows the swap: the old reservation's rules out, the new shape's in
        // (if its window is open; else the timer installs them when it opens).
        if self.plane.is_some() {
            self.withdraw(replaced).await;
            if let Err(e) = self.admit(&[hold]).await {
                tracing::warn!(%hold, error = %e, "a modified transfer's rules were not installed; the next reconciliation retries");
            }
        }
        Ok(())
    }

    /// In memory nothing is made durable; with a data plane the transfers are admitted there
    /// (all or the first refusal), before the coordinator decides.
    async fn persist_holds(&self, holds: &[HoldId]) -> Result<(), ParticipantError> {
        self.admit(holds).await
    }

    /// The transfer's rules on the data plane, if any.
    async fn withdraw(&self, hold: HoldId) {
        Nis::withdraw(self, hold).await;
    }
}

#[cfg(test)]
mod tests;
