//! What the LIS and the NIS share in keeping their holds: a participant's state is a
//! [`HoldBook`] of what each hold booked, beside the calendars the bookings took
//! ([`Bookkeeping`]). A hold that replaces a committed reservation (a plan modification) books
//! only its growth until its commit swaps the reservation for the new shape ([`commit`]).
//! A participant that keeps its holds so ([`KeepsHolds`]) gets phase 2 ([`HoldLifecycle`])
//! from here; it says only how a commit and a vote's durability reach what it drives (Slurm,
//! a data plane) and how an ended hold leaves it.

use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;

use crate::calendar::{CalendarError, SpanId};
use crate::clock::Clock;
use crate::model::Time;
use crate::protocol::{Hold, HoldBook, HoldId, HoldLifecycle, HoldState, ParticipantError};

/// What one hold booked: a span in each calendar it took, by the calendar's index in its
/// participant (the LIS's CPUs and GPU pools, the NIS's links). For a replacement hold
/// (`replaces` in its request) before its commit, `spans` are the replaced reservation's and
/// `growth` what the new shape needs beyond them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ReservationSpans<R> {
    pub(crate) spans: Vec<(usize, SpanId)>,
    pub(crate) growth: Option<Box<Growth<R>>>,
}

/// The pending part of a replacement hold: the reservation it replaces, the new shape (`R`:
/// the participant's hold request) and the growth spans booked for it
/// ([`crate::calendar::CapacityCalendar::add_growth`]), by calendar index.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Growth<R> {
    pub(crate) replaces: HoldId,
    pub(crate) request: R,
    pub(crate) spans: Vec<(usize, SpanId)>,
}

/// A participant's state of holds: the book and the calendars its bookings took.
pub(crate) trait Bookkeeping {
    /// The participant's hold request (the shape a replacement hold will have).
    type Request: Clone;

    /// The book of holds.
    fn holds(&self) -> &HoldBook<ReservationSpans<Self::Request>>;

    /// The book of holds, to change.
    fn holds_mut(&mut self) -> &mut HoldBook<ReservationSpans<Self::Request>>;

    /// Removes `span` from the calendar at index `calendar`.
    ///
    /// # Errors
    /// The calendar's: the span is not there (pruned as history, or never booked).
    fn remove_span(&mut self, calendar: usize, span: SpanId) -> Result<(), CalendarError>;
}

/// Frees what `b` booked (for a replacement hold, its growth only).
pub(crate) fn unbook<S: Bookkeeping>(st: &mut S, b: ReservationSpans<S::Request>) {
    match b.growth {
        Some(g) => remove_growth(st, &g),
        None => {
            for (calendar, span) in b.spans {
                st.remove_span(calendar, span).expect("a booked span");
            }
        }
    }
}

/// Frees a replacement hold's growth. A growth span may be gone already: pruned as history
/// (pending replacements stay in the book).
fn remove_growth<S: Bookkeeping>(st: &mut S, g: &Growth<S::Request>) {
    for &(calendar, span) in &g.spans {
        let _ = st.remove_span(calendar, span);
    }
}

/// Locks `state` after releasing every hold whose lease has run out by `now()` (read once
/// the lock is held); `what` names the lock in the panic of a poisoned one.
fn lock_live<'a, S: Bookkeeping>(state: &'a Mutex<S>, what: &str, now: impl FnOnce() -> Time) -> MutexGuard<'a, S> {
    let mut st = state.lock().expect(what);
    let now = now();
    for booked in st.holds_mut().expire(now) {
        unbook(&mut *st, booked);
    }
    st
}

/// The reservation `hold` replaces, if it is a replacement hold not yet committed.
pub(crate) fn replaced_by<S: Bookkeeping>(st: &S, hold: HoldId) -> Option<HoldId> {
    match st.holds().get(hold) {
        Some((HoldState::Held { .. }, b)) => b.growth.as_ref().map(|g| g.replaces),
        _ => None,
    }
}

/// Commits `hold` (under the state lock): a plain hold in the book; a replacement hold by a
/// swap, in which its growth and the replaced reservation give way to the new shape, which
/// `book_new` books where they were. If the replaced reservation was released meanwhile (its
/// plan cancelled, another change committed), the hold is aborted and the commit refused
/// (`NotCommitted`): a replacement never books a reservation of its own. `Some` replaced
/// reservation after a swap, `None` for a plain hold.
///
/// # Errors
/// The book's refusal of the commit; `NotCommitted` as above; `book_new`'s error (the hold is
/// then aborted).
pub(crate) fn commit<S: Bookkeeping>(
    st: &mut S,
    hold: HoldId,
    book_new: impl FnOnce(&mut S, &Growth<S::Request>) -> Result<ReservationSpans<S::Request>, ParticipantError>,
) -> Result<Option<HoldId>, ParticipantError> {
    let growth = match st.holds().get(hold) {
        Some((HoldState::Held { .. }, b)) => b.growth.as_deref().cloned(),
        _ => None,
    };
    let Some(g) = growth else { return st.holds_mut().commit(hold).map(|()| None) };
    remove_growth(st, &g);
    // The reservation must still be there: released meanwhile (its plan cancelled, or
    // another change took its place), the replacement has nothing left to replace.
    if !matches!(st.holds().get(g.replaces), Some((HoldState::Committed, _))) {
        let _ = st.holds_mut().abort(hold);
        return Err(ParticipantError::NotCommitted(g.replaces));
    }
    if let Ok(Some(b)) = st.holds_mut().release(g.replaces) {
        unbook(st, b);
    }
    match book_new(st, &g) {
        Ok(booked) => {
            st.holds_mut().set_payload(hold, booked);
            st.holds_mut().commit(hold)?;
            Ok(Some(g.replaces))
        }
        Err(e) => {
            // Its growth is gone already: nothing of the payload is booked any more.
            let _ = st.holds_mut().abort(hold);
            Err(e)
        }
    }
}

/// Aborts `hold` (or releases it, with `release`), freeing what it booked.
///
/// # Errors
/// The book's refusal (e.g. an abort of a committed hold).
pub(crate) fn end<S: Bookkeeping>(st: &mut S, hold: HoldId, release: bool) -> Result<(), ParticipantError> {
    let booked = if release { st.holds_mut().release(hold)? } else { st.holds_mut().abort(hold)? };
    if let Some(b) = booked {
        unbook(st, b);
    }
    Ok(())
}

/// A participant whose holds are kept in a [`Bookkeeping`] state (the LIS, the NIS). What
/// differs between them is what a hold drives outside the calendars.
#[async_trait]
pub(crate) trait KeepsHolds: Send + Sync {
    /// The state of holds.
    type State: Bookkeeping + Send;

    /// The state of holds behind its lock, and the participant's clock (leases run out by it).
    fn kept(&self) -> (&Mutex<Self::State>, &dyn Clock);

    /// The state, locked after releasing every hold whose lease has run out ([`lock_live`]).
    fn state(&self) -> MutexGuard<'_, Self::State> {
        let (state, clock) = self.kept();
        lock_live(state, "participant state lock", || clock.now())
    }

    /// The participant's clock, now.
    fn now(&self) -> Time {
        self.kept().1.now()
    }

    /// Phase 2 (commit) of `hold`, with what it drives ([`HoldLifecycle::commit`]).
    async fn commit_hold(&self, hold: HoldId) -> Result<(), ParticipantError>;

    /// Phase 1's votes made durable ([`HoldLifecycle::persist`]).
    async fn persist_holds(&self, holds: &[HoldId]) -> Result<(), ParticipantError>;

    /// Takes away what an ended hold (aborted or released) had outside the calendars.
    async fn withdraw(&self, hold: HoldId);
}

#[async_trait]
impl<P: KeepsHolds> HoldLifecycle for P {
    fn replaced_by(&self, hold: HoldId) -> Option<HoldId> {
        replaced_by(&*self.state(), hold)
    }

    async fn commit(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.commit_hold(hold).await
    }

    async fn abort(&self, hold: HoldId) -> Result<(), ParticipantError> {
        end(&mut *self.state(), hold, false)?;
        self.withdraw(hold).await;
        Ok(())
    }

    async fn release(&self, hold: HoldId) -> Result<(), ParticipantError> {
        end(&mut *self.state(), hold, true)?;
        self.withdraw(hold).await;
        Ok(())
    }

    async fn extend(&self, hold: HoldId, lease_s: i64) -> Result<Hold, ParticipantError> {
        let now = self.now();
        self.state().holds_mut().extend_lease(hold, now, lease_s)
    }

    async fn persist(&self, holds: &[HoldId]) -> Result<(), ParticipantError> {
        self.persist_holds(holds).await
    }

    async fn commit_all(&self, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
        crate::protocol::commit_each(self, holds).await
    }
}
