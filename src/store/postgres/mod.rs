//! [`PgStore`]: the [`Store`] in PostgreSQL (`DATABASE_URL`). Plans, idempotency keys and
//! tokens survive a restart and are shared by every broker process on the same database.
//!
//! Schema: `migrations/` (run by [`PgStore::connect`]). Every statement is checked at build
//! time against that schema (`sqlx::query!` and friends: a wrong column or type fails the
//! build). Building needs no database: the macros read the statements' descriptions from
//! `.sqlx/` at the repository root, which `.ci/sqlx-prepare` regenerates after a statement or a
//! migration changes.
//!
//! Columns are decoded into their types by the macros' overrides (`col as "col: Type"`): JSON
//! records as `Json<T>`, `plans.status` as [`PlanStatus`], `reservations.state` as
//! `RowState` (in `journal`), `participant` as [`ParticipantRef`] (its `Decode` is below: the
//! store, not `protocol`, knows sqlx). A value that does not decode is [`StoreError::Corrupt`].
//!
//! This file holds the pool ([`PgStore`], [`PgStore::connect`], which runs the migrations) and
//! the [`Store`] impl, whose every method is the inherent method of the same name (inherent
//! methods win a method call's lookup) in the file of its concern:
//!
//! - `plans`: the plans, and the clock's advance of their status;
//! - `claims`: idempotency keys, and the claims (leases) on keys and in-doubt transactions;
//! - `tokens`: API tokens, their principals, and the listener of their changes;
//! - `decisions`: the coordinators' decision log (decisions, modifications, rejections, the
//!   ends of transactions, the recovery of those in doubt) and the allocation check of charges;
//! - `journal`: the participants' journal (the [`crate::protocol::Journal`] impl) and live holds;
//! - `grid`: topology and sites; `projects`: projects and their allocation charges;
//! - `events`: the durable event log and its signal; `webhooks`: webhooks and deliveries;
//! - `prune`: the pruning of finished records.

mod claims;
mod decisions;
mod events;
mod grid;
mod journal;
mod plans;
mod projects;
mod prune;
mod tokens;
mod webhooks;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgPool, PgPoolOptions, PgTypeInfo, PgValueRef};
use sqlx::Postgres;
use uuid::Uuid;

use super::{
    Claim, DecisionRecord, DeliveryRecord, KeyClaim, ModificationRecord, PlanEvent, PlanFilter, PlanRecord,
    RejectionRecord, Store, StoreError, StoredHold, TokenRecord, WebhookRecord,
};
use crate::fairshare::{Project, Usage};
use crate::model::{Grid, Outcome, Site, Time};
use crate::protocol::decision::{Ending, InDoubt};
use crate::protocol::{HoldId, ParticipantRef, TxnId};

/// A pooled connection idle at least this long is pinged before it is used (see
/// [`PgStore::connect`]).
const IDLE_CHECK_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// A pool of connections to one PostgreSQL database.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// The listener of `coreserve_events`, started by the first [`Store::event_signal`].
    signal: std::sync::OnceLock<tokio::sync::watch::Sender<u64>>,
}

/// The `participant` column: `site:ID` or `network`, as `ParticipantRef`'s `Display` writes it
/// and its `FromStr` reads it (a TEXT column, read through `participant as "participant:
/// ParticipantRef"`).
impl sqlx::Type<Postgres> for ParticipantRef {
    fn type_info() -> PgTypeInfo {
        <str as sqlx::Type<Postgres>>::type_info()
    }

    fn compatible(ty: &PgTypeInfo) -> bool {
        <str as sqlx::Type<Postgres>>::compatible(ty)
    }
}

impl<'r> sqlx::Decode<'r, Postgres> for ParticipantRef {
    fn decode(value: PgValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        let text = <&str as sqlx::Decode<Postgres>>::decode(value)?;
        Ok(text.parse::<ParticipantRef>()?)
    }
}

impl PgStore {
    /// Connects to `url` and brings the schema up to date (`migrations/`).
    ///
    /// # Errors
    /// The database cannot be reached ([`StoreError::Unavailable`]) or a migration fails
    /// ([`StoreError::Migration`]).
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(std::time::Duration::from_secs(10))
            // sqlx pings every connection it hands out (a round trip before each statement:
            // about 5% of the all-in-one's CPU per plan, and as many wake-ups of PostgreSQL).
            // A connection that was idle only briefly was just used (and pinged when it was
            // given back), so only one idle for longer is checked before use.
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= IDLE_CHECK_AFTER {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .connect(url)
            .await?;
        sqlx::migrate!().run(&pool).await.map_err(StoreError::Migration)?;
        Ok(PgStore { pool, signal: std::sync::OnceLock::new() })
    }

    /// The connection pool (tests close it before dropping their database).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

#[async_trait]
impl Store for PgStore {
    async fn insert_plan(&self, plan: PlanRecord) -> Result<(), StoreError> {
        self.insert_plan(plan).await
    }

    async fn plan(&self, id: Uuid) -> Result<Option<PlanRecord>, StoreError> {
        self.plan(id).await
    }

    async fn list_plans(&self, filter: &PlanFilter) -> Result<Vec<PlanRecord>, StoreError> {
        self.list_plans(filter).await
    }

    async fn mark_cancelled(&self, id: Uuid, at: DateTime<Utc>) -> Result<Option<PlanRecord>, StoreError> {
        self.mark_cancelled(id, at).await
    }

    async fn plan_of_hold(&self, hold: HoldId) -> Result<Option<PlanRecord>, StoreError> {
        self.plan_of_hold(hold).await
    }

    async fn mark_broken(&self, id: Uuid, outcome: &Outcome) -> Result<Option<PlanRecord>, StoreError> {
        self.mark_broken(id, outcome).await
    }

    async fn claim_key(&self, owner: Uuid, key: &str, claim: &Claim) -> Result<KeyClaim, StoreError> {
        self.claim_key(owner, key, claim).await
    }

    async fn release_key(&self, owner: Uuid, key: &str, claim: &Claim) -> Result<(), StoreError> {
        self.release_key(owner, key, claim).await
    }

    async fn renew_claims(&self, claims: &[Uuid], lease_s: i64) -> Result<(), StoreError> {
        self.renew_claims(claims, lease_s).await
    }

    async fn insert_token(&self, token: TokenRecord) -> Result<(), StoreError> {
        self.insert_token(token).await
    }

    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        self.token(hash).await
    }

    async fn revoke_token(&self, id: Uuid) -> Result<Option<TokenRecord>, StoreError> {
        self.revoke_token(id).await
    }

    async fn end_all_claims(&self) -> Result<u64, StoreError> {
        self.end_all_claims().await
    }

    async fn record_decision(&self, r: &DecisionRecord<'_>) -> Result<(), StoreError> {
        self.record_decision(r).await
    }

    async fn record_modification(&self, r: &ModificationRecord<'_>) -> Result<(), StoreError> {
        self.record_modification(r).await
    }

    async fn record_rejection(&self, r: &RejectionRecord<'_>) -> Result<(), StoreError> {
        self.record_rejection(r).await
    }

    async fn mark_compensating(&self, txn: TxnId, claim: &Claim) -> Result<(), StoreError> {
        self.mark_compensating(txn, claim).await
    }

    async fn finish_txn(&self, txn: TxnId, claim: &Claim, ending: Ending<'_>) -> Result<(), StoreError> {
        self.finish_txn(txn, claim, ending).await
    }

    async fn take_in_doubt(&self, claim: &Claim, limit: usize) -> Result<Vec<InDoubt>, StoreError> {
        self.take_in_doubt(claim, limit).await
    }

    async fn live_holds(&self, now: Time) -> Result<Vec<StoredHold>, StoreError> {
        self.live_holds(now).await
    }

    async fn live_hold_owners(&self, now: Time) -> Result<Vec<(HoldId, String)>, StoreError> {
        self.live_hold_owners(now).await
    }

    async fn expire_holds(&self, now: Time) -> Result<u64, StoreError> {
        self.expire_holds(now).await
    }

    async fn save_grid(&self, grid: &Grid) -> Result<(), StoreError> {
        self.save_grid(grid).await
    }

    async fn load_grid(&self) -> Result<Option<Grid>, StoreError> {
        self.load_grid().await
    }

    async fn save_project(&self, project: &Project) -> Result<(), StoreError> {
        self.save_project(project).await
    }

    async fn projects(&self) -> Result<Vec<Project>, StoreError> {
        self.projects().await
    }

    async fn live_charges(&self, since: Time) -> Result<Vec<(Uuid, String, Vec<Usage>)>, StoreError> {
        self.live_charges(since).await
    }

    async fn charged(&self, project: &str, from: Time, to: Time) -> Result<Vec<Usage>, StoreError> {
        self.charged(project, from, to).await
    }

    async fn save_site(&self, site: &Site) -> Result<(), StoreError> {
        self.save_site(site).await
    }

    async fn token_changes(&self) -> Result<Option<super::TokenWatch>, StoreError> {
        self.token_changes().await
    }

    async fn advance_plans(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        self.advance_plans(now).await
    }

    async fn events_after(&self, after: i64, owner: Option<Uuid>, limit: i64) -> Result<Vec<PlanEvent>, StoreError> {
        self.events_after(after, owner, limit).await
    }

    async fn last_event_id(&self) -> Result<i64, StoreError> {
        self.last_event_id().await
    }

    fn event_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.event_signal()
    }

    async fn insert_webhook(&self, w: WebhookRecord) -> Result<(), StoreError> {
        self.insert_webhook(w).await
    }

    async fn webhooks(&self, owner: Option<Uuid>) -> Result<Vec<WebhookRecord>, StoreError> {
        self.webhooks(owner).await
    }

    async fn webhook(&self, id: Uuid) -> Result<Option<WebhookRecord>, StoreError> {
        self.webhook(id).await
    }

    async fn delete_webhook(&self, id: Uuid) -> Result<bool, StoreError> {
        self.delete_webhook(id).await
    }

    async fn lease_due_webhooks(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        lease_s: i64,
        limit: i64,
    ) -> Result<Vec<WebhookRecord>, StoreError> {
        self.lease_due_webhooks(owner, now, lease_s, limit).await
    }

    async fn record_deliveries(
        &self,
        owner: &str,
        webhook: &WebhookRecord,
        deliveries: &[DeliveryRecord],
    ) -> Result<(), StoreError> {
        self.record_deliveries(owner, webhook, deliveries).await
    }

    async fn release_webhook(&self, owner: &str, id: Uuid) -> Result<(), StoreError> {
        self.release_webhook(owner, id).await
    }

    async fn deliveries(&self, id: Uuid, limit: i64) -> Result<Vec<DeliveryRecord>, StoreError> {
        self.deliveries(id, limit).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query_scalar!(r#"SELECT 1 AS "ok!""#).fetch_one(&self.pool).await?;
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "postgres"
    }

    async fn prune_finished(&self, horizon: DateTime<Utc>) -> Result<super::Pruned, StoreError> {
        self.prune_finished(horizon).await
    }

    fn pool_state(&self) -> Option<super::PoolState> {
        Some(super::PoolState {
            size: self.pool.size(),
            idle: u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX),
            max: self.pool.options().get_max_connections(),
        })
    }
}
