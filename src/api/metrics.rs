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
//!   and were answered 500 (there should be none).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::store::PlanStatus;

/// Upper bounds of the latency buckets, seconds.
const BUCKETS: [f64; 10] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0];
const STATUSES: [PlanStatus; 5] =
    [PlanStatus::Committed, PlanStatus::Rejected, PlanStatus::Planned, PlanStatus::Pending, PlanStatus::Cancelled];

/// The counters (lock-free; shared by every worker).
#[derive(Debug, Default)]
pub struct Metrics {
    plans: [AtomicU64; STATUSES.len()],
    /// Recovered transactions: committed, compensated.
    recovered: [AtomicU64; 2],
    /// Cumulative counts per bucket of [`BUCKETS`], then +Inf.
    latency: [AtomicU64; BUCKETS.len() + 1],
    latency_sum_us: AtomicU64,
    aborts: AtomicU64,
    panics: AtomicU64,
}

fn index(s: PlanStatus) -> usize {
    STATUSES.iter().position(|x| *x == s).expect("every status is listed")
}

impl Metrics {
    /// One plan finished with `status` after `seconds` of planning, aborting `aborts` holds.
    pub fn plan_done(&self, status: PlanStatus, seconds: f64, aborts: u64) {
        self.plans[index(status)].fetch_add(1, Relaxed);
        for (i, b) in BUCKETS.iter().enumerate() {
            if seconds <= *b {
                self.latency[i].fetch_add(1, Relaxed);
            }
        }
        self.latency[BUCKETS.len()].fetch_add(1, Relaxed);
        self.latency_sum_us.fetch_add((seconds * 1e6) as u64, Relaxed);
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
        for st in STATUSES {
            let _ = writeln!(s, "coreserve_plans_total{{status=\"{st}\"}} {}", self.plans[index(st)].load(Relaxed));
        }
        s.push_str("# HELP coreserve_recovered_total In-doubt transactions settled by recovery.\n");
        s.push_str("# TYPE coreserve_recovered_total counter\n");
        for (i, result) in ["committed", "compensated"].iter().enumerate() {
            let _ = writeln!(s, "coreserve_recovered_total{{result=\"{result}\"}} {}", self.recovered[i].load(Relaxed));
        }
        s.push_str("# HELP coreserve_planning_seconds Time to plan and book one request.\n");
        s.push_str("# TYPE coreserve_planning_seconds histogram\n");
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(s, "coreserve_planning_seconds_bucket{{le=\"{b}\"}} {}", self.latency[i].load(Relaxed));
        }
        let count = self.latency[BUCKETS.len()].load(Relaxed);
        let _ = writeln!(s, "coreserve_planning_seconds_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(s, "coreserve_planning_seconds_sum {}", self.latency_sum_us.load(Relaxed) as f64 / 1e6);
        let _ = writeln!(s, "coreserve_planning_seconds_count {count}");
        s.push_str("# HELP coreserve_holds_outstanding Live holds over every participant.\n");
        s.push_str("# TYPE coreserve_holds_outstanding gauge\n");
        let _ = writeln!(s, "coreserve_holds_outstanding {holds_outstanding}");
        s.push_str("# HELP coreserve_2pc_aborts_total Holds aborted (by planners and through the API).\n");
        s.push_str("# TYPE coreserve_2pc_aborts_total counter\n");
        let _ = writeln!(s, "coreserve_2pc_aborts_total {}", self.aborts.load(Relaxed));
        s.push_str("# HELP coreserve_handler_panics_total Requests whose handler panicked (answered 500).\n");
        s.push_str("# TYPE coreserve_handler_panics_total counter\n");
        let _ = writeln!(s, "coreserve_handler_panics_total {}", self.panics.load(Relaxed));
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
}
