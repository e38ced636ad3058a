//! The plans: insert, read, list, cancel, break, and the clock's advance of their status (with
//! the events of their parts' starts and ends).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::model::{Outcome, PlanStatus};
use crate::protocol::HoldId;
use crate::store::{part_boundaries, status_in_time, PartBoundary, PlanFilter, PlanRecord, PlanStore, StoreError};

use super::inner::Life;
use super::MemoryStore;

pub(super) fn matches(p: &PlanRecord, f: &PlanFilter) -> bool {
    let start = p.outcome.start;
    f.owner.is_none_or(|o| o == p.owner)
        && f.status.is_none_or(|s| s == p.status)
        && f.from.is_none_or(|from| start.is_some_and(|st| st >= from))
        && f.to.is_none_or(|to| start.is_some_and(|st| st < to))
}

#[async_trait]
impl PlanStore for MemoryStore {
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

    async fn advance_plans(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        let mut g = self.lock();
        let mut moved = 0;
        for i in 0..g.order.len() {
            let id = g.order[i];
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
}
