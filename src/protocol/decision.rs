//! The coordinator's side of durable two-phase commit: the decision log and its records (a
//! decided transaction's parts, a booked part, a transaction in doubt). They live in
//! `protocol`, below the planner, so that the store implements [`DecisionLog`] without knowing
//! the planner.
//!
//! The planner is the 2PC coordinator of each plan. With a [`DecisionLog`] (the service passes
//! one per request; replay, the CLI and the simulator pass none) it writes its decision
//! before any participant hears it, so a restarted coordinator can finish what it started
//! (presumed abort: a transaction with no logged decision was never committed anywhere, and
//! its holds end at their lease).
//!
//! Two orders, chosen by [`DecisionLog::shares_fate`]:
//! - **remote, durable participants** (role-separated deployment): holds are journaled by
//!   the participants ([`crate::protocol::Journaled`]); the planner logs the decision
//!   ([`DecisionLog::decide`]), sends every commit, then logs the end ([`DecisionLog::finish`]).
//!   A commit that gets no answer is retried (commit is idempotent); a participant that
//!   refuses (its lease ran out) makes the coordinator log that it gives the transaction up
//!   ([`DecisionLog::compensating`]) *before* releasing anything, then compensate, then log the
//!   end as rejected. If any of this cannot be done now (a participant or the log does not
//!   answer), the plan stays in doubt and is never reported committed: a recovery loop
//!   (the planner's `Planner::recover`) settles it once everything answers again.
//! - **participants in the coordinator's own process** (all-in-one): their holds are not
//!   journaled (a crash takes coordinator and participants down together, so a hold nobody
//!   decided on dies with them, which is exactly presumed abort). The planner commits in
//!   memory, then [`DecisionLog::decide`] writes the decision *and the reservations* in one
//!   database transaction: one durable write per booked plan. If that write fails, the
//!   in-memory reservations are released and the request is rejected.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::model::Outcome;
use crate::protocol::{BackendError, HoldId, HoldRequest, ParticipantRef, TxnId};

/// One committed reservation of a plan: whom to ask to release it, and its id there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Booking {
    #[serde(flatten)]
    pub participant: ParticipantRef,
    pub hold: HoldId,
}

/// `bookings` with every reservation that a part of `parts` replaces swapped for that part's
/// hold: the plan's bookings once a modification is committed.
pub fn replaced_bookings(bookings: &[Booking], parts: &[PartHold]) -> Vec<Booking> {
    bookings
        .iter()
        .map(|b| match parts.iter().find(|p| p.request.replaces() == Some(b.hold)) {
            Some(p) => p.booking(),
            None => b.clone(),
        })
        .collect()
}

/// A transaction whose commit decision is logged but whose end is not.
#[derive(Debug, Clone)]
pub struct InDoubt {
    /// The transaction.
    pub txn: TxnId,
    /// Its parts, as logged with the decision.
    pub parts: Vec<PartHold>,
    /// The committed outcome logged with the decision.
    pub outcome: Outcome,
    /// Its coordinator logged that it gives the transaction up ([`DecisionLog::compensating`]):
    /// only the compensation remains to be finished.
    pub compensating: bool,
}

/// One part of a decided transaction: who holds it, its id there, and what it books.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartHold {
    /// The LIS or the NIS that keeps the hold.
    pub participant: ParticipantRef,
    /// The hold's id there.
    pub hold: HoldId,
    /// The prepare message that made it (what it books: site or links, amount, interval).
    pub request: HoldRequest,
}

impl PartHold {
    /// The plan's reference to this part's reservation once committed.
    pub fn booking(&self) -> Booking {
        Booking { participant: self.participant.clone(), hold: self.hold }
    }
}

/// The decision to commit transaction `txn`: its parts and the outcome the client will see.
#[derive(Debug, Clone, Copy)]
pub struct Decision<'a> {
    /// The transaction (one plan attempt).
    pub txn: TxnId,
    /// Every hold of the plan.
    pub parts: &'a [PartHold],
    /// The committed outcome (status `committed`).
    pub outcome: &'a Outcome,
}

/// A failed log write: nothing was written.
///
/// As for [`crate::protocol::JournalError`], the store's own error (its `StoreError`, holding
/// the `sqlx::Error`) travels as a [`BackendError`], since `protocol` does not know the store.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LogError {
    /// The log's store did not answer; retrying later is safe. The message includes the
    /// cause's (the outcome of a plan the log refused names it).
    #[error("decision log unavailable: {0}")]
    Unavailable(#[source] BackendError),
    /// The request or transaction has passed to another coordinator (this one stalled past
    /// its claim's lease); this coordinator must leave it alone.
    #[error("the transaction has passed to another coordinator")]
    Superseded,
    /// The log refuses this decision for a reason of its own (an allocation limit, checked
    /// with the decision's write): nothing was written, and the plan is rejected with this
    /// text as its reason.
    #[error("{0}")]
    Refused(String),
}

impl LogError {
    /// The log's store failed with `cause`.
    pub fn unavailable(cause: impl Into<BackendError>) -> Self {
        LogError::Unavailable(cause.into())
    }
}

/// The coordinator's durable decision log (see the module docs).
#[async_trait]
pub trait DecisionLog: Send + Sync {
    /// True when the participants live in this process and journal none of the planner's
    /// holds: then the planner commits in memory first and [`DecisionLog::decide`] must make
    /// the parts durable as reservations.
    fn shares_fate(&self) -> bool;
    /// Records the commit decision; durable when it returns `Ok`.
    async fn decide(&self, d: &Decision<'_>) -> Result<(), LogError>;
    /// Records that the coordinator gives the decided transaction `txn` up (a part refused
    /// its commit); durable when it returns `Ok`, before any part is released.
    async fn compensating(&self, txn: TxnId) -> Result<(), LogError>;
    /// Records that phase 2 of a decided transaction ended, and how ([`Ending`]).
    async fn finish(&self, txn: TxnId, ending: Ending<'_>) -> Result<(), LogError>;
}

/// How phase 2 of a decided transaction ended ([`DecisionLog::finish`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ending<'a> {
    /// Every part committed.
    Committed,
    /// A decided modification some parts of which could not commit: the decision stands for
    /// the others, and the plan is broken. The outcome's jobs and transfers (in the plan's
    /// order) say which in their `broken`; they hold no reservation, old or new.
    Broken(&'a Outcome),
    /// A part refused its commit and everything was released (compensation): the outcome the
    /// client sees instead (rejected).
    Compensated(&'a Outcome),
}

/// Fault injection for the crash tests: when the environment variable `CORESERVE_CRASH_AT`
/// names `point`, the process aborts on the spot (as `kill -9` would, with no cleanup).
/// Points: `after-prepare` (every hold granted, no decision), `after-decision` (the decision
/// is durable, phase 2 not sent), `after-commit` (every part committed; all-in-one: in
/// memory, before the decision is written; role-separated: before the end is recorded),
/// `after-compensating` (the coordinator logged that it gives up, nothing released yet).
pub fn crash_point(point: &str) {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    if AT.get_or_init(|| std::env::var("CORESERVE_CRASH_AT").ok()).as_deref() == Some(point) {
        eprintln!("CORESERVE_CRASH_AT={point}: aborting");
        std::process::abort();
    }
}
