//! Simulation outputs: `runs.csv`, `summary.csv` and the figures.
//!
//! The pipeline is
//!
//! 1. the simulator produces one [`RunRow`] per run (topology x kind x algorithm x offered load
//!    x seed) and writes them with [`write_runs_csv`];
//! 2. [`summarise`] groups the runs over seeds into [`SummaryRow`]s (mean and the half-width of
//!    the 95% confidence interval, Student's t), written with [`write_summary_csv`];
//! 3. [`write_figures`] draws, for every (topology, kind), success rate and average cost against
//!    offered load (Ando & Aida, Figs. 7-12) as SVG and PNG.
//!
//! Every output is deterministic: rows are sorted by key (never by the order runs finished),
//! floats are printed with a fixed format (`{:.6}`), and the figures carry no timestamps, so the
//! same inputs give byte-identical files.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize, Serializer};
use statrs::distribution::{ContinuousCDF, StudentsT};

use coreserve::model::{Grid, Outcome, PlanRequest, PlanStatus};

use crate::algorithm::Algorithm;

mod figures;
pub use figures::{Drifting, XAxis};

/// One simulated run: one topology x kind x algorithm x offered load x seed.
///
/// Its serde form is a line of `runs.csv` ([`write_runs_csv`]): floats as [`fmt_f64`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRow {
    /// Topology name, e.g. `gridg-n`.
    pub topology: String,
    /// `workflow` or `coallocation`.
    pub kind: String,
    /// e.g. `bir-time`, `bbr-overlay-cost`.
    pub algorithm: Algorithm,
    /// Offered load of the run's workload.
    #[serde(serialize_with = "fixed")]
    pub load: f64,
    pub seed: u64,
    pub requests: u64,
    pub committed: u64,
    /// committed / requests.
    #[serde(serialize_with = "fixed")]
    pub success_rate: f64,
    /// Mean over committed plans of cost per CPU-hour (Ando & Aida's "average cost"); 0 when none.
    #[serde(serialize_with = "fixed")]
    pub mean_cost: f64,
    /// Participant messages (queries, prepares, commits, aborts, releases) of all plans.
    pub messages: u64,
    /// Holds aborted before commit.
    pub holds_aborted: u64,
    /// Mean virtual planning time per request, seconds.
    #[serde(serialize_with = "fixed")]
    pub planning_s_mean: f64,
    /// Network offered load of the run's requests: see [`network_load`].
    #[serde(serialize_with = "fixed")]
    pub network_load: f64,
    /// Rejections by reason (they add up to `requests - committed`), see [`Rejections`]: its
    /// fields are columns of `runs.csv` in its place (the csv writer writes a nested struct's
    /// fields in line).
    pub rejected: Rejections,
    /// Success rate of the first and of the last quarter of the counted requests (in arrival
    /// order): a run in steady state has them about equal.
    #[serde(serialize_with = "fixed")]
    pub success_first_quarter: f64,
    #[serde(serialize_with = "fixed")]
    pub success_last_quarter: f64,
    /// Mean number of distinct sites a committed plan's jobs run on (0 when none committed).
    #[serde(serialize_with = "fixed")]
    pub sites_per_plan: f64,
    /// Share of the committed plans' transfers kept on one site (or one node), so they use no
    /// link (0 when none committed a transfer).
    #[serde(serialize_with = "fixed")]
    pub local_transfer_share: f64,
    /// Sequential message rounds of all plans (messages in flight together count once; see
    /// `Outcome::rounds`): with the message times, what planning takes across a wide-area
    /// network (issue 53).
    pub rounds: u64,
}

/// A run's rejections by what ended them, read from the outcomes' reasons (the planner's
/// texts, docs/algorithm.md): the simulator's trace of *why* an algorithm loses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Rejections {
    /// "planning took longer than w_interval": the search ran out of time.
    pub rejected_time_limit: u64,
    /// "batch prepare failed" (BBR): the complete plan was refused by a participant.
    pub rejected_batch: u64,
    /// Of `rejected_batch`, those the plan's own parts explain (self-conflict).
    pub self_conflicts: u64,
    /// No plan fits before the deadline (including requests that cannot start in time).
    pub rejected_no_plan: u64,
    /// The search budget (tentative fixes or `st` shifts) ran out.
    pub rejected_budget: u64,
    /// Anything else (a refused commit, an unavailable participant).
    pub rejected_other: u64,
}

impl Rejections {
    /// Counts the rejections among `outcomes`.
    pub fn of(outcomes: &[Outcome]) -> Self {
        let mut r = Rejections::default();
        for o in outcomes.iter().filter(|o| o.status != PlanStatus::Committed) {
            let reason = o.reason.as_deref().unwrap_or("");
            let slot = if reason.starts_with("planning took longer than w_interval") {
                &mut r.rejected_time_limit
            } else if reason.starts_with("batch prepare failed") {
                if reason.contains("(self-conflict") {
                    r.self_conflicts += 1;
                }
                &mut r.rejected_batch
            } else if reason.starts_with("no feasible plan")
                || reason.starts_with("deadline cannot be met")
                || reason.starts_with("no site can run")
            {
                &mut r.rejected_no_plan
            } else if reason.starts_with("search budget") || reason.starts_with("gave up after") {
                &mut r.rejected_budget
            } else {
                &mut r.rejected_other
            };
            *slot += 1;
        }
        r
    }
}

/// The network offered load of `requests` on `grid`: the bandwidth-seconds the requests'
/// transfers ask for, counted on two site attachments each (the sender's and the receiver's),
/// per second of the arrival period, divided by the sites' attachment capacity (the sum over
/// sites of the capacities of the links at the site's node). The counterpart of the CPU
/// offered load (requested CPU-seconds per second ÷ the grid's CPUs), so that two traces or
/// two kinds can be compared on the network's axis too. The arrival period is `n` mean
/// inter-arrival times (`(last - first) * n / (n - 1)`); 0 for fewer than two requests.
pub fn network_load(grid: &Grid, requests: &[PlanRequest]) -> f64 {
    let (Some(first), Some(last)) = (requests.first(), requests.last()) else { return 0.0 };
    let n = requests.len() as f64;
    let period_s = (last.submitted_at() - first.submitted_at()) as f64 * n / (n - 1.0);
    let attachment_mbps: u64 = grid
        .sites()
        .iter()
        .map(|s| grid.links().iter().filter(|l| l.a == s.node || l.b == s.node).map(|l| l.capacity_mbps).sum::<u64>())
        .sum();
    if period_s.is_nan() || period_s <= 0.0 || attachment_mbps == 0 {
        return 0.0;
    }
    let demand: f64 = requests
        .iter()
        .flat_map(|r| r.transfers().iter().enumerate().map(move |(e, t)| (t.bandwidth_mbps, r.transfer_span(e))))
        .map(|(mbps, span)| 2.0 * mbps as f64 * span.duration_s as f64)
        .sum();
    demand / period_s / attachment_mbps as f64
}

/// Column names of `runs.csv`, in order: exactly the field names of [`RunRow`] (with
/// [`Rejections`]' fields in its place).
pub const RUNS_CSV_HEADER: [&str; 24] = [
    "topology",
    "kind",
    "algorithm",
    "load",
    "seed",
    "requests",
    "committed",
    "success_rate",
    "mean_cost",
    "messages",
    "holds_aborted",
    "planning_s_mean",
    "network_load",
    "rejected_time_limit",
    "rejected_batch",
    "self_conflicts",
    "rejected_no_plan",
    "rejected_budget",
    "rejected_other",
    "success_first_quarter",
    "success_last_quarter",
    "sites_per_plan",
    "local_transfer_share",
    "rounds",
];

/// Column names of `summary.csv`, in order: exactly the field names of [`SummaryRow`].
pub const SUMMARY_CSV_HEADER: [&str; 23] = [
    "topology",
    "kind",
    "algorithm",
    "load",
    "runs",
    "success_rate_mean",
    "success_rate_ci95",
    "mean_cost_mean",
    "mean_cost_ci95",
    "messages_mean",
    "holds_aborted_mean",
    "planning_s_mean",
    "network_load_mean",
    "time_limit_share",
    "batch_share",
    "self_conflict_share",
    "no_plan_share",
    "budget_share",
    "success_first_quarter_mean",
    "success_last_quarter_mean",
    "sites_per_plan_mean",
    "local_transfer_share_mean",
    "rounds_per_plan_mean",
];

/// One point of the figures: the runs of one topology x kind x algorithm x offered load,
/// grouped over seeds by [`summarise`].
///
/// `*_mean` is the arithmetic mean over the group's runs; `*_ci95` is the half-width of the
/// two-sided 95% confidence interval of that mean (Student's t with n-1 degrees of freedom, see
/// [`ci95_half_width`]), so the interval is `mean ± ci95`; it is 0 when the mean rests on a
/// single run (or none).
///
/// Its serde form is a line of `summary.csv` ([`write_summary_csv`]): floats as [`fmt_f64`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRow {
    /// Topology name, e.g. `gridg-n`.
    pub topology: String,
    /// `workflow` or `coallocation`.
    pub kind: String,
    /// e.g. `bir-time`, `bbr-overlay-cost`.
    pub algorithm: Algorithm,
    /// Offered load (the x axis of the figures).
    #[serde(serialize_with = "fixed")]
    pub load: f64,
    /// Number of runs (seeds) in the group.
    pub runs: u64,
    /// Mean over all runs of `success_rate` (a fraction in 0..=1).
    #[serde(serialize_with = "fixed")]
    pub success_rate_mean: f64,
    /// 95% CI half-width of `success_rate_mean`.
    #[serde(serialize_with = "fixed")]
    pub success_rate_ci95: f64,
    /// Mean of `mean_cost` (cost per CPU-hour) over the runs that committed at least one plan
    /// (`committed > 0`) only: a run that committed nothing has no average cost (its
    /// `mean_cost` is a placeholder 0), so counting it would drag the mean towards 0 exactly
    /// where load is highest. 0 when no run of the group committed anything.
    #[serde(serialize_with = "fixed")]
    pub mean_cost_mean: f64,
    /// 95% CI half-width of `mean_cost_mean`, over the same runs (n = runs with `committed > 0`).
    #[serde(serialize_with = "fixed")]
    pub mean_cost_ci95: f64,
    /// Mean over all runs of `messages` (participant messages per run).
    #[serde(serialize_with = "fixed")]
    pub messages_mean: f64,
    /// Mean over all runs of `holds_aborted` (holds aborted before commit, per run).
    #[serde(serialize_with = "fixed")]
    pub holds_aborted_mean: f64,
    /// Mean over all runs of `planning_s_mean` (virtual planning time per request, seconds).
    #[serde(serialize_with = "fixed")]
    pub planning_s_mean: f64,
    /// Mean network offered load of the runs' workloads ([`network_load`]): the figures' x
    /// axis with `--x-axis network`. The fields from here on default to 0 when a summary
    /// written before they existed is read again (`--replot`).
    #[serde(serialize_with = "fixed", default)]
    pub network_load_mean: f64,
    /// Shares of all the group's requests rejected for each reason of [`Rejections`]
    /// (`time_limit_share + batch_share + no_plan_share + budget_share <= 1 - success`).
    #[serde(serialize_with = "fixed", default)]
    pub time_limit_share: f64,
    #[serde(serialize_with = "fixed", default)]
    pub batch_share: f64,
    #[serde(serialize_with = "fixed", default)]
    pub self_conflict_share: f64,
    #[serde(serialize_with = "fixed", default)]
    pub no_plan_share: f64,
    #[serde(serialize_with = "fixed", default)]
    pub budget_share: f64,
    /// Means of the runs' `success_first_quarter` and `success_last_quarter` (drift).
    #[serde(serialize_with = "fixed", default)]
    pub success_first_quarter_mean: f64,
    #[serde(serialize_with = "fixed", default)]
    pub success_last_quarter_mean: f64,
    /// Means of the runs' `sites_per_plan` and `local_transfer_share`: how an algorithm uses
    /// the network (a plan on one site needs none).
    #[serde(serialize_with = "fixed", default)]
    pub sites_per_plan_mean: f64,
    #[serde(serialize_with = "fixed", default)]
    pub local_transfer_share_mean: f64,
    /// Mean over all runs of `rounds / requests`: sequential message rounds per plan.
    #[serde(serialize_with = "fixed", default)]
    pub rounds_per_plan_mean: f64,
}

#[cfg(test)]
impl SummaryRow {
    /// A point for tests: `runs` 2, no intervals, 100 messages, network load = `load / 2`,
    /// no rejection diagnostics.
    pub fn point(topology: &str, kind: &str, algorithm: &str, load: f64, success: f64, cost: f64) -> Self {
        SummaryRow {
            topology: topology.into(),
            kind: kind.into(),
            algorithm: algorithm.parse().unwrap(),
            load,
            runs: 2,
            success_rate_mean: success,
            success_rate_ci95: 0.0,
            mean_cost_mean: cost,
            mean_cost_ci95: 0.0,
            messages_mean: 100.0,
            holds_aborted_mean: 0.0,
            planning_s_mean: 1.0,
            network_load_mean: load / 2.0,
            time_limit_share: 0.0,
            batch_share: 0.0,
            self_conflict_share: 0.0,
            no_plan_share: 0.0,
            budget_share: 0.0,
            success_first_quarter_mean: success,
            success_last_quarter_mean: success,
            sites_per_plan_mean: 0.0,
            local_transfer_share_mean: 0.0,
            rounds_per_plan_mean: 0.0,
        }
    }
}

/// The two-sided 95% quantile of Student's t with `df` degrees of freedom (`t_{0.975, df}`),
/// from `statrs`'s inverse CDF (e.g. 12.7062 for df = 1, 2.2622 for df = 9, tending to 1.96).
///
/// `df = 0` (a single observation) has no interval: returns NaN; [`ci95_half_width`] handles
/// that case by returning 0.
pub fn t_quantile_975(df: u64) -> f64 {
    if df == 0 {
        return f64::NAN;
    }
    StudentsT::new(0.0, 1.0, df as f64).expect("df > 0 is a valid Student's t").inverse_cdf(0.975)
}

/// Mean and 95% confidence-interval half-width of a sample: `(mean, t_{0.975, n-1} * s / sqrt(n))`
/// where `s` is the sample standard deviation (n-1 denominator).
///
/// Returns `(0, 0)` for an empty sample and `(x, 0)` for a single observation. NaNs in the
/// sample propagate.
pub fn ci95_half_width(values: &[f64]) -> (f64, f64) {
    let n = values.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return (mean, 0.0);
    }
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1) as f64;
    let half = t_quantile_975((n - 1) as u64) * var.sqrt() / (n as f64).sqrt();
    (mean, half)
}

/// The grouping/sorting key of a load: `-0.0` counts as `0.0`; otherwise loads are compared
/// with [`f64::total_cmp`], so runs group together only if their loads are bit-identical (they
/// come from the same configured list of loads).
fn load_key(load: f64) -> f64 {
    if load == 0.0 {
        0.0
    } else {
        load
    }
}

/// The key every row of the simulator's tables starts with, and their order: topology and
/// kind byte-wise, then algorithm, then offered load numerically (loads are equal only if
/// bit-identical, `-0.0` counting as `0.0`: they come from one configured list). A scenario
/// that compares arms, projects or phases orders by those after it, then by seed.
#[derive(Debug, Clone, Copy)]
pub struct RowKey<'a> {
    pub topology: &'a str,
    pub kind: &'a str,
    pub algorithm: Algorithm,
    /// The offered load (fair share: the flood's).
    pub load: f64,
}

impl Ord for RowKey<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.topology, self.kind, self.algorithm)
            .cmp(&(other.topology, other.kind, other.algorithm))
            .then_with(|| load_key(self.load).total_cmp(&load_key(other.load)))
    }
}

impl PartialOrd for RowKey<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for RowKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for RowKey<'_> {}

/// A row of one of the simulator's tables ([`RunRow`], [`SummaryRow`], the heterogeneity,
/// staged and fair-share rows): its [`RowKey`].
pub trait Keyed {
    fn row_key(&self) -> RowKey<'_>;
}

/// [`Keyed`] for a row struct with `topology`, `kind`, `algorithm` and the load field named.
#[macro_export]
macro_rules! keyed {
    ($row:ty, $load:ident) => {
        impl $crate::report::Keyed for $row {
            fn row_key(&self) -> $crate::report::RowKey<'_> {
                $crate::report::RowKey {
                    topology: &self.topology,
                    kind: &self.kind,
                    algorithm: self.algorithm,
                    load: self.$load,
                }
            }
        }
    };
}

keyed!(RunRow, load);
keyed!(SummaryRow, load);

/// The order of runs: (topology, kind, algorithm, load, seed).
fn cmp_run(a: &RunRow, b: &RunRow) -> std::cmp::Ordering {
    a.row_key().cmp(&b.row_key()).then_with(|| a.seed.cmp(&b.seed))
}

/// Runs sorted by (topology, kind, algorithm, load, seed): strings byte-wise, loads
/// numerically. Stable, so duplicate keys keep their input order.
fn sorted_runs(rows: &[RunRow]) -> Vec<&RunRow> {
    let mut sorted: Vec<&RunRow> = rows.iter().collect();
    sorted.sort_by(|a, b| cmp_run(a, b));
    sorted
}

/// A float in the fixed CSV format `{:.6}`; a value that rounds to zero is printed `0.000000`
/// (never `-0.000000`). NaN and infinities print as `NaN`, `inf`, `-inf`.
pub fn fmt_f64(v: f64) -> String {
    let s = format!("{v:.6}");
    if s == "-0.000000" {
        "0.000000".to_string()
    } else {
        s
    }
}

/// [`fmt_f64`] as a serde `serialize_with`: the CSV form of the rows' floats.
pub(crate) fn fixed<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&fmt_f64(*v))
}

/// Creates `path` (and its missing parent directories) and writes a CSV file: the `header` line,
/// then one line per row (its serde form), `\n` line ends, fields quoted (RFC 4180, inner
/// quotes doubled) only if they contain a comma, a quote or a line break.
pub(crate) fn write_csv<'a, T: Serialize + 'a>(
    path: &Path,
    header: &[&str],
    rows: impl IntoIterator<Item = &'a T>,
) -> anyhow::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).with_context(|| format!("creating directory {}", parent.display()))?;
    }
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_path(path)
        .with_context(|| format!("creating {}", path.display()))?;
    w.write_record(header).with_context(|| format!("writing {}", path.display()))?;
    for row in rows {
        w.serialize(row).with_context(|| format!("writing {}", path.display()))?;
    }
    w.flush().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Writes `runs.csv`: a header line with the field names of [`RunRow`] ([`RUNS_CSV_HEADER`]),
/// then one line per run sorted by (topology, kind, algorithm, load, seed), so the file does not
/// depend on the order runs finished.
///
/// Floats (`load`, `success_rate`, `mean_cost`, `planning_s_mean`) are printed `{:.6}`
/// (see [`fmt_f64`]), integers in full; strings are quoted only if they contain a comma, quote
/// or line break. Lines end with `\n`. Same rows (in any order) give byte-identical files.
///
/// Creates missing parent directories and overwrites `path`. Errors: the directory or file
/// cannot be created or written.
pub fn write_runs_csv(rows: &[RunRow], path: &Path) -> anyhow::Result<()> {
    write_csv(path, &RUNS_CSV_HEADER, sorted_runs(rows))
}

/// Groups runs over seeds: one [`SummaryRow`] per (topology, kind, algorithm, load), sorted by
/// that key (strings byte-wise, loads numerically; loads group together only if equal).
///
/// Every run of a group counts once (`runs` = number of rows, whatever their seeds).
/// `success_rate`, `messages`, `holds_aborted` and `planning_s_mean` are averaged over all runs
/// of the group; `mean_cost` only over the runs with `committed > 0` (see
/// [`SummaryRow::mean_cost_mean`]). CI half-widths: [`ci95_half_width`]. Empty input gives an
/// empty result.
pub fn summarise(rows: &[RunRow]) -> Vec<SummaryRow> {
    let sorted = sorted_runs(rows);
    let mut out = Vec::new();
    for group in sorted.chunk_by(|a, b| a.row_key() == b.row_key()) {
        let first = group[0];
        let mean_of =
            |f: &dyn Fn(&RunRow) -> f64| -> f64 { group.iter().map(|r| f(r)).sum::<f64>() / group.len() as f64 };
        let requests: u64 = group.iter().map(|r| r.requests).sum();
        let share = |f: &dyn Fn(&RunRow) -> u64| -> f64 {
            group.iter().map(|r| f(r)).sum::<u64>() as f64 / requests.max(1) as f64
        };
        let success: Vec<f64> = group.iter().map(|r| r.success_rate).collect();
        let cost: Vec<f64> = group.iter().filter(|r| r.committed > 0).map(|r| r.mean_cost).collect();
        let (success_rate_mean, success_rate_ci95) = ci95_half_width(&success);
        let (mean_cost_mean, mean_cost_ci95) = ci95_half_width(&cost);
        out.push(SummaryRow {
            topology: first.topology.clone(),
            kind: first.kind.clone(),
            algorithm: first.algorithm,
            load: load_key(first.load),
            runs: group.len() as u64,
            success_rate_mean,
            success_rate_ci95,
            mean_cost_mean,
            mean_cost_ci95,
            messages_mean: mean_of(&|r| r.messages as f64),
            holds_aborted_mean: mean_of(&|r| r.holds_aborted as f64),
            planning_s_mean: mean_of(&|r| r.planning_s_mean),
            network_load_mean: mean_of(&|r| r.network_load),
            time_limit_share: share(&|r| r.rejected.rejected_time_limit),
            batch_share: share(&|r| r.rejected.rejected_batch),
            self_conflict_share: share(&|r| r.rejected.self_conflicts),
            no_plan_share: share(&|r| r.rejected.rejected_no_plan),
            budget_share: share(&|r| r.rejected.rejected_budget),
            success_first_quarter_mean: mean_of(&|r| r.success_first_quarter),
            success_last_quarter_mean: mean_of(&|r| r.success_last_quarter),
            sites_per_plan_mean: mean_of(&|r| r.sites_per_plan),
            local_transfer_share_mean: mean_of(&|r| r.local_transfer_share),
            rounds_per_plan_mean: mean_of(&|r| r.rounds as f64 / r.requests.max(1) as f64),
        });
    }
    out
}

/// Writes `summary.csv`: a header line with the field names of [`SummaryRow`]
/// ([`SUMMARY_CSV_HEADER`]), then one line per row sorted by (topology, kind, algorithm, load)
/// whatever the input order; floats `{:.6}` ([`fmt_f64`]), `runs` as an integer, `\n` line ends.
///
/// Creates missing parent directories and overwrites `path`. Errors: two rows with the same
/// key (not something [`summarise`] produces), or the directory or file cannot be created or
/// written.
pub fn write_summary_csv(rows: &[SummaryRow], path: &Path) -> anyhow::Result<()> {
    let mut sorted: Vec<&SummaryRow> = rows.iter().collect();
    sorted.sort_by_key(|r| r.row_key());
    if let Some(w) = sorted.windows(2).find(|w| w[0].row_key() == w[1].row_key()) {
        bail!("summary has two rows for {} / {} / {} / load {}", w[0].topology, w[0].kind, w[0].algorithm, w[0].load);
    }
    write_csv(path, &SUMMARY_CSV_HEADER, sorted)
}

/// A line of `runs.csv` as it reads back: [`RunRow`]'s fields with [`Rejections`]' in line.
#[derive(Deserialize)]
struct RunCsvRow {
    topology: String,
    kind: String,
    algorithm: Algorithm,
    load: f64,
    seed: u64,
    requests: u64,
    committed: u64,
    success_rate: f64,
    mean_cost: f64,
    messages: u64,
    holds_aborted: u64,
    planning_s_mean: f64,
    network_load: f64,
    rejected_time_limit: u64,
    rejected_batch: u64,
    self_conflicts: u64,
    rejected_no_plan: u64,
    rejected_budget: u64,
    rejected_other: u64,
    success_first_quarter: f64,
    success_last_quarter: f64,
    sites_per_plan: f64,
    local_transfer_share: f64,
    /// 0 in a `runs.csv` written before the column existed.
    #[serde(default)]
    rounds: u64,
}

/// Reads a `runs.csv` written by [`write_runs_csv`] (floats at its six decimals), for the
/// reports on finished runs (`--scope`).
///
/// Errors: the file cannot be read, or a line is not a run row.
pub fn read_runs_csv(path: &Path) -> anyhow::Result<Vec<RunRow>> {
    let mut reader = csv::Reader::from_path(path).with_context(|| format!("reading {}", path.display()))?;
    let rows: Vec<RunCsvRow> =
        reader.deserialize().collect::<Result<_, _>>().with_context(|| format!("parsing {}", path.display()))?;
    Ok(rows
        .into_iter()
        .map(|r| RunRow {
            topology: r.topology,
            kind: r.kind,
            algorithm: r.algorithm,
            load: r.load,
            seed: r.seed,
            requests: r.requests,
            committed: r.committed,
            success_rate: r.success_rate,
            mean_cost: r.mean_cost,
            messages: r.messages,
            holds_aborted: r.holds_aborted,
            planning_s_mean: r.planning_s_mean,
            network_load: r.network_load,
            rejected: Rejections {
                rejected_time_limit: r.rejected_time_limit,
                rejected_batch: r.rejected_batch,
                self_conflicts: r.self_conflicts,
                rejected_no_plan: r.rejected_no_plan,
                rejected_budget: r.rejected_budget,
                rejected_other: r.rejected_other,
            },
            success_first_quarter: r.success_first_quarter,
            success_last_quarter: r.success_last_quarter,
            sites_per_plan: r.sites_per_plan,
            local_transfer_share: r.local_transfer_share,
            rounds: r.rounds,
        })
        .collect())
}

/// Reads a `summary.csv` written by [`write_summary_csv`] (to draw its figures again).
///
/// Errors: the file cannot be read, or a line is not a summary row.
pub fn read_summary_csv(path: &Path) -> anyhow::Result<Vec<SummaryRow>> {
    let mut reader = csv::Reader::from_path(path).with_context(|| format!("reading {}", path.display()))?;
    reader.deserialize().collect::<Result<_, _>>().with_context(|| format!("parsing {}", path.display()))
}

/// Draws the paper's figures (Ando & Aida, Figs. 7-12) from a summary (see [`summarise`]) into `dir` (created if
/// missing; existing files of the same name are overwritten) and returns the paths written, in
/// order: for every (topology, kind), sorted, `success-<topology>-<kind>.svg`, `.png`, then
/// `cost-<topology>-<kind>.svg`, `.png` (names with characters other than ASCII letters,
/// digits, `-`, `_`, `.` have them replaced by `_`).
///
/// Each figure is 1100 x 700 px: offered load on the x axis (the CPUs', or with
/// [`XAxis::Network`] the network's, see [`network_load`]); on the y axis the success rate
/// (axis 0..1) or the average cost per CPU-hour (axis from 0 to the data and its intervals);
/// one line per algorithm with its marker at every load, and a translucent band for
/// mean ± ci95 (clipped to the axis). The legend panel on the right lists the algorithms (BBR,
/// BIR, `bbr-overlay-*`; within each time, cost, load, random): BIR solid and
/// full colour, BBR dashed, lighter and with hollow markers, overlay short-dashed and darker;
/// the policy gives the hue and marker shape; our algorithms (`bbr-overlay-*`) are marked `*`.
/// The x axis and the legend say what offered load is (CPU demand only). The cost figure leaves out points where no run
/// committed anything (`success_rate_mean == 0`), as those have no average cost. Points with
/// a non-finite mean or load are left out.
///
/// The points of `drifting` (steady-state.md's drifting points) get a red ring; lines that lie
/// within 1.5 % of the y axis of another at every load are marked `≈A`, `≈B`, ... in the
/// legend; a figure in which every line would overlap is not drawn (an earlier file of its
/// name is removed) and its values are tabled instead. `dir/figures.md` gets every figure with
/// its caption (which points drift, which lines overlap) or its table.
///
/// Text is drawn with the system's `sans-serif` font (through fontconfig) in the PNG; the SVG
/// names `sans-serif` and leaves the font to the viewer. The output carries no timestamp:
/// the same summary gives the same files.
///
/// Errors: two summary rows with the same (topology, kind, algorithm, load); two
/// (topology, kind) pairs that map to the same file name; `dir` cannot be created; drawing or
/// writing a file fails (e.g. no usable font for the PNG).
pub fn write_figures(
    summary: &[SummaryRow],
    dir: &Path,
    x_axis: XAxis,
    drifting: &Drifting,
) -> anyhow::Result<Vec<PathBuf>> {
    figures::write_figures(summary, dir, x_axis, drifting)
}

/// The distinct (topology, kind) pairs of a summary, sorted.
fn topology_kinds(summary: &[SummaryRow]) -> BTreeSet<(String, String)> {
    summary.iter().map(|r| (r.topology.clone(), r.kind.clone())).collect()
}

#[cfg(test)]
mod tests;
