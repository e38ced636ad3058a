//! [`MemoryStore`]: the [`Store`] in process memory. Nothing survives a restart.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{KeyClaim, PlanFilter, PlanRecord, PlanStatus, Store, StoreError, TokenRecord};

#[derive(Default)]
struct Inner {
    plans: HashMap<Uuid, PlanRecord>,
    /// Insertion order of `plans` (listing is oldest first).
    order: Vec<Uuid>,
    /// `(user, key)` -> `None` while in progress, `Some((plan, fingerprint))` once done.
    keys: HashMap<(String, String), Option<(Uuid, String)>>,
    tokens: HashMap<String, TokenRecord>,
}

/// Everything in one mutex: the API's state is small next to the calendars.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

impl MemoryStore {
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
        Ok(g.plans.get_mut(&id).map(|p| {
            p.status = PlanStatus::Cancelled;
            p.cancelled_at.get_or_insert(at);
            p.clone()
        }))
    }

    async fn claim_key(&self, user: &str, key: &str) -> Result<KeyClaim, StoreError> {
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
        assert_eq!(s.claim_key("u", "k").await.unwrap(), KeyClaim::Claimed);
        assert_eq!(s.claim_key("u", "k").await.unwrap(), KeyClaim::InProgress);
        assert_eq!(s.claim_key("v", "k").await.unwrap(), KeyClaim::Claimed, "keys are per user");
        let p = Uuid::new_v4();
        s.complete_key("u", "k", p, "f").await.unwrap();
        s.release_key("u", "k").await.unwrap();
        assert_eq!(s.claim_key("u", "k").await.unwrap(), KeyClaim::Done { plan: p, fingerprint: "f".into() });
        s.release_key("v", "k").await.unwrap();
        assert_eq!(s.claim_key("v", "k").await.unwrap(), KeyClaim::Claimed);
    }
}
