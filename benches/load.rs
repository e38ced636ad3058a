//! `cargo bench --bench load`: the service's load test (the `coreserve-loadtest` workspace
//! member, `loadtest/`), run against this package's `coreserve` binary, which cargo builds for
//! a bench of its package. Writes the `load` section of BENCHMARKS.md.

mod report;

use std::path::Path;

fn main() -> anyhow::Result<()> {
    let paths = coreserve_loadtest::Paths {
        coreserve: env!("CARGO_BIN_EXE_coreserve").into(),
        data: Path::new(env!("CARGO_MANIFEST_DIR")).join("data"),
        previous: report::read_section("load"),
    };
    let section = coreserve_loadtest::main(&paths)?;
    let heading = report::heading("Service load: POST /v1/plans over HTTP on PostgreSQL", "cargo bench --bench load");
    report::write_markdown("load", &format!("{heading}{section}"));
    println!("section `load` of BENCHMARKS.md written");
    Ok(())
}
