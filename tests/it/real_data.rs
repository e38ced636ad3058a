//! End-to-end runs on real data: the Geant2012 topology (Internet Topology Zoo) and requests
//! drawn from the SDSC-BLUE trace, replayed through 3 competing planners for all 8 variants.
//! Every batch must pass the outcome checker: no site and no link over capacity at any instant,
//! OS and timing right, deadlines met, paths joining the jobs' sites, costs adding up.

use std::path::{Path, PathBuf};
use std::process::Command;

use coreserve::check::check_outcomes;
use coreserve::grid::{import_graphml, ImportOptions};
use coreserve::model::{Grid, Outcome, PlanRequest, PlanStatus, ReservationMethod, SelectionPolicy};
use coreserve::replay::{replay, ReplayOptions, Summary};
use coreserve::workload::{generate, procs_of, read_swf, AppKind, WorkloadParams};

use crate::support::machine;

fn data(rel: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("data").join(rel);
    assert!(p.exists(), "{} not found: the repository's data/ folder is incomplete", p.display());
    p
}

/// Every file of `data/` is the one its source published: the SHA-256 of each file listed in
/// `data/SHA256SUMS` matches, and every data file is listed.
#[test]
fn data_files_match_their_checksums() {
    use sha2::{Digest, Sha256};
    let sums = std::fs::read_to_string(data("SHA256SUMS")).unwrap();
    let mut listed = Vec::new();
    for line in sums.lines().filter(|l| !l.trim().is_empty()) {
        let (hash, rel) = line.split_once("  ").expect("sha256sum format: HASH  PATH");
        let bytes = std::fs::read(data(rel)).unwrap();
        assert_eq!(hex::encode(Sha256::digest(&bytes)), hash, "{rel} differs from its published file");
        listed.push(rel.to_string());
    }
    for dir in ["swf", "topology-zoo", "wfcommons"] {
        for entry in std::fs::read_dir(data(dir)).unwrap() {
            let name = format!("{dir}/{}", entry.unwrap().file_name().to_string_lossy());
            assert!(name.ends_with("LICENSE") || listed.contains(&name), "{name} has no checksum in data/SHA256SUMS");
        }
    }
    assert_eq!(listed.len(), 7, "the SDSC-BLUE and KTH-SP2 traces, four Topology Zoo graphs and a WfCommons instance");
}

fn geant() -> Grid {
    let xml = std::fs::read_to_string(data("topology-zoo/Geant2012.graphml")).unwrap();
    import_graphml(&xml, &ImportOptions { seed: 3, ..Default::default() }).unwrap()
}

fn requests(g: &Grid, kind: AppKind, n: usize, load: f64) -> Vec<PlanRequest> {
    let procs = procs_of(&read_swf(&data("swf/SDSC-BLUE-2000-4.2-cln.swf.gz")).unwrap());
    generate(&procs, g.total_cpus(), &WorkloadParams { requests: n, load, seed: 5, ..WorkloadParams::for_kind(kind) })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_variants_on_geant_and_sdsc_blue_never_overbook() {
    let _machine = machine::reserve("real_data").await;
    let g = geant();
    for &kind in AppKind::ALL {
        // A high load, so that planners really compete for the same sites and links.
        let reqs = requests(&g, kind, 300, 1.5);
        let mut success = Vec::new();
        for &method in ReservationMethod::ALL {
            // the paper's two methods and bbr-overlay
            for &policy in SelectionPolicy::ALL {
                // Racing planners on real threads: the contention of separate processes.
                let opts = ReplayOptions { planners: 3, policy, method, seed: 9, racing: true, ..Default::default() };
                let outcomes = replay(&g, reqs.clone(), &opts).await;
                assert_eq!(outcomes.len(), reqs.len());
                let violations = check_outcomes(&g, &reqs, &outcomes, opts.w_interval_s);
                assert!(
                    violations.is_empty(),
                    "{kind} {method}-{policy}: {:?}",
                    &violations[..violations.len().min(5)]
                );
                let s = Summary::of(&outcomes);
                assert!(s.committed > 0, "{kind} {method}-{policy} committed nothing");
                assert!(
                    outcomes.iter().all(|o| (o.status == PlanStatus::Rejected) == o.reason.is_some()),
                    "every rejection has a reason, and only rejections"
                );
                success.push(((method, policy), s.success_rate));
            }
        }
        let rate = |m, p| success.iter().find(|(k, _)| *k == (m, p)).unwrap().1;
        // Ando & Aida's first finding, on real data: incremental holds beat batch reservation.
        for &p in SelectionPolicy::ALL {
            assert!(
                rate(ReservationMethod::Bir, p) >= rate(ReservationMethod::Bbr, p),
                "{kind} {p}: BIR {} < BBR {}",
                rate(ReservationMethod::Bir, p),
                rate(ReservationMethod::Bbr, p)
            );
        }
    }
}

/// The outcomes of a replay without their wall-clock planning times and with the random hold
/// and transaction ids that a rejection's reason may name replaced by `<id>`.
fn without_timings(outcomes: Vec<Outcome>) -> Vec<Outcome> {
    let scrub = |r: String| {
        r.split(' ').map(|w| if uuid::Uuid::parse_str(w).is_ok() { "<id>" } else { w }).collect::<Vec<_>>().join(" ")
    };
    outcomes.into_iter().map(|o| Outcome { planning_ms: 0.0, reason: o.reason.map(scrub), ..o }).collect()
}

/// The default (deterministic) replay gives the same outcomes every time for the same
/// requests and seed, while its 3 planners still compete (every planner serves requests, and
/// BIR holds of one planner make another back off).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deterministic_replays_give_identical_outcomes() {
    let _machine = machine::reserve("real_data").await;
    let g = geant();
    for &kind in AppKind::ALL {
        let reqs = requests(&g, kind, 300, 1.5);
        for &method in ReservationMethod::PAPER {
            let opts =
                ReplayOptions { planners: 3, policy: SelectionPolicy::Random, method, seed: 9, ..Default::default() };
            let first = without_timings(replay(&g, reqs.clone(), &opts).await);
            let second = without_timings(replay(&g, reqs.clone(), &opts).await);
            if let Some(i) = (0..first.len()).find(|&i| first[i] != second[i]) {
                panic!(
                    "{kind} {method}: two deterministic replays differ at request {i}:\n{:?}\n{:?}",
                    first[i], second[i]
                );
            }
            let planners: std::collections::BTreeSet<&str> = first.iter().map(|o| o.planner.as_str()).collect();
            assert_eq!(planners.len(), 3, "{kind} {method}: every planner served requests");
            let other_seed =
                without_timings(replay(&g, reqs.clone(), &ReplayOptions { seed: 10, ..opts.clone() }).await);
            assert!(first != other_seed, "{kind} {method}: the seed changes the replay");
        }
    }
}

/// The command line as the issue names it: `grid import-graphml`, `grid generate`, `workload`
/// and `plan`, with their exact flags, on real files.
#[test]
fn command_line_round_trip_on_real_files() {
    let _machine = machine::reserve_blocking("real_data");
    let dir = tempfile::tempdir().unwrap();
    let out = |name: &str| dir.path().join(name);
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_coreserve")).args(args).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "coreserve {args:?} failed:\n{text}");
        text
    };
    let p = |b: &PathBuf| b.to_str().unwrap().to_owned();
    let (grid, reqs, outs) = (out("grid.json"), out("requests.jsonl"), out("outcomes.jsonl"));
    let geant = data("topology-zoo/Geant2012.graphml");
    let trace = data("swf/SDSC-BLUE-2000-4.2-cln.swf.gz");
    let text = run(&["grid", "import-graphml", &p(&geant), "--seed", "1", "--out", &p(&grid)]);
    assert!(text.contains("40 nodes, 61 links, 40 sites"), "{text}");
    run(&[
        "workload",
        "--trace",
        &p(&trace),
        "--grid",
        &p(&grid),
        "--kind",
        "coallocation",
        "--requests",
        "120",
        "--load",
        "0.8",
        "--seed",
        "2",
        "--out",
        &p(&reqs),
    ]);
    let text = run(&[
        "plan",
        "--grid",
        &p(&grid),
        "--requests",
        &p(&reqs),
        "--policy",
        "time",
        "--mode",
        "bir",
        "--planners",
        "3",
        "--out",
        &p(&outs),
    ]);
    assert!(text.contains("requests 120") && text.contains("checker violations 0"), "{text}");
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&outs).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 120);
    for key in ["request_id", "status", "jobs", "transfers", "cost", "planning_ms", "planner"] {
        assert!(lines.iter().all(|l| l.get(key).is_some()), "every outcome has `{key}`");
    }
    let committed = lines.iter().find(|l| l["status"] == "committed").expect("some plan committed");
    for key in ["name", "site", "start", "end", "cpus"] {
        assert!(committed["jobs"][0].get(key).is_some(), "job placement has `{key}`");
    }
    for key in ["from", "to", "path", "bandwidth_mbps", "start", "end"] {
        assert!(committed["transfers"][0].get(key).is_some(), "transfer placement has `{key}`");
    }
    for kind in ["gridg-n", "gridg-w", "fat-tree"] {
        let g = out(&format!("{kind}.json"));
        run(&["grid", "generate", kind, "--seed", "4", "--out", &p(&g)]);
        let grid: Grid = serde_json::from_str(&std::fs::read_to_string(&g).unwrap()).unwrap();
        assert!(!grid.sites().is_empty());
    }
    // Bad input: a clear error, non-zero exit, nothing written.
    let o = Command::new(env!("CARGO_BIN_EXE_coreserve"))
        .args(["plan", "--grid", &p(&grid), "--requests", &p(&grid), "--out", &p(&out("never.jsonl"))])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(!out("never.jsonl").exists());
}

/// `coreserve demo` (defaults: 1000 requests of each kind, seed 1) prints exactly the table that
/// README.md shows: the replays are deterministic whatever the process's hashing, the thread
/// timing or the machine.
#[test]
fn demo_prints_the_table_of_the_readme() {
    let _machine = machine::reserve_blocking("real_data");
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_coreserve"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["demo", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "coreserve demo failed:\n{stdout}{}", String::from_utf8_lossy(&o.stderr));
    let table = |text: &str| -> Vec<String> {
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.iter().position(|l| l.starts_with("workload ")).expect("a table");
        lines[start..]
            .iter()
            .take_while(|l| !l.trim().is_empty() && !l.starts_with("```"))
            .map(|l| l.to_string())
            .collect()
    };
    let printed = table(&stdout);
    assert_eq!(printed.len(), 17, "a header and 16 variants:\n{stdout}");
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    assert_eq!(table(&readme), printed, "README.md's demo table is not what `coreserve demo` prints");
}
