//! The `coreserve` command line (clap). Every subcommand is a thin shell over the library:
//! importers and generators ([`crate::grid`]), the workload generator ([`crate::workload`]),
//! request replay through the planner ([`crate::replay`]), the outcome checker
//! ([`crate::check`]) and the service ([`crate::api::Application`]).
//!
//! | module | what |
//! |---|---|
//! | [`args`] | the clap types: [`Cli`], [`Command`] and every subcommand's flags; `serve`'s flags as the service's [`Settings`](crate::api::startup::Settings) |
//! | [`compare`] | `plan` and `compare`: replay, check, write outcomes, the comparison table |
//! | [`demo`] | `demo`: real data, every variant, one table |
//! | [`client`] | `plans`, `sites`, `availability`, `route`: the client of a running broker |
//! | [`config_file`] | `serve --config FILE`: TOML settings as environment variables |
//! | [`workflow`] | `workflow import`: a WfCommons instance as a plan request and a Snakefile |
//!
//! This module dispatches, and holds the small commands (`grid`, `workload`, `token`,
//! `openapi`).

#[macro_use]
pub mod output;
pub mod args;
pub mod client;
pub mod compare;
pub mod config_file;
pub mod demo;
pub mod when;
pub mod workflow;

use std::path::Path;

use anyhow::{bail, Context, Result};

pub use args::{Cli, Command, GridCommand, TokenCommand};

use crate::grid::{self, GridgParams, GridgVariant, ImportOptions, SiteParams};
use crate::model::{to_time, Grid, PlanRequest};
use crate::workload::{self, WorkloadParams};

/// Runs the command line.
pub async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Grid(GridCommand::ImportGraphml {
            file,
            seed,
            out,
            default_capacity_mbps,
            price_per_gbps_hour,
            heterogeneity,
        }) => {
            let xml = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            let opts = ImportOptions { seed, default_capacity_mbps, price_per_gbps_hour, ..Default::default() };
            let g = grid::import_graphml(&xml, &opts).with_context(|| format!("importing {}", file.display()))?;
            save(&grid::heterogenize(g, heterogeneity, seed), &out)
        }
        Command::Grid(GridCommand::Generate { kind, seed, out, k, heterogeneity }) => {
            let g = match kind {
                args::GeneratedGrid::GridgN => grid::gridg(GridgVariant::Narrow, seed, &GridgParams::default()),
                args::GeneratedGrid::GridgW => grid::gridg(GridgVariant::Wide, seed, &GridgParams::default()),
                args::GeneratedGrid::FatTree => {
                    if k == 0 || k % 2 == 1 {
                        bail!("--k must be even and > 0 (got {k})");
                    }
                    grid::fat_tree(k, seed, &SiteParams::default())
                }
            };
            save(&grid::heterogenize(g, heterogeneity, seed), &out)
        }
        Command::Workload(a) => {
            let g = grid::load_grid(&a.grid)?;
            let params = WorkloadParams {
                requests: a.requests,
                load: a.load,
                seed: a.seed,
                w_interval_s: a.w_interval_s,
                start: a.start.as_ref().map_or_else(|| default_start(a.w_interval_s), to_time),
                requirements: a.requirements,
                ..WorkloadParams::for_kind(a.kind)
            };
            let reqs = generate(&a.trace, &g, &params)?;
            workload::write_jsonl(&reqs, &a.out)?;
            outln!("wrote {} {} requests at offered load {} to {}", reqs.len(), a.kind, a.load, a.out.display());
            Ok(())
        }
        Command::Plan(a) => compare::plan(a).await,
        Command::Compare(a) => compare::compare(a).await,
        Command::Demo(a) => demo::demo(a).await,
        Command::Serve(a) => {
            let settings = a.into_settings(database_url())?;
            crate::api::Application::start(settings).await?.run_until_stopped().await?;
            Ok(())
        }
        Command::Token(TokenCommand::Create { user, admin, service, planner, expires_at }) => {
            let Some(url) = database_url() else {
                bail!("coreserve token create needs DATABASE_URL (the in-memory store of a running server is not reachable from here; use POST /v1/tokens)");
            };
            let roles = crate::api::auth::Roles { admin, service: service || planner, planner };
            let (token, id) = token_create(&url, &user, roles, expires_at).await?;
            let until = expires_at.map_or("never".to_owned(), |t| t.to_rfc3339());
            eprintln!(
                "token {id} for {user} (admin: {admin}, service: {}, planner: {planner}, expires: {until}); shown once, only its SHA-256 is stored:",
                roles.service
            );
            outln!("{token}");
            Ok(())
        }
        Command::Token(TokenCommand::Revoke { id }) => {
            let Some(url) = database_url() else {
                bail!("coreserve token revoke needs DATABASE_URL (or use DELETE /v1/tokens/{{id}})");
            };
            let store = crate::store::PgStore::connect(&url).await.context("connecting to DATABASE_URL")?;
            let revoked = crate::store::TokenStore::revoke_token(&store, id).await?;
            store.pool().close().await;
            match revoked {
                Some(t) => {
                    eprintln!("token {id} of {} revoked (refused at once by every process)", t.user);
                    Ok(())
                }
                None => bail!("no live token {id}"),
            }
        }
        Command::Openapi => {
            out!("{}", crate::api::openapi::yaml());
            Ok(())
        }
        Command::Plans(cmd) => client::plans(cmd).await,
        Command::Webhooks(cmd) => client::webhooks(cmd).await,
        Command::Workflow(cmd) => workflow::workflow(cmd).await,
        Command::Sites { conn } => client::sites(conn).await,
        Command::Availability(a) => client::availability(a).await,
        Command::Route(a) => client::route(a).await,
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "coreserve", &mut script);
            out!("{}", String::from_utf8_lossy(&script));
            Ok(())
        }
    }
}

/// `workload`'s first arrival without `--start`: now + the W interval + 10 minutes, rounded up
/// to the minute (a broker refuses plans that start before now + its W interval).
fn default_start(w_interval_s: i64) -> crate::model::Time {
    let t = chrono::Utc::now().timestamp() + w_interval_s.max(0) + 600;
    (t + 59) / 60 * 60
}

/// `DATABASE_URL`, if set and not blank.
fn database_url() -> Option<String> {
    std::env::var("DATABASE_URL").ok().filter(|u| !u.trim().is_empty())
}

/// `coreserve token create`: a new token in the PostgreSQL store at `url`, returned in clear
/// with its id.
///
/// # Errors
/// The user's name is not valid or reserved ([`crate::api::auth::check_principal_name`]: never
/// trimmed), `expires_at` is not in the future, or the database cannot be reached.
pub async fn token_create(
    url: &str,
    user: &str,
    roles: crate::api::auth::Roles,
    expires_at: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<(String, uuid::Uuid)> {
    crate::api::auth::check_principal_name(user).map_err(|e| anyhow::anyhow!("--user: {e}"))?;
    if expires_at.is_some_and(|t| t <= chrono::Utc::now()) {
        bail!("--expires-at must be in the future");
    }
    let store = crate::store::PgStore::connect(url).await.context("connecting to DATABASE_URL")?;
    let token = crate::api::auth::generate_token();
    let rec = crate::api::auth::register_token_with(&store, &token, user, roles, expires_at).await?;
    store.pool().close().await;
    Ok((token, rec.id))
}

/// Writes `g` to `out` and says what it holds.
fn save(g: &Grid, out: &Path) -> Result<()> {
    grid::save_grid(g, out)?;
    outln!(
        "wrote {}: {} nodes, {} links, {} sites, {} CPUs",
        out.display(),
        g.nodes().len(),
        g.links().len(),
        g.sites().len(),
        g.total_cpus()
    );
    Ok(())
}

/// Plan requests of `params` over grid `g`, their CPU counts drawn from the SWF `trace`.
fn generate(trace: &Path, g: &Grid, params: &WorkloadParams) -> Result<Vec<PlanRequest>> {
    let jobs = workload::read_swf(trace).with_context(|| format!("reading trace {}", trace.display()))?;
    Ok(workload::generate(&workload::procs_of(&jobs), g.total_cpus(), params)?)
}
