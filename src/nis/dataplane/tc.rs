//! Running `tc`: one `tc -n NETNS -batch -` per namespace and operation, the rules' lines, and
//! reading back what an interface carries (see the parent module's docs).

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Instant;

use super::{
    DataplaneConfig, DataplaneError, Direction, Interface, PathSteering, PlaneState, PlaneStats, RouteRule, Rule,
    TcPlane, WanMap, FILTER_HT, FILTER_PREF, FIRST_MINOR, LAST_MINOR, QUANTUM, STEERING_PREF, TC_TIMEOUT,
};
use crate::model::{LinkId, SiteId};
use crate::protocol::{HoldId, TrafficMarking};

impl TcPlane {
    /// Reads the map of `config`.
    ///
    /// # Errors
    /// The map cannot be read or parsed.
    pub fn open(config: DataplaneConfig) -> Result<Self, DataplaneError> {
        let path = config.map.clone();
        let text =
            std::fs::read_to_string(&path).map_err(|source| DataplaneError::MapRead { path: path.clone(), source })?;
        let map: WanMap =
            serde_json::from_str(&text).map_err(|source| DataplaneError::MapParse { path: path.clone(), source })?;
        let plane = Self::with_map(config, map);
        if !plane.steers() && plane.map.routes.is_empty() {
            return Err(DataplaneError::NoRouting { path });
        }
        Ok(plane)
    }

    /// A plane over `map`. Says (in the log) whether it steers: if not, the NIS books only the
    /// routed paths.
    pub fn with_map(config: DataplaneConfig, map: WanMap) -> Self {
        let steers = config.steering
            && !map.links.is_empty()
            && map.links.values().all(|l| l.ends.keys().all(|n| l.tables.contains_key(n)));
        let plane = TcPlane {
            config,
            map,
            steers,
            st: Mutex::default(),
            op: tokio::sync::Mutex::new(()),
            stats: PlaneStats::default(),
        };
        if plane.steers() {
            tracing::info!("data plane: each transfer is forwarded along its booked path (policy routing)");
        } else {
            let why = if plane.config.steering { "the map has no routing tables" } else { "rate-only mode" };
            tracing::warn!(
                "data plane cannot steer ({why}): the NIS books only the paths the network routes (the map's routes)"
            );
        }
        plane
    }

    pub fn config(&self) -> &DataplaneConfig {
        &self.config
    }

    pub fn map(&self) -> &WanMap {
        &self.map
    }

    pub(super) fn st(&self) -> std::sync::MutexGuard<'_, PlaneState> {
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

    /// The routing table of `link`'s end at `node`, when steering.
    pub(super) fn table(&self, link: &str, node: &str) -> Option<u32> {
        if !self.steers() {
            return None;
        }
        self.map.links.get(link)?.tables.get(node).copied()
    }

    /// Every namespace that holds an end of a link, sorted.
    pub(super) fn namespaces(&self) -> Vec<String> {
        let mut v: Vec<String> = self.interfaces().into_iter().map(|i| i.netns).collect();
        v.dedup();
        v
    }

    /// Every interface of the map, sorted.
    pub(super) fn interfaces(&self) -> Vec<Interface> {
        let mut v: Vec<Interface> = self.map.links.values().flat_map(|l| l.ends.values().cloned()).collect();
        v.sort();
        v.dedup();
        v
    }

    /// Runs `tc` (or, with `ip`, `ip`) `[-force] -n NETNS -batch -` with `lines` on its
    /// standard input.
    pub(super) async fn batch(&self, netns: &str, lines: &[String], force: bool) -> Result<(), DataplaneError> {
        self.batch_of(false, netns, lines, force).await
    }

    async fn batch_of(&self, ip: bool, netns: &str, lines: &[String], force: bool) -> Result<(), DataplaneError> {
        use tokio::io::AsyncWriteExt;
        if lines.is_empty() {
            return Ok(());
        }
        let mut cmd = tokio::process::Command::new(if ip { &self.config.ip } else { &self.config.tc });
        if force {
            cmd.arg("-force");
        }
        cmd.args(["-n", netns, "-batch", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|source| self.spawn_error_of(ip, source))?;
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
            let command = format!("-n {netns}");
            Err(if ip { DataplaneError::Ip { command, stderr } } else { DataplaneError::Tc { command, stderr } })
        }
    }

    /// `tc` (or, with `ip`, `ip`) with `args`, its standard output.
    async fn read_of(&self, ip: bool, args: &[&str]) -> Result<String, DataplaneError> {
        let program = if ip { &self.config.ip } else { &self.config.tc };
        let out = tokio::time::timeout(
            TC_TIMEOUT,
            tokio::process::Command::new(program).args(args).kill_on_drop(true).output(),
        )
        .await
        .map_err(|_| DataplaneError::Timeout)?
        .map_err(|source| self.spawn_error_of(ip, source))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            let command = args.join(" ");
            Err(if ip { DataplaneError::Ip { command, stderr } } else { DataplaneError::Tc { command, stderr } })
        }
    }

    /// `tc` with `args`, its standard output.
    pub(super) async fn read(&self, args: &[&str]) -> Result<String, DataplaneError> {
        self.read_of(false, args).await
    }

    fn spawn_error_of(&self, ip: bool, source: std::io::Error) -> DataplaneError {
        if ip {
            DataplaneError::SpawnIp { ip: self.config.ip.clone(), source }
        } else {
            DataplaneError::Spawn { tc: self.config.tc.clone(), source }
        }
    }

    /// What `iface` carries in the NIS's range: the minors of the HTB classes, the u32 filters of
    /// the NIS's table (handle -> class minor), whether it is shaped (`1:1`) and whether the
    /// NIS's hashed table is there (and linked). Remembers the latter for the next install.
    pub(super) async fn installed_on(&self, iface: &Interface) -> Result<OnInterface, DataplaneError> {
        let classes = self.read(&["-n", &iface.netns, "class", "show", "dev", &iface.dev]).await?;
        let mut on = OnInterface::default();
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
                on.shaped = true;
            } else if (FIRST_MINOR..=LAST_MINOR).contains(&minor) {
                on.minors.insert(minor);
            }
        }
        let pref = FILTER_PREF.to_string();
        let filters = self
            .read(&["-j", "-n", &iface.netns, "filter", "show", "dev", &iface.dev, "parent", "1:", "prio", &pref])
            .await;
        // No filter at that preference: tc says so on stderr with some versions.
        let filters = filters.unwrap_or_default();
        if !filters.trim().is_empty() {
            let v: Vec<serde_json::Value> = serde_json::from_str(&filters)
                .map_err(|source| DataplaneError::Filters { iface: iface.clone(), source })?;
            let table = format!("{FILTER_HT:x}:");
            for f in v {
                let Some(o) = f.get("options") else { continue };
                let fh = o.get("fh").and_then(serde_json::Value::as_str).unwrap_or_default();
                if fh == table {
                    on.hashed.0 = true;
                } else if o.get("link").and_then(serde_json::Value::as_str) == Some(&table) {
                    on.hashed.1 = true;
                } else if fh.starts_with(&table) {
                    let minor = o
                        .get("flowid")
                        .and_then(serde_json::Value::as_str)
                        .and_then(|c| c.strip_prefix("1:"))
                        .and_then(|m| u16::from_str_radix(m, 16).ok())
                        .unwrap_or(0);
                    on.filters.insert(fh.to_owned(), minor);
                }
            }
        }
        self.st().hashed.insert(iface.clone(), on.hashed);
        Ok(on)
    }

    /// The NIS's routing rules (at [`STEERING_PREF`]) in `netns`.
    pub(super) async fn routes_in(&self, netns: &str) -> Result<HashSet<RouteRule>, DataplaneError> {
        let pref = STEERING_PREF.to_string();
        let text = self.read_of(true, &["-j", "-n", netns, "rule", "show", "pref", &pref]).await?;
        let mut out = HashSet::new();
        if text.trim().is_empty() {
            return Ok(out);
        }
        let v: Vec<serde_json::Value> =
            serde_json::from_str(&text).map_err(|source| DataplaneError::Rules { netns: netns.to_owned(), source })?;
        for r in v {
            let s = |k: &str| r.get(k).and_then(serde_json::Value::as_str).map(str::to_owned);
            let addr = |k: &str| s(k).and_then(|a| a.parse::<Ipv4Addr>().ok());
            let table = s("table").and_then(|t| t.parse::<u32>().ok());
            let port = |k: &str| r.get(k).and_then(serde_json::Value::as_u64).and_then(|p| u16::try_from(p).ok());
            let port = match (port("dport"), port("sport")) {
                (Some(p), None) => Some((p, Direction::Forward)),
                (None, Some(p)) => Some((p, Direction::Return)),
                _ => None,
            };
            if let (Some(src), Some(dst), Some((port, direction)), Some(table)) =
                (addr("src"), addr("dst"), port, table)
            {
                out.insert(RouteRule { netns: netns.to_owned(), src, dst, port, direction, table });
            } else {
                // Not of the NIS's form: a stray all the same, deleted by what it says.
                tracing::debug!(rule = %r, "a routing rule at the NIS's preference of another form");
            }
        }
        Ok(out)
    }

    /// The lines making the NIS's hashed u32 table on `iface`, if what it carries (`hashed`:
    /// the table, its link) lacks them.
    fn table_lines(iface: &Interface, hashed: (bool, bool)) -> Vec<String> {
        let (dev, p, ht) = (&iface.dev, FILTER_PREF, FILTER_HT);
        let mut out = Vec::new();
        if !hashed.0 {
            out.push(format!("filter add dev {dev} parent 1: prio {p} handle {ht:x}: protocol ip u32 divisor 256"));
        }
        if !hashed.1 {
            // Hash on the low byte of the TCP destination port (offset 20: IP header without
            // options, as `match ip dport` assumes).
            out.push(format!(
                "filter add dev {dev} parent 1: prio {p} protocol ip u32 match ip protocol 6 0xff hashkey mask 0x000000ff at 20 link {ht:x}:"
            ));
        }
        out
    }

    pub(super) fn install_lines(r: &Rule) -> Vec<String> {
        let (dev, m, p) = (&r.iface.dev, r.minor, FILTER_PREF);
        vec![
            format!(
                "class replace dev {dev} parent 1:1 classid 1:{m:x} htb rate {}kbit ceil {}kbit quantum {QUANTUM}",
                r.rate_kbit, r.ceil_kbit
            ),
            format!(
                "filter add dev {dev} parent 1: prio {p} handle {h} protocol ip u32 ht {ht:x}:{b:x}: match ip protocol 6 0xff match ip src {}/32 match ip dst {}/32 match ip dport {} 0xffff flowid 1:{m:x}",
                r.src,
                r.dst,
                r.port,
                h = r.filter_handle(),
                ht = FILTER_HT,
                b = r.port & 0xff,
            ),
        ]
    }

    /// The `ip -batch` line that adds (`verb` `add`) or deletes (`del`) routing rule `r`.
    pub(super) fn route_line(verb: &str, r: &RouteRule) -> String {
        format!(
            "rule {verb} pref {STEERING_PREF} from {}/32 to {}/32 ipproto tcp {} {} table {}",
            r.src,
            r.dst,
            r.direction.selector(),
            r.port,
            r.table
        )
    }

    /// Installs `rules` (one `tc` batch per namespace: the classes and filters), then the
    /// routing rules `routes` (one `ip` batch per namespace): a packet is steered onto a link
    /// only once its class is there.
    pub(super) async fn install(&self, rules: &[Rule], routes: &[RouteRule]) -> Result<(), DataplaneError> {
        let started = Instant::now();
        // The NIS's filter table first, where an interface lacks it.
        let mut tables: Vec<(&Interface, Vec<String>)> = Vec::new();
        {
            let st = self.st();
            for iface in rules.iter().map(|r| &r.iface).collect::<std::collections::BTreeSet<_>>() {
                let hashed = st.hashed.get(iface).copied().unwrap_or((false, false));
                let lines = Self::table_lines(iface, hashed);
                if !lines.is_empty() {
                    tables.push((iface, lines));
                }
            }
        }
        let made: Vec<Interface> = tables.iter().map(|(i, _)| (*i).clone()).collect();
        let items = tables.into_iter().chain(rules.iter().map(|r| (&r.iface, Self::install_lines(r))));
        for (netns, lines) in by_netns(items) {
            self.batch(&netns, &lines, false).await?;
        }
        {
            let mut st = self.st();
            for i in made {
                st.hashed.insert(i, (true, true));
            }
        }
        for (netns, lines) in by_netns_routes(routes.iter().map(|r| (r, Self::route_line("add", r)))) {
            self.batch_of(true, &netns, &lines, false).await?;
        }
        record(&self.stats.installs, &self.stats.install_us_sum, &self.stats.install_us_max, started);
        Ok(())
    }

    /// Removes what `doomed` names (missing ones are no error): routing rules first, then
    /// filters and classes; then reads back that they are gone.
    pub(super) async fn remove(&self, doomed: &Doomed) -> Result<(), DataplaneError> {
        if doomed.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        let mut first = Ok(());
        for (netns, lines) in by_netns_routes(doomed.routes.iter().map(|r| (r, Self::route_line("del", r)))) {
            // -force: go on past a rule that is gone already; then check what is left.
            let _ = self.batch_of(true, &netns, &lines, true).await;
        }
        let filter_lines = doomed.filters.iter().map(|(i, h)| {
            (i, vec![format!("filter del dev {} parent 1: prio {FILTER_PREF} handle {h} protocol ip u32", i.dev)])
        });
        let class_lines =
            doomed.classes.iter().map(|(i, m)| (i, vec![format!("class del dev {} classid 1:{m:x}", i.dev)]));
        for (netns, lines) in by_netns(filter_lines.chain(class_lines)) {
            let _ = self.batch(&netns, &lines, true).await;
        }
        let ifaces: HashSet<&Interface> =
            doomed.classes.iter().map(|(i, _)| i).chain(doomed.filters.iter().map(|(i, _)| i)).collect();
        for iface in ifaces {
            match self.installed_on(iface).await {
                Ok(on) => {
                    if let Some((_, m)) = doomed.classes.iter().find(|(i, m)| i == iface && on.minors.contains(m)) {
                        first = first.and(Err(DataplaneError::StillInstalled { iface: iface.clone(), minor: *m }));
                    }
                    if let Some((_, h)) = doomed.filters.iter().find(|(i, h)| i == iface && on.filters.contains_key(h))
                    {
                        let minor = on.filters[h];
                        first = first.and(Err(DataplaneError::StillInstalled { iface: iface.clone(), minor }));
                    }
                }
                Err(e) => first = first.and(Err(e)),
            }
        }
        for netns in doomed.routes.iter().map(|r| &r.netns).collect::<HashSet<_>>() {
            match self.routes_in(netns).await {
                Ok(left) => {
                    if let Some(r) = doomed.routes.iter().find(|r| left.contains(r)) {
                        first = first.and(Err(DataplaneError::RouteStillInstalled(r.clone())));
                    }
                }
                Err(e) => first = first.and(Err(e)),
            }
        }
        record(&self.stats.removes, &self.stats.remove_us_sum, &self.stats.remove_us_max, started);
        first
    }
}

/// What one interface carries in the NIS's range (see [`TcPlane::installed_on`]).
#[derive(Debug, Default, Clone)]
pub(super) struct OnInterface {
    pub minors: HashSet<u16>,
    /// u32 filter handle -> the class minor it sends to.
    pub filters: HashMap<String, u16>,
    pub shaped: bool,
    /// The NIS's hashed table, and the filter linking to it.
    pub hashed: (bool, bool),
}

/// Rules to delete (see [`TcPlane::remove`]).
#[derive(Debug, Default, Clone)]
pub(super) struct Doomed {
    pub classes: Vec<(Interface, u16)>,
    pub filters: Vec<(Interface, String)>,
    pub routes: Vec<RouteRule>,
}

impl Doomed {
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty() && self.filters.is_empty() && self.routes.is_empty()
    }

    /// A rule's class and filter (its routing rule is shared: see `Nis::forget`).
    pub fn add_rule(&mut self, r: &Rule) {
        self.classes.push((r.iface.clone(), r.minor));
        self.filters.push((r.iface.clone(), r.filter_handle()));
    }

    pub fn extend(&mut self, other: Doomed) {
        self.classes.extend(other.classes);
        self.filters.extend(other.filters);
        self.routes.extend(other.routes);
    }
}

pub(super) fn by_netns_routes<'a>(items: impl Iterator<Item = (&'a RouteRule, String)>) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (r, line) in items {
        match out.iter_mut().find(|(n, _)| *n == r.netns) {
            Some((_, l)) => l.push(line),
            None => out.push((r.netns.clone(), vec![line])),
        }
    }
    out
}

pub(super) fn record(count: &AtomicU64, sum: &AtomicU64, max: &AtomicU64, started: Instant) {
    let us = started.elapsed().as_micros() as u64;
    count.fetch_add(1, Relaxed);
    sum.fetch_add(us, Relaxed);
    max.fetch_max(us, Relaxed);
}

pub(super) fn by_netns<'a>(items: impl Iterator<Item = (&'a Interface, Vec<String>)>) -> Vec<(String, Vec<String>)> {
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
pub(super) fn first_minor(hold: HoldId) -> u16 {
    let span = u128::from(LAST_MINOR - FIRST_MINOR + 1);
    FIRST_MINOR + (hold.as_uuid().as_u128() % span) as u16
}

impl PathSteering for TcPlane {
    /// Steering was asked for and every link end of the map has its routing table.
    fn steers(&self) -> bool {
        self.steers
    }

    fn routed_path(&self, from: &str, to: &str) -> Option<Vec<LinkId>> {
        let mut path = Vec::new();
        let mut node = from.to_owned();
        while node != to {
            let link = self.map.routes.get(&node)?.get(to)?;
            let l = self.map.links.get(link)?;
            node = l.ends.keys().find(|n| **n != node)?.clone();
            path.push(LinkId::from(link.as_str()));
            if path.len() > self.map.links.len() {
                return None; // a routing loop
            }
        }
        Some(path)
    }
}
