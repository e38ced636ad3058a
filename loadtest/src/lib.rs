//! Load benchmark of the broker service: SDSC-BLUE-derived plan requests replayed over HTTP
//! (`POST /v1/plans`, keep-alive, N concurrent closed-loop clients) against real
//! `coreserve serve` processes on PostgreSQL, next to `pgbench` (tpcb-like) measured on the same
//! server in the same run. Writes its section of BENCHMARKS.md and prints a summary.
//!
//! Deployments, each measured `CORESERVE_LOAD_ROUNDS` times on a fresh database and fresh
//! processes (empty calendars):
//! - all-in-one on Geant2012 (Topology Zoo, 40 sites, as `coreserve demo` imports it);
//! - all-in-one on a small GridG-style `gridg-w` grid of 8 sites;
//! - role-separated on that small grid: one LIS per site, NIS, GIS and one planner process,
//!   every process on the same database.
//!
//! Requests: `coreserve workload` (the rules of Ando & Aida's experiment) draws workflow requests from the SDSC-BLUE
//! trace at offered load 0.5 relative to the grid. Their arrival times become `not_before`
//! from a base shortly after the run starts (the trace's timeline is laid onto the calendar
//! ahead, so the grid sees the offered load of the trace whatever the request rate) and each
//! deadline keeps its window (`deadline - submitted_at - w_interval`) after `not_before`. The
//! server stamps `submitted_at` itself. Each request carries the token of its workload user.
//!
//! Environment: `CORESERVE_TEST_PG` (PostgreSQL server, default
//! `postgres://postgres@127.0.0.1:5432/postgres`; unreachable = failure),
//! `CORESERVE_LOAD_CLIENTS` (8), `CORESERVE_LOAD_SECONDS` (20, measured per round),
//! `CORESERVE_LOAD_WARMUP_S` (5), `CORESERVE_LOAD_ROUNDS` (3), `CORESERVE_LOAD_PGBENCH_S` (15),
//! `CORESERVE_LOAD_IDEMPOTENCY` (`1`: every request carries an `Idempotency-Key`),
//! `CORESERVE_LOAD_ONLY` (`all-in-one`, `role-separated` or both, comma-separated: run only
//! these deployments; default both).
//! Needs `pgbench` on the PATH and the repository's `data/`; `ss` (iproute2) for the socket
//! bytes by role (without it they are reported as `-`).
//!
//! `cargo bench --bench load` runs it: `benches/load.rs` of the coreserve package (so that
//! cargo builds the `coreserve` binary first) calls [`main`] and writes the section.
//!
//! The WAN bench (issue 53), `cargo bench --bench wan` (`benches/wan.rs`, about 8 min), is
//! here too ([`wan`]): the role-separated deployment with a delaying TCP proxy ([`delay`]) between
//! the planner and every participant, at 0, 5, 15 and 50 ms one way, 1 and 8 clients, 4-job
//! diamonds and 8-job co-allocations; it writes its own section `wan` of BENCHMARKS.md.
//!
//! Modules: `delay` (the WAN bench's delaying proxy), `wan` (the WAN bench), `budget` (the durable transactions per plan, counted: the guard a test runs), `settings` (environment, constants), `database` (fresh databases, pgbench),
//! `workload` (grids, requests), `deploy` (the serve processes), `drive` (the clients, one
//! round), `cpu` (/proc accounting), `traffic` (socket bytes from `ss`, the planner's
//! `/metrics` counters), `roles` (CPU, bytes and requests by role), `report` (summary lines
//! and Markdown).

pub mod budget;
mod cpu;
pub mod database;
pub mod delay;
pub mod deploy;
mod drive;
mod report;
mod roles;
mod settings;
mod traffic;
pub mod wan;
mod workload;

use std::path::PathBuf;

use anyhow::{bail, Result};
use futures::FutureExt;

use database::{pgbench, server_info, Databases};
use deploy::Mode;
use drive::round;
use report::{markdown, summary_line, Measured};
use settings::Settings;
use workload::scenarios;

/// Where the load test finds what it runs.
pub struct Paths {
    /// The `coreserve` executable (`env!("CARGO_BIN_EXE_coreserve")` in a bench of its package).
    pub coreserve: PathBuf,
    /// The repository's `data/` (the SDSC-BLUE trace and Geant2012).
    pub data: PathBuf,
    /// The previous run's section of BENCHMARKS.md, if any: this run's figures are set beside
    /// its own (a regression shows as a ratio below 1 in the same report).
    pub previous: Option<String>,
}

async fn run(s: &Settings, paths: &Paths, dbs: &Databases) -> Result<String> {
    let pg_info = server_info(dbs).await?;
    eprintln!("{pg_info} at {}", s.server);
    let dir = tempfile::tempdir()?;
    let scenarios = scenarios(&paths.data, dir.path())?;
    if !paths.coreserve.exists() {
        bail!("{} is missing (cargo bench builds it)", paths.coreserve.display());
    }

    let pg = pgbench(dbs, s.pgbench_s).await?;
    eprintln!("pgbench: {:.0} TPS (latency average {:.2} ms)", pg.tps, pg.latency_ms);
    dbs.drop_all().await?;

    let plan = [(Mode::AllInOne, 0), (Mode::AllInOne, 1), (Mode::Roles, 1)];
    let mut measured = Vec::new();
    for (mode, i) in plan {
        if !s.only.is_empty() && !s.only.iter().any(|d| d == mode.name()) {
            continue;
        }
        let sc = &scenarios[i];
        let processes = match mode {
            Mode::AllInOne => "1".to_owned(),
            Mode::Roles => format!("{} LIS + NIS + GIS + 1 planner", sc.grid.sites().len()),
        };
        let mut m = Measured { mode, scenario: sc.label, sites: sc.grid.sites().len(), processes, rounds: Vec::new() };
        for k in 1..=s.rounds {
            eprintln!("{} on {}: round {k} of {}", mode.name(), sc.label, s.rounds);
            let r = round(s, &paths.coreserve, dbs, mode, sc).await?;
            dbs.drop_all().await?;
            eprintln!(
                "  {:.0} plans/s, p50 {:.2} ms, p99 {:.2} ms, commit rate {:.3}, errors {}; per plan {:.0} messages, \
                 {:.1} PostgreSQL transactions ({:.2} per participant touched); CPU: {}",
                r.plans_per_s,
                r.latency_ms[0],
                r.latency_ms[2],
                r.commit_rate(),
                r.errors(),
                r.messages_per_plan,
                r.pg_xacts_per_plan,
                r.xacts_per_participant(),
                r.cpu.describe()
            );
            m.rounds.push(r);
        }
        measured.push(m);
    }

    println!(
        "\nLoad benchmark ({} clients, {} s measured per round, median of {} rounds)",
        s.clients,
        s.measure.as_secs(),
        s.rounds
    );
    println!("{pg_info}; pgbench tpcb-like: {:.0} TPS ({})", pg.tps, pg.command);
    for m in &measured {
        println!("- {}", summary_line(m, &pg));
    }
    Ok(markdown(s, &pg_info, &pg, &measured, paths.previous.as_deref()))
}

/// Runs the load test (settings from the environment, see above) and returns its section of
/// BENCHMARKS.md without the heading; the databases it made are dropped, also after a failure.
///
/// # Errors
/// A setting is not valid, PostgreSQL is unreachable, pgbench fails, a server does not start or
/// does not answer.
pub fn main(paths: &Paths) -> Result<String> {
    let s = Settings::from_env()?;
    let dbs = Databases::new(&s.server);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let result = std::panic::AssertUnwindSafe(run(&s, paths, &dbs)).catch_unwind().await;
        let dropped = dbs.drop_all().await;
        match result {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(r) => r.and_then(|section| dropped.map(|()| section)),
        }
    })
}
