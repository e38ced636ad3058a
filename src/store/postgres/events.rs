//! The durable event log (`plan_events`, written by the trigger on `plans`), its watermark, and
//! the signal that wakes its readers (`coreserve_events`).
//!
//! Event ids follow their writing transactions' ids (migrations/0024_event_ids_without_lock.sql):
//! a writer takes no shared lock, and readers read only below `plan_event_watermark()`, under
//! which nothing can appear any more. Readers are woken by [`Pump`]: a writer of events calls
//! [`PgStore::events_written`] after its commit; the pump then notifies the other processes
//! (`NOTIFY coreserve_events`, in a transaction of its own that writes nothing, and only when
//! another process listens) and bumps this process's signal once the events committed by then
//! are below the watermark, so a woken reader finds what woke it. Other processes'
//! notifications start the same wait in this one.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::PgPool;
use sqlx::types::Json;
use tokio::sync::{watch, Notify};
use uuid::Uuid;

use crate::model::{Outcome, PlanStatus};
use crate::store::{EventStore, PlanEvent, StoreError};

use super::PgStore;

/// The notification channel between processes sharing the database.
const CHANNEL: &str = "coreserve_events";
/// The `application_name` of each process's listening connection.
const LISTENER_NAME: &str = "coreserve events";
/// Longest pause between two looks at the watermark while committed events sit above it (an
/// older transaction still running), and the period of the pump's pass with nothing asked (a
/// writer that died between its commit and its call to [`PgStore::events_written`]).
const MAX_PAUSE: Duration = Duration::from_millis(50);
const IDLE_PASS: Duration = Duration::from_secs(1);
/// The shortest time between two passes of the pump.
const MIN_GAP: Duration = Duration::from_millis(5);

/// What wakes the readers of one process: the pump's task is started by the first
/// [`PgStore::event_signal`] (a process that never reads events never runs it).
pub(super) struct Pump {
    signal: watch::Sender<u64>,
    /// A pass is wanted (permits coalesce: many requests during a pass make one more pass).
    wanted: Notify,
    /// This process wrote events since the last pass: the pass notifies the others.
    written: AtomicBool,
    /// Another process listens on [`CHANNEL`] (looked up at every idle pass): without one, a
    /// notification would only cost a transaction id.
    others_listen: AtomicBool,
    /// The backend of this process's listening connection (0 before it is connected).
    listener_pid: AtomicI32,
}

impl PgStore {
    pub(super) fn event_signal(&self) -> watch::Receiver<u64> {
        self.pump
            .get_or_init(|| {
                let pump = Arc::new(Pump {
                    signal: watch::channel(0).0,
                    wanted: Notify::new(),
                    written: false.into(),
                    // Until the first look, assume someone listens.
                    others_listen: true.into(),
                    listener_pid: 0.into(),
                });
                // Both end when the pool is closed (`Store::close`, at the service's shutdown).
                let (mut closed, pool, p) = (self.pool.close_event(), self.pool.clone(), pump.clone());
                tokio::spawn(async move { closed.do_until(listen(pool, p)).await });
                let (mut closed, pool, p) = (self.pool.close_event(), self.pool.clone(), pump.clone());
                tokio::spawn(async move { closed.do_until(pump_events(pool, p)).await });
                pump
            })
            .signal
            .subscribe()
    }

    /// Called after a commit that may have written events: this process's readers are woken,
    /// and the other processes notified, once the events are readable. Without a running pump
    /// (nobody reads events here) the other processes still learn of them: the next pass of
    /// theirs, at the latest [`IDLE_PASS`] later.
    pub(super) fn events_written(&self) {
        if let Some(pump) = self.pump.get() {
            pump.written.store(true, Ordering::Relaxed);
            pump.wanted.notify_one();
        }
    }
}

#[async_trait]
impl EventStore for PgStore {
    async fn events_after(&self, after: i64, owner: Option<Uuid>, limit: i64) -> Result<Vec<PlanEvent>, StoreError> {
        let rows = sqlx::query!(
            r#"SELECT id, at, plan_id, owner, "user", request_id, status AS "status: PlanStatus",
                      outcome AS "outcome: Json<Outcome>", kind, part
               FROM plan_events
               WHERE id > $1 AND id < plan_event_watermark() AND ($2::uuid IS NULL OR owner = $2)
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

    async fn settle_events(&self) -> Result<(), StoreError> {
        let newest = sqlx::query_scalar!("SELECT max(id) FROM plan_events").fetch_one(&self.pool).await?;
        readable(&self.pool, newest).await
    }

    async fn last_event_id(&self) -> Result<i64, StoreError> {
        // The newest event below the watermark: nothing at or below it can appear any more.
        Ok(sqlx::query_scalar!(
            r#"SELECT COALESCE(max(id), 0) AS "id!" FROM plan_events WHERE id < plan_event_watermark()"#
        )
        .fetch_one(&self.pool)
        .await?)
    }
}

/// Waits until event `newest` (if any) is below the watermark: 1 ms, doubling to
/// [`MAX_PAUSE`], between looks.
async fn readable(pool: &PgPool, newest: Option<i64>) -> Result<(), StoreError> {
    let Some(newest) = newest else { return Ok(()) };
    let mut pause = Duration::from_millis(1);
    while sqlx::query_scalar!(r#"SELECT plan_event_watermark() AS "w!""#).fetch_one(pool).await? <= newest {
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
    Ok(())
}

/// Listens on [`CHANNEL`] (its connection named [`LISTENER_NAME`], so that the other processes
/// see it listen) and asks for a pass at each notification, and once after every
/// (re)connection (what was written while the connection was down is read then). It runs until
/// the pool is closed: the readers of one process come and go.
async fn listen(pool: PgPool, pump: Arc<Pump>) {
    loop {
        let listener = async {
            let mut l = sqlx::postgres::PgListener::connect_with(&pool).await?;
            l.listen(CHANNEL).await?;
            let pid = sqlx::query_scalar!(
                r#"SELECT pg_backend_pid() AS "pid!" FROM set_config('application_name', $1, false)"#,
                LISTENER_NAME
            )
            .fetch_one(&mut l)
            .await?;
            Ok::<_, sqlx::Error>((l, pid))
        };
        let mut listener = match listener.await {
            Ok((l, pid)) => {
                pump.listener_pid.store(pid, Ordering::Relaxed);
                l
            }
            Err(e) => {
                tracing::warn!(error = %e, "event listener: cannot connect; retrying in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        pump.wanted.notify_one();
        loop {
            match listener.try_recv().await {
                Ok(Some(_)) => pump.wanted.notify_one(),
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "event listener failed; reconnecting");
                    break;
                }
            }
        }
    }
}

/// The pump's passes: each (asked for, or every [`IDLE_PASS`]) notifies the other processes
/// if this one wrote events and another listens, waits until the newest event committed by
/// then is readable (the transactions older than it have ended; newer ones get a pass of their
/// own), and bumps the signal. Passes are at least [`MIN_GAP`] apart: under load one pass
/// serves many commits. Every [`IDLE_PASS`] a pass also looks whether another process listens.
async fn pump_events(pool: PgPool, pump: Arc<Pump>) {
    let mut looked = tokio::time::Instant::now() - IDLE_PASS;
    loop {
        let _ = tokio::time::timeout(IDLE_PASS, pump.wanted.notified()).await;
        if looked.elapsed() >= IDLE_PASS {
            looked = tokio::time::Instant::now();
            let others = sqlx::query_scalar!(
                r#"SELECT EXISTS (SELECT 1 FROM pg_stat_activity
                                  WHERE datname = current_database() AND application_name = $1 AND pid <> $2)
                   AS "others!""#,
                LISTENER_NAME,
                pump.listener_pid.load(Ordering::Relaxed),
            )
            .fetch_one(&pool)
            .await;
            if let Ok(others) = others {
                pump.others_listen.store(others, Ordering::Relaxed);
            }
        }
        let notify = pump.written.swap(false, Ordering::Relaxed) && pump.others_listen.load(Ordering::Relaxed);
        // One statement: the notification (sent at its commit, if asked: a transaction that
        // writes nothing, so no WAL flush), the newest committed event and the watermark.
        let first = sqlx::query!(
            r#"SELECT (SELECT max(id) FROM plan_events) AS newest, plan_event_watermark() AS "watermark!"
               FROM (SELECT CASE WHEN $1 THEN pg_notify($2, '') END) AS n"#,
            notify,
            CHANNEL,
        )
        .fetch_one(&pool)
        .await;
        let settled = match first {
            Ok(r) if r.newest.is_none_or(|n| n < r.watermark) => Ok(()),
            Ok(r) => readable(&pool, r.newest).await,
            Err(e) => Err(e.into()),
        };
        if let Err(e) = settled {
            tracing::warn!(error = %e, "event watermark not read");
            pump.written.fetch_or(notify, Ordering::Relaxed);
        }
        pump.signal.send_modify(|n| *n += 1);
        tokio::time::sleep(MIN_GAP).await;
    }
}
