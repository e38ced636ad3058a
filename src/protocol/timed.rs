//! [`Timed`]: a transport wrapper that measures how long each participant call takes, as the
//! planner sees it (queueing, the network and the participant's own work), and reports it to a
//! [`CallObserver`]. The service wraps its planners' participants in it so that `/metrics`
//! shows per-call latency histograms by participant kind and message; those are what the
//! simulator's service-time model is calibrated from (docs/simulator.md).

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use super::{Hold, HoldId, HoldLifecycle, Participant, ParticipantError, ParticipantKind, Role};

/// A message of the participant protocol (a metrics label: `query`, `prepare`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "lowercase")]
pub enum Message {
    Query,
    Prepare,
    Commit,
    Abort,
    Release,
    Extend,
    /// Phase 1's votes made durable ([`HoldLifecycle::persist`]).
    Persist,
}

/// Receives the duration of every call a [`Timed`] participant makes, answered or refused.
pub trait CallObserver: Send + Sync {
    /// One `message` to a participant of `kind` took `seconds` (wall clock).
    fn observe(&self, kind: ParticipantKind, message: Message, seconds: f64);
}

/// A participant whose calls are timed (see the module docs). `T` is a LIS, the NIS, any
/// transport of either, or a trait object.
pub struct Timed<T: ?Sized> {
    inner: Arc<T>,
    kind: ParticipantKind,
    observer: Arc<dyn CallObserver>,
}

impl<T: ?Sized> Timed<T> {
    /// `inner`, a participant of `kind`, reporting to `observer`.
    pub fn new(inner: Arc<T>, kind: ParticipantKind, observer: Arc<dyn CallObserver>) -> Self {
        Timed { inner, kind, observer }
    }

    async fn timed<F: std::future::Future>(&self, message: Message, call: F) -> F::Output {
        let start = Instant::now();
        let out = call.await;
        self.observer.observe(self.kind, message, start.elapsed().as_secs_f64());
        out
    }
}

#[async_trait]
impl<R: Role, T: Participant<R> + ?Sized> Participant<R> for Timed<T> {
    async fn query(&self, q: &R::Query) -> Result<R::Answer, ParticipantError> {
        self.timed(Message::Query, self.inner.query(q)).await
    }
    /// One message, timed as one query.
    async fn query_all(&self, qs: &[R::Query]) -> Vec<Result<R::Answer, ParticipantError>> {
        self.timed(Message::Query, self.inner.query_all(qs)).await
    }
    async fn prepare(&self, req: &R::Prepare) -> Result<Hold, ParticipantError> {
        self.timed(Message::Prepare, self.inner.prepare(req)).await
    }
}

#[async_trait]
impl<T: HoldLifecycle + ?Sized> HoldLifecycle for Timed<T> {
    async fn commit(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.timed(Message::Commit, self.inner.commit(hold)).await
    }
    async fn abort(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.timed(Message::Abort, self.inner.abort(hold)).await
    }
    async fn release(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.timed(Message::Release, self.inner.release(hold)).await
    }
    async fn extend(&self, hold: HoldId, lease_s: i64) -> Result<Hold, ParticipantError> {
        self.timed(Message::Extend, self.inner.extend(hold, lease_s)).await
    }
    async fn persist(&self, holds: &[HoldId]) -> Result<(), ParticipantError> {
        self.timed(Message::Persist, self.inner.persist(holds)).await
    }
    async fn commit_all(&self, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
        self.timed(Message::Commit, self.inner.commit_all(holds)).await
    }
}
