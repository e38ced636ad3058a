//! The NIS's side of its data plane: which rules a hold needs, admitting a hold before it is
//! durable or committed, withdrawing it, and the timer that reconciles what is installed with
//! what is booked (see the parent module's docs).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use super::tc::first_minor;
use super::{
    DataplaneError, Interface, Needed, ReconcileReport, Rule, Spec, TcPlane, FIRST_MINOR, LAST_MINOR,
    MAX_RULES_PER_INTERFACE,
};
use crate::model::Time;
use crate::nis::Nis;
use crate::protocol::bookkeeping::KeepsHolds;
use crate::protocol::{Drift, HoldId, HoldLifecycle, HoldState, ParticipantError};

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
    pub(in crate::nis) fn note_endpoints(&self, hold: HoldId, req: &crate::protocol::NetworkHoldRequest) {
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
            let s = st.calendars.get(l).span(span)?;
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

    /// Marks a committed transfer whose guaranteed rate could not be installed (`e`) broken,
    /// keeping the first reason; a hold not committed is left (its commit will try again).
    fn mark_unrated(&self, plane: &TcPlane, hold: HoldId, e: &DataplaneError) {
        if matches!(self.state().holds.get(hold), Some((HoldState::Committed, _))) {
            plane.st().broken.entry(hold).or_insert_with(|| format!("its guaranteed rate could not be installed: {e}"));
        }
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
    pub(in crate::nis) async fn admit(&self, holds: &[HoldId]) -> Result<(), ParticipantError> {
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
    pub(in crate::nis) async fn withdraw(&self, hold: HoldId) {
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
                let s = st.calendars.get(first.0).span(first.1)?;
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
                        self.mark_unrated(plane, hold, &e);
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
                                self.mark_unrated(plane, hold, &e);
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
