//! Every committed result still reproduces: each folder of `sim/results/` with a `summary.csv`
//! was written by the scenario of the same name in `sim/scenarios/`, and that scenario's short
//! run (`coreserve-sim FILE --reduced`: its `[reduced]` settings, one load, one seed,
//! short runs) must print exactly the summary committed beside it in `sim/results/reduced/`, to
//! every decimal the summary prints. A change to the planner's plans, to the simulator or to a
//! scenario file fails here until the results are regenerated (sim/RESULTS.md) and the reduced
//! summaries written again:
//!
//! ```sh
//! CORESERVE_SIM_BLESS=1 cargo test --release -p coreserve-sim --test reduced
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn sim_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The committed result folders (those with a `summary.csv`), relative to `sim/results/`,
/// without the reduced summaries themselves.
fn result_folders(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if !p.is_dir() || (rel.as_os_str().is_empty() && p.file_name().unwrap() == "reduced") {
            continue;
        }
        let r = rel.join(p.file_name().unwrap());
        if p.join("summary.csv").is_file() {
            out.push(r.clone());
        }
        result_folders(&p, &r, out);
    }
}

/// `sensitivity/base` -> `sensitivity-base.csv`.
fn reduced_name(folder: &Path) -> String {
    let parts: Vec<_> = folder.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    format!("{}.csv", parts.join("-"))
}

#[test]
fn every_committed_scenario_reproduces_its_reduced_summary() {
    let sim = sim_dir();
    let mut folders = Vec::new();
    result_folders(&sim.join("results"), Path::new(""), &mut folders);
    assert!(folders.len() >= 10, "committed result folders: {folders:?}");
    let bless = std::env::var_os("CORESERVE_SIM_BLESS").is_some_and(|v| v != "0");
    let mut failures = Vec::new();
    for folder in &folders {
        let scenario = sim.join("scenarios").join(folder).with_extension("toml");
        assert!(scenario.is_file(), "{} has no scenario {}", folder.display(), scenario.display());
        let out = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let o = Command::new(env!("CARGO_BIN_EXE_coreserve-sim"))
            .args([scenario.to_str().unwrap(), "--reduced", "--out", out.path().to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{}: {}{}",
            scenario.display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let got = std::fs::read_to_string(out.path().join("summary.csv")).unwrap();
        let committed = sim.join("results/reduced").join(reduced_name(folder));
        eprintln!("{}: {:.1} s", folder.display(), started.elapsed().as_secs_f64());
        if bless {
            std::fs::create_dir_all(committed.parent().unwrap()).unwrap();
            std::fs::write(&committed, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&committed)
            .unwrap_or_else(|e| panic!("{}: {e} (write it with CORESERVE_SIM_BLESS=1)", committed.display()));
        if got != want {
            let differ: Vec<_> = got
                .lines()
                .zip(want.lines())
                .filter(|(g, w)| g != w)
                .take(3)
                .map(|(g, w)| format!("    committed {w}\n    now       {g}"))
                .collect();
            failures.push(format!(
                "{} no longer reproduces {} ({} rows now, {} committed; first differing rows:\n{})",
                scenario.display(),
                committed.display(),
                got.lines().count(),
                want.lines().count(),
                differ.join("\n")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
