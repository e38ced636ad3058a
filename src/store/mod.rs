//! The broker's own state: what the REST API keeps beyond the participants' calendars.
//!
//! - **plans**: one [`PlanRecord`] per `POST /v1/plans` (committed, rejected, later cancelled),
//!   with the bookings [`crate::planner::Planner::cancel`] needs;
//! - **idempotency keys**: `(user, key)` -> the plan a first request made, so a retried POST
//!   never books twice;
//! - **API tokens**: only the SHA-256 of each bearer token, with its user and roles;
//! - **the participants' journal** ([`crate::protocol::Journal`]): every hold and reservation
//!   of the LISes and the NIS, from which their calendars are rebuilt at start;
//! - **the coordinators' decision log** ([`crate::planner::log`]): one row per committed
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

use crate::model::{Grid, Outcome, OutcomeStatus, Site, Time};
use crate::planner::log::Decision;
use crate::planner::{Booking, InDoubt};
use crate::protocol::{HoldId, HoldRequest, HoldState, Journal, JournalError, ParticipantRef, TxnId};

/// The life of a stored plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PlanStatus {
    /// Only in dry-run answers: nothing was booked and nothing is stored.
    Planned,
    /// Every reservation is booked.
    Committed,
    /// Nothing was booked; the outcome's `reason` says why.
    Rejected,
    /// It was committed, then cancelled: every reservation was released.
    Cancelled,
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

impl std::str::FromStr for PlanStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "planned" => Ok(PlanStatus::Planned),
            "committed" => Ok(PlanStatus::Committed),
            "rejected" => Ok(PlanStatus::Rejected),
            "cancelled" => Ok(PlanStatus::Cancelled),
            other => Err(format!("unknown status `{other}`; expected committed, rejected or cancelled")),
        }
    }
}

/// One plan the API made.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRecord {
    /// The plan's own id (`/v1/plans/{id}`).
    pub id: Uuid,
    /// The owner (the user of the token that made it).
    pub user: String,
    /// Committed, rejected or cancelled.
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
    /// The key is new and now reserved for the caller, who must
    /// [`Store::complete_key`] or [`Store::release_key`] it.
    Claimed,
    /// Another request with this key is being planned right now.
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
    /// Hex SHA-256 of the bearer token.
    pub hash: String,
    /// The user it acts as.
    pub user: String,
    /// May do everything: grid changes, every user's plans, tokens.
    pub admin: bool,
    /// May drive holds directly (prepare, commit, abort, extend): a planner or another broker.
    pub service: bool,
}

/// Filter of [`Store::list_plans`].
#[derive(Debug, Clone, Default)]
pub struct PlanFilter {
    /// Only this user's plans (`None`: everyone's, for admins).
    pub user: Option<String>,
    /// Only plans in this state.
    pub status: Option<PlanStatus>,
    /// Only plans whose start is >= this (plans without a start never match a bound).
    pub from: Option<DateTime<Utc>>,
    /// Only plans whose start is < this.
    pub to: Option<DateTime<Utc>>,
}

/// A store failure (a lost database connection; the memory store never fails).
#[derive(Debug, thiserror::Error)]
#[error("store: {0}")]
pub struct StoreError(pub String);

impl From<StoreError> for JournalError {
    fn from(e: StoreError) -> Self {
        JournalError(e.0)
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
    /// The committed plan (status `committed`).
    pub plan: &'a PlanRecord,
    /// Also write every part as a committed reservation (participants that share the
    /// coordinator's fate journal nothing themselves; see [`crate::planner::log`]); the
    /// transaction is then finished at once.
    pub reservations: bool,
    /// The idempotency key `(key, fingerprint)` the plan completes (of `plan.user`).
    pub key: Option<(&'a str, &'a str)>,
}

/// The service's persistent state. Every method is atomic on its own.
#[async_trait]
pub trait Store: Journal + Send + Sync {
    /// Adds a new plan.
    async fn insert_plan(&self, plan: PlanRecord) -> Result<(), StoreError>;
    /// The plan `id`, if any.
    async fn plan(&self, id: Uuid) -> Result<Option<PlanRecord>, StoreError>;
    /// Plans matching `filter`, oldest first.
    async fn list_plans(&self, filter: &PlanFilter) -> Result<Vec<PlanRecord>, StoreError>;
    /// Marks a plan cancelled (keeps the first `cancelled_at`) and its reservations written
    /// with its decision released; returns the updated record.
    async fn mark_cancelled(&self, id: Uuid, at: DateTime<Utc>) -> Result<Option<PlanRecord>, StoreError>;

    /// Reserves `(user, key)` for one request, or says who has it. A claim older than
    /// `stale_after_s` that made no plan is taken over (its request died with its process).
    async fn claim_key(&self, user: &str, key: &str, stale_after_s: i64) -> Result<KeyClaim, StoreError>;
    /// Binds a claimed key to the plan it made.
    async fn complete_key(&self, user: &str, key: &str, plan: Uuid, fingerprint: &str) -> Result<(), StoreError>;
    /// Frees a claimed key whose request failed before making a plan (bad input): a retry
    /// with a corrected body may use it again.
    async fn release_key(&self, user: &str, key: &str) -> Result<(), StoreError>;

    /// Adds a token (by hash).
    async fn insert_token(&self, token: TokenRecord) -> Result<(), StoreError>;
    /// The token with this hash, if any.
    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError>;

    /// Frees every claimed key that made no plan (at the start of the only process that
    /// plans on this store: the claims of its previous life are dead).
    async fn release_pending_keys(&self) -> Result<u64, StoreError>;

    /// Writes a commit decision, its plan and key (and the reservations, when asked) in one
    /// transaction.
    async fn record_decision(&self, r: &DecisionRecord<'_>) -> Result<(), StoreError>;
    /// Ends a decided transaction: `None` committed; `Some(rejected)` compensated: the plan
    /// becomes rejected with that outcome and the reservations written with the decision are
    /// released.
    async fn finish_txn(&self, txn: TxnId, rejected: Option<&Outcome>) -> Result<(), StoreError>;
    /// Decided transactions not finished, oldest first.
    async fn in_doubt(&self) -> Result<Vec<InDoubt>, StoreError>;
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

    /// Readiness probe: can the store answer?
    async fn ping(&self) -> Result<(), StoreError>;
    /// A short name for logs and `/readyz` (`memory`, `postgres`).
    fn kind(&self) -> &'static str;
}
