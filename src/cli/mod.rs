//! The `coreserve` command line (clap). Every subcommand is a thin shell over the library:
//! importers and generators ([`crate::grid`]), the workload generator ([`crate::workload`]),
//! request replay through the planner ([`crate::replay`]) and the outcome checker
//! ([`crate::check`]).

pub mod client;
pub mod config_file;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::check::check_outcomes;
use crate::grid::{self, GridgParams, GridgVariant, ImportOptions, SiteParams};
use crate::model::{to_time, Grid, Outcome, PlanRequest, ReservationMethod, SelectionPolicy};
use crate::nis::Routing;
use crate::replay::{replay, ReplayOptions, Summary};
use crate::workload::{self, AppKind, WorkloadParams};

/// coreserve: an advance co-reservation broker for compute and network bandwidth.
#[derive(Debug, Parser)]
#[command(version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build a grid (sites + topology) as grid.json.
    #[command(subcommand)]
    Grid(GridCommand),
    /// Generate plan requests (JSON lines) from a workload trace, as in Ando & Aida's experiment.
    Workload(WorkloadArgs),
    /// Replay plan requests through N competing planners and write their outcomes.
    Plan(PlanArgs),
    /// Run all 8 variants (BBR/BIR x time/cost/load/random) on one request file and compare.
    Compare(CompareArgs),
    /// The main job on real data: Geant2012 + SDSC-BLUE, workflow and co-allocation, all 8
    /// variants with 3 planners, and a comparison table.
    Demo(DemoArgs),
    /// Run the broker service (REST API v1), all-in-one: every participant in this process.
    Serve(ServeArgs),
    /// API tokens in the PostgreSQL store (needs DATABASE_URL).
    #[command(subcommand)]
    Token(TokenCommand),
    /// Print the OpenAPI 3.1 document (YAML) of the REST API.
    Openapi,
    /// Client of a running broker: submit, list, show and cancel plans (`--server` /
    /// `CORESERVE_URL`, `--token` / `CORESERVE_TOKEN`). Exit codes: 0 done, 1 client error,
    /// 2 bad command line, 3 plan rejected, 4 refused by the server (4xx), 5 server unavailable
    /// (5xx, 429; retry with the same key).
    #[command(subcommand)]
    Plans(client::PlansCommand),
    /// Client: the broker's sites (CPUs, OS, price).
    Sites {
        #[command(flatten)]
        conn: client::Connection,
    },
    /// Client: the earliest start a site offers for CPUs over a window.
    Availability(client::AvailabilityArgs),
    /// Client: the network path between two sites with a bandwidth free over an interval.
    Route(client::RouteArgs),
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a bearer token for USER in the database of DATABASE_URL (only its SHA-256 is
    /// stored) and print it once.
    Create {
        #[arg(long)]
        user: String,
        /// May do everything: grid changes, every user's plans, new tokens.
        #[arg(long)]
        admin: bool,
        /// May drive holds directly (a planner or another broker).
        #[arg(long)]
        service: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum GridCommand {
    /// Import an Internet Topology Zoo GraphML file and attach one seeded site to every node.
    ImportGraphml {
        file: PathBuf,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long)]
        out: PathBuf,
        /// Capacity of links without a LinkSpeedRaw attribute.
        #[arg(long, default_value_t = 10_000)]
        default_capacity_mbps: u64,
        /// Price of 1 Gbit/s for one hour on every link.
        #[arg(long, default_value_t = 0.1)]
        price_per_gbps_hour: f64,
    },
    /// Generate a grid: `gridg-n`, `gridg-w` (GridG-style tiers) or `fat-tree`.
    Generate {
        kind: GeneratedGrid,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long)]
        out: PathBuf,
        /// Arity of the fat-tree (even).
        #[arg(long, default_value_t = 4)]
        k: u32,
    },
}

/// Generated topologies.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum GeneratedGrid {
    #[value(name = "gridg-n")]
    GridgN,
    #[value(name = "gridg-w")]
    GridgW,
    #[value(name = "fat-tree")]
    FatTree,
}

#[derive(Debug, Args)]
pub struct WorkloadArgs {
    /// SWF trace (plain or .gz) the CPU counts are drawn from.
    #[arg(long)]
    trace: PathBuf,
    /// The grid the load is relative to (its total CPUs).
    #[arg(long)]
    grid: PathBuf,
    #[arg(long, default_value = "workflow")]
    kind: AppKind,
    #[arg(long, default_value_t = 1000)]
    requests: usize,
    /// Offered load: expected requested CPU-seconds per second / total CPUs of the grid.
    #[arg(long, default_value_t = 0.5)]
    load: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long)]
    out: PathBuf,
    /// The planners' w_interval; deadlines leave room for it.
    #[arg(long, default_value_t = 1800)]
    w_interval_s: i64,
    /// Arrival of the first request (RFC 3339), default 2026-01-01T00:00:00Z.
    #[arg(long)]
    start: Option<DateTime<Utc>>,
}

/// Settings shared by `plan`, `compare` and `demo`.
#[derive(Debug, Args, Clone)]
pub struct PlannerArgs {
    /// Number of competing planners.
    #[arg(long, default_value_t = 3)]
    planners: usize,
    /// Seeds the planner chosen per request and the planners' random streams.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value_t = 1800)]
    w_interval_s: i64,
    /// NIS routing: shortest, widest or widest:K.
    #[arg(long, default_value = "shortest")]
    routing: Routing,
    /// Hold lease in seconds.
    #[arg(long, default_value_t = crate::local::DEFAULT_LEASE_S)]
    lease_s: i64,
    /// Prune reservations that ended this long before the replayed time.
    #[arg(long, default_value_t = 7 * 86_400)]
    prune_after_s: i64,
    /// Let the planners race on real threads (a contention test: outcomes vary from run to
    /// run). By default they interleave message by message on one thread, in an order fixed by
    /// the requests and --seed: the same table on every run and machine.
    #[arg(long)]
    racing: bool,
    /// Also print planning times (wall clock: they vary from run to run and machine to machine).
    #[arg(long)]
    timings: bool,
}

impl PlannerArgs {
    fn options(&self, policy: SelectionPolicy, method: ReservationMethod) -> ReplayOptions {
        ReplayOptions {
            planners: self.planners,
            policy,
            method,
            seed: self.seed,
            w_interval_s: self.w_interval_s,
            routing: self.routing,
            lease_s: self.lease_s,
            progress: indicatif::ProgressBar::hidden(),
            prune_after_s: self.prune_after_s,
            racing: self.racing,
        }
    }
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[arg(long)]
    grid: PathBuf,
    #[arg(long)]
    requests: PathBuf,
    #[arg(long, default_value = "time")]
    policy: SelectionPolicy,
    #[arg(long, default_value = "bir")]
    mode: ReservationMethod,
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    planner: PlannerArgs,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    #[arg(long)]
    grid: PathBuf,
    #[arg(long)]
    requests: PathBuf,
    /// Where to write one outcomes file per variant (optional).
    #[arg(long)]
    out_dir: Option<PathBuf>,
    #[command(flatten)]
    planner: PlannerArgs,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The data folder (topology-zoo/ and swf/); the repository's `data/` by default.
    #[arg(long, default_value = "data")]
    data: PathBuf,
    /// Output folder for grid.json, the request files and every variant's outcomes.
    #[arg(long, default_value = "out/demo")]
    out: PathBuf,
    #[arg(long, default_value_t = 1000)]
    requests: usize,
    #[arg(long, default_value_t = 0.5)]
    load: f64,
    #[command(flatten)]
    planner: PlannerArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A TOML file of settings: every flag of `serve` under its long name with `_` for `-`
    /// (`w_interval_s = 1800`, `lis = ["s1=https://..."]`, switches as booleans), plus
    /// `database_url`. Precedence: command line > environment (`CORESERVE_<NAME>`,
    /// `DATABASE_URL`) > this file > defaults. An unknown key is an error.
    #[arg(long, env = "CORESERVE_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Log lines as text (default) or as one JSON object per line (timestamp, level, target,
    /// fields) on stderr; RUST_LOG sets the filter (default warn).
    #[arg(long, env = "CORESERVE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: crate::api::telemetry::LogFormat,
    /// The grid (sites and topology) to serve (every role but `planner`); saved in the store.
    /// Without it, the grid saved by an earlier start on the same DATABASE_URL is served.
    #[arg(long, env = "CORESERVE_GRID")]
    grid: Option<PathBuf>,
    /// What this process serves: all (one process), lis (one site, --site), nis, gis, or
    /// planner (over remote participants: --gis, --nis, --lis).
    #[arg(long, value_enum, default_value = "all", env = "CORESERVE_ROLE")]
    role: ServeRole,
    /// The site of a `lis` process.
    #[arg(long, env = "CORESERVE_SITE")]
    site: Option<String>,
    /// Base URL of the GIS (`planner` role), e.g. http://127.0.0.1:8090.
    #[arg(long, env = "CORESERVE_GIS")]
    gis: Option<String>,
    /// Base URL of the NIS (`planner` role).
    #[arg(long, env = "CORESERVE_NIS")]
    nis: Option<String>,
    /// SITE=URL: the LIS of a site (`planner` role; once per site).
    #[arg(long = "lis", value_name = "SITE=URL", env = "CORESERVE_LIS", value_delimiter = ',')]
    lis: Vec<String>,
    /// Bootstrap token shared by the processes of a separated deployment: participants accept
    /// it as a service token (principal `service`); planners without --participant-token send
    /// it (and then act as one principal). Prefer one --participant-token per planner.
    #[arg(long, env = "CORESERVE_SERVICE_TOKEN", hide_env_values = true)]
    service_token: Option<String>,
    /// This planner's own credential towards its participants (made with `coreserve token
    /// create --user NAME --service`): its holds are owned by NAME, and no other principal but
    /// an admin may commit, abort, release or extend them.
    #[arg(long, env = "CORESERVE_PARTICIPANT_TOKEN", hide_env_values = true)]
    participant_token: Option<String>,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key).
    #[arg(long, env = "CORESERVE_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "CORESERVE_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// With --tls-cert: require a client certificate signed by this PEM CA (mutual TLS).
    #[arg(long, env = "CORESERVE_TLS_CLIENT_CA")]
    tls_client_ca: Option<PathBuf>,
    /// A planner trusts only this PEM CA for https:// participants (default: the system's roots).
    #[arg(long, env = "CORESERVE_TLS_CA")]
    tls_ca: Option<PathBuf>,
    /// A planner's PEM client certificate for participants that require one (with
    /// --tls-client-key).
    #[arg(long, env = "CORESERVE_TLS_CLIENT_CERT", requires = "tls_client_key")]
    tls_client_cert: Option<PathBuf>,
    /// The PEM private key of --tls-client-cert.
    #[arg(long, env = "CORESERVE_TLS_CLIENT_KEY", requires = "tls_client_cert")]
    tls_client_key: Option<PathBuf>,
    #[arg(long, default_value = "127.0.0.1:8080", env = "CORESERVE_LISTEN")]
    listen: String,
    /// Planners in the pool (each request goes to the least busy one).
    #[arg(long, default_value_t = 3, env = "CORESERVE_PLANNERS")]
    planners: usize,
    /// Hold lease in seconds.
    #[arg(long, default_value_t = crate::local::DEFAULT_LEASE_S, env = "CORESERVE_LEASE_S")]
    lease_s: i64,
    /// Plans start no earlier than receipt + this.
    #[arg(long, default_value_t = 1800, env = "CORESERVE_W_INTERVAL_S")]
    w_interval_s: i64,
    #[arg(long, default_value = "time", env = "CORESERVE_POLICY")]
    policy: SelectionPolicy,
    #[arg(long, default_value = "bir", env = "CORESERVE_MODE")]
    mode: ReservationMethod,
    /// NIS routing: shortest, widest or widest:K.
    #[arg(long, default_value = "shortest", env = "CORESERVE_ROUTING")]
    routing: Routing,
    /// Request timestamps must lie within this many days of now.
    #[arg(long, default_value_t = 365, env = "CORESERVE_HORIZON_DAYS")]
    horizon_days: i64,
    /// The admin bearer token (also read from CORESERVE_ADMIN_TOKEN);
    /// without one, a token is generated and printed once.
    #[arg(long, env = "CORESERVE_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// actix worker threads (default: one per core).
    #[arg(long, env = "CORESERVE_WORKERS")]
    workers: Option<usize>,
    /// Seconds an idempotency key's or a decided transaction's claim lives without renewal:
    /// another planner process takes over the work of one that stopped (crashed, stalled)
    /// after this long.
    #[arg(long, default_value_t = crate::api::DEFAULT_CLAIM_LEASE_S, env = "CORESERVE_CLAIM_LEASE_S")]
    claim_lease_s: i64,
    /// This process's name in claims and logs (default: ROLE@LISTEN#PID).
    #[arg(long, env = "CORESERVE_INSTANCE")]
    instance: Option<String>,
    /// At most this many plan requests of one user in flight at once (429 beyond).
    #[arg(long, default_value_t = crate::api::config::DEFAULT_MAX_IN_FLIGHT_PER_USER, env = "CORESERVE_MAX_IN_FLIGHT_PER_USER")]
    max_in_flight_per_user: usize,
    /// At most this many plan requests plan at once, shared fairly between users.
    #[arg(long, default_value_t = crate::api::config::DEFAULT_PLANNING_SLOTS, env = "CORESERVE_PLANNING_SLOTS")]
    planning_slots: usize,
}

/// `coreserve serve --role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServeRole {
    All,
    Lis,
    Nis,
    Gis,
    Planner,
}

/// The [`crate::api::Role`] of `serve`'s arguments, and the grid of `--grid` (empty for a
/// planner; `None` when not given).
fn serve_role(a: &ServeArgs) -> Result<(crate::api::Role, Option<crate::model::Grid>)> {
    use crate::api::{RemoteServices, Role};
    if a.role == ServeRole::Planner {
        let (Some(gis), Some(nis)) = (a.gis.clone(), a.nis.clone()) else {
            bail!("--role planner needs --gis URL and --nis URL");
        };
        let mut lis = Vec::new();
        for l in &a.lis {
            let Some((site, url)) = l.split_once('=') else { bail!("--lis wants SITE=URL, got `{l}`") };
            lis.push((site.to_owned(), url.to_owned()));
        }
        if lis.is_empty() {
            bail!("--role planner needs one --lis SITE=URL per site");
        }
        let empty = crate::model::Grid { nodes: vec![], links: vec![], sites: vec![] };
        return Ok((Role::Planner(RemoteServices { gis, nis, lis }), Some(empty)));
    }
    let g = a.grid.as_deref().map(grid::load_grid).transpose()?;
    let role = match a.role {
        ServeRole::All => Role::All,
        ServeRole::Nis => Role::Nis,
        ServeRole::Gis => Role::Gis,
        ServeRole::Lis => {
            let Some(site) = a.site.clone() else { bail!("--role lis needs --site ID") };
            Role::Lis { site }
        }
        ServeRole::Planner => unreachable!(),
    };
    Ok((role, g))
}

/// `coreserve serve`.
async fn serve(a: ServeArgs) -> Result<()> {
    use crate::api::{Application, ServeConfig};
    if let Some(file) = &a.config {
        tracing::info!(config = %file.display(), "settings read from the config file (command line and environment take precedence)");
    }
    if a.planners == 0
        || a.lease_s <= 0
        || a.w_interval_s < 0
        || a.horizon_days <= 0
        || a.claim_lease_s <= 0
        || a.max_in_flight_per_user == 0
        || a.planning_slots == 0
    {
        bail!(
            "--planners, --lease-s, --claim-lease-s, --max-in-flight-per-user, --planning-slots and --horizon-days must be > 0 \
             and --w-interval-s >= 0"
        );
    }
    let (role, file_grid) = serve_role(&a)?;
    let admin_token = a.admin_token;
    let config = ServeConfig {
        listen: a.listen,
        planners: a.planners,
        lease_s: a.lease_s,
        w_interval_s: a.w_interval_s,
        policy: a.policy,
        mode: a.mode,
        routing: a.routing,
        horizon_days: a.horizon_days,
        admin_token,
        workers: a.workers,
        role,
        claim_lease_s: a.claim_lease_s,
        instance: a.instance,
        max_in_flight_per_user: a.max_in_flight_per_user,
        planning_slots: a.planning_slots,
        service_token: a.service_token,
        participant_token: a.participant_token,
        tls: a.tls_cert.zip(a.tls_key).map(|(cert, key)| crate::api::config::TlsFiles { cert, key }),
        tls_ca: a.tls_ca,
        tls_client: a
            .tls_client_cert
            .zip(a.tls_client_key)
            .map(|(cert, key)| crate::api::config::TlsFiles { cert, key }),
        tls_client_ca: a.tls_client_ca,
    };
    let role_name = format!("{:?}", a.role).to_lowercase();
    let store: std::sync::Arc<dyn crate::store::Store> = match database_url() {
        Some(url) => {
            let store = crate::store::PgStore::connect(&url).await.context("connecting to DATABASE_URL")?;
            tracing::info!("store: postgres (everything persists)");
            crate::api::telemetry::notice(
                "store: postgres (DATABASE_URL): grid, holds, reservations, decisions, plans, keys and tokens persist",
            );
            std::sync::Arc::new(store)
        }
        None => {
            tracing::warn!("store: memory (no DATABASE_URL); plans, tokens and bookings do not survive a restart");
            crate::api::telemetry::notice("WARNING: in-memory store (no DATABASE_URL): nothing survives a restart");
            std::sync::Arc::new(crate::store::MemoryStore::new())
        }
    };
    let g = match file_grid {
        Some(g) => g,
        None => store.load_grid().await?.with_context(|| {
            format!("--grid is required for --role {role_name}: the store has no grid saved by an earlier start")
        })?,
    };
    if let crate::api::Role::Lis { site } = &config.role {
        if !g.sites.iter().any(|s| &s.id == site) {
            bail!("site `{site}` is not in the grid");
        }
    }
    let (sites, links) = match &config.role {
        crate::api::Role::Lis { .. } => (1, 0),
        _ => (g.sites.len(), g.links.len()),
    };
    let listen = config.listen.clone();
    let app = Application::build(config, g, store).await?;
    if let Some(t) = app.generated_admin_token() {
        crate::api::telemetry::notice(&format!("admin token (shown once, not stored in clear): {t}"));
    }
    let addr = listen.rsplit_once(':').map_or(listen.clone(), |(host, _)| format!("{host}:{}", app.port()));
    crate::api::telemetry::notice(
        &format!("coreserve ({role_name}) serving {sites} sites and {links} links on http://{addr} (API at /v1, docs at /openapi.json)"),
    );
    app.run_until_stopped().await?;
    Ok(())
}

/// `DATABASE_URL`, if set and not blank.
fn database_url() -> Option<String> {
    std::env::var("DATABASE_URL").ok().filter(|u| !u.trim().is_empty())
}

/// `coreserve token create`: a new token in the PostgreSQL store at `url`, returned in clear.
///
/// # Errors
/// The database cannot be reached.
pub async fn token_create(url: &str, user: &str, admin: bool, service: bool) -> Result<String> {
    if user.trim().is_empty() {
        bail!("--user must not be empty");
    }
    let store = crate::store::PgStore::connect(url).await.context("connecting to DATABASE_URL")?;
    let token = crate::api::auth::create_token(&store, user.trim(), admin, service).await?;
    store.pool().close().await;
    Ok(token)
}

/// Runs the command line.
pub async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Grid(GridCommand::ImportGraphml { file, seed, out, default_capacity_mbps, price_per_gbps_hour }) => {
            let xml = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            let opts = ImportOptions { seed, default_capacity_mbps, price_per_gbps_hour, ..Default::default() };
            let g = grid::import_graphml(&xml, &opts).with_context(|| format!("importing {}", file.display()))?;
            save(&g, &out)
        }
        Command::Grid(GridCommand::Generate { kind, seed, out, k }) => {
            let g = match kind {
                GeneratedGrid::GridgN => grid::gridg(GridgVariant::Narrow, seed, &GridgParams::default()),
                GeneratedGrid::GridgW => grid::gridg(GridgVariant::Wide, seed, &GridgParams::default()),
                GeneratedGrid::FatTree => {
                    if k == 0 || k % 2 == 1 {
                        bail!("--k must be even and > 0 (got {k})");
                    }
                    grid::fat_tree(k, seed, &SiteParams::default())
                }
            };
            save(&g, &out)
        }
        Command::Workload(a) => {
            let g = grid::load_grid(&a.grid)?;
            let params = WorkloadParams {
                requests: a.requests,
                load: a.load,
                seed: a.seed,
                w_interval_s: a.w_interval_s,
                start: a.start.as_ref().map_or(workload::DEFAULT_START, to_time),
                ..WorkloadParams::for_kind(a.kind)
            };
            let reqs = generate(&a.trace, &g, &params)?;
            workload::write_jsonl(&reqs, &a.out)?;
            println!("wrote {} {} requests at offered load {} to {}", reqs.len(), a.kind, a.load, a.out.display());
            Ok(())
        }
        Command::Plan(a) => {
            let g = grid::load_grid(&a.grid)?;
            let reqs = workload::read_jsonl(&a.requests)?;
            let variant = format!("{}-{}", a.mode, a.policy);
            let opts = ReplayOptions {
                progress: crate::replay::progress_bar(reqs.len() as u64, &variant),
                ..a.planner.options(a.policy, a.mode)
            };
            let (outcomes, summary, violations) = run_variant(&g, &reqs, &opts).await;
            opts.progress.finish_and_clear();
            write_outcomes(&outcomes, &a.out)?;
            print_summary(&variant, &summary, violations, a.planner.timings);
            println!("outcomes: {}", a.out.display());
            ensure_clean(violations)
        }
        Command::Compare(a) => {
            let g = grid::load_grid(&a.grid)?;
            let reqs = workload::read_jsonl(&a.requests)?;
            let rows = compare(&g, &reqs, &a.planner, a.out_dir.as_deref(), "compare").await?;
            print_table(&[("requests".to_string(), rows)], a.planner.timings);
            Ok(())
        }
        Command::Demo(a) => demo(a).await,
        Command::Serve(a) => serve(a).await,
        Command::Token(TokenCommand::Create { user, admin, service }) => {
            let Some(url) = database_url() else {
                bail!("coreserve token create needs DATABASE_URL (the in-memory store of a running server is not reachable from here; use POST /v1/tokens)");
            };
            let token = token_create(&url, &user, admin, service).await?;
            eprintln!("token for {user} (admin: {admin}, service: {service}); shown once, only its SHA-256 is stored:");
            println!("{token}");
            Ok(())
        }
        Command::Openapi => {
            print!("{}", crate::api::openapi::yaml());
            Ok(())
        }
        Command::Plans(cmd) => client::plans(cmd).await,
        Command::Sites { conn } => client::sites(conn).await,
        Command::Availability(a) => client::availability(a).await,
        Command::Route(a) => client::route(a).await,
    }
}

fn save(g: &Grid, out: &Path) -> Result<()> {
    grid::save_grid(g, out)?;
    println!(
        "wrote {}: {} nodes, {} links, {} sites, {} CPUs",
        out.display(),
        g.nodes.len(),
        g.links.len(),
        g.sites.len(),
        g.total_cpus()
    );
    Ok(())
}

fn generate(trace: &Path, g: &Grid, params: &WorkloadParams) -> Result<Vec<PlanRequest>> {
    let jobs = workload::read_swf(trace).with_context(|| format!("reading trace {}", trace.display()))?;
    Ok(workload::generate(&workload::procs_of(&jobs), g.total_cpus(), params)?)
}

/// Replays one variant and checks its outcomes (no overbooking, deadlines, paths, costs).
async fn run_variant(g: &Grid, reqs: &[PlanRequest], opts: &ReplayOptions) -> (Vec<Outcome>, Summary, usize) {
    let outcomes = replay(g, reqs.to_vec(), opts).await;
    let violations = check_outcomes(g, reqs, &outcomes, opts.w_interval_s);
    for v in violations.iter().take(10) {
        eprintln!("VIOLATION: {v}");
    }
    let summary = Summary::of(&outcomes);
    (outcomes, summary, violations.len())
}

fn ensure_clean(violations: usize) -> Result<()> {
    if violations > 0 {
        bail!("the outcome checker found {violations} violations");
    }
    Ok(())
}

fn write_outcomes(outcomes: &[Outcome], path: &Path) -> Result<()> {
    let mut w =
        std::io::BufWriter::new(std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?);
    for o in outcomes {
        serde_json::to_writer(&mut w, o)?;
        w.write_all(b"\n")?;
    }
    w.flush()?;
    Ok(())
}

fn print_summary(variant: &str, s: &Summary, violations: usize, timings: bool) {
    println!(
        "{variant}: requests {}, committed {}, success rate {:.3}, mean cost {:.2}, average cost {:.3} per CPU-hour, \
         messages {}, holds aborted {}, checker violations {violations}",
        s.requests, s.committed, s.success_rate, s.mean_cost, s.average_cost_per_cpu_hour, s.messages, s.holds_aborted
    );
    if timings {
        println!(
            "{variant}: planning time p50 {:.3} ms, p99 {:.3} ms (wall clock)",
            s.planning_ms_p50, s.planning_ms_p99
        );
    }
}

/// One row of a comparison: variant name, summary, violations.
type Row = (String, Summary, usize);

/// Replays `reqs` with every variant of the paper (BBR / BIR x the four policies) and checks
/// each batch. Deterministic replays run side by side, one per core (each on a thread of its
/// own, so the order and the figures do not change); racing ones one after the other, so that
/// only their own planners compete. One progress bar, labelled `label`, counts every plan.
async fn compare(
    g: &Grid,
    reqs: &[PlanRequest],
    args: &PlannerArgs,
    out_dir: Option<&Path>,
    label: &str,
) -> Result<Vec<Row>> {
    use futures::StreamExt;
    let variants: Vec<(ReservationMethod, SelectionPolicy)> =
        ReservationMethod::PAPER.iter().flat_map(|&m| SelectionPolicy::ALL.iter().map(move |&p| (m, p))).collect();
    let bar = crate::replay::progress_bar((variants.len() * reqs.len()) as u64, label);
    let parallel = if args.racing { 1 } else { std::thread::available_parallelism().map_or(1, |n| n.get()) };
    let results: Vec<(String, (Vec<Outcome>, Summary, usize))> = futures::stream::iter(variants)
        .map(|(method, policy)| {
            let opts = ReplayOptions { progress: bar.clone(), ..args.options(policy, method) };
            async move { (format!("{method}-{policy}"), run_variant(g, reqs, &opts).await) }
        })
        .buffered(parallel)
        .collect()
        .await;
    bar.finish_and_clear();
    let mut rows = Vec::new();
    for (name, (outcomes, summary, violations)) in results {
        if let Some(dir) = out_dir {
            write_outcomes(&outcomes, &dir.join(format!("outcomes-{name}.jsonl")))?;
        }
        ensure_clean(violations)?;
        rows.push((name, summary, violations));
    }
    Ok(rows)
}

/// The comparison table: deterministic columns (see [`ReplayOptions::racing`]), then, with
/// `timings`, the wall-clock planning times.
fn print_table(groups: &[(String, Vec<Row>)], timings: bool) {
    print!(
        "\n{:<13} {:<10} {:>8} {:>9} {:>8} {:>12} {:>10} {:>8} {:>10}",
        "workload", "variant", "requests", "committed", "success", "avg cost/h", "messages", "aborted", "violations"
    );
    if timings {
        print!(" {:>9} {:>9}", "p50 ms", "p99 ms");
    }
    println!();
    for (kind, rows) in groups {
        for (name, s, v) in rows {
            print!(
                "{:<13} {:<10} {:>8} {:>9} {:>8.3} {:>12.3} {:>10} {:>8} {:>10}",
                kind,
                name,
                s.requests,
                s.committed,
                s.success_rate,
                s.average_cost_per_cpu_hour,
                s.messages,
                s.holds_aborted,
                v
            );
            if timings {
                print!(" {:>9.3} {:>9.3}", s.planning_ms_p50, s.planning_ms_p99);
            }
            println!();
        }
    }
}

async fn demo(a: DemoArgs) -> Result<()> {
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
        let rows = compare(&g, &reqs, &a.planner, Some(&dir), &kind.to_string()).await?;
        groups.push((kind.to_string(), rows));
    }
    print_table(&groups, a.planner.timings);
    println!("\nEvery committed plan of every variant passed the outcome checker (no site or link over capacity at any instant).");
    println!("outputs: {}", a.out.display());
    Ok(())
}
