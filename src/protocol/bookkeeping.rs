//! What the LIS and the NIS share in keeping their holds: a participant's state is a
//! [`HoldBook`] of what each hold booked, beside the calendars the bookings took, one per
//! resource in a [`MultiCalendar`] ([`Bookkeeping`]). A hold that replaces a committed
//! reservation (a plan modification) books only its growth until its commit swaps the
//! reservation for the new shape ([`commit`]).
//! A participant that keeps its holds so ([`KeepsHolds`]) gets phase 2 ([`HoldLifecycle`])
//! from here; it says only how a commit and a vote's durability reach what it drives (Slurm,
//! a data plane) and how an ended hold leaves it.

use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;

use crate::calendar::{CalendarError, MultiCalendar, ResourceKey, SpanId};
use crate::clock::Clock;
use crate::model::Time;
use crate::protocol::{Hold, HoldBook, HoldId, HoldLifecycle, HoldState, ParticipantError, TxnId};

/// What one hold booked: a span in each calendar it took, by the resource's key `K` in its
/// participant (the LIS's CPUs and GPU pools, the NIS's links). For a replacement hold
/// (`replaces` in its request) before its commit, `spans` are the replaced reservation's and
/// `growth` what the new shape needs beyond them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HoldSpans<K, R> {
    pub(crate) spans: Vec<(K, SpanId)>,
    pub(crate) growth: Option<Box<Growth<K, R>>>,
}

/// The pending part of a replacement hold: the reservation it replaces, the new shape (`R`:
/// the participant's hold request) and the growth spans booked for it
/// ([`crate::calendar::CapacityCalendar::add_growth`]), by resource.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Growth<K, R> {
    pub(crate) replaces: HoldId,
    pub(crate) request: R,
    pub(crate) spans: Vec<(K, SpanId)>,
}

/// A participant's state of holds: its calendars, one per resource `K` (the LIS's CPUs and GPU
/// pools, the NIS's links), the book of what each hold booked in them (`R`: the participant's
/// hold request, the shape a replacement hold will have), and `local`, what else the
/// participant keeps under the same lock (the LIS's view of its site's scheduler; nothing for
/// the NIS).
#[derive(Debug)]
pub(crate) struct Bookkeeping<K, R, X = ()> {
    pub(crate) calendars: MultiCalendar<K>,
    pub(crate) holds: HoldBook<HoldSpans<K, R>>,
    pub(crate) local: X,
}

impl<K: ResourceKey, R, X> Bookkeeping<K, R, X> {
    /// No holds yet, over `calendars`.
    pub(crate) fn new(calendars: MultiCalendar<K>, local: X) -> Self {
        Bookkeeping { calendars, holds: HoldBook::default(), local }
    }

    /// Books the growth of a replacement hold of reservation `old` (whose spans are `base`,
    /// see [`replaced`]): each `(resource, span of base, new amount)` of `grow` grown to
    /// `[start, end)` ([`MultiCalendar::add_growth`]). `base` with that growth pending, whose
    /// new shape is `request`.
    ///
    /// # Errors
    /// As [`MultiCalendar::add_growth`]: the index in `grow` of the resource that refused,
    /// and its error; nothing is booked then.
    pub(crate) fn add_growth(
        &mut self,
        old: HoldId,
        base: HoldSpans<K, R>,
        grow: &[(K, SpanId, u64)],
        (start, end): (Time, Time),
        request: R,
    ) -> Result<HoldSpans<K, R>, (usize, CalendarError)> {
        let grown = self.calendars.add_growth(start, end, grow)?;
        // One list of growth spans per resource of `grow`, in its order.
        let spans =
            grow.iter().zip(grown).flat_map(|(&(resource, ..), ids)| ids.into_iter().map(move |s| (resource, s)));
        let growth = Growth { replaces: old, request, spans: spans.collect() };
        Ok(HoldSpans { growth: Some(Box::new(growth)), ..base })
    }
}

/// Frees what `b` booked (for a replacement hold, its growth only).
pub(crate) fn unbook<K: ResourceKey, R: Clone, X>(st: &mut Bookkeeping<K, R, X>, b: HoldSpans<K, R>) {
    match b.growth {
        Some(g) => remove_growth(st, &g),
        None => {
            for (calendar, span) in b.spans {
                st.calendars.get_mut(calendar).remove(span).expect("a booked span");
            }
        }
    }
}

/// Frees a replacement hold's growth. A growth span may be gone already: pruned as history
/// (pending replacements stay in the book).
fn remove_growth<K: ResourceKey, R: Clone, X>(st: &mut Bookkeeping<K, R, X>, g: &Growth<K, R>) {
    for &(calendar, span) in &g.spans {
        let _ = st.calendars.get_mut(calendar).remove(span);
    }
}

/// Locks `state` after releasing every hold whose lease has run out by `now()` (read once
/// the lock is held); `what` names the lock in the panic of a poisoned one.
fn lock_live<'a, K: ResourceKey, R: Clone, X>(
    state: &'a Mutex<Bookkeeping<K, R, X>>,
    what: &str,
    now: impl FnOnce() -> Time,
) -> MutexGuard<'a, Bookkeeping<K, R, X>> {
    let mut st = state.lock().expect(what);
    let now = now();
    for booked in st.holds.expire(now) {
        unbook(&mut *st, booked);
    }
    st
}

/// The reservation `hold` replaces, if it is a replacement hold not yet committed.
pub(crate) fn replaced_by<K: ResourceKey, R: Clone, X>(st: &Bookkeeping<K, R, X>, hold: HoldId) -> Option<HoldId> {
    match st.holds.get(hold) {
        Some((HoldState::Held { .. }, b)) => b.growth.as_ref().map(|g| g.replaces),
        _ => None,
    }
}

/// What the committed reservation `old` booked, which a replacement hold of it grows over.
///
/// # Errors
/// `UnknownHold`, `NotCommitted` (held, aborted or released), or `InvalidHold` if `old` is
/// itself a replacement.
pub(crate) fn replaced<K: ResourceKey, R: Clone, X>(
    st: &Bookkeeping<K, R, X>,
    old: HoldId,
) -> Result<HoldSpans<K, R>, ParticipantError> {
    match st.holds.get(old) {
        Some((HoldState::Committed, b)) if b.growth.is_none() => Ok(b.clone()),
        Some((HoldState::Committed, _)) => {
            Err(ParticipantError::InvalidHold(format!("reservation {old} is itself a replacement")))
        }
        Some(_) => Err(ParticipantError::NotCommitted(old)),
        None => Err(ParticipantError::UnknownHold(old)),
    }
}

/// Puts back hold `id` of transaction `txn`, read from a journal in `state`. A committed
/// replacement hold (one that `replaces` a reservation) stands in that reservation's place:
/// the reservation is released, if still there, and the new shape booked outright
/// (`book(st, None)`). Any other hold is booked as its prepare booked it (`book(st,
/// replaces)`: a held replacement with its growth over the reservation).
///
/// # Errors
/// `book`'s: the journal contradicts the capacity (the caller must stop).
pub(crate) fn restore<K: ResourceKey, R: Clone, X>(
    st: &mut Bookkeeping<K, R, X>,
    id: HoldId,
    txn: TxnId,
    replaces: Option<HoldId>,
    state: HoldState,
    book: impl FnOnce(&mut Bookkeeping<K, R, X>, Option<HoldId>) -> Result<HoldSpans<K, R>, ParticipantError>,
) -> Result<(), ParticipantError> {
    let booked = match (replaces, state) {
        (Some(old), HoldState::Committed) => {
            if let Ok(Some(b)) = st.holds.release(old) {
                unbook(st, b);
            }
            book(st, None)?
        }
        _ => book(st, replaces)?,
    };
    st.holds.restore(id, txn, booked, state);
    Ok(())
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
pub(crate) fn commit<K: ResourceKey, R: Clone, X>(
    st: &mut Bookkeeping<K, R, X>,
    hold: HoldId,
    book_new: impl FnOnce(&mut Bookkeeping<K, R, X>, &Growth<K, R>) -> Result<HoldSpans<K, R>, ParticipantError>,
) -> Result<Option<HoldId>, ParticipantError> {
    let growth = match st.holds.get(hold) {
        Some((HoldState::Held { .. }, b)) => b.growth.as_deref().cloned(),
        _ => None,
    };
    let Some(g) = growth else { return st.holds.commit(hold).map(|()| None) };
    remove_growth(st, &g);
    // The reservation must still be there: released meanwhile (its plan cancelled, or
    // another change took its place), the replacement has nothing left to replace.
    if !matches!(st.holds.get(g.replaces), Some((HoldState::Committed, _))) {
        let _ = st.holds.abort(hold);
        return Err(ParticipantError::NotCommitted(g.replaces));
    }
    if let Ok(Some(b)) = st.holds.release(g.replaces) {
        unbook(st, b);
    }
    match book_new(st, &g) {
        Ok(booked) => {
            st.holds.set_payload(hold, booked);
            st.holds.commit(hold)?;
            Ok(Some(g.replaces))
        }
        Err(e) => {
            // Its growth is gone already: nothing of the payload is booked any more.
            let _ = st.holds.abort(hold);
            Err(e)
        }
    }
}

/// Aborts `hold` (or releases it, with `release`), freeing what it booked.
///
/// # Errors
/// The book's refusal (e.g. an abort of a committed hold).
pub(crate) fn end<K: ResourceKey, R: Clone, X>(
    st: &mut Bookkeeping<K, R, X>,
    hold: HoldId,
    release: bool,
) -> Result<(), ParticipantError> {
    let booked = if release { st.holds.release(hold)? } else { st.holds.abort(hold)? };
    if let Some(b) = booked {
        unbook(st, b);
    }
    Ok(())
}

/// The state of holds of participant `P`.
pub(crate) type StateOf<P> =
    Bookkeeping<<P as KeepsHolds>::Resource, <P as KeepsHolds>::Request, <P as KeepsHolds>::Local>;

/// A participant whose holds are kept in a [`Bookkeeping`] state (the LIS, the NIS). What
/// differs between them is what a hold drives outside the calendars.
#[async_trait]
pub(crate) trait KeepsHolds: Send + Sync {
    /// The names of its resources ([`Bookkeeping`]'s `K`: the LIS's CPUs and GPU pools, the
    /// NIS's links).
    type Resource: ResourceKey + Send;
    /// The participant's hold request ([`Bookkeeping`]'s `R`).
    type Request: Clone + Send;
    /// What else it keeps under the lock of its holds ([`Bookkeeping`]'s `X`).
    type Local: Send;

    /// The state of holds behind its lock, and the participant's clock (leases run out by it).
    fn kept(&self) -> (&Mutex<StateOf<Self>>, &dyn Clock);

    /// The state, locked after releasing every hold whose lease has run out ([`lock_live`]).
    fn state(&self) -> MutexGuard<'_, StateOf<Self>> {
        let (state, clock) = self.kept();
        lock_live(state, "participant state lock", || clock.now())
    }

    /// The participant's clock, now.
    fn now(&self) -> Time {
        self.kept().1.now()
    }

    /// Phase 2 (commit) of `hold`, with what it drives ([`HoldLifecycle::commit`]).
    async fn commit_hold(&self, hold: HoldId) -> Result<(), ParticipantError>;

    /// Phase 2 of several holds in one message ([`HoldLifecycle::commit_all`]): the answer of
    /// each, in order. The default commits them one after the other.
    async fn commit_holds(&self, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
        let mut answers = Vec::with_capacity(holds.len());
        for &h in holds {
            answers.push(self.commit_hold(h).await);
        }
        answers
    }

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
        self.state().holds.extend_lease(hold, now, lease_s)
    }

    async fn persist(&self, holds: &[HoldId]) -> Result<(), ParticipantError> {
        self.persist_holds(holds).await
    }

    async fn commit_all(&self, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
        self.commit_holds(holds).await
    }
}
