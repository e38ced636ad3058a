//! The NIS's data plane (docs/protocol.md, "The NIS's data plane"): what the NIS books is what
//! the network delivers. A committed transfer gets, on every link of the path the NIS chose, a
//! guaranteed rate for its own traffic from its window's start to its end.
//!
//! The mechanism is Linux traffic control on the links' egress interfaces, as an operator of
//! Linux routers (or of the emulated network `scripts/emulated-wan` builds) would set it up:
//! every link end carries an HTB root qdisc (`1:`) with the link's class `1:1` (rate = ceil =
//! the link) and the unreserved traffic's default class `1:ffff` (rate 1 % of the link, ceil =
//! the link, so that it borrows whatever is free). Per transfer and link, in the egress
//! direction of the transfer, the NIS adds
//!
//! - an HTB class `1:M` under `1:1`, `rate` = the reservation (scaled as the map says), `ceil`
//!   = the link: the reservation is guaranteed and the transfer may borrow what is idle;
//! - a `u32` filter at preference `M` that sends TCP from the sending site's endpoint address
//!   to the receiving site's, destination port [`crate::protocol::TrafficMarking::port`] of the
//!   hold, to `1:M`.
//!
//! `M` (16 bits, `2 ..= 0xfffe`) is derived from the hold id and probed past the minors taken
//! on that interface; class minor and filter preference being the same number, a rule is found
//! and deleted by it alone.
//!
//! - **Before a hold is durable** (`persist`) or committed, whichever comes first, the NIS
//!   checks that every interface of the path is shaped (has its `1:1`), and installs the rules
//!   if the window is open already: a data plane that refuses is the participant's refusal
//!   ([`ParticipantError::DataPlane`]), so no plan is answered committed on a network that cannot
//!   carry it.
//! - **The timer** ([`Nis::reconcile_dataplane`], run at every window boundary and every
//!   `sync_ms`): installs the rules of committed transfers whose window opened, removes those
//!   whose window closed, removes rules no live hold owns (strays: a crash, a failed delete),
//!   and re-installs a rule that vanished behind the NIS's back; such a transfer is *drift*
//!   ([`crate::protocol::Participant::drift`]): its plan is marked broken.
//! - **Abort, release (cancel)** remove the rules at once.
//!
//! `tc` is run as a program (`tc -n NETNS -batch -`, one process per namespace and operation):
//! HTB classes and u32 filters have no maintained netlink crate that covers them, and `tc` is
//! what an operator runs and reads. Filters are read back as JSON (`tc -j filter show`); HTB
//! classes are read from `tc class show`'s text (iproute2 6.1 prints no JSON for them): only the
//! handle is used.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::Nis;
use crate::model::{LinkId, SiteId, Time};
use crate::protocol::{Drift, HoldId, HoldLifecycle, HoldState, ParticipantError, TrafficMarking};

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
/// At most this many transfers' rules on one interface: each filter has a preference of its
/// own, and the kernel gives every u32 preference a hash table of its own out of 0x7ff per
/// qdisc (`gen_new_htid`), so about 2047 is the hard limit; a transfer beyond this one is
/// refused at admission (see docs/protocol.md, "The NIS's data plane": what it does not do yet).
pub const MAX_RULES_PER_INTERFACE: usize = 2000;

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
}

/// One link of the map.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct MapLink {
    /// The shaped capacity (kbit/s): the `ceil` of every class on it.
    pub capacity_kbit: u64,
    /// Per node id (the link's two ends): where its egress interface is.
    pub ends: HashMap<String, Interface>,
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

/// One installed rule: a class and its filter on one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub iface: Interface,
    pub minor: u16,
    pub rate_kbit: u64,
    pub ceil_kbit: u64,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub port: u16,
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
}

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

/// What one [`Nis::reconcile_dataplane`] did.
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

/// A data plane programmed with `tc`.
#[derive(Debug)]
pub struct TcPlane {
    config: DataplaneConfig,
    map: WanMap,
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
}

impl TcPlane {
    /// Reads the map of `config`.
    ///
    /// # Errors
    /// The map cannot be read or parsed.
    pub fn open(config: DataplaneConfig) -> Result<Self, DataplaneError> {
        let path = config.map.clone();
        let text =
            std::fs::read_to_string(&path).map_err(|source| DataplaneError::MapRead { path: path.clone(), source })?;
        let map: WanMap = serde_json::from_str(&text).map_err(|source| DataplaneError::MapParse { path, source })?;
        Ok(Self::with_map(config, map))
    }

    /// A plane over `map`.
    pub fn with_map(config: DataplaneConfig, map: WanMap) -> Self {
        TcPlane { config, map, st: Mutex::default(), op: tokio::sync::Mutex::new(()), stats: PlaneStats::default() }
    }

    pub fn config(&self) -> &DataplaneConfig {
        &self.config
    }

    pub fn map(&self) -> &WanMap {
        &self.map
    }

    fn st(&self) -> std::sync::MutexGuard<'_, PlaneState> {
        self.st.lock().expect("data plane state")
    }

    /// The marking of traffic from `from` to `to`, if both sites have an endpoint address.
    pub fn marking(&self, from: &SiteId, to: &SiteId) -> Option<TrafficMarking> {
        let (a, b) = (self.map.sites.get(from.as_str())?, self.map.sites.get(to.as_str())?);
        Some(TrafficMarking {
            from_addr: a.addr.to_string(),
            to_addr: b.addr.to_string(),
            port_base: self.config.port_base,
            port_span: self.config.port_span,
        })
    }

    /// Every interface of the map, sorted.
    fn interfaces(&self) -> Vec<Interface> {
        let mut v: Vec<Interface> = self.map.links.values().flat_map(|l| l.ends.values().cloned()).collect();
        v.sort();
        v.dedup();
        v
    }

    /// Runs `tc [-force] -n NETNS -batch -` with `lines` on its standard input.
    async fn batch(&self, netns: &str, lines: &[String], force: bool) -> Result<(), DataplaneError> {
        use tokio::io::AsyncWriteExt;
        let mut cmd = tokio::process::Command::new(&self.config.tc);
        if force {
            cmd.arg("-force");
        }
        cmd.args(["-n", netns, "-batch", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|source| self.spawn_error(source))?;
        let mut stdin = child.stdin.take().expect("piped");
        let input = lines.join("\n") + "\n";
        let run = async move {
            stdin.write_all(input.as_bytes()).await.map_err(DataplaneError::Io)?;
            drop(stdin);
            child.wait_with_output().await.map_err(DataplaneError::Io)
        };
        let out = tokio::time::timeout(TC_TIMEOUT, run).await.map_err(|_| DataplaneError::Timeout)??;
        if out.status.success() {
            Ok(())
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            let stderr = err.trim().lines().take(4).collect::<Vec<_>>().join("; ");
            Err(DataplaneError::Tc { command: format!("-n {netns}"), stderr })
        }
    }

    /// `tc` with `args`, its standard output.
    async fn read(&self, args: &[&str]) -> Result<String, DataplaneError> {
        let out = tokio::time::timeout(
            TC_TIMEOUT,
            tokio::process::Command::new(&self.config.tc).args(args).kill_on_drop(true).output(),
        )
        .await
        .map_err(|_| DataplaneError::Timeout)?
        .map_err(|source| self.spawn_error(source))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            Err(DataplaneError::Tc { command: args.join(" "), stderr })
        }
    }

    fn spawn_error(&self, source: std::io::Error) -> DataplaneError {
        DataplaneError::Spawn { tc: self.config.tc.clone(), source }
    }

    /// The minors of the HTB classes and the preferences of the filters on `iface` (only those
    /// in the NIS's range).
    async fn installed_on(&self, iface: &Interface) -> Result<(HashSet<u16>, HashSet<u16>, bool), DataplaneError> {
        let classes = self.read(&["-n", &iface.netns, "class", "show", "dev", &iface.dev]).await?;
        let mut minors = HashSet::new();
        let mut shaped = false;
        for line in classes.lines() {
            let mut w = line.split_whitespace();
            if (w.next(), w.next()) != (Some("class"), Some("htb")) {
                continue;
            }
            let Some(handle) = w.next() else { continue };
            let Some(minor) = handle.strip_prefix("1:").and_then(|m| u16::from_str_radix(m, 16).ok()) else {
                continue;
            };
            if minor == 1 {
                shaped = true;
            } else if (FIRST_MINOR..=LAST_MINOR).contains(&minor) {
                minors.insert(minor);
            }
        }
        let filters =
            self.read(&["-j", "-n", &iface.netns, "filter", "show", "dev", &iface.dev, "parent", "1:"]).await?;
        let mut prefs = HashSet::new();
        if !filters.trim().is_empty() {
            let v: Vec<serde_json::Value> = serde_json::from_str(&filters)
                .map_err(|source| DataplaneError::Filters { iface: iface.clone(), source })?;
            for f in v {
                if let Some(p) = f.get("pref").and_then(serde_json::Value::as_u64) {
                    if let Ok(p) = u16::try_from(p) {
                        if (FIRST_MINOR..=LAST_MINOR).contains(&p) {
                            prefs.insert(p);
                        }
                    }
                }
            }
        }
        Ok((minors, prefs, shaped))
    }

    fn install_lines(r: &Rule) -> Vec<String> {
        let (dev, m) = (&r.iface.dev, r.minor);
        vec![
            format!(
                "class replace dev {dev} parent 1:1 classid 1:{m:x} htb rate {}kbit ceil {}kbit quantum {QUANTUM}",
                r.rate_kbit, r.ceil_kbit
            ),
            format!(
                "filter add dev {dev} parent 1: protocol ip prio {m} u32 match ip protocol 6 0xff match ip src {}/32 match ip dst {}/32 match ip dport {} 0xffff flowid 1:{m:x}",
                r.src, r.dst, r.port
            ),
        ]
    }

    fn remove_lines(iface: &Interface, minor: u16) -> Vec<String> {
        vec![
            format!("filter del dev {} parent 1: prio {minor}", iface.dev),
            format!("class del dev {} classid 1:{minor:x}", iface.dev),
        ]
    }

    /// Installs `rules` (one batch per namespace).
    async fn install(&self, rules: &[Rule]) -> Result<(), DataplaneError> {
        let started = Instant::now();
        for (netns, lines) in by_netns(rules.iter().map(|r| (&r.iface, Self::install_lines(r)))) {
            self.batch(&netns, &lines, false).await?;
        }
        record(&self.stats.installs, &self.stats.install_us_sum, &self.stats.install_us_max, started);
        Ok(())
    }

    /// Removes the rules `(iface, minor)` (missing ones are no error).
    async fn remove(&self, rules: &[(Interface, u16)]) -> Result<(), DataplaneError> {
        if rules.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        let mut first = Ok(());
        for (netns, lines) in by_netns(rules.iter().map(|(i, m)| (i, Self::remove_lines(i, *m)))) {
            // -force: go on past a rule that is gone already; then check what is left.
            let _ = self.batch(&netns, &lines, true).await;
        }
        for iface in rules.iter().map(|(i, _)| i).collect::<HashSet<_>>() {
            match self.installed_on(iface).await {
                Ok((minors, prefs, _)) => {
                    if let Some((_, m)) =
                        rules.iter().find(|(i, m)| i == iface && (minors.contains(m) || prefs.contains(m)))
                    {
                        first = first.and(Err(DataplaneError::StillInstalled { iface: iface.clone(), minor: *m }));
                    }
                }
                Err(e) => first = first.and(Err(e)),
            }
        }
        record(&self.stats.removes, &self.stats.remove_us_sum, &self.stats.remove_us_max, started);
        first
    }
}

fn record(count: &AtomicU64, sum: &AtomicU64, max: &AtomicU64, started: Instant) {
    let us = started.elapsed().as_micros() as u64;
    count.fetch_add(1, Relaxed);
    sum.fetch_add(us, Relaxed);
    max.fetch_max(us, Relaxed);
}

fn by_netns<'a>(items: impl Iterator<Item = (&'a Interface, Vec<String>)>) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (iface, lines) in items {
        match out.iter_mut().find(|(n, _)| *n == iface.netns) {
            Some((_, l)) => l.extend(lines),
            None => out.push((iface.netns.clone(), lines)),
        }
    }
    out
}

/// A hold's first probe: derived from its id.
fn first_minor(hold: HoldId) -> u16 {
    let span = u128::from(LAST_MINOR - FIRST_MINOR + 1);
    FIRST_MINOR + (hold.as_uuid().as_u128() % span) as u16
}

impl Nis {
    /// This NIS programming `plane` (see the module docs). Call [`Nis::reconcile_dataplane`]
    /// before serving.
    pub fn with_dataplane(mut self, plane: TcPlane) -> Self {
        self.plane = Some(plane);
        self
    }

    /// The data plane, if any.
    pub fn dataplane(&self) -> Option<&TcPlane> {
        self.plane.as_ref()
    }

    /// Records the sites of a hold (prepare, restore) when the plane knows both, and the port
    /// it keeps, if any.
    pub(super) fn note_endpoints(&self, hold: HoldId, req: &crate::protocol::NetworkHoldRequest) {
        let (Some(plane), Some((a, b))) = (&self.plane, &req.sites) else { return };
        if plane.map.sites.contains_key(a.as_str()) && plane.map.sites.contains_key(b.as_str()) {
            let mut st = plane.st();
            st.endpoints.insert(hold, (a.clone(), b.clone()));
            if let Some(port) = req.port {
                st.ports.insert(hold, port);
            }
        }
    }

    /// The rules hold `hold` needs (without minors), its window and state; `None` when it has
    /// no endpoints or is not live.
    fn specs(&self, plane: &TcPlane, hold: HoldId) -> Option<Result<Needed, DataplaneError>> {
        let ((from, to), port) = {
            let st = plane.st();
            (st.endpoints.get(&hold).cloned()?, st.ports.get(&hold).copied())
        };
        let st = self.state();
        let (state, booked) = st.holds.get(hold)?;
        let spans = &booked.spans;
        let (a, b) = (&plane.map.sites[from.as_str()], &plane.map.sites[to.as_str()]);
        let marking = plane.marking(&from, &to)?;
        let mut node = a.node.clone();
        let mut out = Vec::new();
        let mut window = (0, 0);
        for &(l, span) in spans {
            let s = st.calendars[l].span(span)?;
            window = (s.start, s.end);
            let id = &self.links[l].id;
            let Some(link) = plane.map.links.get(id.as_str()) else {
                return Some(Err(DataplaneError::Unmapped { link: id.clone(), why: "is not".into() }));
            };
            let Some(iface) = link.ends.get(&node) else {
                return Some(Err(DataplaneError::Unmapped {
                    link: id.clone(),
                    why: format!("has no end at node `{node}`"),
                }));
            };
            out.push(Spec {
                iface: iface.clone(),
                rate_kbit: ((s.amount as f64) * plane.map.scale * 1000.0).round().max(1.0) as u64,
                ceil_kbit: link.capacity_kbit,
                src: a.addr,
                dst: b.addr,
                port: port.unwrap_or_else(|| marking.port(hold)),
            });
            node = link.ends.keys().find(|n| **n != node).cloned().unwrap_or(node);
        }
        if node != b.node && !out.is_empty() {
            return Some(Err(DataplaneError::PathEnd { site: to.clone(), node: b.node.to_string() }));
        }
        Some(Ok((out, window.0, window.1, state)))
    }

    /// Minors for `specs` of `hold`, taken in the plane's state.
    fn allocate(plane: &TcPlane, hold: HoldId, specs: Vec<Spec>) -> Result<Vec<Rule>, DataplaneError> {
        let r = Self::allocate_all(plane, hold, specs);
        if r.is_err() {
            // Nothing half-allocated.
            for used in plane.st().minors.values_mut() {
                used.retain(|_, h| *h != hold);
            }
        }
        r
    }

    fn allocate_all(plane: &TcPlane, hold: HoldId, specs: Vec<Spec>) -> Result<Vec<Rule>, DataplaneError> {
        let mut st = plane.st();
        let mut rules = Vec::with_capacity(specs.len());
        for s in specs {
            let used = st.minors.entry(s.iface.clone()).or_default();
            if used.len() >= MAX_RULES_PER_INTERFACE && !used.values().any(|h| *h == hold) {
                return Err(DataplaneError::Full(s.iface.clone()));
            }
            let mut m = first_minor(hold);
            let mut tries = 0u32;
            while used.get(&m).is_some_and(|h| *h != hold) {
                m = if m == LAST_MINOR { FIRST_MINOR } else { m + 1 };
                tries += 1;
                if tries > u32::from(LAST_MINOR - FIRST_MINOR) {
                    return Err(DataplaneError::NoFreeClass(s.iface.clone()));
                }
            }
            used.insert(m, hold);
            rules.push(Rule {
                iface: s.iface,
                minor: m,
                rate_kbit: s.rate_kbit,
                ceil_kbit: s.ceil_kbit,
                src: s.src,
                dst: s.dst,
                port: s.port,
            });
        }
        Ok(rules)
    }

    fn forget(plane: &TcPlane, hold: HoldId) -> Vec<Rule> {
        let mut st = plane.st();
        let rules = st.installed.remove(&hold).unwrap_or_default();
        for r in &rules {
            if let Some(m) = st.minors.get_mut(&r.iface) {
                if m.get(&r.minor) == Some(&hold) {
                    m.remove(&r.minor);
                }
            }
        }
        rules
    }

    /// Installs `hold`'s rules (minors allocated now), recording them.
    async fn install_hold(&self, plane: &TcPlane, hold: HoldId, specs: Vec<Spec>) -> Result<(), DataplaneError> {
        let rules = Self::allocate(plane, hold, specs)?;
        let r = plane.install(&rules).await;
        match r {
            Ok(()) => {
                plane.st().installed.insert(hold, rules);
                Ok(())
            }
            Err(e) => {
                // Leave nothing half-installed.
                let _ = plane.remove(&rules.iter().map(|r| (r.iface.clone(), r.minor)).collect::<Vec<_>>()).await;
                let mut st = plane.st();
                for r in &rules {
                    if let Some(m) = st.minors.get_mut(&r.iface) {
                        m.remove(&r.minor);
                    }
                }
                Err(e)
            }
        }
    }

    /// Before a hold is durable or committed: every interface of its path must be shaped, and a
    /// window already open is installed now (see the module docs).
    ///
    /// # Errors
    /// [`ParticipantError::DataPlane`] naming what refused.
    pub(super) async fn admit(&self, holds: &[HoldId]) -> Result<(), ParticipantError> {
        let Some(plane) = &self.plane else { return Ok(()) };
        let _op = plane.op.lock().await;
        let now = self.clock.now();
        for &hold in holds {
            let Some(specs) = self.specs(plane, hold) else { continue };
            let refuse = |e: DataplaneError| {
                plane.stats.refused.fetch_add(1, Relaxed);
                tracing::warn!(%hold, error = %e, "data plane refused a transfer");
                ParticipantError::DataPlane(e.to_string())
            };
            let (specs, start, end, _) = specs.map_err(refuse)?;
            for iface in specs.iter().map(|s| &s.iface).collect::<HashSet<_>>() {
                let (_, _, shaped) = plane.installed_on(iface).await.map_err(refuse)?;
                if !shaped {
                    return Err(refuse(DataplaneError::Unshaped(iface.clone())));
                }
            }
            // A replacement's rules wait for its commit: until then the reservation it
            // replaces keeps its rules for the same traffic (see `Nis::commit`).
            if self.replaced_by(hold).is_some() {
                continue;
            }
            plane.st().admitted.insert(hold);
            if start <= now && now < end && !plane.st().installed.contains_key(&hold) {
                self.install_hold(plane, hold, specs).await.map_err(refuse)?;
                plane.stats.opened.fetch_add(1, Relaxed);
            }
        }
        Ok(())
    }

    /// Removes `hold`'s rules (abort, release); a failure leaves strays for the next
    /// reconciliation.
    pub(super) async fn withdraw(&self, hold: HoldId) {
        let Some(plane) = &self.plane else { return };
        let _op = plane.op.lock().await;
        let rules = Self::forget(plane, hold);
        {
            let mut st = plane.st();
            st.admitted.remove(&hold);
            st.broken.remove(&hold);
            st.endpoints.remove(&hold);
            st.ports.remove(&hold);
        }
        if let Err(e) = plane.remove(&rules.iter().map(|r| (r.iface.clone(), r.minor)).collect::<Vec<_>>()).await {
            tracing::warn!(%hold, error = %e, "data plane rules not removed; the next reconciliation removes them");
        }
    }

    /// Committed transfers whose rules vanished behind the NIS's back (see the module docs).
    pub fn dataplane_drift(&self) -> Vec<Drift> {
        let Some(plane) = &self.plane else { return vec![] };
        let st = plane.st();
        let mut out: Vec<Drift> = st
            .broken
            .iter()
            .map(|(&hold, reason)| Drift { hold, reservation: format!("transfer {hold}"), reason: reason.clone() })
            .collect();
        out.sort_by_key(|d| d.hold);
        out
    }

    /// The rules installed for `hold` now (tests, diagnostics).
    pub fn dataplane_rules(&self, hold: HoldId) -> Vec<Rule> {
        self.plane.as_ref().and_then(|p| p.st().installed.get(&hold).cloned()).unwrap_or_default()
    }

    /// The next window boundary after `now` among the live holds with endpoints (the timer
    /// wakes then).
    pub fn next_dataplane_boundary(&self, now: Time) -> Option<Time> {
        let plane = self.plane.as_ref()?;
        let holds: Vec<HoldId> = plane.st().endpoints.keys().copied().collect();
        let st = self.state();
        holds
            .into_iter()
            .filter_map(|h| {
                let (_, booked) = st.holds.get(h)?;
                let first = booked.spans.first()?;
                let s = st.calendars[first.0].span(first.1)?;
                [s.start, s.end].into_iter().filter(|&t| t > now).min()
            })
            .min()
    }

    /// One reconciliation of the data plane with the hold book, both ways (see the module
    /// docs). Returns what it did.
    ///
    /// # Errors
    /// An interface could not be read: nothing was removed (installs may have happened).
    pub async fn reconcile_dataplane(&self) -> Result<ReconcileReport, DataplaneError> {
        let Some(plane) = &self.plane else { return Ok(ReconcileReport::default()) };
        let started = Instant::now();
        let r = self.reconcile_inner(plane).await;
        plane.stats.reconcile_us_last.store(started.elapsed().as_micros() as u64, Relaxed);
        match &r {
            Ok(rep) => {
                plane.stats.reconciles_ok.fetch_add(1, Relaxed);
                plane.stats.opened.fetch_add(rep.opened as u64, Relaxed);
                plane.stats.closed.fetch_add(rep.closed as u64, Relaxed);
                plane.stats.reinstalled.fetch_add(rep.reinstalled as u64, Relaxed);
                plane.stats.strays_removed.fetch_add(rep.strays_removed as u64, Relaxed);
                if (rep.opened, rep.closed, rep.reinstalled, rep.strays_removed) != (0, 0, 0, 0) {
                    tracing::info!(?rep, "data plane reconciled");
                }
            }
            Err(e) => {
                plane.stats.reconciles_failed.fetch_add(1, Relaxed);
                tracing::warn!(error = %e, "data plane reconciliation failed");
            }
        }
        r
    }

    async fn reconcile_inner(&self, plane: &TcPlane) -> Result<ReconcileReport, DataplaneError> {
        let _op = plane.op.lock().await;
        let now = self.clock.now();
        let mut rep = ReconcileReport::default();
        // What should be installed now: committed (or admitted) transfers with an open window.
        let holds: Vec<HoldId> = plane.st().endpoints.keys().copied().collect();
        let mut wanted: HashMap<HoldId, Vec<Spec>> = HashMap::new();
        let mut live: HashSet<HoldId> = HashSet::new();
        for hold in holds {
            match self.specs(plane, hold) {
                None => {}
                Some(Err(e)) => tracing::warn!(%hold, error = %e, "transfer not on the data plane"),
                Some(Ok((specs, start, end, state))) => {
                    live.insert(hold);
                    let go = matches!(state, HoldState::Committed) || plane.st().admitted.contains(&hold);
                    if go && start <= now && now < end {
                        wanted.insert(hold, specs);
                    }
                }
            }
        }
        // Endpoints of holds that ended.
        {
            let mut st = plane.st();
            st.endpoints.retain(|h, _| live.contains(h));
            st.ports.retain(|h, _| live.contains(h));
        }
        // What is on the interfaces.
        let mut on: HashMap<Interface, (HashSet<u16>, HashSet<u16>)> = HashMap::new();
        for iface in plane.interfaces() {
            let (minors, prefs, _) = plane.installed_on(&iface).await?;
            on.insert(iface, (minors, prefs));
        }
        // Installed by us and no longer wanted: the window closed, or the hold ended.
        let ours: Vec<HoldId> = plane.st().installed.keys().copied().collect();
        let mut closing: Vec<(Interface, u16)> = Vec::new();
        for hold in ours {
            if wanted.contains_key(&hold) {
                continue;
            }
            let rules = Self::forget(plane, hold);
            if !live.contains(&hold) {
                let mut st = plane.st();
                st.admitted.remove(&hold);
                st.broken.remove(&hold);
            }
            for r in &rules {
                if let Some((m, p)) = on.get_mut(&r.iface) {
                    m.remove(&r.minor);
                    p.remove(&r.minor);
                }
            }
            closing.extend(rules.into_iter().map(|r| (r.iface, r.minor)));
            rep.closed += 1;
        }
        // All in one batch per namespace; what fails to go is a stray for the next round.
        if let Err(e) = plane.remove(&closing).await {
            tracing::warn!(error = %e, "closed windows' rules not all removed; the next reconciliation removes them");
        }
        // Wanted: installed and intact, vanished (drift: install again), or not yet installed.
        let mut wanted: Vec<(HoldId, Vec<Spec>)> = wanted.into_iter().collect();
        wanted.sort_by_key(|(h, _)| *h);
        let mut fresh: Vec<(HoldId, Vec<Spec>)> = Vec::new();
        for (hold, specs) in wanted {
            let have = plane.st().installed.get(&hold).cloned();
            match have {
                Some(rules) => {
                    let missing: Vec<&Rule> = rules
                        .iter()
                        .filter(|r| {
                            on.get(&r.iface).is_none_or(|(m, p)| !m.contains(&r.minor) || !p.contains(&r.minor))
                        })
                        .collect();
                    if missing.is_empty() {
                        rep.active += 1;
                        continue;
                    }
                    let reason = format!(
                        "the data plane lost its guaranteed rate on {} (class or filter 1:{:x} removed behind the NIS); installed again",
                        missing.iter().map(|r| r.iface.to_string()).collect::<Vec<_>>().join(", "),
                        missing[0].minor
                    );
                    tracing::warn!(%hold, %reason, "data plane drift");
                    let committed = matches!(self.state().holds.get(hold), Some((HoldState::Committed, _)));
                    if committed {
                        plane.st().broken.entry(hold).or_insert(reason);
                    }
                    // Remove what is left of it, then install it whole again.
                    let rest: Vec<(Interface, u16)> = rules.iter().map(|r| (r.iface.clone(), r.minor)).collect();
                    let _ = plane.remove(&rest).await;
                    Self::forget(plane, hold);
                    match self.install_hold(plane, hold, specs).await {
                        Ok(()) => {
                            rep.reinstalled += 1;
                            rep.active += 1;
                        }
                        Err(e) => tracing::warn!(%hold, error = %e, "could not install again; next round"),
                    }
                }
                None => fresh.push((hold, specs)),
            }
        }
        // Never installed by this process (the window opened; or a restart): one batch per
        // namespace for all of them, else one transfer at a time.
        if !fresh.is_empty() {
            let mut all = Vec::new();
            let mut per_hold = Vec::new();
            for (hold, specs) in fresh {
                match Self::allocate(plane, hold, specs.clone()) {
                    Ok(rules) => {
                        all.extend(rules.iter().cloned());
                        per_hold.push((hold, specs, rules));
                    }
                    Err(e) => {
                        tracing::warn!(%hold, error = %e, "could not install a transfer whose window is open");
                        if matches!(self.state().holds.get(hold), Some((HoldState::Committed, _))) {
                            plane
                                .st()
                                .broken
                                .entry(hold)
                                .or_insert_with(|| format!("its guaranteed rate could not be installed: {e}"));
                        }
                    }
                }
            }
            let together = plane.install(&all).await;
            for (hold, specs, rules) in per_hold {
                let ok = match &together {
                    Ok(()) => {
                        plane.st().installed.insert(hold, rules);
                        true
                    }
                    Err(_) => {
                        // Give the minors back and try this one alone.
                        {
                            let mut st = plane.st();
                            for r in &rules {
                                if let Some(m) = st.minors.get_mut(&r.iface) {
                                    m.remove(&r.minor);
                                }
                            }
                        }
                        let _ =
                            plane.remove(&rules.iter().map(|r| (r.iface.clone(), r.minor)).collect::<Vec<_>>()).await;
                        match self.install_hold(plane, hold, specs).await {
                            Ok(()) => true,
                            Err(e) => {
                                tracing::warn!(%hold, error = %e, "could not install a transfer whose window is open; next round");
                                if matches!(self.state().holds.get(hold), Some((HoldState::Committed, _))) {
                                    plane
                                        .st()
                                        .broken
                                        .entry(hold)
                                        .or_insert_with(|| format!("its guaranteed rate could not be installed: {e}"));
                                }
                                false
                            }
                        }
                    }
                };
                if ok {
                    rep.opened += 1;
                    rep.active += 1;
                    // Taken now: not a stray.
                    for r in plane.st().installed.get(&hold).into_iter().flatten() {
                        if let Some((m, p)) = on.get_mut(&r.iface) {
                            m.remove(&r.minor);
                            p.remove(&r.minor);
                        }
                    }
                }
            }
        }
        // What is left in the NIS's range on an interface and owned by no installed rule.
        let owned: HashSet<(Interface, u16)> =
            plane.st().installed.values().flatten().map(|r| (r.iface.clone(), r.minor)).collect();
        let mut strays = Vec::new();
        for (iface, (minors, prefs)) in on {
            for m in minors.union(&prefs) {
                if !owned.contains(&(iface.clone(), *m)) {
                    strays.push((iface.clone(), *m));
                }
            }
        }
        strays.sort();
        if !strays.is_empty() {
            rep.strays_removed = strays.len();
            plane.remove(&strays).await?;
        }
        Ok(rep)
    }

    /// The data plane's lines of `/metrics` (empty without a data plane).
    pub fn dataplane_metrics(&self) -> String {
        use std::fmt::Write;
        let Some(plane) = &self.plane else { return String::new() };
        let s = &plane.stats;
        let g = |a: &AtomicU64| a.load(Relaxed);
        let installed: usize = plane.st().installed.len();
        let rules: usize = plane.st().installed.values().map(Vec::len).sum();
        let broken = plane.st().broken.len();
        let mut o = String::new();
        let _ = writeln!(o, "# HELP coreserve_dataplane_installs_total Transfers whose rules were installed (tc batches), with their time.");
        let _ = writeln!(o, "# TYPE coreserve_dataplane_installs_total counter");
        let _ = writeln!(o, "coreserve_dataplane_installs_total {}", g(&s.installs));
        let _ = writeln!(o, "coreserve_dataplane_install_seconds_sum {}", g(&s.install_us_sum) as f64 / 1e6);
        let _ = writeln!(o, "coreserve_dataplane_install_seconds_max {}", g(&s.install_us_max) as f64 / 1e6);
        let _ = writeln!(o, "# TYPE coreserve_dataplane_removes_total counter");
        let _ = writeln!(o, "coreserve_dataplane_removes_total {}", g(&s.removes));
        let _ = writeln!(o, "coreserve_dataplane_remove_seconds_sum {}", g(&s.remove_us_sum) as f64 / 1e6);
        let _ = writeln!(o, "coreserve_dataplane_remove_seconds_max {}", g(&s.remove_us_max) as f64 / 1e6);
        let _ = writeln!(o, "# HELP coreserve_dataplane_reconciled_total What reconciliation did: windows opened and closed, rules installed again (drift), strays removed.");
        let _ = writeln!(o, "# TYPE coreserve_dataplane_reconciled_total counter");
        for (action, v) in [
            ("opened", &s.opened),
            ("closed", &s.closed),
            ("reinstalled", &s.reinstalled),
            ("stray_removed", &s.strays_removed),
        ] {
            let _ = writeln!(o, "coreserve_dataplane_reconciled_total{{action=\"{action}\"}} {}", g(v));
        }
        let _ = writeln!(o, "# TYPE coreserve_dataplane_reconciles_total counter");
        let _ = writeln!(o, "coreserve_dataplane_reconciles_total{{result=\"ok\"}} {}", g(&s.reconciles_ok));
        let _ = writeln!(o, "coreserve_dataplane_reconciles_total{{result=\"failed\"}} {}", g(&s.reconciles_failed));
        let _ = writeln!(o, "coreserve_dataplane_reconcile_seconds_last {}", g(&s.reconcile_us_last) as f64 / 1e6);
        let _ = writeln!(o, "# TYPE coreserve_dataplane_refused_total counter");
        let _ = writeln!(o, "coreserve_dataplane_refused_total {}", g(&s.refused));
        let _ =
            writeln!(o, "# HELP coreserve_dataplane_transfers Transfers installed now, their rules, and broken ones.");
        let _ = writeln!(o, "# TYPE coreserve_dataplane_transfers gauge");
        let _ = writeln!(o, "coreserve_dataplane_transfers {installed}");
        let _ = writeln!(o, "coreserve_dataplane_rules {rules}");
        let _ = writeln!(o, "coreserve_dataplane_broken_transfers {broken}");
        o
    }
}
