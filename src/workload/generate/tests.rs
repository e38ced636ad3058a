use std::collections::HashMap;
use std::path::Path;

use super::*;

/// A small stand-in for a trace: clamped to [8, 128] it is 8, 8, 16, 64, 128, 128.
const TRACE: &[u32] = &[1, 8, 16, 64, 256, 1152];
const TOTAL_CPUS: u64 = 1000;

fn params(kind: AppKind, requests: usize) -> WorkloadParams {
    WorkloadParams { requests, ..WorkloadParams::for_kind(kind) }
}

/// Pearson's chi-square statistic of `counts` against expected `weights` (any scale).
fn chi2<K: std::hash::Hash + Eq>(counts: &HashMap<K, usize>, expected: &[(K, f64)]) -> f64 {
    let n: usize = counts.values().sum();
    let wsum: f64 = expected.iter().map(|e| e.1).sum();
    assert_eq!(counts.len(), expected.len(), "a value outside the expected support was generated");
    expected
        .iter()
        .map(|(k, w)| {
            let e = n as f64 * w / wsum;
            let o = *counts.get(k).unwrap_or(&0) as f64;
            (o - e).powi(2) / e
        })
        .sum()
}

fn count<K: std::hash::Hash + Eq>(it: impl Iterator<Item = K>) -> HashMap<K, usize> {
    let mut m = HashMap::new();
    for k in it {
        *m.entry(k).or_insert(0) += 1;
    }
    m
}

// Critical values of chi-square at p = 0.001: df 2 -> 13.82, df 3 -> 16.27, df 5 -> 20.52,
// df 9 -> 27.88. The seeds are fixed, so these tests are deterministic.

#[test]
fn ratios_hold_over_10000_requests() {
    let reqs = generate(TRACE, TOTAL_CPUS, &params(AppKind::Coallocation, 10_000)).unwrap();
    assert_eq!(reqs.len(), 10_000);
    let jobs = || reqs.iter().flat_map(|r| r.jobs().iter());
    let os = count(jobs().map(|j| j.os.clone()));
    let x = chi2(&os, &[("linux".to_string(), 1.0), ("solaris".to_string(), 1.0), ("bsd".to_string(), 1.0)]);
    assert!(x < 13.82, "OS chi2 {x}: {os:?}");

    // co-allocation: one duration per request (workflow durations can be extended)
    let durs = count(reqs.iter().map(|r| r.jobs()[0].duration_s));
    let x = chi2(&durs, &[(600, 2.0), (1200, 2.0), (1800, 2.0), (3600, 2.0), (5400, 1.0), (7200, 1.0)]);
    assert!(x < 20.52, "duration chi2 {x}: {durs:?}");

    let bws = count(reqs.iter().flat_map(|r| r.transfers().iter().map(|t| t.bandwidth_mbps)));
    let x = chi2(&bws, &[(500, 6.0), (1000, 3.0), (2000, 1.0)]);
    assert!(x < 13.82, "bandwidth chi2 {x}: {bws:?}");

    let cpus = count(jobs().map(|j| j.cpus));
    let x = chi2(&cpus, &[(8, 2.0), (16, 1.0), (64, 1.0), (128, 2.0)]);
    assert!(x < 16.27, "cpu chi2 {x}: {cpus:?}");

    let users = count(reqs.iter().map(|r| r.user().to_owned()));
    let expected: Vec<(String, f64)> = (1..=10).map(|u| (format!("user-{u}"), 1.0)).collect();
    let x = chi2(&users, &expected);
    assert!(x < 27.88, "user chi2 {x}: {users:?}");

    // deadline factor f = (deadline - submitted - w) / span: mean 5, sd 1.02, 95 % in [3, 7]
    let f: Vec<f64> =
        reqs.iter().map(|r| (r.deadline() - r.submitted_at() - 1800) as f64 / r.span_s() as f64).collect();
    let mean = f.iter().sum::<f64>() / f.len() as f64;
    let sd = (f.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (f.len() - 1) as f64).sqrt();
    let inside = f.iter().filter(|&&x| (3.0..=7.0).contains(&x)).count() as f64 / f.len() as f64;
    assert!((mean - 5.0).abs() < 0.05, "mean factor {mean}");
    assert!((sd - 1.02).abs() < 0.05, "sd factor {sd}");
    assert!((inside - 0.95).abs() < 0.01, "share in [3, 7]: {inside}");
    assert!(f.iter().all(|&x| x >= 1.0));
}

#[test]
fn workflow_durations_and_transfer_durations_follow_the_table_before_extension() {
    let reqs = generate(TRACE, TOTAL_CPUS, &params(AppKind::Workflow, 10_000)).unwrap();
    // job A (a source) is never extended, so its duration is a clean draw
    let durs = count(reqs.iter().map(|r| r.jobs()[0].duration_s));
    let x = chi2(&durs, &[(600, 2.0), (1200, 2.0), (1800, 2.0), (3600, 2.0), (5400, 1.0), (7200, 1.0)]);
    assert!(x < 20.52, "duration chi2 {x}: {durs:?}");
    // transfer durations are capped, so they are table values no longer than either job
    for r in &reqs {
        for t in r.transfers() {
            assert!([600, 1200, 1800, 3600, 5400, 7200].contains(&t.duration_s.unwrap()));
        }
    }
}

#[test]
fn every_request_validates_and_round_trips_through_jsonl() {
    for kind in AppKind::ALL {
        let reqs = generate(TRACE, TOTAL_CPUS, &params(*kind, 500)).unwrap();
        for r in &reqs {
            PlanRequest::new(r.raw().clone()).unwrap();
            assert!(r.jobs().iter().all(|j| (8..=128).contains(&j.cpus)));
            assert_eq!((0..r.jobs().len()).map(|j| r.job_span(j).offset_s).min(), Some(0));
            assert!(r.deadline() >= r.submitted_at() + 1800 + r.span_s());
        }
        assert_eq!(reqs[0].id(), "req-000001");
        assert_eq!(reqs[499].id(), "req-000500");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("requests.jsonl");
        write_jsonl(&reqs, &path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 500);
        assert!(text.starts_with(r#"{"id":"req-000001","user":"user-"#));
        assert_eq!(read_jsonl(&path).unwrap(), reqs);
    }
}

#[test]
fn coallocation_offsets_and_durations_are_all_equal() {
    let reqs = generate(TRACE, TOTAL_CPUS, &params(AppKind::Coallocation, 1000)).unwrap();
    for r in &reqs {
        assert_eq!(r.jobs().len(), 4);
        assert_eq!(r.transfers().len(), 6);
        let d = r.jobs()[0].duration_s;
        assert!(r.jobs().iter().all(|j| j.offset_s == Some(0) && j.duration_s == d));
        assert!(r.transfers().iter().all(|t| t.offset_s == Some(0) && t.duration_s == Some(d)));
        let mut pairs: Vec<(String, String)> = r.transfers().iter().map(|t| (t.from.clone(), t.to.clone())).collect();
        pairs.sort();
        pairs.dedup();
        assert_eq!(pairs.len(), 6);
    }
}

#[test]
fn workflow_transfers_lie_inside_both_jobs_and_end_with_the_sender() {
    let reqs = generate(TRACE, TOTAL_CPUS, &params(AppKind::Workflow, 2000)).unwrap();
    let mut extended = 0;
    for r in &reqs {
        let names: Vec<&str> = r.jobs().iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["A", "B", "C", "D"]);
        let edges: Vec<(&str, &str)> = r.transfers().iter().map(|t| (t.from.as_str(), t.to.as_str())).collect();
        assert_eq!(edges, [("A", "B"), ("A", "C"), ("B", "D"), ("C", "D")]);
        assert_eq!(r.jobs()[0].offset_s, Some(0));
        for i in 0..r.transfers().len() {
            let (u, v) = r.transfer_ends(i);
            let (t, ju, jv) = (r.transfer_span(i), r.job_span(u), r.job_span(v));
            for j in [ju, jv] {
                assert!(t.offset_s >= j.offset_s && t.end_s() <= j.end_s(), "{r:?}");
            }
            assert_eq!(t.end_s(), ju.end_s(), "transfer ends when its sender ends");
            assert!(jv.offset_s < ju.end_s(), "consecutive jobs overlap");
        }
        let d = r.job_span(3);
        if ![600, 1200, 1800, 3600, 5400, 7200].contains(&d.duration_s) {
            extended += 1;
        }
        // D starts at the earlier of its two incoming transfers
        let starts = [r.transfer_span(2).offset_s, r.transfer_span(3).offset_s];
        assert_eq!(d.offset_s, starts[0].min(starts[1]));
    }
    // the extension rule does fire sometimes (B and C end at different times)
    assert!(extended > 0);
}

#[test]
fn workflow_timing_worked_example() {
    // A 3600, B 600, C 7200, D 600; transfers A->B 1200 (capped to 600), A->C 1800,
    // B->D 600, C->D 5400 (capped to 600).
    let (off, dur, tr) =
        workflow_timing(vec![3600, 600, 7200, 600], &[(0, 1), (0, 2), (1, 3), (2, 3)], &[1200, 1800, 600, 5400]);
    // B starts at 3600 - 600 = 3000, ends 3600; C starts at 3600 - 1800 = 1800, ends 9000.
    // D: from B: 3600 - 600 = 3000; from C: 9000 - 600 = 8400 -> offset 3000, extended to 9000.
    assert_eq!(off, vec![0, 3000, 1800, 3000]);
    assert_eq!(dur, vec![3600, 600, 7200, 6000]);
    assert_eq!(tr, vec![(3000, 600), (1800, 1800), (3000, 600), (8400, 600)]);
}

#[test]
fn generation_is_deterministic_and_seed_dependent() {
    for kind in AppKind::ALL {
        let p = params(*kind, 300);
        let a = generate(TRACE, TOTAL_CPUS, &p).unwrap();
        let b = generate(TRACE, TOTAL_CPUS, &p).unwrap();
        assert_eq!(a, b);
        let c = generate(TRACE, TOTAL_CPUS, &WorkloadParams { seed: 2, ..p }).unwrap();
        assert_ne!(a, c);
    }
}

/// Independent streams (docs/simulator.md). Load moves arrivals only; more requests keep the first ones'
/// demands.
#[test]
fn load_changes_only_arrival_times() {
    for kind in AppKind::ALL {
        let lo = generate(TRACE, TOTAL_CPUS, &WorkloadParams { load: 0.3, ..params(*kind, 400) }).unwrap();
        let hi = generate(TRACE, TOTAL_CPUS, &WorkloadParams { load: 0.9, ..params(*kind, 400) }).unwrap();
        let mut moved = 0;
        for (a, b) in lo.iter().zip(&hi) {
            assert_eq!(a.id(), b.id());
            assert_eq!(a.user(), b.user());
            assert_eq!(a.jobs(), b.jobs());
            assert_eq!(a.transfers(), b.transfers());
            assert_eq!(a.deadline() - a.submitted_at(), b.deadline() - b.submitted_at());
            moved += usize::from(a.submitted_at() != b.submitted_at());
        }
        assert!(moved > 390, "arrival times should differ ({moved} of 400 moved)");
        // heavier load -> arrivals 3x denser
        let span = |r: &[PlanRequest]| (r[r.len() - 1].submitted_at() - r[0].submitted_at()) as f64;
        let ratio = span(&lo) / span(&hi);
        assert!((ratio - 3.0).abs() < 0.01, "span ratio {ratio}");

        let more = generate(TRACE, TOTAL_CPUS, &params(*kind, 800)).unwrap();
        let fewer = generate(TRACE, TOTAL_CPUS, &params(*kind, 400)).unwrap();
        for (a, b) in fewer.iter().zip(&more) {
            assert_eq!((a.user(), a.jobs(), a.transfers()), (b.user(), b.jobs(), b.transfers()));
        }
    }
}

#[test]
fn measured_offered_load_matches_the_target() {
    for kind in AppKind::ALL {
        for load in [0.1, 0.5, 1.2] {
            let reqs = generate(TRACE, TOTAL_CPUS, &WorkloadParams { load, seed: 7, ..params(*kind, 5000) }).unwrap();
            assert_eq!(reqs[0].submitted_at(), DEFAULT_START);
            assert!(reqs.windows(2).all(|w| w[0].submitted_at() <= w[1].submitted_at()));
            let cpu_s: f64 = reqs.iter().map(PlanRequest::cpu_seconds).sum();
            let span = (reqs[reqs.len() - 1].submitted_at() - reqs[0].submitted_at()) as f64;
            let measured = cpu_s / (span * TOTAL_CPUS as f64);
            assert!((measured / load - 1.0).abs() < 0.10, "{kind} L={load}: measured {measured}");
        }
    }
}

#[test]
fn custom_shapes_and_discard_model() {
    let p =
        WorkloadParams { shape: Some(Shape::Chain(3)), cpu_model: CpuModel::Discard, ..params(AppKind::Workflow, 300) };
    let reqs = generate(TRACE, TOTAL_CPUS, &p).unwrap();
    for r in &reqs {
        assert_eq!(r.jobs().len(), 3);
        assert_eq!(r.transfers().len(), 2);
        assert!(r.jobs().iter().all(|j| [8, 16, 64].contains(&j.cpus)));
    }
    let p = WorkloadParams { shape: Some(Shape::Edges { jobs: 1, edges: vec![] }), ..params(AppKind::Coallocation, 5) };
    assert!(generate(TRACE, TOTAL_CPUS, &p).unwrap().iter().all(|r| r.transfers().is_empty()));
    let big = Shape::AllPairs(30);
    assert_eq!(big.edges().len(), 435);
    assert_eq!(Shape::job_name(29, 30), "J30");
    let p = WorkloadParams { shape: Some(big), ..params(AppKind::Coallocation, 3) };
    assert_eq!(generate(TRACE, TOTAL_CPUS, &p).unwrap()[0].jobs()[0].name, "J1");
}

#[test]
fn bad_parameters_are_refused() {
    let ok = params(AppKind::Workflow, 10);
    let cases: Vec<(WorkloadParams, &str)> = vec![
        (WorkloadParams { load: 0.0, ..ok.clone() }, "load"),
        (WorkloadParams { load: f64::NAN, ..ok.clone() }, "load"),
        (WorkloadParams { users: 0, ..ok.clone() }, "users"),
        (WorkloadParams { cpu_range: (0, 4), ..ok.clone() }, "cpu_range"),
        (WorkloadParams { cpu_range: (9, 4), ..ok.clone() }, "cpu_range"),
        (WorkloadParams { w_interval_s: -1, ..ok.clone() }, "w_interval_s"),
        (WorkloadParams { os: vec![], ..ok.clone() }, "os"),
        (WorkloadParams { durations_s: vec![(0, 1)], ..ok.clone() }, "durations_s"),
        (WorkloadParams { bandwidths_mbps: vec![(500, 0)], ..ok.clone() }, "bandwidths_mbps"),
        (WorkloadParams { deadline_factor_min: 0.5, ..ok.clone() }, "deadline_factor_min"),
        (WorkloadParams { deadline_factor_sd: -1.0, ..ok.clone() }, "deadline_factor_sd"),
        (WorkloadParams { shape: Some(Shape::Edges { jobs: 2, edges: vec![(1, 0)] }), ..ok.clone() }, "backwards"),
        (WorkloadParams { shape: Some(Shape::Edges { jobs: 2, edges: vec![(0, 2)] }), ..ok.clone() }, "names a job"),
        (WorkloadParams { shape: Some(Shape::Edges { jobs: 2, edges: vec![(0, 1), (0, 1)] }), ..ok.clone() }, "twice"),
        (WorkloadParams { shape: Some(Shape::Chain(0)), ..ok.clone() }, "at least one job"),
    ];
    for (p, needle) in cases {
        let err = generate(TRACE, TOTAL_CPUS, &p).unwrap_err().to_string();
        assert!(err.contains(needle), "`{err}` should mention `{needle}`");
    }
    assert!(matches!(generate(&[], TOTAL_CPUS, &ok), Err(WorkloadError::EmptyTrace)));
    assert!(matches!(generate(TRACE, 0, &ok), Err(WorkloadError::ZeroTotalCpus)));
    let discard = WorkloadParams { cpu_model: CpuModel::Discard, ..ok.clone() };
    assert!(matches!(generate(&[1, 2, 300], TOTAL_CPUS, &discard), Err(WorkloadError::NoCpusInRange { .. })));
    assert!(generate(TRACE, TOTAL_CPUS, &WorkloadParams { requests: 0, ..ok }).unwrap().is_empty());
}

#[test]
fn kind_text_and_params_json() {
    assert_eq!("CoAllocation".parse::<AppKind>().unwrap(), AppKind::Coallocation);
    assert_eq!(AppKind::Workflow.to_string(), "workflow");
    assert!("mpi".parse::<AppKind>().is_err());
    assert_eq!(serde_json::to_string(&AppKind::Coallocation).unwrap(), "\"coallocation\"");
    let p: WorkloadParams = serde_json::from_str(r#"{"kind":"coallocation","load":0.7,"shape":{"chain":3}}"#).unwrap();
    assert_eq!(p.kind, AppKind::Coallocation);
    assert_eq!(p.load, 0.7);
    assert_eq!(p.effective_shape(), Shape::Chain(3));
    assert_eq!(p.w_interval_s, 1800);
    let back: WorkloadParams = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
    assert_eq!(back, p);
    assert_eq!(WorkloadParams::default().effective_shape(), Shape::Diamond);
    assert_eq!(from_time(DEFAULT_START).to_rfc3339(), "2026-01-01T00:00:00+00:00");
}

#[test]
fn jsonl_errors_carry_line_numbers() {
    let good = generate(TRACE, TOTAL_CPUS, &params(AppKind::Workflow, 2)).unwrap();
    let mut buf = Vec::new();
    write_jsonl_to(&good, &mut buf).unwrap();
    let mut text = String::from_utf8(buf).unwrap();
    text.push('\n'); // a blank line is skipped
    assert_eq!(parse_jsonl(text.as_bytes()).unwrap(), good);
    text.push_str("{\"id\":\"x\"}\n");
    match parse_jsonl(text.as_bytes()) {
        Err(WorkloadError::Json { line, .. }) => assert_eq!(line, 4),
        other => panic!("{other:?}"),
    }
    // a syntactically fine but invalid request (deadline before the end) is refused too
    let mut raw = good[0].raw().clone();
    raw.deadline = raw.submitted_at;
    let line = serde_json::to_string(&raw).unwrap();
    let err = parse_jsonl(line.as_bytes()).unwrap_err().to_string();
    assert!(err.contains("line 1") && err.contains("before the earliest possible end"), "{err}");
    assert!(matches!(read_jsonl(Path::new("/nonexistent/x.jsonl")), Err(WorkloadError::Io { .. })));
}
