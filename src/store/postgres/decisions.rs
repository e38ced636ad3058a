//! The coordinators' decision log (`transactions`): decisions, modifications and rejections
//! written with their plan, the ends of transactions, and the recovery of those in doubt; and the
//! allocation check of the charges they write (`allocation_charges`).

use std::collections::HashSet;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use uuid::Uuid;

use crate::fairshare::{Project, Usage};
use crate::model::{from_time, Outcome};
use crate::protocol::decision::{Booking, Ending, InDoubt, PartHold};
use crate::protocol::TxnId;
use crate::store::{Claim, DecisionRecord, DecisionStore, ModificationRecord, RejectionRecord, StoreError};

use super::PgStore;

#[async_trait]
impl DecisionStore for PgStore {
    async fn record_decision(&self, r: &DecisionRecord<'_>) -> Result<(), StoreError> {
        // One statement (data-modifying CTEs), so one round trip and one durable commit. Every
        // write is conditional on `ok`: the request's claim still holds its key (if it has one).
        // The casts of parameters that appear only in a SELECT list give PostgreSQL their types
        // (it would take them for text).
        let (plan, d) = (r.plan, &r.decision);
        let rows: &[PartHold] = if r.reservations { d.parts } else { &[] };
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
        self.events_written();
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
        self.events_written();
        Ok(())
    }

    async fn record_rejection(&self, r: &RejectionRecord<'_>) -> Result<(), StoreError> {
        let written = self.insert_plan_keyed(r.plan, r.key, Some(r.claim.id)).await?;
        if written {
            Ok(())
        } else {
            Err(StoreError::Superseded)
        }
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
        self.events_written();
        Ok(())
    }

    async fn modifications_in_doubt(&self, plans: Option<&[Uuid]>) -> Result<HashSet<Uuid>, StoreError> {
        let rows = sqlx::query_scalar!(
            "SELECT DISTINCT plan_id FROM transactions
             WHERE finished_at IS NULL AND kind = 'modification' AND ($1::uuid[] IS NULL OR plan_id = ANY($1))",
            plans as _,
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().collect())
    }

    async fn take_in_doubt(&self, claim: &Claim, limit: usize) -> Result<Vec<InDoubt>, StoreError> {
        let rows = sqlx::query!(
            r#"UPDATE transactions SET claim = $1, owner = $2, lease_until = now() + make_interval(secs => $3)
               WHERE txn IN (
                   SELECT txn FROM transactions WHERE finished_at IS NULL AND lease_until < now()
                   ORDER BY decided_at LIMIT $4 FOR UPDATE SKIP LOCKED)
               RETURNING txn, parts AS "parts: Json<Vec<PartHold>>", outcome AS "outcome: Json<Outcome>",
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
