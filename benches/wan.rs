//! `cargo bench --bench wan`: the WAN bench of the `coreserve-loadtest` workspace member
//! (`loadtest/src/wan.rs`): the role-separated service with a delaying proxy between the planner
//! and every participant, run against this package's `coreserve` binary, which cargo builds for
//! a bench of its package. Writes the `wan` section of BENCHMARKS.md.

mod report;

use std::path::Path;

fn main() -> anyhow::Result<()> {
    let section = coreserve_loadtest::wan::main(Path::new(env!("CARGO_BIN_EXE_coreserve")))?;
    let heading = report::heading(
        "WAN: plan latency through a delaying proxy between the planner and its participants",
        "cargo bench --bench wan",
    );
    report::write_markdown("wan", &format!("{heading}{section}"));
    println!("section `wan` of BENCHMARKS.md written");
    Ok(())
}
