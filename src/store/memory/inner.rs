//! The store's state behind its one mutex ([`Inner`]), its rows, and the writes that several
//! concerns share (events, the allocation check, decisions, modifications).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::fairshare::{Project, Usage};
use crate::model::{Grid, Outcome};
use crate::protocol::decision::{Decision, InDoubt};
use crate::protocol::{HoldId, HoldState, JournalState, TxnId};
use crate::store::{
    Claim, DeliveryRecord, PartBoundary, PlanEvent, PlanRecord, StoreError, StoredHold, TokenRecord, WebhookRecord,
};

/// Where a journaled hold stands beyond its [`HoldState`] (the `state` column in PostgreSQL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Life {
    /// Held or committed.
    Live,
    /// Its lease ended (the sweeper); a commit or extension the participant accepted before
    /// that still wins.
    Expired,
    /// Aborted or released: final.
    Ended,
}

/// An idempotency key: its claim and lease, and the plan once done.
pub(super) struct KeyRow {
    pub(super) claim: Uuid,
    pub(super) lease_until: Instant,
    pub(super) done: Option<(Uuid, String)>,
}

/// A decided transaction.
pub(super) struct TxnRow {
    /// `Some` while in doubt (not finished).
    pub(super) doubt: Option<InDoubt>,
    pub(super) plan: Uuid,
    pub(super) claim: Uuid,
    pub(super) lease_until: Instant,
    /// Decision order (oldest first for recovery).
    pub(super) seq: u64,
    /// A modification: the plan's outcome and bookings once it is committed.
    pub(super) modification: Option<(Outcome, Vec<crate::protocol::decision::Booking>)>,
}

pub(super) fn lease(lease_s: i64) -> Instant {
    Instant::now() + Duration::from_secs(lease_s.max(0) as u64)
}

/// A journaled hold.
pub(super) struct Row {
    pub(super) hold: StoredHold,
    pub(super) life: Life,
    pub(super) plan: Option<Uuid>,
}

impl Row {
    /// The row's state, as PostgreSQL's `reservations.state` spells it.
    pub(super) fn journal_state(&self) -> JournalState {
        match (self.life, self.hold.state) {
            (Life::Live, HoldState::Held { .. }) => JournalState::Held,
            (Life::Live, HoldState::Committed) => JournalState::Committed,
            (Life::Expired, _) => JournalState::Expired,
            (Life::Ended, HoldState::Held { .. }) => JournalState::Aborted,
            (Life::Ended, HoldState::Committed) => JournalState::Released,
        }
    }
}

#[derive(Default)]
pub(super) struct Inner {
    pub(super) plans: HashMap<Uuid, PlanRecord>,
    /// Insertion order of `plans` (listing is oldest first).
    pub(super) order: Vec<Uuid>,
    /// `(principal, key)` -> its claim, and `(plan, fingerprint)` once done.
    pub(super) keys: HashMap<(Uuid, String), KeyRow>,
    pub(super) tokens: HashMap<String, TokenRecord>,
    /// Principal ids by name (`principals` in PostgreSQL).
    pub(super) principals: HashMap<String, Uuid>,
    /// Ids of revoked tokens.
    pub(super) revoked: std::collections::HashSet<Uuid>,
    pub(super) holds: HashMap<HoldId, Row>,
    /// Decided transactions.
    pub(super) txns: HashMap<TxnId, TxnRow>,
    pub(super) grid: Option<Grid>,
    /// The owner of each journaled hold that has one (`JournalEntry::Held::owner`).
    pub(super) owners: HashMap<HoldId, String>,
    pub(super) projects: std::collections::BTreeMap<String, Project>,
    /// Live charges: plan -> (project, usage) (see `DecisionStore::record_decision`).
    pub(super) charges: HashMap<Uuid, (String, Vec<Usage>)>,
    /// The event log, oldest first (ids 1, 2, ...).
    pub(super) events: Vec<PlanEvent>,
    /// How far the clock has moved each plan (`advanced_to` in PostgreSQL): its parts' starts
    /// and ends up to this have had their events.
    pub(super) advanced_to: HashMap<Uuid, DateTime<Utc>>,
    /// Webhooks in creation order, each with its lease and delivery log.
    pub(super) webhooks: Vec<(WebhookRecord, Option<Lease>, std::collections::VecDeque<DeliveryRecord>)>,
}

/// A webhook's lease: its holder and until when.
pub(super) type Lease = (String, DateTime<Utc>);

impl Inner {
    /// Records the event of plan `id` reaching its current status (under the store's lock, with
    /// the change).
    pub(super) fn event(&mut self, id: Uuid) {
        let next = self.events.len() as i64 + 1;
        if let Some(p) = self.plans.get(&id) {
            self.events.push(PlanEvent::of(next, Utc::now(), p));
        }
    }

    /// Records the event of a part of plan `id` passing its start or end `b`.
    pub(super) fn part_event(&mut self, id: Uuid, b: PartBoundary) {
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
    pub(super) fn charge_check(&self, user: &str, usage: &[Usage], except: Option<Uuid>) -> Result<String, StoreError> {
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
    pub(super) fn decided(
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
                let hold = StoredHold { part: p.clone(), state: HoldState::Committed, via_api: false };
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
    pub(super) fn modified(&mut self, id: Uuid, outcome: &Outcome, bookings: &[crate::protocol::decision::Booking]) {
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
