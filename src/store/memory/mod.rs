//! [`MemoryStore`]: the [`Store`] in process memory. Nothing survives a restart.
//!
//! This file holds the store (everything behind one mutex, and the guard that wakes the event
//! readers) and the [`Store`] impl, whose every method is the inherent method of the same name
//! (inherent methods win a method call's lookup) in the file of its concern, as in
//! `store::postgres`:
//!
//! - `inner`: the state behind the mutex, its rows, and the writes several concerns share;
//! - `plans`: the plans, and the clock's advance of their status;
//! - `claims`: idempotency keys and claims; `tokens`: API tokens and principals;
//! - `decisions`: the coordinators' decision log and the recovery of transactions in doubt;
//! - `journal`: the participants' journal (the [`crate::protocol::Journal`] impl) and live holds;
//! - `grid`: the grid, projects and allocation charges;
//! - `events`: the event log and the webhooks; `prune`: the pruning of finished records.

mod claims;
mod decisions;
mod events;
mod grid;
mod inner;
mod journal;
mod plans;
mod prune;
mod tokens;

use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{
    Claim, DecisionRecord, DeliveryRecord, KeyClaim, ModificationRecord, PlanEvent, PlanFilter, PlanRecord,
    RejectionRecord, Store, StoreError, StoredHold, TokenRecord, WebhookRecord,
};
use crate::fairshare::{Project, Usage};
use crate::model::{Grid, Outcome, Site, Time};
use crate::protocol::decision::{Ending, InDoubt};
use crate::protocol::{HoldId, TxnId};
use inner::Inner;

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

#[async_trait]
impl Store for MemoryStore {
    async fn insert_plan(&self, plan: PlanRecord) -> Result<(), StoreError> {
        self.insert_plan(plan).await
    }

    async fn plan(&self, id: Uuid) -> Result<Option<PlanRecord>, StoreError> {
        self.plan(id).await
    }

    async fn list_plans(&self, filter: &PlanFilter) -> Result<Vec<PlanRecord>, StoreError> {
        self.list_plans(filter).await
    }

    async fn mark_cancelled(&self, id: Uuid, at: DateTime<Utc>) -> Result<Option<PlanRecord>, StoreError> {
        self.mark_cancelled(id, at).await
    }

    async fn plan_of_hold(&self, hold: HoldId) -> Result<Option<PlanRecord>, StoreError> {
        self.plan_of_hold(hold).await
    }

    async fn mark_broken(&self, id: Uuid, outcome: &Outcome) -> Result<Option<PlanRecord>, StoreError> {
        self.mark_broken(id, outcome).await
    }

    async fn claim_key(&self, owner: Uuid, key: &str, claim: &Claim) -> Result<KeyClaim, StoreError> {
        self.claim_key(owner, key, claim).await
    }

    async fn release_key(&self, owner: Uuid, key: &str, claim: &Claim) -> Result<(), StoreError> {
        self.release_key(owner, key, claim).await
    }

    async fn renew_claims(&self, claims: &[Uuid], lease_s: i64) -> Result<(), StoreError> {
        self.renew_claims(claims, lease_s).await
    }

    async fn insert_token(&self, token: TokenRecord) -> Result<(), StoreError> {
        self.insert_token(token).await
    }

    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        self.token(hash).await
    }

    async fn revoke_token(&self, id: Uuid) -> Result<Option<TokenRecord>, StoreError> {
        self.revoke_token(id).await
    }

    async fn end_all_claims(&self) -> Result<u64, StoreError> {
        self.end_all_claims().await
    }

    async fn record_decision(&self, r: &DecisionRecord<'_>) -> Result<(), StoreError> {
        self.record_decision(r).await
    }

    async fn record_modification(&self, r: &ModificationRecord<'_>) -> Result<(), StoreError> {
        self.record_modification(r).await
    }

    async fn record_rejection(&self, r: &RejectionRecord<'_>) -> Result<(), StoreError> {
        self.record_rejection(r).await
    }

    async fn mark_compensating(&self, txn: TxnId, claim: &Claim) -> Result<(), StoreError> {
        self.mark_compensating(txn, claim).await
    }

    async fn finish_txn(&self, txn: TxnId, claim: &Claim, ending: Ending<'_>) -> Result<(), StoreError> {
        self.finish_txn(txn, claim, ending).await
    }

    async fn take_in_doubt(&self, claim: &Claim, limit: usize) -> Result<Vec<InDoubt>, StoreError> {
        self.take_in_doubt(claim, limit).await
    }

    async fn live_holds(&self, now: Time) -> Result<Vec<StoredHold>, StoreError> {
        self.live_holds(now).await
    }

    async fn live_hold_owners(&self, now: Time) -> Result<Vec<(HoldId, String)>, StoreError> {
        self.live_hold_owners(now).await
    }

    async fn expire_holds(&self, now: Time) -> Result<u64, StoreError> {
        self.expire_holds(now).await
    }

    async fn save_grid(&self, grid: &Grid) -> Result<(), StoreError> {
        self.save_grid(grid).await
    }

    async fn load_grid(&self) -> Result<Option<Grid>, StoreError> {
        self.load_grid().await
    }

    async fn save_project(&self, project: &Project) -> Result<(), StoreError> {
        self.save_project(project).await
    }

    async fn projects(&self) -> Result<Vec<Project>, StoreError> {
        self.projects().await
    }

    async fn live_charges(&self, since: Time) -> Result<Vec<(Uuid, String, Vec<Usage>)>, StoreError> {
        self.live_charges(since).await
    }

    async fn charged(&self, project: &str, from: Time, to: Time) -> Result<Vec<Usage>, StoreError> {
        self.charged(project, from, to).await
    }

    async fn save_site(&self, site: &Site) -> Result<(), StoreError> {
        self.save_site(site).await
    }

    async fn advance_plans(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        self.advance_plans(now).await
    }

    async fn events_after(&self, after: i64, owner: Option<Uuid>, limit: i64) -> Result<Vec<PlanEvent>, StoreError> {
        self.events_after(after, owner, limit).await
    }

    async fn last_event_id(&self) -> Result<i64, StoreError> {
        self.last_event_id().await
    }

    fn event_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.signal.subscribe()
    }

    async fn insert_webhook(&self, w: WebhookRecord) -> Result<(), StoreError> {
        self.insert_webhook(w).await
    }

    async fn webhooks(&self, owner: Option<Uuid>) -> Result<Vec<WebhookRecord>, StoreError> {
        self.webhooks(owner).await
    }

    async fn webhook(&self, id: Uuid) -> Result<Option<WebhookRecord>, StoreError> {
        self.webhook(id).await
    }

    async fn delete_webhook(&self, id: Uuid) -> Result<bool, StoreError> {
        self.delete_webhook(id).await
    }

    async fn lease_due_webhooks(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        lease_s: i64,
        limit: i64,
    ) -> Result<Vec<WebhookRecord>, StoreError> {
        self.lease_due_webhooks(owner, now, lease_s, limit).await
    }

    async fn record_deliveries(
        &self,
        owner: &str,
        webhook: &WebhookRecord,
        deliveries: &[DeliveryRecord],
    ) -> Result<(), StoreError> {
        self.record_deliveries(owner, webhook, deliveries).await
    }

    async fn release_webhook(&self, owner: &str, id: Uuid) -> Result<(), StoreError> {
        self.release_webhook(owner, id).await
    }

    async fn deliveries(&self, id: Uuid, limit: i64) -> Result<Vec<DeliveryRecord>, StoreError> {
        self.deliveries(id, limit).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "memory"
    }

    async fn prune_finished(&self, horizon: DateTime<Utc>) -> Result<super::Pruned, StoreError> {
        self.prune_finished(horizon).await
    }
}
