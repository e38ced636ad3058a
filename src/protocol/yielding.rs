//! [`Yielding`]: the in-process transport of the all-in-one service. It forwards every
//! message unchanged, after giving the scheduler a chance to run other tasks once the planning
//! task has used up its cooperative budget (`tokio::task::coop::consume_budget`: about 128
//! messages or other budgeted operations per poll).
//!
//! An in-process participant answers without ever waiting, so without a yield point a long
//! search (a 64-job request takes about a second) would keep its worker thread to itself, and
//! every other request on that thread, however small, would wait for it. A yield before every
//! message cost a scheduler round (and an `epoll_wait`) per message, about 200 per plan on
//! Geant2012 (7.7 % of the all-in-one's CPU); yielding when the budget runs out keeps long
//! searches interleaved (a yield at least every few hundred microseconds) at a fraction of
//! that. HTTP participants and the simulator's transport wait anyway.

use std::sync::Arc;

use async_trait::async_trait;

use super::{Hold, HoldId, HoldLifecycle, Participant, ParticipantError, Role};

/// A participant reached in process, yielding when the task's budget runs out (see the module
/// docs).
/// `T` is a LIS or the NIS (or a trait object of either).
pub struct Yielding<T: ?Sized>(pub Arc<T>);

#[async_trait]
impl<R: Role, T: Participant<R> + ?Sized> Participant<R> for Yielding<T> {
    async fn query(&self, q: &R::Query) -> Result<R::Answer, ParticipantError> {
        tokio::task::coop::consume_budget().await;
        self.0.query(q).await
    }
    async fn prepare(&self, req: &R::Prepare) -> Result<Hold, ParticipantError> {
        tokio::task::coop::consume_budget().await;
        self.0.prepare(req).await
    }
    async fn prepare_all(&self, reqs: &[R::Prepare]) -> Vec<Result<Hold, ParticipantError>> {
        tokio::task::coop::consume_budget().await;
        self.0.prepare_all(reqs).await
    }
    async fn snapshot(&self, window: &super::SnapshotWindow) -> Result<Option<R::Snapshot>, ParticipantError> {
        tokio::task::coop::consume_budget().await;
        self.0.snapshot(window).await
    }
    async fn drift(&self) -> Result<Vec<super::Drift>, ParticipantError> {
        self.0.drift().await
    }
    async fn ceilings(&self, qs: &[R::Query]) -> Option<Vec<u64>> {
        tokio::task::coop::consume_budget().await;
        self.0.ceilings(qs).await
    }
    async fn first_granted(&self, qs: &[R::Query]) -> Option<Option<(usize, R::Answer)>> {
        tokio::task::coop::consume_budget().await;
        self.0.first_granted(qs).await
    }
}

#[async_trait]
impl<T: HoldLifecycle + ?Sized> HoldLifecycle for Yielding<T> {
    fn replaced_by(&self, hold: HoldId) -> Option<HoldId> {
        self.0.replaced_by(hold)
    }
    async fn commit(&self, hold: HoldId) -> Result<(), ParticipantError> {
        tokio::task::coop::consume_budget().await;
        self.0.commit(hold).await
    }
    async fn abort(&self, hold: HoldId) -> Result<(), ParticipantError> {
        tokio::task::coop::consume_budget().await;
        self.0.abort(hold).await
    }
    async fn release(&self, hold: HoldId) -> Result<(), ParticipantError> {
        tokio::task::coop::consume_budget().await;
        self.0.release(hold).await
    }
    async fn extend(&self, hold: HoldId, lease_s: i64) -> Result<Hold, ParticipantError> {
        tokio::task::coop::consume_budget().await;
        self.0.extend(hold, lease_s).await
    }
    async fn persist(&self, holds: &[HoldId]) -> Result<(), ParticipantError> {
        tokio::task::coop::consume_budget().await;
        self.0.persist(holds).await
    }
    async fn commit_all(&self, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
        tokio::task::coop::consume_budget().await;
        self.0.commit_all(holds).await
    }
}
