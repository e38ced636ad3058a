//! `coreserve plan` and `coreserve compare`: replay plan requests through competing planners
//! ([`crate::replay`]), check every outcome ([`crate::check`]), write the outcomes and print a
//! summary line (one variant) or a comparison table (every variant of the paper).

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::args::{CompareArgs, PlanArgs, PlannerArgs};
use crate::check::check_outcomes;
use crate::grid;
use crate::model::{Grid, Outcome, PlanRequest, ReservationMethod, SelectionPolicy};
use crate::replay::{replay, ReplayOptions, Summary};
use crate::workload;

/// `coreserve plan`: one variant (`--method`, `--policy`), its outcomes written to `--out`.
///
/// # Errors
/// The files cannot be read or written, or the checker finds a violation.
pub async fn plan(a: PlanArgs) -> Result<()> {
    let g = grid::load_grid(&a.grid)?;
    let reqs = workload::read_jsonl(&a.requests)?;
    let variant = format!("{}-{}", a.method, a.policy);
    let opts = ReplayOptions {
        progress: crate::replay::progress_bar(reqs.len() as u64, &variant),
        ..a.planner.options(a.policy, a.method)
    };
    let (outcomes, summary, violations) = run_variant(&g, &reqs, &opts).await;
    opts.progress.finish_and_clear();
    write_outcomes(&outcomes, &a.out)?;
    print_summary(&variant, &summary, violations, a.planner.timings);
    outln!("outcomes: {}", a.out.display());
    ensure_clean(violations)
}

/// `coreserve compare`: every variant on one request file, and their table.
///
/// # Errors
/// The files cannot be read or written, or the checker finds a violation.
pub async fn compare(a: CompareArgs) -> Result<()> {
    let g = grid::load_grid(&a.grid)?;
    let reqs = workload::read_jsonl(&a.requests)?;
    let rows = compare_variants(&g, &reqs, &a.planner, a.out_dir.as_deref(), "compare").await?;
    print_table(&[("requests".to_string(), rows)], a.planner.timings);
    Ok(())
}

/// Replays one variant and checks its outcomes (no overbooking, deadlines, paths, costs).
/// One variant's replay: its outcomes, their summary and the outcome checker's violation count.
type VariantRun = (Vec<Outcome>, Summary, usize);

async fn run_variant(g: &Grid, reqs: &[PlanRequest], opts: &ReplayOptions) -> VariantRun {
    let outcomes = replay(g, reqs.to_vec(), opts).await;
    let violations = check_outcomes(g, reqs, &outcomes, opts.w_interval_s);
    for v in violations.iter().take(10) {
        eprintln!("VIOLATION: {v}");
    }
    let summary = Summary::of(&outcomes);
    (outcomes, summary, violations.len())
}

fn ensure_clean(violations: usize) -> Result<()> {
    if violations > 0 {
        bail!("the outcome checker found {violations} violations");
    }
    Ok(())
}

fn write_outcomes(outcomes: &[Outcome], path: &Path) -> Result<()> {
    let mut w =
        std::io::BufWriter::new(std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?);
    for o in outcomes {
        serde_json::to_writer(&mut w, o)?;
        w.write_all(b"\n")?;
    }
    w.flush()?;
    Ok(())
}

fn print_summary(variant: &str, s: &Summary, violations: usize, timings: bool) {
    outln!(
        "{variant}: requests {}, committed {}, success rate {:.3}, mean cost {:.2}, average cost {:.3} per CPU-hour, \
         messages {}, holds aborted {}, checker violations {violations}",
        s.requests,
        s.committed,
        s.success_rate,
        s.mean_cost,
        s.average_cost_per_cpu_hour,
        s.messages,
        s.holds_aborted
    );
    if timings {
        outln!(
            "{variant}: planning time p50 {:.3} ms, p99 {:.3} ms (wall clock)",
            s.planning_ms_p50,
            s.planning_ms_p99
        );
    }
}

/// One row of a comparison: variant name, summary, violations.
pub(super) type Row = (String, Summary, usize);

/// Replays `reqs` with every variant of the paper (BBR / BIR x the four policies) and checks
/// each batch. Deterministic replays run side by side, one per core (each on a thread of its
/// own, so the order and the figures do not change); racing ones one after the other, so that
/// only their own planners compete. One progress bar, labelled `label`, counts every plan.
pub(super) async fn compare_variants(
    g: &Grid,
    reqs: &[PlanRequest],
    args: &PlannerArgs,
    out_dir: Option<&Path>,
    label: &str,
) -> Result<Vec<Row>> {
    use futures::StreamExt;
    let variants: Vec<(ReservationMethod, SelectionPolicy)> =
        ReservationMethod::PAPER.iter().flat_map(|&m| SelectionPolicy::ALL.iter().map(move |&p| (m, p))).collect();
    let bar = crate::replay::progress_bar((variants.len() * reqs.len()) as u64, label);
    let parallel = if args.racing { 1 } else { std::thread::available_parallelism().map_or(1, |n| n.get()) };
    let results: Vec<(String, VariantRun)> = futures::stream::iter(variants)
        .map(|(method, policy)| {
            let opts = ReplayOptions { progress: bar.clone(), ..args.options(policy, method) };
            async move { (format!("{method}-{policy}"), run_variant(g, reqs, &opts).await) }
        })
        .buffered(parallel)
        .collect()
        .await;
    bar.finish_and_clear();
    let mut rows = Vec::new();
    for (name, (outcomes, summary, violations)) in results {
        if let Some(dir) = out_dir {
            write_outcomes(&outcomes, &dir.join(format!("outcomes-{name}.jsonl")))?;
        }
        ensure_clean(violations)?;
        rows.push((name, summary, violations));
    }
    Ok(rows)
}

/// The comparison table: deterministic columns (see [`ReplayOptions::racing`]), then, with
/// `timings`, the wall-clock planning times.
pub(super) fn print_table(groups: &[(String, Vec<Row>)], timings: bool) {
    out!(
        "\n{:<13} {:<10} {:>8} {:>9} {:>8} {:>12} {:>10} {:>8} {:>10}",
        "workload",
        "variant",
        "requests",
        "committed",
        "success",
        "avg cost/h",
        "messages",
        "aborted",
        "violations"
    );
    if timings {
        out!(" {:>9} {:>9}", "p50 ms", "p99 ms");
    }
    outln!();
    for (kind, rows) in groups {
        for (name, s, v) in rows {
            out!(
                "{:<13} {:<10} {:>8} {:>9} {:>8.3} {:>12.3} {:>10} {:>8} {:>10}",
                kind,
                name,
                s.requests,
                s.committed,
                s.success_rate,
                s.average_cost_per_cpu_hour,
                s.messages,
                s.holds_aborted,
                v
            );
            if timings {
                out!(" {:>9.3} {:>9.3}", s.planning_ms_p50, s.planning_ms_p99);
            }
            outln!();
        }
    }
}
