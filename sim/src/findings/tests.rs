//! Verdicts computed from hand-made summaries and runs.

use super::*;

fn row(topology: &str, kind: &str, algorithm: &str, load: f64, success: f64, cost: f64) -> SummaryRow {
    SummaryRow { runs: 1, ..SummaryRow::point(topology, kind, algorithm, load, success, cost) }
}

/// A run of summary row `r` with seed `seed` and average cost `mean_cost`.
fn run(r: &SummaryRow, seed: u64, mean_cost: f64) -> RunRow {
    RunRow {
        topology: r.topology.clone(),
        kind: r.kind.clone(),
        algorithm: r.algorithm,
        load: r.load,
        seed,
        requests: 100,
        committed: (r.success_rate_mean * 100.0).round() as u64,
        success_rate: r.success_rate_mean,
        mean_cost,
        messages: 0,
        holds_aborted: 0,
        planning_s_mean: 0.0,
        network_load: 0.0,
        rejected: Default::default(),
        success_first_quarter: 0.0,
        success_last_quarter: 0.0,
        sites_per_plan: 1.0,
        local_transfer_share: 0.0,
        rounds: 0,
    }
}

/// Three seeds per summary row, their costs spread around its mean by `spread(seed, load)`.
fn runs(rows: &[SummaryRow], spread: impl Fn(u64, f64) -> f64) -> Vec<RunRow> {
    rows.iter().flat_map(|r| (1..=3).map(|s| run(r, s, r.mean_cost_mean + spread(s, r.load)))).collect::<Vec<_>>()
}

#[test]
fn cost_rises_only_when_the_paired_rise_is_significant() {
    let rows: Vec<SummaryRow> =
        [0.2, 1.0].iter().map(|&l| row("gridg-n", "workflow", "bir-cost", l, 0.5, 0.6 + l / 10.0)).collect();
    let rows: Vec<SummaryRow> = rows
        .into_iter()
        .chain(
            ["time", "load", "random"]
                .iter()
                .flat_map(|p| [0.2, 1.0].map(|l| row("gridg-n", "workflow", &format!("bir-{p}"), l, 0.5, 1.0))),
        )
        .collect();
    // Every seed rises by 0.0808-0.0824: significant.
    let f = Findings::of(&rows, &runs(&rows, |s, l| 0.001 * s as f64 * l));
    let c = &f.policy_cost[0];
    assert_eq!(c.rise.n, 3);
    assert!((c.rise.mean - 0.0816).abs() < 1e-9 && c.rise.p_above.unwrap() < ALPHA, "{c:?}");
    assert_eq!((f.cost_rises_with_load.held, f.cost_rises_with_load.cells), (1, 1));
    // The same mean rise, but one seed falls: the slope is positive, the rise not significant.
    let f = Findings::of(&rows, &runs(&rows, |s, l| if l > 0.5 { [0.3, -0.3, 0.0][s as usize - 1] } else { 0.0 }));
    let c = &f.policy_cost[0];
    assert!(c.cost_policy_slope > 0.0 && c.rise.p_above.unwrap() > ALPHA, "{c:?}");
    assert_eq!((f.cost_rises_with_load.held, f.cost_rises_with_load.cells), (0, 1));
}

#[test]
fn verdicts_follow_the_numbers() {
    let mut rows = Vec::new();
    for (t, wide) in [("gridg-n", 0.0), ("gridg-w", 0.1)] {
        for (k, gap) in [("workflow", 0.1), ("coallocation", 0.3)] {
            for (m, base) in [("bbr", 0.4), ("bir", 0.4 + gap)] {
                for (p, bonus, cost) in
                    [("time", 0.05, 1.0), ("cost", -0.04, 0.5), ("load", 0.0, 1.0), ("random", 0.0, 1.0)]
                {
                    for load in [0.5, 1.0] {
                        rows.push(row(t, k, &format!("{m}-{p}"), load, base + bonus + wide, cost + load / 10.0));
                    }
                }
            }
        }
    }
    let md = findings(&rows, &runs(&rows, |s, l| 0.001 * s as f64 * l));
    for n in 1..=6 {
        let section = md.split(&format!("## {n}.")).nth(1).unwrap();
        let section = section.split("\n## ").next().unwrap();
        assert!(
            section.contains("**reproduced** (holds in all") && !section.contains("partly"),
            "finding {n}:\n{section}"
        );
    }
    // Make BBR win for workflow on gridg-n: finding 1 holds in 3 of 4 cells.
    for r in rows
        .iter_mut()
        .filter(|r| r.topology == "gridg-n" && r.kind == "workflow" && r.algorithm.to_string().starts_with("bbr"))
    {
        r.success_rate_mean += 0.5;
    }
    let md = findings(&rows, &runs(&rows, |s, l| 0.001 * s as f64 * l));
    assert!(
        md.split("## 2.").next().unwrap().contains("BIR beats BBR: **partly reproduced** (holds in 3 of 4 cells)"),
        "{md}"
    );
}

#[test]
fn time_is_best_only_where_it_beats_each_policy_on_paired_runs_and_never_on_identical_plans() {
    let policies = [("time", 0.50), ("cost", 0.30), ("load", 0.45), ("random", 0.44)];
    let rows: Vec<SummaryRow> = policies
        .iter()
        .flat_map(|(p, s)| [0.2, 1.0].map(|l| row("gridg-n", "workflow", &format!("bir-{p}"), l, *s, 1.0)))
        .collect();
    let time_best = |runs: &[RunRow]| {
        let f = Findings::of(&rows, runs);
        let finding = f.policy_success.iter().find(|f| f.number == 2).unwrap().clone();
        (finding.time_best, finding.rows[0].time_vs.map(|p| p.comparison()), f.to_markdown())
    };
    let base = runs(&rows, |s, _| 0.01 * s as f64);
    let (tally, vs, _) = time_best(&base);
    assert_eq!(vs, [Comparison::Above; 3]);
    assert_eq!((tally.held, tally.cells, tally.identical), (1, 1, 0));

    // `random` made exactly `time`'s plans: no evidence, and the verdict says so.
    let mut same = base.clone();
    for r in same.iter_mut().filter(|r| r.algorithm.policy == SelectionPolicy::Random) {
        let twin =
            base.iter().find(|t| t.algorithm.policy == SelectionPolicy::Time && t.load == r.load && t.seed == r.seed);
        *r = RunRow { algorithm: r.algorithm, ..twin.unwrap().clone() };
    }
    let (tally, vs, md) = time_best(&same);
    assert_eq!(vs, [Comparison::Above, Comparison::Above, Comparison::Identical]);
    assert_eq!((tally.held, tally.cells, tally.identical), (0, 1, 1));
    assert!(md.contains("made the same plans (≡)") && md.contains("| > / > / ≡ |"), "{md}");

    // Above `load` on average, but below it on one workload of six: undecided.
    let mut noisy = base.clone();
    for r in noisy.iter_mut().filter(|r| r.algorithm.policy == SelectionPolicy::Time && r.seed == 1 && r.load == 0.2) {
        r.success_rate = 0.2;
    }
    let (tally, vs, _) = time_best(&noisy);
    assert_eq!(vs[1], Comparison::Undecided);
    assert_eq!((tally.held, tally.identical), (0, 0));
}

#[test]
fn paired_p_values_are_students_t() {
    // d = 1, 2, 3: mean 2, sd 1, t = 2 * sqrt(3) with 2 degrees of freedom.
    let d = Paired::of(&[1.0, 2.0, 3.0], false);
    // One-sided p of t with 2 df: 1/2 - t / (2 sqrt(2 + t^2)) = 0.0371.
    assert!((d.p_above.unwrap() - 0.0371).abs() < 1e-4, "{d:?}");
    assert!((d.p_above.unwrap() + d.p_below.unwrap() - 1.0).abs() < 1e-12);
    assert_eq!(d.comparison(), Comparison::Above);
    assert_eq!(Paired::of(&[0.5], false).comparison(), Comparison::Undecided, "one pair tests nothing");
    assert_eq!(Paired::of(&[0.0, 0.0], true).comparison(), Comparison::Identical);
}
