//! The pruning of finished records past the retention horizon.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::model::PlanStatus;
use crate::protocol::{HoldId, HoldState, TxnId};
use crate::store::{PlanRecord, StoreError};

use super::inner::{Inner, Life};
use super::MemoryStore;

impl MemoryStore {
    /// As PostgreSQL's, but events stay (their ids are their positions in the log) and there
    /// is no delivery log or released charge to prune (a released charge is removed at once).
    pub(super) async fn prune_finished(&self, horizon: DateTime<Utc>) -> Result<crate::store::Pruned, StoreError> {
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
                    && r.hold.part.request.interval().1 < horizon_t
                    && !booked(&g, &r.plan)
                    && !in_doubt.contains(&r.hold.part.request.txn())
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
        Ok(crate::store::Pruned {
            plans: gone.len() as u64,
            idempotency_keys: (keys_before - g.keys.len()) as u64,
            journal: old_holds.len() as u64,
            decisions: old_txns.len() as u64,
            ..Default::default()
        })
    }
}
