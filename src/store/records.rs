//! The records the store keeps and gives back: plans ([`PlanRecord`], [`PlanStatus`] from the model,
//! [`PlanFilter`]), their events ([`PlanEvent`]), webhooks and their deliveries, idempotency
//! keys and claims ([`KeyClaim`], [`Claim`]), API tokens ([`TokenRecord`], [`TokenWatch`]),
//! journaled holds ([`StoredHold`]), the decision log's writes ([`DecisionRecord`],
//! [`ModificationRecord`], [`RejectionRecord`]), and what pruning and the pool report
//! ([`Pruned`], [`PoolState`]). All re-exported by `crate::store`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::{Outcome, PlanStatus};
use crate::protocol::decision::{Booking, Decision, PartHold};
use crate::protocol::HoldState;

use super::stamp_part_states;
// The names of the docs' links.
#[cfg(doc)]
use super::{DecisionStore, HoldStore, KeyStore, PlanStore, Store, StoreError, TokenStore};

/// One change of a plan's state, from the durable event log (`GET /v1/events`).
///
/// Written in the same transaction as the change it records (PostgreSQL: a trigger on `plans`,
/// migrations/0020_plan_events.sql; memory: under the store's lock). Ids grow in commit order,
/// so a reader that resumes after id N (`Last-Event-ID: N`) misses nothing and sees nothing
/// twice.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PlanEvent {
    /// Monotonic, > 0, in commit order; the SSE `id:`.
    pub id: i64,
    /// When the change was written.
    pub at: DateTime<Utc>,
    /// What changed, also the SSE `event:`: `plan.` and the plan's new status
    /// (`plan.committed`, `plan.active`, `plan.broken`, ...), `plan.modified`, or a part's new
    /// state at its start or end (`job.running`, `job.ended`, `transfer.running`,
    /// `transfer.ended`, written as the service's clock passes the part's booked start and end).
    #[serde(rename = "type")]
    pub kind: String,
    /// The job (its name) or transfer (`from->to`, its jobs' names) a `job.*` or `transfer.*`
    /// event is about; absent on a plan's event.
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

/// A lease on the webhooks due for delivery ([`crate::store::WebhookStore::lease_due_webhooks`]):
/// up to `limit` of them, to `owner` (a process) for `lease_s` seconds from `now`.
#[derive(Debug, Clone, Copy)]
pub struct WebhookLease<'a> {
    pub owner: &'a str,
    pub now: DateTime<Utc>,
    pub lease_s: i64,
    pub limit: i64,
}

/// What [`crate::store::WebhookStore::insert_webhook`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookInsert {
    /// Stored.
    Inserted,
    /// Not stored: the owner has `webhooks` webhooks already, the most allowed.
    AtLimit {
        /// The owner's webhooks when it was refused.
        webhooks: usize,
    },
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
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeliveryRecord {
    pub webhook_id: Uuid,
    pub event_id: i64,
    pub at: DateTime<Utc>,
    /// The attempt's number for this event (1 = first).
    pub attempt: i32,
    /// The receiver's HTTP status (absent: no answer).
    pub status_code: Option<i32>,
    /// Why it failed (absent when delivered): the receiver's status, or, when there was no
    /// answer (connection refused, reset or timed out, destination not allowed), only that
    /// there was none (`no answer from the destination`).
    pub error: Option<String>,
    /// How long the receiver took to answer, milliseconds (0 when it did not answer).
    pub duration_ms: f64,
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
    /// caller's [`Claim`], which must keep renewing it ([`KeyStore::renew_claims`]) until the
    /// plan is stored with it ([`DecisionStore::record_decision`], [`DecisionStore::record_rejection`]) or it
    /// is released ([`KeyStore::release_key`]).
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
    /// for the same principal; [`TokenStore::insert_token`]).
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

/// What [`TokenStore::token_changes`] gives: a signal per change, and whether the changes are
/// watched right now.
pub struct TokenWatch {
    /// One `()` per change (coalesced).
    pub changed: tokio::sync::mpsc::Receiver<()>,
    /// True while every change is seen (the listening connection is up).
    pub watching: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Filter of [`PlanStore::list_plans`].
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

/// Who works on an idempotency key or a decided transaction, for how long without renewal.
///
/// Every planning request takes a fresh claim id; its process renews the claim every few
/// seconds while it works ([`KeyStore::renew_claims`]). A claim whose lease ran out (the process
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

/// A live hold or reservation read back from the journal ([`HoldStore::live_holds`]): the
/// part's hold as the decision log records it, and where it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredHold {
    /// Which participant keeps it, its id and the prepare message that made it.
    pub part: PartHold,
    /// Held (with its lease end) or committed.
    pub state: HoldState,
    /// Made through the REST hold endpoints.
    pub via_api: bool,
}

/// What [`DecisionStore::record_decision`] writes, all in one database transaction.
#[derive(Clone, Copy)]
pub struct DecisionRecord<'a> {
    /// The coordinator's decision.
    pub decision: Decision<'a>,
    /// The plan: status `committed` when `reservations` (the decision is the end), else
    /// `pending` until [`DecisionStore::finish_txn`].
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

/// What [`DecisionStore::record_modification`] writes, all in one database transaction.
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
    /// they replace released, at once. Else the plan is rewritten by [`DecisionStore::finish_txn`].
    pub reservations: bool,
    /// The idempotency key `(key, fingerprint)` the modification completes (of `owner`).
    pub key: Option<(&'a str, &'a str)>,
    /// The plan's owner (a principal id).
    pub owner: Uuid,
    /// The request's claim: it must still hold the key, and it owns the transaction until it
    /// is finished.
    pub claim: &'a Claim,
}

/// What [`DecisionStore::record_rejection`] writes, in one database transaction.
#[derive(Clone, Copy)]
pub struct RejectionRecord<'a> {
    /// The rejected plan (nothing booked).
    pub plan: &'a PlanRecord,
    /// The idempotency key `(key, fingerprint)` it completes (of `plan.owner`).
    pub key: Option<(&'a str, &'a str)>,
    /// The request's claim, which must still hold the key.
    pub claim: &'a Claim,
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
