//! `coreserve demo`: the main job on real data. Geant2012 (Internet Topology Zoo) as the grid,
//! SDSC-BLUE (Parallel Workloads Archive) as the source of CPU counts, a workflow and a
//! co-allocation workload, all 8 variants of the paper with 3 planners, and one comparison
//! table. README.md shows the table it prints (a test compares them).

use anyhow::{Context, Result};

use super::args::DemoArgs;
use super::compare::{compare_variants, print_table};
use super::{generate, save};
use crate::grid::{self, ImportOptions};
use crate::workload::{self, AppKind, WorkloadParams};

/// Runs the demo (see the module docs); every output goes under `--out`.
///
/// # Errors
/// The data files cannot be read, an output cannot be written, or the checker finds a
/// violation.
pub async fn demo(a: DemoArgs) -> Result<()> {
    let topology = a.data.join("topology-zoo/Geant2012.graphml");
    let trace = a.data.join("swf/SDSC-BLUE-2000-4.2-cln.swf.gz");
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let xml = std::fs::read_to_string(&topology).with_context(|| format!("reading {}", topology.display()))?;
    let g = grid::import_graphml(&xml, &ImportOptions { seed: 1, ..Default::default() })?;
    save(&g, &a.out.join("grid.json"))?;
    let mut groups = Vec::new();
    for &kind in AppKind::ALL {
        let params = WorkloadParams {
            requests: a.requests,
            load: a.load,
            seed: a.planner.seed,
            w_interval_s: a.planner.w_interval_s,
            ..WorkloadParams::for_kind(kind)
        };
        let reqs = generate(&trace, &g, &params)?;
        let path = a.out.join(format!("requests-{kind}.jsonl"));
        workload::write_jsonl(&reqs, &path)?;
        println!("{kind}: {} requests from SDSC-BLUE at offered load {} -> {}", reqs.len(), a.load, path.display());
        let dir = a.out.join(kind.to_string());
        std::fs::create_dir_all(&dir)?;
        let rows = compare_variants(&g, &reqs, &a.planner, Some(&dir), &kind.to_string()).await?;
        groups.push((kind.to_string(), rows));
    }
    print_table(&groups, a.planner.timings);
    println!("\nEvery committed plan of every variant passed the outcome checker (no site or link over capacity at any instant).");
    println!("outputs: {}", a.out.display());
    Ok(())
}
