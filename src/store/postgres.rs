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
//! [`RowState`], `participant` as [`ParticipantRef`] (its `Decode` is below: the store, not
//! `protocol`, knows sqlx). A value that does not decode is [`StoreError::Corrupt`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgPool, PgPoolOptions, PgTypeInfo, PgValueRef};
use sqlx::types::Json;
use sqlx::Postgres;
use uuid::Uuid;

use super::{
    Claim, DecisionRecord, DeliveryRecord, KeyClaim, ModificationRecord, PlanEvent, PlanFilter, PlanRecord, PlanStatus,
    RejectionRecord, Store, StoreError, StoredHold, TokenRecord, WebhookRecord,
};
use crate::fairshare::{Project, Usage};
use crate::model::{from_time, to_time, Grid, Outcome, Site, Time};
use crate::protocol::decision::{Booking, Ending, InDoubt, Part};
use crate::protocol::{HoldId, HoldRequest, HoldState, Journal, JournalEntry, JournalError, ParticipantRef, TxnId};

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

/// `reservations.state`: where a journaled hold stands (the column's CHECK constraint lists
/// the same five words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "lowercase")]
enum RowState {
    Held,
    Committed,
    Aborted,
    Expired,
    Released,
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
impl Journal for PgStore {
    async fn append(&self, entry: &JournalEntry) -> Result<(), JournalError> {
        journal_entry(entry).execute(&self.pool).await.map_err(StoreError::from)?;
        Ok(())
    }

    /// One transaction for all of `entries`: one flush of the write-ahead log (group commit).
    async fn append_all(&self, entries: &[JournalEntry]) -> Result<(), JournalError> {
        let mut tx = self.pool.begin().await.map_err(StoreError::from)?;
        for e in entries {
            journal_entry(e).execute(&mut *tx).await.map_err(StoreError::from)?;
        }
        tx.commit().await.map_err(StoreError::from)?;
        Ok(())
    }
}

/// The statement that journals `entry`.
fn journal_entry(entry: &JournalEntry) -> sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments> {
    {
        // Each transition is guarded by the states it may leave, as in protocol::HoldBook. The
        // in-memory participant decided first, before the lease ended, so its commit or
        // extension wins over an `expired` the sweeper (of any process) wrote meanwhile.
        let q = match entry {
            JournalEntry::Held { participant, hold, request, expires_at, via_api, owner } => {
                let (start, end) = request.interval();
                let txn = request.txn();
                sqlx::query!(
                    "INSERT INTO reservations (hold, participant, txn, request, start_at, end_at, state, expires_at, via_api, owner)
                     VALUES ($1, $2, $3, $4, $5, $6, 'held', $7, $8, $9) ON CONFLICT (hold) DO NOTHING",
                    hold.as_uuid(),
                    participant.to_string(),
                    txn.as_uuid(),
                    Json(request) as _,
                    from_time(start),
                    from_time(end),
                    from_time(*expires_at),
                    via_api,
                    owner.as_deref(),
                )
            }
            JournalEntry::Committed { hold } => sqlx::query!(
                "UPDATE reservations SET state = 'committed', expires_at = NULL, updated_at = now()
                 WHERE hold = $1 AND state IN ('held', 'expired')",
                hold.as_uuid(),
            ),
            JournalEntry::Aborted { hold } => sqlx::query!(
                "UPDATE reservations SET state = 'aborted', updated_at = now() WHERE hold = $1 AND state = 'held'",
                hold.as_uuid(),
            ),
            JournalEntry::Released { hold } => sqlx::query!(
                "UPDATE reservations SET state = 'released', updated_at = now() WHERE hold = $1 AND state = 'committed'",
                hold.as_uuid(),
            ),
            JournalEntry::Extended { hold, expires_at } => sqlx::query!(
                "UPDATE reservations SET state = 'held', expires_at = $2, updated_at = now()
                 WHERE hold = $1 AND state IN ('held', 'expired')",
                hold.as_uuid(),
                from_time(*expires_at),
            ),
        };
        q
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
        sqlx::query!(
            r#"INSERT INTO plans (id, "user", request_id, status, created_at, cancelled_at, start, outcome, bookings, owner)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"#,
            plan.id,
            plan.user,
            plan.outcome.request_id,
            <&str>::from(plan.status),
            plan.created_at,
            plan.cancelled_at,
            plan.outcome.start,
            Json(&plan.outcome) as _,
            Json(&plan.bookings) as _,
            plan.owner,
        )
        .execute(&self.pool)
        .await?;
        Ok(())
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
        Ok(row.map(PlanRecord::from))
    }

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

    async fn insert_token(&self, token: TokenRecord) -> Result<(), StoreError> {
        sqlx::query!(
            // The principal of that name, made if new (DO UPDATE, not DO NOTHING: it returns
            // the row also when another statement has just made it).
            r#"WITH p AS (
                   INSERT INTO principals (name) VALUES ($3) ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
                   RETURNING id)
               INSERT INTO tokens (id, hash, "user", admin, service, planner, expires_at, principal)
               SELECT $1, $2, $3, $4, $5, $6, $7, p.id FROM p
               ON CONFLICT (hash) DO UPDATE SET "user" = EXCLUDED."user", admin = EXCLUDED.admin,
                   service = EXCLUDED.service, planner = EXCLUDED.planner, expires_at = EXCLUDED.expires_at,
                   principal = EXCLUDED.principal"#,
            token.id,
            token.hash,
            token.user,
            token.admin,
            token.service,
            token.planner,
            token.expires_at,
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        let token = sqlx::query_as!(
            TokenRecord,
            r#"SELECT id, hash, "user", principal, admin, service, planner, expires_at FROM tokens
               WHERE hash = $1 AND revoked_at IS NULL"#,
            hash
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(token)
    }

    async fn revoke_token(&self, id: Uuid) -> Result<Option<TokenRecord>, StoreError> {
        // The row's trigger (migrations/0007_principals.sql) notifies every process's cache.
        let token = sqlx::query_as!(
            TokenRecord,
            r#"UPDATE tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL
               RETURNING id, hash, "user", principal, admin, service, planner, expires_at"#,
            id
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(token)
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

    async fn record_decision(&self, r: &DecisionRecord<'_>) -> Result<(), StoreError> {
        // One statement (data-modifying CTEs), so one round trip and one durable commit. Every
        // write is conditional on `ok`: the request's claim still holds its key (if it has one).
        // The casts of parameters that appear only in a SELECT list give PostgreSQL their types
        // (it would take them for text).
        let (plan, d) = (r.plan, &r.decision);
        let rows: &[Part] = if r.reservations { d.parts } else { &[] };
        let holds: Vec<Uuid> = rows.iter().map(|p| p.hold.as_uuid()).collect();
        let who: Vec<String> = rows.iter().map(|p| p.participant.to_string()).collect();
        let requests: Vec<String> =
            rows.iter().map(|p| serde_json::to_string(&p.request).expect("a hold request serialises")).collect();
        let (starts, ends): (Vec<DateTime<Utc>>, Vec<DateTime<Utc>>) = rows
            .iter()
            .map(|p| {
                let (start, end) = p.request.interval();
                (from_time(start), from_time(end))
            })
            .unzip();
        let (key, fingerprint) = r.key.unzip();
        let usage = Usage::of_outcome(&plan.outcome);
        let mut tx = self.pool.begin().await?;
        let project = charge_check(&mut tx, &plan.user, &usage, None).await?;
        let first_start = usage.iter().map(|u| u.start).min().map(from_time);
        let last_end = usage.iter().map(|u| u.end).max().map(from_time);
        let written = sqlx::query_scalar!(
            r#"WITH k AS (
                   UPDATE idempotency_keys SET plan_id = $2, fingerprint = $15
                   WHERE principal = $26 AND key = $14 AND claim = $18 AND plan_id IS NULL
                   RETURNING 1),
               ok AS (SELECT ($14::text IS NULL OR EXISTS (SELECT 1 FROM k)) AS go),
               t AS (
                   INSERT INTO transactions
                       (txn, plan_id, decision, parts, outcome, finished_at, result, claim, owner, lease_until)
                   SELECT $1::uuid, $2::uuid, 'commit', $3::jsonb, $4::jsonb, CASE WHEN $5 THEN now() END,
                       CASE WHEN $5 THEN 'committed' END, $18::uuid, $19::text, now() + make_interval(secs => $20)
                   FROM ok WHERE go),
               r AS (
                   INSERT INTO reservations (hold, participant, txn, plan_id, request, start_at, end_at, state)
                   SELECT h, w, $1::uuid, $2::uuid, q::jsonb, s, e, 'committed'
                   FROM UNNEST($6::uuid[], $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[]) AS u(h, w, q, s, e)
                   CROSS JOIN ok WHERE ok.go
                   ON CONFLICT (hold) DO UPDATE SET state = 'committed', plan_id = EXCLUDED.plan_id, expires_at = NULL,
                       updated_at = now()),
               c AS (
                   INSERT INTO allocation_charges (plan_id, project, usage, first_start, last_end)
                   SELECT $2::uuid, $22::text, $23::jsonb, $24::timestamptz, $25::timestamptz
                   FROM ok WHERE go AND $24::timestamptz IS NOT NULL
                   ON CONFLICT (plan_id) DO NOTHING)
               INSERT INTO plans (id, "user", request_id, status, created_at, start, outcome, bookings, owner)
               SELECT $2::uuid, $11::text, $12::text, $21::text, $13::timestamptz, $16::timestamptz, $4::jsonb,
                   $17::jsonb, $26::uuid
               FROM ok WHERE go
               RETURNING id"#,
            d.txn.as_uuid(),
            plan.id,
            Json(d.parts) as _,
            Json(d.outcome) as _,
            r.reservations,
            &holds,
            &who,
            &requests,
            &starts,
            &ends,
            plan.user,
            plan.outcome.request_id,
            plan.created_at,
            key,
            fingerprint,
            plan.outcome.start,
            Json(&plan.bookings) as _,
            r.claim.id,
            r.claim.owner,
            r.claim.lease_s as f64,
            <&str>::from(plan.status),
            project,
            Json(&usage) as _,
            first_start,
            last_end,
            plan.owner,
        )
        .fetch_optional(&mut *tx)
        .await?;
        if written.is_none() {
            return Err(StoreError::Superseded); // rolled back
        }
        tx.commit().await?;
        Ok(())
    }

    async fn record_modification(&self, r: &ModificationRecord<'_>) -> Result<(), StoreError> {
        let d = &r.decision;
        let mut tx = self.pool.begin().await?;
        // The plan, locked: it must still be booked as the modification found it.
        let Some(current) = sqlx::query!(
            r#"SELECT "user", status, bookings AS "bookings: Json<Vec<Booking>>" FROM plans WHERE id = $1 FOR UPDATE"#,
            r.plan,
        )
        .fetch_optional(&mut *tx)
        .await?
        else {
            return Err(StoreError::Superseded);
        };
        if !matches!(current.status.as_str(), "committed" | "active") || current.bookings.0 != r.replaced {
            return Err(StoreError::Superseded);
        }
        let usage = Usage::of_outcome(d.outcome);
        charge_check(&mut tx, &current.user, &usage, Some(r.plan)).await?;
        if let Some((key, fingerprint)) = r.key {
            let done = sqlx::query!(
                "UPDATE idempotency_keys SET plan_id = $1, fingerprint = $2
                 WHERE principal = $3 AND key = $4 AND claim = $5 AND plan_id IS NULL",
                r.plan,
                fingerprint,
                r.owner,
                key,
                r.claim.id,
            )
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 0 {
                return Err(StoreError::Superseded);
            }
        }
        sqlx::query!(
            r#"INSERT INTO transactions (txn, plan_id, decision, parts, outcome, finished_at, result, claim, owner,
                   lease_until, kind, bookings)
               VALUES ($1, $2, 'commit', $3, $4, CASE WHEN $5 THEN now() END, CASE WHEN $5 THEN 'committed' END,
                   $6, $7, now() + make_interval(secs => $8), 'modification', $9)"#,
            d.txn.as_uuid(),
            r.plan,
            Json(d.parts) as _,
            Json(d.outcome) as _,
            r.reservations,
            r.claim.id,
            r.claim.owner,
            r.claim.lease_s as f64,
            Json(r.bookings) as _,
        )
        .execute(&mut *tx)
        .await?;
        sqlx::query!(
            "UPDATE allocation_charges SET usage = $2, first_start = $3, last_end = $4
             WHERE plan_id = $1 AND released_at IS NULL",
            r.plan,
            Json(&usage) as _,
            usage.iter().map(|u| u.start).min().map(from_time),
            usage.iter().map(|u| u.end).max().map(from_time),
        )
        .execute(&mut *tx)
        .await?;
        if r.reservations {
            let replaced: Vec<Uuid> =
                d.parts.iter().filter_map(|p| p.request.replaces()).map(|h| h.as_uuid()).collect();
            sqlx::query!(
                "UPDATE reservations SET state = 'released', updated_at = now() WHERE hold = ANY($1) AND state = 'committed'",
                &replaced,
            )
            .execute(&mut *tx)
            .await?;
            for p in d.parts {
                let (start, end) = p.request.interval();
                sqlx::query!(
                    "INSERT INTO reservations (hold, participant, txn, plan_id, request, start_at, end_at, state)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, 'committed')",
                    p.hold.as_uuid(),
                    p.participant.to_string(),
                    d.txn.as_uuid(),
                    r.plan,
                    Json(&p.request) as _,
                    from_time(start),
                    from_time(end),
                )
                .execute(&mut *tx)
                .await?;
            }
            sqlx::query!(
                "UPDATE plans SET outcome = $2, bookings = $3, start = $4, revision = revision + 1 WHERE id = $1",
                r.plan,
                Json(d.outcome) as _,
                Json(r.bookings) as _,
                d.outcome.start,
            )
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn record_rejection(&self, r: &RejectionRecord<'_>) -> Result<(), StoreError> {
        let plan = r.plan;
        let (key, fingerprint) = r.key.unzip();
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
            r.claim.id,
            plan.owner,
        )
        .fetch_optional(&self.pool)
        .await?;
        written.map(|_| ()).ok_or(StoreError::Superseded)
    }

    async fn mark_compensating(&self, txn: TxnId, claim: &Claim) -> Result<(), StoreError> {
        let r = sqlx::query!(
            "UPDATE transactions SET compensating = true WHERE txn = $1 AND claim = $2 AND finished_at IS NULL",
            txn.as_uuid(),
            claim.id,
        )
        .execute(&self.pool)
        .await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::Superseded);
        }
        Ok(())
    }

    async fn finish_txn(&self, txn: TxnId, claim: &Claim, ending: Ending<'_>) -> Result<(), StoreError> {
        let finished: i64 = match ending {
            Ending::Committed | Ending::Broken(_) => {
                let mut tx = self.pool.begin().await?;
                let finished = sqlx::query_scalar!(
                    r#"WITH t AS (
                           UPDATE transactions SET finished_at = now(), result = 'committed'
                           WHERE txn = $1 AND claim = $2 AND finished_at IS NULL
                           RETURNING plan_id, kind, outcome, bookings),
                       p AS (
                           UPDATE plans SET status = 'committed'
                           WHERE id = (SELECT plan_id FROM t WHERE kind = 'plan') AND status = 'pending'),
                       m AS (
                           UPDATE plans SET outcome = t.outcome, bookings = t.bookings,
                               start = (t.outcome->>'start')::timestamptz, revision = plans.revision + 1
                           FROM t WHERE plans.id = t.plan_id AND t.kind = 'modification')
                       SELECT count(*) AS "finished!" FROM t"#,
                    txn.as_uuid(),
                    claim.id,
                )
                .fetch_one(&mut *tx)
                .await?;
                if let (Ending::Broken(broken), 1..) = (ending, finished) {
                    // The plan as the modification made it, with the coordinator's broken marks.
                    let plan = sqlx::query!(
                        r#"SELECT p.id, p.outcome AS "outcome: Json<Outcome>"
                           FROM plans p JOIN transactions t ON t.plan_id = p.id WHERE t.txn = $1"#,
                        txn.as_uuid(),
                    )
                    .fetch_one(&mut *tx)
                    .await?;
                    let mut outcome = plan.outcome.0;
                    outcome.take_broken_from(broken);
                    sqlx::query!(
                        "UPDATE plans SET status = 'broken', outcome = $2
                         WHERE id = $1 AND status IN ('committed', 'active', 'broken')",
                        plan.id,
                        Json(&outcome) as _,
                    )
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                finished
            }
            Ending::Compensated(outcome) => {
                sqlx::query_scalar!(
                    r#"WITH t AS (
                           UPDATE transactions SET finished_at = now(), result = 'compensated'
                           WHERE txn = $1 AND claim = $2 AND finished_at IS NULL AND kind = 'plan' RETURNING plan_id),
                       m AS (
                           UPDATE transactions SET finished_at = now(), result = 'compensated'
                           WHERE txn = $1 AND claim = $2 AND finished_at IS NULL AND kind = 'modification'
                           RETURNING plan_id),
                       r AS (
                           UPDATE reservations SET state = 'released', updated_at = now()
                           WHERE txn = $1 AND plan_id IS NOT NULL AND state = 'committed' AND EXISTS (SELECT 1 FROM t)),
                       p AS (
                           UPDATE plans SET status = 'rejected', outcome = $3, bookings = '[]', start = NULL
                           WHERE id = (SELECT plan_id FROM t)),
                       c AS (
                           UPDATE allocation_charges SET released_at = now()
                           WHERE plan_id = (SELECT plan_id FROM t) AND released_at IS NULL)
                       SELECT (SELECT count(*) FROM t) + (SELECT count(*) FROM m) AS "finished!""#,
                    txn.as_uuid(),
                    claim.id,
                    Json(outcome) as _,
                )
                .fetch_one(&self.pool)
                .await?
            }
        };
        if finished == 0 {
            return Err(StoreError::Superseded);
        }
        Ok(())
    }

    async fn take_in_doubt(&self, claim: &Claim, limit: usize) -> Result<Vec<InDoubt>, StoreError> {
        let rows = sqlx::query!(
            r#"UPDATE transactions SET claim = $1, owner = $2, lease_until = now() + make_interval(secs => $3)
               WHERE txn IN (
                   SELECT txn FROM transactions WHERE finished_at IS NULL AND lease_until < now()
                   ORDER BY decided_at LIMIT $4 FOR UPDATE SKIP LOCKED)
               RETURNING txn, parts AS "parts: Json<Vec<Part>>", outcome AS "outcome: Json<Outcome>",
                         compensating, decided_at"#,
            claim.id,
            claim.owner,
            claim.lease_s as f64,
            limit as i64,
        )
        .fetch_all(&self.pool)
        .await?;
        let mut taken: Vec<(DateTime<Utc>, InDoubt)> = rows
            .into_iter()
            .map(|r| {
                let t =
                    InDoubt { txn: r.txn.into(), parts: r.parts.0, outcome: r.outcome.0, compensating: r.compensating };
                (r.decided_at, t)
            })
            .collect();
        taken.sort_by_key(|(at, _)| *at);
        Ok(taken.into_iter().map(|(_, t)| t).collect())
    }

    async fn live_holds(&self, now: Time) -> Result<Vec<StoredHold>, StoreError> {
        let rows = sqlx::query!(
            r#"SELECT hold, participant AS "participant: ParticipantRef", request AS "request: Json<HoldRequest>",
                      state AS "state: RowState", expires_at, via_api
               FROM reservations
               WHERE state = 'committed' OR (state = 'held' AND expires_at > $1)"#,
            from_time(now),
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| StoredHold {
                participant: r.participant,
                hold: r.hold.into(),
                request: r.request.0,
                state: match (r.state, r.expires_at) {
                    (RowState::Held, Some(t)) => HoldState::Held { expires_at: to_time(&t) },
                    _ => HoldState::Committed,
                },
                via_api: r.via_api,
            })
            .collect())
    }

    async fn live_hold_owners(&self, now: Time) -> Result<Vec<(HoldId, String)>, StoreError> {
        let rows = sqlx::query!(
            r#"SELECT hold, owner AS "owner!" FROM reservations
               WHERE owner IS NOT NULL AND (state = 'committed' OR (state = 'held' AND expires_at > $1))"#,
            from_time(now),
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|r| (r.hold.into(), r.owner)).collect())
    }

    async fn expire_holds(&self, now: Time) -> Result<u64, StoreError> {
        let r = sqlx::query!(
            "UPDATE reservations SET state = 'expired', updated_at = now() WHERE state = 'held' AND expires_at <= $1",
            from_time(now),
        )
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected())
    }

    async fn save_grid(&self, grid: &Grid) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query!(
            "INSERT INTO topology (id, nodes, links) VALUES (1, $1, $2)
             ON CONFLICT (id) DO UPDATE SET nodes = EXCLUDED.nodes, links = EXCLUDED.links, updated_at = now()",
            Json(grid.nodes()) as _,
            Json(grid.links()) as _,
        )
        .execute(&mut *tx)
        .await?;
        sqlx::query!("DELETE FROM sites").execute(&mut *tx).await?;
        for site in grid.sites() {
            sqlx::query!("INSERT INTO sites (id, site) VALUES ($1, $2)", site.id.as_str(), Json(site) as _)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn load_grid(&self) -> Result<Option<Grid>, StoreError> {
        let Some(topology) =
            sqlx::query!("SELECT nodes, links FROM topology WHERE id = 1").fetch_optional(&self.pool).await?
        else {
            return Ok(None);
        };
        let sites: Vec<serde_json::Value> =
            sqlx::query_scalar!("SELECT site FROM sites ORDER BY seq").fetch_all(&self.pool).await?;
        // Through the grid's own validation, like a grid file.
        let grid = serde_json::from_value(
            serde_json::json!({ "nodes": topology.nodes, "links": topology.links, "sites": sites }),
        )
        .map_err(StoreError::InvalidGrid)?;
        Ok(Some(grid))
    }

    async fn save_project(&self, project: &Project) -> Result<(), StoreError> {
        sqlx::query!(
            "INSERT INTO projects (id, project) VALUES ($1, $2)
             ON CONFLICT (id) DO UPDATE SET project = EXCLUDED.project, updated_at = now()",
            project.id.as_str(),
            Json(project) as _,
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn projects(&self) -> Result<Vec<Project>, StoreError> {
        let rows: Vec<serde_json::Value> =
            sqlx::query_scalar!("SELECT project FROM projects ORDER BY id").fetch_all(&self.pool).await?;
        rows.into_iter()
            .map(|v| serde_json::from_value(v).map_err(|e| StoreError::Corrupt(sqlx::Error::Decode(Box::new(e)))))
            .collect()
    }

    async fn live_charges(&self, since: Time) -> Result<Vec<(Uuid, String, Vec<Usage>)>, StoreError> {
        let rows = sqlx::query!(
            r#"SELECT plan_id, project, usage AS "usage!: Json<Vec<Usage>>" FROM allocation_charges
               WHERE released_at IS NULL AND last_end > $1"#,
            from_time(since),
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|r| (r.plan_id, r.project, r.usage.0)).collect())
    }

    async fn charged(&self, project: &str, from: Time, to: Time) -> Result<Vec<Usage>, StoreError> {
        let rows = sqlx::query_scalar!(
            r#"SELECT usage AS "usage!: Json<Vec<Usage>>" FROM allocation_charges
               WHERE project = $1 AND released_at IS NULL AND last_end > $2 AND first_start < $3"#,
            project,
            from_time(from),
            from_time(to),
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().flat_map(|j| j.0).filter(|u| u.start < to && u.end > from).collect())
    }

    async fn save_site(&self, site: &Site) -> Result<(), StoreError> {
        sqlx::query!(
            "INSERT INTO sites (id, site) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET site = EXCLUDED.site, updated_at = now()",
            site.id.as_str(),
            Json(site) as _,
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn token_changes(&self) -> Result<Option<super::TokenWatch>, StoreError> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let pool = self.pool.clone();
        let connect = move || {
            let pool = pool.clone();
            async move {
                let mut l = sqlx::postgres::PgListener::connect_with(&pool).await?;
                l.listen("coreserve_tokens").await?;
                Ok::<_, sqlx::Error>(l)
            }
        };
        let mut listener = connect().await?;
        let (tx, changed) = tokio::sync::mpsc::channel(1);
        let watching = std::sync::Arc::new(AtomicBool::new(true));
        let up = watching.clone();
        tokio::spawn(async move {
            loop {
                let got = tokio::select! {
                    // Nobody watches any more: end, and close the connection.
                    () = tx.closed() => return,
                    got = listener.try_recv() => got,
                };
                if let Ok(Some(_)) = got {
                    if let Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) = tx.try_send(()) {
                        return;
                    }
                    continue;
                }
                // The connection was lost: changes made meanwhile are missed. Cache nothing
                // until a fresh listener is up, then drop whatever was cached.
                up.store(false, Ordering::SeqCst);
                if let Err(e) = got {
                    tracing::warn!(error = %e, "token change listener failed");
                }
                listener = loop {
                    if tx.is_closed() {
                        return;
                    }
                    match connect().await {
                        Ok(l) => break l,
                        Err(e) => {
                            tracing::warn!(error = %e, "token change listener: cannot reconnect; retrying in 1 s");
                            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                        }
                    }
                };
                up.store(true, Ordering::SeqCst);
                if let Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) = tx.try_send(()) {
                    return;
                }
            }
        });
        Ok(Some(super::TokenWatch { changed, watching }))
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
        Ok(r.rows_affected())
    }

    async fn events_after(&self, after: i64, owner: Option<Uuid>, limit: i64) -> Result<Vec<PlanEvent>, StoreError> {
        let rows = sqlx::query!(
            r#"SELECT id, at, plan_id, owner, "user", request_id, status AS "status: PlanStatus",
                      outcome AS "outcome: Json<Outcome>", kind, part
               FROM plan_events
               WHERE id > $1 AND ($2::uuid IS NULL OR owner = $2)
               ORDER BY id LIMIT $3"#,
            after,
            owner,
            limit,
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| {
                PlanEvent {
                    id: r.id,
                    at: r.at,
                    kind: r.kind.unwrap_or_else(|| format!("plan.{}", r.status)),
                    part: r.part,
                    plan_id: r.plan_id,
                    request_id: r.request_id,
                    user: r.user,
                    owner: r.owner,
                    status: r.status,
                    jobs: r.outcome.0.jobs,
                    transfers: r.outcome.0.transfers,
                }
                .with_part_states()
            })
            .collect())
    }

    async fn last_event_id(&self) -> Result<i64, StoreError> {
        // The counter's committed value: the id of the newest committed event.
        Ok(sqlx::query_scalar!("SELECT last_id FROM plan_event_counter").fetch_one(&self.pool).await?)
    }

    fn event_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.signal
            .get_or_init(|| {
                let (tx, _) = tokio::sync::watch::channel(0);
                tokio::spawn(listen_events(self.pool.clone(), tx.clone()));
                tx
            })
            .subscribe()
    }

    async fn insert_webhook(&self, w: WebhookRecord) -> Result<(), StoreError> {
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
        .execute(&self.pool)
        .await?;
        Ok(())
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

    async fn lease_due_webhooks(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        lease_s: i64,
        limit: i64,
    ) -> Result<Vec<WebhookRecord>, StoreError> {
        // Only webhooks with an event to deliver. SKIP LOCKED: processes leasing at the same
        // moment take different webhooks.
        Ok(sqlx::query_as!(
            WebhookRecord,
            r#"UPDATE webhooks SET lease_owner = $1, lease_until = $2 + make_interval(secs => $3)
               WHERE id IN (SELECT id FROM webhooks
                            WHERE enabled AND next_attempt_at <= $2 AND (lease_until IS NULL OR lease_until < $2)
                              AND EXISTS (SELECT 1 FROM plan_events e
                                          WHERE e.id > webhooks.cursor AND (webhooks.admin OR e.owner = webhooks.owner))
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

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query_scalar!(r#"SELECT 1 AS "ok!""#).fetch_one(&self.pool).await?;
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "postgres"
    }

    async fn prune_finished(&self, horizon: DateTime<Utc>) -> Result<super::Pruned, StoreError> {
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
        Ok(super::Pruned {
            plans: plans.plans as u64,
            idempotency_keys: plans.keys as u64,
            journal,
            decisions,
            events,
            deliveries,
            charges,
        })
    }

    fn pool_state(&self) -> Option<super::PoolState> {
        Some(super::PoolState {
            size: self.pool.size(),
            idle: u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX),
            max: self.pool.options().get_max_connections(),
        })
    }
}

/// Listens on `coreserve_events` (the plans' event trigger notifies each new id at commit) and
/// bumps `tx` on each, and once more after every reconnection (what was written while the
/// connection was down is read then). It runs for the process's life: the readers of one
/// process come and go.
async fn listen_events(pool: PgPool, tx: tokio::sync::watch::Sender<u64>) {
    loop {
        let listener = async {
            let mut l = sqlx::postgres::PgListener::connect_with(&pool).await?;
            l.listen("coreserve_events").await?;
            Ok::<_, sqlx::Error>(l)
        };
        let mut listener = match listener.await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "event listener: cannot connect; retrying in 1 s");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        tx.send_modify(|n| *n += 1);
        loop {
            match listener.try_recv().await {
                Ok(Some(_)) => tx.send_modify(|n| *n += 1),
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "event listener failed; reconnecting");
                    break;
                }
            }
        }
    }
}
/// The project `user`'s plans are charged to, once the charge `usage` is checked against its
/// allocation (migrations/0008_allocation_charges.sql): the user's project rows are locked
/// first, so that the charges of one project are checked and written one at a time across
/// every process, and the limit counts every charge committed before (but plan `except`'s
/// own, which a modification replaces).
///
/// # Errors
/// [`StoreError::AllocationExceeded`]: the caller's transaction must roll back.
async fn charge_check(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    user: &str,
    usage: &[Usage],
    except: Option<Uuid>,
) -> Result<String, StoreError> {
    let projects: Vec<Json<Project>> = sqlx::query_scalar!(
        r#"SELECT project AS "project!: Json<Project>" FROM projects
           WHERE id = $1 OR project->'members' @> to_jsonb($1::text)
           ORDER BY id FOR UPDATE"#,
        user,
    )
    .fetch_all(&mut **tx)
    .await?;
    let (project, limited) = crate::fairshare::project_of(projects.iter().map(|p| &p.0), user);
    if let Some(p) = limited.filter(|p| !p.allocation.overdraft) {
        let periods = crate::fairshare::periods_of(&p.allocation, usage);
        if let (Some(from), Some(to)) = (periods.iter().map(|p| p.0).min(), periods.iter().map(|p| p.1).max()) {
            let booked = sqlx::query_scalar!(
                r#"SELECT usage AS "usage!: Json<Vec<Usage>>" FROM allocation_charges
                   WHERE project = $1 AND released_at IS NULL AND last_end > $2 AND first_start < $3
                     AND plan_id IS DISTINCT FROM $4"#,
                project,
                from_time(from),
                from_time(to),
                except,
            )
            .fetch_all(&mut **tx)
            .await?;
            let booked: Vec<Usage> = booked.into_iter().flat_map(|j| j.0).collect();
            crate::fairshare::check_limit(p, &booked, usage).map_err(StoreError::AllocationExceeded)?;
        }
    }
    Ok(project)
}
