//! [`StoreDecisionLog`]: the planner's decision log ([`DecisionLog`]) over the service's [`Store`], one
//! per plan request, so that the decision, the plan record and the idempotency key are one
//! durable write (and, all-in-one, the reservations too; see [`crate::protocol::decision`]).

use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::model::PlanStatus;
use crate::protocol::decision::{replaced_bookings, Decision, DecisionLog, Ending, LogError, PartHold};
use crate::protocol::{BackendError, TxnId};
use crate::store::{Claim, DecisionRecord, ModificationRecord, PlanRecord, Store, StoreError};

/// The plan a request will store if the planner decides to commit.
pub struct PlanMeta<'a> {
    /// The plan's own id (`/v1/plans/{id}`).
    pub id: Uuid,
    /// Its owner's name (the token's user), as shown.
    pub user: &'a str,
    /// Its owner: the caller's principal id.
    pub owner: Uuid,
    /// When the request was received.
    pub created_at: DateTime<Utc>,
    /// `(Idempotency-Key, body fingerprint)` of the request, if it sent one.
    pub key: Option<(&'a str, &'a str)>,
}

/// The plan a modification changes, and the key of its request.
pub struct ModificationMeta<'a> {
    /// The plan as the modification found it.
    pub plan: &'a PlanRecord,
    /// `(Idempotency-Key, body fingerprint)` of the request, if it sent one.
    pub key: Option<(&'a str, &'a str)>,
}

/// What a [`StoreDecisionLog`] records decisions for.
enum Deciding<'a> {
    /// A new plan.
    Plan(PlanMeta<'a>),
    /// A modification of a committed plan.
    Modification(ModificationMeta<'a>),
    /// Recovery: no new decisions.
    Recovery,
}

/// A decision log over a store, for one request (a new plan or a modification) or for
/// recovery (no new decisions). Every write is made under `claim`: the request's claim on its
/// key and its transaction, or the recovery round's claim on the transactions it took over.
pub struct StoreDecisionLog<'a> {
    store: &'a dyn Store,
    shares_fate: bool,
    claim: &'a Claim,
    deciding: Deciding<'a>,
    /// The plan record as written with the decision (and updated by a compensation); for a
    /// modification, the plan as it is once the decision or its end is written.
    decided: Mutex<Option<PlanRecord>>,
    /// A remote modification's plan as it will be once its end is recorded.
    modified: Mutex<Option<PlanRecord>>,
}

impl<'a> StoreDecisionLog<'a> {
    /// `shares_fate`: the planner's participants live in this process (all-in-one).
    pub fn new(store: &'a dyn Store, shares_fate: bool, claim: &'a Claim, plan: Option<PlanMeta<'a>>) -> Self {
        let deciding = plan.map_or(Deciding::Recovery, Deciding::Plan);
        StoreDecisionLog { store, shares_fate, claim, deciding, decided: Mutex::new(None), modified: Mutex::new(None) }
    }

    /// A log for the modification of `meta.plan` (see [`StoreDecisionLog::new`]).
    pub fn modifying(store: &'a dyn Store, shares_fate: bool, claim: &'a Claim, meta: ModificationMeta<'a>) -> Self {
        let deciding = Deciding::Modification(meta);
        StoreDecisionLog { store, shares_fate, claim, deciding, decided: Mutex::new(None), modified: Mutex::new(None) }
    }

    /// The stored plan, if a decision was written: committed, pending (its end is not
    /// recorded), or rejected by compensation.
    pub fn decided(self) -> Option<PlanRecord> {
        self.decided.into_inner().expect("decision lock")
    }
}

#[async_trait]
impl DecisionLog for StoreDecisionLog<'_> {
    fn shares_fate(&self) -> bool {
        self.shares_fate
    }

    async fn decide(&self, d: &Decision<'_>) -> Result<(), LogError> {
        let meta = match &self.deciding {
            Deciding::Plan(meta) => meta,
            Deciding::Modification(m) => return self.decide_modification(m, d).await,
            Deciding::Recovery => unreachable!("a recovery log records no new decisions"),
        };
        let plan = PlanRecord {
            id: meta.id,
            user: meta.user.to_owned(),
            owner: meta.owner,
            // In process, the decision is the end; remote, committed once the end is logged.
            status: if self.shares_fate { PlanStatus::Committed } else { PlanStatus::Pending },
            outcome: d.outcome.clone(),
            bookings: d.parts.iter().map(PartHold::booking).collect(),
            created_at: meta.created_at,
            cancelled_at: None,
        };
        let record = DecisionRecord {
            decision: *d,
            plan: &plan,
            reservations: self.shares_fate,
            key: meta.key,
            claim: self.claim,
        };
        self.store.record_decision(&record).await.map_err(log_error)?;
        *self.decided.lock().expect("decision lock") = Some(plan);
        Ok(())
    }

    async fn compensating(&self, txn: TxnId) -> Result<(), LogError> {
        self.store.mark_compensating(txn, self.claim).await.map_err(log_error)
    }

    async fn finish(&self, txn: TxnId, ending: Ending<'_>) -> Result<(), LogError> {
        if self.shares_fate && !matches!(ending, Ending::Compensated(_)) {
            // All-in-one: the decision was written finished (a part broken after it is marked
            // by the caller, see `Coordinator::decide_then_commit`).
            return Ok(());
        }
        self.store.finish_txn(txn, self.claim, ending).await.map_err(log_error)?;
        let mut decided = self.decided.lock().expect("decision lock");
        if let Deciding::Modification(m) = &self.deciding {
            // Committed: the plan as modified (broken: with the store's broken marks); compensated:
            // as it was.
            let modified = self.modified.lock().expect("decision lock").take();
            *decided = match ending {
                Ending::Committed => modified,
                Ending::Broken(o) => modified.map(|mut p| {
                    p.outcome.take_broken_from(o);
                    p.status = PlanStatus::Broken;
                    p
                }),
                Ending::Compensated(_) => Some(m.plan.clone()),
            };
            return Ok(());
        }
        if let Some(plan) = decided.as_mut() {
            match ending {
                Ending::Committed | Ending::Broken(_) => plan.status = PlanStatus::Committed,
                Ending::Compensated(rejected) => {
                    plan.status = PlanStatus::Rejected;
                    plan.outcome = rejected.clone();
                    plan.bookings.clear();
                }
            }
        }
        Ok(())
    }
}

impl StoreDecisionLog<'_> {
    /// A modification's decision: the plan as modified is written at once (all-in-one) or
    /// once the end is recorded (remote participants).
    async fn decide_modification(&self, m: &ModificationMeta<'_>, d: &Decision<'_>) -> Result<(), LogError> {
        let bookings = replaced_bookings(&m.plan.bookings, d.parts);
        let record = ModificationRecord {
            decision: *d,
            plan: m.plan.id,
            replaced: &m.plan.bookings,
            bookings: &bookings,
            reservations: self.shares_fate,
            key: m.key,
            owner: m.plan.owner,
            claim: self.claim,
        };
        self.store.record_modification(&record).await.map_err(log_error)?;
        let modified = PlanRecord { outcome: d.outcome.clone(), bookings, ..m.plan.clone() };
        if self.shares_fate {
            *self.decided.lock().expect("decision lock") = Some(modified);
        } else {
            *self.modified.lock().expect("decision lock") = Some(modified);
        }
        Ok(())
    }
}

fn log_error(e: StoreError) -> LogError {
    match e {
        StoreError::Superseded => LogError::Superseded,
        StoreError::AllocationExceeded(e) => LogError::Refused(e.to_string()),
        e => LogError::Unavailable(BackendError::new(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Outcome, PlanStatus};
    use crate::protocol::decision::{Decision, PartHold};
    use crate::protocol::{ComputeHoldRequest, HoldId, ParticipantRef};
    use crate::store::MemoryStore;
    use crate::store::PlanStore;

    /// Issue: a plan whose phase 2 had failed was answered and stored `committed`. Remote
    /// participants: the plan written with the decision is `pending`, and only the recorded
    /// end makes it `committed`, in the store and in what the request answers.
    #[tokio::test]
    async fn a_remote_decision_stores_a_pending_plan_committed_only_at_its_end() {
        let store = MemoryStore::new();
        let claim = Claim::new("test", 60);
        let meta = PlanMeta { id: Uuid::new_v4(), user: "u", owner: Uuid::new_v4(), created_at: Utc::now(), key: None };
        let id = meta.id;
        let log = StoreDecisionLog::new(&store, false, &claim, Some(meta));
        let mut outcome = Outcome::rejected("r", "", "p0");
        outcome.status = PlanStatus::Committed;
        let txn = TxnId::new();
        let parts = [PartHold {
            participant: ParticipantRef::Site("s1".into()),
            hold: HoldId::new(),
            request: ComputeHoldRequest {
                replaces: None,
                reservation_name: None,
                txn,
                site: "s1".into(),
                cpus: 1,
                start: 0,
                end: 60,
                gpus: None,
                user: None,
            }
            .into(),
        }];
        log.decide(&Decision { txn, parts: &parts, outcome: &outcome }).await.unwrap();
        assert_eq!(store.plan(id).await.unwrap().unwrap().status, PlanStatus::Pending);
        log.finish(txn, Ending::Committed).await.unwrap();
        assert_eq!(store.plan(id).await.unwrap().unwrap().status, PlanStatus::Committed);
        assert_eq!(log.decided().unwrap().status, PlanStatus::Committed);
        // A finish under a claim that does not own the transaction is refused.
        let other = Claim::new("other", 60);
        let stale = StoreDecisionLog::new(&store, false, &other, None);
        assert!(matches!(stale.finish(txn, Ending::Committed).await, Err(LogError::Superseded)));
    }
}
