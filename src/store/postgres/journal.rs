//! The participants' journal (`reservations`): the [`Journal`] of every hold's transitions, and
//! the live holds a participant's calendar is rebuilt from.

use async_trait::async_trait;
use sqlx::types::Json;

use crate::model::{from_time, to_time, Time};
use crate::protocol::decision::PartHold;
use crate::protocol::{
    HoldId, HoldRequest, HoldState, Journal, JournalEntry, JournalError, JournalState, ParticipantRef,
};
use crate::store::{HoldStore, StoreError, StoredHold};

use super::PgStore;

/// `reservations.state`, under the name the statements' type overrides use
/// (`state AS "state: RowState"`).
type RowState = JournalState;

#[async_trait]
impl Journal for PgStore {
    async fn append(&self, entry: &JournalEntry) -> Result<(), JournalError> {
        let mut conn = self.pool.acquire().await.map_err(StoreError::from)?;
        write(entry, &mut conn).await
    }

    /// One transaction for all of `entries`: one flush of the write-ahead log (group commit).
    /// An illegal entry refuses them all.
    async fn append_all(&self, entries: &[JournalEntry]) -> Result<(), JournalError> {
        let mut tx = self.pool.begin().await.map_err(StoreError::from)?;
        for e in entries {
            write(e, &mut tx).await?;
        }
        tx.commit().await.map_err(StoreError::from)?;
        Ok(())
    }
}

/// Writes `entry`. Its statement changes only a row in a state the entry may follow; when it
/// changed nothing, the row's state (read then only, so the usual write costs one statement)
/// says why ([`JournalEntry::apply_to`]: already so, no row, or illegal).
async fn write(entry: &JournalEntry, conn: &mut sqlx::PgConnection) -> Result<(), JournalError> {
    let done = journal_entry(entry).execute(&mut *conn).await.map_err(StoreError::from)?;
    if done.rows_affected() > 0 || matches!(entry, JournalEntry::Held { .. }) {
        return Ok(());
    }
    // A runtime-checked statement: sqlx's macros would need .sqlx/ regenerated for one
    // primary-key read of a column whose type this file already decodes.
    let prior: Option<RowState> = sqlx::query_scalar("SELECT state FROM reservations WHERE hold = $1")
        .bind(entry.hold().as_uuid())
        .fetch_optional(&mut *conn)
        .await
        .map_err(StoreError::from)?;
    entry.apply_to(prior)?;
    Ok(())
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

#[async_trait]
impl HoldStore for PgStore {
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
                part: PartHold { participant: r.participant, hold: r.hold.into(), request: r.request.0 },
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
}
