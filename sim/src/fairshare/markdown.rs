//! `fairshare.md`: the fair-share summary as Markdown tables.

use std::fmt::Write as _;

use coreserve::fairshare::DAY_S;

use super::projects::{FLOOD, STEADY};
use super::summary::{DaySummary, FairSummary};
use crate::algorithm::Algorithm;
use crate::scenario::fairshare::Arm;
use crate::scenario::Scenario;

/// `mean ± ci` with `d` decimals.
fn pm(mean: f64, ci: f64, d: usize) -> String {
    format!("{mean:.d$} ± {ci:.d$}")
}

/// The summary as Markdown: per (topology, kind, algorithm, flood load) the table of arms,
/// projects and phases, then steady's days.
pub fn markdown(s: &Scenario, grid_cpus: &[u64], summary: &[FairSummary], days: &[DaySummary]) -> String {
    let p = &s.fairshare;
    let cpus = grid_cpus.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    let mut md = format!(
        "# Planned-Use fair share (seed 002): scenario `{}`\n\n\
         Written by `coreserve-sim` (experiment `fairshare`). {} virtual days; `steady` books at \
         offered load {} all along, `flood` is idle until day {} and then floods at the offered \
         load of each table. Both projects have the same allocation: {} x the grid's CPUs ({}) x \
         {} days x {} CPU-hours per period of {} days from the run's start. `planned-use`: \
         priority by `p_i` (paper's `D` per day, `dt` one day) in admission windows of {} s, and \
         the allocation limit; `planned-use-no-limit`: the same with `overdraft` (the priority \
         alone); `planned-use-daily`: the same pace allocated per day (the limit caps each \
         day); `decay-exponential` / `decay-linear`: the paper's baselines, priority `-u` from \
         exponentially decayed usage (the same `D`) / usage decayed linearly over {} days, no \
         limit (a newly active project comes first); `fcfs`: first come, first served. Mean ± \
         95 % CI half-width over {} seeds. Idle days: days of the phase on which none of the \
         project's jobs runs (the paper's measure of a starved user). \
         Phase: when the requests \
         arrived. Start delay: plan start minus `submitted_at`, hours, over the runs that \
         committed something. Used: the share of the grid's CPU-time the project's committed \
         jobs take in the phase. Rejections: shares of the phase's requests refused by the \
         allocation limit / by `w_interval`. `u_i`, `p_i`: at the end of the run, from the \
         committed plans (for `fcfs` what they would be).\n",
        s.name,
        p.days,
        p.steady_load,
        p.flood_from_day,
        p.steady_load,
        cpus,
        p.period_s() as f64 / DAY_S as f64,
        1.0 + p.margin,
        p.period_s() as f64 / DAY_S as f64,
        p.window_s,
        p.linear_window_days,
        s.seeds
    );
    type Point<'a> = (&'a str, &'a str, Algorithm, f64);
    let point = |r: &FairSummary| -> (String, String, Algorithm, u64) {
        (r.topology.clone(), r.kind.clone(), r.algorithm, r.flood_load.to_bits())
    };
    for g in summary.chunk_by(|a, b| point(a) == point(b)) {
        let f = &g[0];
        let here: Point<'_> = (&f.topology, &f.kind, f.algorithm, f.flood_load);
        let _ = write!(
            md,
            "\n## {} / {} / {} / flood load {}\n\n\
             | arm | project | phase | requests | offered load | success | start delay (h) | used | idle days | rejected: allocation / w_interval | `u_i` end | `p_i` end |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|\n",
            here.0, here.1, here.2, here.3
        );
        for r in g {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.0} | {:.2} | {} | {} | {:.3} | {} | {:.3} / {:.3} | {} | {} |",
                r.arm,
                r.project,
                r.phase,
                r.requests_mean,
                r.offered_load_mean,
                pm(r.success_rate_mean, r.success_rate_ci95, 3),
                pm(r.start_delay_s_mean / 3600.0, r.start_delay_s_ci95 / 3600.0, 2),
                r.used_share_mean,
                pm(r.idle_days_mean, r.idle_days_ci95, 1),
                r.rejected_allocation_share,
                r.rejected_time_limit_share,
                pm(r.usage_index_end_mean, r.usage_index_end_ci95, 2),
                pm(r.priority_end_mean, r.priority_end_ci95, 2),
            );
        }
        // Steady's days: success and used share per arm, and the flood's u_i.
        let of = |arm: Arm, project: &str| -> Vec<&DaySummary> {
            days.iter()
                .filter(|d| {
                    (d.topology.as_str(), d.kind.as_str(), d.algorithm, d.flood_load) == here
                        && d.arm == arm
                        && d.project == project
                })
                .collect()
        };
        let arms: Vec<Arm> = p.arms.iter().copied().filter(|a| !of(*a, STEADY).is_empty()).collect();
        let names = |what: &str| arms.iter().map(|a| format!("{what} {a}")).collect::<Vec<_>>().join(" | ");
        let _ = write!(
            md,
            "\nBy day (arrivals of the day; `u_i` at its end), means over seeds:\n\n\
             | day | {} | {} | {} |\n|---|{}\n",
            names("steady success"),
            names("steady used"),
            names("flood `u_i`"),
            "---|".repeat(3 * arms.len())
        );
        let n_days = of(arms[0], STEADY).len();
        for day in 0..n_days {
            let mut cells = Vec::new();
            for a in &arms {
                cells.push(format!("{:.3}", of(*a, STEADY)[day].success_rate));
            }
            for a in &arms {
                cells.push(format!("{:.3}", of(*a, STEADY)[day].used_share_mean));
            }
            for a in &arms {
                cells.push(format!("{:.2}", of(*a, FLOOD)[day].usage_index_mean));
            }
            let _ = writeln!(md, "| {day} | {} |", cells.join(" | "));
        }
    }
    md
}
