//! `coreserve-sim --compare BASE --compare VARIANT ... --out DIR`: what one changed setting
//! does to the curves (sim/RESULTS.md, "What moves the curves").
//!
//! Each folder is a finished run of a scenario (its `summary.csv`); the first is the baseline.
//! For every variant, and every (topology, kind, algorithm) it shares with the baseline, the
//! success rate and the shares of requests rejected by the planning time limit, by a refused
//! BBR batch (and of those, by self-conflict) and for want of any plan, averaged over the
//! offered loads both runs have: baseline -> variant. Written to `DIR/sensitivity.md`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::algorithm::Algorithm;
use crate::report::{read_summary_csv, SummaryRow};

/// The metrics compared, averaged over the matched loads.
#[derive(Default, Clone, Copy)]
struct Means {
    success: f64,
    time_limit: f64,
    batch: f64,
    self_conflict: f64,
    no_plan: f64,
}

impl Means {
    fn of(rows: &[&SummaryRow]) -> Means {
        let n = rows.len().max(1) as f64;
        let mean = |f: fn(&SummaryRow) -> f64| rows.iter().map(|r| f(r)).sum::<f64>() / n;
        Means {
            success: mean(|r| r.success_rate_mean),
            time_limit: mean(|r| r.time_limit_share),
            batch: mean(|r| r.batch_share),
            self_conflict: mean(|r| r.self_conflict_share),
            no_plan: mean(|r| r.no_plan_share),
        }
    }
}

type Cell = (String, String, Algorithm);

/// Rows of a summary by (topology, kind, algorithm), then by load (its bits).
fn by_cell(rows: &[SummaryRow]) -> BTreeMap<Cell, BTreeMap<u64, &SummaryRow>> {
    let mut m: BTreeMap<Cell, BTreeMap<u64, &SummaryRow>> = BTreeMap::new();
    for r in rows {
        m.entry((r.topology.clone(), r.kind.clone(), r.algorithm)).or_default().insert(r.load.to_bits(), r);
    }
    m
}

fn name(dir: &Path) -> String {
    dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// The comparison of `dirs[1..]` with `dirs[0]` as Markdown.
///
/// # Errors
/// Fewer than two folders, a `summary.csv` that cannot be read, or a variant that shares no
/// (topology, kind, algorithm, load) with the baseline.
pub fn compare(dirs: &[PathBuf]) -> Result<String> {
    let [base_dir, variants @ ..] = dirs else { bail!("--compare needs a baseline folder and at least one variant") };
    if variants.is_empty() {
        bail!("--compare needs a baseline folder and at least one variant");
    }
    let base_rows = read_summary_csv(&base_dir.join("summary.csv"))?;
    let base = by_cell(&base_rows);
    let mut md = format!(
        "# What moves the curves\n\nEach table compares one variant with the baseline `{}` \
         (written by `coreserve-sim --compare`). Means over the offered loads both runs have; \
         shares are of all requests. `time limit`: rejected because planning took longer than \
         w_interval; `batch (self)`: a refused BBR batch (of which the plan's own parts explain \
         the refusal); `no plan`: nothing fits before the deadline.\n",
        name(base_dir)
    );
    for dir in variants {
        let rows = read_summary_csv(&dir.join("summary.csv"))?;
        let variant = by_cell(&rows);
        let mut lines = Vec::new();
        for (cell, loads) in &variant {
            let Some(base_loads) = base.get(cell) else { continue };
            let (b, v): (Vec<&SummaryRow>, Vec<&SummaryRow>) =
                loads.iter().filter_map(|(k, r)| base_loads.get(k).map(|b| (*b, *r))).unzip();
            if b.is_empty() {
                continue;
            }
            let (b, v) = (Means::of(&b), Means::of(&v));
            lines.push(format!(
                "| {} | {} | {} | {:.3} -> {:.3} | {:+.3} | {:.2} -> {:.2} | {:.2} ({:.2}) -> {:.2} ({:.2}) | {:.2} -> {:.2} |",
                cell.0,
                cell.1,
                cell.2,
                b.success,
                v.success,
                v.success - b.success,
                b.time_limit,
                v.time_limit,
                b.batch,
                b.self_conflict,
                v.batch,
                v.self_conflict,
                b.no_plan,
                v.no_plan
            ));
        }
        if lines.is_empty() {
            bail!("{} shares no (topology, kind, algorithm, load) with {}", name(dir), name(base_dir));
        }
        let _ = write!(
            md,
            "\n## {}\n\n| topology | kind | algorithm | success | change | time limit | batch (self) | no plan |\n\
             |---|---|---|---|---|---|---|---|\n{}\n",
            name(dir),
            lines.join("\n")
        );
    }
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::write_summary_csv;

    #[test]
    fn a_variant_is_compared_on_the_loads_it_shares_with_the_baseline() {
        let dir = tempfile::tempdir().unwrap();
        let (base, variant) = (dir.path().join("base"), dir.path().join("fast"));
        let point = |load, success| SummaryRow::point("gridg-n", "workflow", "bir-time", load, success, 1.0);
        let mut slow = point(0.2, 0.5);
        slow.time_limit_share = 0.4;
        write_summary_csv(&[slow, point(0.6, 0.3), point(1.0, 0.1)], &base.join("summary.csv")).unwrap();
        // The variant has loads 0.6 and 1.0 only: the baseline's 0.2 is left out of its means.
        write_summary_csv(&[point(0.6, 0.5), point(1.0, 0.4)], &variant.join("summary.csv")).unwrap();
        let md = compare(&[base.clone(), variant]).unwrap();
        assert!(md.contains("\n## fast\n"), "{md}");
        assert!(
            md.contains("| gridg-n | workflow | bir-time | 0.200 -> 0.450 | +0.250 | 0.00 -> 0.00 |"),
            "means over 0.6 and 1.0 only: {md}"
        );
        assert!(compare(&[base]).is_err(), "a baseline alone compares nothing");
    }
}
