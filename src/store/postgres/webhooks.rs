//! Webhooks (`webhooks`), their leases by the delivering process, and their deliveries
//! (`webhook_deliveries`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::store::{DeliveryRecord, StoreError, WebhookInsert, WebhookLease, WebhookRecord, WebhookStore};

use super::PgStore;

#[async_trait]
impl WebhookStore for PgStore {
    async fn insert_webhook(
        &self,
        w: WebhookRecord,
        max_per_owner: Option<usize>,
    ) -> Result<WebhookInsert, StoreError> {
        let mut tx = self.pool.begin().await?;
        if let Some(limit) = max_per_owner {
            // One registration of an owner at a time across every process on this database,
            // until this transaction ends: the count below and the insert agree. (A row lock
            // would do, but a certificate's principal has no row of its own.)
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('coreserve webhooks of ' || $1::text, 0))")
                .bind(w.owner)
                .execute(&mut *tx)
                .await?;
            let n = sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM webhooks WHERE owner = $1"#, w.owner)
                .fetch_one(&mut *tx)
                .await?;
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            if n >= limit {
                return Ok(WebhookInsert::AtLimit { webhooks: n });
            }
        }
        sqlx::query!(
            r#"INSERT INTO webhooks (id, owner, "user", admin, url, secret, created_at, enabled, cursor, attempts,
                                     next_attempt_at, failing_since, last_error)
               VALUES ($1, $13, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"#,
            w.id,
            w.user,
            w.admin,
            w.url,
            w.secret,
            w.created_at,
            w.enabled,
            w.cursor,
            w.attempts,
            w.next_attempt_at,
            w.failing_since,
            w.last_error,
            w.owner,
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(WebhookInsert::Inserted)
    }

    async fn webhooks(&self, owner: Option<Uuid>) -> Result<Vec<WebhookRecord>, StoreError> {
        Ok(sqlx::query_as!(
            WebhookRecord,
            r#"SELECT id, owner, "user", admin, url, secret, created_at, enabled, cursor, attempts, next_attempt_at,
                      failing_since, last_error
               FROM webhooks WHERE $1::uuid IS NULL OR owner = $1 ORDER BY seq"#,
            owner,
        )
        .fetch_all(&self.pool)
        .await?)
    }

    async fn webhook(&self, id: Uuid) -> Result<Option<WebhookRecord>, StoreError> {
        Ok(sqlx::query_as!(
            WebhookRecord,
            r#"SELECT id, owner, "user", admin, url, secret, created_at, enabled, cursor, attempts, next_attempt_at,
                      failing_since, last_error
               FROM webhooks WHERE id = $1"#,
            id,
        )
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn delete_webhook(&self, id: Uuid) -> Result<bool, StoreError> {
        let r = sqlx::query!("DELETE FROM webhooks WHERE id = $1", id).execute(&self.pool).await?;
        Ok(r.rows_affected() > 0)
    }

    async fn lease_due_webhooks(&self, lease: WebhookLease<'_>) -> Result<Vec<WebhookRecord>, StoreError> {
        let WebhookLease { owner, now, lease_s, limit } = lease;
        // Only webhooks with a readable event to deliver (below the watermark, as
        // `events_after` reads them). SKIP LOCKED: processes leasing at the same
        // moment take different webhooks.
        Ok(sqlx::query_as!(
            WebhookRecord,
            r#"UPDATE webhooks SET lease_owner = $1, lease_until = $2 + make_interval(secs => $3)
               WHERE id IN (SELECT id FROM webhooks
                            WHERE enabled AND next_attempt_at <= $2 AND (lease_until IS NULL OR lease_until < $2)
                              AND EXISTS (SELECT 1 FROM plan_events e
                                          WHERE e.id > webhooks.cursor AND e.id < plan_event_watermark()
                                            AND (webhooks.admin OR e.owner = webhooks.owner))
                            ORDER BY next_attempt_at LIMIT $4 FOR UPDATE SKIP LOCKED)
               RETURNING id, owner, "user", admin, url, secret, created_at, enabled, cursor, attempts, next_attempt_at,
                         failing_since, last_error"#,
            owner,
            now,
            lease_s as f64,
            limit,
        )
        .fetch_all(&self.pool)
        .await?)
    }

    async fn record_deliveries(
        &self,
        owner: &str,
        webhook: &WebhookRecord,
        deliveries: &[DeliveryRecord],
    ) -> Result<(), StoreError> {
        let (w, d) = (webhook, deliveries);
        let written = sqlx::query_scalar!(
            r#"WITH w AS (
                   UPDATE webhooks SET enabled = $3, cursor = $4, attempts = $5, next_attempt_at = $6,
                                       failing_since = $7, last_error = $8
                   WHERE id = $1 AND lease_owner = $2 RETURNING id),
               d AS (
                   INSERT INTO webhook_deliveries (webhook_id, event_id, at, attempt, status_code, error, duration_ms)
                   SELECT w.id, d.event_id, d.at, d.attempt, d.status_code, d.error, d.duration_ms
                   FROM w, UNNEST($9::bigint[], $10::timestamptz[], $11::int[], $12::int[], $13::text[],
                                  $14::float8[]) WITH ORDINALITY
                          AS d(event_id, at, attempt, status_code, error, duration_ms, n)
                   ORDER BY d.n)
               SELECT count(*) AS "written!" FROM w"#,
            w.id,
            owner,
            w.enabled,
            w.cursor,
            w.attempts,
            w.next_attempt_at,
            w.failing_since,
            w.last_error,
            &d.iter().map(|d| d.event_id).collect::<Vec<i64>>(),
            &d.iter().map(|d| d.at).collect::<Vec<DateTime<Utc>>>(),
            &d.iter().map(|d| d.attempt).collect::<Vec<i32>>(),
            &d.iter().map(|d| d.status_code).collect::<Vec<Option<i32>>>() as _,
            &d.iter().map(|d| d.error.clone()).collect::<Vec<Option<String>>>() as _,
            &d.iter().map(|d| d.duration_ms).collect::<Vec<f64>>(),
        )
        .fetch_one(&self.pool)
        .await?;
        if written == 0 {
            return Err(StoreError::Superseded);
        }
        sqlx::query!(
            r#"DELETE FROM webhook_deliveries WHERE webhook_id = $1 AND seq <= (
                   SELECT seq FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY seq DESC OFFSET 100 LIMIT 1)"#,
            w.id,
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn release_webhook(&self, owner: &str, id: Uuid) -> Result<(), StoreError> {
        sqlx::query!(
            "UPDATE webhooks SET lease_owner = NULL, lease_until = NULL WHERE id = $1 AND lease_owner = $2",
            id,
            owner,
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn deliveries(&self, id: Uuid, limit: i64) -> Result<Vec<DeliveryRecord>, StoreError> {
        Ok(sqlx::query_as!(
            DeliveryRecord,
            r#"SELECT webhook_id, event_id, at, attempt, status_code, error, duration_ms
               FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY seq DESC LIMIT $2"#,
            id,
            limit,
        )
        .fetch_all(&self.pool)
        .await?)
    }
}
