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

use crate::algorithm::Algorithm;

mod figures;

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
}

/// Column names of `runs.csv`, in order: exactly the field names of [`RunRow`].
pub const RUNS_CSV_HEADER: [&str; 12] = [
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
];

/// Column names of `summary.csv`, in order: exactly the field names of [`SummaryRow`].
pub const SUMMARY_CSV_HEADER: [&str; 12] = [
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

type Key<'a> = (&'a str, &'a str, Algorithm, f64);

fn cmp_key(a: Key<'_>, b: Key<'_>) -> std::cmp::Ordering {
    a.0.cmp(b.0)
        .then_with(|| a.1.cmp(b.1))
        .then_with(|| a.2.cmp(&b.2))
        .then_with(|| load_key(a.3).total_cmp(&load_key(b.3)))
}

fn run_key(r: &RunRow) -> Key<'_> {
    (&r.topology, &r.kind, r.algorithm, r.load)
}

fn summary_key(r: &SummaryRow) -> Key<'_> {
    (&r.topology, &r.kind, r.algorithm, r.load)
}

/// The order of runs: (topology, kind, algorithm, load, seed).
fn cmp_run(a: &RunRow, b: &RunRow) -> std::cmp::Ordering {
    cmp_key(run_key(a), run_key(b)).then_with(|| a.seed.cmp(&b.seed))
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
fn fixed<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&fmt_f64(*v))
}

/// Creates `path` (and its missing parent directories) and writes a CSV file: the `header` line,
/// then one line per row (its serde form), `\n` line ends, fields quoted (RFC 4180, inner
/// quotes doubled) only if they contain a comma, a quote or a line break.
fn write_csv<'a, T: Serialize + 'a>(
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
    for group in sorted.chunk_by(|a, b| cmp_key(run_key(a), run_key(b)).is_eq()) {
        let first = group[0];
        let mean_of =
            |f: &dyn Fn(&RunRow) -> f64| -> f64 { group.iter().map(|r| f(r)).sum::<f64>() / group.len() as f64 };
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
    sorted.sort_by(|a, b| cmp_key(summary_key(a), summary_key(b)));
    if let Some(w) = sorted.windows(2).find(|w| cmp_key(summary_key(w[0]), summary_key(w[1])).is_eq()) {
        bail!("summary has two rows for {} / {} / {} / load {}", w[0].topology, w[0].kind, w[0].algorithm, w[0].load);
    }
    write_csv(path, &SUMMARY_CSV_HEADER, sorted)
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
/// Each figure is 1100 x 700 px: offered load on the x axis; on the y axis the success rate
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
/// Text is drawn with the system's `sans-serif` font (through fontconfig) in the PNG; the SVG
/// names `sans-serif` and leaves the font to the viewer. The output carries no timestamp:
/// the same summary gives the same files.
///
/// Errors: two summary rows with the same (topology, kind, algorithm, load); two
/// (topology, kind) pairs that map to the same file name; `dir` cannot be created; drawing or
/// writing a file fails (e.g. no usable font for the PNG).
pub fn write_figures(summary: &[SummaryRow], dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    figures::write_figures(summary, dir)
}

/// The distinct (topology, kind) pairs of a summary, sorted.
fn topology_kinds(summary: &[SummaryRow]) -> BTreeSet<(String, String)> {
    summary.iter().map(|r| (r.topology.clone(), r.kind.clone())).collect()
}

#[cfg(test)]
mod tests;
