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
    /// One message, timed as one prepare.
    async fn prepare_all(&self, reqs: &[R::Prepare]) -> Vec<Result<Hold, ParticipantError>> {
        self.timed(Message::Prepare, self.inner.prepare_all(reqs)).await
    }
    /// One message, timed as one query.
    async fn snapshot(&self, window: &super::SnapshotWindow) -> Result<Option<R::Snapshot>, ParticipantError> {
        self.timed(Message::Query, self.inner.snapshot(window)).await
    }
    async fn drift(&self) -> Result<Vec<super::Drift>, ParticipantError> {
        self.inner.drift().await
    }
    /// One message, timed as one query.
    async fn ceilings(&self, qs: &[R::Query]) -> Option<Vec<u64>> {
        self.timed(Message::Query, self.inner.ceilings(qs)).await
    }
    /// One message, timed as one query.
    async fn first_granted(&self, qs: &[R::Query]) -> Option<Option<(usize, R::Answer)>> {
        self.timed(Message::Query, self.inner.first_granted(qs)).await
    }
}

#[async_trait]
impl<T: HoldLifecycle + ?Sized> HoldLifecycle for Timed<T> {
    fn replaced_by(&self, hold: HoldId) -> Option<HoldId> {
        self.inner.replaced_by(hold)
    }
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
    async fn abort_all(&self, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
        self.timed(Message::Abort, self.inner.abort_all(holds)).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    use super::*;
    use crate::clock::ManualClock;
    use crate::lis::Lis;
    use crate::model::Site;
    use crate::protocol::{Compute, ComputeQuery};

    #[derive(Default)]
    struct Calls(Mutex<Vec<Message>>);
    impl CallObserver for Calls {
        fn observe(&self, _: ParticipantKind, message: Message, _: f64) {
            self.0.lock().unwrap().push(message);
        }
    }

    /// A LIS that counts the batches it is sent.
    struct Batches(Lis, AtomicUsize);
    #[async_trait]
    impl Participant<Compute> for Batches {
        async fn query(&self, q: &ComputeQuery) -> Result<super::super::ComputeOffer, ParticipantError> {
            self.0.query(q).await
        }
        async fn query_all(&self, qs: &[ComputeQuery]) -> Vec<Result<super::super::ComputeOffer, ParticipantError>> {
            self.1.fetch_add(1, Ordering::SeqCst);
            let mut out = Vec::new();
            for q in qs {
                out.push(self.0.query(q).await);
            }
            out
        }
        async fn prepare(&self, req: &super::super::ComputeHoldRequest) -> Result<Hold, ParticipantError> {
            self.0.prepare(req).await
        }
    }

    crate::protocol::lifecycle_passes_through!(Batches);

    /// Issue 13: a wrapper must pass a batch on as one message (the default one-by-one loop
    /// sent the planner's batches over HTTP one query at a time).
    #[tokio::test]
    async fn a_batch_of_queries_is_one_timed_message() {
        let site = Site::new("s1", "n1", 8, "linux", 1.0);
        let inner = Arc::new(Batches(Lis::new(site, Arc::new(ManualClock::new(0)), 120), AtomicUsize::new(0)));
        let calls = Arc::new(Calls::default());
        let t = Timed::new(inner.clone(), ParticipantKind::Compute, calls.clone());
        let q =
            ComputeQuery { site: "s1".into(), cpus: 4, duration_s: 60, window_start: 0, deadline: 1000, gpus: None };
        let answers = Participant::<Compute>::query_all(&t, &[q.clone(), q.clone(), q]).await;
        assert_eq!(answers.len(), 3);
        assert!(answers.iter().all(|a| a.as_ref().unwrap().earliest_start == Some(0)));
        assert_eq!(inner.1.load(Ordering::SeqCst), 1, "one batch reached the participant");
        assert_eq!(*calls.0.lock().unwrap(), vec![Message::Query], "observed as one message");
    }
}
