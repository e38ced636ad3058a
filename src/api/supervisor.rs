//! The process's background work as named, supervised tasks ([`start`], called by
//! [`crate::api::Application::build`]). Each has a name, a period and a record in `/metrics`
//! ([`crate::api::metrics::TaskTally`]: rounds, failed rounds, when the last one ended, whether
//! it runs), and every one stops on shutdown. (Not to be confused with the *background lane*
//! of [`crate::api::lanes`], where plan requests run.)
//!
//! | task | period | which processes | a round |
//! |---|---|---|---|
//! | `lease_sweep` | `min(lease_s, 10)` s | all | lapsed holds released, the journal backlog written ([`AppState::sweep`]); hourly, history beyond the horizon pruned ([`AppState::prune_history`]) |
//! | `claim_renewal` | `claim_lease_s / 4` | all | the leases of this process's claims renewed ([`AppState::renew_claims`]) |
//! | `retention` | `retention_every_s` (the first after at most 60 s) | with `retention_days` | what finished before the horizon deleted ([`prune_store`]) |
//! | `slurm_sync:{site}` | the site's `sync_s` | one per Slurm site | the site's calendar and Slurm's reservations reconciled ([`AppState::sync_slurm`]) |
//! | `dataplane_reconcile` | the data plane's `sync_ms`, or sooner at a window boundary | a NIS with a data plane | the data plane's rules matched to the hold book ([`AppState::reconcile_dataplane`]) |
//! | `drift_watch` | 3 s ([`DRIFT_WATCH_EVERY`]) | a planner; all-in-one with Slurm sites or a data plane | plans whose reservations a site no longer honours marked broken ([`AppState::watch_drift`]) |
//! | `plan_clock` | 1 s ([`PLAN_CLOCK_EVERY`]) | planning processes | committed -> active -> completed ([`crate::store::PlanStore::advance_plans`]) |
//! | `webhook_delivery` | at every event written, else `min(webhook_retry_base_ms, 1 s)` | planning processes | due webhook deliveries leased and sent ([`crate::api::webhooks::Deliverer::round`]) |
//! | `recovery` | `claim_lease_s / 4` | planning processes | lapsed in-doubt transactions settled ([`AppState::recover_in_doubt`]); projects set elsewhere read |
//! | `charges_refresh` | 15 s | planning processes | every planner's fair-share charges read ([`AppState::refresh_charges`]) |
//! | `token_watch` | at every token change (period 0) | with the PostgreSQL store | the token cache dropped when any process changed a token ([`AppState::invalidate_tokens`]) |
//!
//! The PostgreSQL store keeps two loops of its own (the event pump and its listener, started by
//! the first reader of events), which end when [`crate::store::Store::close`] closes its pool:
//! [`crate::api::Application::run_until_stopped`] does, after the tasks above.
//!
//! **Supervised**: a round runs to its end; its error is logged and counted, and so is its
//! panic, which does not end the task (the next round runs at its time).
//!
//! **Shutdown** (mini-redis's `shutdown.rs` is the model): one signal for every task, sent by
//! [`Supervisor::stop`]; a task sees it at its next wait ([`Ticker::sleep`], [`Ticker::until`]),
//! never in the middle of a round, and ends. [`crate::api::Application::run_until_stopped`]
//! stops the tasks once the HTTP server has stopped: on `SIGTERM` actix stops accepting
//! connections and lets the requests in flight finish, while the tasks still run (the claim
//! renewer keeps those requests' claims alive), and then every task stops.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use actix_web::web;

use super::config::Role;
use super::metrics::{Metrics, TaskTally};
use super::state::AppState;

/// How often a planning process moves plans along the clock (committed -> active ->
/// completed; [`crate::store::PlanStore::advance_plans`]): a state change is seen within this.
pub const PLAN_CLOCK_EVERY: Duration = Duration::from_secs(1);
/// How often a planning process asks its sites for reservations they can no longer honour
/// ([`AppState::watch_drift`]).
pub const DRIFT_WATCH_EVERY: Duration = Duration::from_secs(3);
/// How often a planning process reads every planner's fair-share charges
/// ([`AppState::refresh_charges`]).
const CHARGES_READ_EVERY: Duration = Duration::from_secs(15);
/// The first pruning of retention runs this long after start (or after one period, if
/// shorter): not in the rush of a restart's recovery.
const RETENTION_FIRST_AFTER: Duration = Duration::from_secs(60);
/// History beyond the horizon is pruned from the calendars this often (by the lease sweep).
const HISTORY_PRUNED_EVERY: Duration = Duration::from_secs(3600);

/// How long [`Supervisor::stop`] waits for the tasks to end their rounds before it aborts them.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// The shutdown signal as one task sees it (a receiver of [`Supervisor::stop`]'s signal).
#[derive(Debug, Clone)]
pub struct Shutdown {
    signal: watch::Receiver<bool>,
}

impl Shutdown {
    /// Whether shutdown was signalled.
    pub fn is_shutdown(&self) -> bool {
        *self.signal.borrow()
    }

    /// Waits until shutdown is signalled (at once if it was; also if the supervisor is gone).
    pub async fn recv(&mut self) {
        let _ = self.signal.wait_for(|stop| *stop).await;
    }
}

/// What a task's loop holds: its record and the shutdown signal.
pub struct Ticker {
    tally: Arc<TaskTally>,
    shutdown: Shutdown,
}

impl Ticker {
    /// `wait`'s output, or `None` once shutdown is signalled (then the task should end).
    pub async fn until<F: Future>(&mut self, wait: F) -> Option<F::Output> {
        if self.shutdown.is_shutdown() {
            return None;
        }
        tokio::select! {
            out = wait => Some(out),
            () = self.shutdown.recv() => None,
        }
    }

    /// Sleeps `period`: `false` if shutdown came first (then the task should end).
    pub async fn sleep(&mut self, period: Duration) -> bool {
        self.until(tokio::time::sleep(period)).await.is_some()
    }

    /// Runs one round to its end and records it: a failure (an error or a panic) is counted
    /// and logged with `failure` (`None`: the round logs its own errors; a panic is still
    /// logged). The round's value, `None` if it failed.
    pub async fn round<T, E: std::fmt::Display>(
        &self,
        failure: Option<&str>,
        round: impl Future<Output = Result<T, E>>,
    ) -> Option<T> {
        let task = self.tally.name();
        match std::panic::AssertUnwindSafe(round).catch_unwind().await {
            Ok(Ok(value)) => {
                self.tally.ran(true);
                Some(value)
            }
            Ok(Err(e)) => {
                self.tally.ran(false);
                if let Some(what) = failure {
                    tracing::warn!(task, error = %e, "{what}");
                }
                None
            }
            Err(panic) => {
                self.tally.ran(false);
                tracing::error!(
                    task,
                    panic = crate::api::middleware::panic_text(&*panic),
                    "a background round panicked"
                );
                None
            }
        }
    }
}

/// A background task's name and schedule.
#[derive(Debug, Clone)]
pub struct Every {
    /// The task's name: the `task` label of its metrics, and its log lines' `task` field.
    pub name: String,
    /// Time between the end of one round and the start of the next.
    pub period: Duration,
    /// Time before the first round (default: one period).
    pub first_after: Duration,
    /// What a failed round is logged as (`None`: the round logs its own errors).
    pub failure: Option<&'static str>,
}

impl Every {
    /// Task `name`, every `period`, the first round after one period, a failure logged as a
    /// failed background round (with the task's name).
    pub fn new(name: impl Into<String>, period: Duration) -> Self {
        Every { name: name.into(), period, first_after: period, failure: Some("background round failed") }
    }

    /// The same with failures logged as `what`.
    pub fn failing_as(mut self, what: &'static str) -> Self {
        self.failure = Some(what);
        self
    }

    /// The same for a round that logs its own errors (they are still counted).
    pub fn logging_itself(mut self) -> Self {
        self.failure = None;
        self
    }

    /// The same with the first round after `first` instead of one period.
    pub fn first_after(mut self, first: Duration) -> Self {
        self.first_after = first;
        self
    }
}

/// The process's background tasks: starts them, and stops them all on [`Supervisor::stop`].
pub struct Supervisor {
    metrics: Arc<Metrics>,
    signal: watch::Sender<bool>,
    tasks: Vec<(Arc<TaskTally>, JoinHandle<()>)>,
}

impl Supervisor {
    /// No tasks yet; each task started is recorded in `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Supervisor { metrics, signal: watch::channel(false).0, tasks: Vec::new() }
    }

    /// Starts `every.name`: `round` every `every.period` (the first after `every.first_after`),
    /// each round recorded ([`Ticker::round`]), until shutdown.
    pub fn every<F, Fut, T, E>(&mut self, every: Every, mut round: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send,
        E: std::fmt::Display,
    {
        let Every { name, period, first_after, failure } = every;
        self.spawn(&name, period, move |mut t| async move {
            let mut wait = first_after;
            while t.sleep(wait).await {
                t.round(failure, round()).await;
                wait = period;
            }
        });
    }

    /// Starts task `name`, of nominal period `period`, as `body` runs it: a loop of its own that
    /// waits through its [`Ticker`] (so that it ends on shutdown) and records its rounds with
    /// [`Ticker::round`].
    pub fn spawn<F, Fut>(&mut self, name: &str, period: Duration, body: F)
    where
        F: FnOnce(Ticker) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let tally = self.metrics.background_task(name, period);
        let ticker = Ticker { tally: tally.clone(), shutdown: Shutdown { signal: self.signal.subscribe() } };
        let run = body(ticker);
        let ended = tally.clone();
        let handle = tokio::spawn(async move {
            // Marked stopped however the loop ends (also if it is aborted or panics).
            let _stopped = Stopped(ended);
            run.await;
        });
        self.tasks.push((tally, handle));
    }

    /// The names of the tasks started, in order.
    pub fn names(&self) -> Vec<&str> {
        self.tasks.iter().map(|(t, _)| t.name()).collect()
    }

    /// Signals shutdown to every task and waits for them to end, up to `grace` in all; a task
    /// still in a round then is aborted (and logged). The names of the aborted tasks.
    pub async fn stop(self, grace: Duration) -> Vec<String> {
        let _ = self.signal.send(true);
        let deadline = tokio::time::Instant::now() + grace;
        let mut aborted = Vec::new();
        for (tally, mut handle) in self.tasks {
            if tokio::time::timeout_at(deadline, &mut handle).await.is_err() {
                handle.abort();
                tracing::warn!(task = tally.name(), "a background task did not stop in time: aborted");
                aborted.push(tally.name().to_owned());
            }
        }
        tracing::info!(aborted = aborted.len(), "background tasks stopped");
        aborted
    }
}

/// Starts the background tasks of `state`'s process (the module docs list them), after its
/// recovery and first synchronisations: a [`Supervisor`] that stops them.
pub fn start(state: &web::Data<AppState>, token_changes: Option<mpsc::Receiver<()>>) -> Supervisor {
    let mut tasks = Supervisor::new(state.metrics.clone());
    let config = &state.config;
    let sweep_every = Duration::from_secs(config.lease_s.clamp(1, 10) as u64);
    let claim_every = Duration::from_millis((config.claim_lease_s.max(1) * 250) as u64);
    let (sweeper, mut pruned_at) = (state.clone(), std::time::Instant::now());
    tasks.every(Every::new("lease_sweep", sweep_every).failing_as("lease sweep failed"), move || {
        if pruned_at.elapsed() >= HISTORY_PRUNED_EVERY {
            pruned_at = std::time::Instant::now();
            let n = sweeper.prune_history();
            tracing::info!(spans = n, "pruned history beyond the horizon");
        }
        let sweeper = sweeper.clone();
        async move { sweeper.sweep().await }
    });
    // Claims: renewed while this process works on them (a task of its own, so that a slow
    // recovery never delays a renewal).
    let renewer = state.clone();
    tasks.every(Every::new("claim_renewal", claim_every).failing_as("claim renewal failed"), move || {
        let renewer = renewer.clone();
        async move { renewer.renew_claims().await }
    });
    // Retention (off unless --retention-days): finished plans, past journal rows and decisions,
    // delivered events; every process that shares the database may run it.
    if config.retention_days > 0 {
        let every = Duration::from_secs(config.retention_every_s.max(1));
        let pruner = state.clone();
        let task = Every::new("retention", every).first_after(every.min(RETENTION_FIRST_AFTER)).logging_itself();
        tasks.every(task, move || {
            let pruner = pruner.clone();
            async move { prune_store(&pruner).await }
        });
    }
    // Slurm sites (sync_slurm logs and counts its own failures).
    for lis in state.slurm_sites() {
        let every = Duration::from_secs(lis.slurm().expect("a Slurm site").config().sync_s);
        let syncer = state.clone();
        tasks.every(Every::new(format!("slurm_sync:{}", lis.site().id), every).logging_itself(), move || {
            let (syncer, lis) = (syncer.clone(), lis.clone());
            async move { syncer.sync_slurm(&lis).await }
        });
    }
    // The NIS's data plane: at every window boundary and every sync period.
    if let Some(dp) = state.participants.nis.dataplane().map(|p| p.config().clone()) {
        let every = Duration::from_millis(dp.sync_ms);
        let timer = state.clone();
        tasks.spawn("dataplane_reconcile", every, move |mut t| async move {
            loop {
                // Wake at the next window boundary (whole seconds) or after the period.
                let now = chrono::Utc::now();
                let wait = timer
                    .participants
                    .nis
                    .next_dataplane_boundary(now.timestamp())
                    .map(|t| Duration::from_millis(((t * 1000) - now.timestamp_millis()).max(0) as u64))
                    .map_or(every, |w| w.min(every));
                if !t.sleep(wait).await {
                    break;
                }
                t.round(None, timer.reconcile_dataplane()).await;
            }
        });
    }
    // Plans whose reservations a site no longer honours are marked broken (a planner process
    // asks its LIS; an all-in-one process only if it has Slurm sites or a data plane).
    if matches!(config.role, Role::Planner(_))
        || (state.plans() && (!state.slurm_sites().is_empty() || state.participants.nis.dataplane().is_some()))
    {
        let watcher = state.clone();
        tasks.every(Every::new("drift_watch", DRIFT_WATCH_EVERY).failing_as("drift watch failed"), move || {
            let watcher = watcher.clone();
            async move { watcher.watch_drift().await }
        });
    }
    if state.plans() {
        start_planning_tasks(state, &mut tasks, claim_every);
    }
    if let Some(mut changed) = token_changes {
        // A round per change: the token cache dropped. Its nominal period is 0 (at each change).
        let state = state.clone();
        tasks.spawn("token_watch", Duration::ZERO, move |mut t| async move {
            while let Some(Some(())) = t.until(changed.recv()).await {
                t.round(None, async {
                    state.invalidate_tokens();
                    Ok::<_, std::convert::Infallible>(())
                })
                .await;
            }
        });
    }
    tasks
}

/// The tasks of a planning process: the plan clock, webhook delivery, the recovery round and
/// the fair-share charges.
fn start_planning_tasks(state: &web::Data<AppState>, tasks: &mut Supervisor, claim_every: Duration) {
    // Plans along the clock: committed -> active -> completed, each change an event.
    let clock = state.clone();
    tasks.every(Every::new("plan_clock", PLAN_CLOCK_EVERY).failing_as("plan states not advanced"), move || {
        let clock = clock.clone();
        async move { clock.store.advance_plans(clock.now_utc()).await }
    });
    // Webhooks: a round at once, then whenever an event is written (any process), and every
    // second (or retry base, if shorter) for retries that came due.
    let config = &state.config;
    let deliverer = super::webhooks::Deliverer::new(
        state.store.clone(),
        super::webhooks::DeliveryLimits {
            retry_base: Duration::from_millis(config.webhook_retry_base_ms),
            disable_after: chrono::Duration::seconds(config.webhook_disable_after_s),
            max_attempts_per_event: config.webhook_max_attempts_per_event,
            policy: state.webhook_policy.clone(),
        },
    );
    let mut events = state.store.event_signal();
    let tick = deliverer.retry_base.min(Duration::from_secs(1));
    tasks.spawn("webhook_delivery", tick, move |mut t| async move {
        loop {
            t.round(Some("webhook deliveries not leased"), deliverer.round()).await;
            let woken = t.until(async {
                tokio::select! {
                    changed = events.changed() => {
                        if changed.is_err() {
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                    () = tokio::time::sleep(tick) => {}
                }
            });
            if woken.await.is_none() {
                break;
            }
        }
    });
    let recoverer = state.clone();
    tasks.every(Every::new("recovery", claim_every).failing_as("recovery round failed"), move || {
        let recoverer = recoverer.clone();
        async move {
            let recovered = recoverer.recover_in_doubt().await;
            // Projects set through another planner process reach this one's ledger (a cache
            // for the priorities; the limit is the store's).
            let _ = super::routes::projects::fresh_projects(&recoverer).await;
            recovered
        }
    });
    // And every planner's fair-share charges.
    let reader = state.clone();
    let task = Every::new("charges_refresh", CHARGES_READ_EVERY).failing_as("fair-share charges not refreshed");
    tasks.every(task, move || {
        let reader = reader.clone();
        async move { reader.refresh_charges().await }
    });
}

/// One round of retention: deletes what finished before [`ServeConfig::retention_horizon`]
/// (nothing when retention is off), logs and counts it.
///
/// [`ServeConfig::retention_horizon`]: crate::api::ServeConfig::retention_horizon
///
/// # Errors
/// The store's (logged as a warning; the next round tries again).
pub async fn prune_store(state: &AppState) -> Result<crate::store::Pruned, crate::store::StoreError> {
    let Some(horizon) = state.config.retention_horizon(state.now_utc()) else {
        return Ok(Default::default());
    };
    match state.store.prune_finished(horizon).await {
        Ok(pruned) => {
            state.metrics.pruned(&pruned);
            tracing::info!(%horizon, plans = pruned.plans, idempotency_keys = pruned.idempotency_keys,
                journal = pruned.journal, decisions = pruned.decisions, events = pruned.events,
                deliveries = pruned.deliveries, charges = pruned.charges, "retention: pruned what finished before the horizon");
            Ok(pruned)
        }
        Err(e) => {
            tracing::warn!(error = %e, "retention: pruning failed; next round in one period");
            Err(e)
        }
    }
}

/// Marks a task stopped when its loop's future is dropped.
struct Stopped(Arc<TaskTally>);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.stopped();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tasks_run_record_their_rounds_survive_a_panic_and_stop_on_shutdown() {
        let metrics = Arc::new(Metrics::default());
        let mut sup = Supervisor::new(metrics.clone());
        let mut n = 0;
        sup.every(Every::new("flaky", Duration::from_millis(5)), move || {
            n += 1;
            let round = n;
            async move {
                match round % 3 {
                    0 => Err("an error"),
                    1 => Ok(()),
                    _ => panic!("a panic"),
                }
            }
        });
        sup.spawn("idle", Duration::from_secs(3600), |mut t| async move {
            while t.sleep(Duration::from_secs(3600)).await {}
        });
        assert_eq!(sup.names(), ["flaky", "idle"]);
        let flaky = metrics.background_tasks()[0].clone();
        while flaky.runs() < 6 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(flaky.errors() >= 4, "errors and panics are counted: {}", flaky.errors());
        assert!(metrics.background_tasks().iter().all(|t| t.running()));
        assert!(sup.stop(Duration::from_secs(5)).await.is_empty(), "every task ended in time");
        assert!(metrics.background_tasks().iter().all(|t| !t.running()));
        let runs = flaky.runs();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(flaky.runs(), runs, "no round after the stop");
        let text = metrics.render(0);
        assert!(text.contains("coreserve_background_running{task=\"flaky\"} 0"), "{text}");
        assert!(text.contains("coreserve_background_period_seconds{task=\"idle\"} 3600"), "{text}");
    }

    #[tokio::test]
    async fn a_round_in_progress_past_the_grace_is_aborted() {
        let metrics = Arc::new(Metrics::default());
        let mut sup = Supervisor::new(metrics.clone());
        sup.every(Every::new("stuck", Duration::from_millis(1)), || async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<(), String>(())
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(sup.stop(Duration::from_millis(50)).await, ["stuck"]);
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!metrics.background_tasks()[0].running());
    }
}
