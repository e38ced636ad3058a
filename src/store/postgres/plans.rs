//! The plans (`plans`): insert, read, list, cancel, break, and the clock's advance of their status.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use uuid::Uuid;

use crate::model::{Outcome, PlanStatus};
use crate::protocol::decision::Booking;
use crate::protocol::HoldId;
use crate::store::{PlanFilter, PlanRecord, PlanStore, StoreError};

use super::PgStore;

/// A row of `plans`, as every plan query selects it.
struct PlanRow {
    id: Uuid,
    user: String,
    owner: Uuid,
    status: PlanStatus,
    created_at: DateTime<Utc>,
    cancelled_at: Option<DateTime<Utc>>,
    outcome: Json<Outcome>,
    bookings: Json<Vec<Booking>>,
}

impl From<PlanRow> for PlanRecord {
    fn from(r: PlanRow) -> Self {
        PlanRecord {
            id: r.id,
            user: r.user,
            owner: r.owner,
            status: r.status,
            outcome: r.outcome.0,
            bookings: r.bookings.0,
            created_at: r.created_at,
            cancelled_at: r.cancelled_at,
        }
    }
}

#[async_trait]
impl PlanStore for PgStore {
    async fn insert_plan(&self, plan: PlanRecord) -> Result<(), StoreError> {
        self.insert_plan_keyed(&plan, None, None).await.map(drop)
    }

    async fn plan(&self, id: Uuid) -> Result<Option<PlanRecord>, StoreError> {
        let row = sqlx::query_as!(
            PlanRow,
            r#"SELECT id, "user", owner, status AS "status: PlanStatus", created_at, cancelled_at,
                      outcome AS "outcome: Json<Outcome>", bookings AS "bookings: Json<Vec<Booking>>"
               FROM plans WHERE id = $1"#,
            id,
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(PlanRecord::from))
    }

    async fn list_plans(&self, filter: &PlanFilter) -> Result<Vec<PlanRecord>, StoreError> {
        let rows = sqlx::query_as!(
            PlanRow,
            r#"SELECT id, "user", owner, status AS "status: PlanStatus", created_at, cancelled_at,
                      outcome AS "outcome: Json<Outcome>", bookings AS "bookings: Json<Vec<Booking>>"
               FROM plans
               WHERE ($1::uuid IS NULL OR owner = $1)
                 AND ($2::text IS NULL OR status = $2)
                 AND ($3::timestamptz IS NULL OR start >= $3)
                 AND ($4::timestamptz IS NULL OR start < $4)
               ORDER BY seq"#,
            filter.owner,
            filter.status.map(<&str>::from),
            filter.from,
            filter.to,
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(PlanRecord::from).collect())
    }

    async fn mark_cancelled(&self, id: Uuid, at: DateTime<Utc>) -> Result<Option<PlanRecord>, StoreError> {
        let row = sqlx::query_as!(
            PlanRow,
            r#"WITH released AS (
                   UPDATE reservations SET state = 'released', updated_at = now()
                   WHERE plan_id = $1 AND state = 'committed'),
               charge AS (
                   UPDATE allocation_charges SET released_at = now() WHERE plan_id = $1 AND released_at IS NULL)
               UPDATE plans SET status = 'cancelled', cancelled_at = COALESCE(cancelled_at, $2)
               WHERE id = $1
               RETURNING id, "user", owner, status AS "status: PlanStatus", created_at, cancelled_at,
                         outcome AS "outcome: Json<Outcome>", bookings AS "bookings: Json<Vec<Booking>>""#,
            id,
            at,
        )
        .fetch_optional(&self.pool)
        .await?;
        self.events_written();
        Ok(row.map(PlanRecord::from))
    }

    async fn plan_of_hold(&self, hold: HoldId) -> Result<Option<PlanRecord>, StoreError> {
        let row = sqlx::query_as!(
            PlanRow,
            r#"SELECT id, "user", owner, status AS "status: PlanStatus", created_at, cancelled_at,
                      outcome AS "outcome: Json<Outcome>", bookings AS "bookings: Json<Vec<Booking>>"
               FROM plans
               WHERE status IN ('committed', 'active', 'broken')
                 AND bookings @> jsonb_build_array(jsonb_build_object('hold', $1::text))
               LIMIT 1"#,
            hold.to_string(),
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(PlanRecord::from))
    }

    async fn mark_broken(&self, id: Uuid, outcome: &Outcome) -> Result<Option<PlanRecord>, StoreError> {
        let row = sqlx::query_as!(
            PlanRow,
            r#"UPDATE plans SET status = 'broken', outcome = $2
               WHERE id = $1 AND status IN ('committed', 'active', 'broken')
               RETURNING id, "user", owner, status AS "status: PlanStatus", created_at, cancelled_at,
                         outcome AS "outcome: Json<Outcome>", bookings AS "bookings: Json<Vec<Booking>>""#,
            id,
            Json(outcome) as _,
        )
        .fetch_optional(&self.pool)
        .await?;
        self.events_written();
        Ok(row.map(PlanRecord::from))
    }

    async fn advance_plans(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        // The WHERE is evaluated again on rows another process changed meanwhile (READ
        // COMMITTED): each change is made, and its event written by the trigger, once.
        let r = sqlx::query!(
            r#"UPDATE plans SET advanced_to = $1,
                      status = CASE WHEN status = 'broken' THEN 'broken'
                                    WHEN last_end <= $1 THEN 'completed' ELSE 'active' END
               WHERE status IN ('committed', 'active', 'broken') AND next_boundary <= $1"#,
            now,
        )
        .execute(&self.pool)
        .await?;
        if r.rows_affected() > 0 {
            self.events_written();
        }
        Ok(r.rows_affected())
    }
}

impl PgStore {
    /// Inserts `plan` and, with `key` (`(key, fingerprint)`), points its idempotency key at it
    /// in the same statement, if `claim` still holds the key; `false` (nothing written) if it
    /// does not. Without a key the plan is inserted unconditionally.
    pub(super) async fn insert_plan_keyed(
        &self,
        plan: &PlanRecord,
        key: Option<(&str, &str)>,
        claim: Option<Uuid>,
    ) -> Result<bool, StoreError> {
        let (key, fingerprint) = key.unzip();
        let written = sqlx::query_scalar!(
            r#"WITH k AS (
                   UPDATE idempotency_keys SET plan_id = $1, fingerprint = $11
                   WHERE principal = $13 AND key = $10 AND claim = $12 AND plan_id IS NULL
                   RETURNING 1)
               INSERT INTO plans (id, "user", request_id, status, created_at, cancelled_at, start, outcome, bookings, owner)
               SELECT $1::uuid, $2::text, $3::text, $4::text, $5::timestamptz, $6::timestamptz, $7::timestamptz,
                   $8::jsonb, $9::jsonb, $13::uuid
               WHERE $10::text IS NULL OR EXISTS (SELECT 1 FROM k)
               RETURNING id"#,
            plan.id,
            plan.user,
            plan.outcome.request_id,
            <&str>::from(plan.status),
            plan.created_at,
            plan.cancelled_at,
            plan.outcome.start,
            Json(&plan.outcome) as _,
            Json(&plan.bookings) as _,
            key,
            fingerprint,
            claim,
            plan.owner,
        )
        .fetch_optional(&self.pool)
        .await?;
        if written.is_some() {
            self.events_written();
        }
        Ok(written.is_some())
    }
}
