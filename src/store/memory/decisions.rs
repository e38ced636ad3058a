//! The coordinators' decision log: decisions, modifications and rejections written with their
//! plan, the ends of transactions, and the recovery of those in doubt.

use async_trait::async_trait;
use std::collections::HashSet;
use std::time::Instant;

use uuid::Uuid;

use crate::fairshare::Usage;
use crate::model::PlanStatus;
use crate::protocol::decision::{Ending, InDoubt};
use crate::protocol::TxnId;
use crate::store::{Claim, DecisionRecord, DecisionStore, ModificationRecord, RejectionRecord, StoreError};

use super::claims::complete_key;
use super::inner::{lease, Life, TxnRow};
use super::MemoryStore;

#[async_trait]
impl DecisionStore for MemoryStore {
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

    async fn modifications_in_doubt(&self, plans: Option<&[Uuid]>) -> Result<HashSet<Uuid>, StoreError> {
        let g = self.lock();
        Ok(g.txns
            .values()
            .filter(|t| t.doubt.is_some() && t.modification.is_some() && plans.is_none_or(|p| p.contains(&t.plan)))
            .map(|t| t.plan)
            .collect())
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
}
