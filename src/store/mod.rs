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

mod memory;
mod postgres;

pub use memory::MemoryStore;
pub use postgres::PgStore;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::fairshare::{Project, Usage};
use crate::model::{Grid, Outcome, OutcomeStatus, PartState, Site, Time};
use crate::protocol::decision::{Booking, Decision, Ending, InDoubt};
use crate::protocol::{BackendError, HoldId, HoldRequest, HoldState, Journal, JournalError, ParticipantRef, TxnId};

/// The life of a stored plan.
///
/// One spelling, lowercase, for every form: JSON (serde), text (strum: `Display`, `FromStr`,
/// `AsRef<str>`, `&'static str`, the metrics' labels) and the `plans.status` column (sqlx: a
/// TEXT column read with `status as "status: PlanStatus"`; written as `&'static str`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
    sqlx::Type,
    strum::Display,
    strum::EnumString,
    strum::AsRefStr,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "text", rename_all = "lowercase")]
#[strum(serialize_all = "lowercase", parse_err_ty = String, parse_err_fn = unknown_status)]
pub enum PlanStatus {
    /// Only in dry-run answers: nothing was booked and nothing is stored.
    Planned,
    /// The coordinator decided to commit, but phase 2 is not confirmed yet (a participant or
    /// the store did not answer): not reported as booked. A recovery loop settles it as
    /// `committed` or `rejected` within seconds of the participants and the store answering.
    Pending,
    /// Every reservation is booked; its first job has not started yet.
    Committed,
    /// Committed, and its first job's start has come (the service's clock); its last job has
    /// not ended.
    Active,
    /// Committed, and its last job's end has passed: nothing of it is booked any more.
    Completed,
    /// Nothing was booked; the outcome's `reason` says why.
    Rejected,
    /// It was committed, then cancelled: every reservation was released.
    Cancelled,
    /// It was committed, and a participant can no longer honour a reservation of it (e.g. an
    /// administrator deleted its Slurm reservation): the outcome's jobs say which and why
    /// (`broken`). Never reported as committed; it can still be cancelled.
    Broken,
}

/// The error of `PlanStatus::from_str` (the `status` filter of `GET /v1/plans` answers it).
fn unknown_status(other: &str) -> String {
    format!("unknown status `{other}`; expected pending, committed, active, completed, rejected, cancelled or broken")
}

impl From<OutcomeStatus> for PlanStatus {
    fn from(s: OutcomeStatus) -> Self {
        match s {
            OutcomeStatus::Committed => PlanStatus::Committed,
            OutcomeStatus::Rejected => PlanStatus::Rejected,
            OutcomeStatus::Planned => PlanStatus::Planned,
        }
    }
}

impl PlanStatus {
    /// Committed, active or broken: the plan still holds reservations, and may be cancelled.
    pub fn holds_reservations(self) -> bool {
        matches!(self, PlanStatus::Committed | PlanStatus::Active | PlanStatus::Broken)
    }
}

/// One change of a plan's state, from the durable event log (`GET /v1/events`).
///
/// Written in the same transaction as the change it records (PostgreSQL: a trigger on `plans`,
/// migrations/0020_plan_events.sql; memory: under the store's lock). Ids grow in commit order,
/// so a reader that resumes after id N (`Last-Event-ID: N`) misses nothing and sees nothing
/// twice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PlanEvent {
    /// Monotonic, > 0, in commit order; the SSE `id:`.
    pub id: i64,
    /// When the change was written.
    pub at: DateTime<Utc>,
    /// What changed, also the SSE `event:`: `plan.` and the plan's new status
    /// (`plan.committed`, `plan.active`, `plan.broken`, ...), `plan.modified`, or a part's new
    /// state at its start or end (`job.running`, `job.ended`, `transfer.running`,
    /// `transfer.ended`; see [`part_boundaries`]).
    #[serde(rename = "type")]
    pub kind: String,
    /// The job (its name) or transfer (`from->to`, its jobs' names) a `job.*` or `transfer.*`
    /// event is about; absent on a plan's event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    /// The plan (`/v1/plans/{plan_id}`).
    pub plan_id: Uuid,
    /// The client's reference of the plan request.
    pub request_id: String,
    /// The plan owner's name.
    pub user: String,
    /// The plan's owner (its principal id): who sees the event. Not in the event's JSON.
    #[serde(skip)]
    pub owner: Uuid,
    /// The plan's new status.
    pub status: PlanStatus,
    /// The plan's jobs at the change (a broken one says why in `broken`).
    pub jobs: Vec<crate::model::JobPlacement>,
    /// The plan's transfers at the change (a broken one says why in `broken`).
    pub transfers: Vec<crate::model::TransferPlacement>,
}

impl PlanEvent {
    /// The event of `plan` reaching its current status, numbered `id`, at `at`.
    pub fn of(id: i64, at: DateTime<Utc>, plan: &PlanRecord) -> PlanEvent {
        PlanEvent {
            id,
            at,
            kind: format!("plan.{}", plan.status),
            part: None,
            plan_id: plan.id,
            request_id: plan.outcome.request_id.clone(),
            user: plan.user.clone(),
            owner: plan.owner,
            status: plan.status,
            jobs: plan.outcome.jobs.clone(),
            transfers: plan.outcome.transfers.clone(),
        }
        .with_part_states()
    }

    /// Each job's and transfer's `state` at the event's time.
    pub fn with_part_states(mut self) -> Self {
        stamp_part_states(self.status, &mut self.jobs, &mut self.transfers, self.at);
        self
    }
}

/// One start or end of a plan's part: a `job.*` or `transfer.*` event once the clock passes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartBoundary {
    pub at: DateTime<Utc>,
    /// `job.running`, `job.ended`, `transfer.running` or `transfer.ended`.
    pub kind: &'static str,
    /// The job's name, or the transfer's `from->to`.
    pub part: String,
}

/// The starts and ends of `outcome`'s parts that are not broken, in the order their events are
/// written: by time; at one instant ends before starts, jobs before transfers, each in the
/// plan's order. The PostgreSQL store computes the same in SQL (`plan_boundaries`,
/// migrations/0023_part_events.sql).
pub fn part_boundaries(outcome: &crate::model::Outcome) -> Vec<PartBoundary> {
    let jobs = outcome.jobs.iter().filter(|j| j.broken.is_none()).map(|j| (j.name.clone(), j.start, j.end));
    let transfers = outcome
        .transfers
        .iter()
        .filter(|t| t.broken.is_none())
        .map(|t| (format!("{}->{}", t.from, t.to), t.start, t.end));
    let parts: Vec<(bool, String, DateTime<Utc>, DateTime<Utc>)> =
        jobs.map(|j| (true, j.0, j.1, j.2)).chain(transfers.map(|t| (false, t.0, t.1, t.2))).collect();
    let mut out: Vec<(DateTime<Utc>, u8, PartBoundary)> = Vec::new();
    for (job, part, start, end) in parts {
        let (running, ended) = if job { ("job.running", "job.ended") } else { ("transfer.running", "transfer.ended") };
        // The rank at one instant: job ends, transfer ends, job starts, transfer starts.
        out.push((end, u8::from(!job), PartBoundary { at: end, kind: ended, part: part.clone() }));
        out.push((start, 2 + u8::from(!job), PartBoundary { at: start, kind: running, part }));
    }
    // A stable sort keeps the plan's order within one rank.
    out.sort_by_key(|(at, rank, _)| (*at, *rank));
    out.into_iter().map(|(_, _, b)| b).collect()
}

/// Sets each job's and transfer's `state` at `now` ([`PartState::at`]) for a plan in `status`
/// that was booked (committed, active, completed, broken or cancelled); leaves them unset
/// otherwise.
pub fn stamp_part_states(
    status: PlanStatus,
    jobs: &mut [crate::model::JobPlacement],
    transfers: &mut [crate::model::TransferPlacement],
    now: DateTime<Utc>,
) {
    let cancelled = status == PlanStatus::Cancelled;
    if !(status.holds_reservations() || matches!(status, PlanStatus::Completed) || cancelled) {
        return;
    }
    for j in jobs {
        j.state = Some(PartState::at(now, j.start, j.end, j.broken.is_some(), cancelled));
    }
    for t in transfers {
        t.state = Some(PartState::at(now, t.start, t.end, t.broken.is_some(), cancelled));
    }
}

/// A user's webhook: where the events of their plans (an admin's: everyone's) are POSTed, and
/// how far its deliveries got (see `crate::api::webhooks`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WebhookRecord {
    pub id: Uuid,
    /// The owner's principal id: whose events it gets.
    pub owner: Uuid,
    /// The owner's name.
    pub user: String,
    /// Made by an admin: gets every user's events.
    pub admin: bool,
    /// Where deliveries are POSTed (http or https).
    pub url: String,
    /// The HMAC-SHA256 key of the deliveries' signatures.
    pub secret: String,
    pub created_at: DateTime<Utc>,
    /// False once disabled (failing for longer than the service's limit).
    pub enabled: bool,
    /// The id of the last event delivered (answered 2xx); deliveries go on after it, in order.
    pub cursor: i64,
    /// Failed attempts in a row at the next event.
    pub attempts: i32,
    /// Not tried again before this.
    pub next_attempt_at: DateTime<Utc>,
    /// Since when every attempt failed (`None` while the last one succeeded).
    pub failing_since: Option<DateTime<Utc>>,
    /// The last failure: an HTTP status or a transport error.
    pub last_error: Option<String>,
}

/// One delivery attempt of an event to a webhook (its delivery log).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeliveryRecord {
    pub webhook_id: Uuid,
    pub event_id: i64,
    pub at: DateTime<Utc>,
    /// The attempt's number for this event (1 = first).
    pub attempt: i32,
    /// The receiver's HTTP status (absent: no answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<i32>,
    /// Why it failed (absent when delivered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub duration_ms: f64,
}

/// The status a committed or active plan has at `now`: active from its first job's start,
/// completed from its last job's end (a plan without jobs keeps its status).
pub fn status_in_time(status: PlanStatus, outcome: &Outcome, now: DateTime<Utc>) -> PlanStatus {
    let first = outcome.jobs.iter().map(|j| j.start).min();
    let last = outcome.jobs.iter().map(|j| j.end).max();
    match (status, first, last) {
        (PlanStatus::Committed | PlanStatus::Active, _, Some(end)) if end <= now => PlanStatus::Completed,
        (PlanStatus::Committed, Some(start), _) if start <= now => PlanStatus::Active,
        (s, _, _) => s,
    }
}

/// One plan the API made.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRecord {
    /// The plan's own id (`/v1/plans/{id}`).
    pub id: Uuid,
    /// The owner's name, as shown (the `user` of the API).
    pub user: String,
    /// The owner: the principal id of the caller that made it (what access is checked on;
    /// `migrations/0009_principal_ids.sql`). Two principals may be shown alike, never
    /// confused.
    pub owner: Uuid,
    /// Pending, committed, rejected or cancelled.
    pub status: PlanStatus,
    /// The planner's outcome (its `request_id` is the client's reference).
    pub outcome: Outcome,
    /// What to release on cancel (empty unless committed).
    pub bookings: Vec<Booking>,
    /// When the request was received.
    pub created_at: DateTime<Utc>,
    /// When it was first cancelled.
    pub cancelled_at: Option<DateTime<Utc>>,
}

/// What the store knows about an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyClaim {
    /// The key is new (or its previous claim's lease ran out) and is now reserved for the
    /// caller's [`Claim`], which must keep renewing it ([`Store::renew_claims`]) until the
    /// plan is stored with it ([`Store::record_decision`], [`Store::record_rejection`]) or it
    /// is released ([`Store::release_key`]).
    Claimed,
    /// Another request with this key is being planned right now (its claim's lease runs).
    InProgress,
    /// A request with this key made plan `plan`.
    Done {
        /// The plan.
        plan: Uuid,
        /// That request's body hash (hex SHA-256).
        fingerprint: String,
    },
}

/// A stored API token (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// The token's own id (what a revocation names; not a secret).
    pub id: Uuid,
    /// Hex SHA-256 of the bearer token.
    pub hash: String,
    /// The name of the principal it acts for (as shown).
    pub user: String,
    /// The principal it acts for: set by the store from `user` (every token of one name acts
    /// for the same principal; [`Store::insert_token`]).
    pub principal: Uuid,
    /// May do everything: grid changes, every user's plans, tokens.
    pub admin: bool,
    /// May drive holds directly (prepare, commit, abort, extend): a planner or another broker.
    pub service: bool,
    /// Acts as a planner of this deployment: the holds it prepares belong to the deployment's
    /// planner principal ([`crate::api::auth::PLANNERS`]), which every planner may drive.
    pub planner: bool,
    /// Refused from this instant on (`None`: never expires).
    pub expires_at: Option<DateTime<Utc>>,
}

impl TokenRecord {
    /// A token of `user` with a fresh id, no planner role, no expiry.
    pub fn new(hash: impl Into<String>, user: impl Into<String>, admin: bool, service: bool) -> Self {
        TokenRecord {
            id: Uuid::new_v4(),
            hash: hash.into(),
            user: user.into(),
            principal: Uuid::nil(),
            admin,
            service,
            planner: false,
            expires_at: None,
        }
    }

    /// Has it expired at `now`?
    pub fn expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|t| t <= now)
    }
}

/// What [`Store::token_changes`] gives: a signal per change, and whether the changes are
/// watched right now.
pub struct TokenWatch {
    /// One `()` per change (coalesced).
    pub changed: tokio::sync::mpsc::Receiver<()>,
    /// True while every change is seen (the listening connection is up).
    pub watching: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Filter of [`Store::list_plans`].
#[derive(Debug, Clone, Default)]
pub struct PlanFilter {
    /// Only this principal's plans (`None`: everyone's, for admins).
    pub owner: Option<Uuid>,
    /// Only plans in this state.
    pub status: Option<PlanStatus>,
    /// Only plans whose start is >= this (plans without a start never match a bound).
    pub from: Option<DateTime<Utc>>,
    /// Only plans whose start is < this.
    pub to: Option<DateTime<Utc>>,
}

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
    /// charge committed by any process ([`Store::record_decision`]): nothing was written.
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

/// Who works on an idempotency key or a decided transaction, for how long without renewal.
///
/// Every planning request takes a fresh claim id; its process renews the claim every few
/// seconds while it works ([`Store::renew_claims`]). A claim whose lease ran out (the process
/// died or stalled) is taken over by the next claimant, and every later write under the old
/// claim fails with [`StoreError::Superseded`], so one key never yields two plans and one
/// transaction is settled by one process at a time.
#[derive(Debug, Clone)]
pub struct Claim {
    /// This claim (fresh per request or recovery round).
    pub id: Uuid,
    /// The process that holds it (logs and diagnostics), e.g. `planner@host:8080#pid`.
    pub owner: String,
    /// Seconds the claim lives without renewal.
    pub lease_s: i64,
}

impl Claim {
    /// A fresh claim of `owner` with a lease of `lease_s` seconds.
    pub fn new(owner: &str, lease_s: i64) -> Self {
        Claim { id: Uuid::new_v4(), owner: owner.to_owned(), lease_s }
    }
}

/// A live hold or reservation read back from the journal ([`Store::live_holds`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredHold {
    /// The LIS or the NIS that keeps it.
    pub participant: ParticipantRef,
    /// Its id.
    pub hold: HoldId,
    /// The prepare message that made it.
    pub request: HoldRequest,
    /// Held (with its lease end) or committed.
    pub state: HoldState,
    /// Made through the REST hold endpoints.
    pub via_api: bool,
}

/// What [`Store::record_decision`] writes, all in one database transaction.
#[derive(Clone, Copy)]
pub struct DecisionRecord<'a> {
    /// The coordinator's decision.
    pub decision: Decision<'a>,
    /// The plan: status `committed` when `reservations` (the decision is the end), else
    /// `pending` until [`Store::finish_txn`].
    pub plan: &'a PlanRecord,
    /// Also write every part as a committed reservation (participants that share the
    /// coordinator's fate journal nothing themselves; see [`crate::protocol::decision`]); the
    /// transaction is then finished at once.
    pub reservations: bool,
    /// The idempotency key `(key, fingerprint)` the plan completes (of `plan.user`).
    pub key: Option<(&'a str, &'a str)>,
    /// The request's claim: it must still hold the key, and it owns the transaction until
    /// the transaction is finished.
    pub claim: &'a Claim,
}

/// What [`Store::record_modification`] writes, all in one database transaction.
#[derive(Clone, Copy)]
pub struct ModificationRecord<'a> {
    /// The coordinator's decision: the replacement holds and the plan's new outcome.
    pub decision: Decision<'a>,
    /// The plan modified.
    pub plan: Uuid,
    /// Its bookings as the modification found them: the write is refused if they changed.
    pub replaced: &'a [Booking],
    /// Its bookings once the modification is committed ([`crate::protocol::decision::replaced_bookings`]).
    pub bookings: &'a [Booking],
    /// Participants share the coordinator's fate (all-in-one): the decision is the end, so
    /// the plan is rewritten, the replacement holds written committed and the reservations
    /// they replace released, at once. Else the plan is rewritten by [`Store::finish_txn`].
    pub reservations: bool,
    /// The idempotency key `(key, fingerprint)` the modification completes (of `owner`).
    pub key: Option<(&'a str, &'a str)>,
    /// The plan's owner (a principal id).
    pub owner: Uuid,
    /// The request's claim: it must still hold the key, and it owns the transaction until it
    /// is finished.
    pub claim: &'a Claim,
}

/// What [`Store::record_rejection`] writes, in one database transaction.
#[derive(Clone, Copy)]
pub struct RejectionRecord<'a> {
    /// The rejected plan (nothing booked).
    pub plan: &'a PlanRecord,
    /// The idempotency key `(key, fingerprint)` it completes (of `plan.owner`).
    pub key: Option<(&'a str, &'a str)>,
    /// The request's claim, which must still hold the key.
    pub claim: &'a Claim,
}

/// The service's persistent state. Every method is atomic on its own.
#[async_trait]
pub trait Store: Journal + Send + Sync {
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

    /// Reserves `(owner, key)` (`owner`: a principal id) for `claim`, or says who has it. A claim whose lease ran out
    /// and that made no plan is taken over (its request died or stalled with its process).
    async fn claim_key(&self, owner: Uuid, key: &str, claim: &Claim) -> Result<KeyClaim, StoreError>;
    /// Frees a key `claim` holds whose request failed before making a plan (bad input, a
    /// store error): a retry may use it again at once. A key `claim` no longer holds is left.
    async fn release_key(&self, owner: Uuid, key: &str, claim: &Claim) -> Result<(), StoreError>;
    /// Extends the lease of every claim in `claims` (keys without a plan, transactions not
    /// finished) by its owner's `lease_s` from now.
    async fn renew_claims(&self, claims: &[Uuid], lease_s: i64) -> Result<(), StoreError>;

    /// Adds a token (by hash). A hash already stored keeps its id and, if it was revoked,
    /// stays revoked; its user, roles and expiry are replaced. The token acts for the
    /// principal named `token.user`, made if there is none yet (`token.principal` is ignored).
    async fn insert_token(&self, token: TokenRecord) -> Result<(), StoreError>;
    /// The token with this hash, if any and not revoked (an expired one is returned: the
    /// caller compares `expires_at` with its clock).
    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError>;
    /// Revokes the token `id` (refused from now on, by every process: see
    /// [`Store::token_changes`]); returns it, or `None` if there is no such live token.
    async fn revoke_token(&self, id: Uuid) -> Result<Option<TokenRecord>, StoreError>;

    /// Ends every claim at once: keys without a plan are freed and unfinished transactions
    /// become free for recovery (at the start of the only process that plans on this store,
    /// the all-in-one: the claims of its previous life are dead). Returns the keys freed.
    async fn end_all_claims(&self) -> Result<u64, StoreError>;

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
    /// plan's charge updated and checked as [`Store::record_decision`] checks a new one (the
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
    /// Committed reservations, and holds whose lease ends after `now`.
    async fn live_holds(&self, now: Time) -> Result<Vec<StoredHold>, StoreError>;
    /// Marks holds whose lease ended at or before `now` expired; returns how many.
    async fn expire_holds(&self, now: Time) -> Result<u64, StoreError>;
    /// The recorded owner (principal) of every hold [`Store::live_holds`] returns that has
    /// one (see `JournalEntry::Held::owner`), as `(hold, owner)` pairs in no order.
    async fn live_hold_owners(&self, now: Time) -> Result<Vec<(HoldId, String)>, StoreError>;

    /// Saves the grid (sites and topology), replacing what was there.
    async fn save_grid(&self, grid: &Grid) -> Result<(), StoreError>;
    /// The saved grid, if any.
    async fn load_grid(&self) -> Result<Option<Grid>, StoreError>;
    /// Saves one site's new catalogue entry.
    async fn save_site(&self, site: &Site) -> Result<(), StoreError>;
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

    /// Tells when a token may have changed in another process (a revocation, a role change, a
    /// row deleted by hand): every `()` on the channel means "drop what you cached". PostgreSQL:
    /// LISTEN on channel `coreserve_tokens` (a trigger of `tokens` notifies it); a `false` on
    /// `watching` while the listening connection is lost (changes may be missed: do not cache).
    /// `None`: no other process shares this store (memory).
    async fn token_changes(&self) -> Result<Option<TokenWatch>, StoreError> {
        Ok(None)
    }

    /// Moves committed, active and broken plans along the clock to `now`: a plan's status
    /// ([`status_in_time`]; a broken plan stays broken) and its parts' states, each change with
    /// its event (the plan's, then its parts' starts and ends passed since the last move, in
    /// [`part_boundaries`]'s order; `plan.completed` after the last `job.ended`); how many
    /// plans changed. Safe to run in several processes at once (each change is made, and its
    /// event written, once).
    async fn advance_plans(&self, now: DateTime<Utc>) -> Result<u64, StoreError>;

    /// The events with an id above `after`, oldest first, at most `limit`; only the plans of
    /// principal `owner` when `Some`.
    async fn events_after(&self, after: i64, owner: Option<Uuid>, limit: i64) -> Result<Vec<PlanEvent>, StoreError>;

    /// The id of the newest event written (0 when none).
    async fn last_event_id(&self) -> Result<i64, StoreError>;

    /// A signal that events may have been written (by any process sharing the store): the
    /// receiver's value changes after each (coalesced; a hint, not a delivery: readers read
    /// [`Store::events_after`]).
    fn event_signal(&self) -> tokio::sync::watch::Receiver<u64>;

    /// Stores a new webhook.
    async fn insert_webhook(&self, w: WebhookRecord) -> Result<(), StoreError>;

    /// The webhooks of principal `owner` (`None`: everyone's), oldest first.
    async fn webhooks(&self, owner: Option<Uuid>) -> Result<Vec<WebhookRecord>, StoreError>;

    /// One webhook.
    async fn webhook(&self, id: Uuid) -> Result<Option<WebhookRecord>, StoreError>;

    /// Deletes a webhook and its delivery log; false if there was none.
    async fn delete_webhook(&self, id: Uuid) -> Result<bool, StoreError>;

    /// Leases up to `limit` enabled webhooks due at `now` (`next_attempt_at <= now`) with an
    /// event after their cursor and whose lease ran out, to `owner` for `lease_s` seconds: one
    /// process delivers a webhook at a time.
    async fn lease_due_webhooks(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        lease_s: i64,
        limit: i64,
    ) -> Result<Vec<WebhookRecord>, StoreError>;

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

    /// Readiness probe: can the store answer?
    async fn ping(&self) -> Result<(), StoreError>;
    /// A short name for logs and `/readyz` (`memory`, `postgres`).
    fn kind(&self) -> &'static str;

    /// The database connection pool's state now (`/metrics`); `None` without one (memory).
    fn pool_state(&self) -> Option<PoolState> {
        None
    }

    /// Retention: deletes what is finished and older than `horizon` ([`Pruned`] lists what, and
    /// how many rows went). Plans that still hold reservations or wait for recovery (committed,
    /// active, broken, pending) never go, nor any journal row or decision of theirs, nor a
    /// decision still in doubt. Safe to run in several processes at once.
    async fn prune_finished(&self, horizon: DateTime<Utc>) -> Result<Pruned, StoreError>;
}

/// What one [`Store::prune_finished`] deleted (rows).
///
/// - `plans`: cancelled plans cancelled before the horizon, rejected ones made before it,
///   completed ones whose last job ended before it;
/// - `idempotency_keys`: the keys of those plans (a retry with such a key books anew);
/// - `journal`: participants' journal rows (holds and reservations) aborted, expired or
///   released before the horizon, committed ones that ended before it, held ones whose lease
///   ended before it;
/// - `decisions`: decided transactions finished before the horizon;
/// - `events`: plan events written before the horizon and delivered to every enabled webhook
///   (PostgreSQL; the memory store numbers its events by position and keeps them);
/// - `deliveries`: webhook delivery log entries before the horizon;
/// - `charges`: allocation charges released before the horizon (a live charge counts against
///   its project's allocation, whatever its age, and stays).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Pruned {
    pub plans: u64,
    pub idempotency_keys: u64,
    pub journal: u64,
    pub decisions: u64,
    pub events: u64,
    pub deliveries: u64,
    pub charges: u64,
}

impl Pruned {
    /// Rows deleted in all.
    pub fn total(&self) -> u64 {
        self.plans
            + self.idempotency_keys
            + self.journal
            + self.decisions
            + self.events
            + self.deliveries
            + self.charges
    }
}

/// The state of a database connection pool ([`Store::pool_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolState {
    /// Connections open (idle or in use).
    pub size: u32,
    /// Connections open and idle.
    pub idle: u32,
    /// The pool's limit.
    pub max: u32,
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn plan_status_is_spelled_alike_in_json_text_and_filters() {
        for s in <PlanStatus as strum::VariantArray>::VARIANTS {
            assert_eq!(serde_json::to_string(s).unwrap(), format!("\"{s}\""));
            assert_eq!(<&str>::from(*s), s.as_ref());
            assert_eq!(s.to_string().parse::<PlanStatus>(), Ok(*s));
        }
        assert_eq!(
            "Committed".parse::<PlanStatus>(),
            Err("unknown status `Committed`; expected pending, committed, active, completed, rejected, cancelled or broken"
                .to_owned())
        );
    }

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
        let JournalError::Unavailable(cause) = &e;
        assert!(matches!(cause.get_ref().downcast_ref::<StoreError>(), Some(StoreError::Unavailable(_))));
        let source = e.source().expect("the store's error");
        assert_eq!(source.to_string(), store_text);
        let sqlx = source.source().expect("the sqlx error");
        assert_eq!(sqlx.to_string(), sqlx::Error::PoolTimedOut.to_string());
    }
}
