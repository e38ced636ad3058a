//! [`StoreLog`]: the planner's decision log ([`CommitLog`]) over the service's [`Store`], one
//! per plan request, so that the decision, the plan record and the idempotency key are one
//! durable write (and, all-in-one, the reservations too; see [`crate::planner::log`]).

use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::model::Outcome;
use crate::planner::log::{CommitLog, Decision, LogError};
use crate::planner::Booking;
use crate::protocol::TxnId;
use crate::store::{DecisionRecord, PlanRecord, PlanStatus, Store};

/// The plan a request will store if the planner decides to commit.
pub struct PlanMeta<'a> {
    /// The plan's own id (`/v1/plans/{id}`).
    pub id: Uuid,
    /// Its owner (the token's user).
    pub user: &'a str,
    /// When the request was received.
    pub created_at: DateTime<Utc>,
    /// `(Idempotency-Key, body fingerprint)` of the request, if it sent one.
    pub key: Option<(&'a str, &'a str)>,
}

/// A decision log over a store, for one request (`plan`) or for recovery (`None`: only
/// [`CommitLog::finish`] is used).
pub struct StoreLog<'a> {
    store: &'a dyn Store,
    shares_fate: bool,
    plan: Option<PlanMeta<'a>>,
    /// The plan record as written with the decision (and updated by a compensation).
    decided: Mutex<Option<PlanRecord>>,
}

impl<'a> StoreLog<'a> {
    /// `shares_fate`: the planner's participants live in this process (all-in-one).
    pub fn new(store: &'a dyn Store, shares_fate: bool, plan: Option<PlanMeta<'a>>) -> Self {
        StoreLog { store, shares_fate, plan, decided: Mutex::new(None) }
    }

    /// The stored plan, if a decision was written (committed, or rejected by compensation).
    pub fn decided(self) -> Option<PlanRecord> {
        self.decided.into_inner().expect("decision lock")
    }
}

#[async_trait]
impl CommitLog for StoreLog<'_> {
    fn shares_fate(&self) -> bool {
        self.shares_fate
    }

    async fn decide(&self, d: &Decision<'_>) -> Result<(), LogError> {
        let meta = self.plan.as_ref().ok_or_else(|| LogError("a recovery log records no new decisions".into()))?;
        let plan = PlanRecord {
            id: meta.id,
            user: meta.user.to_owned(),
            status: PlanStatus::Committed,
            outcome: d.outcome.clone(),
            bookings: d.parts.iter().map(|p| Booking { participant: p.participant.clone(), hold: p.hold }).collect(),
            created_at: meta.created_at,
            cancelled_at: None,
        };
        let record = DecisionRecord { decision: *d, plan: &plan, reservations: self.shares_fate, key: meta.key };
        self.store.record_decision(&record).await.map_err(|e| LogError(e.to_string()))?;
        *self.decided.lock().expect("decision lock") = Some(plan);
        Ok(())
    }

    async fn finish(&self, txn: TxnId, result: Result<(), &Outcome>) -> Result<(), LogError> {
        match result {
            // All-in-one: the decision was written finished.
            Ok(()) if self.shares_fate => return Ok(()),
            Ok(()) => self.store.finish_txn(txn, None).await,
            Err(rejected) => self.store.finish_txn(txn, Some(rejected)).await,
        }
        .map_err(|e| LogError(e.to_string()))?;
        if let (Err(rejected), Some(plan)) = (result, self.decided.lock().expect("decision lock").as_mut()) {
            plan.status = PlanStatus::Rejected;
            plan.outcome = rejected.clone();
            plan.bookings.clear();
        }
        Ok(())
    }
}
