//! [`MemoryStore`]: the [`Store`] in process memory. Nothing survives a restart.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{
    part_boundaries, status_in_time, Claim, DecisionRecord, DeliveryRecord, KeyClaim, ModificationRecord, PartBoundary,
    PlanEvent, PlanFilter, PlanRecord, PlanStatus, RejectionRecord, Store, StoreError, StoredHold, TokenRecord,
    WebhookRecord,
};
use crate::fairshare::{Project, Usage};
use crate::model::{Grid, Outcome, Site, Time};
use crate::protocol::decision::{Decision, Ending, InDoubt};
use crate::protocol::{HoldId, HoldState, Journal, JournalEntry, JournalError, TxnId};

/// Where a journaled hold stands beyond its [`HoldState`] (the `state` column in PostgreSQL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Life {
    /// Held or committed.
    Live,
    /// Its lease ended (the sweeper); a commit or extension the participant accepted before
    /// that still wins.
    Expired,
    /// Aborted or released: final.
    Ended,
}

/// An idempotency key: its claim and lease, and the plan once done.
struct KeyRow {
    claim: Uuid,
    lease_until: Instant,
    done: Option<(Uuid, String)>,
}

/// A decided transaction.
struct TxnRow {
    /// `Some` while in doubt (not finished).
    doubt: Option<InDoubt>,
    plan: Uuid,
    claim: Uuid,
    lease_until: Instant,
    /// Decision order (oldest first for recovery).
    seq: u64,
    /// A modification: the plan's outcome and bookings once it is committed.
    modification: Option<(Outcome, Vec<crate::protocol::decision::Booking>)>,
}

fn lease(lease_s: i64) -> Instant {
    Instant::now() + Duration::from_secs(lease_s.max(0) as u64)
}

/// A journaled hold.
struct Row {
    hold: StoredHold,
    life: Life,
    plan: Option<Uuid>,
}

#[derive(Default)]
struct Inner {
    plans: HashMap<Uuid, PlanRecord>,
    /// Insertion order of `plans` (listing is oldest first).
    order: Vec<Uuid>,
    /// `(principal, key)` -> its claim, and `(plan, fingerprint)` once done.
    keys: HashMap<(Uuid, String), KeyRow>,
    tokens: HashMap<String, TokenRecord>,
    /// Principal ids by name (`principals` in PostgreSQL).
    principals: HashMap<String, Uuid>,
    /// Ids of revoked tokens.
    revoked: std::collections::HashSet<Uuid>,
    holds: HashMap<HoldId, Row>,
    /// Decided transactions.
    txns: HashMap<TxnId, TxnRow>,
    grid: Option<Grid>,
    /// The owner of each journaled hold that has one (`JournalEntry::Held::owner`).
    owners: HashMap<HoldId, String>,
    projects: std::collections::BTreeMap<String, Project>,
    /// Live charges: plan -> (project, usage) (see `Store::record_decision`).
    charges: HashMap<Uuid, (String, Vec<Usage>)>,
    /// The event log, oldest first (ids 1, 2, ...).
    events: Vec<PlanEvent>,
    /// How far the clock has moved each plan (`advanced_to` in PostgreSQL): its parts' starts
    /// and ends up to this have had their events.
    advanced_to: HashMap<Uuid, DateTime<Utc>>,
    /// Webhooks in creation order, each with its lease and delivery log.
    webhooks: Vec<(WebhookRecord, Option<Lease>, std::collections::VecDeque<DeliveryRecord>)>,
}

/// A webhook's lease: its holder and until when.
type Lease = (String, DateTime<Utc>);

impl Inner {
    /// Records the event of plan `id` reaching its current status (under the store's lock, with
    /// the change).
    fn event(&mut self, id: Uuid) {
        let next = self.events.len() as i64 + 1;
        if let Some(p) = self.plans.get(&id) {
            self.events.push(PlanEvent::of(next, Utc::now(), p));
        }
    }

    /// Records the event of a part of plan `id` passing its start or end `b`.
    fn part_event(&mut self, id: Uuid, b: PartBoundary) {
        let next = self.events.len() as i64 + 1;
        if let Some(p) = self.plans.get(&id) {
            let mut e = PlanEvent::of(next, Utc::now(), p);
            e.kind = b.kind.to_owned();
            e.part = Some(b.part);
            self.events.push(e);
        }
    }

    /// The project `user`'s plans are charged to, once the charge `usage` is checked against
    /// its allocation and every live charge of the project but plan `except`'s (under the
    /// store's lock, which every charge goes through).
    fn charge_check(&self, user: &str, usage: &[Usage], except: Option<Uuid>) -> Result<String, StoreError> {
        let (project, limited) = crate::fairshare::project_of(self.projects.values(), user);
        if let Some(p) = limited {
            let booked: Vec<Usage> = self
                .charges
                .iter()
                .filter(|(plan, (q, _))| Some(**plan) != except && *q == project)
                .flat_map(|(_, (_, u))| u.iter().copied())
                .collect();
            crate::fairshare::check_limit(p, &booked, usage).map_err(StoreError::AllocationExceeded)?;
        }
        Ok(project)
    }

    /// Writes decision `d` of plan `plan` under `claim`: with `reservations` (participants in
    /// this process) its parts as committed reservations, the ones they replace released, and
    /// the transaction finished; else the transaction in doubt until its end is recorded.
    fn decided(
        &mut self,
        d: &Decision<'_>,
        plan: Uuid,
        reservations: bool,
        claim: &Claim,
        modification: Option<(Outcome, Vec<crate::protocol::decision::Booking>)>,
    ) {
        if reservations {
            for p in d.parts {
                if let Some(old) = p.request.replaces().and_then(|h| self.holds.get_mut(&h)) {
                    old.life = Life::Ended;
                }
                let hold = StoredHold {
                    participant: p.participant.clone(),
                    hold: p.hold,
                    request: p.request.clone(),
                    state: HoldState::Committed,
                    via_api: false,
                };
                self.holds.insert(p.hold, Row { hold, life: Life::Live, plan: Some(plan) });
            }
        }
        let doubt = (!reservations).then(|| InDoubt {
            txn: d.txn,
            parts: d.parts.to_vec(),
            outcome: d.outcome.clone(),
            compensating: false,
        });
        let seq = self.txns.len() as u64;
        let row = TxnRow { doubt, plan, claim: claim.id, lease_until: lease(claim.lease_s), seq, modification };
        self.txns.insert(d.txn, row);
    }

    /// Rewrites plan `id` as modified, with its `plan.modified` event.
    fn modified(&mut self, id: Uuid, outcome: &Outcome, bookings: &[crate::protocol::decision::Booking]) {
        if let Some(p) = self.plans.get_mut(&id) {
            p.outcome = outcome.clone();
            p.bookings = bookings.to_vec();
            let next = self.events.len() as i64 + 1;
            let mut e = PlanEvent::of(next, Utc::now(), p);
            e.kind = "plan.modified".into();
            self.events.push(e);
        }
    }
}

/// Everything in one mutex: the API's state is small next to the calendars.
pub struct MemoryStore {
    inner: Mutex<Inner>,
    /// Bumped after each event ([`Store::event_signal`]).
    signal: tokio::sync::watch::Sender<u64>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore { inner: Mutex::default(), signal: tokio::sync::watch::Sender::new(0) }
    }
}

/// The store's guard: on drop (after the change and its events), wakes the event readers if
/// events were written.
struct Guard<'a> {
    inner: std::sync::MutexGuard<'a, Inner>,
    events_before: usize,
    signal: &'a tokio::sync::watch::Sender<u64>,
}

impl std::ops::Deref for Guard<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl std::ops::DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.inner
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        let now = self.inner.events.len();
        if now > self.events_before {
            self.signal.send_replace(now as u64);
        }
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> Guard<'_> {
        let inner = self.inner.lock().expect("memory store lock");
        let events_before = inner.events.len();
        Guard { inner, events_before, signal: &self.signal }
    }
}

/// Binds `(owner, key)`, still held by `claim`, to `plan`.
fn complete_key(
    g: &mut Inner,
    owner: Uuid,
    key: &str,
    print: &str,
    claim: &Claim,
    plan: Uuid,
) -> Result<(), StoreError> {
    match g.keys.get_mut(&(owner, key.to_owned())) {
        Some(row) if row.claim == claim.id && row.done.is_none() => {
            row.done = Some((plan, print.to_owned()));
            Ok(())
        }
        _ => Err(StoreError::Superseded),
    }
}

fn matches(p: &PlanRecord, f: &PlanFilter) -> bool {
    let start = p.outcome.start;
    f.owner.is_none_or(|o| o == p.owner)
        && f.status.is_none_or(|s| s == p.status)
        && f.from.is_none_or(|from| start.is_some_and(|st| st >= from))
        && f.to.is_none_or(|to| start.is_some_and(|st| st < to))
}

#[async_trait]
impl Journal for MemoryStore {
    async fn append(&self, entry: &JournalEntry) -> Result<(), JournalError> {
        let mut g = self.lock();
        match entry {
            JournalEntry::Held { participant, hold, request, expires_at, via_api, owner } => {
                if let Some(o) = owner {
                    g.owners.entry(*hold).or_insert_with(|| o.clone());
                }
                let stored = StoredHold {
                    participant: participant.clone(),
                    hold: *hold,
                    request: request.clone(),
                    state: HoldState::Held { expires_at: *expires_at },
                    via_api: *via_api,
                };
                g.holds.entry(*hold).or_insert(Row { hold: stored, life: Life::Live, plan: None });
            }
            JournalEntry::Committed { hold } => {
                if let Some(r) = g.holds.get_mut(hold).filter(|r| r.life != Life::Ended) {
                    r.hold.state = HoldState::Committed;
                    r.life = Life::Live;
                }
            }
            JournalEntry::Aborted { hold } | JournalEntry::Released { hold } => {
                if let Some(r) = g.holds.get_mut(hold) {
                    r.life = Life::Ended;
                }
            }
            JournalEntry::Extended { hold, expires_at } => {
                // As in PostgreSQL: the participant accepted it before the lease ended, so it
                // wins over the sweeper's expiry.
                if let Some(r) = g.holds.get_mut(hold).filter(|r| r.life != Life::Ended) {
                    if let HoldState::Held { .. } = r.hold.state {
                        r.hold.state = HoldState::Held { expires_at: *expires_at };
                        r.life = Life::Live;
                    }
                }
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn insert_plan(&self, plan: PlanRecord) -> Result<(), StoreError> {
        let mut g = self.lock();
        let id = plan.id;
        g.order.push(id);
        g.plans.insert(id, plan);
        g.event(id);
        Ok(())
    }

    async fn plan(&self, id: Uuid) -> Result<Option<PlanRecord>, StoreError> {
        Ok(self.lock().plans.get(&id).cloned())
    }

    async fn list_plans(&self, filter: &PlanFilter) -> Result<Vec<PlanRecord>, StoreError> {
        let g = self.lock();
        Ok(g.order.iter().map(|id| &g.plans[id]).filter(|p| matches(p, filter)).cloned().collect())
    }

    async fn mark_cancelled(&self, id: Uuid, at: DateTime<Utc>) -> Result<Option<PlanRecord>, StoreError> {
        let mut g = self.lock();
        for r in g.holds.values_mut().filter(|r| r.plan == Some(id)) {
            r.life = Life::Ended;
        }
        g.charges.remove(&id);
        let Some(p) = g.plans.get_mut(&id) else { return Ok(None) };
        let changed = p.status != PlanStatus::Cancelled;
        p.status = PlanStatus::Cancelled;
        p.cancelled_at.get_or_insert(at);
        let p = p.clone();
        if changed {
            g.event(id);
        }
        Ok(Some(p))
    }

    async fn plan_of_hold(&self, hold: HoldId) -> Result<Option<PlanRecord>, StoreError> {
        let g = self.lock();
        Ok(g.plans
            .values()
            .find(|p| p.status.holds_reservations() && p.bookings.iter().any(|b| b.hold == hold))
            .cloned())
    }

    async fn mark_broken(&self, id: Uuid, outcome: &Outcome) -> Result<Option<PlanRecord>, StoreError> {
        let mut g = self.lock();
        let Some(p) = g.plans.get_mut(&id).filter(|p| p.status.holds_reservations()) else { return Ok(None) };
        let changed = p.status != PlanStatus::Broken || p.outcome != *outcome;
        p.status = PlanStatus::Broken;
        p.outcome = outcome.clone();
        let p = p.clone();
        if changed {
            g.event(id);
        }
        Ok(Some(p))
    }

    async fn claim_key(&self, owner: Uuid, key: &str, claim: &Claim) -> Result<KeyClaim, StoreError> {
        let mut g = self.lock();
        let fresh = KeyRow { claim: claim.id, lease_until: lease(claim.lease_s), done: None };
        Ok(match g.keys.get_mut(&(owner, key.to_owned())) {
            None => {
                g.keys.insert((owner, key.to_owned()), fresh);
                KeyClaim::Claimed
            }
            Some(row) => match &row.done {
                Some((plan, fingerprint)) => KeyClaim::Done { plan: *plan, fingerprint: fingerprint.clone() },
                None if row.lease_until < Instant::now() => {
                    *row = fresh;
                    KeyClaim::Claimed
                }
                None => KeyClaim::InProgress,
            },
        })
    }

    async fn release_key(&self, owner: Uuid, key: &str, claim: &Claim) -> Result<(), StoreError> {
        let mut g = self.lock();
        let k = (owner, key.to_owned());
        if g.keys.get(&k).is_some_and(|r| r.done.is_none() && r.claim == claim.id) {
            g.keys.remove(&k);
        }
        Ok(())
    }

    async fn renew_claims(&self, claims: &[Uuid], lease_s: i64) -> Result<(), StoreError> {
        let mut g = self.lock();
        let until = lease(lease_s);
        for r in g.keys.values_mut().filter(|r| r.done.is_none() && claims.contains(&r.claim)) {
            r.lease_until = until;
        }
        for t in g.txns.values_mut().filter(|t| t.doubt.is_some() && claims.contains(&t.claim)) {
            t.lease_until = until;
        }
        Ok(())
    }

    async fn insert_token(&self, mut token: TokenRecord) -> Result<(), StoreError> {
        let mut g = self.lock();
        if let Some(old) = g.tokens.get(&token.hash) {
            token.id = old.id;
        }
        if g.revoked.contains(&token.id) {
            return Ok(()); // stays revoked
        }
        token.principal = *g.principals.entry(token.user.clone()).or_insert_with(Uuid::new_v4);
        g.tokens.insert(token.hash.clone(), token);
        Ok(())
    }

    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        let g = self.lock();
        Ok(g.tokens.get(hash).filter(|t| !g.revoked.contains(&t.id)).cloned())
    }

    async fn revoke_token(&self, id: Uuid) -> Result<Option<TokenRecord>, StoreError> {
        let mut g = self.lock();
        let Some(t) = g.tokens.values().find(|t| t.id == id).cloned() else { return Ok(None) };
        Ok(g.revoked.insert(id).then_some(t))
    }

    async fn end_all_claims(&self) -> Result<u64, StoreError> {
        let mut g = self.lock();
        let now = Instant::now();
        for t in g.txns.values_mut().filter(|t| t.doubt.is_some()) {
            t.lease_until = now;
        }
        let before = g.keys.len();
        g.keys.retain(|_, r| r.done.is_some());
        Ok((before - g.keys.len()) as u64)
    }

    async fn record_decision(&self, r: &DecisionRecord<'_>) -> Result<(), StoreError> {
        let mut g = self.lock();
        let d = &r.decision;
        // The charge, checked under the store's lock (every charge goes through it).
        let usage = Usage::of_outcome(&r.plan.outcome);
        let project = g.charge_check(&r.plan.user, &usage, None)?;
        if let Some((key, print)) = r.key {
            complete_key(&mut g, r.plan.owner, key, print, r.claim, r.plan.id)?;
        }
        g.decided(d, r.plan.id, r.reservations, r.claim, None);
        g.order.push(r.plan.id);
        g.plans.insert(r.plan.id, r.plan.clone());
        g.event(r.plan.id);
        g.charges.insert(r.plan.id, (project, usage));
        Ok(())
    }

    async fn record_modification(&self, r: &ModificationRecord<'_>) -> Result<(), StoreError> {
        let mut g = self.lock();
        let d = &r.decision;
        let user = match g.plans.get(&r.plan) {
            Some(p) if matches!(p.status, PlanStatus::Committed | PlanStatus::Active) && p.bookings == r.replaced => {
                p.user.clone()
            }
            _ => return Err(StoreError::Superseded),
        };
        let usage = Usage::of_outcome(d.outcome);
        g.charge_check(&user, &usage, Some(r.plan))?;
        if let Some((key, print)) = r.key {
            complete_key(&mut g, r.owner, key, print, r.claim, r.plan)?;
        }
        if let Some(c) = g.charges.get_mut(&r.plan) {
            c.1 = usage;
        }
        g.decided(d, r.plan, r.reservations, r.claim, Some((d.outcome.clone(), r.bookings.to_vec())));
        if r.reservations {
            g.modified(r.plan, d.outcome, r.bookings);
        }
        Ok(())
    }

    async fn record_rejection(&self, r: &RejectionRecord<'_>) -> Result<(), StoreError> {
        let mut g = self.lock();
        if let Some((key, print)) = r.key {
            complete_key(&mut g, r.plan.owner, key, print, r.claim, r.plan.id)?;
        }
        g.order.push(r.plan.id);
        g.plans.insert(r.plan.id, r.plan.clone());
        g.event(r.plan.id);
        Ok(())
    }

    async fn mark_compensating(&self, txn: TxnId, claim: &Claim) -> Result<(), StoreError> {
        let mut g = self.lock();
        let t = g.txns.get_mut(&txn).filter(|t| t.claim == claim.id).and_then(|t| t.doubt.as_mut());
        t.map(|d| d.compensating = true).ok_or(StoreError::Superseded)
    }

    async fn finish_txn(&self, txn: TxnId, claim: &Claim, ending: Ending<'_>) -> Result<(), StoreError> {
        let mut g = self.lock();
        let Some(t) = g.txns.get_mut(&txn).filter(|t| t.claim == claim.id && t.doubt.is_some()) else {
            return Err(StoreError::Superseded);
        };
        t.doubt = None;
        let plan = t.plan;
        let rejected = match ending {
            Ending::Compensated(o) => Some(o),
            Ending::Committed | Ending::Broken(_) => None,
        };
        if let Some((outcome, bookings)) = t.modification.clone() {
            // A modification's plan is rewritten if it committed, and left as it was if not.
            if rejected.is_none() {
                g.modified(plan, &outcome, &bookings);
            }
            if let (Ending::Broken(o), Some(p)) = (ending, g.plans.get_mut(&plan)) {
                p.outcome.take_broken_from(o);
                p.status = PlanStatus::Broken;
                g.event(plan);
            }
            return Ok(());
        }
        if rejected.is_some() {
            g.charges.remove(&plan);
            for r in g.holds.values_mut().filter(|r| r.plan == Some(plan)) {
                r.life = Life::Ended;
            }
        }
        if let Some(p) = g.plans.get_mut(&plan) {
            match rejected {
                None if p.status == PlanStatus::Pending => p.status = PlanStatus::Committed,
                None => return Ok(()),
                Some(o) => {
                    p.status = PlanStatus::Rejected;
                    p.outcome = o.clone();
                    p.bookings.clear();
                }
            }
            g.event(plan);
        }
        Ok(())
    }

    async fn take_in_doubt(&self, claim: &Claim, limit: usize) -> Result<Vec<InDoubt>, StoreError> {
        let mut g = self.lock();
        let now = Instant::now();
        let mut lapsed: Vec<&mut TxnRow> =
            g.txns.values_mut().filter(|t| t.doubt.is_some() && t.lease_until < now).collect();
        lapsed.sort_by_key(|t| t.seq);
        Ok(lapsed
            .into_iter()
            .take(limit)
            .map(|t| {
                t.claim = claim.id;
                t.lease_until = lease(claim.lease_s);
                t.doubt.clone().expect("filtered on doubt")
            })
            .collect())
    }

    async fn live_holds(&self, now: Time) -> Result<Vec<StoredHold>, StoreError> {
        let g = self.lock();
        Ok(g.holds
            .values()
            .filter(|r| {
                r.life == Life::Live
                    && match r.hold.state {
                        HoldState::Committed => true,
                        HoldState::Held { expires_at } => expires_at > now,
                    }
            })
            .map(|r| r.hold.clone())
            .collect())
    }

    async fn live_hold_owners(&self, now: Time) -> Result<Vec<(HoldId, String)>, StoreError> {
        let live = self.live_holds(now).await?;
        let g = self.lock();
        Ok(live.into_iter().filter_map(|h| g.owners.get(&h.hold).map(|o| (h.hold, o.clone()))).collect())
    }

    async fn expire_holds(&self, now: Time) -> Result<u64, StoreError> {
        let mut g = self.lock();
        let mut n = 0;
        for r in g.holds.values_mut() {
            if r.life == Life::Live && matches!(r.hold.state, HoldState::Held { expires_at } if expires_at <= now) {
                r.life = Life::Expired;
                n += 1;
            }
        }
        Ok(n)
    }

    async fn save_grid(&self, grid: &Grid) -> Result<(), StoreError> {
        self.lock().grid = Some(grid.clone());
        Ok(())
    }

    async fn load_grid(&self) -> Result<Option<Grid>, StoreError> {
        Ok(self.lock().grid.clone())
    }

    async fn save_project(&self, project: &Project) -> Result<(), StoreError> {
        self.lock().projects.insert(project.id.clone(), project.clone());
        Ok(())
    }

    async fn projects(&self) -> Result<Vec<Project>, StoreError> {
        Ok(self.lock().projects.values().cloned().collect())
    }

    async fn live_charges(&self, since: Time) -> Result<Vec<(Uuid, String, Vec<Usage>)>, StoreError> {
        let g = self.lock();
        let live = g.charges.iter().filter(|(_, (_, u))| u.iter().any(|u| u.end > since));
        Ok(live.map(|(id, (p, u))| (*id, p.clone(), u.clone())).collect())
    }

    async fn charged(&self, project: &str, from: Time, to: Time) -> Result<Vec<Usage>, StoreError> {
        let g = self.lock();
        let live = g.charges.values().filter(|(p, _)| p == project).flat_map(|(_, u)| u.iter().copied());
        Ok(live.filter(|u| u.start < to && u.end > from).collect())
    }

    async fn save_site(&self, site: &Site) -> Result<(), StoreError> {
        let mut inner = self.lock();
        if let Some(g) = inner.grid.as_ref() {
            // The caller checked the site against the grid; a site the grid lacks is ignored,
            // like the PostgreSQL store's UPDATE of no row.
            if let Ok(updated) = g.with_site(site.clone()) {
                inner.grid = Some(updated);
            }
        }
        Ok(())
    }

    async fn advance_plans(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        let mut g = self.lock();
        let mut moved = 0;
        for id in g.order.clone() {
            let p = &g.plans[&id];
            if !matches!(p.status, PlanStatus::Committed | PlanStatus::Active | PlanStatus::Broken) {
                continue;
            }
            let since = g.advanced_to.get(&id).copied();
            let passed: Vec<PartBoundary> = part_boundaries(&p.outcome)
                .into_iter()
                .filter(|b| since.is_none_or(|s| b.at > s) && b.at <= now)
                .collect();
            if passed.is_empty() {
                continue;
            }
            moved += 1;
            let next = status_in_time(p.status, &p.outcome, now);
            let changed = next != p.status;
            g.advanced_to.insert(id, now);
            // Each event carries the status once it happened: the parts' events before
            // `plan.completed` the status the plan had.
            if changed && next != PlanStatus::Completed {
                g.plans.get_mut(&id).expect("a listed plan").status = next;
                g.event(id);
            }
            for b in passed {
                g.part_event(id, b);
            }
            if changed && next == PlanStatus::Completed {
                g.plans.get_mut(&id).expect("a listed plan").status = next;
                g.event(id);
            }
        }
        Ok(moved)
    }

    async fn events_after(&self, after: i64, owner: Option<Uuid>, limit: i64) -> Result<Vec<PlanEvent>, StoreError> {
        let g = self.lock();
        // Ids are 1, 2, ...: event `after + 1` is at index `after`.
        let from = usize::try_from(after.max(0)).unwrap_or(usize::MAX).min(g.events.len());
        Ok(g.events[from..]
            .iter()
            .filter(|e| owner.is_none_or(|o| e.owner == o))
            .take(usize::try_from(limit.max(0)).unwrap_or(usize::MAX))
            .cloned()
            .collect())
    }

    async fn last_event_id(&self) -> Result<i64, StoreError> {
        Ok(self.lock().events.len() as i64)
    }

    fn event_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.signal.subscribe()
    }

    async fn insert_webhook(&self, w: WebhookRecord) -> Result<(), StoreError> {
        self.lock().webhooks.push((w, None, Default::default()));
        Ok(())
    }

    async fn webhooks(&self, owner: Option<Uuid>) -> Result<Vec<WebhookRecord>, StoreError> {
        let g = self.lock();
        Ok(g.webhooks.iter().map(|w| &w.0).filter(|w| owner.is_none_or(|o| w.owner == o)).cloned().collect())
    }

    async fn webhook(&self, id: Uuid) -> Result<Option<WebhookRecord>, StoreError> {
        Ok(self.lock().webhooks.iter().find(|w| w.0.id == id).map(|w| w.0.clone()))
    }

    async fn delete_webhook(&self, id: Uuid) -> Result<bool, StoreError> {
        let mut g = self.lock();
        let before = g.webhooks.len();
        g.webhooks.retain(|w| w.0.id != id);
        Ok(g.webhooks.len() < before)
    }

    async fn lease_due_webhooks(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        lease_s: i64,
        limit: i64,
    ) -> Result<Vec<WebhookRecord>, StoreError> {
        let mut g = self.lock();
        let until = now + chrono::Duration::seconds(lease_s);
        let Inner { webhooks, events, .. } = &mut *g.inner;
        let pending = |w: &WebhookRecord| {
            let from = usize::try_from(w.cursor.max(0)).unwrap_or(usize::MAX).min(events.len());
            events[from..].iter().any(|e| w.admin || e.owner == w.owner)
        };
        Ok(webhooks
            .iter_mut()
            .filter(|(w, lease, _)| {
                w.enabled && w.next_attempt_at <= now && lease.as_ref().is_none_or(|l| l.1 < now) && pending(w)
            })
            .take(usize::try_from(limit).unwrap_or(0))
            .map(|(w, lease, _)| {
                *lease = Some((owner.to_owned(), until));
                w.clone()
            })
            .collect())
    }

    async fn record_deliveries(
        &self,
        owner: &str,
        webhook: &WebhookRecord,
        deliveries: &[DeliveryRecord],
    ) -> Result<(), StoreError> {
        let mut g = self.lock();
        let Some((w, _, log)) = g
            .webhooks
            .iter_mut()
            .find(|(w, lease, _)| w.id == webhook.id && lease.as_ref().is_some_and(|l| l.0 == owner))
        else {
            return Err(StoreError::Superseded);
        };
        *w = webhook.clone();
        for d in deliveries {
            log.push_front(d.clone());
        }
        log.truncate(100);
        Ok(())
    }

    async fn release_webhook(&self, owner: &str, id: Uuid) -> Result<(), StoreError> {
        let mut g = self.lock();
        for (_, lease, _) in g.webhooks.iter_mut().filter(|w| w.0.id == id) {
            if lease.as_ref().is_some_and(|l| l.0 == owner) {
                *lease = None;
            }
        }
        Ok(())
    }

    async fn deliveries(&self, id: Uuid, limit: i64) -> Result<Vec<DeliveryRecord>, StoreError> {
        let g = self.lock();
        let log = g.webhooks.iter().find(|w| w.0.id == id).map(|w| &w.2);
        Ok(log.into_iter().flatten().take(usize::try_from(limit).unwrap_or(0)).cloned().collect())
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "memory"
    }

    /// As PostgreSQL's, but events stay (their ids are their positions in the log) and there
    /// is no delivery log or released charge to prune (a released charge is removed at once).
    async fn prune_finished(&self, horizon: DateTime<Utc>) -> Result<super::Pruned, StoreError> {
        let mut g = self.lock();
        let finished = |p: &PlanRecord| match p.status {
            PlanStatus::Cancelled => p.cancelled_at.unwrap_or(p.created_at) < horizon,
            PlanStatus::Rejected => p.created_at < horizon,
            PlanStatus::Completed => p.outcome.jobs.iter().map(|j| j.end).max().unwrap_or(p.created_at) < horizon,
            _ => false,
        };
        let gone: std::collections::HashSet<Uuid> = g.plans.values().filter(|p| finished(p)).map(|p| p.id).collect();
        g.plans.retain(|id, _| !gone.contains(id));
        g.advanced_to.retain(|id, _| !gone.contains(id));
        g.order.retain(|id| !gone.contains(id));
        let keys_before = g.keys.len();
        g.keys.retain(|_, k| !k.done.as_ref().is_some_and(|(plan, _)| gone.contains(plan)));
        let booked = |g: &Inner, plan: &Option<Uuid>| {
            plan.and_then(|id| g.plans.get(&id))
                .is_some_and(|p| p.status.holds_reservations() || p.status == PlanStatus::Pending)
        };
        let in_doubt: std::collections::HashSet<TxnId> =
            g.txns.iter().filter(|(_, t)| t.doubt.is_some()).map(|(id, _)| *id).collect();
        let horizon_t = crate::model::to_time(&horizon);
        let old_holds: Vec<HoldId> = g
            .holds
            .iter()
            .filter(|(_, r)| {
                let ended = r.life != Life::Live || r.hold.state == HoldState::Committed;
                ended
                    && r.hold.request.interval().1 < horizon_t
                    && !booked(&g, &r.plan)
                    && !in_doubt.contains(&r.hold.request.txn())
            })
            .map(|(id, _)| *id)
            .collect();
        for id in &old_holds {
            g.holds.remove(id);
            g.owners.remove(id);
        }
        let old_txns: Vec<TxnId> = g
            .txns
            .iter()
            .filter(|(_, t)| t.doubt.is_none() && !booked(&g, &Some(t.plan)))
            .filter(|(_, t)| gone.contains(&t.plan) || !g.plans.contains_key(&t.plan))
            .map(|(id, _)| *id)
            .collect();
        for id in &old_txns {
            g.txns.remove(id);
        }
        Ok(super::Pruned {
            plans: gone.len() as u64,
            idempotency_keys: (keys_before - g.keys.len()) as u64,
            journal: old_holds.len() as u64,
            decisions: old_txns.len() as u64,
            ..Default::default()
        })
    }
}
