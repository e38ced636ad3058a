//! The same scenario and seed give byte-identical outputs (reproducible runs; docs/simulator.md).

use std::path::Path;
use std::process::Command;

fn run(out: &Path) {
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/smoke.toml");
    let o = Command::new(env!("CARGO_BIN_EXE_coreserve-sim"))
        .args([scenario.to_str().unwrap(), "--out", out.to_str().unwrap(), "--seeds", "1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
}

#[test]
fn smoke_twice_gives_identical_outputs() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run(a.path());
    run(b.path());
    let mut files: Vec<_> = std::fs::read_dir(a.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    files.sort();
    for name in ["runs.csv", "summary.csv"] {
        assert!(files.iter().any(|f| f == name), "{name} written");
    }
    assert!(files.iter().any(|f| f.to_string_lossy().ends_with(".svg")), "figures written: {files:?}");
    for f in &files {
        let (x, y) = (std::fs::read(a.path().join(f)).unwrap(), std::fs::read(b.path().join(f)).unwrap());
        assert!(!x.is_empty(), "{f:?} is empty");
        assert!(x == y, "{f:?} differs between two runs of the same scenario and seed");
    }
    // 2 topologies x 2 kinds x 9 algorithms x 3 loads x 1 seed.
    let runs = std::fs::read_to_string(a.path().join("runs.csv")).unwrap();
    assert_eq!(runs.lines().count(), 1 + 2 * 2 * 9 * 3);
}
