//! Coordinator recovery: finishing the transactions a crashed planner had decided to commit.

use std::sync::Arc;

use super::log::{CommitLog, DecidedPart, LogError};
use super::Planner;
use crate::model::Outcome;
use crate::protocol::{Participant, ParticipantError, ParticipantRef, TxnId};

/// A transaction whose commit decision is logged but whose end is not (read at start).
#[derive(Debug, Clone)]
pub struct InDoubt {
    /// The transaction.
    pub txn: TxnId,
    /// Its parts, as logged with the decision.
    pub parts: Vec<DecidedPart>,
    /// The committed outcome logged with the decision.
    pub outcome: Outcome,
}

/// What [`Planner::recover`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Transactions whose every part is now committed.
    pub committed: usize,
    /// Transactions a part of which could not commit any more: every part was released and
    /// the plan rejected (it was never reported committed: the coordinator died first).
    pub compensated: usize,
}

impl Planner {
    pub(super) fn participant(&self, who: &ParticipantRef) -> Result<Arc<dyn Participant>, ParticipantError> {
        match who {
            ParticipantRef::Site(site) => {
                self.services.lis.get(site).cloned().ok_or_else(|| ParticipantError::UnknownSite(site.clone()))
            }
            ParticipantRef::Network => Ok(self.services.nis.clone()),
        }
    }

    /// Finishes every in-doubt transaction (decision logged -> commit again; commit is
    /// idempotent), then records its end in `log`. A part already released (the plan was
    /// cancelled after committing) counts as done. A part that refuses (its lease ended while
    /// the coordinator was down, or its participant forgot it) makes the plan all-or-nothing
    /// again: the other parts are released or aborted and the transaction is recorded as
    /// compensated with a rejected outcome.
    ///
    /// Transactions with no logged decision need nothing: presumed abort, their holds end at
    /// their lease.
    ///
    /// # Errors
    /// The log cannot be written; the remaining transactions stay in doubt for the next start.
    pub async fn recover(&self, in_doubt: &[InDoubt], log: &dyn CommitLog) -> Result<Recovery, LogError> {
        let mut report = Recovery::default();
        for t in in_doubt {
            let mut refused = None;
            for part in &t.parts {
                let r = match self.participant(&part.participant) {
                    Ok(p) => p.commit(part.hold).await,
                    Err(e) => Err(e),
                };
                match r {
                    Ok(()) | Err(ParticipantError::NotCommitted(_)) => {}
                    Err(e) => {
                        refused = Some(format!("commit failed after a coordinator restart: {e}"));
                        break;
                    }
                }
            }
            match refused {
                None => {
                    log.finish(t.txn, Ok(())).await?;
                    report.committed += 1;
                }
                Some(reason) => {
                    for part in &t.parts {
                        if let Ok(p) = self.participant(&part.participant) {
                            // Committed parts are released, held ones aborted; one of the two
                            // refuses harmlessly.
                            let _ = p.release(part.hold).await;
                            let _ = p.abort(part.hold).await;
                        }
                    }
                    let mut rejected = Outcome::rejected(&t.outcome.request_id, reason, &t.outcome.planner);
                    rejected.messages = t.outcome.messages;
                    log.finish(t.txn, Err(&rejected)).await?;
                    report.compensated += 1;
                }
            }
            tracing::info!(txn = %t.txn, ?report, "recovered an in-doubt transaction");
        }
        Ok(report)
    }
}
