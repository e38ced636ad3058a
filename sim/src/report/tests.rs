use super::*;
use std::fs;

fn row(alg: &str, load: f64, seed: u64, committed: u64, success: f64, cost: f64) -> RunRow {
    RunRow {
        topology: "gridg-n".into(),
        kind: "workflow".into(),
        algorithm: alg.parse().unwrap(),
        load,
        seed,
        requests: 100,
        committed,
        success_rate: success,
        mean_cost: cost,
        messages: 1000 + seed,
        holds_aborted: seed,
        planning_s_mean: 12.5,
        network_load: 0.25,
        rejected: Rejections { rejected_no_plan: 100 - committed, ..Default::default() },
        success_first_quarter: success,
        success_last_quarter: success,
        sites_per_plan: 1.5,
        local_transfer_share: 0.25,
        rounds: 300 + seed,
    }
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap()
}

#[test]
fn runs_csv_is_sorted_by_key_with_fixed_float_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out/runs.csv");
    let mut b = row("bbr-time", 10.0, 2, 0, 0.0, 0.0);
    b.topology = "gridg-w".into();
    let rows = vec![
        b,
        row("bir-time", 10.0, 1, 50, 0.5, 7.25),
        row("bir-time", 2.0, 10, 80, 0.8, 1.0 / 3.0),
        row("bir-time", 2.0, 2, 90, 0.9, 5.0),
        row("bbr-time", 2.0, 1, 70, 0.7, -1e-9),
    ];
    write_runs_csv(&rows, &path).unwrap();
    let expected = "\
topology,kind,algorithm,load,seed,requests,committed,success_rate,mean_cost,messages,holds_aborted,planning_s_mean,\
network_load,rejected_time_limit,rejected_batch,self_conflicts,rejected_no_plan,rejected_budget,rejected_other,\
success_first_quarter,success_last_quarter,sites_per_plan,local_transfer_share,rounds
gridg-n,workflow,bbr-time,2.000000,1,100,70,0.700000,0.000000,1001,1,12.500000,0.250000,0,0,0,30,0,0,0.700000,0.700000,1.500000,0.250000,301
gridg-n,workflow,bir-time,2.000000,2,100,90,0.900000,5.000000,1002,2,12.500000,0.250000,0,0,0,10,0,0,0.900000,0.900000,1.500000,0.250000,302
gridg-n,workflow,bir-time,2.000000,10,100,80,0.800000,0.333333,1010,10,12.500000,0.250000,0,0,0,20,0,0,0.800000,0.800000,1.500000,0.250000,310
gridg-n,workflow,bir-time,10.000000,1,100,50,0.500000,7.250000,1001,1,12.500000,0.250000,0,0,0,50,0,0,0.500000,0.500000,1.500000,0.250000,301
gridg-w,workflow,bbr-time,10.000000,2,100,0,0.000000,0.000000,1002,2,12.500000,0.250000,0,0,0,100,0,0,0.000000,0.000000,1.500000,0.250000,302
";
    assert_eq!(read(&path), expected);
    assert_eq!(RUNS_CSV_HEADER.join(","), expected.lines().next().unwrap());

    // Any input order gives the same bytes.
    let mut reversed = rows.clone();
    reversed.reverse();
    let path2 = dir.path().join("runs2.csv");
    write_runs_csv(&reversed, &path2).unwrap();
    assert_eq!(fs::read(&path).unwrap(), fs::read(&path2).unwrap());

    let sorted = sorted_runs(&reversed);
    assert_eq!(sorted[0].algorithm, "bbr-time");
    assert_eq!(sorted[2].seed, 10);
}

#[test]
fn header_matches_serde_field_names() {
    let mut v = serde_json::to_value(row("bir-time", 1.0, 1, 1, 1.0, 1.0)).unwrap();
    let rejected = v.as_object_mut().unwrap().remove("rejected").unwrap();
    v.as_object_mut().unwrap().extend(rejected.as_object().unwrap().clone());
    let names: Vec<&String> = v.as_object().unwrap().keys().collect();
    let mut header: Vec<&str> = RUNS_CSV_HEADER.to_vec();
    header.sort();
    let mut names: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    names.sort();
    assert_eq!(names, header);
    let s = summarise(&[row("bir-time", 1.0, 1, 1, 1.0, 1.0)]);
    let v = serde_json::to_value(&s[0]).unwrap();
    let mut names: Vec<&str> = v.as_object().unwrap().keys().map(|s| s.as_str()).collect();
    names.sort();
    let mut header: Vec<&str> = SUMMARY_CSV_HEADER.to_vec();
    header.sort();
    assert_eq!(names, header);
}

#[test]
fn csv_fields_with_commas_or_quotes_are_quoted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.csv");
    let mut r = row("bir-time", 1.0, 1, 1, 0.01, 1.0);
    r.topology = "a,b".into();
    r.kind = "say \"hi\"".into();
    write_runs_csv(&[r], &path).unwrap();
    let text = read(&path);
    let line = text.lines().nth(1).unwrap();
    assert!(line.starts_with("\"a,b\",\"say \"\"hi\"\"\",bir-time,1.000000,"), "{line}");
}

#[test]
fn fixed_float_format() {
    assert_eq!(fmt_f64(0.1 + 0.2), "0.300000");
    assert_eq!(fmt_f64(-0.0), "0.000000");
    assert_eq!(fmt_f64(-4e-7), "0.000000");
    assert_eq!(fmt_f64(-0.5), "-0.500000");
    assert_eq!(fmt_f64(1234.5678901), "1234.567890");
}

#[test]
fn ci95_of_a_known_sample() {
    // mean 0.6, sample sd 0.1, t(0.975, 2) = 4.30265 -> 4.30265 * 0.1 / sqrt(3) = 0.24841...
    let (mean, half) = ci95_half_width(&[0.5, 0.6, 0.7]);
    assert!((mean - 0.6).abs() < 1e-12);
    assert!((half - 0.2484).abs() < 5e-5, "{half}");
    assert!((half - 4.302_652_729_749_464 * 0.1 / 3f64.sqrt()).abs() < 1e-9);
    // One observation: no interval. None: zeros.
    assert_eq!(ci95_half_width(&[0.42]), (0.42, 0.0));
    assert_eq!(ci95_half_width(&[]), (0.0, 0.0));
    // Constant sample: zero width.
    assert_eq!(ci95_half_width(&[2.0; 10]), (2.0, 0.0));
}

#[test]
fn t_quantiles() {
    // The tables' values (three decimals).
    for (df, t) in [(1, 12.706), (2, 4.303), (9, 2.262), (30, 2.042), (45, 2.014), (120, 1.980), (5000, 1.960)] {
        assert!((t_quantile_975(df) - t).abs() < 5e-4, "df {df}: {}", t_quantile_975(df));
    }
    assert!((t_quantile_975(2) - 4.302_652_729_749_464).abs() < 1e-9);
    assert!(t_quantile_975(0).is_nan());
    // Non-increasing in df.
    for df in 1..2000 {
        assert!(t_quantile_975(df + 1) <= t_quantile_975(df), "df {df}");
    }
}

#[test]
fn summarise_groups_over_seeds_and_averages_cost_over_committing_runs() {
    let rows = vec![
        // Same group, in scrambled order; seed 3 committed nothing (placeholder cost 0).
        row("bir-time", 0.5, 2, 60, 0.6, 12.0),
        row("bir-time", 0.5, 3, 0, 0.0, 0.0),
        row("bir-time", 0.5, 1, 50, 0.5, 10.0),
        row("bir-time", 0.5, 4, 70, 0.7, 14.0),
        // Another load and algorithm, one run each.
        row("bir-time", 0.25, 1, 90, 0.9, 8.0),
        row("bbr-cost", 0.5, 1, 0, 0.0, 0.0),
    ];
    let s = summarise(&rows);
    let names: Vec<String> = s.iter().map(|r| r.algorithm.to_string()).collect();
    let keys: Vec<(&str, f64, u64)> = s.iter().zip(&names).map(|(r, name)| (name.as_str(), r.load, r.runs)).collect();
    assert_eq!(keys, vec![("bbr-cost", 0.5, 1), ("bir-time", 0.25, 1), ("bir-time", 0.5, 4)]);

    let g = &s[2];
    assert!((g.success_rate_mean - 0.45).abs() < 1e-12);
    let (m, h) = ci95_half_width(&[0.6, 0.0, 0.5, 0.7]);
    assert_eq!((g.success_rate_mean, g.success_rate_ci95), (m, h));
    // Cost over the three committing runs only: 10, 12, 14 -> mean 12, sd 2, t(2).
    assert!((g.mean_cost_mean - 12.0).abs() < 1e-12);
    assert!((g.mean_cost_ci95 - 4.302_652_729_749_464 * 2.0 / 3f64.sqrt()).abs() < 1e-9);
    assert!((g.messages_mean - 1002.5).abs() < 1e-12);
    assert!((g.holds_aborted_mean - 2.5).abs() < 1e-12);
    assert_eq!(g.planning_s_mean, 12.5);

    // A single run: no interval.
    assert_eq!(s[1].success_rate_ci95, 0.0);
    assert_eq!(s[1].mean_cost_mean, 8.0);
    // Nothing committed at all: cost 0, interval 0.
    assert_eq!((s[0].mean_cost_mean, s[0].mean_cost_ci95), (0.0, 0.0));

    assert!(summarise(&[]).is_empty());
}

#[test]
fn summary_csv_is_sorted_and_fixed_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("summary.csv");
    let rows = vec![
        row("bir-time", 0.5, 1, 50, 0.5, 10.0),
        row("bir-time", 0.5, 2, 60, 0.6, 12.0),
        row("bir-time", 0.5, 3, 70, 0.7, 14.0),
        row("bbr-time", 0.5, 1, 0, 0.0, 0.0),
    ];
    let mut s = summarise(&rows);
    s.reverse();
    write_summary_csv(&s, &path).unwrap();
    let expected = "\
topology,kind,algorithm,load,runs,success_rate_mean,success_rate_ci95,mean_cost_mean,mean_cost_ci95,messages_mean,\
holds_aborted_mean,planning_s_mean,network_load_mean,time_limit_share,batch_share,self_conflict_share,no_plan_share,\
budget_share,success_first_quarter_mean,success_last_quarter_mean,sites_per_plan_mean,local_transfer_share_mean,\
rounds_per_plan_mean
gridg-n,workflow,bbr-time,0.500000,1,0.000000,0.000000,0.000000,0.000000,1001.000000,1.000000,12.500000,0.250000,\
0.000000,0.000000,0.000000,1.000000,0.000000,0.000000,0.000000,1.500000,0.250000,3.010000
gridg-n,workflow,bir-time,0.500000,3,0.600000,0.248414,12.000000,4.968275,1002.000000,2.000000,12.500000,0.250000,\
0.000000,0.000000,0.000000,0.400000,0.000000,0.600000,0.600000,1.500000,0.250000,3.020000
";
    assert_eq!(read(&path), expected);

    // Duplicate keys are refused.
    let dup = vec![s[0].clone(), s[0].clone()];
    assert!(write_summary_csv(&dup, &dir.path().join("dup.csv")).is_err());
}

/// A plausible full experiment: 10 algorithms, 2 topologies x 2 kinds, 8 loads,
/// 5 seeds, success falling and cost rising with load.
fn synthetic_runs() -> Vec<RunRow> {
    let algs = [
        "bbr-time",
        "bbr-cost",
        "bbr-load",
        "bbr-random",
        "bir-time",
        "bir-cost",
        "bir-load",
        "bir-random",
        "bbr-overlay-time",
        "bbr-overlay-cost",
    ];
    let mut out = Vec::new();
    let mut noise_state = 0x2545_f491_4f6c_dd1du64;
    let mut noise = move || {
        noise_state ^= noise_state << 13;
        noise_state ^= noise_state >> 7;
        noise_state ^= noise_state << 17;
        (noise_state % 10_000) as f64 / 10_000.0 - 0.5
    };
    for topology in ["gridg-n", "gridg-w"] {
        for kind in ["workflow", "coallocation"] {
            for (ai, alg) in algs.iter().enumerate() {
                for li in 1..=8 {
                    let load = li as f64 * 0.25;
                    for seed in 1..=5u64 {
                        let base = if alg.starts_with("bir") { 0.95 } else { 0.85 };
                        let w = if topology == "gridg-w" { 0.05 } else { 0.0 };
                        let success =
                            (base + w - 0.06 * ai as f64 / 3.0 - 0.08 * load + 0.04 * noise()).clamp(0.0, 1.0);
                        let requests = 200;
                        let committed = (success * requests as f64).round() as u64;
                        let cost =
                            if committed == 0 { 0.0 } else { 100.0 + 30.0 * load + 4.0 * ai as f64 + 6.0 * noise() };
                        out.push(RunRow {
                            topology: topology.into(),
                            kind: kind.into(),
                            algorithm: alg.parse().unwrap(),
                            load,
                            seed,
                            requests,
                            committed,
                            success_rate: committed as f64 / requests as f64,
                            mean_cost: cost,
                            messages: 40 * committed,
                            holds_aborted: requests - committed,
                            planning_s_mean: 20.0 + load,
                            network_load: load / 2.0,
                            rejected: Rejections::default(),
                            success_first_quarter: success,
                            success_last_quarter: success,
                            sites_per_plan: 1.0,
                            local_transfer_share: 0.0,
                            rounds: 3 * requests,
                        });
                    }
                }
            }
        }
    }
    out
}

#[test]
fn figures_are_written_for_every_topology_and_kind() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("figs");
    let summary = summarise(&synthetic_runs());
    let paths = write_figures(&summary, &out, XAxis::Cpu, &Drifting::new()).unwrap();
    assert_eq!(paths.len(), 2 * 2 * 2 * 2);
    for stem in [
        "success-gridg-n-workflow",
        "cost-gridg-n-workflow",
        "success-gridg-w-coallocation",
        "cost-gridg-n-coallocation",
    ] {
        assert!(paths.contains(&out.join(format!("{stem}.svg"))), "{stem}");
        assert!(paths.contains(&out.join(format!("{stem}.png"))), "{stem}");
    }
    for p in &paths {
        let bytes = fs::read(p).unwrap();
        assert!(bytes.len() > 1000, "{} is {} bytes", p.display(), bytes.len());
        if p.extension().unwrap() == "png" {
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        } else {
            let svg = String::from_utf8(bytes).unwrap();
            assert!(svg.starts_with("<svg"), "{}", p.display());
            for alg in ["bbr-time", "bir-random", "bbr-overlay-cost"] {
                assert!(svg.contains(alg), "{} lacks {alg}", p.display());
            }
            assert!(svg.contains("offered load"));
        }
    }
    let svg = read(&out.join("cost-gridg-w-workflow.svg"));
    assert!(svg.contains("gridg-w, workflow: average cost"));
    assert!(svg.contains("average cost (per CPU-hour)"));
    let svg = read(&out.join("success-gridg-w-workflow.svg"));
    assert!(svg.contains("gridg-w, workflow: success rate"));

    // Deterministic: drawing again gives the same bytes.
    let again = dir.path().join("again");
    let paths2 = write_figures(&summary, &again, XAxis::Cpu, &Drifting::new()).unwrap();
    for (a, b) in paths.iter().zip(&paths2) {
        assert_eq!(fs::read(a).unwrap(), fs::read(b).unwrap(), "{}", a.display());
    }
}

#[test]
fn figures_handle_edge_cases() {
    let dir = tempfile::tempdir().unwrap();
    // Empty summary: nothing drawn, no error.
    assert!(write_figures(&[], dir.path(), XAxis::Cpu, &Drifting::new()).unwrap().is_empty());
    // One load, one seed, nothing committed anywhere; odd names.
    let mut r = row("bir-time", 1.0, 1, 0, 0.0, 0.0);
    r.topology = "my grid/1".into();
    let paths = write_figures(&summarise(&[r.clone()]), dir.path(), XAxis::Cpu, &Drifting::new()).unwrap();
    assert_eq!(paths[0], dir.path().join("success-my_grid_1-workflow.svg"));
    assert!(paths.iter().all(|p| fs::metadata(p).unwrap().len() > 0));
    // Duplicate summary rows are refused.
    let s = summarise(&[r]);
    assert!(write_figures(&[s[0].clone(), s[0].clone()], dir.path(), XAxis::Cpu, &Drifting::new()).is_err());
}

/// The summary read back from summary.csv draws the same figures (`--replot`).
#[test]
fn summary_csv_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let rows = vec![row("bir-time", 0.5, 1, 50, 0.5, 7.25), row("bbr-overlay-time", 0.5, 1, 60, 0.6, 4.0)];
    let summary = summarise(&rows);
    let path = dir.path().join("summary.csv");
    write_summary_csv(&summary, &path).unwrap();
    assert_eq!(read_summary_csv(&path).unwrap(), summary);
}

#[test]
fn rejections_are_counted_by_reason() {
    let rejected = |reason: &str| Outcome::rejected("r", reason, "p");
    let mut committed = rejected("");
    committed.status = PlanStatus::Committed;
    let outcomes = [
        committed,
        rejected("planning took longer than w_interval (1800 s)"),
        rejected("batch prepare failed: job `B` on site `s1`: over capacity (self-conflict: the plan's own parts hold 10 there at that time)"),
        rejected("batch prepare failed: transfer A->B: link `l` cannot carry the hold"),
        rejected("no feasible plan before the deadline"),
        rejected("deadline cannot be met: the plan starts no earlier than 2026-01-01T00:30:00Z"),
        rejected("search budget of 20000 tentative fixes exhausted"),
        rejected("commit refused: hold expired"),
    ];
    let r = Rejections::of(&outcomes);
    assert_eq!(
        r,
        Rejections {
            rejected_time_limit: 1,
            rejected_batch: 2,
            self_conflicts: 1,
            rejected_no_plan: 2,
            rejected_budget: 1,
            rejected_other: 1,
        }
    );
}

#[test]
fn network_load_is_requested_bandwidth_over_the_sites_attachments() {
    use coreserve::model::{from_time, Link, Node, RawPlanRequest, Site};
    // Two sites, each attached by one 1000 Mbit/s link to a router: attachments 2 x 1000.
    let node = |id: &str| Node::new(id, "");
    let link = |id: &str, a: &str| Link {
        id: id.into(),
        a: a.into(),
        b: "r".into(),
        capacity_mbps: 1000,
        price_per_gbps_hour: 0.1,
    };
    let site = |id: &str, n: &str| Site::new(id, n, 8, "linux", 1.0);
    let grid = Grid::new(
        vec![node("a"), node("b"), node("r")],
        vec![link("la", "a"), link("lb", "b")],
        vec![site("sa", "a"), site("sb", "b")],
    )
    .unwrap();
    // Two requests 100 s apart (period 200 s), each one 100 Mbit/s transfer for 100 s:
    // 2 x (2 ends x 100 x 100) = 40,000 Mbit; per second 200 Mbit/s; over 2,000: 0.1.
    let req = |id: &str, at: i64| {
        let raw: RawPlanRequest = serde_json::from_value(serde_json::json!({
            "id": id, "submitted_at": from_time(at), "deadline": from_time(at + 10_000),
            "jobs": [{"name": "A", "os": "linux", "cpus": 1, "offset_s": 0, "duration_s": 100},
                     {"name": "B", "os": "linux", "cpus": 1, "offset_s": 0, "duration_s": 100}],
            "transfers": [{"from": "A", "to": "B", "bandwidth_mbps": 100, "offset_s": 0, "duration_s": 100}],
        }))
        .unwrap();
        PlanRequest::new(raw).unwrap()
    };
    let requests = [req("r1", 1_767_225_600), req("r2", 1_767_225_700)];
    assert!((network_load(&grid, &requests) - 0.1).abs() < 1e-12);
    assert_eq!(network_load(&grid, &requests[..1]), 0.0, "one request has no arrival period");
}
