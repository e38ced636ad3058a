//! The event log (`Inner::events`, in commit order) and the webhooks, with their leases and
//! delivery logs.

use async_trait::async_trait;
use uuid::Uuid;

use crate::store::{
    DeliveryRecord, EventStore, PlanEvent, StoreError, WebhookInsert, WebhookLease, WebhookRecord, WebhookStore,
};

use super::inner::Inner;
use super::MemoryStore;

#[async_trait]
impl EventStore for MemoryStore {
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
}

#[async_trait]
impl WebhookStore for MemoryStore {
    async fn insert_webhook(
        &self,
        w: WebhookRecord,
        max_per_owner: Option<usize>,
    ) -> Result<WebhookInsert, StoreError> {
        let mut g = self.lock();
        let n = g.webhooks.iter().filter(|x| x.0.owner == w.owner).count();
        if max_per_owner.is_some_and(|limit| n >= limit) {
            return Ok(WebhookInsert::AtLimit { webhooks: n });
        }
        g.webhooks.push((w, None, Default::default()));
        Ok(WebhookInsert::Inserted)
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

    async fn lease_due_webhooks(&self, lease: WebhookLease<'_>) -> Result<Vec<WebhookRecord>, StoreError> {
        let WebhookLease { owner, now, lease_s, limit } = lease;
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
}
