//! Coordinator recovery: settling the transactions whose commit decision is logged but whose
//! end is not (their coordinator crashed, stalled, or could not reach a participant or the log).

use std::sync::Arc;

use super::commit::{TwoPhaseError, Unsettled};
use super::coordinator::{Coordinator, Ended, HeldPart};
use super::Planner;
use crate::protocol::decision::{DecisionLog, InDoubt};
use crate::protocol::{HoldLifecycle, ParticipantError, ParticipantRef};

/// What [`Planner::recover`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Transactions whose every part is now committed.
    pub committed: usize,
    /// Transactions a part of which could not commit any more: every part was released and
    /// the plan rejected (it was never reported committed).
    pub compensated: usize,
    /// Transactions left in doubt for a later round (a participant or the log did not
    /// answer).
    pub unsettled: usize,
}

impl Planner {
    pub(super) fn participant(&self, who: &ParticipantRef) -> Result<Arc<dyn HoldLifecycle>, ParticipantError> {
        match who {
            ParticipantRef::Site(site) => {
                let lis = self.services.lis.get(site).ok_or_else(|| ParticipantError::UnknownSite(site.clone()))?;
                Ok(lis.clone())
            }
            ParticipantRef::Network => Ok(self.services.nis.clone()),
        }
    }

    /// Settles every in-doubt transaction of `in_doubt` and records its end in `log`:
    /// - decided, not compensating: commit every part again (commit is idempotent). All
    ///   committed -> the end is logged and the plan stands. A part refuses (its lease ended
    ///   while the coordinator was away, or it was released) -> all-or-nothing again: the log
    ///   first says the transaction is given up, then every part is released or aborted, then
    ///   the plan is recorded rejected.
    /// - compensating: finish the compensation, then record the plan rejected.
    ///
    /// A transaction whose participants or log do not answer definitely stays in doubt
    /// (counted in [`Recovery::unsettled`]) for the next round; so does one another
    /// coordinator took over ([`crate::protocol::decision::LogError::Superseded`]). Transactions with no logged decision
    /// need nothing: presumed abort, their holds end at their lease.
    pub async fn recover(&self, in_doubt: &[InDoubt], log: &dyn DecisionLog) -> Recovery {
        let mut report = Recovery::default();
        for t in in_doubt {
            match self.settle(t, log).await {
                Ok(true) => report.committed += 1,
                Ok(false) => report.compensated += 1,
                Err(reason) => {
                    tracing::warn!(txn = %t.txn, %reason, "an in-doubt transaction stays in doubt");
                    report.unsettled += 1;
                }
            }
        }
        if report != Recovery::default() {
            tracing::info!(?report, "recovery round");
        }
        report
    }

    /// Settles one transaction with a [`Coordinator`] over its logged parts: `Ok(true)`
    /// committed, `Ok(false)` compensated, `Err` still in doubt (why).
    async fn settle(&self, t: &InDoubt, log: &dyn DecisionLog) -> Result<bool, Unsettled> {
        let parts = t
            .parts
            .iter()
            .map(|p| Ok(HeldPart { participant: self.participant(&p.participant)?, part: p.clone() }))
            .collect::<Result<Vec<_>, ParticipantError>>()
            .map_err(TwoPhaseError::UnknownParticipant)?;
        // A modification's parts replace committed reservations (see `modify`).
        let modification = t.parts.iter().any(|p| p.request.replaces().is_some());
        let mut coordinator = Coordinator::recovering(t.txn, parts, t.outcome.clone(), modification);
        let ended = coordinator.finish_decided(log, t.compensating).await?;
        let committed = matches!(ended, Ended::Committed);
        tracing::info!(txn = %t.txn, committed, "recovered an in-doubt transaction");
        Ok(committed)
    }
}
