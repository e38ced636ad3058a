//! `coreserve-sim --rank DIR --rank DIR ... --out OUT`: the selection policies ranked by
//! success rate in finished runs of the paper's experiment, one folder per trace (or network),
//! with what explains a ranking: how many sites a plan spreads over and how many of its
//! transfers stay on one site (sim/RESULTS.md, "Which trace").
//!
//! Reads each folder's `summary.csv`; means are over the offered loads of the folder. Written to
//! `OUT/rankings.md`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use coreserve::model::SelectionPolicy;

use crate::algorithm::Algorithm;
use crate::report::{read_summary_csv, SummaryRow};

/// One policy's means over the loads of one (topology, kind, method).
#[derive(Debug, Clone, Copy, PartialEq)]
struct PolicyMeans {
    success: f64,
    sites_per_plan: f64,
    local_transfer_share: f64,
    network_load: f64,
}

fn means(rows: &[&SummaryRow]) -> PolicyMeans {
    let n = rows.len().max(1) as f64;
    let mean = |f: fn(&SummaryRow) -> f64| rows.iter().map(|r| f(r)).sum::<f64>() / n;
    PolicyMeans {
        success: mean(|r| r.success_rate_mean),
        sites_per_plan: mean(|r| r.sites_per_plan_mean),
        local_transfer_share: mean(|r| r.local_transfer_share_mean),
        network_load: mean(|r| r.network_load_mean),
    }
}

fn name(dir: &Path) -> String {
    dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// The rankings of `dirs` as Markdown: one table row per folder x topology x kind x method
/// that has all four policies.
///
/// # Errors
/// No folder, a `summary.csv` that cannot be read, or a folder with no method run with all
/// four policies.
pub fn rank(dirs: &[PathBuf]) -> Result<String> {
    if dirs.is_empty() {
        bail!("--rank needs at least one folder");
    }
    let mut md = String::from(
        "# Which policy books most, by trace\n\nWritten by `coreserve-sim --rank`. Policies in \
         order of mean success rate over the folder's offered loads (`>` where the next is lower \
         by more than 0.01, `~` otherwise); then, per policy in the order time / cost / load / \
         random, the mean number of sites a committed plan runs on and the share of its \
         transfers kept on one site (they use no link), and the workload's mean network offered \
         load. Whether a difference is significant is in each folder's `findings.md`.\n\n\
         | folder | topology | kind | method | ranking by success | sites per plan | transfers on one site | network load |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for dir in dirs {
        let rows = read_summary_csv(&dir.join("summary.csv"))?;
        let mut cells: BTreeMap<(&str, &str, String), BTreeMap<String, Vec<&SummaryRow>>> = BTreeMap::new();
        for r in &rows {
            cells
                .entry((&r.topology, &r.kind, r.algorithm.method.to_string()))
                .or_default()
                .entry(r.algorithm.policy.to_string())
                .or_default()
                .push(r);
        }
        let mut lines = 0;
        for ((topology, kind, method), by_policy) in &cells {
            let Some(m) = Algorithm::POLICIES
                .iter()
                .map(|p| by_policy.get(&p.to_string()).map(|rows| (*p, means(rows))))
                .collect::<Option<Vec<(SelectionPolicy, PolicyMeans)>>>()
            else {
                continue;
            };
            let mut order = m.clone();
            order.sort_by(|a, b| b.1.success.total_cmp(&a.1.success));
            let mut ranking = String::new();
            for (i, (p, x)) in order.iter().enumerate() {
                let _ = write!(ranking, "{p} {:.3}", x.success);
                if let Some((_, next)) = order.get(i + 1) {
                    ranking.push_str(if x.success - next.success > 0.01 { " > " } else { " ~ " });
                }
            }
            let per_policy = |f: fn(&PolicyMeans) -> f64, decimals: usize| {
                m.iter().map(|(_, x)| format!("{:.decimals$}", f(x))).collect::<Vec<_>>().join(" / ")
            };
            let _ = writeln!(
                md,
                "| {} | {topology} | {kind} | {method} | {ranking} | {} | {} | {:.2} |",
                name(dir),
                per_policy(|x| x.sites_per_plan, 2),
                per_policy(|x| x.local_transfer_share, 2),
                m[0].1.network_load
            );
            lines += 1;
        }
        if lines == 0 {
            bail!("{} has no method run with all four policies", dir.display());
        }
    }
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::write_summary_csv;

    #[test]
    fn policies_are_ranked_by_mean_success_with_their_spread_over_sites() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("small-jobs");
        let mut rows = Vec::new();
        for (p, success, sites, local) in
            [("time", 0.50, 1.8, 0.3), ("cost", 0.62, 1.1, 0.9), ("load", 0.495, 1.9, 0.2), ("random", 0.40, 2.0, 0.1)]
        {
            for load in [0.2, 1.0] {
                let mut r = SummaryRow::point("geant", "workflow", &format!("bir-{p}"), load, success, 1.0);
                (r.sites_per_plan_mean, r.local_transfer_share_mean) = (sites, local);
                rows.push(r);
            }
        }
        // BBR with one policy only: not ranked.
        rows.push(SummaryRow::point("geant", "workflow", "bbr-time", 0.2, 0.3, 1.0));
        write_summary_csv(&rows, &folder.join("summary.csv")).unwrap();
        let md = rank(&[folder]).unwrap();
        assert!(
            md.contains(
                "| small-jobs | geant | workflow | bir | cost 0.620 > time 0.500 ~ load 0.495 > random 0.400 \
                 | 1.80 / 1.10 / 1.90 / 2.00 | 0.30 / 0.90 / 0.20 / 0.10 | 0.30 |"
            ),
            "{md}"
        );
        assert!(!md.contains("| bbr |"), "{md}");
        assert!(rank(&[dir.path().join("missing")]).is_err());
    }
}
