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

use super::{
    Claim, DecisionRecord, KeyClaim, PlanFilter, PlanRecord, RejectionRecord, Store, StoreError, StoredHold,
    TokenRecord,
};
use crate::model::{from_time, Grid, Outcome, Site, Time};
use crate::protocol::decision::{Booking, DecidedPart, InDoubt};
use crate::protocol::{HoldRequest, HoldState, Journal, JournalEntry, JournalError, TxnId};

/// A pool of connections to one PostgreSQL database.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
}

/// A stored value that does not parse back.
fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

const PLAN_COLUMNS: &str = r#"id, "user", status, created_at, cancelled_at, outcome, bookings"#;

fn plan_from_row(row: &PgRow) -> Result<PlanRecord, StoreError> {
    let status: String = row.try_get("status")?;
    let Json(outcome): Json<Outcome> = row.try_get("outcome")?;
    let Json(bookings): Json<Vec<Booking>> = row.try_get("bookings")?;
    Ok(PlanRecord {
        id: row.try_get("id")?,
        user: row.try_get("user")?,
        status: status.parse().map_err(corrupt)?,
        outcome,
        bookings,
        created_at: row.try_get("created_at")?,
        cancelled_at: row.try_get("cancelled_at")?,
    })
}

/// The interval a hold request books.
fn interval(r: &HoldRequest) -> (Time, Time) {
    match r {
        HoldRequest::Compute { start, end, .. } | HoldRequest::Network { start, end, .. } => (*start, *end),
    }
}

#[async_trait]
impl Journal for PgStore {
    async fn append(&self, entry: &JournalEntry) -> Result<(), JournalError> {
        // Each transition is guarded by the states it may leave, as in protocol::HoldBook. The
        // in-memory participant decided first, before the lease ended, so its commit or
        // extension wins over an `expired` the sweeper (of any process) wrote meanwhile.
        let q = match entry {
            JournalEntry::Held { participant, hold, request, expires_at, via_api, owner } => {
                let (start, end) = interval(request);
                sqlx::query(
                    "INSERT INTO reservations (hold, participant, txn, request, start_at, end_at, state, expires_at, via_api, owner)
                     VALUES ($1, $2, $3, $4, $5, $6, 'held', $7, $8, $9) ON CONFLICT (hold) DO NOTHING",
                )
                .bind(hold)
                .bind(participant.to_string())
                .bind(match request {
                    HoldRequest::Compute { txn, .. } | HoldRequest::Network { txn, .. } => *txn,
                })
                .bind(Json(request))
                .bind(from_time(start))
                .bind(from_time(end))
                .bind(from_time(*expires_at))
                .bind(via_api)
                .bind(owner)
            }
            JournalEntry::Committed { hold } => sqlx::query(
                "UPDATE reservations SET state = 'committed', expires_at = NULL, updated_at = now()
                 WHERE hold = $1 AND state IN ('held', 'expired')",
            )
            .bind(hold),
            JournalEntry::Aborted { hold } => sqlx::query(
                "UPDATE reservations SET state = 'aborted', updated_at = now() WHERE hold = $1 AND state = 'held'",
            )
            .bind(hold),
            JournalEntry::Released { hold } => sqlx::query(
                "UPDATE reservations SET state = 'released', updated_at = now() WHERE hold = $1 AND state = 'committed'",
            )
            .bind(hold),
            JournalEntry::Extended { hold, expires_at } => sqlx::query(
                "UPDATE reservations SET state = 'held', expires_at = $2, updated_at = now()
                 WHERE hold = $1 AND state IN ('held', 'expired')",
            )
            .bind(hold)
            .bind(from_time(*expires_at)),
        };
        q.execute(&self.pool).await.map_err(StoreError::from)?;
        Ok(())
    }
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
            .await?;
        sqlx::migrate!().run(&pool).await.map_err(|e| corrupt(format!("migration: {e}")))?;
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
        .bind(<&str>::from(plan.status))
        .bind(plan.created_at)
        .bind(plan.cancelled_at)
        .bind(plan.outcome.start)
        .bind(Json(&plan.outcome))
        .bind(Json(&plan.bookings))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn plan(&self, id: Uuid) -> Result<Option<PlanRecord>, StoreError> {
        let row = sqlx::query(&format!("SELECT {PLAN_COLUMNS} FROM plans WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
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
        .bind(filter.status.map(<&str>::from))
        .bind(filter.from)
        .bind(filter.to)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(plan_from_row).collect()
    }

    async fn mark_cancelled(&self, id: Uuid, at: DateTime<Utc>) -> Result<Option<PlanRecord>, StoreError> {
        let row = sqlx::query(&format!(
            "WITH released AS (
                 UPDATE reservations SET state = 'released', updated_at = now()
                 WHERE plan_id = $1 AND state = 'committed')
             UPDATE plans SET status = 'cancelled', cancelled_at = COALESCE(cancelled_at, $2)
             WHERE id = $1 RETURNING {PLAN_COLUMNS}"
        ))
        .bind(id)
        .bind(at)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(plan_from_row).transpose()
    }

    async fn claim_key(&self, user: &str, key: &str, claim: &Claim) -> Result<KeyClaim, StoreError> {
        // Atomic across processes: exactly one statement wins the row, either by inserting it
        // or by taking over a claim whose lease ran out and that made no plan.
        let row = sqlx::query(
            r#"INSERT INTO idempotency_keys ("user", key, claim, owner, lease_until)
               VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
               ON CONFLICT ("user", key) DO UPDATE
                 SET claim = EXCLUDED.claim, owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until,
                     claimed_at = now()
                 WHERE idempotency_keys.plan_id IS NULL AND idempotency_keys.lease_until < now()
               RETURNING plan_id"#,
        )
        .bind(user)
        .bind(key)
        .bind(claim.id)
        .bind(&claim.owner)
        .bind(claim.lease_s as f64)
        .fetch_optional(&self.pool)
        .await?;
        if row.is_some() {
            return Ok(KeyClaim::Claimed);
        }
        let row = sqlx::query(r#"SELECT plan_id, fingerprint FROM idempotency_keys WHERE "user" = $1 AND key = $2"#)
            .bind(user)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else {
            // Released between our INSERT and SELECT: it is free again; try once more.
            return self.claim_key(user, key, claim).await;
        };
        let plan: Option<Uuid> = row.try_get("plan_id")?;
        let fingerprint: Option<String> = row.try_get("fingerprint")?;
        Ok(match plan {
            None => KeyClaim::InProgress,
            Some(plan) => KeyClaim::Done { plan, fingerprint: fingerprint.unwrap_or_default() },
        })
    }

    async fn release_key(&self, user: &str, key: &str, claim: &Claim) -> Result<(), StoreError> {
        sqlx::query(
            r#"DELETE FROM idempotency_keys WHERE "user" = $1 AND key = $2 AND plan_id IS NULL AND claim = $3"#,
        )
        .bind(user)
        .bind(key)
        .bind(claim.id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn renew_claims(&self, claims: &[Uuid], lease_s: i64) -> Result<(), StoreError> {
        sqlx::query(
            "WITH k AS (
                 UPDATE idempotency_keys SET lease_until = now() + make_interval(secs => $2)
                 WHERE claim = ANY($1) AND plan_id IS NULL)
             UPDATE transactions SET lease_until = now() + make_interval(secs => $2)
             WHERE claim = ANY($1) AND finished_at IS NULL",
        )
        .bind(claims)
        .bind(lease_s as f64)
        .execute(&self.pool)
        .await?;
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
        ?;
        Ok(())
    }

    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        let row = sqlx::query(r#"SELECT hash, "user", admin, service FROM tokens WHERE hash = $1"#)
            .bind(hash)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            Ok(TokenRecord {
                hash: r.try_get("hash")?,
                user: r.try_get("user")?,
                admin: r.try_get("admin")?,
                service: r.try_get("service")?,
            })
        })
        .transpose()
    }

    async fn end_all_claims(&self) -> Result<u64, StoreError> {
        let r = sqlx::query(
            "WITH t AS (
                 UPDATE transactions SET lease_until = now() - interval '1 second' WHERE finished_at IS NULL)
             DELETE FROM idempotency_keys WHERE plan_id IS NULL",
        )
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected())
    }

    async fn record_decision(&self, r: &DecisionRecord<'_>) -> Result<(), StoreError> {
        // One statement (data-modifying CTEs), so one round trip and one durable commit. Every
        // write is conditional on `ok`: the request's claim still holds its key (if it has one).
        let (plan, d) = (r.plan, &r.decision);
        let rows: &[DecidedPart] = if r.reservations { d.parts } else { &[] };
        let holds: Vec<Uuid> = rows.iter().map(|p| p.hold).collect();
        let who: Vec<String> = rows.iter().map(|p| p.participant.to_string()).collect();
        let requests: Vec<String> =
            rows.iter().map(|p| serde_json::to_string(&p.request).expect("a hold request serialises")).collect();
        let (starts, ends): (Vec<DateTime<Utc>>, Vec<DateTime<Utc>>) = rows
            .iter()
            .map(|p| {
                let (start, end) = interval(&p.request);
                (from_time(start), from_time(end))
            })
            .unzip();
        let (key, fingerprint) = r.key.unzip();
        let written = sqlx::query(
            r#"WITH k AS (
                   UPDATE idempotency_keys SET plan_id = $2, fingerprint = $15
                   WHERE "user" = $11 AND key = $14 AND claim = $18 AND plan_id IS NULL
                   RETURNING 1),
               ok AS (SELECT ($14::text IS NULL OR EXISTS (SELECT 1 FROM k)) AS go),
               t AS (
                   INSERT INTO transactions
                       (txn, plan_id, decision, parts, outcome, finished_at, result, claim, owner, lease_until)
                   SELECT $1, $2, 'commit', $3, $4, CASE WHEN $5 THEN now() END, CASE WHEN $5 THEN 'committed' END,
                       $18, $19, now() + make_interval(secs => $20)
                   FROM ok WHERE go),
               r AS (
                   INSERT INTO reservations (hold, participant, txn, plan_id, request, start_at, end_at, state)
                   SELECT h, w, $1, $2, q::jsonb, s, e, 'committed'
                   FROM UNNEST($6::uuid[], $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[]) AS u(h, w, q, s, e)
                   CROSS JOIN ok WHERE ok.go
                   ON CONFLICT (hold) DO UPDATE SET state = 'committed', plan_id = EXCLUDED.plan_id, expires_at = NULL,
                       updated_at = now())
               INSERT INTO plans (id, "user", request_id, status, created_at, start, outcome, bookings)
               SELECT $2, $11, $12, $21, $13, $16, $4, $17 FROM ok WHERE go
               RETURNING id"#,
        )
        .bind(d.txn)
        .bind(plan.id)
        .bind(Json(d.parts))
        .bind(Json(d.outcome))
        .bind(r.reservations)
        .bind(&holds)
        .bind(&who)
        .bind(&requests)
        .bind(&starts)
        .bind(&ends)
        .bind(&plan.user)
        .bind(&plan.outcome.request_id)
        .bind(plan.created_at)
        .bind(key)
        .bind(fingerprint)
        .bind(plan.outcome.start)
        .bind(Json(&plan.bookings))
        .bind(r.claim.id)
        .bind(&r.claim.owner)
        .bind(r.claim.lease_s as f64)
        .bind(<&str>::from(plan.status))
        .fetch_optional(&self.pool)
        .await?;
        written.map(|_| ()).ok_or(StoreError::Superseded)
    }

    async fn record_rejection(&self, r: &RejectionRecord<'_>) -> Result<(), StoreError> {
        let plan = r.plan;
        let (key, fingerprint) = r.key.unzip();
        let written = sqlx::query(
            r#"WITH k AS (
                   UPDATE idempotency_keys SET plan_id = $1, fingerprint = $11
                   WHERE "user" = $2 AND key = $10 AND claim = $12 AND plan_id IS NULL
                   RETURNING 1)
               INSERT INTO plans (id, "user", request_id, status, created_at, cancelled_at, start, outcome, bookings)
               SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9
               WHERE $10::text IS NULL OR EXISTS (SELECT 1 FROM k)
               RETURNING id"#,
        )
        .bind(plan.id)
        .bind(&plan.user)
        .bind(&plan.outcome.request_id)
        .bind(<&str>::from(plan.status))
        .bind(plan.created_at)
        .bind(plan.cancelled_at)
        .bind(plan.outcome.start)
        .bind(Json(&plan.outcome))
        .bind(Json(&plan.bookings))
        .bind(key)
        .bind(fingerprint)
        .bind(r.claim.id)
        .fetch_optional(&self.pool)
        .await?;
        written.map(|_| ()).ok_or(StoreError::Superseded)
    }

    async fn mark_compensating(&self, txn: TxnId, claim: &Claim) -> Result<(), StoreError> {
        let r = sqlx::query(
            "UPDATE transactions SET compensating = true WHERE txn = $1 AND claim = $2 AND finished_at IS NULL",
        )
        .bind(txn)
        .bind(claim.id)
        .execute(&self.pool)
        .await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::Superseded);
        }
        Ok(())
    }

    async fn finish_txn(&self, txn: TxnId, claim: &Claim, rejected: Option<&Outcome>) -> Result<(), StoreError> {
        let finished: i64 = match rejected {
            None => sqlx::query_scalar(
                "WITH t AS (
                     UPDATE transactions SET finished_at = now(), result = 'committed'
                     WHERE txn = $1 AND claim = $2 AND finished_at IS NULL RETURNING plan_id),
                 p AS (
                     UPDATE plans SET status = 'committed' WHERE id = (SELECT plan_id FROM t) AND status = 'pending')
                 SELECT count(*) FROM t",
            )
            .bind(txn)
            .bind(claim.id),
            Some(outcome) => sqlx::query_scalar(
                "WITH t AS (
                     UPDATE transactions SET finished_at = now(), result = 'compensated'
                     WHERE txn = $1 AND claim = $2 AND finished_at IS NULL RETURNING plan_id),
                 r AS (
                     UPDATE reservations SET state = 'released', updated_at = now()
                     WHERE txn = $1 AND plan_id IS NOT NULL AND state = 'committed' AND EXISTS (SELECT 1 FROM t)),
                 p AS (
                     UPDATE plans SET status = 'rejected', outcome = $3, bookings = '[]', start = NULL
                     WHERE id = (SELECT plan_id FROM t))
                 SELECT count(*) FROM t",
            )
            .bind(txn)
            .bind(claim.id)
            .bind(Json(outcome)),
        }
        .fetch_one(&self.pool)
        .await?;
        if finished == 0 {
            return Err(StoreError::Superseded);
        }
        Ok(())
    }

    async fn take_in_doubt(&self, claim: &Claim, limit: usize) -> Result<Vec<InDoubt>, StoreError> {
        let rows = sqlx::query(
            "UPDATE transactions SET claim = $1, owner = $2, lease_until = now() + make_interval(secs => $3)
             WHERE txn IN (
                 SELECT txn FROM transactions WHERE finished_at IS NULL AND lease_until < now()
                 ORDER BY decided_at LIMIT $4 FOR UPDATE SKIP LOCKED)
             RETURNING txn, parts, outcome, compensating, decided_at",
        )
        .bind(claim.id)
        .bind(&claim.owner)
        .bind(claim.lease_s as f64)
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        let mut taken = rows
            .iter()
            .map(|r| {
                let Json(parts): Json<Vec<DecidedPart>> = r.try_get("parts")?;
                let Json(outcome): Json<Outcome> = r.try_get("outcome")?;
                let decided_at: DateTime<Utc> = r.try_get("decided_at")?;
                let t = InDoubt { txn: r.try_get("txn")?, parts, outcome, compensating: r.try_get("compensating")? };
                Ok((decided_at, t))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        taken.sort_by_key(|(at, _)| *at);
        Ok(taken.into_iter().map(|(_, t)| t).collect())
    }

    async fn live_holds(&self, now: Time) -> Result<Vec<StoredHold>, StoreError> {
        let rows = sqlx::query(
            "SELECT hold, participant, request, state, expires_at, via_api FROM reservations
             WHERE state = 'committed' OR (state = 'held' AND expires_at > $1)",
        )
        .bind(from_time(now))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let participant: String = r.try_get("participant")?;
                let Json(request): Json<HoldRequest> = r.try_get("request")?;
                let state: String = r.try_get("state")?;
                let expires_at: Option<DateTime<Utc>> = r.try_get("expires_at")?;
                Ok(StoredHold {
                    participant: participant.parse().map_err(corrupt)?,
                    hold: r.try_get("hold")?,
                    request,
                    state: match (state.as_str(), expires_at) {
                        ("held", Some(t)) => HoldState::Held { expires_at: crate::model::to_time(&t) },
                        _ => HoldState::Committed,
                    },
                    via_api: r.try_get("via_api")?,
                })
            })
            .collect()
    }

    async fn live_hold_owners(&self, now: Time) -> Result<Vec<(Uuid, String)>, StoreError> {
        sqlx::query_as(
            "SELECT hold, owner FROM reservations
             WHERE owner IS NOT NULL AND (state = 'committed' OR (state = 'held' AND expires_at > $1))",
        )
        .bind(from_time(now))
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::from)
    }

    async fn expire_holds(&self, now: Time) -> Result<u64, StoreError> {
        let r = sqlx::query(
            "UPDATE reservations SET state = 'expired', updated_at = now() WHERE state = 'held' AND expires_at <= $1",
        )
        .bind(from_time(now))
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected())
    }

    async fn save_grid(&self, grid: &Grid) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO topology (id, nodes, links) VALUES (1, $1, $2)
             ON CONFLICT (id) DO UPDATE SET nodes = EXCLUDED.nodes, links = EXCLUDED.links, updated_at = now()",
        )
        .bind(Json(&grid.nodes))
        .bind(Json(&grid.links))
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM sites").execute(&mut *tx).await?;
        for site in &grid.sites {
            sqlx::query("INSERT INTO sites (id, site) VALUES ($1, $2)")
                .bind(&site.id)
                .bind(Json(site))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn load_grid(&self) -> Result<Option<Grid>, StoreError> {
        let Some(topology) =
            sqlx::query("SELECT nodes, links FROM topology WHERE id = 1").fetch_optional(&self.pool).await?
        else {
            return Ok(None);
        };
        let sites = sqlx::query("SELECT site FROM sites ORDER BY seq").fetch_all(&self.pool).await?;
        let sites: Vec<serde_json::Value> = sites
            .iter()
            .map(|r| r.try_get::<Json<serde_json::Value>, _>("site").map(|j| j.0))
            .collect::<Result<_, _>>()?;
        let Json(nodes): Json<serde_json::Value> = topology.try_get("nodes")?;
        let Json(links): Json<serde_json::Value> = topology.try_get("links")?;
        // Through the grid's own validation, like a grid file.
        let grid = serde_json::from_value(serde_json::json!({ "nodes": nodes, "links": links, "sites": sites }))
            .map_err(|e| corrupt(format!("the stored grid is invalid: {e}")))?;
        Ok(Some(grid))
    }

    async fn save_site(&self, site: &Site) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO sites (id, site) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET site = EXCLUDED.site, updated_at = now()",
        )
        .bind(&site.id)
        .bind(Json(site))
        .execute(&self.pool)
        .await
        ?;
        Ok(())
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "postgres"
    }
}
