//! Idempotency keys (`idempotency_keys`) and the claims (leases) by which one process at a time
//! works on a key or an in-doubt transaction.

use async_trait::async_trait;
use uuid::Uuid;

use crate::store::{Claim, KeyClaim, KeyStore, StoreError};

use super::PgStore;

#[async_trait]
impl KeyStore for PgStore {
    async fn claim_key(&self, owner: Uuid, key: &str, claim: &Claim) -> Result<KeyClaim, StoreError> {
        // Atomic across processes: exactly one statement wins the row, either by inserting it
        // or by taking over a claim whose lease ran out and that made no plan.
        let won = sqlx::query!(
            r#"INSERT INTO idempotency_keys (principal, key, claim, owner, lease_until)
               VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
               ON CONFLICT (principal, key) DO UPDATE
                 SET claim = EXCLUDED.claim, owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until,
                     claimed_at = now()
                 WHERE idempotency_keys.plan_id IS NULL AND idempotency_keys.lease_until < now()
               RETURNING plan_id"#,
            owner,
            key,
            claim.id,
            claim.owner,
            claim.lease_s as f64,
        )
        .fetch_optional(&self.pool)
        .await?;
        if won.is_some() {
            return Ok(KeyClaim::Claimed);
        }
        let row = sqlx::query!(
            r#"SELECT plan_id, fingerprint FROM idempotency_keys WHERE principal = $1 AND key = $2"#,
            owner,
            key,
        )
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            // Released between our INSERT and SELECT: it is free again; try once more.
            return self.claim_key(owner, key, claim).await;
        };
        Ok(match row.plan_id {
            None => KeyClaim::InProgress,
            Some(plan) => KeyClaim::Done { plan, fingerprint: row.fingerprint.unwrap_or_default() },
        })
    }

    async fn release_key(&self, owner: Uuid, key: &str, claim: &Claim) -> Result<(), StoreError> {
        sqlx::query!(
            r#"DELETE FROM idempotency_keys WHERE principal = $1 AND key = $2 AND plan_id IS NULL AND claim = $3"#,
            owner,
            key,
            claim.id,
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn renew_claims(&self, claims: &[Uuid], lease_s: i64) -> Result<(), StoreError> {
        sqlx::query!(
            "WITH k AS (
                 UPDATE idempotency_keys SET lease_until = now() + make_interval(secs => $2)
                 WHERE claim = ANY($1) AND plan_id IS NULL)
             UPDATE transactions SET lease_until = now() + make_interval(secs => $2)
             WHERE claim = ANY($1) AND finished_at IS NULL",
            claims,
            lease_s as f64,
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn end_all_claims(&self) -> Result<u64, StoreError> {
        let r = sqlx::query!(
            "WITH t AS (
                 UPDATE transactions SET lease_until = now() - interval '1 second' WHERE finished_at IS NULL)
             DELETE FROM idempotency_keys WHERE plan_id IS NULL",
        )
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected())
    }
}
