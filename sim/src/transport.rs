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
pub use coreserve::protocol::ServiceTimes;
use coreserve::protocol::{Hold, HoldId, HoldLifecycle, Message, Participant, ParticipantError, ParticipantKind, Role};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

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

/// A production participant behind a simulated network: each message waits a service time
/// drawn from its own seeded stream, then is handled by the real participant.
pub struct SimParticipant<T: ?Sized> {
    inner: Arc<T>,
    kind: ParticipantKind,
    times: ServiceTimes,
    /// The planner's batches (queries, aborts, commits of one participant) travel as one
    /// message each, as over HTTP; otherwise a batch of commits is one message per hold, as
    /// in Table 2.
    batched: bool,
    rng: Mutex<ChaCha8Rng>,
}

impl<T: ?Sized> SimParticipant<T> {
    /// Wraps `inner` (a LIS or the NIS, `kind`); `seed` and `stream` select this participant's
    /// own random stream; `batched`: see the field.
    pub fn new(
        inner: Arc<T>,
        kind: ParticipantKind,
        times: ServiceTimes,
        batched: bool,
        seed: u64,
        stream: u64,
    ) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        SimParticipant { inner, kind, times, batched, rng: Mutex::new(rng) }
    }

    async fn serve(&self, message: Message) {
        let Some(range) = self.times.of(self.kind, message) else { return };
        let wait = ServiceTimes::draw(&mut *self.rng.lock().expect("rng lock"), range);
        tokio::time::sleep(wait).await;
    }
}

#[async_trait]
impl<R: Role, T: Participant<R> + ?Sized> Participant<R> for SimParticipant<T> {
    async fn query(&self, q: &R::Query) -> Result<R::Answer, ParticipantError> {
        self.serve(Message::Query).await;
        self.inner.query(q).await
    }
    /// One message (the planner batches only with `batch_messages`).
    async fn query_all(&self, qs: &[R::Query]) -> Vec<Result<R::Answer, ParticipantError>> {
        self.serve(Message::Query).await;
        self.inner.query_all(qs).await
    }
    async fn prepare(&self, req: &R::Prepare) -> Result<Hold, ParticipantError> {
        self.serve(Message::Prepare).await;
        self.inner.prepare(req).await
    }
    /// One message, served as a query.
    async fn ceilings(&self, qs: &[R::Query]) -> Option<Vec<u64>> {
        self.serve(Message::Query).await;
        self.inner.ceilings(qs).await
    }
    /// One message, served as a query.
    async fn snapshot(
        &self,
        window: &coreserve::protocol::SnapshotWindow,
    ) -> Result<Option<R::Snapshot>, ParticipantError> {
        self.serve(Message::Query).await;
        self.inner.snapshot(window).await
    }
    /// One message with `batched`, served as one prepare; else one prepare message each.
    async fn prepare_all(&self, reqs: &[R::Prepare]) -> Vec<Result<Hold, ParticipantError>> {
        if self.batched {
            self.serve(Message::Prepare).await;
            return self.inner.prepare_all(reqs).await;
        }
        let mut answers = Vec::with_capacity(reqs.len());
        for r in reqs {
            answers.push(self.prepare(r).await);
        }
        answers
    }
}

#[async_trait]
impl<T: HoldLifecycle + ?Sized> HoldLifecycle for SimParticipant<T> {
    async fn commit(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.serve(Message::Commit).await;
        self.inner.commit(hold).await
    }
    async fn abort(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.serve(Message::Abort).await;
        self.inner.abort(hold).await
    }
    /// One message (the planner batches aborts only with `batch_messages`).
    async fn abort_all(&self, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
        self.serve(Message::Abort).await;
        self.inner.abort_all(holds).await
    }
    async fn release(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.serve(Message::Release).await;
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
        if self.batched {
            self.serve(Message::Commit).await;
            return self.inner.commit_all(holds).await;
        }
        // One commit message per hold, each with its service time, as in Table 2.
        coreserve::protocol::commit_each(self, holds).await
    }
}
