//! [`PgStore`]: the [`Store`] in PostgreSQL (`DATABASE_URL`). Plans, idempotency keys and
//! tokens survive a restart and are shared by every broker process on the same database.
//!
//! Schema: `migrations/` (run by [`PgStore::connect`]). Queries are checked at run time
//! (`sqlx::query` with `.bind`), so building needs no database.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::types::Json;
use sqlx::Row;
use uuid::Uuid;

use super::{KeyClaim, PlanFilter, PlanRecord, PlanStatus, Store, StoreError, TokenRecord};
use crate::model::Outcome;
use crate::planner::Booking;

/// A pool of connections to one PostgreSQL database.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
}

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError(format!("postgres: {e}"))
}

fn status_str(s: PlanStatus) -> &'static str {
    match s {
        PlanStatus::Planned => "planned",
        PlanStatus::Committed => "committed",
        PlanStatus::Rejected => "rejected",
        PlanStatus::Cancelled => "cancelled",
    }
}

const PLAN_COLUMNS: &str = r#"id, "user", status, created_at, cancelled_at, outcome, bookings"#;

fn plan_from_row(row: &PgRow) -> Result<PlanRecord, StoreError> {
    let status: String = row.try_get("status").map_err(err)?;
    let Json(outcome): Json<Outcome> = row.try_get("outcome").map_err(err)?;
    let Json(bookings): Json<Vec<Booking>> = row.try_get("bookings").map_err(err)?;
    Ok(PlanRecord {
        id: row.try_get("id").map_err(err)?,
        user: row.try_get("user").map_err(err)?,
        status: status.parse().map_err(err)?,
        outcome,
        bookings,
        created_at: row.try_get("created_at").map_err(err)?,
        cancelled_at: row.try_get("cancelled_at").map_err(err)?,
    })
}

impl PgStore {
    /// Connects to `url` and brings the schema up to date (`migrations/`).
    ///
    /// # Errors
    /// The database cannot be reached or a migration fails.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect(url)
            .await
            .map_err(err)?;
        sqlx::migrate!().run(&pool).await.map_err(err)?;
        Ok(PgStore { pool })
    }

    /// The connection pool (tests close it before dropping their database).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

#[async_trait]
impl Store for PgStore {
    async fn insert_plan(&self, plan: PlanRecord) -> Result<(), StoreError> {
        sqlx::query(
            r#"INSERT INTO plans (id, "user", request_id, status, created_at, cancelled_at, start, outcome, bookings)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"#,
        )
        .bind(plan.id)
        .bind(&plan.user)
        .bind(&plan.outcome.request_id)
        .bind(status_str(plan.status))
        .bind(plan.created_at)
        .bind(plan.cancelled_at)
        .bind(plan.outcome.start)
        .bind(Json(&plan.outcome))
        .bind(Json(&plan.bookings))
        .execute(&self.pool)
        .await
        .map_err(err)?;
        Ok(())
    }

    async fn plan(&self, id: Uuid) -> Result<Option<PlanRecord>, StoreError> {
        let row = sqlx::query(&format!("SELECT {PLAN_COLUMNS} FROM plans WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(err)?;
        row.as_ref().map(plan_from_row).transpose()
    }

    async fn list_plans(&self, filter: &PlanFilter) -> Result<Vec<PlanRecord>, StoreError> {
        let rows = sqlx::query(&format!(
            r#"SELECT {PLAN_COLUMNS} FROM plans
               WHERE ($1::text IS NULL OR "user" = $1)
                 AND ($2::text IS NULL OR status = $2)
                 AND ($3::timestamptz IS NULL OR start >= $3)
                 AND ($4::timestamptz IS NULL OR start < $4)
               ORDER BY seq"#
        ))
        .bind(filter.user.as_deref())
        .bind(filter.status.map(status_str))
        .bind(filter.from)
        .bind(filter.to)
        .fetch_all(&self.pool)
        .await
        .map_err(err)?;
        rows.iter().map(plan_from_row).collect()
    }

    async fn mark_cancelled(&self, id: Uuid, at: DateTime<Utc>) -> Result<Option<PlanRecord>, StoreError> {
        let row = sqlx::query(&format!(
            "UPDATE plans SET status = 'cancelled', cancelled_at = COALESCE(cancelled_at, $2)
             WHERE id = $1 RETURNING {PLAN_COLUMNS}"
        ))
        .bind(id)
        .bind(at)
        .fetch_optional(&self.pool)
        .await
        .map_err(err)?;
        row.as_ref().map(plan_from_row).transpose()
    }

    async fn claim_key(&self, user: &str, key: &str) -> Result<KeyClaim, StoreError> {
        // Atomic across processes: exactly one INSERT wins the primary key.
        let inserted =
            sqlx::query(r#"INSERT INTO idempotency_keys ("user", key) VALUES ($1, $2) ON CONFLICT DO NOTHING"#)
                .bind(user)
                .bind(key)
                .execute(&self.pool)
                .await
                .map_err(err)?
                .rows_affected();
        if inserted == 1 {
            return Ok(KeyClaim::Claimed);
        }
        let row = sqlx::query(r#"SELECT plan_id, fingerprint FROM idempotency_keys WHERE "user" = $1 AND key = $2"#)
            .bind(user)
            .bind(key)
            .fetch_optional(&self.pool)
            .await
            .map_err(err)?;
        let Some(row) = row else {
            // Released between our INSERT and SELECT: it is free again; try once more.
            return self.claim_key(user, key).await;
        };
        let plan: Option<Uuid> = row.try_get("plan_id").map_err(err)?;
        let fingerprint: Option<String> = row.try_get("fingerprint").map_err(err)?;
        Ok(match plan {
            None => KeyClaim::InProgress,
            Some(plan) => KeyClaim::Done { plan, fingerprint: fingerprint.unwrap_or_default() },
        })
    }

    async fn complete_key(&self, user: &str, key: &str, plan: Uuid, fingerprint: &str) -> Result<(), StoreError> {
        sqlx::query(
            r#"INSERT INTO idempotency_keys ("user", key, plan_id, fingerprint) VALUES ($1, $2, $3, $4)
               ON CONFLICT ("user", key) DO UPDATE SET plan_id = EXCLUDED.plan_id, fingerprint = EXCLUDED.fingerprint"#,
        )
        .bind(user)
        .bind(key)
        .bind(plan)
        .bind(fingerprint)
        .execute(&self.pool)
        .await
        .map_err(err)?;
        Ok(())
    }

    async fn release_key(&self, user: &str, key: &str) -> Result<(), StoreError> {
        sqlx::query(r#"DELETE FROM idempotency_keys WHERE "user" = $1 AND key = $2 AND plan_id IS NULL"#)
            .bind(user)
            .bind(key)
            .execute(&self.pool)
            .await
            .map_err(err)?;
        Ok(())
    }

    async fn insert_token(&self, token: TokenRecord) -> Result<(), StoreError> {
        sqlx::query(
            r#"INSERT INTO tokens (hash, "user", admin, service) VALUES ($1, $2, $3, $4)
               ON CONFLICT (hash) DO UPDATE SET "user" = EXCLUDED."user", admin = EXCLUDED.admin, service = EXCLUDED.service"#,
        )
        .bind(&token.hash)
        .bind(&token.user)
        .bind(token.admin)
        .bind(token.service)
        .execute(&self.pool)
        .await
        .map_err(err)?;
        Ok(())
    }

    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        let row = sqlx::query(r#"SELECT hash, "user", admin, service FROM tokens WHERE hash = $1"#)
            .bind(hash)
            .fetch_optional(&self.pool)
            .await
            .map_err(err)?;
        row.map(|r| {
            Ok(TokenRecord {
                hash: r.try_get("hash").map_err(err)?,
                user: r.try_get("user").map_err(err)?,
                admin: r.try_get("admin").map_err(err)?,
                service: r.try_get("service").map_err(err)?,
            })
        })
        .transpose()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await.map_err(err)?;
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "postgres"
    }
}
