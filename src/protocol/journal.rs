//! Durable participants: every prepare-OK, commit, abort, release and lease extension a
//! participant answers is written to a [`Journal`] before the answer leaves.
//!
//! [`Journaled`] wraps any in-memory [`Participant`] (a LIS or the NIS) so that it keeps its
//! promises across its own crash (after OGF NSI CS v2; docs/protocol.md): a hold is durable before
//! prepare answers OK, so after a restart the participant rebuilds its calendar from the
//! journal ([`crate::lis::Lis::restore`], [`crate::nis::Nis::restore`]) and the hold is still
//! there until its lease ends. Order of each call: the in-memory participant decides (it may
//! refuse: nothing is written), then the journal records the change, then the caller is
//! answered. If the journal fails, the caller gets [`ParticipantError::Durability`]:
//! - prepare: the in-memory hold is aborted again, so nothing was promised;
//! - commit, abort, release, extend: the in-memory change stays; every one of them is
//!   idempotent, so the coordinator's retry (it must retry: it has no answer) writes the record.
//!
//! A crash between the in-memory change and the journal write loses only that change, which
//! was never acknowledged: a commit not journaled comes back as a hold (with its journaled
//! lease), which the coordinator commits again on recovery.
//!
//! Exception: a participant built with [`Journaled::tentative_prepares`] answers prepares
//! before journaling them (see [`Tentative`] for why that is safe); the coordinator makes
//! them durable with [`HoldLifecycle::persist`] before its decision, a commit journals a hold
//! never persisted together with its commit, and an abort of a tentative hold writes nothing.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{Hold, HoldId, HoldLifecycle, HoldRequest, Participant, ParticipantError, ParticipantRef, Role};
use crate::model::Time;

/// One change to a participant's holds and reservations, as journaled.
// `Held` carries the whole prepare message; entries are made one per message and written
// out at once, so boxing it would buy nothing but an indirection at every use.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum JournalEntry {
    /// Prepare-OK: `request` is held as `hold` until `expires_at`.
    Held {
        /// The participant that granted it.
        participant: ParticipantRef,
        /// The hold's id.
        hold: HoldId,
        /// The prepare message (what it books: site or links, amount, interval).
        request: HoldRequest,
        /// The lease end (seconds since the epoch, like every `Time`).
        expires_at: Time,
        /// Made through the REST hold endpoints (`POST /v1/sites/{id}/holds`,
        /// `POST /v1/network/holds`), whose phase 2 is driven through `/v1/holds/{id}/...`.
        via_api: bool,
        /// The principal that prepared it (the token's `user`); only it (or an admin) may
        /// commit, abort, release or extend it through the HTTP endpoints. `None`: prepared by
        /// the participant's own process, or journaled before owners were recorded.
        #[serde(default)]
        owner: Option<String>,
    },
    /// The hold `hold` became a reservation.
    Committed {
        /// The hold.
        hold: HoldId,
    },
    /// The hold `hold` was released before commit.
    Aborted {
        /// The hold.
        hold: HoldId,
    },
    /// The reservation `hold` was given back.
    Released {
        /// The hold.
        hold: HoldId,
    },
    /// The lease of `hold` now ends at `expires_at`.
    Extended {
        /// The hold.
        hold: HoldId,
        /// The new lease end.
        expires_at: Time,
    },
}

/// Where a journaled hold stands: its row's state (the `reservations.state` column, whose CHECK
/// constraint lists the same five words; read by sqlx as TEXT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::Display, sqlx::Type)]
#[strum(serialize_all = "lowercase")]
#[sqlx(type_name = "text", rename_all = "lowercase")]
pub enum JournalState {
    /// Prepared, its lease running.
    Held,
    /// A reservation.
    Committed,
    /// Aborted before commit: final.
    Aborted,
    /// Its lease ran out (the sweeper wrote it); a commit or extension the participant accepted
    /// before that still wins.
    Expired,
    /// Given back after commit: final.
    Released,
}

/// What a journal entry does to its hold's row, by the row's state before it. Every entry is
/// legal only from the states it may follow, as a saga log refuses an event its saga's state
/// does not allow (Oxide's steno): both stores decide by this one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The row is written or moves to this state.
    To(JournalState),
    /// The row says so already (a write retried): nothing changes.
    Already,
    /// No row: the hold was never journaled. Nothing changes; the store counts it
    /// ([`unmatched_entries`]) and logs it.
    NoRow,
    /// The entry contradicts the row (e.g. a commit of an aborted hold): refused
    /// ([`JournalError::Illegal`]), nothing changes.
    Illegal,
}

impl JournalEntry {
    /// The hold the entry is about.
    pub fn hold(&self) -> HoldId {
        match self {
            JournalEntry::Held { hold, .. }
            | JournalEntry::Committed { hold }
            | JournalEntry::Aborted { hold }
            | JournalEntry::Released { hold }
            | JournalEntry::Extended { hold, .. } => *hold,
        }
    }

    /// The entry's name in logs and errors (`held`, `committed`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            JournalEntry::Held { .. } => "held",
            JournalEntry::Committed { .. } => "committed",
            JournalEntry::Aborted { .. } => "aborted",
            JournalEntry::Released { .. } => "released",
            JournalEntry::Extended { .. } => "extended",
        }
    }

    /// What this entry does to a row in state `from` (`None`: no row).
    pub fn transition(&self, from: Option<JournalState>) -> Transition {
        use JournalState as S;
        match (self, from) {
            (JournalEntry::Held { .. }, None) => Transition::To(S::Held),
            // Journaled before (a persist retried); the row keeps its later state.
            (JournalEntry::Held { .. }, Some(_)) => Transition::Already,
            (_, None) => Transition::NoRow,
            (JournalEntry::Committed { .. }, Some(S::Held | S::Expired)) => Transition::To(S::Committed),
            (JournalEntry::Committed { .. }, Some(S::Committed)) => Transition::Already,
            (JournalEntry::Aborted { .. }, Some(S::Held)) => Transition::To(S::Aborted),
            (JournalEntry::Aborted { .. }, Some(S::Aborted | S::Expired)) => Transition::Already,
            (JournalEntry::Released { .. }, Some(S::Committed)) => Transition::To(S::Released),
            (JournalEntry::Released { .. }, Some(S::Released)) => Transition::Already,
            (JournalEntry::Extended { .. }, Some(S::Held | S::Expired)) => Transition::To(S::Held),
            _ => Transition::Illegal,
        }
    }

    /// [`JournalEntry::transition`] as a store applies it: the state to write (`None`: nothing
    /// to write). A missing row is counted and logged.
    ///
    /// # Errors
    /// [`JournalError::Illegal`]: the entry contradicts the row; the store writes nothing.
    pub fn apply_to(&self, from: Option<JournalState>) -> Result<Option<JournalState>, JournalError> {
        match self.transition(from) {
            Transition::To(state) => Ok(Some(state)),
            Transition::Already => Ok(None),
            Transition::NoRow => {
                UNMATCHED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!(hold = %self.hold(), entry = self.name(), "journal entry for a hold never journaled: ignored");
                Ok(None)
            }
            Transition::Illegal => {
                let state = from.expect("a missing row is never illegal");
                tracing::error!(hold = %self.hold(), entry = self.name(), %state, "illegal journal entry refused");
                Err(JournalError::Illegal { hold: self.hold(), entry: self.name(), state })
            }
        }
    }
}

/// Journal entries that matched no row, since the process started (`/metrics`:
/// `coreserve_journal_unmatched_entries_total`).
static UNMATCHED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many journal entries matched no row in this process ([`Transition::NoRow`]).
pub fn unmatched_entries() -> u64 {
    UNMATCHED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Why a journal write failed. Nothing was written; an unavailable journal's write may be
/// retried, an illegal entry's not.
///
/// `protocol` sits below the store (the store implements [`Journal`]), so the backend's own
/// error (the store's `StoreError`, holding the `sqlx::Error`) travels as a [`BackendError`]:
/// its text and its `source()` chain are kept, its type is not named here.
#[derive(Debug, Clone, thiserror::Error)]
pub enum JournalError {
    /// The journal's backend did not answer or refused the write (a lost database connection,
    /// an outage). The message includes the cause's, so a log line written with `%e` shows it.
    #[error("journal: {0}")]
    Unavailable(#[source] BackendError),
    /// The entry contradicts what the journal holds of the hold (e.g. a commit of an aborted
    /// hold): refused, nothing written; writing it again cannot succeed.
    #[error("journal: `{entry}` of hold {hold} refused: the hold is {state}")]
    Illegal { hold: HoldId, entry: &'static str, state: JournalState },
}

impl JournalError {
    /// The backend failed with `cause`.
    pub fn unavailable(cause: impl Into<BackendError>) -> Self {
        JournalError::Unavailable(cause.into())
    }
}

/// The error of the backend behind a protocol trait ([`Journal`], the decision log's
/// [`super::decision::DecisionLog`]), carried by [`JournalError`] and
/// [`super::decision::LogError`] without `protocol` depending on the store or sqlx.
///
/// Transparent: it displays as the cause and its `source()` is the cause's source (it adds no
/// link of its own to the chain); [`BackendError::get_ref`] gives the cause itself (to
/// downcast, e.g. to the store's `StoreError`). Shared (an `Arc`, not a `Box`) because the
/// errors that carry it are `Clone`, as are the planner's results that carry those.
#[derive(Debug, Clone)]
pub struct BackendError(Arc<dyn std::error::Error + Send + Sync + 'static>);

impl BackendError {
    /// Wraps the backend's error `cause`.
    pub fn new(cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        BackendError(Arc::new(cause))
    }

    /// The backend's error itself.
    pub fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// A cause known only by its text (test doubles, backends without an error type).
impl From<&str> for BackendError {
    fn from(text: &str) -> Self {
        BackendError(Arc::from(Box::<dyn std::error::Error + Send + Sync>::from(text)))
    }
}

/// A cause known only by its text.
impl From<String> for BackendError {
    fn from(text: String) -> Self {
        BackendError(Arc::from(Box::<dyn std::error::Error + Send + Sync>::from(text)))
    }
}

/// Where participants make their changes durable (implemented by [`crate::store`]).
#[async_trait]
pub trait Journal: Send + Sync {
    /// Writes `entry`; it is durable when this returns `Ok`.
    async fn append(&self, entry: &JournalEntry) -> Result<(), JournalError>;

    /// Writes `entries` in order, all or none (one transaction, one flush: group commit); they
    /// are durable when this returns `Ok`. The default writes them one by one, which is all or
    /// none only for backends that cannot fail halfway (the memory store).
    async fn append_all(&self, entries: &[JournalEntry]) -> Result<(), JournalError> {
        for e in entries {
            self.append(e).await?;
        }
        Ok(())
    }
}

/// The tentative holds of one process: prepare-OKs granted in memory only, not journaled yet
/// (their [`JournalEntry::Held`], by hold id). Shared by every [`Journaled`] of the process.
///
/// Why a hold may be tentative (docs/protocol.md, "Tentative holds"): a participant that
/// forgets a hold (it crashed before the hold was journaled) answers the coordinator's commit
/// with `UnknownHold`, so the commit fails and the coordinator gives the plan up and compensates:
/// nothing is overbooked and nothing half-booked. The only promise a tentative hold cannot keep
/// is surviving the participant's crash; a coordinator that logs its decision asks for that
/// promise first, with [`HoldLifecycle::persist`], one journal write per participant for all of
/// its holds, instead of one write per tentative hold of the search (most of which the search
/// aborts again: those cost no write at all).
#[derive(Clone, Default)]
pub struct Tentative(Arc<std::sync::Mutex<std::collections::HashMap<HoldId, JournalEntry>>>);

impl Tentative {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<HoldId, JournalEntry>> {
        self.0.lock().expect("tentative holds")
    }

    /// Forgets the tentative holds whose lease ended at or before `now` (the participant has
    /// expired them; persisting one now would be pointless). Returns how many. The sweeper
    /// calls it.
    pub fn prune(&self, now: Time) -> usize {
        let mut m = self.lock();
        let before = m.len();
        m.retain(|_, e| !matches!(e, JournalEntry::Held { expires_at, .. } if *expires_at <= now));
        before - m.len()
    }

    /// Tentative holds kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no hold is tentative.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A participant whose every acknowledged change is journaled first (see the module docs).
pub struct Journaled<T: ?Sized> {
    inner: Arc<T>,
    who: ParticipantRef,
    journal: Arc<dyn Journal>,
    via_api: bool,
    owner: Option<String>,
    backlog: Backlog,
    tentative: Tentative,
    /// Prepares grant tentative holds (kept in `tentative`, journaled by `persist` or commit).
    prepare_tentative: bool,
}

/// Journal entries whose write failed after the participant had already changed its calendar
/// (commit, abort, release, extend: the in-memory change stays, see the module docs). They are
/// written again, in order, before any later entry and by the sweeper ([`Backlog::flush`]), so
/// the journal catches up with the calendar as soon as the store answers, whether or not the
/// coordinator retries. Without it, an abort or a release that the journal missed during a
/// store outage came back at the next start as a live hold or reservation, on top of what had
/// been booked in its place since.
#[derive(Clone, Default)]
pub struct Backlog(Arc<tokio::sync::Mutex<std::collections::VecDeque<JournalEntry>>>);

impl Backlog {
    /// Writes every waiting entry, oldest first; stops at the first failure (the rest wait).
    /// Returns how many were written.
    ///
    /// # Errors
    /// The journal's, for the entry that could not be written.
    pub async fn flush(&self, journal: &dyn Journal) -> Result<usize, JournalError> {
        let mut q = self.0.lock().await;
        let mut n = 0;
        while let Some(e) = q.front() {
            match journal.append(e).await {
                Ok(()) => n += 1,
                // Logged by the store; waiting would not make it legal.
                Err(JournalError::Illegal { .. }) => {}
                Err(e) => return Err(e),
            }
            q.pop_front();
        }
        Ok(n)
    }

    /// Entries waiting.
    pub async fn len(&self) -> usize {
        self.0.lock().await.len()
    }

    /// True when nothing waits.
    pub async fn is_empty(&self) -> bool {
        self.len().await == 0
    }
}

impl<T: ?Sized> Journaled<T> {
    /// Wraps `inner` (the participant `who`); `via_api` marks the holds it makes as made
    /// through the REST hold endpoints.
    pub fn new(inner: Arc<T>, who: ParticipantRef, journal: Arc<dyn Journal>, via_api: bool) -> Self {
        Journaled {
            inner,
            who,
            journal,
            via_api,
            owner: None,
            backlog: Backlog::default(),
            tentative: Tentative::default(),
            prepare_tentative: false,
        }
    }

    /// The same participant knowing the process's tentative holds `tentative` (every
    /// `Journaled` of a process must share them: a hold prepared through one is persisted,
    /// committed or aborted through another).
    pub fn with_tentative(mut self, tentative: Tentative) -> Self {
        self.tentative = tentative;
        self
    }

    /// The same participant granting tentative holds: its prepares are answered before they
    /// are journaled (see [`Tentative`]); [`HoldLifecycle::persist`] or the commit journals them.
    pub fn tentative_prepares(mut self) -> Self {
        self.prepare_tentative = true;
        self
    }

    /// The same participant keeping its failed writes in `backlog` (shared by every
    /// `Journaled` of one process, and flushed by its sweeper).
    pub fn with_backlog(mut self, backlog: Backlog) -> Self {
        self.backlog = backlog;
        self
    }

    /// The same participant acting for the principal `owner`: its prepares record and journal
    /// `owner` as the holds' owner ([`Participant::prepare_for`]).
    pub fn owned_by(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Writes `entry` after the backlog. `Err`: not durable; an entry of a change already
    /// made in memory (`keep`) then waits in the backlog.
    async fn write(&self, entry: JournalEntry, keep: bool) -> Result<(), ParticipantError> {
        self.write_all(vec![entry], keep).await
    }

    /// Writes `entries` after the backlog, all or none (see [`Self::write`]).
    async fn write_all(&self, entries: Vec<JournalEntry>, keep: bool) -> Result<(), ParticipantError> {
        if entries.is_empty() {
            return Ok(());
        }
        let r = match self.backlog.flush(self.journal.as_ref()).await {
            Ok(_) if entries.len() == 1 => self.journal.append(&entries[0]).await,
            Ok(_) => self.journal.append_all(&entries).await,
            Err(e) => Err(e),
        };
        let Err(e) = r else { return Ok(()) };
        tracing::error!(error = %e, participant = %self.who, "journal write failed");
        match e {
            JournalError::Unavailable(cause) => {
                if keep {
                    self.backlog.0.lock().await.extend(entries);
                }
                // The participant's error names the backend's failure (its text), not the journal.
                Err(ParticipantError::Durability(cause.to_string()))
            }
            illegal @ JournalError::Illegal { .. } => Err(ParticipantError::InvalidHold(illegal.to_string())),
        }
    }
}

#[async_trait]
impl<R: Role, T: Participant<R> + ?Sized> Participant<R> for Journaled<T> {
    async fn query(&self, q: &R::Query) -> Result<R::Answer, ParticipantError> {
        self.inner.query(q).await
    }

    async fn query_all(&self, qs: &[R::Query]) -> Vec<Result<R::Answer, ParticipantError>> {
        self.inner.query_all(qs).await
    }

    async fn drift(&self) -> Result<Vec<super::Drift>, ParticipantError> {
        self.inner.drift().await
    }

    async fn ceilings(&self, qs: &[R::Query]) -> Option<Vec<u64>> {
        self.inner.ceilings(qs).await
    }

    async fn first_granted(&self, qs: &[R::Query]) -> Option<Option<(usize, R::Answer)>> {
        self.inner.first_granted(qs).await
    }

    /// A snapshot changes nothing: nothing to journal.
    async fn snapshot(&self, window: &super::SnapshotWindow) -> Result<Option<R::Snapshot>, ParticipantError> {
        self.inner.snapshot(window).await
    }

    async fn prepare(&self, req: &R::Prepare) -> Result<Hold, ParticipantError> {
        let hold = match &self.owner {
            Some(owner) => self.inner.prepare_for(req, owner).await?,
            None => self.inner.prepare(req).await?,
        };
        let entry = JournalEntry::Held {
            participant: self.who.clone(),
            hold: hold.id,
            request: req.clone().into(),
            expires_at: hold.expires_at,
            via_api: self.via_api,
            owner: self.owner.clone(),
        };
        if self.prepare_tentative {
            self.tentative.lock().insert(hold.id, entry);
            return Ok(hold);
        }
        if let Err(e) = self.write(entry, false).await {
            // Not durable, so not promised: give the capacity back.
            if let Err(abort) = self.inner.abort(hold.id).await {
                tracing::error!(error = %abort, hold = %hold.id, "abort of an unjournaled hold failed");
            }
            return Err(e);
        }
        Ok(hold)
    }
}

#[async_trait]
impl<T: HoldLifecycle + ?Sized> HoldLifecycle for Journaled<T> {
    fn replaced_by(&self, hold: HoldId) -> Option<HoldId> {
        self.inner.replaced_by(hold)
    }
    async fn commit(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.commit_all(&[hold]).await.pop().expect("one answer per hold")
    }

    /// Commits in memory, then journals every commit (with the `Held` record of a tentative
    /// hold before it, and the release of the reservation a replacement hold replaces after
    /// it) in one write.
    async fn commit_all(&self, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
        // A replacement's commit releases the reservation it replaces: journaled with it.
        let replaced: Vec<Option<HoldId>> = holds.iter().map(|&h| self.inner.replaced_by(h)).collect();
        let mut answers = self.inner.commit_all(holds).await;
        let mut entries = Vec::new();
        let mut written = Vec::new();
        for (i, (&hold, replaced)) in holds.iter().zip(replaced).enumerate() {
            if answers[i].is_ok() {
                entries.extend(self.tentative.lock().remove(&hold));
                entries.push(JournalEntry::Committed { hold });
                entries.extend(replaced.map(|old| JournalEntry::Released { hold: old }));
                written.push(i);
            }
        }
        if let Err(e) = self.write_all(entries, true).await {
            for i in written {
                answers[i] = Err(e.clone());
            }
        }
        answers
    }

    /// A tentative hold is forgotten without a write; a journaled one is journaled aborted.
    async fn abort(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.inner.abort(hold).await?;
        if self.tentative.lock().remove(&hold).is_some() {
            return Ok(());
        }
        self.write(JournalEntry::Aborted { hold }, true).await
    }

    /// The participant's own persist first (a LIS in front of Slurm makes the reservations
    /// there), then the `Held` records of the tentative holds among `holds`, in one write.
    async fn persist(&self, holds: &[HoldId]) -> Result<(), ParticipantError> {
        self.inner.persist(holds).await?;
        let entries: Vec<JournalEntry> = {
            let m = self.tentative.lock();
            holds.iter().filter_map(|h| m.get(h).cloned()).collect()
        };
        self.write_all(entries, false).await?;
        let mut m = self.tentative.lock();
        for h in holds {
            m.remove(h);
        }
        Ok(())
    }

    async fn release(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.inner.release(hold).await?;
        self.write(JournalEntry::Released { hold }, true).await
    }

    async fn extend(&self, hold: HoldId, lease_s: i64) -> Result<Hold, ParticipantError> {
        let h = self.inner.extend(hold, lease_s).await?;
        if let Some(JournalEntry::Held { expires_at, .. }) = self.tentative.lock().get_mut(&hold) {
            *expires_at = h.expires_at;
            return Ok(h);
        }
        self.write(JournalEntry::Extended { hold, expires_at: h.expires_at }, true).await?;
        Ok(h)
    }
}

#[cfg(test)]
mod tests;
