//! [`MemoryStore`]: the [`Store`] in process memory. Nothing survives a restart.
//!
//! This file holds the store (everything behind one mutex, and the guard that wakes the event
//! readers) and the [`Store`] impl, whose every method is the inherent method of the same name
//! (inherent methods win a method call's lookup) in the file of its concern, as in
//! `store::postgres`:
//!
//! - `inner`: the state behind the mutex, its rows, and the writes several concerns share;
//! - `plans`: the plans, and the clock's advance of their status;
//! - `claims`: idempotency keys and claims; `tokens`: API tokens and principals;
//! - `decisions`: the coordinators' decision log and the recovery of transactions in doubt;
//! - `journal`: the participants' journal (the [`crate::protocol::Journal`] impl) and live holds;
//! - `grid`: the grid, projects and allocation charges;
//! - `events`: the event log and the webhooks; `prune`: the pruning of finished records.

mod claims;
mod decisions;
mod events;
mod grid;
mod inner;
mod journal;
mod plans;
mod prune;
mod tokens;

use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Store, StoreError};
use inner::Inner;

/// Everything in one mutex: the API's state is small next to the calendars.
pub struct MemoryStore {
    inner: Mutex<Inner>,
    /// Bumped after each event ([`Store::event_signal`]).
    signal: tokio::sync::watch::Sender<u64>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore { inner: Mutex::default(), signal: tokio::sync::watch::Sender::new(0) }
    }
}

/// The store's guard: on drop (after the change and its events), wakes the event readers if
/// events were written.
struct Guard<'a> {
    inner: std::sync::MutexGuard<'a, Inner>,
    events_before: usize,
    signal: &'a tokio::sync::watch::Sender<u64>,
}

impl std::ops::Deref for Guard<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl std::ops::DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.inner
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        let now = self.inner.events.len();
        if now > self.events_before {
            self.signal.send_replace(now as u64);
        }
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> Guard<'_> {
        let inner = self.inner.lock().expect("memory store lock");
        let events_before = inner.events.len();
        Guard { inner, events_before, signal: &self.signal }
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn event_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.signal.subscribe()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "memory"
    }

    async fn prune_finished(&self, horizon: DateTime<Utc>) -> Result<super::Pruned, StoreError> {
        self.prune_finished(horizon).await
    }
}
