//! `heterogeneous.md`: the heterogeneity summary and the paired comparison as Markdown tables.

use std::fmt::Write as _;

use super::summary::{HetSummary, Paired};
use crate::scenario::Scenario;

/// `mean ± ci` with three decimals.
fn pm(mean: f64, ci: f64) -> String {
    format!("{mean:.3} ± {ci:.3}")
}

/// The summary as Markdown: one table per (topology, kind, algorithm), a row per load and arm,
/// then the paired comparison of the single queue with per-type queues.
pub fn markdown(s: &Scenario, summary: &[HetSummary], paired: &[Paired]) -> String {
    let mut md = format!(
        "# Heterogeneous sites (seed 003): scenario `{}`\n\n\
         Written by `coreserve-sim` (experiment `heterogeneity`). Mean ± 95 % CI half-width over \
         {} seeds of {} requests; validity and wait over the runs that committed something. \
         `filter`: requirements enforced, one queue over all sites; `os-only`: requirements \
         removed (OS and CPUs only), placements judged against them; `per-type`: one queue per \
         site type (architecture, GPU or not). Validity: committed requests (jobs) on sites that \
         can run them; valid success: such requests over all requests; wait: earliest job start \
         minus arrival, seconds (at least `w_interval_s` = {} s). Runnable: requests every job of \
         which some site can run; split: per-type requests no single type can run, pinned job by \
         job.\n",
        s.name, s.seeds, s.requests, s.w_interval_s
    );
    for g in summary.chunk_by(|a, b| (&a.topology, &a.kind, a.algorithm) == (&b.topology, &b.kind, b.algorithm)) {
        let f = &g[0];
        let _ = write!(
            md,
            "\n## {} / {} / {}\n\n| load | arm | success | validity (requests) | validity (jobs) | valid success | wait to start (s) | runnable | split |\n\
             |---|---|---|---|---|---|---|---|---|\n",
            f.topology, f.kind, f.algorithm
        );
        for r in g {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {:.0} ± {:.0} | {:.3} | {:.3} |",
                r.load,
                r.arm,
                pm(r.success_rate_mean, r.success_rate_ci95),
                pm(r.placement_validity_mean, r.placement_validity_ci95),
                pm(r.job_validity_mean, r.job_validity_ci95),
                pm(r.valid_success_mean, r.valid_success_ci95),
                r.wait_s_mean,
                r.wait_s_ci95,
                r.runnable_share,
                r.split_share
            );
        }
    }
    let _ = write!(
        md,
        "\n## One queue against per-type queues, paired by seed\n\n\
         Same grid, workload and planner streams in both arms; success: filter minus per-type; \
         wait: per-type minus filter (seconds, seeds where both arms committed something).\n\n\
         | topology | kind | algorithm | load | success gain of one queue | seeds one queue ahead | extra wait per-type (s) | seeds per-type waits longer |\n\
         |---|---|---|---|---|---|---|---|\n"
    );
    for p in paired {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {:+.3} ± {:.3} | {} / {} | {:+.0} ± {:.0} | {} / {} |",
            p.topology,
            p.kind,
            p.algorithm,
            p.load,
            p.success.0,
            p.success.1,
            p.ahead,
            p.seeds,
            p.wait.0,
            p.wait.1,
            p.longer,
            p.waits
        );
    }
    md
}
