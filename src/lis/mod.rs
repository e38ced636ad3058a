//! LIS — Local Information Service, one per site (Ando & Aida, section 2.3; docs/algorithm.md).
//!
//! Manages the site's compute reservations in a [`CapacityCalendar`] of CPUs, answers
//! free-slot searches (earliest start in a window, with the site's utilisation and price) and
//! is a two-phase-commit participant. Check-and-hold is atomic: one mutex guards the calendar
//! and the hold book, so two planners can never both get the last CPUs.

use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;

use crate::calendar::{CapacityCalendar, SpanId};
use crate::clock::Clock;
use crate::model::{check_text, price_ok, Site, SiteId, Time, MAX_PRICE};
use crate::protocol::{
    Compute, ComputeHoldRequest, ComputeOffer, ComputeQuery, Hold, HoldBook, HoldId, HoldLifecycle, HoldState,
    Participant, ParticipantError, TxnId,
};

/// Why [`Lis::update_site`] refused a change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SiteUpdateError {
    /// Id, node or CPU count differ: they cannot change at run time.
    #[error("site `{0}`: only price_per_cpu_hour and os can change at run time (id, node and cpus are fixed)")]
    Fixed(SiteId),
    /// A bad price or OS name.
    #[error("{0}")]
    Invalid(String),
    /// The OS would change under holds or reservations that end in the future.
    #[error("site `{site}`: os cannot change while {} holds or reservations end in the future", holds.len())]
    OsInUse { site: SiteId, holds: Vec<HoldId> },
}

/// One hold or reservation in a LIS's book, as [`Lis::reservations`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub hold: HoldId,
    pub start: Time,
    pub end: Time,
    pub cpus: u64,
    /// Held (with its lease end) or committed.
    pub state: HoldState,
    /// The principal that prepared it through this LIS's HTTP endpoints; `None` for holds of
    /// the process's own planners (all-in-one) and for holds journaled before owners were
    /// recorded.
    pub owner: Option<String>,
}

#[derive(Debug)]
struct State {
    calendar: CapacityCalendar,
    holds: HoldBook<SpanId>,
}

/// The local reservation manager of one site.
pub struct Lis {
    /// The site's catalogue entry; its price and OS may change at run time
    /// ([`Lis::update_site`]), its id, node and CPU count may not.
    site: RwLock<Site>,
    clock: Arc<dyn Clock>,
    lease_s: i64,
    state: Mutex<State>,
}

impl Lis {
    /// A LIS for `site` with an empty calendar; holds live `lease_s` seconds of `clock` time.
    pub fn new(site: Site, clock: Arc<dyn Clock>, lease_s: i64) -> Self {
        let calendar = CapacityCalendar::new(u64::from(site.cpus));
        Lis {
            site: RwLock::new(site),
            clock,
            lease_s,
            state: Mutex::new(State { calendar, holds: HoldBook::default() }),
        }
    }

    /// The site this LIS manages (a copy: the price and OS may change).
    pub fn site(&self) -> Site {
        self.site.read().expect("LIS site lock").clone()
    }

    /// Replaces the site's price and OS (the values later offers carry).
    ///
    /// The OS may change only while no hold or reservation of the site ends after now (a
    /// committed job must keep the OS it was booked for); the check and the change are atomic
    /// with every prepare (under the calendar's lock). A price change always applies, to later
    /// offers only.
    ///
    /// # Errors
    /// [`SiteUpdateError::Fixed`] if `site` changes the id, node or CPU count (the calendar
    /// and the NIS's site-to-node map are built from them); [`SiteUpdateError::Invalid`] for a
    /// price outside `0 ..= MAX_PRICE` or an invalid OS name; [`SiteUpdateError::OsInUse`] with
    /// the holds and reservations that end in the future, for an OS change.
    pub fn update_site(&self, site: Site) -> Result<(), SiteUpdateError> {
        let st = self.state();
        let mut cur = self.site.write().expect("LIS site lock");
        if site.id != cur.id || site.node != cur.node || site.cpus != cur.cpus {
            return Err(SiteUpdateError::Fixed(cur.id.clone()));
        }
        if !price_ok(site.price_per_cpu_hour) {
            return Err(SiteUpdateError::Invalid(format!(
                "price_per_cpu_hour must be a finite number in 0..={MAX_PRICE} (got {})",
                site.price_per_cpu_hour
            )));
        }
        check_text(&site.os).map_err(|e| SiteUpdateError::Invalid(format!("os: {e}")))?;
        if site.os != cur.os {
            let now = self.clock.now();
            let mut holds: Vec<HoldId> = st
                .holds
                .active()
                .filter(|(_, _, span)| st.calendar.span(**span).is_some_and(|s| s.end > now))
                .map(|(id, _, _)| id)
                .collect();
            if !holds.is_empty() {
                holds.sort();
                return Err(SiteUpdateError::OsInUse { site: cur.id.clone(), holds });
            }
        }
        *cur = site;
        Ok(())
    }

    /// Puts back a hold or reservation read from a journal (at start, before any other call):
    /// books `req`'s CPUs as hold `id` of `req`'s transaction, held until `expires_at` or
    /// committed (`state`).
    ///
    /// # Errors
    /// `UnknownSite` for a request not for this site; `Capacity` if it does not fit (the
    /// journal contradicts the site's capacity: the caller must stop).
    pub fn restore(&self, id: HoldId, req: &ComputeHoldRequest, state: HoldState) -> Result<(), ParticipantError> {
        let mut st = self.state();
        let (txn, span) = self.book(&mut st, req)?;
        st.holds.restore(id, txn, span, state);
        Ok(())
    }

    /// Books `req`'s CPUs in the calendar (check and book in one step, under the state lock).
    fn book(&self, st: &mut State, req: &ComputeHoldRequest) -> Result<(TxnId, SpanId), ParticipantError> {
        if req.site != self.site.read().expect("LIS site lock").id {
            return Err(ParticipantError::UnknownSite(req.site.clone()));
        }
        let span = st
            .calendar
            .add(req.start, req.end, u64::from(req.cpus))
            .map_err(|e| ParticipantError::from_calendar(e, None))?;
        Ok((req.txn, span))
    }

    /// The owner of hold `id` (see [`HoldBook::owner`]): `None` for an unknown hold,
    /// `Some(None)` for one without a recorded owner.
    pub fn owner(&self, id: HoldId) -> Option<Option<String>> {
        self.state().holds.owner(id).map(|o| o.map(str::to_owned))
    }

    /// Sets the owner of hold `id` (at start, after [`Lis::restore`], from the journal).
    pub fn set_owner(&self, id: HoldId, owner: Option<String>) {
        self.state().holds.set_owner(id, owner);
    }

    fn prepare_owned(&self, req: &ComputeHoldRequest, owner: Option<&str>) -> Result<Hold, ParticipantError> {
        let mut st = self.state();
        let (txn, span) = self.book(&mut st, req)?;
        let hold = Hold { id: HoldId::new(), expires_at: self.clock.now() + self.lease_s };
        st.holds.hold(hold.id, txn, span, hold.expires_at);
        st.holds.set_owner(hold.id, owner.map(str::to_owned));
        Ok(hold)
    }

    /// Holds and reservations overlapping `[from, to)`, sorted by start then id.
    pub fn reservations(&self, from: Time, to: Time) -> Vec<Reservation> {
        let st = self.state();
        let mut out: Vec<Reservation> = st
            .holds
            .active()
            .filter_map(|(hold, state, span)| {
                let s = st.calendar.span(*span)?; // pruned reservations are gone
                (s.start < to && s.end > from).then_some(Reservation {
                    hold,
                    start: s.start,
                    end: s.end,
                    cpus: s.amount,
                    state,
                    owner: st.holds.owner(hold).flatten().map(str::to_owned),
                })
            })
            .collect();
        out.sort_by_key(|r| (r.start, r.hold));
        out
    }

    /// Locks the state after releasing every hold whose lease has run out.
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        let mut st = self.state.lock().expect("LIS state lock");
        let now = self.clock.now();
        for span in st.holds.expire(now) {
            st.calendar.remove(span).expect("expired hold's span is booked");
        }
        st
    }

    /// Booked CPUs at instant `t` (holds included).
    pub fn usage_at(&self, t: Time) -> u64 {
        self.state().calendar.usage_at(t)
    }

    /// Live holds (not committed, not expired).
    pub fn holds_outstanding(&self) -> usize {
        self.state().holds.outstanding()
    }

    /// Spans (holds and reservations) booked in the calendar.
    pub fn booked_spans(&self) -> usize {
        self.state().calendar.len()
    }

    /// Forgets reservations (and holds) that ended at or before `horizon`: history no query
    /// can reach. Returns how many spans were pruned.
    pub fn prune_before(&self, horizon: Time) -> usize {
        let mut st = self.state();
        let pruned: std::collections::HashSet<SpanId> = st.calendar.prune_before(horizon).into_iter().collect();
        st.holds.forget(|span| pruned.contains(span));
        pruned.len()
    }
}

#[async_trait]
impl Participant<Compute> for Lis {
    async fn query(&self, q: &ComputeQuery) -> Result<ComputeOffer, ParticipantError> {
        let me = self.site();
        if q.site != me.id {
            return Err(ParticipantError::UnknownSite(q.site.clone()));
        }
        let st = self.state();
        Ok(ComputeOffer {
            site: q.site.clone(),
            earliest_start: st.calendar.earliest_start(q.window_start, q.duration_s, u64::from(q.cpus), q.deadline),
            utilisation: st.calendar.utilisation(q.window_start, q.deadline),
            price_per_cpu_hour: me.price_per_cpu_hour,
        })
    }

    async fn prepare(&self, req: &ComputeHoldRequest) -> Result<Hold, ParticipantError> {
        self.prepare_owned(req, None)
    }

    async fn prepare_for(&self, req: &ComputeHoldRequest, owner: &str) -> Result<Hold, ParticipantError> {
        self.prepare_owned(req, Some(owner))
    }
}

#[async_trait]
impl HoldLifecycle for Lis {
    async fn commit(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.state().holds.commit(hold)
    }

    async fn abort(&self, hold: HoldId) -> Result<(), ParticipantError> {
        let mut st = self.state();
        if let Some(span) = st.holds.abort(hold)? {
            st.calendar.remove(span).expect("held span is booked");
        }
        Ok(())
    }

    async fn release(&self, hold: HoldId) -> Result<(), ParticipantError> {
        let mut st = self.state();
        if let Some(span) = st.holds.release(hold)? {
            st.calendar.remove(span).expect("committed span is booked");
        }
        Ok(())
    }

    async fn extend(&self, hold: HoldId, lease_s: i64) -> Result<Hold, ParticipantError> {
        self.state().holds.extend_lease(hold, self.clock.now(), lease_s)
    }
}

#[cfg(test)]
mod tests;
