//! Prometheus metrics, hand-written text exposition (format 0.0.4).
//!
//! - `coreserve_plans_total{status}`: plans by outcome (`committed`, `rejected`, `planned` =
//!   dry runs, `pending` = answered 503 because phase 2 could not be confirmed) and
//!   cancellations (`cancelled`);
//! - `coreserve_recovered_total{result}`: in-doubt transactions the recovery loop settled
//!   (`committed`, `compensated`);
//! - `coreserve_plan_modifications_total{result}`: `PATCH /v1/plans/{id}` that reached a
//!   planner, by result (`committed`, `refused`: a part did not fit or the decision was
//!   refused; nothing changed);
//! - `coreserve_planning_seconds`: planning latency histogram (every POST /v1/plans that
//!   reached a planner);
//! - `coreserve_plan_rounds` and `coreserve_plan_messages`: histograms of the sequential
//!   message rounds (the plan's critical path in round trips: [`crate::model::Outcome::rounds`])
//!   and of the participant messages each of those plans took;
//! - `coreserve_holds_outstanding`: live holds over every participant (read at scrape time);
//! - `coreserve_2pc_aborts_total`: holds aborted, by the planners (backtracks, shifts, failed
//!   batches) plus successful `POST /v1/holds/{id}/abort` calls;
//! - `coreserve_handler_panics_total`: requests whose handler (or a task it awaited) panicked
//!   and were answered 500 (there should be none);
//! - `coreserve_journal_unmatched_entries_total`: participants' journal entries (commit, abort,
//!   release, extension) for a hold that was never journaled, ignored and logged
//!   ([`crate::protocol::Transition::NoRow`]; there should be none);
//! - `coreserve_participant_call_seconds{participant, message}`: how long the planners' calls
//!   to participants take (`participant` = `lis` or `nis`; `message` = `query`, `prepare`,
//!   `commit`, `abort`, `release`, `extend`), measured by [`crate::protocol::Timed`]; in a
//!   planner process these are HTTP round trips, all-in-one in-process calls;
//! - `coreserve_http_request_duration_seconds{method, route, status}`: every HTTP request,
//!   from its arrival to its response's head (an event stream's body streams on after), by
//!   method, route *pattern* (`/v1/plans/{id}`, never the raw path: one series per route, not
//!   per plan; `unmatched` for a request no route took) and status code;
//! - `coreserve_retention_pruned_total{kind}`: rows deleted by retention (`--retention-days`),
//!   by kind (`plans`, `idempotency_keys`, `journal`, `decisions`, `events`, `deliveries`,
//!   `charges`; see [`crate::store::Pruned`]);
//! - `coreserve_build_info{version, revision}`: 1; `revision` is the git commit the binary was
//!   built from when the build set `CORESERVE_GIT_REVISION` (e.g.
//!   `CORESERVE_GIT_REVISION=$(git rev-parse --short HEAD) cargo build --release`), else absent;
//! - with the PostgreSQL store, `coreserve_db_pool_connections` (open connections),
//!   `coreserve_db_pool_idle_connections` and `coreserve_db_pool_max_connections` (read at
//!   scrape time; [`render_pool`]);
//! - for the sites this process keeps (all of them all-in-one, its own in a `lis` process):
//!   `coreserve_site_cpus{site}` (capacity), `coreserve_site_cpus_booked{site}` (CPUs held or
//!   reserved now) and `coreserve_site_cpu_utilisation{site}` (booked / capacity, 0..1), read
//!   from the site's calendar at scrape time ([`render_sites`]);
//! - for every background task of the process ([`crate::api::supervisor`]), by `task` name:
//!   `coreserve_background_period_seconds` (how often it runs), `coreserve_background_runs_total`
//!   (rounds ended), `coreserve_background_errors_total` (rounds that failed or panicked),
//!   `coreserve_background_last_run_timestamp_seconds` (Unix time the last round ended; 0
//!   before the first) and `coreserve_background_running` (1 until the task has stopped).

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use strum::VariantArray;

use crate::model::PlanStatus;
use crate::protocol::{CallObserver, Message, ParticipantKind};
use crate::store::PoolState;

/// Upper bounds of the planning latency buckets, seconds.
const BUCKETS: [f64; 10] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0];
/// Upper bounds of the buckets of a plan's rounds and messages (counts, not seconds).
const COUNT_BUCKETS: [f64; 12] = [2.0, 4.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 50.0, 100.0, 1000.0, 10000.0];
/// Upper bounds of the participant call buckets, seconds (in-process calls take microseconds).
const CALL_BUCKETS: [f64; 14] =
    [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 1.0];
/// Upper bounds of the HTTP request buckets, seconds.
const HTTP_BUCKETS: [f64; 12] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];
/// At most this many HTTP series (method, route, status); requests beyond go to one
/// `route="other"` series per method and status (the route patterns are a fixed, small set, so
/// this is a guard, never reached in practice).
const MAX_HTTP_SERIES: usize = 1000;
const KINDS: [(ParticipantKind, &str); 2] = [(ParticipantKind::Compute, "lis"), (ParticipantKind::Network, "nis")];

/// A Prometheus histogram over fixed bucket bounds (seconds, or counts): counts per bucket
/// (made cumulative when rendered) and the sum (kept in millionths).
#[derive(Debug)]
struct Histogram {
    bounds: &'static [f64],
    /// Observations per bucket: those above the previous bound and up to this one, then
    /// those above every bound (+Inf). One increment per observation: the participants'
    /// observer sees about 200 calls per plan, from every worker thread.
    counts: Vec<AtomicU64>,
    sum_us: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram { bounds, counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(), sum_us: AtomicU64::new(0) }
    }

    fn observe(&self, seconds: f64) {
        // The first bound at or above the value (NaN, like a value above every bound: +Inf).
        let i = self.bounds.iter().position(|b| seconds <= *b).unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Relaxed);
        self.sum_us.fetch_add((seconds * 1e6) as u64, Relaxed);
    }

    /// The histogram's lines for metric `name` with `labels` (`a="x",b="y"` or empty).
    fn render(&self, s: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut count = 0;
        for (i, b) in self.bounds.iter().enumerate() {
            count += self.counts[i].load(Relaxed);
            let _ = writeln!(s, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {count}");
        }
        count += self.counts[self.bounds.len()].load(Relaxed);
        let _ = writeln!(s, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}");
        let braces = |l: &str| if l.is_empty() { String::new() } else { format!("{{{l}}}") };
        let _ = writeln!(s, "{name}_sum{} {}", braces(labels), self.sum_us.load(Relaxed) as f64 / 1e6);
        let _ = writeln!(s, "{name}_count{} {count}", braces(labels));
    }
}
/// Every status a plan answer can carry (a replayed answer carries the plan's status now:
/// active, completed, broken too).
const STATUSES: &[PlanStatus] = <PlanStatus as strum::VariantArray>::VARIANTS;

/// The counters (lock-free; shared by every worker).
#[derive(Debug)]
pub struct Metrics {
    plans: [AtomicU64; STATUSES.len()],
    /// Recovered transactions: committed, compensated.
    recovered: [AtomicU64; 2],
    /// Plan modifications: committed, refused.
    modifications: [AtomicU64; 2],
    /// Planning latency.
    latency: Histogram,
    /// Sequential message rounds per plan.
    rounds: Histogram,
    /// Participant messages per plan.
    messages: Histogram,
    /// Participant calls, by [`KINDS`] then [`Message::VARIANTS`].
    calls: Vec<Histogram>,
    aborts: AtomicU64,
    panics: AtomicU64,
    /// Slurm sites' synchronisations, by site.
    local: std::sync::Mutex<std::collections::BTreeMap<String, LocalTally>>,
    /// Rows deleted by retention, by [`PRUNED_KINDS`].
    pruned: [AtomicU64; PRUNED_KINDS.len()],
    /// HTTP requests by (method, route pattern, status).
    http: std::sync::RwLock<std::collections::BTreeMap<HttpSeries, Histogram>>,
    /// The background tasks, in the order they were started.
    tasks: Mutex<Vec<Arc<TaskTally>>>,
}

/// One background task's record ([`crate::api::supervisor`]): its name and period, its rounds,
/// failed rounds and when the last one ended, and whether it still runs.
#[derive(Debug)]
pub struct TaskTally {
    name: String,
    period: Duration,
    /// Unix time the last round ended, milliseconds (0: none yet).
    last_run_ms: AtomicU64,
    runs: AtomicU64,
    errors: AtomicU64,
    running: AtomicBool,
}

impl TaskTally {
    /// The task's name (the `task` label).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How often it runs.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// One round ended now, failed unless `ok`.
    pub fn ran(&self, ok: bool) {
        let now_ms = chrono::Utc::now().timestamp_millis().max(0) as u64;
        self.last_run_ms.store(now_ms, Relaxed);
        self.runs.fetch_add(1, Relaxed);
        if !ok {
            self.errors.fetch_add(1, Relaxed);
        }
    }

    /// Rounds ended.
    pub fn runs(&self) -> u64 {
        self.runs.load(Relaxed)
    }

    /// Rounds that failed (an error or a panic).
    pub fn errors(&self) -> u64 {
        self.errors.load(Relaxed)
    }

    /// Whether the task still runs (`false` once its loop has ended).
    pub fn running(&self) -> bool {
        self.running.load(Relaxed)
    }

    /// Marks the task's loop ended.
    pub fn stopped(&self) {
        self.running.store(false, Relaxed);
    }
}

/// The labels of one HTTP request series: method, route pattern, status code.
type HttpSeries = (String, String, u16);

/// What retention deletes ([`crate::store::Pruned`]'s fields): the `kind` label of
/// `coreserve_retention_pruned_total`.
const PRUNED_KINDS: [&str; 7] =
    ["plans", "idempotency_keys", "journal", "decisions", "events", "deliveries", "charges"];

/// One Slurm site's synchronisations (see [`crate::lis::Lis::sync`]).
#[derive(Debug, Default, Clone, Copy)]
struct LocalTally {
    ok: u64,
    failed: u64,
    strays_deleted: u64,
    /// Strays Slurm kept at the last sync (jobs in them).
    strays_in_use: u64,
    recreated: u64,
    reshaped: u64,
    foreign: u64,
    broken: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            plans: Default::default(),
            recovered: Default::default(),
            modifications: Default::default(),
            latency: Histogram::new(&BUCKETS),
            rounds: Histogram::new(&COUNT_BUCKETS),
            messages: Histogram::new(&COUNT_BUCKETS),
            calls: (0..KINDS.len() * Message::VARIANTS.len()).map(|_| Histogram::new(&CALL_BUCKETS)).collect(),
            aborts: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            local: Default::default(),
            pruned: Default::default(),
            http: Default::default(),
            tasks: Default::default(),
        }
    }
}

/// The index of a (kind, message) pair in [`Metrics::calls`].
fn call_index(kind: ParticipantKind, message: Message) -> usize {
    let k = KINDS.iter().position(|(x, _)| *x == kind).expect("every kind is listed");
    let m = Message::VARIANTS.iter().position(|x| *x == message).expect("every message is listed");
    k * Message::VARIANTS.len() + m
}

impl CallObserver for Metrics {
    fn observe(&self, kind: ParticipantKind, message: Message, seconds: f64) {
        self.calls[call_index(kind, message)].observe(seconds);
    }
}

fn index(s: PlanStatus) -> usize {
    STATUSES.iter().position(|x| *x == s).expect("every status is listed")
}

impl Metrics {
    /// One synchronisation of Slurm site `site`: its report (`None`: it failed) and the
    /// reservations broken there now.
    pub fn slurm_synced(&self, site: &str, report: Option<&crate::lis::SyncReport>, broken: usize) {
        let mut all = self.local.lock().expect("metrics lock");
        let t = all.entry(site.to_owned()).or_default();
        match report {
            Some(r) => {
                t.ok += 1;
                t.strays_deleted += r.strays_deleted as u64;
                t.strays_in_use = r.strays_in_use as u64;
                t.recreated += r.recreated as u64;
                t.reshaped += r.reshaped as u64;
                t.foreign = r.foreign as u64;
            }
            None => t.failed += 1,
        }
        t.broken = broken as u64;
    }

    /// One plan finished with `status` after `seconds` of planning: its outcome `o` tells the
    /// holds it aborted, its messages and their rounds.
    pub fn plan_done(&self, status: PlanStatus, seconds: f64, o: &crate::model::Outcome) {
        self.plans[index(status)].fetch_add(1, Relaxed);
        self.latency.observe(seconds);
        self.rounds.observe(o.rounds as f64);
        self.messages.observe(o.messages as f64);
        self.aborts.fetch_add(o.holds_aborted, Relaxed);
    }

    /// One plan was cancelled.
    pub fn cancelled(&self) {
        self.plans[index(PlanStatus::Cancelled)].fetch_add(1, Relaxed);
    }

    /// One plan modification was committed (`true`) or refused.
    pub fn modified(&self, committed: bool) {
        self.modifications[usize::from(!committed)].fetch_add(1, Relaxed);
    }

    /// The recovery loop settled `committed` + `compensated` in-doubt transactions.
    pub fn recovered(&self, committed: usize, compensated: usize) {
        self.recovered[0].fetch_add(committed as u64, Relaxed);
        self.recovered[1].fetch_add(compensated as u64, Relaxed);
    }

    /// One hold was aborted through the API.
    pub fn aborted(&self) {
        self.aborts.fetch_add(1, Relaxed);
    }

    /// A handler panicked (answered 500).
    pub fn panicked(&self) {
        self.panics.fetch_add(1, Relaxed);
    }

    /// One round of retention deleted `p`.
    pub fn pruned(&self, p: &crate::store::Pruned) {
        let counts = [p.plans, p.idempotency_keys, p.journal, p.decisions, p.events, p.deliveries, p.charges];
        for (total, n) in self.pruned.iter().zip(counts) {
            total.fetch_add(n, Relaxed);
        }
    }

    /// One HTTP request answered `status` after `seconds`: `method` as received, `route` the
    /// pattern of the route that took it (`None`: no route did).
    pub fn http_request(&self, method: &str, route: Option<&str>, status: u16, seconds: f64) {
        let route = route.unwrap_or("unmatched");
        {
            let series = self.http.read().expect("metrics lock");
            if let Some(h) = series.iter().find(|((m, r, c), _)| m == method && r == route && *c == status) {
                h.1.observe(seconds);
                return;
            }
        }
        let mut series = self.http.write().expect("metrics lock");
        let route = if series.len() >= MAX_HTTP_SERIES { "other" } else { route };
        series
            .entry((method.to_owned(), route.to_owned(), status))
            .or_insert_with(|| Histogram::new(&HTTP_BUCKETS))
            .observe(seconds);
    }

    /// Registers background task `name`, run every `period`, as running: its record.
    pub fn background_task(&self, name: &str, period: Duration) -> Arc<TaskTally> {
        let tally = Arc::new(TaskTally {
            name: name.to_owned(),
            period,
            last_run_ms: AtomicU64::new(0),
            runs: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            running: AtomicBool::new(true),
        });
        self.tasks.lock().expect("metrics lock").push(tally.clone());
        tally
    }

    /// Every background task registered, in the order they were started.
    pub fn background_tasks(&self) -> Vec<Arc<TaskTally>> {
        self.tasks.lock().expect("metrics lock").clone()
    }

    /// The exposition text.
    pub fn render(&self, holds_outstanding: usize) -> String {
        let mut s = String::new();
        s.push_str("# HELP coreserve_build_info The running binary: its version and, when known, git revision.\n");
        s.push_str("# TYPE coreserve_build_info gauge\n");
        match option_env!("CORESERVE_GIT_REVISION").filter(|r| !r.trim().is_empty()) {
            Some(rev) => {
                let _ = writeln!(
                    s,
                    "coreserve_build_info{{version=\"{}\",revision=\"{}\"}} 1",
                    env!("CARGO_PKG_VERSION"),
                    escape(rev.trim())
                );
            }
            None => {
                let _ = writeln!(s, "coreserve_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"));
            }
        }
        s.push_str(
            "# HELP coreserve_http_request_duration_seconds HTTP requests by method, route pattern and status, to the response head.\n",
        );
        s.push_str("# TYPE coreserve_http_request_duration_seconds histogram\n");
        for ((method, route, status), h) in self.http.read().expect("metrics lock").iter() {
            let labels = format!("method=\"{}\",route=\"{}\",status=\"{status}\"", escape(method), escape(route));
            h.render(&mut s, "coreserve_http_request_duration_seconds", &labels);
        }
        s.push_str("# HELP coreserve_plans_total Plans by final status (planned = dry runs).\n");
        s.push_str("# TYPE coreserve_plans_total counter\n");
        for &st in STATUSES {
            let _ = writeln!(s, "coreserve_plans_total{{status=\"{st}\"}} {}", self.plans[index(st)].load(Relaxed));
        }
        s.push_str("# HELP coreserve_recovered_total In-doubt transactions settled by recovery.\n");
        s.push_str("# TYPE coreserve_recovered_total counter\n");
        for (i, result) in ["committed", "compensated"].iter().enumerate() {
            let _ = writeln!(s, "coreserve_recovered_total{{result=\"{result}\"}} {}", self.recovered[i].load(Relaxed));
        }
        s.push_str(
            "# HELP coreserve_plan_modifications_total Plan modifications by result (refused: nothing changed).\n",
        );
        s.push_str("# TYPE coreserve_plan_modifications_total counter\n");
        for (i, result) in ["committed", "refused"].iter().enumerate() {
            let n = self.modifications[i].load(Relaxed);
            let _ = writeln!(s, "coreserve_plan_modifications_total{{result=\"{result}\"}} {n}");
        }
        s.push_str("# HELP coreserve_planning_seconds Time to plan and book one request.\n");
        s.push_str("# TYPE coreserve_planning_seconds histogram\n");
        self.latency.render(&mut s, "coreserve_planning_seconds", "");
        s.push_str("# HELP coreserve_plan_rounds Sequential participant message rounds per plan (its critical path in round trips).\n");
        s.push_str("# TYPE coreserve_plan_rounds histogram\n");
        self.rounds.render(&mut s, "coreserve_plan_rounds", "");
        s.push_str("# HELP coreserve_plan_messages Participant messages per plan.\n");
        s.push_str("# TYPE coreserve_plan_messages histogram\n");
        self.messages.render(&mut s, "coreserve_plan_messages", "");
        s.push_str(
            "# HELP coreserve_participant_call_seconds The planners' calls to participants, by kind and message.\n",
        );
        s.push_str("# TYPE coreserve_participant_call_seconds histogram\n");
        for (kind, label) in KINDS {
            for &message in Message::VARIANTS {
                let labels = format!("participant=\"{label}\",message=\"{}\"", <&str>::from(message));
                self.calls[call_index(kind, message)].render(&mut s, "coreserve_participant_call_seconds", &labels);
            }
        }
        s.push_str("# HELP coreserve_retention_pruned_total Rows retention deleted, by kind (--retention-days).\n");
        s.push_str("# TYPE coreserve_retention_pruned_total counter\n");
        for (kind, n) in PRUNED_KINDS.iter().zip(&self.pruned) {
            let _ = writeln!(s, "coreserve_retention_pruned_total{{kind=\"{kind}\"}} {}", n.load(Relaxed));
        }
        s.push_str("# HELP coreserve_holds_outstanding Live holds over every participant.\n");
        s.push_str("# TYPE coreserve_holds_outstanding gauge\n");
        let _ = writeln!(s, "coreserve_holds_outstanding {holds_outstanding}");
        s.push_str("# HELP coreserve_2pc_aborts_total Holds aborted (by planners and through the API).\n");
        s.push_str("# TYPE coreserve_2pc_aborts_total counter\n");
        let _ = writeln!(s, "coreserve_2pc_aborts_total {}", self.aborts.load(Relaxed));
        s.push_str("# HELP coreserve_handler_panics_total Requests whose handler panicked (answered 500).\n");
        s.push_str("# TYPE coreserve_handler_panics_total counter\n");
        let _ = writeln!(s, "coreserve_handler_panics_total {}", self.panics.load(Relaxed));
        s.push_str("# HELP coreserve_journal_unmatched_entries_total Journal entries for a hold never journaled (ignored, logged).\n");
        s.push_str("# TYPE coreserve_journal_unmatched_entries_total counter\n");
        let _ = writeln!(s, "coreserve_journal_unmatched_entries_total {}", crate::protocol::unmatched_entries());
        self.render_tasks(&mut s);
        let local = self.local.lock().expect("metrics lock").clone();
        if !local.is_empty() {
            s.push_str("# HELP coreserve_slurm_syncs_total Synchronisations of Slurm sites with Slurm.\n");
            s.push_str("# TYPE coreserve_slurm_syncs_total counter\n");
            for (site, t) in &local {
                let _ = writeln!(s, "coreserve_slurm_syncs_total{{site=\"{site}\",result=\"ok\"}} {}", t.ok);
                let _ = writeln!(s, "coreserve_slurm_syncs_total{{site=\"{site}\",result=\"failed\"}} {}", t.failed);
            }
            s.push_str("# HELP coreserve_slurm_reconciled_total What reconciliation did: strays deleted from Slurm, missing reservations made again, reservations a crash left in another shape given back theirs.\n");
            s.push_str("# TYPE coreserve_slurm_reconciled_total counter\n");
            for (site, t) in &local {
                let _ = writeln!(
                    s,
                    "coreserve_slurm_reconciled_total{{site=\"{site}\",action=\"stray_deleted\"}} {}",
                    t.strays_deleted
                );
                let _ = writeln!(
                    s,
                    "coreserve_slurm_reconciled_total{{site=\"{site}\",action=\"recreated\"}} {}",
                    t.recreated
                );
                let _ = writeln!(
                    s,
                    "coreserve_slurm_reconciled_total{{site=\"{site}\",action=\"reshaped\"}} {}",
                    t.reshaped
                );
            }
            s.push_str("# HELP coreserve_slurm_strays_in_use coreserve reservations no live hold owns that Slurm would not delete at the last sync (jobs were submitted into them); deleted once they are free.\n");
            s.push_str("# TYPE coreserve_slurm_strays_in_use gauge\n");
            for (site, t) in &local {
                let _ = writeln!(s, "coreserve_slurm_strays_in_use{{site=\"{site}\"}} {}", t.strays_in_use);
            }
            s.push_str("# HELP coreserve_slurm_foreign_reservations Slurm reservations not made by coreserve, blocked in the site's calendar.\n");
            s.push_str("# TYPE coreserve_slurm_foreign_reservations gauge\n");
            for (site, t) in &local {
                let _ = writeln!(s, "coreserve_slurm_foreign_reservations{{site=\"{site}\"}} {}", t.foreign);
            }
            s.push_str("# HELP coreserve_slurm_broken_reservations Committed reservations Slurm no longer honours.\n");
            s.push_str("# TYPE coreserve_slurm_broken_reservations gauge\n");
            for (site, t) in &local {
                let _ = writeln!(s, "coreserve_slurm_broken_reservations{{site=\"{site}\"}} {}", t.broken);
            }
        }
        s
    }
}

impl Metrics {
    /// The `coreserve_background_*` families: one series per task.
    fn render_tasks(&self, s: &mut String) {
        let tasks = self.background_tasks();
        type Value = fn(&TaskTally) -> String;
        let families: [(&str, &str, &str, Value); 5] = [
            ("coreserve_background_period_seconds", "gauge", "How often the background task runs.", |t| {
                t.period.as_secs_f64().to_string()
            }),
            ("coreserve_background_runs_total", "counter", "Rounds of the background task that ended.", |t| {
                t.runs().to_string()
            }),
            (
                "coreserve_background_errors_total",
                "counter",
                "Rounds of the background task that failed (an error or a panic).",
                |t| t.errors().to_string(),
            ),
            (
                "coreserve_background_last_run_timestamp_seconds",
                "gauge",
                "Unix time the background task's last round ended (0: none yet).",
                |t| (t.last_run_ms.load(Relaxed) as f64 / 1e3).to_string(),
            ),
            (
                "coreserve_background_running",
                "gauge",
                "1 while the background task runs, 0 once it has stopped (shutdown).",
                |t| u8::from(t.running()).to_string(),
            ),
        ];
        for (name, kind, help, value) in families {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for t in &tasks {
                let _ = writeln!(s, "{name}{{task=\"{}\"}} {}", escape(&t.name), value(t));
            }
        }
    }
}

/// A label value escaped for the text format (backslash, double quote, newline).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The pool gauges (`coreserve_db_pool_*`) of `pool`; nothing without one (memory store).
pub fn render_pool(s: &mut String, pool: Option<PoolState>) {
    let Some(p) = pool else { return };
    for (name, help, v) in [
        ("coreserve_db_pool_connections", "Database connections open (idle or in use).", p.size),
        ("coreserve_db_pool_idle_connections", "Database connections open and idle.", p.idle),
        ("coreserve_db_pool_max_connections", "The database connection pool's limit.", p.max),
    ] {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
    }
}

/// One site's CPUs now: its id, capacity and the CPUs held or reserved at this instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteLoad {
    /// The site's id.
    pub site: String,
    /// Its CPUs.
    pub cpus: u64,
    /// CPUs held or reserved now.
    pub booked: u64,
}

/// The per-site gauges (`coreserve_site_cpus*`) of `sites`; nothing without sites (a planner,
/// the NIS or the GIS keeps no site calendar).
pub fn render_sites(s: &mut String, sites: &[SiteLoad]) {
    if sites.is_empty() {
        return;
    }
    s.push_str("# HELP coreserve_site_cpus The site's CPUs.\n# TYPE coreserve_site_cpus gauge\n");
    for l in sites {
        let _ = writeln!(s, "coreserve_site_cpus{{site=\"{}\"}} {}", escape(&l.site), l.cpus);
    }
    s.push_str("# HELP coreserve_site_cpus_booked CPUs held or reserved at the site now.\n");
    s.push_str("# TYPE coreserve_site_cpus_booked gauge\n");
    for l in sites {
        let _ = writeln!(s, "coreserve_site_cpus_booked{{site=\"{}\"}} {}", escape(&l.site), l.booked);
    }
    s.push_str("# HELP coreserve_site_cpu_utilisation Booked CPUs over the site's CPUs now (0 to 1).\n");
    s.push_str("# TYPE coreserve_site_cpu_utilisation gauge\n");
    for l in sites {
        let u = if l.cpus == 0 { 0.0 } else { l.booked as f64 / l.cpus as f64 };
        let _ = writeln!(s, "coreserve_site_cpu_utilisation{{site=\"{}\"}} {u}", escape(&l.site));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative() {
        let m = Metrics::default();
        let mut o = crate::model::Outcome::rejected("r", "", "p");
        (o.holds_aborted, o.rounds, o.messages) = (3, 5, 12);
        m.plan_done(PlanStatus::Committed, 0.002, &o);
        (o.holds_aborted, o.rounds, o.messages) = (0, 40, 90);
        m.plan_done(PlanStatus::Rejected, 2.0, &o);
        let t = m.render(5);
        assert!(t.contains("coreserve_plans_total{status=\"committed\"} 1"));
        assert!(t.contains("coreserve_planning_seconds_bucket{le=\"0.001\"} 0"));
        assert!(t.contains("coreserve_planning_seconds_bucket{le=\"0.0025\"} 1"));
        assert!(t.contains("coreserve_planning_seconds_bucket{le=\"1\"} 1"));
        assert!(t.contains("coreserve_planning_seconds_bucket{le=\"+Inf\"} 2"));
        assert!(t.contains("coreserve_plan_rounds_bucket{le=\"4\"} 0"));
        assert!(t.contains("coreserve_plan_rounds_bucket{le=\"6\"} 1"));
        assert!(t.contains("coreserve_plan_rounds_bucket{le=\"50\"} 2"));
        assert!(t.contains("coreserve_plan_rounds_sum 45"));
        assert!(t.contains("coreserve_plan_messages_bucket{le=\"15\"} 1"));
        assert!(t.contains("coreserve_plan_messages_count 2"));
        assert!(t.contains("coreserve_holds_outstanding 5"));
        assert!(t.contains("coreserve_2pc_aborts_total 3"));
        m.panicked();
        assert!(m.render(0).contains("coreserve_handler_panics_total 1"));
    }

    #[test]
    fn participant_calls_have_a_histogram_per_kind_and_message() {
        let m = Metrics::default();
        m.observe(ParticipantKind::Network, Message::Prepare, 0.003);
        m.observe(ParticipantKind::Compute, Message::Query, 0.00002);
        let t = m.render(0);
        let line = |l: &str, v: &str| format!("coreserve_participant_call_seconds_bucket{{{l},le=\"{v}\"}}");
        let nis_prepare = "participant=\"nis\",message=\"prepare\"";
        assert!(t.contains(&format!("{} 0", line(nis_prepare, "0.0025"))), "{t}");
        assert!(t.contains(&format!("{} 1", line(nis_prepare, "0.005"))));
        assert!(t.contains(&format!("{} 1", line("participant=\"lis\",message=\"query\"", "0.000025"))));
        assert!(t.contains("coreserve_participant_call_seconds_count{participant=\"lis\",message=\"commit\"} 0"));
        assert!(t.contains("coreserve_participant_call_seconds_sum{participant=\"nis\",message=\"prepare\"} 0.003"));
    }

    #[test]
    fn http_requests_are_counted_by_route_pattern_and_status() {
        let m = Metrics::default();
        m.http_request("GET", Some("/v1/plans/{id}"), 200, 0.003);
        m.http_request("GET", Some("/v1/plans/{id}"), 200, 0.02);
        m.http_request("GET", Some("/v1/plans/{id}"), 404, 0.001);
        m.http_request("POST", None, 404, 0.0001);
        let t = m.render(0);
        let series = "method=\"GET\",route=\"/v1/plans/{id}\",status=\"200\"";
        assert!(t.contains(&format!("coreserve_http_request_duration_seconds_count{{{series}}} 2")), "{t}");
        assert!(t.contains(&format!("coreserve_http_request_duration_seconds_bucket{{{series},le=\"0.005\"}} 1")));
        assert!(t.contains(
            "coreserve_http_request_duration_seconds_count{method=\"GET\",route=\"/v1/plans/{id}\",status=\"404\"} 1"
        ));
        assert!(t.contains("route=\"unmatched\",status=\"404\"} 1"));
        assert!(t.contains(&format!("coreserve_build_info{{version=\"{}\"", env!("CARGO_PKG_VERSION"))));
    }

    #[test]
    fn pool_and_site_gauges() {
        let mut s = String::new();
        render_pool(&mut s, None);
        render_sites(&mut s, &[]);
        assert!(s.is_empty());
        render_pool(&mut s, Some(PoolState { size: 3, idle: 2, max: 8 }));
        render_sites(&mut s, &[SiteLoad { site: "s\"1".into(), cpus: 64, booked: 16 }]);
        assert!(s.contains("coreserve_db_pool_connections 3\n"));
        assert!(s.contains("coreserve_db_pool_idle_connections 2\n"));
        assert!(s.contains("coreserve_db_pool_max_connections 8\n"));
        assert!(s.contains("coreserve_site_cpus_booked{site=\"s\\\"1\"} 16\n"), "{s}");
        assert!(s.contains("coreserve_site_cpu_utilisation{site=\"s\\\"1\"} 0.25\n"));
    }
}
