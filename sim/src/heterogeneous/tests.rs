//! Tests of the heterogeneity experiment: the CSV headers, the arms' placements and pinning.

use std::collections::HashSet;

use coreserve::model::{
    from_time, unmet, Arch, GpuPool, Link, Node, RawPlanRequest, ReservationMethod, SelectionPolicy, Site,
};
use serde::Serialize;

use super::arms::{os_only, pin_to_types, site_type, type_label};
use super::*;
use crate::algorithm::Algorithm;
use crate::scenario::heterogeneity::TypeChoice;

const T0: i64 = 1_767_225_600;

fn scenario() -> Scenario {
    let mut s: Scenario =
        toml::from_str("name = 't'\ntrace = 'unused'\nloads = [1.0]\nseeds = 1\nrequests = 1\nplanners = 1").unwrap();
    s.dir = ".".into();
    s
}

fn key(policy: SelectionPolicy) -> RunKey {
    RunKey {
        topology: "t".into(),
        kind: "workflow".into(),
        algorithm: Algorithm { method: ReservationMethod::Bir, policy },
        load: 1.0,
        seed: 1,
    }
}

/// A linux site of 16 CPUs at `price` on its own node, with `arch` and optionally 4 A100s.
fn site(id: &str, price: f64, arch: Arch, gpu: bool) -> Site {
    let mut s = Site::new(id, id, 16, "linux", price);
    s.attributes.arch = arch;
    if gpu {
        s.attributes.gpus = vec![GpuPool { model: "a100".into(), count: 4, compute_capability: 8.0, memory_gib: 40 }];
    }
    s
}

/// `sites` on a star of 10 Gbit/s links around a router `hub`.
fn grid(sites: Vec<Site>) -> Grid {
    let mut nodes = vec![Node::new("hub", "")];
    let mut links = Vec::new();
    for s in &sites {
        nodes.push(Node::new(s.node.as_str(), ""));
        links.push(Link {
            id: format!("l-{}", s.id).into(),
            a: "hub".into(),
            b: s.node.clone(),
            capacity_mbps: 10_000,
            price_per_gbps_hour: 0.1,
        });
    }
    label_types(Grid::new(nodes, links, sites).unwrap())
}

/// A request arriving at `T0 + at` with `jobs` (no transfers), 8 CPUs each for 10 min.
fn request(id: &str, at: i64, jobs: &[serde_json::Value]) -> PlanRequest {
    let jobs: Vec<serde_json::Value> = jobs
        .iter()
        .enumerate()
        .map(|(i, requires)| {
            serde_json::json!({"name": format!("J{i}"), "os": "linux", "cpus": 8, "offset_s": 0,
                "duration_s": 600, "requires": requires})
        })
        .collect();
    let raw: RawPlanRequest = serde_json::from_value(serde_json::json!({
        "id": id, "submitted_at": from_time(T0 + at), "deadline": from_time(T0 + at + 86_400),
        "jobs": jobs, "transfers": [],
    }))
    .unwrap();
    PlanRequest::new(raw).unwrap()
}

/// The CSV headers are the rows' serde field names, in order.
#[test]
fn csv_headers_match_the_rows() {
    let row = HetRow {
        topology: "t".into(),
        kind: "workflow".into(),
        algorithm: "bir-time".parse().unwrap(),
        arm: Arm::PerType,
        load: 1.0,
        seed: 1,
        requests: 1,
        runnable: 1,
        split: 0,
        committed: 1,
        valid: 1,
        jobs: 1,
        valid_jobs: 1,
        success_rate: 1.0,
        placement_validity: 1.0,
        job_validity: 1.0,
        valid_success: 1.0,
        mean_wait_s: 1800.0,
    };
    assert_eq!(serde_header(&row), RUNS_HEADER.join(","));
    let summary = summarise(&[row.clone(), HetRow { seed: 2, ..row.clone() }]);
    assert_eq!(summary.len(), 1);
    assert_eq!((summary[0].runs, summary[0].wait_s_mean, summary[0].wait_s_ci95), (2, 1800.0, 0.0));
    assert_eq!(serde_header(&summary[0]), SUMMARY_HEADER.join(","));
    let single = HetRow { arm: Arm::Filter, success_rate: 0.9, mean_wait_s: 1900.0, ..row.clone() };
    let typed = HetRow { success_rate: 0.7, mean_wait_s: 2000.0, ..row.clone() };
    let p = paired(&[typed.clone(), single.clone(), HetRow { seed: 2, ..typed }, HetRow { seed: 2, ..single }]);
    assert_eq!(p.len(), 1);
    assert_eq!((p[0].seeds, p[0].ahead, p[0].waits, p[0].longer), (2, 2, 2, 2));
    assert!((p[0].success.0 - 0.2).abs() < 1e-12 && (p[0].wait.0 - 100.0).abs() < 1e-9, "{p:?}");
}

fn serde_header<T: Serialize>(row: &T) -> String {
    let mut w = csv::Writer::from_writer(vec![]);
    w.serialize(row).unwrap();
    let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
    text.lines().next().unwrap().to_owned()
}

/// A cheap x86_64 site without GPUs and a dear aarch64 one with GPUs; one job needs aarch64
/// and a GPU, one needs nothing. With `cost`, OS-only matching puts the first on the cheap
/// site, which cannot run it (validity 1/2); the filter puts it on the GPU site (2/2).
#[test]
fn os_only_matching_misplaces_a_gpu_job_and_the_filter_does_not() {
    let g = grid(vec![site("cheap", 0.5, Arch::X86_64, false), site("gpu", 1.5, Arch::Aarch64, true)]);
    let needs = serde_json::json!({"arch": "aarch64", "gpus": {"count": 1}});
    let drawn = vec![request("r0", 0, &[needs]), request("r1", 10, &[serde_json::json!({})])];
    let s = scenario();
    let k = key(SelectionPolicy::Cost);
    let counted: HashSet<String> = drawn.iter().map(|r| r.id().to_owned()).collect();
    let (filter, fo) = one_run(&s, &k, Arm::Filter, &g, &drawn, &drawn, &counted, 0, 2).unwrap();
    assert_eq!((filter.committed, filter.valid), (2, 2), "{fo:?}");
    assert_eq!(fo[0].jobs[0].site.as_str(), "gpu");
    assert_eq!(fo[0].jobs[0].gpus.as_ref().map(|g| g.count), Some(1), "the filter arm reserves the GPU");
    assert_eq!(filter.placement_validity, 1.0);
    let stripped = os_only(&drawn);
    let (os, oo) = one_run(&s, &k, Arm::OsOnly, &g, &drawn, &stripped, &counted, 0, 2).unwrap();
    assert_eq!(oo[0].jobs[0].site.as_str(), "cheap", "OS-only matching picks the cheapest linux site");
    assert_eq!((os.committed, os.valid, os.jobs, os.valid_jobs), (2, 1, 2, 1));
    assert!(os.placement_validity < 1.0);
    assert_eq!((os.placement_validity, os.valid_success), (0.5, 0.5));
    assert_eq!(unmet(g.site("cheap").unwrap(), &drawn[0].jobs()[0]).map(|u| u.rank()), Some(2), "architecture");
}

/// Two x86_64 CPU sites, an x86_64 GPU site and an aarch64 site. Unconstrained requests are
/// spread over the types by CPUs; a GPU job goes to the GPU type; a request with an
/// aarch64 job and a GPU job is split. Every job lands on a site of its pinned type.
#[test]
fn a_pinned_request_lands_only_on_sites_of_its_type() {
    let g = grid(vec![
        site("x1", 1.0, Arch::X86_64, false),
        site("x2", 1.0, Arch::X86_64, false),
        site("g", 1.0, Arch::X86_64, true),
        site("r", 1.0, Arch::Aarch64, false),
    ]);
    let free = serde_json::json!({});
    let gpu = serde_json::json!({"gpus": {"count": 1}});
    let arm = serde_json::json!({"arch": "aarch64"});
    let mut drawn: Vec<PlanRequest> =
        (0..12).map(|i| request(&format!("u{i}"), 60 * i, std::slice::from_ref(&free))).collect();
    drawn.push(request("gpu", 900, &[gpu.clone(), free.clone()]));
    drawn.push(request("mixed", 960, &[arm, gpu]));
    let pinned = pin_to_types(&g, &drawn, 7, TypeChoice::Weighted);
    let label_of = |r: &PlanRequest, i: usize| -> String {
        let l: Vec<&String> = r.jobs()[i].requires.labels.iter().filter(|l| l.starts_with("type:")).collect();
        assert_eq!(l.len(), 1, "one type per job: {r:?}");
        l[0].clone()
    };
    let mut used = HashSet::new();
    for r in &pinned.requests[..12] {
        used.insert(label_of(r, 0));
    }
    assert!(used.len() >= 2, "unconstrained requests are spread over the types: {used:?}");
    let gpu_req = &pinned.requests[12];
    assert_eq!((label_of(gpu_req, 0), label_of(gpu_req, 1)), ("type:x86_64-gpu".into(), "type:x86_64-gpu".into()));
    let mixed = &pinned.requests[13];
    assert_eq!((label_of(mixed, 0), label_of(mixed, 1)), ("type:aarch64-cpu".into(), "type:x86_64-gpu".into()));
    assert_eq!(pinned.split, [vec![false; 13], vec![true]].concat());
    let largest = pin_to_types(&g, &drawn, 7, TypeChoice::Largest);
    assert!(
        largest.requests[..12].iter().all(|r| label_of(r, 0) == "type:x86_64-cpu"),
        "`largest` sends every unconstrained request to the type with the most CPUs"
    );
    assert_eq!(label_of(&largest.requests[12], 0), "type:x86_64-gpu");
    let counted: HashSet<String> = drawn.iter().map(|r| r.id().to_owned()).collect();
    let (row, outcomes) =
        one_run(&scenario(), &key(SelectionPolicy::Time), Arm::PerType, &g, &drawn, &pinned.requests, &counted, 1, 14)
            .unwrap();
    assert_eq!(row.committed, 14, "{outcomes:?}");
    for (o, r) in outcomes.iter().zip(&pinned.requests) {
        assert_eq!(o.request_id, r.id());
        for (i, j) in o.jobs.iter().enumerate() {
            let site = g.site(&j.site).unwrap();
            assert_eq!(type_label(&site_type(site)), label_of(r, i), "{} job {} on {}", r.id(), j.name, j.site);
        }
    }
}
