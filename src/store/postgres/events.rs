//! The durable event log (`plan_events`, written by the trigger on `plans`) and its signal
//! (`coreserve_events`).

use async_trait::async_trait;
use sqlx::postgres::PgPool;
use sqlx::types::Json;
use uuid::Uuid;

use crate::model::Outcome;
use crate::store::{EventStore, PlanEvent, PlanStatus, StoreError};

use super::PgStore;

impl PgStore {
    pub(super) fn event_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.signal
            .get_or_init(|| {
                let (tx, _) = tokio::sync::watch::channel(0);
                tokio::spawn(listen_events(self.pool.clone(), tx.clone()));
                tx
            })
            .subscribe()
    }
}

#[async_trait]
impl EventStore for PgStore {
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
