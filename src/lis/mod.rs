//! LIS — Local Information Service, one per site (SPEC section 3, seed 001 section 2.3).
//!
//! Manages the site's compute reservations in a [`CapacityCalendar`] of CPUs, answers
//! free-slot searches (earliest start in a window, with the site's utilisation and price) and
//! is a two-phase-commit participant. Check-and-hold is atomic: one mutex guards the calendar
//! and the hold book, so two planners can never both get the last CPUs.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use uuid::Uuid;

use crate::calendar::{CapacityCalendar, SpanId};
use crate::clock::Clock;
use crate::model::{Site, Time};
use crate::protocol::{
    Availability, AvailabilityQuery, ComputeOffer, Hold, HoldBook, HoldId, HoldRequest, Participant,
    ParticipantError,
};

#[derive(Debug)]
struct State {
    calendar: CapacityCalendar,
    holds: HoldBook<SpanId>,
}

/// The local reservation manager of one site.
pub struct Lis {
    site: Site,
    clock: Arc<dyn Clock>,
    lease_s: i64,
    state: Mutex<State>,
}

impl Lis {
    /// A LIS for `site` with an empty calendar; holds live `lease_s` seconds of `clock` time.
    pub fn new(site: Site, clock: Arc<dyn Clock>, lease_s: i64) -> Self {
        let calendar = CapacityCalendar::new(u64::from(site.cpus));
        Lis { site, clock, lease_s, state: Mutex::new(State { calendar, holds: HoldBook::default() }) }
    }

    /// The site this LIS manages.
    pub fn site(&self) -> &Site {
        &self.site
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
impl Participant for Lis {
    async fn query(&self, q: &AvailabilityQuery) -> Result<Availability, ParticipantError> {
        let AvailabilityQuery::Compute { site, cpus, duration_s, window_start, deadline } = q else {
            return Err(ParticipantError::WrongParticipant("network"));
        };
        if *site != self.site.id {
            return Err(ParticipantError::UnknownSite(site.clone()));
        }
        let st = self.state();
        let earliest_start = st.calendar.earliest_start(*window_start, *duration_s, u64::from(*cpus), *deadline);
        Ok(Availability::Compute(ComputeOffer {
            site: site.clone(),
            earliest_start,
            utilisation: st.calendar.utilisation(*window_start, *deadline),
            price_per_cpu_hour: self.site.price_per_cpu_hour,
        }))
    }

    async fn prepare(&self, req: &HoldRequest) -> Result<Hold, ParticipantError> {
        let HoldRequest::Compute { txn, site, cpus, start, end } = req else {
            return Err(ParticipantError::WrongParticipant("network"));
        };
        if *site != self.site.id {
            return Err(ParticipantError::UnknownSite(site.clone()));
        }
        let mut st = self.state();
        let span = st.calendar.add(*start, *end, u64::from(*cpus))?;
        let hold = Hold { id: Uuid::new_v4(), expires_at: self.clock.now() + self.lease_s };
        st.holds.hold(hold.id, *txn, span, hold.expires_at);
        Ok(hold)
    }

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
}

#[cfg(test)]
mod tests;
