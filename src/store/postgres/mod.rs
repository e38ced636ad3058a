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
//! records as `Json<T>`, `plans.status` as [`crate::model::PlanStatus`], `reservations.state` as
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

use super::{Store, StoreError};
use crate::protocol::ParticipantRef;

/// A pooled connection idle at least this long is pinged before it is used (see
/// [`PgStore::connect`]).
const IDLE_CHECK_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// A pool of connections to one PostgreSQL database.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// What wakes this process's readers of events (`events`), started by the first
    /// [`Store::event_signal`].
    pump: std::sync::OnceLock<std::sync::Arc<events::Pump>>,
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
        Ok(PgStore { pool, pump: std::sync::OnceLock::new() })
    }

    /// The connection pool (tests close it before dropping their database).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

#[async_trait]
impl Store for PgStore {
    fn event_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.event_signal()
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

    async fn close(&self) {
        self.pool.close().await;
    }

    fn pool_state(&self) -> Option<super::PoolState> {
        Some(super::PoolState {
            size: self.pool.size(),
            idle: u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX),
            max: self.pool.options().get_max_connections(),
        })
    }
}
