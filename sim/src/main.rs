//! `coreserve-sim SCENARIO.toml --out DIR`: the command line. Runs a scenario's whole grid of
//! runs (topologies x kinds x algorithms x offered loads x seeds) under virtual time with the
//! production planner and participants through the one runner ([`experiment`]): the paper's
//! experiment writes runs.csv, summary.csv and the figures ([`paper`]); a scenario with
//! `experiment = "heterogeneity"` runs seed 003's measurement instead ([`heterogeneous`]), one
//! with `experiment = "fairshare"` seed 002's ([`fairshare`]). Also `--validate` against the
//! service ([`validate`]) and `--rejudge` of its files, `--replot`, `--steady` ([`steady`]), `--compare` ([`sensitivity`]),
//! `--rank` ([`rankings`]) and `--scope` ([`scope`]).

mod algorithm;
mod experiment;
mod fairshare;
mod findings;
mod heterogeneous;
mod paper;
mod rankings;
mod report;
mod run;
mod scenario;
mod scope;
mod sensitivity;
mod staged;
mod steady;
mod transport;
mod validate;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;
use coreserve::workload::{procs_of, read_swf};

use scenario::Scenario;

/// Simulate coreserve's planners under virtual time (Ando & Aida's experiment and beyond).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Scenario file (sim/scenarios/*.toml).
    #[arg(required_unless_present_any = ["replot", "steady", "compare", "rank", "scope"])]
    scenario: Option<PathBuf>,
    /// Run nothing: draw the figures of OUT again from its summary.csv.
    #[arg(long, conflicts_with_all = ["scenario", "seeds", "seed_offset", "keep_outcomes"])]
    replot: bool,
    /// Run nothing: write OUT/steady-state.md (each point's drift, last quarter against first)
    /// from OUT/runs.csv.
    #[arg(long, conflicts_with_all = ["scenario", "replot", "seeds", "seed_offset", "keep_outcomes"])]
    steady: bool,
    /// Run nothing: compare finished runs (folders with a summary.csv), the first the baseline,
    /// and write OUT/sensitivity.md. Repeat the flag: --compare BASE --compare VARIANT ...
    #[arg(long, value_name = "DIR", conflicts_with_all = ["scenario", "replot", "seeds", "seed_offset", "keep_outcomes"])]
    compare: Vec<PathBuf>,
    /// Run nothing: rank the selection policies by success rate in finished runs of the paper's
    /// experiment (folders with a summary.csv, say one per trace), with the plans' spread over
    /// sites, and write OUT/rankings.md. Repeat the flag: --rank DIR --rank DIR ...
    #[arg(long, value_name = "DIR", conflicts_with_all = ["scenario", "replot", "compare", "seeds", "seed_offset", "keep_outcomes"])]
    rank: Vec<PathBuf>,
    /// Run nothing: test where each finding holds, flips or is undecided in finished runs of
    /// the paper's experiment (folders with a runs.csv, say one per trace, each with several
    /// networks), cell by cell with its interval, and write OUT/scope.md. Repeat the flag:
    /// --scope DIR --scope DIR ...
    #[arg(long, value_name = "DIR", conflicts_with_all = ["scenario", "replot", "compare", "rank", "seeds", "seed_offset", "keep_outcomes"])]
    scope: Vec<PathBuf>,
    /// The figures' x axis: the CPUs' offered load (the scenario's `loads`, as in the paper)
    /// or the network's (requested bandwidth over the sites' link capacity; docs/simulator.md).
    #[arg(long, value_enum, default_value_t = report::XAxis::Cpu)]
    x_axis: report::XAxis,
    /// Output folder for runs.csv, summary.csv and the figures.
    #[arg(long)]
    out: PathBuf,
    /// Run the scenario's `[reduced]` settings in place of its own: the short run whose
    /// summary CI compares with the committed one (sim/results/reduced/, sim/tests/reduced.rs).
    #[arg(long, conflicts_with_all = ["replot", "compare", "validate"])]
    reduced: bool,
    /// Override the scenario's number of seeds.
    #[arg(long)]
    seeds: Option<u64>,
    /// Override the scenario's `seed_offset` (runs use seeds OFFSET+1 ..= OFFSET+seeds).
    #[arg(long)]
    seed_offset: Option<u64>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Also write every run's outcomes to DIR/outcomes/ (one JSON line per request).
    #[arg(long)]
    keep_outcomes: bool,
    /// Run every run through the real service too (role-separated processes on PostgreSQL, in
    /// real time), calibrate the service times from its measured latencies, and compare
    /// (OUT/validation.md; see docs/simulator.md). Use a scenario with compressed times.
    #[arg(long, conflicts_with_all = ["replot", "keep_outcomes"])]
    validate: bool,
    /// Run nothing: judge a finished validation again from OUT's files (the compared runs'
    /// `validation-*-runs.csv` and `service-times.toml`) with SCENARIO's tolerances, and write
    /// OUT/validation.md.
    #[arg(long, conflicts_with_all = ["replot", "validate", "reduced", "keep_outcomes"])]
    rejudge: bool,
    /// The `coreserve` executable for --validate (default: beside this one).
    #[arg(long, requires = "validate")]
    coreserve_bin: Option<PathBuf>,
    /// PostgreSQL server for --validate (fresh databases are made and dropped on it).
    #[arg(long, env = "CORESERVE_TEST_PG", default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    postgres: String,
}

/// Writes a report of finished runs (`--compare`, `--rank`) to `out/name`, creating `out`.
fn write_report(out: &std::path::Path, name: &str, text: String) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let path = out.join(name);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    println!("{name} -> {}", path.display());
    Ok(())
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.replot {
        // Figures only: findings.md is computed from the runs' full-precision summary, and the
        // CSV's six decimals could move a rounded digit of it.
        let summary = report::read_summary_csv(&args.out.join("summary.csv"))?;
        // Drifting points are ringed: from runs.csv, where the folder has one.
        let runs = args.out.join("runs.csv");
        let drifting =
            if runs.is_file() { steady::drifting(&steady::read_runs_csv(&runs)?) } else { Default::default() };
        report::write_figures(&summary, &args.out, args.x_axis, &drifting)?;
        println!("figures of {} drawn again", args.out.display());
        return Ok(());
    }
    if args.steady {
        let rows = steady::read_runs_csv(&args.out.join("runs.csv"))?;
        return write_report(&args.out, "steady-state.md", steady::report(&rows));
    }
    if !args.compare.is_empty() {
        return write_report(&args.out, "sensitivity.md", sensitivity::compare(&args.compare)?);
    }
    if !args.rank.is_empty() {
        return write_report(&args.out, "rankings.md", rankings::rank(&args.rank)?);
    }
    if !args.scope.is_empty() {
        return write_report(&args.out, "scope.md", scope::scope(&args.scope)?);
    }
    let scenario = args.scenario.as_ref().expect("clap requires a scenario unless --replot, --compare or --rank");
    let mut s = if args.reduced { Scenario::load_reduced(scenario)? } else { Scenario::load(scenario)? };
    if let Some(n) = args.seeds {
        s.seeds = n;
    }
    if let Some(o) = args.seed_offset {
        s.seed_offset = o;
    }
    s.validate().context("the scenario with the command line's overrides")?;
    if args.rejudge {
        return write_report(&args.out, "validation.md", validate::rejudge(&s, &args.out)?);
    }
    if let Some(t) = args.threads {
        rayon::ThreadPoolBuilder::new().num_threads(t).build_global()?;
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let trace = s.resolve(&s.trace);
    let mut cpus = procs_of(&read_swf(&trace).with_context(|| format!("reading trace {}", trace.display()))?);
    if let Some(max) = s.max_trace_cpus {
        cpus.retain(|&c| c <= max);
        anyhow::ensure!(!cpus.is_empty(), "no job of trace {} has at most {max} CPUs", trace.display());
    }
    if s.experiment == scenario::Experiment::Heterogeneity {
        if args.validate {
            anyhow::bail!(
                "--validate runs the paper experiment only (this scenario is experiment = \"heterogeneity\")"
            );
        }
        let runs = heterogeneous::run(&s, &cpus, &args.out, args.keep_outcomes)?;
        println!(
            "{runs} runs of scenario `{}` (heterogeneity) -> {}",
            s.name,
            args.out.join("heterogeneous.md").display()
        );
        return Ok(());
    }
    if s.experiment == scenario::Experiment::Fairshare {
        if args.validate {
            anyhow::bail!("--validate runs the paper experiment only (this scenario is experiment = \"fairshare\")");
        }
        let runs = fairshare::run(&s, &cpus, &args.out, args.keep_outcomes)?;
        println!("{runs} runs of scenario `{}` (fairshare) -> {}", s.name, args.out.join("fairshare.md").display());
        return Ok(());
    }
    if s.experiment == scenario::Experiment::Staged {
        if args.validate {
            anyhow::bail!("--validate runs the paper experiment only (this scenario is experiment = \"staged\")");
        }
        let runs = staged::run(&s, &cpus, &args.out, args.keep_outcomes)?;
        println!("{runs} runs of scenario `{}` (staged) -> {}", s.name, args.out.join("staged.md").display());
        return Ok(());
    }
    if args.validate {
        let here = std::env::current_exe()?;
        let bin = args.coreserve_bin.clone().unwrap_or_else(|| here.with_file_name("coreserve"));
        let service = validate::Service { bin, postgres: args.postgres.clone() };
        validate::validate(&s, &service, &cpus, &args.out)?;
        println!("validation of scenario `{}` -> {}", s.name, args.out.join("validation.md").display());
        return Ok(());
    }

    let runs = paper::run(&s, &cpus, &args.out, args.keep_outcomes, args.x_axis)?;
    println!("{runs} runs of scenario `{}` -> {}", s.name, args.out.display());
    Ok(())
}
