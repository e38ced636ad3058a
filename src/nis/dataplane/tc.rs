//! Running `tc`: one `tc -n NETNS -batch -` per namespace and operation, the rules' lines, and
//! reading back what an interface carries (see the parent module's docs).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Instant;

use super::{
    DataplaneConfig, DataplaneError, Interface, PlaneState, PlaneStats, Rule, TcPlane, WanMap, FIRST_MINOR, LAST_MINOR,
    QUANTUM, TC_TIMEOUT,
};
use crate::model::SiteId;
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

    /// Every interface of the map, sorted.
    pub(super) fn interfaces(&self) -> Vec<Interface> {
        let mut v: Vec<Interface> = self.map.links.values().flat_map(|l| l.ends.values().cloned()).collect();
        v.sort();
        v.dedup();
        v
    }

    /// Runs `tc [-force] -n NETNS -batch -` with `lines` on its standard input.
    pub(super) async fn batch(&self, netns: &str, lines: &[String], force: bool) -> Result<(), DataplaneError> {
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
    pub(super) async fn read(&self, args: &[&str]) -> Result<String, DataplaneError> {
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

    pub(super) fn spawn_error(&self, source: std::io::Error) -> DataplaneError {
        DataplaneError::Spawn { tc: self.config.tc.clone(), source }
    }

    /// The minors of the HTB classes and the preferences of the filters on `iface` (only those
    /// in the NIS's range).
    pub(super) async fn installed_on(
        &self,
        iface: &Interface,
    ) -> Result<(HashSet<u16>, HashSet<u16>, bool), DataplaneError> {
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

    pub(super) fn install_lines(r: &Rule) -> Vec<String> {
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

    pub(super) fn remove_lines(iface: &Interface, minor: u16) -> Vec<String> {
        vec![
            format!("filter del dev {} parent 1: prio {minor}", iface.dev),
            format!("class del dev {} classid 1:{minor:x}", iface.dev),
        ]
    }

    /// Installs `rules` (one batch per namespace).
    pub(super) async fn install(&self, rules: &[Rule]) -> Result<(), DataplaneError> {
        let started = Instant::now();
        for (netns, lines) in by_netns(rules.iter().map(|r| (&r.iface, Self::install_lines(r)))) {
            self.batch(&netns, &lines, false).await?;
        }
        record(&self.stats.installs, &self.stats.install_us_sum, &self.stats.install_us_max, started);
        Ok(())
    }

    /// Removes the rules `(iface, minor)` (missing ones are no error).
    pub(super) async fn remove(&self, rules: &[(Interface, u16)]) -> Result<(), DataplaneError> {
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
