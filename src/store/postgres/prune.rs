//! The pruning of finished records past the retention horizon.

use chrono::{DateTime, Utc};

use crate::store::StoreError;

use super::PgStore;

impl PgStore {
    pub(super) async fn prune_finished(&self, horizon: DateTime<Utc>) -> Result<crate::store::Pruned, StoreError> {
        // Each statement is atomic on its own; their order only matters for rows of plans:
        // a plan's journal rows and decision go with or after it. A plan that holds
        // reservations, or whose decision is in doubt, keeps everything.
        let plans = sqlx::query!(
            r#"WITH gone AS (
                   DELETE FROM plans
                   WHERE (status = 'cancelled' AND COALESCE(cancelled_at, created_at) < $1)
                      OR (status = 'rejected' AND created_at < $1)
                      OR (status = 'completed' AND COALESCE(last_end, created_at) < $1)
                   RETURNING id),
               keys AS (DELETE FROM idempotency_keys WHERE plan_id IN (SELECT id FROM gone) RETURNING 1)
               SELECT (SELECT count(*) FROM gone) AS "plans!", (SELECT count(*) FROM keys) AS "keys!""#,
            horizon,
        )
        .fetch_one(&self.pool)
        .await?;
        let journal = sqlx::query!(
            r#"DELETE FROM reservations r
               WHERE ((r.state IN ('aborted', 'expired', 'released') AND r.updated_at < $1)
                      OR (r.state = 'committed' AND r.end_at < $1)
                      OR (r.state = 'held' AND r.expires_at < $1))
                 AND NOT EXISTS (SELECT 1 FROM plans p WHERE p.id = r.plan_id
                                 AND p.status IN ('pending', 'committed', 'active', 'broken'))
                 AND NOT EXISTS (SELECT 1 FROM transactions t WHERE t.txn = r.txn AND t.finished_at IS NULL)"#,
            horizon,
        )
        .execute(&self.pool)
        .await?
        .rows_affected();
        let decisions = sqlx::query!(
            r#"DELETE FROM transactions t
               WHERE t.finished_at < $1
                 AND NOT EXISTS (SELECT 1 FROM plans p WHERE p.id = t.plan_id
                                 AND p.status IN ('pending', 'committed', 'active', 'broken'))"#,
            horizon,
        )
        .execute(&self.pool)
        .await?
        .rows_affected();
        // Delivered: at or before the cursor of every enabled webhook (a disabled one resumes
        // from its cursor, past what was pruned meanwhile).
        let events = sqlx::query!(
            r#"DELETE FROM plan_events
               WHERE at < $1 AND id <= COALESCE((SELECT min(cursor) FROM webhooks WHERE enabled), id)"#,
            horizon,
        )
        .execute(&self.pool)
        .await?
        .rows_affected();
        let deliveries = sqlx::query!("DELETE FROM webhook_deliveries WHERE at < $1", horizon)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let charges = sqlx::query!("DELETE FROM allocation_charges WHERE released_at < $1", horizon)
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(crate::store::Pruned {
            plans: plans.plans as u64,
            idempotency_keys: plans.keys as u64,
            journal,
            decisions,
            events,
            deliveries,
            charges,
        })
    }
}
