//! Request replay: the driver behind `coreserve plan`, `compare` and `demo`. Requests are handed
//! out in arrival order to N planners that run concurrently over one in-process grid (each
//! request to a seeded random planner), and the clock reads each request's submission time as
//! it is dispatched.
//!
//! Two ways to run the planners:
//! - **deterministic** (the default): every planner on one thread (a current-thread tokio
//!   runtime of the replay's own), each participant message preceded by a yield
//!   ([`Yielding`]), so the planners interleave message by message in an order fixed by the
//!   requests and the seed: the same outcomes on every run and machine (but for the random
//!   hold ids a rejection's reason may name, and the wall-clock `planning_ms`). This is the
//!   simulator's dispatch with zero message latency and no clock of its own.
//! - **racing** ([`ReplayOptions::racing`]): the planners run on the caller's runtime, on real
//!   threads, and race for the participants as real processes would; outcomes vary from run
//!   to run (a contention test, not a measurement).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use tokio::sync::{mpsc, Semaphore};

use crate::clock::{Clock, ManualClock};
use crate::fairshare::Ledger;
use crate::in_process::{InProcessGrid, DEFAULT_LEASE_S};
use crate::model::{Grid, Outcome, PlanRequest, PlanStatus, ReservationMethod, SelectionPolicy};
use crate::nis::Routing;
use crate::planner::{Backtrack, Charge, PlanOptions, Planner, PlannerConfig};
use crate::protocol::Yielding;

/// Settings of one replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub planners: usize,
    pub policy: SelectionPolicy,
    pub method: ReservationMethod,
    /// Seeds the choice of planner per request and each planner's own stream.
    pub seed: u64,
    pub w_interval_s: i64,
    pub routing: Routing,
    pub lease_s: i64,
    /// Counts the replayed requests (one `inc` per outcome; never finished here, so several
    /// replays may share one bar). Hidden by default; see [`progress_bar`].
    pub progress: ProgressBar,
    /// Reservations that ended this long before the replayed "now" are pruned from the
    /// calendars (every 512 requests).
    pub prune_after_s: i64,
    /// Planners race on the caller's runtime (real threads; outcomes vary) instead of
    /// interleaving deterministically on one thread (see the module docs).
    pub racing: bool,
    /// The planners' search: backjumping (default) or Fig. 3's chronological backtracking.
    pub backtrack: Backtrack,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            planners: 3,
            policy: SelectionPolicy::Time,
            method: ReservationMethod::Bir,
            seed: 1,
            w_interval_s: 1800,
            routing: Routing::Shortest,
            lease_s: DEFAULT_LEASE_S,
            progress: ProgressBar::hidden(),
            prune_after_s: 7 * 86_400,
            racing: false,
            backtrack: Backtrack::ConflictDirected,
        }
    }
}

/// Replays `requests` (sorted by `submitted_at` first) on a fresh in-process copy of `grid`.
/// Returns one outcome per request, in arrival order. Deterministic unless
/// [`ReplayOptions::racing`]: then on the caller's runtime, else on a thread of its own.
pub async fn replay(grid: &Grid, requests: Vec<PlanRequest>, opts: &ReplayOptions) -> Vec<Outcome> {
    if opts.racing {
        return replay_here(grid, requests, opts).await;
    }
    let (grid, opts) = (grid.clone(), opts.clone());
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("a current-thread runtime");
        let _ = tx.send(rt.block_on(replay_here(&grid, requests, &opts)));
    });
    rx.await.expect("the replay thread panicked")
}

/// [`replay`] on the current runtime.
async fn replay_here(grid: &Grid, mut requests: Vec<PlanRequest>, opts: &ReplayOptions) -> Vec<Outcome> {
    requests.sort_by_key(PlanRequest::submitted_at);
    let clock = Arc::new(ManualClock::new(requests.first().map_or(0, PlanRequest::submitted_at)));
    let local = InProcessGrid::new(grid, clock.clone(), opts.lease_s, opts.routing);
    let mut services = local.services();
    if !opts.racing {
        // Interleave the planners message by message (on one thread, in a fixed order).
        for p in services.lis.values_mut() {
            *p = Arc::new(Yielding(p.clone()));
        }
        services.nis = Arc::new(Yielding(services.nis.clone()));
    }
    let template = PlannerConfig {
        w_interval_s: opts.w_interval_s,
        policy: opts.policy,
        method: opts.method,
        backtrack: opts.backtrack,
        ..Default::default()
    };
    let planners = Planner::pool(opts.planners.max(1), &template, &services, |p| {
        opts.seed.wrapping_mul(1_000_003).wrapping_add(p as u64)
    });
    // One request per planner at a time, one waiting: requests are handed out as planners free
    // up, so the replayed clock never runs far ahead of the plans being made.
    let d =
        Dispatch { rule: DispatchRule::Random, seed: opts.seed, concurrency: 1, queue_capacity: 1, fair_share: None };
    dispatch(planners, Arc::new(requests), &d, opts.progress.clone(), |i, r| {
        clock.advance_to(r.submitted_at());
        if i % 512 == 511 {
            local.prune_before(r.submitted_at() - opts.prune_after_s);
        }
        std::future::ready(())
    })
    .await
}

/// A progress bar of `len` plan requests with `label`, drawn on stderr only when it is a
/// terminal (hidden in pipes and CI logs).
pub fn progress_bar(len: u64, label: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(len);
    b.set_style(
        ProgressStyle::with_template(&format!("{label} {{bar:40}} {{pos}}/{{len}} plans {{per_sec}} eta {{eta}}"))
            .expect("a valid template"),
    );
    b
}

/// Which planner [`dispatch`] hands an arriving request to. Spelled `random` /
/// `least-busy` in the simulator's TOML.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DispatchRule {
    /// A draw from the dispatch's seeded stream.
    #[default]
    Random,
    /// The planner with the fewest requests waiting for it or planning, ties the first: the
    /// rule of the service's planner pool (`api::state::PlannerPool::lend`).
    LeastBusy,
}

/// How [`dispatch`] hands requests to planners.
#[derive(Debug, Clone)]
pub struct Dispatch {
    /// Which planner takes an arriving request.
    pub rule: DispatchRule,
    /// Seeds the choice of planner for each request ([`DispatchRule::Random`]).
    pub seed: u64,
    /// Requests one planner works on at once.
    pub concurrency: usize,
    /// Requests that may wait for one planner; when its queue is full the dispatcher waits.
    pub queue_capacity: usize,
    /// Planned-Use fair share: pending requests are taken by priority, then arrival, and every
    /// plan is charged to its project's allocation. `None`: first come, first served.
    pub fair_share: Option<FairDispatch>,
}

/// Fair share in [`dispatch`] (see [`crate::fairshare`]).
#[derive(Clone)]
pub struct FairDispatch {
    /// The allocations and usage; every plan is charged here (its key: the request's index).
    pub ledger: Arc<Ledger>,
    /// The admission window, seconds: arrivals wait for the end of their window (windows of
    /// this length from the epoch), so that those of one window are taken by priority rather
    /// than by arrival. 0: none (still by priority among requests already waiting).
    pub window_s: i64,
    /// "Now" for the priorities (the services' clock); waits are on tokio's clock, so this must
    /// advance with it (the simulator's virtual clock does).
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for FairDispatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FairDispatch").field("window_s", &self.window_s).finish_non_exhaustive()
    }
}

/// The requests waiting for one planner (indexes into the request list) and, with fair share,
/// the order it takes them in.
struct Pending {
    waiting: std::sync::Mutex<Vec<usize>>,
}

impl Pending {
    /// The next request to plan: the highest priority of its user's project, then the
    /// earliest arrival (without fair share: the earliest arrival).
    fn take(&self, requests: &[PlanRequest], fair: Option<&FairDispatch>) -> usize {
        let mut w = self.waiting.lock().expect("pending requests");
        let best = match fair {
            None => (0..w.len()).min_by_key(|&k| w[k]),
            Some(f) => {
                let now = f.clock.now();
                let key = |k: usize| (f.ledger.priority_of(requests[w[k]].user(), now), std::cmp::Reverse(w[k]));
                (0..w.len()).max_by(|&a, &b| key(a).partial_cmp(&key(b)).expect("priorities are not NaN"))
            }
        };
        w.swap_remove(best.expect("a signalled request is waiting"))
    }
}

/// Hands `requests`, in order, each to a planner chosen by `d.rule`, after awaiting
/// `arrive(index, request)` (advance a replay clock, or sleep until the arrival on virtual
/// time). Each planner works on up to `concurrency` requests at once. Returns the outcomes in
/// request order; `bar` counts them (the caller finishes it). The one request driver of
/// `coreserve plan` and of the simulator.
pub async fn dispatch<F, Fut>(
    planners: Vec<Planner>,
    requests: Arc<Vec<PlanRequest>>,
    d: &Dispatch,
    bar: ProgressBar,
    mut arrive: F,
) -> Vec<Outcome>
where
    F: FnMut(usize, &PlanRequest) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let n = requests.len();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(usize, Outcome)>();
    let mut queues = Vec::new();
    for planner in planners {
        let planner = Arc::new(planner);
        // One signal per waiting request; the channel's capacity bounds the queue.
        let (tx, mut rx) = mpsc::channel::<()>(d.queue_capacity.max(1));
        let pending = Arc::new(Pending { waiting: std::sync::Mutex::new(Vec::new()) });
        let slots = Arc::new(Semaphore::new(d.concurrency.max(1)));
        let busy = Arc::new(AtomicUsize::new(0));
        let (requests, done, fair, busy_here) = (requests.clone(), done_tx.clone(), d.fair_share.clone(), busy.clone());
        let queue = pending.clone();
        tokio::spawn(async move {
            loop {
                // Take a request off the queue only when there is room to work on it.
                let permit = slots.clone().acquire_owned().await.expect("semaphore never closed");
                let Some(()) = rx.recv().await else { break };
                let i = queue.take(&requests, fair.as_ref());
                let (planner, requests, done, fair) = (planner.clone(), requests.clone(), done.clone(), fair.clone());
                let busy = busy_here.clone();
                tokio::spawn(async move {
                    let key = i.to_string();
                    let charge = fair.as_ref().map(|f| Charge { ledger: &f.ledger, key: &key });
                    let outcome = planner.plan_with(&requests[i], PlanOptions { charge, ..Default::default() }).await;
                    busy.fetch_sub(1, Ordering::SeqCst);
                    let _ = done.send((i, outcome.outcome));
                    drop(permit);
                });
            }
        });
        queues.push((tx, pending, busy));
    }
    drop(done_tx);
    let collector = tokio::spawn(async move {
        let mut outcomes: Vec<Option<Outcome>> = vec![None; n];
        // Ends when every planner task has dropped its sender: every request answered.
        while let Some((i, o)) = done_rx.recv().await {
            outcomes[i] = Some(o);
            bar.inc(1);
        }
        outcomes.into_iter().map(|o| o.expect("every request answered")).collect::<Vec<_>>()
    });
    let mut pick = ChaCha8Rng::seed_from_u64(d.seed);
    for (i, r) in requests.iter().enumerate() {
        arrive(i, r).await;
        if let Some(f) = d.fair_share.as_ref().filter(|f| f.window_s > 0) {
            // Wait for the end of the arrival's window; later arrivals of the same window are
            // due at once and join the same queues before any planner runs again.
            let end = r.submitted_at().div_euclid(f.window_s) * f.window_s + f.window_s;
            let wait = (end - f.clock.now()).max(0) as u64;
            if wait > 0 {
                tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
            }
        }
        let p = match d.rule {
            DispatchRule::Random => pick.gen_range(0..queues.len()),
            DispatchRule::LeastBusy => {
                (0..queues.len()).min_by_key(|&q| queues[q].2.load(Ordering::SeqCst)).expect("a planner")
            }
        };
        let (tx, pending, busy) = &queues[p];
        busy.fetch_add(1, Ordering::SeqCst);
        let slot = tx.reserve().await.expect("planner alive");
        pending.waiting.lock().expect("pending requests").push(i);
        slot.send(());
    }
    drop(queues);
    collector.await.expect("collector task")
}

/// Aggregate figures of a batch of outcomes.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub requests: usize,
    pub committed: usize,
    /// committed / requests.
    pub success_rate: f64,
    /// Mean `cost` of the committed plans.
    pub mean_cost: f64,
    /// Mean over committed plans of cost per CPU-hour (Ando & Aida's "average cost").
    pub average_cost_per_cpu_hour: f64,
    pub planning_ms_p50: f64,
    pub planning_ms_p99: f64,
    pub messages: u64,
    pub holds_aborted: u64,
}

impl Summary {
    /// Summarises `outcomes`.
    pub fn of(outcomes: &[Outcome]) -> Self {
        let committed: Vec<&Outcome> = outcomes.iter().filter(|o| o.status == PlanStatus::Committed).collect();
        let mean = |xs: &[f64]| if xs.is_empty() { 0.0 } else { xs.iter().sum::<f64>() / xs.len() as f64 };
        let costs: Vec<f64> = committed.iter().map(|o| o.cost).collect();
        let avg: Vec<f64> = committed.iter().filter_map(|o| o.average_cost()).collect();
        let mut ms: Vec<f64> = outcomes.iter().map(|o| o.planning_ms).collect();
        ms.sort_by(f64::total_cmp);
        let q = |p: f64| if ms.is_empty() { 0.0 } else { ms[((ms.len() - 1) as f64 * p).round() as usize] };
        Summary {
            requests: outcomes.len(),
            committed: committed.len(),
            success_rate: if outcomes.is_empty() { 0.0 } else { committed.len() as f64 / outcomes.len() as f64 },
            mean_cost: mean(&costs),
            average_cost_per_cpu_hour: mean(&avg),
            planning_ms_p50: q(0.5),
            planning_ms_p99: q(0.99),
            messages: outcomes.iter().map(|o| o.messages).sum(),
            holds_aborted: outcomes.iter().map(|o| o.holds_aborted).sum(),
        }
    }
}
