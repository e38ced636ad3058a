//! The NIS's data plane (docs/protocol.md, "The NIS's data plane"): what the NIS books is what
//! the network delivers. A committed transfer gets, on every link of the path the NIS chose, a
//! guaranteed rate for its own traffic, and its traffic is forwarded along exactly that path,
//! from its window's start to its end.
//!
//! The mechanism is Linux traffic control and policy routing on the routers (the link ends), as
//! an operator of Linux routers (or of the emulated network `scripts/emulated-wan` builds) would
//! set it up: every link end carries an HTB root qdisc (`1:`) with the link's class `1:1` (rate
//! = ceil = the link) and the unreserved traffic's default class `1:ffff` (rate 1 % of the
//! link, ceil = the link, so that it borrows whatever is free), and, for steering, a routing
//! table of its own (the map's `tables`) whose default route is the link's far end. Per
//! transfer and hop of its path, in the egress direction of the transfer, the NIS adds
//!
//! - an HTB class `1:M` under `1:1`, `rate` = the reservation (scaled as the map says), `ceil`
//!   = the link: the reservation is guaranteed and the transfer may borrow what is idle;
//! - a `u32` filter sending TCP from the sending site's endpoint address to the receiving
//!   site's, destination port [`crate::protocol::TrafficMarking::port`] of the hold, to `1:M`.
//!   All of them sit in one hashed u32 table per interface (preference [`FILTER_PREF`], table
//!   `10:`, 256 buckets keyed on the low byte of the destination port; the NIS makes the table
//!   when an interface has none), so a packet is matched against the few filters of its bucket
//!   and an interface carries as many transfers as it has class minors;
//! - with steering, an `ip rule` in the router's namespace at preference [`STEERING_PREF`]
//!   (before the main table's 32766) selecting the same 5-tuple (`from SRC to DST ipproto tcp
//!   dport PORT`) and looking up the hop's link table: the packet leaves by the booked link
//!   whatever the main table says. The receiving site's node needs no rule (its main table
//!   delivers to the site);
//! - with steering, for the transfer's return traffic (its ACKs: from DST to SRC, *source* port
//!   PORT), an `ip rule` in the namespace of the hop's far end (`from DST to SRC ipproto tcp
//!   sport PORT`) looking up that end's table of the same link: the ACKs cross the booked links
//!   in reverse ([`Direction::Return`]; unshaped, as the NIS books a link for both directions
//!   together). The sending site's node needs none.
//!
//! `M` (16 bits, `2 ..= 0xfffe`) is derived from the hold id and probed past the minors taken
//! on that interface (and past filter handles taken in the port's bucket): class minor and
//! filter handle `10:<bucket>:<node>` follow from it and the port, so a rule is found and
//! deleted by them alone. Routing rules are identified by their selector and table; two holds
//! with the same 5-tuple on the same hop share one (a transfer whose 5-tuple another steers
//! elsewhere is refused: its packets could not be told apart).
//!
//! A driver that cannot steer (`--dataplane tc-rate-only`, or a map without routing tables)
//! says so at start, and the NIS books only the path the network routes (the map's `routes`),
//! see [`PathSteering`].
//!
//! - **Before a hold is durable** (`persist`) or committed, whichever comes first, the NIS
//!   checks that every interface of the path is shaped (has its `1:1`), and installs the rules
//!   if the window is open already: a data plane that refuses is the participant's refusal
//!   ([`crate::protocol::ParticipantError::DataPlane`]), so no plan is answered committed on a
//!   network that cannot carry it.
//! - **The timer** ([`super::Nis::reconcile_dataplane`], run at every window boundary and every
//!   `sync_ms`): installs the rules of committed transfers whose window opened, removes those
//!   whose window closed, removes rules no live hold owns (strays: a crash, a failed delete),
//!   and re-installs a rule (class, filter or routing rule) that vanished behind the NIS's back
//!   (verification: every hop is read back); such a transfer is *drift*
//!   ([`crate::protocol::Participant::drift`]): its plan is marked broken.
//! - **Abort, release (cancel)** remove the rules at once.
//!
//! `tc` and `ip` are run as programs (`tc -n NETNS -batch -`, `ip -n NETNS -batch -`, one
//! process per namespace and operation): HTB classes and u32 filters have no maintained netlink
//! crate that covers them, and `tc`/`ip` are what an operator runs and reads. Filters and
//! routing rules are read back as JSON (`tc -j filter show`, `ip -j rule show`); HTB classes are
//! read from `tc class show`'s text (iproute2 6.1 prints no JSON for them): only the handle is
//! used.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod reconcile;
mod tc;

use crate::model::{LinkId, SiteId, Time};
use crate::protocol::{HoldId, HoldState};

/// Default [`DataplaneConfig::port_base`].
pub const DEFAULT_PORT_BASE: u16 = 40000;
/// Default [`DataplaneConfig::port_span`].
pub const DEFAULT_PORT_SPAN: u16 = 16384;
/// Default [`DataplaneConfig::sync_ms`].
pub const DEFAULT_SYNC_MS: u64 = 1000;
/// How long one `tc` call may take.
const TC_TIMEOUT: Duration = Duration::from_secs(10);
/// The minors the NIS may use: `1:1` is the link, `1:ffff` the unreserved traffic.
const FIRST_MINOR: u16 = 2;
const LAST_MINOR: u16 = 0xfffe;
/// HTB quantum of every class the NIS makes (bytes; about 10 full frames).
const QUANTUM: u32 = 15_140;
/// At most this many transfers' rules on one interface: one class minor each (the filters sit
/// in one hashed u32 table, 256 buckets of up to 0xfff filters); a transfer beyond this one is
/// refused at admission.
pub const MAX_RULES_PER_INTERFACE: usize = (LAST_MINOR - FIRST_MINOR) as usize + 1;
/// The preference of the NIS's u32 filters (all in one hashed table, see the module docs).
pub const FILTER_PREF: u16 = 1;
/// The u32 hash table of the NIS's filters on every interface (`10:`).
const FILTER_HT: u16 = 0x10;
/// The preference of the NIS's routing rules: before the main table (32766).
pub const STEERING_PREF: u32 = 10_000;

/// How the NIS reaches its data plane (`serve --dataplane tc --dataplane-map FILE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataplaneConfig {
    /// The map of the network: per link the namespace and interface of each end, per site its
    /// endpoint address (`scripts/emulated-wan` writes it; see [`WanMap`]).
    pub map: PathBuf,
    /// The `tc` program.
    pub tc: PathBuf,
    /// Destination ports of reserved transfers: `port_base .. port_base + port_span`.
    pub port_base: u16,
    pub port_span: u16,
    /// Milliseconds between two reconciliations (besides those at window boundaries).
    pub sync_ms: u64,
    /// Forward each transfer along its booked path (`--dataplane tc`; needs the map's
    /// `tables`); `false` (`--dataplane tc-rate-only`): rates only, and the NIS books only
    /// the routed paths (the map's `routes`).
    pub steering: bool,
    /// The `ip` program (routing rules).
    pub ip: PathBuf,
}

impl DataplaneConfig {
    /// The map `map` with every default.
    pub fn new(map: impl Into<PathBuf>) -> Self {
        DataplaneConfig {
            map: map.into(),
            tc: PathBuf::from("tc"),
            port_base: DEFAULT_PORT_BASE,
            port_span: DEFAULT_PORT_SPAN,
            sync_ms: DEFAULT_SYNC_MS,
            steering: true,
            ip: PathBuf::from("ip"),
        }
    }
}

/// The network as the data plane sees it (JSON; `scripts/emulated-wan start` writes it).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct WanMap {
    /// Shaped rate = booked Mbit/s x scale.
    pub scale: f64,
    /// Per link id.
    pub links: HashMap<String, MapLink>,
    /// Per site id.
    pub sites: HashMap<String, MapSite>,
    /// The network's own routing: per node id, per destination node id, the link id its
    /// traffic leaves by (`scripts/emulated-wan` writes the routes it installs). A driver that
    /// cannot steer books only these paths.
    #[serde(default)]
    pub routes: HashMap<String, HashMap<String, String>>,
}

/// One link of the map.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct MapLink {
    /// The shaped capacity (kbit/s): the `ceil` of every class on it.
    pub capacity_kbit: u64,
    /// Per node id (the link's two ends): where its egress interface is.
    pub ends: HashMap<String, Interface>,
    /// Per node id (the link's two ends): the routing table (in that end's namespace) whose
    /// default route leaves by this link. Without them the data plane cannot steer.
    #[serde(default)]
    pub tables: HashMap<String, u32>,
}

/// A network interface in a namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
pub struct Interface {
    pub netns: String,
    pub dev: String,
}

impl std::fmt::Display for Interface {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.netns, self.dev)
    }
}

/// One site of the map.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct MapSite {
    pub node: String,
    /// Its endpoint address.
    pub addr: Ipv4Addr,
}

/// One installed rule of one hop: a class and its filter on the hop's egress interface, and,
/// with steering, the routing rule in its namespace that sends the transfer to that interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub iface: Interface,
    pub minor: u16,
    pub rate_kbit: u64,
    pub ceil_kbit: u64,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub port: u16,
    /// The routing table of the hop's link end, when steering.
    pub table: Option<u32>,
    /// The hop's far end (its namespace) and that end's routing table of the same link, for
    /// the return traffic, when steering.
    pub back: Option<(String, u32)>,
}

impl Rule {
    /// The handle of its u32 filter: `10:<bucket>:<node>` (hex), bucket = the port's low byte.
    pub fn filter_handle(&self) -> String {
        filter_handle(self.port, self.minor)
    }

    /// Its routing rules, when steering: the transfer's own packets at this end of the hop's
    /// link, and its return traffic at the far end (see [`Direction`]); none without steering.
    pub fn routes(&self) -> Vec<RouteRule> {
        let forward = self.table.map(|table| RouteRule {
            netns: self.iface.netns.clone(),
            src: self.src,
            dst: self.dst,
            port: self.port,
            direction: Direction::Forward,
            table,
        });
        let back = self.back.as_ref().map(|(netns, table)| RouteRule {
            netns: netns.clone(),
            src: self.dst,
            dst: self.src,
            port: self.port,
            direction: Direction::Return,
            table: *table,
        });
        forward.into_iter().chain(back).collect()
    }
}

/// The u32 filter handle of a rule of `port` with class `minor` (see [`Rule::filter_handle`]),
/// written as `tc` prints it: bucket 0 is empty (`10::5`).
fn filter_handle(port: u16, minor: u16) -> String {
    let bucket = port & 0xff;
    let bucket = if bucket == 0 { String::new() } else { format!("{bucket:x}") };
    format!("{FILTER_HT:x}:{bucket}:{:x}", filter_node(minor))
}

/// A filter's node id in its bucket (12 bits, not 0), derived from the class minor.
fn filter_node(minor: u16) -> u16 {
    (minor - FIRST_MINOR) % 0xfff + 1
}

/// Which packets of a transfer a routing rule steers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// The transfer's own packets, sender to receiver: matched on the destination port
    /// (`dport PORT`).
    Forward,
    /// Its return traffic (ACKs), receiver to sender: matched on the source port (`sport
    /// PORT`), steered over the booked links in reverse order.
    Return,
}

impl Direction {
    /// The `ip rule` selector of the port in this direction (`dport` or `sport`).
    pub fn selector(self) -> &'static str {
        match self {
            Direction::Forward => "dport",
            Direction::Return => "sport",
        }
    }
}

/// A routing rule of the NIS (at [`STEERING_PREF`]): TCP from `src` to `dst` (the packet's
/// addresses: the receiver's is `src` for [`Direction::Return`]), port `port` as `direction`
/// says, looked up in `table`, in namespace `netns`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RouteRule {
    pub netns: String,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub port: u16,
    pub direction: Direction,
    pub table: u32,
}

/// A rule before its minor is chosen.
#[derive(Debug, Clone)]
struct Spec {
    iface: Interface,
    rate_kbit: u64,
    ceil_kbit: u64,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    port: u16,
    table: Option<u32>,
    back: Option<(String, u32)>,
}

/// A routing rule's selector: namespace, source and destination address, port and direction.
type RouteKey = (String, Ipv4Addr, Ipv4Addr, u16, Direction);

/// A hold's rules (without minors), its window and state.
type Needed = (Vec<Spec>, Time, Time, HoldState);

/// What the data plane keeps beside the NIS's calendars.
#[derive(Debug, Default)]
struct PlaneState {
    /// The sending and receiving site of each hold that has both in the map.
    endpoints: HashMap<HoldId, (SiteId, SiteId)>,
    /// The destination port of a hold that keeps an earlier one's
    /// ([`crate::protocol::NetworkHoldRequest::port`]; the others derive theirs from their id).
    ports: HashMap<HoldId, u16>,
    /// Held (not committed) holds that passed `persist`: their rules stay while they live.
    admitted: HashSet<HoldId>,
    /// The rules this process installed or found installed, per hold.
    installed: HashMap<HoldId, Vec<Rule>>,
    /// Minors in use per interface.
    minors: HashMap<Interface, HashMap<u16, HoldId>>,
    /// u32 filter handles in use per interface.
    filters: HashMap<Interface, HashSet<String>>,
    /// Per routing rule's selector (namespace, addresses, port, direction): its table and the
    /// holds that need it (holds with the same 5-tuple on a hop share one).
    routes: HashMap<RouteKey, (u32, HashSet<HoldId>)>,
    /// Per interface: whether the NIS's hashed filter table (and its link) were there when last
    /// read or made.
    hashed: HashMap<Interface, (bool, bool)>,
    /// Committed transfers whose rules vanished behind the NIS's back, with why.
    broken: HashMap<HoldId, String>,
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct PlaneStats {
    pub installs: AtomicU64,
    pub install_us_sum: AtomicU64,
    pub install_us_max: AtomicU64,
    pub removes: AtomicU64,
    pub remove_us_sum: AtomicU64,
    pub remove_us_max: AtomicU64,
    pub reconciles_ok: AtomicU64,
    pub reconciles_failed: AtomicU64,
    pub reconcile_us_last: AtomicU64,
    pub opened: AtomicU64,
    pub closed: AtomicU64,
    pub reinstalled: AtomicU64,
    pub strays_removed: AtomicU64,
    pub refused: AtomicU64,
}

/// What one [`super::Nis::reconcile_dataplane`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ReconcileReport {
    /// Transfers whose window is open now and whose rules are installed.
    pub active: usize,
    /// Rules installed because their window opened (or at start: committed and open).
    pub opened: usize,
    /// Transfers whose rules were removed because their window closed or the hold ended.
    pub closed: usize,
    /// Transfers whose rules had vanished and were installed again (drift).
    pub reinstalled: usize,
    /// Rules in the NIS's range that no live hold owns, removed.
    pub strays_removed: usize,
}

/// What the NIS's path choice needs of a data plane driver, whatever programs the network (`tc`
/// and policy routing here; an SDN controller installing OpenFlow paths would be another).
pub trait PathSteering {
    /// Whether the driver forwards each transfer along exactly its booked path. If not, the
    /// NIS books only [`PathSteering::routed_path`].
    fn steers(&self) -> bool;

    /// The links the network's own routing takes from node `from` to node `to` (node ids);
    /// `None` if it does not say or does not reach.
    fn routed_path(&self, from: &str, to: &str) -> Option<Vec<LinkId>>;
}

/// A data plane programmed with `tc` and `ip`.
#[derive(Debug)]
pub struct TcPlane {
    config: DataplaneConfig,
    map: WanMap,
    /// See [`PathSteering::steers`].
    steers: bool,
    st: Mutex<PlaneState>,
    /// Serialises the operations on the interfaces (install, remove, reconcile), so that a
    /// reconciliation never takes a rule being installed for a stray.
    op: tokio::sync::Mutex<()>,
    pub stats: PlaneStats,
}

/// Why the data plane could not do what was asked. Its text is what a refused transfer's
/// `DataPlane` error and the reconciliation's log say.
#[derive(Debug, thiserror::Error)]
pub enum DataplaneError {
    /// The map file cannot be read.
    #[error("data plane map {}: {source}", path.display())]
    MapRead { path: PathBuf, source: std::io::Error },
    /// The map file is not a valid map.
    #[error("data plane map {}: {source}", path.display())]
    MapParse { path: PathBuf, source: serde_json::Error },
    /// `tc` cannot be started.
    #[error("cannot run {}: {source}", tc.display())]
    Spawn { tc: PathBuf, source: std::io::Error },
    /// Talking to a running `tc` failed.
    #[error("tc: {0}")]
    Io(#[source] std::io::Error),
    /// `tc` did not finish within its timeout.
    #[error("tc timed out")]
    Timeout,
    /// `tc` exited with an error; `command` is what it ran, `stderr` the first lines it said.
    #[error("tc {command}: {stderr}")]
    Tc { command: String, stderr: String },
    /// `tc -j filter show` printed something that is not its JSON.
    #[error("tc -j filter show dev {iface}: {source}")]
    Filters { iface: Interface, source: serde_json::Error },
    /// A rule that was removed is still installed.
    #[error("rule 1:{minor:x} still on {iface}")]
    StillInstalled { iface: Interface, minor: u16 },
    /// A link of the path is not in the map, or has no end at the node the path reaches.
    #[error("link `{link}` {why} in the data plane's map")]
    Unmapped { link: LinkId, why: String },
    /// The path does not reach the receiving site's node.
    #[error("the path does not end at site `{site}`'s node `{node}`")]
    PathEnd { site: SiteId, node: String },
    /// An interface has no HTB link class (it is not shaped).
    #[error("interface {0} has no HTB link class 1:1")]
    Unshaped(Interface),
    /// An interface carries as many reserved transfers as its filters can tell apart.
    #[error("{0} carries {MAX_RULES_PER_INTERFACE} reserved transfers already (u32 filter limit)")]
    Full(Interface),
    /// No class minor is free on an interface.
    #[error("no free class on {0}")]
    NoFreeClass(Interface),
    /// `ip` cannot be started.
    #[error("cannot run {}: {source}", ip.display())]
    SpawnIp { ip: PathBuf, source: std::io::Error },
    /// `ip` exited with an error; `command` is what it ran, `stderr` the first lines it said.
    #[error("ip {command}: {stderr}")]
    Ip { command: String, stderr: String },
    /// `ip -j rule show` printed something that is not its JSON.
    #[error("ip -j -n {netns} rule show: {source}")]
    Rules { netns: String, source: serde_json::Error },
    /// A routing rule that was removed is still installed.
    #[error("routing rule {0:?} still installed")]
    RouteStillInstalled(RouteRule),
    /// Another transfer with the same traffic (addresses, port) is steered elsewhere on a hop:
    /// their packets cannot be told apart.
    #[error("another transfer with the same addresses and port {port} is steered elsewhere in {netns}")]
    Conflict { netns: String, port: u16 },
    /// The map has no routing tables and no routes: the driver can neither steer nor say which
    /// path the network takes.
    #[error("data plane map {}: no routing tables (steering) and no routes (rate-only)", path.display())]
    NoRouting { path: PathBuf },
}

#[cfg(test)]
mod tests {
    use super::{filter_handle, filter_node, Direction, Interface, RouteRule, Rule, TcPlane, FIRST_MINOR, LAST_MINOR};

    /// Filter handles are written as `tc -j filter show` prints them, so that the read-back
    /// finds them: bucket 0 (a port whose low byte is 0) is empty. (The 10,000-transfer
    /// measurement found 7 transfers on ports 10240, 10496, ... re-installed forever.)
    #[test]
    fn filter_handles_read_as_tc_prints_them() {
        assert_eq!(filter_handle(40001, FIRST_MINOR), "10:41:1");
        assert_eq!(filter_handle(10240, FIRST_MINOR + 0x2a), "10::2b");
        assert_eq!(filter_node(LAST_MINOR), (LAST_MINOR - FIRST_MINOR) % 0xfff + 1);
        assert!((FIRST_MINOR..=LAST_MINOR).all(|m| (1..=0xfff).contains(&filter_node(m))));
    }

    /// A hop's rules with steering: the transfer's packets at the hop's own end (destination
    /// port), its return traffic at the far end (source port, the addresses swapped), each in
    /// that end's table of the link; without steering, none.
    #[test]
    fn a_hop_steers_both_directions() {
        let mut r = Rule {
            iface: Interface { netns: "n2".into(), dev: "v0".into() },
            minor: FIRST_MINOR,
            rate_kbit: 30_000,
            ceil_kbit: 100_000,
            src: [10, 224, 0, 2].into(),
            dst: [10, 224, 0, 3].into(),
            port: 40_001,
            table: Some(1000),
            back: Some(("n1".into(), 1000)),
        };
        let routes = r.routes();
        assert_eq!(
            routes,
            [
                RouteRule {
                    netns: "n2".into(),
                    src: r.src,
                    dst: r.dst,
                    port: 40_001,
                    direction: Direction::Forward,
                    table: 1000
                },
                RouteRule {
                    netns: "n1".into(),
                    src: r.dst,
                    dst: r.src,
                    port: 40_001,
                    direction: Direction::Return,
                    table: 1000
                },
            ]
        );
        assert_eq!(
            TcPlane::route_line("add", &routes[0]),
            "rule add pref 10000 from 10.224.0.2/32 to 10.224.0.3/32 ipproto tcp dport 40001 table 1000"
        );
        assert_eq!(
            TcPlane::route_line("del", &routes[1]),
            "rule del pref 10000 from 10.224.0.3/32 to 10.224.0.2/32 ipproto tcp sport 40001 table 1000"
        );
        (r.table, r.back) = (None, None);
        assert!(r.routes().is_empty());
    }
}
