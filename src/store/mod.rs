//! The broker's own state: what the REST API keeps beyond the participants' calendars.
//!
//! - **plans**: one [`PlanRecord`] per `POST /v1/plans` (committed, rejected, later cancelled),
//!   with the bookings the planner's `Planner::cancel` needs;
//! - **idempotency keys**: `(principal, key)` -> the plan a first request made, so a retried POST
//!   never books twice;
//! - **API tokens**: only the SHA-256 of each bearer token, with its principal (an id, and the
//!   name it is shown as) and roles;
//! - **the participants' journal** ([`crate::protocol::Journal`]): every hold and reservation
//!   of the LISes and the NIS, from which their calendars are rebuilt at start;
//! - **the coordinators' decision log** ([`crate::protocol::decision`]): one row per committed
//!   transaction, written before phase 2; rows not finished are in doubt at start;
//! - **the grid**: sites and topology, so a restart needs no `--grid`.
//!
//! [`Store`] is the seam for persistence: [`MemoryStore`] keeps everything in process (nothing
//! survives a restart); [`PgStore`] keeps it in PostgreSQL (`DATABASE_URL`).
//!
//! This file holds the [`Store`] trait and [`StoreError`]; `records` the records it keeps and
//! gives back ([`PlanRecord`], [`PlanEvent`], [`WebhookRecord`], [`DecisionRecord`], ...);
//! `clock` what the clock does to a stored plan ([`status_in_time`], [`part_boundaries`],
//! [`stamp_part_states`]); `memory` and `postgres` the two stores. Everything is used as
//! `crate::store::X`.

mod clock;
mod memory;
mod postgres;
mod records;

pub use clock::{part_boundaries, stamp_part_states, status_in_time, PartBoundary};
pub use memory::MemoryStore;
pub use postgres::PgStore;
pub use records::{
    Claim, DecisionRecord, DeliveryRecord, KeyClaim, ModificationRecord, PlanEvent, PlanFilter, PlanRecord, PoolState,
    Pruned, RejectionRecord, StoredHold, TokenRecord, TokenWatch, WebhookInsert, WebhookLease, WebhookRecord,
};

use std::collections::HashSet;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::fairshare::{Project, Usage};
use crate::model::{Grid, Outcome, Site, Time};
use crate::protocol::decision::{Ending, InDoubt};
use crate::protocol::{BackendError, HoldId, Journal, JournalError, TxnId};
/// A store failure. Every variant but [`StoreError::Superseded`] keeps the error it comes from
/// as its `source()`; its message includes the source's too, so that a log line written with
/// `%e` names the cause (the API logs it and answers 503 `store-unavailable` for all of them).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database did not answer or refused the statement (a lost connection, an outage);
    /// nothing was written. Retrying later is safe.
    #[error("store unavailable (postgres): {0}")]
    Unavailable(#[source] sqlx::Error),
    /// A stored row cannot be read back: a column does not decode into its type (an unknown
    /// plan status or participant, JSON that no longer parses as its record).
    #[error("store corrupt: {0}")]
    Corrupt(#[source] sqlx::Error),
    /// The stored grid no longer passes the grid's own validation.
    #[error("store corrupt: the stored grid is invalid: {0}")]
    InvalidGrid(#[source] serde_json::Error),
    /// The schema could not be brought up to date (`migrations/`) at connection. (The message
    /// keeps the words it had before this error had its own variant.)
    #[error("store corrupt: migration: {0}")]
    Migration(#[source] sqlx::migrate::MigrateError),
    /// The caller's [`Claim`] on an idempotency key or a transaction has passed to another
    /// claim (its lease ran out while the caller was stalled): nothing was written.
    #[error("the claim has passed to another process")]
    Superseded,
    /// The plan of a decision would take its project past its allocation, counting every
    /// charge committed by any process ([`DecisionStore::record_decision`]): nothing was written.
    #[error("{0}")]
    AllocationExceeded(crate::fairshare::AllocationExceeded),
}

/// A column that does not decode is corruption ([`StoreError::Corrupt`]); any other database
/// error is an outage ([`StoreError::Unavailable`]).
impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match e {
            sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => StoreError::Corrupt(e),
            e => StoreError::Unavailable(e),
        }
    }
}

/// The participants' journal is the store: its failure is the journal's, with the store's
/// error as the cause.
impl From<StoreError> for JournalError {
    fn from(e: StoreError) -> Self {
        JournalError::Unavailable(BackendError::new(e))
    }
}

/// The store of plans: one record per plan request, its status over time (part of [`Store`]).
/// Every method is atomic on its own.
#[async_trait]
pub trait PlanStore: Send + Sync {
    /// Adds a new plan (no key, no decision: fixtures and imports).
    async fn insert_plan(&self, plan: PlanRecord) -> Result<(), StoreError>;
    /// The plan `id`, if any.
    async fn plan(&self, id: Uuid) -> Result<Option<PlanRecord>, StoreError>;
    /// Plans matching `filter`, oldest first.
    async fn list_plans(&self, filter: &PlanFilter) -> Result<Vec<PlanRecord>, StoreError>;
    /// Marks a plan cancelled (keeps the first `cancelled_at`) and its reservations written
    /// with its decision released; returns the updated record.
    async fn mark_cancelled(&self, id: Uuid, at: DateTime<Utc>) -> Result<Option<PlanRecord>, StoreError>;
    /// The committed or broken plan one of whose bookings is hold `hold`, if any.
    async fn plan_of_hold(&self, hold: HoldId) -> Result<Option<PlanRecord>, StoreError>;
    /// Marks plan `id` broken with `outcome` (whose jobs say what broke) if it is committed or
    /// broken; returns the updated record (`None`: no such plan in those states).
    async fn mark_broken(&self, id: Uuid, outcome: &Outcome) -> Result<Option<PlanRecord>, StoreError>;
    /// Moves committed, active and broken plans along the clock to `now`: a plan's status
    /// ([`status_in_time`]; a broken plan stays broken) and its parts' states, each change with
    /// its event (the plan's, then its parts' starts and ends passed since the last move, in
    /// [`part_boundaries`]'s order; `plan.completed` after the last `job.ended`); how many
    /// plans changed. Safe to run in several processes at once (each change is made, and its
    /// event written, once).
    async fn advance_plans(&self, now: DateTime<Utc>) -> Result<u64, StoreError>;
}

/// The store of idempotency keys and the claims (leases) on keys and transactions (part of
/// [`Store`]). Every method is atomic on its own.
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Reserves `(owner, key)` (`owner`: a principal id) for `claim`, or says who has it. A claim whose lease ran out
    /// and that made no plan is taken over (its request died or stalled with its process).
    async fn claim_key(&self, owner: Uuid, key: &str, claim: &Claim) -> Result<KeyClaim, StoreError>;
    /// Frees a key `claim` holds whose request failed before making a plan (bad input, a
    /// store error): a retry may use it again at once. A key `claim` no longer holds is left.
    async fn release_key(&self, owner: Uuid, key: &str, claim: &Claim) -> Result<(), StoreError>;
    /// Extends the lease of every claim in `claims` (keys without a plan, transactions not
    /// finished) by its owner's `lease_s` from now.
    async fn renew_claims(&self, claims: &[Uuid], lease_s: i64) -> Result<(), StoreError>;
    /// Ends every claim at once: keys without a plan are freed and unfinished transactions
    /// become free for recovery (at the start of the only process that plans on this store,
    /// the all-in-one: the claims of its previous life are dead). Returns the keys freed.
    async fn end_all_claims(&self) -> Result<u64, StoreError>;
}

/// The store of API tokens, kept by the SHA-256 of each (part of [`Store`]). Every method is
/// atomic on its own.
#[async_trait]
pub trait TokenStore: Send + Sync {
    /// Adds a token (by hash). A hash already stored keeps its id and, if it was revoked,
    /// stays revoked; its user, roles and expiry are replaced. The token acts for the
    /// principal named `token.user`, made if there is none yet (`token.principal` is ignored).
    async fn insert_token(&self, token: TokenRecord) -> Result<(), StoreError>;
    /// The token with this hash, if any and not revoked (an expired one is returned: the
    /// caller compares `expires_at` with its clock).
    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError>;
    /// Revokes the token `id` (refused from now on, by every process: see
    /// [`TokenStore::token_changes`]); returns it, or `None` if there is no such live token.
    async fn revoke_token(&self, id: Uuid) -> Result<Option<TokenRecord>, StoreError>;
    /// Tells when a token may have changed in another process (a revocation, a role change, a
    /// row deleted by hand): every `()` on the channel means "drop what you cached". PostgreSQL:
    /// LISTEN on channel `coreserve_tokens` (a trigger of `tokens` notifies it); a `false` on
    /// `watching` while the listening connection is lost (changes may be missed: do not cache).
    /// `None`: no other process shares this store (memory).
    async fn token_changes(&self) -> Result<Option<TokenWatch>, StoreError> {
        Ok(None)
    }
}

/// The store of the coordinators' decision log (commit decisions, modifications, rejections)
/// and its transactions (part of [`Store`]). Every method is atomic on its own.
#[async_trait]
pub trait DecisionStore: Send + Sync {
    /// Writes a commit decision, its plan and key (and the reservations, when asked) in one
    /// transaction, together with the plan's **charge**: its jobs' usage against its user's
    /// project ([`crate::fairshare::project_of`] over the stored projects). If that project has
    /// an allocation without overdraft, the charge is checked against every live charge of the
    /// project ([`crate::fairshare::check_limit`]) under a lock that serialises the charges of
    /// one project across every process on the store (PostgreSQL: the project's row, `FOR
    /// UPDATE`), so the limit is exact however many planners book.
    ///
    /// # Errors
    /// [`StoreError::Superseded`] if the request's key has passed to another claim;
    /// [`StoreError::AllocationExceeded`] if the plan does not fit its project's allocation:
    /// nothing is written.
    async fn record_decision(&self, r: &DecisionRecord<'_>) -> Result<(), StoreError>;
    /// Writes a plan modification's commit decision (see [`ModificationRecord`]), with the
    /// plan's charge updated and checked as [`DecisionStore::record_decision`] checks a new one (the
    /// plan's own charge does not count against it), and the `plan.modified` event when the
    /// plan is rewritten.
    ///
    /// # Errors
    /// [`StoreError::Superseded`] if the key has passed to another claim or the plan is not
    /// committed or active with the bookings `replaced` any more;
    /// [`StoreError::AllocationExceeded`]: nothing is written.
    async fn record_modification(&self, r: &ModificationRecord<'_>) -> Result<(), StoreError>;
    /// Stores a rejected plan and completes its key in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Superseded`] if the key has passed to another claim: nothing is written.
    async fn record_rejection(&self, r: &RejectionRecord<'_>) -> Result<(), StoreError>;
    /// Records that `claim` gives up the decided transaction `txn` (a part refused its
    /// commit): compensation follows. Durable before any part is released, so that recovery
    /// never mistakes a compensated part for a cancelled one.
    ///
    /// # Errors
    /// [`StoreError::Superseded`] unless `claim` owns the unfinished transaction.
    async fn mark_compensating(&self, txn: TxnId, claim: &Claim) -> Result<(), StoreError>;
    /// Ends a decided transaction `claim` owns, as `ending` says:
    /// - [`Ending::Committed`]: a pending plan becomes committed; a modification rewrites its
    ///   plan (`plan.modified`);
    /// - [`Ending::Broken`] (a modification): as committed, and in the same transaction the
    ///   plan becomes broken, its parts marked as the given outcome's are
    ///   ([`Outcome::take_broken_from`]; `plan.modified`, then `plan.broken`);
    /// - [`Ending::Compensated`]: the plan becomes rejected with that outcome and the
    ///   reservations written with the decision are released (a modification's plan stays as
    ///   it was).
    ///
    /// # Errors
    /// [`StoreError::Superseded`] unless `claim` owns the unfinished transaction.
    async fn finish_txn(&self, txn: TxnId, claim: &Claim, ending: Ending<'_>) -> Result<(), StoreError>;
    /// Takes over, for `claim`, up to `limit` decided transactions not finished whose lease
    /// ran out (oldest first), and returns them.
    async fn take_in_doubt(&self, claim: &Claim, limit: usize) -> Result<Vec<InDoubt>, StoreError>;
    /// Which of `plans` (`None`: of all plans) have a modification decided and not finished (in doubt: its
    /// participants may hold the new shape while the plan record still shows the old one,
    /// until the modification's end is recorded).
    async fn modifications_in_doubt(&self, plans: Option<&[Uuid]>) -> Result<HashSet<Uuid>, StoreError>;
}

/// The store of the participants' holds as the journal keeps them (part of [`Store`]). Every
/// method is atomic on its own.
#[async_trait]
pub trait HoldStore: Send + Sync {
    /// Committed reservations, and holds whose lease ends after `now`.
    async fn live_holds(&self, now: Time) -> Result<Vec<StoredHold>, StoreError>;
    /// Marks holds whose lease ended at or before `now` expired; returns how many.
    async fn expire_holds(&self, now: Time) -> Result<u64, StoreError>;
    /// The recorded owner (principal) of every hold [`HoldStore::live_holds`] returns that has
    /// one (see `JournalEntry::Held::owner`), as `(hold, owner)` pairs in no order.
    async fn live_hold_owners(&self, now: Time) -> Result<Vec<(HoldId, String)>, StoreError>;
}

/// The store of the grid: sites and topology (part of [`Store`]). Every method is atomic on its
/// own.
#[async_trait]
pub trait GridStore: Send + Sync {
    /// Saves the grid (sites and topology), replacing what was there.
    async fn save_grid(&self, grid: &Grid) -> Result<(), StoreError>;
    /// The saved grid, if any.
    async fn load_grid(&self) -> Result<Option<Grid>, StoreError>;
    /// Saves one site's new catalogue entry.
    async fn save_site(&self, site: &Site) -> Result<(), StoreError>;
}

/// The store of fair-share projects and their charges (part of [`Store`]). Every method is
/// atomic on its own.
#[async_trait]
pub trait ProjectStore: Send + Sync {
    /// Creates or replaces a fair-share project (its allocation and members).
    async fn save_project(&self, project: &Project) -> Result<(), StoreError>;
    /// Every project saved, by id.
    async fn projects(&self) -> Result<Vec<Project>, StoreError>;
    /// Every live charge (neither compensated nor cancelled) that ends after `since`, as
    /// `(plan, project, usage)`: what the planning processes' fair-share ledgers cache.
    async fn live_charges(&self, since: Time) -> Result<Vec<(Uuid, String, Vec<Usage>)>, StoreError>;
    /// The usage of the live charges of `project` (committed or in-doubt plans, neither
    /// compensated nor cancelled) that run in `[from, to)`.
    async fn charged(&self, project: &str, from: Time, to: Time) -> Result<Vec<Usage>, StoreError>;
}

/// The store of plan events, the feed behind `/v1/events` and the webhooks (part of [`Store`]).
/// Every method is atomic on its own.
#[async_trait]
pub trait EventStore: Send + Sync {
    /// The readable events with an id above `after`, oldest first, at most `limit`; only the
    /// plans of principal `owner` when `Some`. Readable: no event with a smaller id can be
    /// written any more, so a reader that moves past the last id read loses nothing (in
    /// PostgreSQL an event becomes readable once every older writing transaction has ended:
    /// docs/protocol.md, "Plan states and events"; the memory store's are readable at once).
    async fn events_after(&self, after: i64, owner: Option<Uuid>, limit: i64) -> Result<Vec<PlanEvent>, StoreError>;
    /// The id of the newest readable event (0 when none): where a reader that wants only what
    /// comes next starts.
    async fn last_event_id(&self) -> Result<i64, StoreError>;
    /// Waits until every event committed before the call is readable (read-your-writes for a
    /// caller that wrote events and now reads them). The memory store's are at once.
    ///
    /// # Errors
    /// The store failed to answer.
    async fn settle_events(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// The store of webhooks, their leases and delivery logs (part of [`Store`]). Every method is
/// atomic on its own.
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Stores a new webhook, unless its owner has `max_per_owner` webhooks already (`None`: no
    /// limit). The count and the insert are one step for every process on the store: two
    /// registrations of one owner at the same moment, through different processes, cannot
    /// both pass the limit (PostgreSQL: a transaction-scoped advisory lock on the owner).
    async fn insert_webhook(&self, w: WebhookRecord, max_per_owner: Option<usize>)
        -> Result<WebhookInsert, StoreError>;
    /// The webhooks of principal `owner` (`None`: everyone's), oldest first.
    async fn webhooks(&self, owner: Option<Uuid>) -> Result<Vec<WebhookRecord>, StoreError>;
    /// One webhook.
    async fn webhook(&self, id: Uuid) -> Result<Option<WebhookRecord>, StoreError>;
    /// Deletes a webhook and its delivery log; false if there was none.
    async fn delete_webhook(&self, id: Uuid) -> Result<bool, StoreError>;
    /// Leases up to `lease.limit` enabled webhooks due at `lease.now` (`next_attempt_at <=
    /// now`) with an event after their cursor and whose lease ran out, to `lease.owner` for
    /// `lease.lease_s` seconds: one process delivers a webhook at a time.
    async fn lease_due_webhooks(&self, lease: WebhookLease<'_>) -> Result<Vec<WebhookRecord>, StoreError>;
    /// Records delivery attempts (oldest first) and the webhook's state after the last
    /// (`cursor`, `attempts`, `next_attempt_at`, `failing_since`, `last_error`, `enabled`), in
    /// one write, if `owner` still holds its lease ([`StoreError::Superseded`] if not); the
    /// delivery log keeps the newest 100 attempts per webhook.
    async fn record_deliveries(
        &self,
        owner: &str,
        webhook: &WebhookRecord,
        deliveries: &[DeliveryRecord],
    ) -> Result<(), StoreError>;
    /// Ends `owner`'s lease of a webhook (its next delivery may go from any process).
    async fn release_webhook(&self, owner: &str, id: Uuid) -> Result<(), StoreError>;
    /// A webhook's delivery log, newest first, at most `limit`.
    async fn deliveries(&self, id: Uuid, limit: i64) -> Result<Vec<DeliveryRecord>, StoreError>;
}

/// The service's persistent state: every part below, the participants' [`Journal`], and
/// what concerns the whole store. Every method is atomic on its own.
#[async_trait]
pub trait Store:
    Journal
    + PlanStore
    + KeyStore
    + TokenStore
    + DecisionStore
    + HoldStore
    + GridStore
    + ProjectStore
    + EventStore
    + WebhookStore
    + Send
    + Sync
{
    /// A signal that events may have been written (by any process sharing the store): the
    /// receiver's value changes after each (coalesced; a hint, not a delivery: readers read
    /// [`EventStore::events_after`]).
    fn event_signal(&self) -> tokio::sync::watch::Receiver<u64>;
    /// Readiness probe: can the store answer?
    async fn ping(&self) -> Result<(), StoreError>;
    /// A short name for logs and `/readyz` (`memory`, `postgres`).
    fn kind(&self) -> &'static str;
    /// The database connection pool's state now (`/metrics`); `None` without one (memory).
    fn pool_state(&self) -> Option<PoolState> {
        None
    }
    /// Closes the store at the service's shutdown: its connections, and the loops that keep
    /// one (the event pump and listener, the token listener) end. Nothing to do in memory.
    async fn close(&self) {}
    /// Retention: deletes what is finished and older than `horizon` ([`Pruned`] lists what, and
    /// how many rows went). Plans that still hold reservations or wait for recovery (committed,
    /// active, broken, pending) never go, nor any journal row or decision of theirs, nor a
    /// decision still in doubt. Safe to run in several processes at once.
    async fn prune_finished(&self, horizon: DateTime<Utc>) -> Result<Pruned, StoreError>;
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn a_column_that_does_not_decode_is_corruption_anything_else_an_outage() {
        let e = StoreError::from(sqlx::Error::PoolTimedOut);
        assert!(matches!(e, StoreError::Unavailable(sqlx::Error::PoolTimedOut)));
        assert_eq!(e.to_string(), format!("store unavailable (postgres): {}", sqlx::Error::PoolTimedOut));
        let decode = sqlx::Error::ColumnDecode { index: "\"status\"".into(), source: "unknown variant".into() };
        assert!(matches!(StoreError::from(decode), StoreError::Corrupt(sqlx::Error::ColumnDecode { .. })));
    }

    /// The journal and the decision log keep the store's error as their source, and their text
    /// is the one they had when they carried it as a string.
    #[test]
    fn protocol_errors_keep_the_store_error_as_their_source() {
        let e = JournalError::from(StoreError::from(sqlx::Error::PoolTimedOut));
        let store_text = format!("store unavailable (postgres): {}", sqlx::Error::PoolTimedOut);
        assert_eq!(e.to_string(), format!("journal: {store_text}"));
        let JournalError::Unavailable(cause) = &e else { panic!("unavailable: {e:?}") };
        assert!(matches!(cause.get_ref().downcast_ref::<StoreError>(), Some(StoreError::Unavailable(_))));
        let source = e.source().expect("the store's error");
        assert_eq!(source.to_string(), store_text);
        let sqlx = source.source().expect("the sqlx error");
        assert_eq!(sqlx.to_string(), sqlx::Error::PoolTimedOut.to_string());
    }
}
