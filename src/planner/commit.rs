//! Phase 2 of the coordinator, shared by a planning attempt ([`super::search`]) and recovery
//! ([`super::recover`]): commit every part, or give every part back (compensation).
//!
//! A participant's answer is either *definite* (OK, or a refusal such as an expired lease: the
//! hold is gone) or *indeterminate* (no answer, or the participant could not make the change
//! durable): then nobody knows whether the change happened. Commit, abort and release are
//! idempotent, so an indeterminate answer is retried a few times; if it stays indeterminate the
//! caller must not pretend to know the result (see [`crate::protocol::decision`]).

use std::sync::Arc;
use std::time::Duration;

use super::sent::Sent;
use crate::model::SiteId;
use crate::protocol::decision::LogError;
use crate::protocol::{HoldId, HoldLifecycle, ParticipantError};

/// A part of a plan, as named in a rejection's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartName {
    /// Job `job`, placed on `site`.
    Job { job: String, site: SiteId },
    /// The transfer from job `from` to job `to`.
    Transfer { from: String, to: String },
}

impl std::fmt::Display for PartName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartName::Job { job, site } => write!(f, "job `{job}` on site `{site}`"),
            PartName::Transfer { from, to } => write!(f, "transfer {from}->{to}"),
        }
    }
}

/// Why a step of two-phase commit did not go through. Its text is what a rejected plan's
/// `reason` (or an in-doubt plan's problem detail) says.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TwoPhaseError {
    /// Phase 1 (BBR's batch): a participant refused the hold of `part`. `self_conflict` is
    /// empty or says that the plan's own parts explain the refusal (see the coordinator).
    #[error("batch prepare failed: {part}: {source}{self_conflict}")]
    PrepareRefused {
        part: PartName,
        #[source]
        source: ParticipantError,
        self_conflict: String,
    },
    /// A participant could not make its holds durable before the decision.
    #[error("a participant could not make its holds durable: {0}")]
    NotDurable(#[source] ParticipantError),
    /// Phase 2: a participant refused a commit (its hold is gone, e.g. its lease ran out).
    #[error("commit failed: {0}")]
    CommitRefused(#[source] ParticipantError),
    /// Phase 2: the commit of `hold` got no definite answer, even after retries.
    #[error("commit of hold {hold} got no answer: {source}")]
    CommitUnanswered {
        hold: HoldId,
        #[source]
        source: ParticipantError,
    },
    /// Compensation: giving `hold` back got no definite answer; it may still be booked.
    #[error("compensation of hold {hold} got no answer: {source}")]
    CompensationUnanswered {
        hold: HoldId,
        #[source]
        source: ParticipantError,
    },
    /// Recovery found the transaction already given up by its coordinator.
    #[error("its coordinator gave it up (a part refused its commit)")]
    GivenUp,
    /// A part's participant is not known to this planner.
    #[error("a part's participant is unknown: {0}")]
    UnknownParticipant(#[source] ParticipantError),
}

/// Why a decided transaction is still in doubt (neither booked for sure nor rejected): what
/// the recovery loop will finish.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unsettled {
    /// A step of phase 2 or of the compensation got no answer.
    #[error(transparent)]
    NoAnswer(#[from] TwoPhaseError),
    /// Every part is committed, but the log did not record the end.
    #[error("every part is committed, but the end could not be recorded: {0}")]
    EndNotRecorded(#[source] LogError),
    /// A part refused its commit (`cause`), and the log did not record that the transaction
    /// is given up: nothing was released.
    #[error("{cause}; giving the plan up could not be recorded: {source}")]
    GiveUpNotRecorded {
        cause: TwoPhaseError,
        #[source]
        source: LogError,
    },
    /// A part refused its commit (`cause`) and giving every part back got no answer.
    #[error("{cause}; {source}")]
    CompensationUnanswered {
        cause: TwoPhaseError,
        #[source]
        source: TwoPhaseError,
    },
    /// Every part was given back, but the log did not record the rejection.
    #[error("compensated, but the end could not be recorded: {0}")]
    RejectionNotRecorded(#[source] LogError),
}

/// Pauses before the retries of a call whose answer was indeterminate.
const RETRY_AFTER: [Duration; 2] = [Duration::from_millis(50), Duration::from_millis(250)];

/// True when nobody knows whether the call took effect: the caller may retry it. A hold of
/// another principal counts too: this coordinator cannot drive it, its owner can, so the
/// transaction stays in doubt rather than being compensated by someone who cannot release it.
pub(super) fn indeterminate(e: &ParticipantError) -> bool {
    matches!(
        e,
        ParticipantError::Transport(_)
            | ParticipantError::Durability(_)
            | ParticipantError::NotOwner(_)
            | ParticipantError::SchedulerUnavailable { .. }
    )
}

/// What committing every part of a plan came to.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Phase2 {
    /// Every part is committed (durable at its participant).
    Committed,
    /// A part refused its commit (its hold is gone): the plan cannot be booked whole.
    /// `committed[i]`: part `i` answered its commit with OK.
    Refused { committed: Vec<bool>, cause: TwoPhaseError },
    /// Some part never answered its commit definitely; every part that answered is committed.
    /// Parts after the first silent one were still sent their commit.
    Unreachable { cause: TwoPhaseError },
}

/// Sends `op` to one participant, retrying while the answer is indeterminate. `sent` counts
/// every attempt (each a round: it waits for the answer before the next).
async fn with_retries<F, Fut>(sent: &mut Sent, mut op: F) -> Result<(), ParticipantError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), ParticipantError>>,
{
    let mut pauses = RETRY_AFTER.iter();
    loop {
        sent.one();
        match op().await {
            Err(e) if indeterminate(&e) => match pauses.next() {
                Some(p) => tokio::time::sleep(*p).await,
                None => return Err(e),
            },
            r => return r,
        }
    }
}

/// Commits every part in order; stops at the first refusal (see [`Phase2`]).
pub(super) async fn commit_parts(parts: &[(Arc<dyn HoldLifecycle>, HoldId)], sent: &mut Sent) -> Phase2 {
    let mut silent = None;
    let mut committed = vec![false; parts.len()];
    for (index, (p, hold)) in parts.iter().enumerate() {
        match with_retries(sent, || p.commit(*hold)).await {
            Ok(()) => committed[index] = true,
            Err(e) if indeterminate(&e) => {
                silent.get_or_insert(TwoPhaseError::CommitUnanswered { hold: *hold, source: e });
            }
            Err(e) => return Phase2::Refused { committed, cause: TwoPhaseError::CommitRefused(e) },
        }
    }
    match silent {
        None => Phase2::Committed,
        Some(cause) => Phase2::Unreachable { cause },
    }
}

/// Phase 2 by participant, each part's answer: one [`HoldLifecycle::commit_all`] per
/// participant, all sent at once, whatever the others answer; holds whose answer was
/// indeterminate are sent again (up to [`RETRY_AFTER`]'s count). A participant changes its
/// holds together (a LIS in front of Slurm: the reservations a modification moves, in a few
/// `scontrol` calls).
pub(super) async fn commit_each_part(
    groups: &Groups,
    holds: &[HoldId],
    sent: &mut Sent,
) -> Vec<Result<(), ParticipantError>> {
    let calls = groups.iter().map(|(p, parts)| async move {
        let mut to_this = Sent::default();
        let mut pending: Vec<usize> = parts.clone();
        let mut answers: Vec<(usize, Result<(), ParticipantError>)> = Vec::new();
        let mut pauses = RETRY_AFTER.iter();
        loop {
            to_this.one();
            let ids: Vec<HoldId> = pending.iter().map(|&i| holds[i]).collect();
            let mut again = Vec::new();
            for (i, r) in pending.iter().copied().zip(p.commit_all(&ids).await) {
                match r {
                    Err(e) if indeterminate(&e) => again.push((i, e)),
                    r => answers.push((i, r)),
                }
            }
            match pauses.next() {
                Some(pause) if !again.is_empty() => {
                    tokio::time::sleep(*pause).await;
                    pending = again.into_iter().map(|(i, _)| i).collect();
                }
                _ => {
                    answers.extend(again.into_iter().map(|(i, e)| (i, Err(e))));
                    return (to_this, answers);
                }
            }
        }
    });
    let mut all = Sent::default();
    let mut answers: Vec<Option<Result<(), ParticipantError>>> = vec![None; holds.len()];
    for (by_one, got) in futures::future::join_all(calls).await {
        all.beside(by_one);
        for (i, r) in got {
            answers[i] = Some(r);
        }
    }
    sent.then(all);
    answers.into_iter().map(|r| r.expect("every part is in a group")).collect()
}

/// The parts of a plan grouped by participant: each participant, with the indices of its
/// parts (first appearance order).
pub(super) type Groups = Vec<(Arc<dyn HoldLifecycle>, Vec<usize>)>;

/// Phase 1's votes made durable before a logged decision: one [`HoldLifecycle::persist`] per
/// participant, all sent at once. `Err`: a participant could not promise its holds (the caller
/// gives the plan up).
pub(super) async fn persist_groups(groups: &Groups, holds: &[HoldId], sent: &mut Sent) -> Result<(), TwoPhaseError> {
    sent.together(groups.len() as u64);
    let calls = groups.iter().map(|(p, parts)| {
        let ids: Vec<HoldId> = parts.iter().map(|&i| holds[i]).collect();
        async move { p.persist(&ids).await }
    });
    for r in futures::future::join_all(calls).await {
        r.map_err(TwoPhaseError::NotDurable)?;
    }
    Ok(())
}

/// Phase 2 by participant ([`commit_each_part`]), summed up: the result is that of
/// [`commit_parts`], except that a refusal does not stop the other participants' commits
/// (those are then `committed` and compensation releases them).
pub(super) async fn commit_groups(groups: &Groups, holds: &[HoldId], sent: &mut Sent) -> Phase2 {
    let mut committed = vec![false; holds.len()];
    let (mut refused, mut silent) = (None, None);
    for (i, r) in commit_each_part(groups, holds, sent).await.into_iter().enumerate() {
        match r {
            Ok(()) => committed[i] = true,
            Err(e) if indeterminate(&e) => {
                silent.get_or_insert(TwoPhaseError::CommitUnanswered { hold: holds[i], source: e });
            }
            Err(e) => {
                refused.get_or_insert(TwoPhaseError::CommitRefused(e));
            }
        }
    }
    match (refused, silent) {
        (Some(cause), _) => Phase2::Refused { committed, cause },
        (None, Some(cause)) => Phase2::Unreachable { cause },
        (None, None) => Phase2::Committed,
    }
}

/// Messages and aborted holds a compensation cost.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub sent: Sent,
    pub holds_aborted: u64,
}

/// Compensation: gives every part back. Parts known to be committed (`committed[i]`; missing
/// entries count as unknown) are released; the others are aborted (and released if the abort says they were
/// committed after all: a commit whose answer was lost). A part that is already gone (aborted,
/// expired, released, unknown) needs nothing.
///
/// # Errors
/// A participant did not answer definitely: that part may still be booked; the caller must
/// retry the compensation later.
pub(super) async fn compensate(
    parts: &[(Arc<dyn HoldLifecycle>, HoldId)],
    committed: &[bool],
    release_committed: bool,
    tally: &mut Tally,
) -> Result<(), TwoPhaseError> {
    let mut first_failure = None;
    for (i, (p, hold)) in parts.iter().enumerate() {
        let r = if committed.get(i).copied().unwrap_or(false) {
            if !release_committed {
                tracing::error!(%hold, "a modification's part is committed while another part's commit was refused");
                continue;
            }
            release(p, *hold, &mut tally.sent).await
        } else {
            tally.holds_aborted += 1;
            match with_retries(&mut tally.sent, || p.abort(*hold)).await {
                Err(ParticipantError::AlreadyCommitted(_)) if release_committed => {
                    release(p, *hold, &mut tally.sent).await
                }
                r => r,
            }
        };
        match r {
            Err(e) if indeterminate(&e) => {
                tracing::error!(error = %e, %hold, "compensation got no answer");
                first_failure.get_or_insert(TwoPhaseError::CompensationUnanswered { hold: *hold, source: e });
            }
            // Gone already (never committed, expired, aborted, unknown): nothing to give back.
            Ok(()) | Err(_) => {}
        }
    }
    first_failure.map_or(Ok(()), Err)
}

async fn release(p: &Arc<dyn HoldLifecycle>, hold: HoldId, sent: &mut Sent) -> Result<(), ParticipantError> {
    with_retries(sent, || p.release(hold)).await
}
