//! What the simulator changes: the clock and the transport — nothing else.
//!
//! [`VirtualClock`] reads tokio's (paused, auto-advancing) clock, so lease expiry, `w_interval`
//! and planning times all run on virtual time. [`SimParticipant`] wraps a production
//! participant and makes every message take a service time drawn from Ando & Aida's Table 2
//! (docs/simulator.md) before the participant handles it; while it waits, other planners run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use coreserve::clock::Clock;
use coreserve::model::Time;
use coreserve::protocol::{Hold, HoldId, HoldLifecycle, Participant, ParticipantError, ParticipantKind, Role};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Virtual time: `base` plus the time tokio's clock has advanced since creation. Create it
/// inside the simulation's runtime.
pub struct VirtualClock {
    base: Time,
    start: tokio::time::Instant,
}

impl VirtualClock {
    /// A clock reading `base` now.
    pub fn new(base: Time) -> Self {
        VirtualClock { base, start: tokio::time::Instant::now() }
    }

    /// The tokio instant at which this clock reads `t` (for scheduling arrivals).
    pub fn instant_of(&self, t: Time) -> tokio::time::Instant {
        self.start + Duration::from_secs(u64::try_from(t - self.base).unwrap_or(0))
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Time {
        self.base + self.start.elapsed().as_secs() as i64
    }
}

/// Uniform service-time ranges in seconds, per message type (Ando & Aida, Table 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceTimes {
    /// NIS availability check.
    pub availability: (f64, f64),
    /// LIS free-slot search.
    pub free_slot: (f64, f64),
    /// Tentative reservation (prepare).
    pub hold: (f64, f64),
    pub commit: (f64, f64),
    /// Abort of a hold or release of a reservation.
    pub cancel: (f64, f64),
}

impl Default for ServiceTimes {
    fn default() -> Self {
        ServiceTimes {
            availability: (1.0, 2.0),
            free_slot: (2.0, 3.0),
            hold: (1.0, 2.0),
            commit: (1.0, 2.0),
            cancel: (1.0, 2.0),
        }
    }
}

impl ServiceTimes {
    /// Checks every range is finite with `0 <= lo <= hi`.
    ///
    /// # Errors
    /// The first [`BadServiceTime`] range.
    pub fn validate(&self) -> Result<(), BadServiceTime> {
        for (name, (lo, hi)) in [
            ("availability", self.availability),
            ("free_slot", self.free_slot),
            ("hold", self.hold),
            ("commit", self.commit),
            ("cancel", self.cancel),
        ] {
            if !(lo.is_finite() && hi.is_finite() && 0.0 <= lo && lo <= hi) {
                return Err(BadServiceTime { name, lo, hi });
            }
        }
        Ok(())
    }
}

/// A service-time range that is not finite with `0 <= lo <= hi` (seconds).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("service_times.{name} = ({lo}, {hi}) must satisfy 0 <= lo <= hi")]
pub struct BadServiceTime {
    /// The message kind, e.g. `free_slot`.
    pub name: &'static str,
    /// The range's lower bound, in seconds.
    pub lo: f64,
    /// The range's upper bound, in seconds.
    pub hi: f64,
}

/// A production participant behind a simulated network: each message waits a service time
/// drawn from its own seeded stream, then is handled by the real participant.
pub struct SimParticipant<T: ?Sized> {
    inner: Arc<T>,
    times: ServiceTimes,
    rng: Mutex<ChaCha8Rng>,
}

impl<T: ?Sized> SimParticipant<T> {
    /// Wraps `inner` (a LIS or the NIS); `seed` and `stream` select this participant's own
    /// random stream.
    pub fn new(inner: Arc<T>, times: ServiceTimes, seed: u64, stream: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        SimParticipant { inner, times, rng: Mutex::new(rng) }
    }

    async fn serve(&self, (lo, hi): (f64, f64)) {
        let s = if hi > lo { self.rng.lock().expect("rng lock").gen_range(lo..hi) } else { lo };
        tokio::time::sleep(Duration::from_secs_f64(s)).await;
    }
}

#[async_trait]
impl<R: Role, T: Participant<R> + ?Sized> Participant<R> for SimParticipant<T> {
    async fn query(&self, q: &R::Query) -> Result<R::Answer, ParticipantError> {
        self.serve(match R::KIND {
            ParticipantKind::Compute => self.times.free_slot,
            ParticipantKind::Network => self.times.availability,
        })
        .await;
        self.inner.query(q).await
    }
    async fn prepare(&self, req: &R::Prepare) -> Result<Hold, ParticipantError> {
        self.serve(self.times.hold).await;
        self.inner.prepare(req).await
    }
}

#[async_trait]
impl<T: HoldLifecycle + ?Sized> HoldLifecycle for SimParticipant<T> {
    async fn commit(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.serve(self.times.commit).await;
        self.inner.commit(hold).await
    }
    async fn abort(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.serve(self.times.cancel).await;
        self.inner.abort(hold).await
    }
    async fn release(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.serve(self.times.cancel).await;
        self.inner.release(hold).await
    }
    async fn extend(&self, hold: HoldId, lease_s: i64) -> Result<Hold, ParticipantError> {
        // Table 2 has no lease extension; the planner never extends, so it costs no time here.
        self.inner.extend(hold, lease_s).await
    }
    async fn persist(&self, holds: &[HoldId]) -> Result<(), ParticipantError> {
        // The simulated participants keep no journal (the planner runs without a decision log
        // here, so it never asks): nothing to wait for.
        self.inner.persist(holds).await
    }
    async fn commit_all(&self, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
        // One commit message per hold, each with its service time, as in Table 2.
        coreserve::protocol::commit_each(self, holds).await
    }
}
