//! The NIS's side of its data plane: which rules a hold needs, admitting a hold before it is
//! durable or committed, withdrawing it, and the timer that reconciles what is installed with
//! what is booked (see the parent module's docs).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use super::tc::{first_minor, Doomed, OnInterface};
use super::{
    filter_handle, DataplaneError, Direction, Interface, Needed, PathSteering, ReconcileReport, RouteRule, Rule, Spec,
    TcPlane, FIRST_MINOR, LAST_MINOR, MAX_RULES_PER_INTERFACE,
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
            let table = plane.table(id.as_str(), &node);
            // The far end of the link: where the return traffic enters it.
            let far = link.ends.keys().find(|n| **n != node).cloned().unwrap_or_else(|| node.clone());
            let back = plane.table(id.as_str(), &far).and_then(|t| Some((link.ends.get(&far)?.netns.clone(), t)));
            out.push(Spec {
                table,
                back,
                iface: iface.clone(),
                rate_kbit: ((s.amount as f64) * plane.map.scale * 1000.0).round().max(1.0) as u64,
                ceil_kbit: link.capacity_kbit,
                src: a.addr,
                dst: b.addr,
                port: port.unwrap_or_else(|| marking.port(hold)),
            });
            node = far;
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
    fn allocate(
        plane: &TcPlane,
        hold: HoldId,
        specs: Vec<Spec>,
    ) -> Result<(Vec<Rule>, Vec<RouteRule>), DataplaneError> {
        let mut taken = Vec::new();
        let r = Self::allocate_all(plane, hold, specs, &mut taken);
        if r.is_err() {
            // Nothing half-allocated.
            Self::release(plane, hold, &taken);
        }
        r
    }

    /// Takes a class minor and filter handle per spec (and a share of its routing rule),
    /// pushing each rule to `taken` as it goes. Returns the rules and the routing rules that
    /// had no other owner (to install).
    fn allocate_all(
        plane: &TcPlane,
        hold: HoldId,
        specs: Vec<Spec>,
        taken: &mut Vec<Rule>,
    ) -> Result<(Vec<Rule>, Vec<RouteRule>), DataplaneError> {
        let mut st = plane.st();
        let st = &mut *st;
        let mut rules = Vec::with_capacity(specs.len());
        let mut routes = Vec::new();
        for s in specs {
            let used = st.minors.entry(s.iface.clone()).or_default();
            let handles = st.filters.entry(s.iface.clone()).or_default();
            if used.len() >= MAX_RULES_PER_INTERFACE && !used.values().any(|h| *h == hold) {
                return Err(DataplaneError::Full(s.iface.clone()));
            }
            let mut m = first_minor(hold);
            let mut tries = 0u32;
            while used.get(&m).is_some_and(|h| *h != hold) || handles.contains(&filter_handle(s.port, m)) {
                m = if m == LAST_MINOR { FIRST_MINOR } else { m + 1 };
                tries += 1;
                if tries > u32::from(LAST_MINOR - FIRST_MINOR) {
                    return Err(DataplaneError::NoFreeClass(s.iface.clone()));
                }
            }
            let rule = Rule {
                iface: s.iface,
                minor: m,
                rate_kbit: s.rate_kbit,
                ceil_kbit: s.ceil_kbit,
                src: s.src,
                dst: s.dst,
                port: s.port,
                table: s.table,
                back: s.back,
            };
            for r in rule.routes() {
                let key = (r.netns.clone(), r.src, r.dst, r.port, r.direction);
                match st.routes.get_mut(&key) {
                    Some((table, _)) if *table != r.table => {
                        return Err(DataplaneError::Conflict { netns: r.netns, port: r.port });
                    }
                    Some((_, owners)) => {
                        owners.insert(hold);
                    }
                    None => {
                        st.routes.insert(key, (r.table, HashSet::from([hold])));
                        routes.push(r);
                    }
                }
            }
            used.insert(m, hold);
            handles.insert(rule.filter_handle());
            taken.push(rule.clone());
            rules.push(rule);
        }
        Ok((rules, routes))
    }

    /// Gives back what `rules` of `hold` took; returns what is to be deleted: their classes and
    /// filters, and the routing rules no other hold needs.
    fn release(plane: &TcPlane, hold: HoldId, rules: &[Rule]) -> Doomed {
        let mut guard = plane.st();
        let st = &mut *guard;
        let mut doomed = Doomed::default();
        for r in rules {
            if let Some(m) = st.minors.get_mut(&r.iface) {
                if m.get(&r.minor) == Some(&hold) {
                    m.remove(&r.minor);
                    if let Some(f) = st.filters.get_mut(&r.iface) {
                        f.remove(&r.filter_handle());
                    }
                }
            }
            doomed.add_rule(r);
            for route in r.routes() {
                let key = (route.netns.clone(), route.src, route.dst, route.port, route.direction);
                if let Some((table, owners)) = st.routes.get_mut(&key) {
                    if *table == route.table && owners.remove(&hold) && owners.is_empty() {
                        st.routes.remove(&key);
                        doomed.routes.push(route);
                    }
                }
            }
        }
        doomed
    }

    /// Forgets `hold`'s installed rules; returns what is to be deleted (see [`Nis::release`]).
    fn forget(plane: &TcPlane, hold: HoldId) -> Doomed {
        let rules = plane.st().installed.remove(&hold).unwrap_or_default();
        Self::release(plane, hold, &rules)
    }

    /// Installs `hold`'s rules (minors allocated now), recording them.
    async fn install_hold(&self, plane: &TcPlane, hold: HoldId, specs: Vec<Spec>) -> Result<(), DataplaneError> {
        let (rules, routes) = Self::allocate(plane, hold, specs)?;
        let r = plane.install(&rules, &routes).await;
        match r {
            Ok(()) => {
                plane.st().installed.insert(hold, rules);
                Ok(())
            }
            Err(e) => {
                // Leave nothing half-installed.
                let doomed = Self::release(plane, hold, &rules);
                let _ = plane.remove(&doomed).await;
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
                let shaped = plane.installed_on(iface).await.map_err(refuse)?.shaped;
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
        let doomed = Self::forget(plane, hold);
        {
            let mut st = plane.st();
            st.admitted.remove(&hold);
            st.broken.remove(&hold);
            st.endpoints.remove(&hold);
            st.ports.remove(&hold);
        }
        if let Err(e) = plane.remove(&doomed).await {
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
    /// An interface or namespace could not be read (nothing was removed; installs may have
    /// happened), or strays could not be removed. What was done before the failure is counted
    /// in the metrics all the same.
    pub async fn reconcile_dataplane(&self) -> Result<ReconcileReport, DataplaneError> {
        let Some(plane) = &self.plane else { return Ok(ReconcileReport::default()) };
        let started = Instant::now();
        // What it did is counted even when it fails part way: rules it removed or installed
        // before the failure are gone or there all the same.
        let mut rep = ReconcileReport::default();
        let r = self.reconcile_inner(plane, &mut rep).await;
        plane.stats.reconcile_us_last.store(started.elapsed().as_micros() as u64, Relaxed);
        plane.stats.opened.fetch_add(rep.opened as u64, Relaxed);
        plane.stats.closed.fetch_add(rep.closed as u64, Relaxed);
        plane.stats.reinstalled.fetch_add(rep.reinstalled as u64, Relaxed);
        plane.stats.strays_removed.fetch_add(rep.strays_removed as u64, Relaxed);
        if (rep.opened, rep.closed, rep.reinstalled, rep.strays_removed) != (0, 0, 0, 0) {
            tracing::info!(?rep, "data plane reconciled");
        }
        match r {
            Ok(()) => {
                plane.stats.reconciles_ok.fetch_add(1, Relaxed);
                Ok(rep)
            }
            Err(e) => {
                plane.stats.reconciles_failed.fetch_add(1, Relaxed);
                tracing::warn!(error = %e, "data plane reconciliation failed");
                Err(e)
            }
        }
    }

    async fn reconcile_inner(&self, plane: &TcPlane, rep: &mut ReconcileReport) -> Result<(), DataplaneError> {
        let _op = plane.op.lock().await;
        let now = self.clock.now();
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
        // What is on the interfaces, and the routing rules in their namespaces.
        let mut on: HashMap<Interface, OnInterface> = HashMap::new();
        for iface in plane.interfaces() {
            let got = plane.installed_on(&iface).await?;
            on.insert(iface, got);
        }
        let mut routes_on: HashMap<String, HashSet<RouteRule>> = HashMap::new();
        if plane.steers() {
            for netns in plane.namespaces() {
                let got = plane.routes_in(&netns).await?;
                routes_on.insert(netns, got);
            }
        }
        // Installed by us and no longer wanted: the window closed, or the hold ended.
        let ours: Vec<HoldId> = plane.st().installed.keys().copied().collect();
        let mut closing = Doomed::default();
        for hold in ours {
            if wanted.contains_key(&hold) {
                continue;
            }
            let doomed = Self::forget(plane, hold);
            if !live.contains(&hold) {
                let mut st = plane.st();
                st.admitted.remove(&hold);
                st.broken.remove(&hold);
            }
            closing.extend(doomed);
            rep.closed += 1;
        }
        // Not strays below: on their way out.
        for (iface, m) in &closing.classes {
            if let Some(o) = on.get_mut(iface) {
                o.minors.remove(m);
            }
        }
        for (iface, h) in &closing.filters {
            if let Some(o) = on.get_mut(iface) {
                o.filters.remove(h);
            }
        }
        for r in &closing.routes {
            if let Some(set) = routes_on.get_mut(&r.netns) {
                set.remove(r);
            }
        }
        // All in one batch per namespace; what fails to go is a stray for the next round.
        if let Err(e) = plane.remove(&closing).await {
            tracing::warn!(error = %e, "closed windows' rules not all removed; the next reconciliation removes them");
        }
        // Wanted: installed and intact, partly vanished (drift: what is missing is installed
        // again), or not yet installed.
        let mut wanted: Vec<(HoldId, Vec<Spec>)> = wanted.into_iter().collect();
        wanted.sort_by_key(|(h, _)| *h);
        let mut fresh: Vec<(HoldId, Vec<Spec>)> = Vec::new();
        for (hold, specs) in wanted {
            let have = plane.st().installed.get(&hold).cloned();
            let Some(rules) = have else {
                fresh.push((hold, specs));
                continue;
            };
            // Verification, hop by hop: the class, its filter (to that class) and the routing rule.
            let missing: Vec<Rule> = rules
                .iter()
                .filter(|r| {
                    on.get(&r.iface).is_none_or(|o| {
                        !o.minors.contains(&r.minor) || o.filters.get(&r.filter_handle()) != Some(&r.minor)
                    })
                })
                .cloned()
                .collect();
            let mut missing_routes: Vec<RouteRule> = rules
                .iter()
                .flat_map(Rule::routes)
                .filter(|r| routes_on.get(&r.netns).is_none_or(|set| !set.contains(r)))
                .collect();
            missing_routes.sort();
            missing_routes.dedup();
            if missing.is_empty() && missing_routes.is_empty() {
                rep.active += 1;
                continue;
            }
            let mut lost: Vec<String> =
                missing.iter().map(|r| format!("class or filter 1:{:x} on {}", r.minor, r.iface)).collect();
            lost.extend(missing_routes.iter().map(|r| {
                let which = match r.direction {
                    Direction::Forward => "routing rule",
                    Direction::Return => "return traffic's routing rule",
                };
                format!("{which} to table {} in {}", r.table, r.netns)
            }));
            let reason = format!(
                "the data plane lost its guaranteed rate or path ({} removed behind the NIS); installed again",
                lost.join(", ")
            );
            tracing::warn!(%hold, %reason, "data plane drift");
            let committed = matches!(self.state().holds.get(hold), Some((HoldState::Committed, _)));
            if committed {
                plane.st().broken.entry(hold).or_insert(reason);
            }
            // What is left of a lost class's filter goes; then the missing pieces are added
            // (same minors, same handles; a shared routing rule is added for all its holds).
            let mut leftovers = Doomed::default();
            for r in &missing {
                if on.get(&r.iface).is_some_and(|o| o.filters.contains_key(&r.filter_handle())) {
                    leftovers.filters.push((r.iface.clone(), r.filter_handle()));
                }
            }
            let repaired = match plane.remove(&leftovers).await {
                Ok(()) => plane.install(&missing, &missing_routes).await,
                Err(e) => Err(e),
            };
            match repaired {
                Ok(()) => {
                    for r in &missing_routes {
                        routes_on.entry(r.netns.clone()).or_default().insert(r.clone());
                    }
                    rep.reinstalled += 1;
                    rep.active += 1;
                }
                Err(e) => tracing::warn!(%hold, error = %e, "could not install again; next round"),
            }
        }
        // Never installed by this process (the window opened; or a restart): one batch per
        // namespace for all of them, else one transfer at a time.
        if !fresh.is_empty() {
            let mut all = Vec::new();
            let mut all_routes = Vec::new();
            let mut per_hold = Vec::new();
            for (hold, specs) in fresh {
                match Self::allocate(plane, hold, specs.clone()) {
                    Ok((rules, routes)) => {
                        all.extend(rules.iter().cloned());
                        // A rule left from before (a restart) is there already.
                        all_routes.extend(
                            routes.into_iter().filter(|r| routes_on.get(&r.netns).is_none_or(|set| !set.contains(r))),
                        );
                        per_hold.push((hold, specs, rules));
                    }
                    Err(e) => {
                        tracing::warn!(%hold, error = %e, "could not install a transfer whose window is open");
                        self.mark_unrated(plane, hold, &e);
                    }
                }
            }
            // A filter left from before (a restart) with the same handle: it goes first.
            let mut leftovers = Doomed::default();
            for r in &all {
                if on.get(&r.iface).is_some_and(|o| o.filters.contains_key(&r.filter_handle())) {
                    leftovers.filters.push((r.iface.clone(), r.filter_handle()));
                }
            }
            let together = match plane.remove(&leftovers).await {
                Ok(()) => plane.install(&all, &all_routes).await,
                Err(e) => Err(e),
            };
            if together.is_err() {
                // Give everything back and try one transfer at a time.
                let mut doomed = Doomed::default();
                for (hold, _, rules) in &per_hold {
                    doomed.extend(Self::release(plane, *hold, rules));
                }
                let _ = plane.remove(&doomed).await;
            }
            for (hold, specs, rules) in per_hold {
                let ok = match &together {
                    Ok(()) => {
                        plane.st().installed.insert(hold, rules);
                        true
                    }
                    Err(_) => match self.install_hold(plane, hold, specs).await {
                        Ok(()) => true,
                        Err(e) => {
                            tracing::warn!(%hold, error = %e, "could not install a transfer whose window is open; next round");
                            self.mark_unrated(plane, hold, &e);
                            false
                        }
                    },
                };
                if ok {
                    rep.opened += 1;
                    rep.active += 1;
                }
            }
        }
        // What is left in the NIS's range on an interface, or at its preference in a
        // namespace, and owned by no installed rule: strays.
        let (owned_classes, owned_filters, owned_routes) = {
            let st = plane.st();
            let rules = st.installed.values().flatten();
            let classes: HashSet<(Interface, u16)> = rules.clone().map(|r| (r.iface.clone(), r.minor)).collect();
            let filters: HashSet<(Interface, String)> = rules.map(|r| (r.iface.clone(), r.filter_handle())).collect();
            let routes: HashSet<RouteRule> = st
                .routes
                .iter()
                .map(|((netns, src, dst, port, direction), (table, _))| RouteRule {
                    netns: netns.clone(),
                    src: *src,
                    dst: *dst,
                    port: *port,
                    direction: *direction,
                    table: *table,
                })
                .collect();
            (classes, filters, routes)
        };
        let mut strays = Doomed::default();
        let mut stray_rules: HashSet<(Interface, u16)> = HashSet::new();
        for (iface, o) in on {
            for m in &o.minors {
                if !owned_classes.contains(&(iface.clone(), *m)) {
                    strays.classes.push((iface.clone(), *m));
                    stray_rules.insert((iface.clone(), *m));
                }
            }
            for (h, m) in &o.filters {
                if !owned_filters.contains(&(iface.clone(), h.clone())) {
                    strays.filters.push((iface.clone(), h.clone()));
                    stray_rules.insert((iface.clone(), *m));
                }
            }
        }
        for set in routes_on.into_values() {
            strays.routes.extend(set.into_iter().filter(|r| !owned_routes.contains(r)));
        }
        strays.classes.sort();
        strays.filters.sort();
        strays.routes.sort();
        if !strays.is_empty() {
            rep.strays_removed = stray_rules.len() + strays.routes.len();
            plane.remove(&strays).await?;
        }
        Ok(())
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
