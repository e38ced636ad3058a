//! Prometheus metrics, hand-written text exposition (format 0.0.4).
//!
//! - `coreserve_plans_total{status}`: plans by outcome (`committed`, `rejected`, `planned` =
//!   dry runs, `pending` = answered 503 because phase 2 could not be confirmed) and
//!   cancellations (`cancelled`);
//! - `coreserve_recovered_total{result}`: in-doubt transactions the recovery loop settled
//!   (`committed`, `compensated`);
//! - `coreserve_planning_seconds`: planning latency histogram (every POST /v1/plans that
//!   reached a planner);
//! - `coreserve_holds_outstanding`: live holds over every participant (read at scrape time);
//! - `coreserve_2pc_aborts_total`: holds aborted, by the planners (backtracks, shifts, failed
//!   batches) plus successful `POST /v1/holds/{id}/abort` calls;
//! - `coreserve_handler_panics_total`: requests whose handler (or a task it awaited) panicked
//!   and were answered 500 (there should be none);
//! - `coreserve_participant_call_seconds{participant, message}`: how long the planners' calls
//!   to participants take (`participant` = `lis` or `nis`; `message` = `query`, `prepare`,
//!   `commit`, `abort`, `release`, `extend`), measured by [`crate::protocol::Timed`]; in a
//!   planner process these are HTTP round trips, all-in-one in-process calls.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use strum::VariantArray;

use crate::protocol::{CallObserver, Message, ParticipantKind};
use crate::store::PlanStatus;

/// Upper bounds of the planning latency buckets, seconds.
const BUCKETS: [f64; 10] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0];
/// Upper bounds of the participant call buckets, seconds (in-process calls take microseconds).
const CALL_BUCKETS: [f64; 14] =
    [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 1.0];
const KINDS: [(ParticipantKind, &str); 2] = [(ParticipantKind::Compute, "lis"), (ParticipantKind::Network, "nis")];

/// A Prometheus histogram over fixed bucket bounds (seconds): counts per bucket (made
/// cumulative when rendered) and the sum.
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
    /// Planning latency.
    latency: Histogram,
    /// Participant calls, by [`KINDS`] then [`Message::VARIANTS`].
    calls: Vec<Histogram>,
    aborts: AtomicU64,
    panics: AtomicU64,
    /// Slurm sites' synchronisations, by site.
    local: std::sync::Mutex<std::collections::BTreeMap<String, LocalTally>>,
}

/// One Slurm site's synchronisations (see [`crate::lis::Lis::sync`]).
#[derive(Debug, Default, Clone, Copy)]
struct LocalTally {
    ok: u64,
    failed: u64,
    strays_deleted: u64,
    recreated: u64,
    foreign: u64,
    broken: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            plans: Default::default(),
            recovered: Default::default(),
            latency: Histogram::new(&BUCKETS),
            calls: (0..KINDS.len() * Message::VARIANTS.len()).map(|_| Histogram::new(&CALL_BUCKETS)).collect(),
            aborts: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            local: Default::default(),
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
                t.recreated += r.recreated as u64;
                t.foreign = r.foreign as u64;
            }
            None => t.failed += 1,
        }
        t.broken = broken as u64;
    }

    /// One plan finished with `status` after `seconds` of planning, aborting `aborts` holds.
    pub fn plan_done(&self, status: PlanStatus, seconds: f64, aborts: u64) {
        self.plans[index(status)].fetch_add(1, Relaxed);
        self.latency.observe(seconds);
        self.aborts.fetch_add(aborts, Relaxed);
    }

    /// One plan was cancelled.
    pub fn cancelled(&self) {
        self.plans[index(PlanStatus::Cancelled)].fetch_add(1, Relaxed);
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

    /// The exposition text.
    pub fn render(&self, holds_outstanding: usize) -> String {
        let mut s = String::new();
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
        s.push_str("# HELP coreserve_planning_seconds Time to plan and book one request.\n");
        s.push_str("# TYPE coreserve_planning_seconds histogram\n");
        self.latency.render(&mut s, "coreserve_planning_seconds", "");
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
        s.push_str("# HELP coreserve_holds_outstanding Live holds over every participant.\n");
        s.push_str("# TYPE coreserve_holds_outstanding gauge\n");
        let _ = writeln!(s, "coreserve_holds_outstanding {holds_outstanding}");
        s.push_str("# HELP coreserve_2pc_aborts_total Holds aborted (by planners and through the API).\n");
        s.push_str("# TYPE coreserve_2pc_aborts_total counter\n");
        let _ = writeln!(s, "coreserve_2pc_aborts_total {}", self.aborts.load(Relaxed));
        s.push_str("# HELP coreserve_handler_panics_total Requests whose handler panicked (answered 500).\n");
        s.push_str("# TYPE coreserve_handler_panics_total counter\n");
        let _ = writeln!(s, "coreserve_handler_panics_total {}", self.panics.load(Relaxed));
        let local = self.local.lock().expect("metrics lock").clone();
        if !local.is_empty() {
            s.push_str("# HELP coreserve_slurm_syncs_total Synchronisations of Slurm sites with Slurm.\n");
            s.push_str("# TYPE coreserve_slurm_syncs_total counter\n");
            for (site, t) in &local {
                let _ = writeln!(s, "coreserve_slurm_syncs_total{{site=\"{site}\",result=\"ok\"}} {}", t.ok);
                let _ = writeln!(s, "coreserve_slurm_syncs_total{{site=\"{site}\",result=\"failed\"}} {}", t.failed);
            }
            s.push_str("# HELP coreserve_slurm_reconciled_total What reconciliation did: strays deleted from Slurm, missing reservations made again.\n");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative() {
        let m = Metrics::default();
        m.plan_done(PlanStatus::Committed, 0.002, 3);
        m.plan_done(PlanStatus::Rejected, 2.0, 0);
        let t = m.render(5);
        assert!(t.contains("coreserve_plans_total{status=\"committed\"} 1"));
        assert!(t.contains("coreserve_planning_seconds_bucket{le=\"0.001\"} 0"));
        assert!(t.contains("coreserve_planning_seconds_bucket{le=\"0.0025\"} 1"));
        assert!(t.contains("coreserve_planning_seconds_bucket{le=\"1\"} 1"));
        assert!(t.contains("coreserve_planning_seconds_bucket{le=\"+Inf\"} 2"));
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
}
