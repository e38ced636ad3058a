//! `coreserve-sim --scope DIR --scope DIR ... --out OUT`: where each finding holds, flips or is
//! undecided, cell by cell, over finished runs of the paper's experiment (one folder per trace
//! or configuration, each with its networks), with each cell's interval and the rejection
//! shares that explain it (sim/RESULTS.md, "Where each finding holds").
//!
//! A claim is tested in every cell (network x kind, or x method) the folder has: a paired
//! difference over the workloads both arms ran (same offered load and seed, so the same
//! requests), its mean with a 95 % half-width (Student's t), and a one-sided t-test at
//! [`ALPHA`] each way. **Holds**: the difference is significant in the claimed direction (for
//! every rival the claim names); **flips**: significant the other way (against at least one
//! rival); **undecided**: neither; **≡**: two arms made the same plans. A claim of closeness
//! ("within 5 %") holds when the whole interval lies within the bound and flips when the whole
//! interval lies outside it. Reads each folder's `runs.csv`; writes `OUT/scope.md`.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use coreserve::model::{ReservationMethod, SelectionPolicy};

use crate::algorithm::Algorithm;
use crate::findings::{cost, differences, success, Comparison, Paired, ALPHA};
use crate::report::{ci95_half_width, read_runs_csv, RunRow};

const BBR: ReservationMethod = ReservationMethod::Bbr;
const BIR: ReservationMethod = ReservationMethod::Bir;

/// A claim's verdict in one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Holds,
    Flips,
    Undecided,
    /// The arms compared made the same plans on every workload: no evidence.
    Identical,
}

impl Verdict {
    fn symbol(self) -> &'static str {
        match self {
            Verdict::Holds => "✓",
            Verdict::Flips => "✗",
            Verdict::Undecided => "?",
            Verdict::Identical => "≡",
        }
    }

    fn word(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::Flips => "**flips**",
            Verdict::Undecided => "undecided",
            Verdict::Identical => "≡ (same plans)",
        }
    }

    /// The verdict of a claim that `want` holds against every rival (`comparisons`).
    fn of(comparisons: &[Comparison], want: Comparison) -> Verdict {
        let against = if want == Comparison::Above { Comparison::Below } else { Comparison::Above };
        if comparisons.contains(&against) {
            Verdict::Flips
        } else if comparisons.contains(&Comparison::Identical) {
            Verdict::Identical
        } else if !comparisons.is_empty() && comparisons.iter().all(|&c| c == want) {
            Verdict::Holds
        } else {
            Verdict::Undecided
        }
    }
}

/// One cell of one claim.
#[derive(Debug, Clone)]
struct Row {
    folder: String,
    topology: String,
    /// The cell within the topology (kind, method, algorithm).
    cell: String,
    /// The difference shown: mean ± 95 % half-width (pairs), with what is compared.
    interval: String,
    verdict: Verdict,
    /// The compared arms' rejection shares (what explains a flip).
    mechanism: String,
}

/// A claim: its wording, what its cells are, and its rows.
struct Claim {
    name: &'static str,
    cells: &'static str,
    rows: Vec<Row>,
}

/// `mean ± half (n)` of paired differences.
fn interval(d: &[f64]) -> String {
    let (mean, half) = ci95_half_width(d);
    format!("{mean:+.3} ± {half:.3} ({})", d.len())
}

/// Mean of `f` over the runs matching `pred`.
fn mean_of(runs: &[RunRow], pred: impl Fn(&RunRow) -> bool, f: impl Fn(&RunRow) -> Option<f64>) -> f64 {
    let v: Vec<f64> = runs.iter().filter(|r| pred(r)).filter_map(f).collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Why the runs matching `pred` lost requests: the mean shares (of all requests) rejected at
/// `w_interval`, by a refused batch and for want of a plan.
fn why(runs: &[RunRow], pred: impl Fn(&RunRow) -> bool + Copy) -> String {
    let share = |f: fn(&RunRow) -> u64| mean_of(runs, pred, |r| Some(f(r) as f64 / r.requests.max(1) as f64));
    format!(
        "w_interval {:.2}, batch {:.2}, no plan {:.2}",
        share(|r| r.rejected.rejected_time_limit),
        share(|r| r.rejected.rejected_batch),
        share(|r| r.rejected.rejected_no_plan)
    )
}

fn workload(r: &RunRow) -> (u64, u64) {
    (r.load.to_bits(), r.seed)
}

fn policy_workload(r: &RunRow) -> (String, (u64, u64)) {
    (r.algorithm.policy.to_string(), workload(r))
}

/// Differences A - B of `metric` over the workloads both ran, and whether every pair made the
/// same plans.
fn paired<K: Ord>(
    runs: &[RunRow],
    a: impl Fn(&RunRow) -> bool,
    b: impl Fn(&RunRow) -> bool,
    key: impl Fn(&RunRow) -> K,
    metric: impl Fn(&RunRow) -> Option<f64>,
) -> (Vec<f64>, Comparison) {
    let (d, identical) = differences(runs, a, b, key, metric);
    let d: Vec<f64> = d.into_values().collect();
    let c = Paired::of(&d, identical).comparison();
    (d, c)
}

/// `policy` against the other three of `method` in one (topology, kind): the verdict of
/// "`policy` is `want` each other" on `metric`, the interval against the closest rival (the
/// one whose mean is nearest `policy`'s on the claimed side) and both arms' rejection shares.
fn policy_against_others(
    runs: &[RunRow],
    (t, k): (&str, &str),
    method: ReservationMethod,
    policy: SelectionPolicy,
    metric: fn(&RunRow) -> Option<f64>,
    want: Comparison,
) -> Option<(String, Verdict, String)> {
    let arm = |p: SelectionPolicy| {
        move |r: &RunRow| r.topology == t && r.kind == k && r.algorithm == Algorithm { method, policy: p }
    };
    if !runs.iter().any(arm(policy)) {
        return None;
    }
    let rivals: Vec<SelectionPolicy> = Algorithm::POLICIES.into_iter().filter(|&q| q != policy).collect();
    if rivals.iter().any(|&q| !runs.iter().any(arm(q))) {
        return None;
    }
    let compared: Vec<(SelectionPolicy, Vec<f64>, Comparison)> = rivals
        .iter()
        .map(|&q| {
            let (d, c) = paired(runs, arm(policy), arm(q), workload, metric);
            (q, d, c)
        })
        .collect();
    let verdict = Verdict::of(&compared.iter().map(|c| c.2).collect::<Vec<_>>(), want);
    // The closest rival: the smallest mean difference in the claimed direction.
    let sign = if want == Comparison::Above { 1.0 } else { -1.0 };
    let closest = compared
        .iter()
        .min_by(|a, b| {
            let m = |d: &[f64]| sign * d.iter().sum::<f64>() / d.len().max(1) as f64;
            m(&a.1).total_cmp(&m(&b.1))
        })
        .expect("three rivals");
    let shown = format!("{policy} - {}: {}", closest.0, interval(&closest.1));
    let mechanism = format!("{policy}: {}; {}: {}", why(runs, arm(policy)), closest.0, why(runs, arm(closest.0)));
    Some((shown, verdict, mechanism))
}

/// Every claim tested in the runs of one folder (`name`), appended to `claims`.
fn test_folder(name: &str, runs: &[RunRow], claims: &mut [Claim; 10]) {
    let topologies: BTreeSet<&str> = runs.iter().map(|r| r.topology.as_str()).collect();
    let kinds: BTreeSet<&str> = runs.iter().map(|r| r.kind.as_str()).collect();
    let algorithms: BTreeSet<Algorithm> = runs.iter().map(|r| r.algorithm).collect();
    let row = |topology: &str, cell: String, interval: String, verdict: Verdict, mechanism: String| Row {
        folder: name.to_owned(),
        topology: topology.to_owned(),
        cell,
        interval,
        verdict,
        mechanism,
    };
    for &t in &topologies {
        for &k in &kinds {
            let c = in_cell(t, k);
            let method = |m: ReservationMethod| move |r: &RunRow| c(r) && r.algorithm.method == m;
            if runs.iter().any(method(BIR)) && runs.iter().any(method(BBR)) {
                // 1. BIR beats BBR on success, paired by policy, load and seed.
                let (d, cmp) = paired(runs, method(BIR), method(BBR), policy_workload, success);
                let mech = format!("BIR: {}; BBR: {}", why(runs, method(BIR)), why(runs, method(BBR)));
                claims[0].rows.push(row(
                    t,
                    k.to_owned(),
                    format!("BIR - BBR: {}", interval(&d)),
                    Verdict::of(&[cmp], Comparison::Above),
                    mech,
                ));
                // 9. BBR and BIR cost within 5 % of BBR's: the whole interval inside the bound.
                let (d, _) = paired(runs, method(BIR), method(BBR), policy_workload, cost);
                let bbr = mean_of(runs, method(BBR), cost);
                let (m, h) = ci95_half_width(&d);
                let verdict = if d.len() < 3 || bbr <= 0.0 {
                    Verdict::Undecided
                } else if m.abs() + h <= 0.05 * bbr {
                    Verdict::Holds
                } else if m.abs() - h > 0.05 * bbr {
                    Verdict::Flips
                } else {
                    Verdict::Undecided
                };
                let shown = format!(
                    "BIR - BBR: {:+.1} % ± {:.1} % of BBR's cost ({})",
                    100.0 * m / bbr.max(f64::MIN_POSITIVE),
                    100.0 * h / bbr.max(f64::MIN_POSITIVE),
                    d.len()
                );
                claims[8].rows.push(row(t, k.to_owned(), shown, verdict, String::new()));
            }
            for (m, mname) in [(BBR, "BBR"), (BIR, "BIR")] {
                let cell = format!("{k}, {mname}");
                // 3 and 5. `time` best for workflows / co-allocation.
                let idx = if k == "workflow" { 2 } else { 4 };
                if let Some((shown, v, mech)) =
                    policy_against_others(runs, (t, k), m, SelectionPolicy::Time, success, Comparison::Above)
                {
                    claims[idx].rows.push(row(t, mname.to_owned(), shown, v, mech));
                }
                // 4. `cost` worst for workflows.
                if k == "workflow" {
                    if let Some((shown, v, mech)) =
                        policy_against_others(runs, (t, k), m, SelectionPolicy::Cost, success, Comparison::Below)
                    {
                        claims[3].rows.push(row(t, mname.to_owned(), shown, v, mech));
                    }
                }
                // 7. `cost` cheapest.
                if let Some((shown, v, _)) =
                    policy_against_others(runs, (t, k), m, SelectionPolicy::Cost, cost, Comparison::Below)
                {
                    claims[6].rows.push(row(t, cell.clone(), shown, v, String::new()));
                }
                // 8. The cost policy's average cost rises from the lowest load to the highest.
                let cost_arm = Algorithm { method: m, policy: SelectionPolicy::Cost };
                let loads: Vec<f64> = runs.iter().filter(|r| c(r) && r.algorithm == cost_arm).map(|r| r.load).collect();
                if let (Some(lo), Some(hi)) =
                    (loads.iter().copied().reduce(f64::min), loads.iter().copied().reduce(f64::max))
                {
                    if hi > lo {
                        let at = |load: f64| move |r: &RunRow| c(r) && r.algorithm == cost_arm && r.load == load;
                        let (d, cmp) = paired(runs, at(hi), at(lo), |r| r.seed, cost);
                        let shown = format!("cost at load {hi} - at {lo}: {}", interval(&d));
                        claims[7].rows.push(row(
                            t,
                            cell.clone(),
                            shown,
                            Verdict::of(&[cmp], Comparison::Above),
                            String::new(),
                        ));
                    }
                }
            }
            // 6. BBR's best policy is `load`.
            if let Some((shown, v, mech)) =
                policy_against_others(runs, (t, k), BBR, SelectionPolicy::Load, success, Comparison::Above)
            {
                claims[5].rows.push(row(t, k.to_owned(), shown, v, mech));
            }
        }
        // 2. BIR's lead over BBR larger for co-allocation than for workflows.
        if kinds.contains("coallocation") && kinds.contains("workflow") {
            let gap = |k: &str| {
                let c = in_cell(t, k);
                let (bir, bbr) = (
                    move |r: &RunRow| c(r) && r.algorithm.method == BIR,
                    move |r: &RunRow| c(r) && r.algorithm.method == BBR,
                );
                differences(runs, bir, bbr, policy_workload, success).0
            };
            let (co, wf) = (gap("coallocation"), gap("workflow"));
            let d: Vec<f64> = co.iter().filter_map(|(key, c)| Some(c - wf.get(key)?)).collect();
            if !d.is_empty() {
                let v = Verdict::of(&[Paired::of(&d, false).comparison()], Comparison::Above);
                claims[1].rows.push(row(
                    t,
                    String::new(),
                    format!("co-allocation gap - workflow gap: {}", interval(&d)),
                    v,
                    String::new(),
                ));
            }
        }
    }
    // 10. gridg-w above gridg-n, per kind and algorithm.
    if topologies.contains("gridg-n") && topologies.contains("gridg-w") {
        for &k in &kinds {
            for &a in &algorithms {
                let on = |t: &'static str| move |r: &RunRow| r.topology == t && r.kind == k && r.algorithm == a;
                let (d, cmp) = paired(runs, on("gridg-w"), on("gridg-n"), workload, success);
                if d.is_empty() {
                    continue;
                }
                claims[9].rows.push(row(
                    "gridg-w",
                    format!("{k}, {a}"),
                    format!("gridg-w - gridg-n: {}", interval(&d)),
                    Verdict::of(&[cmp], Comparison::Above),
                    String::new(),
                ));
            }
        }
    }
}

/// The runs of topology `t` and kind `k`.
fn in_cell<'a>(t: &'a str, k: &'a str) -> impl Fn(&RunRow) -> bool + Copy + 'a {
    move |r: &RunRow| r.topology == t && r.kind == k
}

fn folder_name(dir: &Path) -> String {
    dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// The scope of every claim over `dirs` as Markdown: the overview (claim x folder x network)
/// and, per claim, every cell's interval, verdict and rejection shares.
///
/// # Errors
/// No folder, or a `runs.csv` that cannot be read.
pub fn scope(dirs: &[PathBuf]) -> Result<String> {
    if dirs.is_empty() {
        bail!("--scope needs at least one folder");
    }
    let mut claims = [
        ("1. BIR beats BBR on success rate", "co-allocation, workflow"),
        ("1. ... by more for co-allocation than for workflows", "one per network"),
        ("2. workflows: `time` best", "BBR, BIR"),
        ("2. workflows: `cost` worst", "BBR, BIR"),
        ("3. co-allocation: `time` best", "BBR, BIR"),
        ("BBR's best policy is `load`", "co-allocation, workflow"),
        ("4. `cost` cheapest", "co-allocation BBR, BIR; workflow BBR, BIR"),
        ("4. ... its cost rising with load", "co-allocation BBR, BIR; workflow BBR, BIR"),
        ("5. BBR and BIR cost within 5 %", "co-allocation, workflow"),
        ("6. gridg-w above gridg-n", "co-allocation then workflow, algorithms by name"),
    ]
    .map(|(name, cells)| Claim { name, cells, rows: Vec::new() });
    let mut folders = Vec::new();
    for dir in dirs {
        let runs = read_runs_csv(&dir.join("runs.csv"))?;
        let name = folder_name(dir);
        let loads: BTreeSet<String> = runs.iter().map(|r| r.load.to_string()).collect();
        let seeds: BTreeSet<u64> = runs.iter().map(|r| r.seed).collect();
        let counted = runs.first().map_or(0, |r| r.requests);
        folders.push(format!(
            "`{name}`: loads {}, {} seeds, {counted} counted requests per run",
            loads.into_iter().collect::<Vec<_>>().join(", "),
            seeds.len()
        ));
        test_folder(&name, &runs, &mut claims);
    }
    let mut columns: Vec<(String, String)> = Vec::new();
    for c in &claims {
        for r in &c.rows {
            let col = (r.folder.clone(), r.topology.clone());
            if !columns.contains(&col) {
                columns.push(col);
            }
        }
    }
    let mut md = format!(
        "# Where each finding holds\n\nWritten by `coreserve-sim --scope`. Folders: {}.\n\n\
         Every cell is a paired comparison over the workloads both arms ran (same offered load and \
         seed): ✓ holds (significant in the claimed direction, one-sided t-test at alpha = {ALPHA}, \
         against every rival the claim names), ✗ flips (significant the other way against at least \
         one), ? undecided, ≡ the arms made the same plans. \"Within 5 %\" holds where the whole 95 % \
         interval lies within ± 5 % of BBR's cost and flips where it lies wholly outside. Symbols in \
         a cell follow the order given in the second column.\n\n| claim | cells | {} |\n|---|---|{}\n",
        folders.join("; "),
        columns.iter().map(|(f, t)| format!("{f}: {t}")).collect::<Vec<_>>().join(" | "),
        "---|".repeat(columns.len())
    );
    for c in &claims {
        let cells: Vec<String> = columns
            .iter()
            .map(|(f, t)| {
                let s: String =
                    c.rows.iter().filter(|r| &r.folder == f && &r.topology == t).map(|r| r.verdict.symbol()).collect();
                if s.is_empty() {
                    "—".to_owned()
                } else {
                    s
                }
            })
            .collect();
        let _ = writeln!(md, "| {} | {} | {} |", c.name, c.cells, cells.join(" | "));
    }
    md.push_str("\nCounts per claim (cells):\n\n| claim | holds | flips | undecided | ≡ |\n|---|---|---|---|---|\n");
    for c in &claims {
        let n = |v: Verdict| c.rows.iter().filter(|r| r.verdict == v).count();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            c.name,
            n(Verdict::Holds),
            n(Verdict::Flips),
            n(Verdict::Undecided),
            n(Verdict::Identical)
        );
    }
    for c in &claims {
        let _ = write!(
            md,
            "\n## {}\n\nDifference: mean ± 95 % half-width (pairs). Rejection shares: of all requests, \
             mean over the cell's runs.\n\n| folder | network | cell | difference | verdict | rejected (w_interval, refused batch, no plan) |\n|---|---|---|---|---|---|\n",
            c.name
        );
        for r in &c.rows {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} |",
                r.folder,
                r.topology,
                r.cell,
                r.interval,
                r.verdict.word(),
                if r.mechanism.is_empty() { "—" } else { &r.mechanism }
            );
        }
    }
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_flips_against_any_rival_and_holds_against_all() {
        use Comparison::*;
        assert_eq!(Verdict::of(&[Above, Above, Above], Above), Verdict::Holds);
        assert_eq!(Verdict::of(&[Above, Undecided, Above], Above), Verdict::Undecided);
        assert_eq!(Verdict::of(&[Above, Below, Identical], Above), Verdict::Flips);
        assert_eq!(Verdict::of(&[Below, Below], Below), Verdict::Holds);
        assert_eq!(Verdict::of(&[Above, Identical], Above), Verdict::Identical);
        assert_eq!(Verdict::of(&[], Above), Verdict::Undecided);
    }

    /// RESULTS.md's sections that read the committed scope and findings files ("The paper's
    /// experiment in the validated configuration", "Where each finding holds"): their tables are
    /// the files' verdicts and every number they quote is one the files print.
    mod committed {
        use std::path::Path;

        use crate::validate::tests::{decimals, printed_in};

        fn read(rel: &str) -> String {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        }

        /// RESULTS.md's section whose heading starts with `heading`, up to the next `## `.
        fn section(heading: &str) -> String {
            let md = read("RESULTS.md");
            let from = md.find(&format!("\n## {heading}")).unwrap_or_else(|| panic!("RESULTS.md: no ## {heading}"));
            let rest = &md[from + 1..];
            let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
            rest[..end].to_owned()
        }

        /// The cells of a Markdown table row.
        fn cells(row: &str) -> Vec<&str> {
            row.trim().trim_matches('|').split('|').map(str::trim).collect()
        }

        /// A findings.md's verdicts in the order it states them, written as RESULTS.md's tables
        /// write them: `reproduced (4/4)`, `partly (2/4)`, `not (0/2)`.
        fn verdicts(findings: &str) -> Vec<String> {
            let mark = "** (holds in ";
            findings
                .match_indices(mark)
                .map(|(i, _)| {
                    let word = &findings[findings[..i].rfind("**").unwrap() + 2..i];
                    let tail = &findings[i + mark.len()..];
                    let count: Vec<&str> = tail[..tail.find(" cells)").unwrap()].split_whitespace().collect();
                    let (h, c) = match count[..] {
                        ["all", c] => (c, c),
                        ["none", "of", c] => ("0", c),
                        [h, "of", c] => (h, c),
                        _ => panic!("a verdict's count: {count:?}"),
                    };
                    format!("{} ({h}/{c})", word.split_whitespace().next().unwrap())
                })
                .collect()
        }

        /// The numbers of `text` (two decimals or more, or signed) that none of `sources`
        /// prints. Paragraphs quoting a study whose files are not committed (they say "outside
        /// study") are not read.
        fn unprinted(text: &str, sources: &[&str]) -> Vec<String> {
            let printed: Vec<f64> =
                sources.iter().flat_map(|s| decimals(&read(s))).map(|d| d.parse().unwrap()).collect();
            text.split("\n\n")
                .filter(|p| !p.contains("outside study"))
                .flat_map(decimals)
                .filter(|d| d.split('.').nth(1).map_or(0, str::len) >= 2 || d.starts_with(['-', '+']))
                .filter(|d| !printed_in(d, &printed))
                .collect()
        }

        #[test]
        fn the_validated_paper_experiment_is_its_findings() {
            let s = section("The paper's experiment in the validated configuration");
            let paper = verdicts(&read("results/paper/findings.md"));
            let validated = verdicts(&read("results/paper-validated/findings.md"));
            assert_eq!((paper.len(), validated.len()), (10, 10), "the six findings' ten verdicts");
            let rows: Vec<Vec<&str>> =
                s.lines().filter(|l| l.starts_with("| ") && l.as_bytes()[2].is_ascii_digit()).map(cells).collect();
            assert_eq!(rows.len(), 10, "one row per verdict:\n{s}");
            for (i, row) in rows.iter().enumerate() {
                assert_eq!(row[1], paper[i], "row {i} {:?}: paper model", row[0]);
                assert_eq!(row[2], validated[i], "row {i} {:?}: validated", row[0]);
                assert_eq!(row[3], if paper[i] == validated[i] { "same" } else { "**differs**" }, "row {i}");
            }
            let unprinted = unprinted(
                &s,
                &[
                    "results/paper/findings.md",
                    "results/paper-validated/findings.md",
                    "results/published-scope/scope.md",
                    "results/paper/summary.csv",
                    "results/paper-validated/summary.csv",
                ],
            );
            assert!(unprinted.is_empty(), "numbers no file prints: {unprinted:?}");
        }

        #[test]
        fn where_each_finding_holds_is_the_study_scope() {
            let s = section("Where each finding holds");
            let scope = read("results/study/scope.md");
            // scope.md's overview: its columns (folder: network) and each claim's symbols.
            let overview: Vec<Vec<&str>> = scope
                .lines()
                .skip_while(|l| !l.starts_with("| claim | cells |"))
                .take_while(|l| l.starts_with('|'))
                .filter(|l| !l.starts_with("|---"))
                .map(cells)
                .collect();
            let table: Vec<Vec<&str>> = s
                .lines()
                .skip_while(|l| !l.starts_with("| claim |"))
                .take_while(|l| l.starts_with('|'))
                .filter(|l| !l.starts_with("|---"))
                .map(cells)
                .collect();
            assert_eq!(table.len(), overview.len(), "RESULTS.md's table has every claim of scope.md");
            // "large: GEANT" is scope.md's "large-jobs: geant2012".
            let column = |label: &str| {
                let (regime, network) = label.split_once(": ").unwrap();
                let network = network.to_lowercase();
                let hits: Vec<usize> = overview[0]
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| {
                        c.split_once(": ")
                            .is_some_and(|(f, t)| f == format!("{regime}-jobs") && t.starts_with(&network))
                    })
                    .map(|(i, _)| i)
                    .collect();
                assert_eq!(hits.len(), 1, "RESULTS.md's column {label}: scope.md's {:?}", overview[0]);
                hits[0]
            };
            let columns: Vec<usize> = table[0][2..].iter().map(|l| column(l)).collect();
            for (i, c) in overview[0].iter().enumerate().skip(2) {
                let validated = c.starts_with("large-jobs: ") || c.starts_with("small-jobs: ");
                assert!(!validated || columns.contains(&i), "RESULTS.md's table has no column for {c}");
            }
            for (row, want) in table[1..].iter().zip(&overview[1..]) {
                for (got, &c) in row[2..].iter().zip(&columns) {
                    let want = want[c];
                    // A cell of many symbols is written as counts: "14 ✓, 2 ?".
                    let ok = if got.contains(|ch: char| ch.is_ascii_digit()) {
                        let counts: Vec<(usize, &str)> = got
                            .split(", ")
                            .map(|part| {
                                let (n, sym) = part.split_once(' ').unwrap();
                                (n.parse().unwrap(), sym)
                            })
                            .collect();
                        counts.iter().all(|&(n, sym)| want.matches(sym).count() == n)
                            && counts.iter().map(|c| c.0).sum::<usize>() == want.chars().count()
                    } else {
                        *got == want || (got.is_empty() && want == "—")
                    };
                    assert!(ok, "{:?}, {}: RESULTS.md {got:?}, scope.md {want:?}", row[0], overview[0][c]);
                }
            }
            let unprinted = unprinted(&s, &["results/study/scope.md"]);
            assert!(unprinted.is_empty(), "numbers scope.md does not print: {unprinted:?}");
        }
    }
}
