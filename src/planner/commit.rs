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

use crate::protocol::{HoldId, HoldLifecycle, ParticipantError};

/// Pauses before the retries of a call whose answer was indeterminate.
const RETRY_AFTER: [Duration; 2] = [Duration::from_millis(50), Duration::from_millis(250)];

/// True when nobody knows whether the call took effect: the caller may retry it. A hold of
/// another principal counts too: this coordinator cannot drive it, its owner can, so the
/// transaction stays in doubt rather than being compensated by someone who cannot release it.
pub(super) fn indeterminate(e: &ParticipantError) -> bool {
    matches!(e, ParticipantError::Transport(_) | ParticipantError::Durability(_) | ParticipantError::NotOwner(_))
}

/// What committing every part of a plan came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Phase2 {
    /// Every part is committed (durable at its participant).
    Committed,
    /// A part refused its commit (its hold is gone): the plan cannot be booked whole.
    /// `committed[i]`: part `i` answered its commit with OK.
    Refused { committed: Vec<bool>, reason: String },
    /// Some part never answered its commit definitely; every part that answered is committed.
    /// Parts after the first silent one were still sent their commit.
    Unreachable { reason: String },
}

/// Sends `op` to one participant, retrying while the answer is indeterminate. `messages` counts
/// every attempt.
async fn with_retries<F, Fut>(messages: &mut u64, mut op: F) -> Result<(), ParticipantError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), ParticipantError>>,
{
    let mut pauses = RETRY_AFTER.iter();
    loop {
        *messages += 1;
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
pub(super) async fn commit_parts(parts: &[(Arc<dyn HoldLifecycle>, HoldId)], messages: &mut u64) -> Phase2 {
    let mut silent = None;
    let mut committed = vec![false; parts.len()];
    for (index, (p, hold)) in parts.iter().enumerate() {
        match with_retries(messages, || p.commit(*hold)).await {
            Ok(()) => committed[index] = true,
            Err(e) if indeterminate(&e) => {
                silent.get_or_insert_with(|| format!("commit of hold {hold} got no answer: {e}"));
            }
            Err(e) => return Phase2::Refused { committed, reason: format!("commit failed: {e}") },
        }
    }
    match silent {
        None => Phase2::Committed,
        Some(reason) => Phase2::Unreachable { reason },
    }
}

/// Messages and aborted holds a compensation cost.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub messages: u64,
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
    tally: &mut Tally,
) -> Result<(), String> {
    let mut first_failure = None;
    for (i, (p, hold)) in parts.iter().enumerate() {
        let r = if committed.get(i).copied().unwrap_or(false) {
            release(p, *hold, &mut tally.messages).await
        } else {
            tally.holds_aborted += 1;
            match with_retries(&mut tally.messages, || p.abort(*hold)).await {
                Err(ParticipantError::AlreadyCommitted(_)) => release(p, *hold, &mut tally.messages).await,
                r => r,
            }
        };
        match r {
            Err(e) if indeterminate(&e) => {
                tracing::error!(error = %e, %hold, "compensation got no answer");
                first_failure.get_or_insert_with(|| format!("compensation of hold {hold} got no answer: {e}"));
            }
            // Gone already (never committed, expired, aborted, unknown): nothing to give back.
            Ok(()) | Err(_) => {}
        }
    }
    first_failure.map_or(Ok(()), Err)
}

async fn release(p: &Arc<dyn HoldLifecycle>, hold: HoldId, messages: &mut u64) -> Result<(), ParticipantError> {
    with_retries(messages, || p.release(hold)).await
}
