//! `coreserve demo`: the main job on real data. Geant2012 (Internet Topology Zoo) as the grid,
//! SDSC-BLUE (Parallel Workloads Archive) as the source of CPU counts, a workflow and a
//! co-allocation workload, all 8 variants of the paper with 3 planners, and one comparison
//! table. README.md shows the table it prints (a test compares them).
//!
//! `--heterogeneity mixed` runs the same comparison on heterogeneous sites: Geant2012's sites get
//! drawn attributes ([`grid::heterogenize`]) and the jobs drawn requirements
//! ([`RequirementsProfile::Mixed`]); the outcome checker then also verifies that every job sits
//! on a site that can run it, with its GPUs reserved.

use anyhow::{Context, Result};

use super::args::DemoArgs;
use super::compare::{compare_variants, print_table};
use super::{generate, save};
use crate::grid::{self, Heterogeneity, ImportOptions};
use crate::model::{unmet, Grid, PlanRequest};
use crate::workload::{self, AppKind, RequirementsProfile, WorkloadParams};

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
    let heterogeneous = a.heterogeneity != Heterogeneity::None;
    let g = grid::heterogenize(g, a.heterogeneity, 1);
    save(&g, &a.out.join("grid.json"))?;
    let requirements = if heterogeneous { RequirementsProfile::Mixed } else { RequirementsProfile::None };
    let mut groups = Vec::new();
    for &kind in AppKind::ALL {
        let params = WorkloadParams {
            requests: a.requests,
            load: a.load,
            seed: a.planner.seed,
            w_interval_s: a.planner.w_interval_s,
            requirements,
            ..WorkloadParams::for_kind(kind)
        };
        let reqs = generate(&trace, &g, &params)?;
        let path = a.out.join(format!("requests-{kind}.jsonl"));
        workload::write_jsonl(&reqs, &path)?;
        outln!("{kind}: {} requests from SDSC-BLUE at offered load {} -> {}", reqs.len(), a.load, path.display());
        if heterogeneous {
            let jobs = reqs.iter().map(|r| r.jobs().len()).sum::<usize>();
            let constrained = reqs.iter().flat_map(PlanRequest::jobs).filter(|j| !j.requires.is_empty()).count();
            outln!(
                "{kind}: {constrained} of {jobs} jobs carry requirements (architecture, extensions, GPUs, software); \
                 {} requests have a job no site can run",
                reqs.iter().filter(|r| !runnable(&g, r)).count()
            );
        }
        let dir = a.out.join(kind.to_string());
        std::fs::create_dir_all(&dir)?;
        let rows = compare_variants(&g, &reqs, &a.planner, Some(&dir), &kind.to_string()).await?;
        groups.push((kind.to_string(), rows));
    }
    print_table(&groups, a.planner.timings);
    outln!("\nEvery committed plan of every variant passed the outcome checker (no site or link over capacity at any instant).");
    if heterogeneous {
        outln!(
            "Requirements included: every committed job sits on a site that can run it (architecture, generation, \
             extensions, GPUs, software with its dependencies), its GPUs reserved with its CPUs."
        );
    }
    outln!("outputs: {}", a.out.display());
    Ok(())
}

/// True when every job of `r` has a site of `g` that can run it.
fn runnable(g: &Grid, r: &PlanRequest) -> bool {
    r.jobs().iter().all(|j| g.sites().iter().any(|s| unmet(s, j).is_none()))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    /// `demo --heterogeneity mixed` on 24 requests of each kind: sites with GPUs, jobs with
    /// requirements, and every variant's outcomes pass the checker (requirements included),
    /// or `demo` fails.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_heterogeneous_demo_plans_jobs_with_requirements() {
        let out = tempfile::tempdir().unwrap();
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/data");
        let cli = Cli::try_parse_from([
            "coreserve",
            "demo",
            "--heterogeneity",
            "mixed",
            "--requests",
            "24",
            "--data",
            data,
            "--out",
            out.path().to_str().unwrap(),
        ])
        .unwrap();
        let Command::Demo(a) = cli.command else { panic!("a demo command") };
        demo(a).await.unwrap();
        let g = grid::load_grid(&out.path().join("grid.json")).unwrap();
        assert!(g.sites().iter().any(|s| !s.attributes.gpus.is_empty()), "sites with GPUs");
        for kind in ["workflow", "coallocation"] {
            let reqs = workload::read_jsonl(&out.path().join(format!("requests-{kind}.jsonl"))).unwrap();
            assert_eq!(reqs.len(), 24);
            assert!(reqs.iter().flat_map(PlanRequest::jobs).any(|j| !j.requires.is_empty()), "{kind}: requirements");
            let outcomes = std::fs::read_to_string(out.path().join(kind).join("outcomes-bir-time.jsonl")).unwrap();
            assert!(outcomes.contains("\"committed\""), "{kind}: something is booked");
        }
    }
}
