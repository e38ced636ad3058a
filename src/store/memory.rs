//! [`MemoryStore`]: the [`Store`] in process memory. Nothing survives a restart.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{DecisionRecord, KeyClaim, PlanFilter, PlanRecord, PlanStatus, Store, StoreError, StoredHold, TokenRecord};
use crate::model::{Grid, Outcome, Site, Time};
use crate::planner::InDoubt;
use crate::protocol::{HoldState, Journal, JournalEntry, JournalError, TxnId};

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
    /// `(user, key)` -> `None` while in progress, `Some((plan, fingerprint))` once done.
    keys: HashMap<(String, String), Option<(Uuid, String)>>,
    tokens: HashMap<String, TokenRecord>,
    holds: HashMap<Uuid, Row>,
    /// Decided transactions: `(in doubt, plan)`.
    txns: HashMap<TxnId, (Option<InDoubt>, Uuid)>,
    grid: Option<Grid>,
    /// The owner of each journaled hold that has one (`JournalEntry::Held::owner`).
    owners: HashMap<Uuid, String>,
}

/// Everything in one mutex: the API's state is small next to the calendars.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("memory store lock")
    }
}

fn matches(p: &PlanRecord, f: &PlanFilter) -> bool {
    let start = p.outcome.start;
    f.user.as_ref().is_none_or(|u| *u == p.user)
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
        g.order.push(plan.id);
        g.plans.insert(plan.id, plan);
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
        Ok(g.plans.get_mut(&id).map(|p| {
            p.status = PlanStatus::Cancelled;
            p.cancelled_at.get_or_insert(at);
            p.clone()
        }))
    }

    /// In one process a claim can only go stale with the process, so `stale_after_s` is moot.
    async fn claim_key(&self, user: &str, key: &str, _stale_after_s: i64) -> Result<KeyClaim, StoreError> {
        let mut g = self.lock();
        let k = (user.to_owned(), key.to_owned());
        Ok(match g.keys.get(&k) {
            None => {
                g.keys.insert(k, None);
                KeyClaim::Claimed
            }
            Some(None) => KeyClaim::InProgress,
            Some(Some((plan, fingerprint))) => KeyClaim::Done { plan: *plan, fingerprint: fingerprint.clone() },
        })
    }

    async fn complete_key(&self, user: &str, key: &str, plan: Uuid, fingerprint: &str) -> Result<(), StoreError> {
        self.lock().keys.insert((user.to_owned(), key.to_owned()), Some((plan, fingerprint.to_owned())));
        Ok(())
    }

    async fn release_key(&self, user: &str, key: &str) -> Result<(), StoreError> {
        let mut g = self.lock();
        let k = (user.to_owned(), key.to_owned());
        if matches!(g.keys.get(&k), Some(None)) {
            g.keys.remove(&k);
        }
        Ok(())
    }

    async fn insert_token(&self, token: TokenRecord) -> Result<(), StoreError> {
        self.lock().tokens.insert(token.hash.clone(), token);
        Ok(())
    }

    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        Ok(self.lock().tokens.get(hash).cloned())
    }

    async fn release_pending_keys(&self) -> Result<u64, StoreError> {
        let mut g = self.lock();
        let before = g.keys.len();
        g.keys.retain(|_, v| v.is_some());
        Ok((before - g.keys.len()) as u64)
    }

    async fn record_decision(&self, r: &DecisionRecord<'_>) -> Result<(), StoreError> {
        let mut g = self.lock();
        let d = &r.decision;
        if r.reservations {
            for p in d.parts {
                let hold = StoredHold {
                    participant: p.participant.clone(),
                    hold: p.hold,
                    request: p.request.clone(),
                    state: HoldState::Committed,
                    via_api: false,
                };
                g.holds.insert(p.hold, Row { hold, life: Life::Live, plan: Some(r.plan.id) });
            }
        }
        let doubt =
            (!r.reservations).then(|| InDoubt { txn: d.txn, parts: d.parts.to_vec(), outcome: d.outcome.clone() });
        g.txns.insert(d.txn, (doubt, r.plan.id));
        if let Some((key, print)) = r.key {
            g.keys.insert((r.plan.user.clone(), key.to_owned()), Some((r.plan.id, print.to_owned())));
        }
        g.order.push(r.plan.id);
        g.plans.insert(r.plan.id, r.plan.clone());
        Ok(())
    }

    async fn finish_txn(&self, txn: TxnId, rejected: Option<&Outcome>) -> Result<(), StoreError> {
        let mut g = self.lock();
        let Some((doubt, plan)) = g.txns.get_mut(&txn) else { return Ok(()) };
        *doubt = None;
        let plan = *plan;
        if let Some(o) = rejected {
            for r in g.holds.values_mut().filter(|r| r.plan == Some(plan)) {
                r.life = Life::Ended;
            }
            if let Some(p) = g.plans.get_mut(&plan) {
                p.status = PlanStatus::Rejected;
                p.outcome = o.clone();
                p.bookings.clear();
            }
        }
        Ok(())
    }

    async fn in_doubt(&self) -> Result<Vec<InDoubt>, StoreError> {
        Ok(self.lock().txns.values().filter_map(|(d, _)| d.clone()).collect())
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

    async fn live_hold_owners(&self, now: Time) -> Result<Vec<(Uuid, String)>, StoreError> {
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

    async fn save_site(&self, site: &Site) -> Result<(), StoreError> {
        if let Some(g) = self.lock().grid.as_mut() {
            if let Some(s) = g.sites.iter_mut().find(|s| s.id == site.id) {
                *s = site.clone();
            }
        }
        Ok(())
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "memory"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keys_are_claimed_once_and_released_only_while_in_progress() {
        let s = MemoryStore::new();
        assert_eq!(s.claim_key("u", "k", 60).await.unwrap(), KeyClaim::Claimed);
        assert_eq!(s.claim_key("u", "k", 60).await.unwrap(), KeyClaim::InProgress);
        assert_eq!(s.claim_key("v", "k", 60).await.unwrap(), KeyClaim::Claimed, "keys are per user");
        let p = Uuid::new_v4();
        s.complete_key("u", "k", p, "f").await.unwrap();
        s.release_key("u", "k").await.unwrap();
        assert_eq!(s.claim_key("u", "k", 60).await.unwrap(), KeyClaim::Done { plan: p, fingerprint: "f".into() });
        s.release_key("v", "k").await.unwrap();
        assert_eq!(s.claim_key("v", "k", 60).await.unwrap(), KeyClaim::Claimed);
    }
}
