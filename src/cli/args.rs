//! The command line's types (clap): every subcommand, its flags and their defaults, and the
//! conversion of `serve`'s flags into the service's [`Settings`].

use std::path::PathBuf;

use anyhow::{bail, Result};
use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};

use super::client;
use crate::api::{RemoteServices, Role, ServeConfig, Settings};
use crate::grid::{self, Heterogeneity};
use crate::model::{Grid, ReservationMethod, SelectionPolicy};
use crate::nis::Routing;
use crate::planner::Backtrack;
use crate::replay::ReplayOptions;
use crate::workload::{AppKind, RequirementsProfile};

/// coreserve: an advance co-reservation broker for compute and network bandwidth.
#[derive(Debug, Parser)]
#[command(version, about, after_help = AFTER_HELP)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The end of `coreserve --help`: the client's exit codes and retry policy.
const AFTER_HELP: &str = concat!(
    "Exit codes of the client commands (plans, sites, availability, route):\n",
    "  0  done (a plan committed, or planned by a dry run)\n",
    "  1  client error: unreadable or malformed input, unexpected answer\n",
    "  2  bad command line\n",
    "  3  a plan was rejected (no placement before its deadline)\n",
    "  4  the server refused the request (4xx: bad input, unknown id, no permission)\n",
    "  5  the server cannot answer now (5xx, 408, 429, in doubt, dropped connection): retry later\n",
    "     with the same command (the same Idempotency-Key)\n",
    "  6  no connection to the server (refused, unknown host, connect timeout): nothing was sent\n\n",
    "Retries: plans submit/create resend a request with the same Idempotency-Key up to 5 times,\n",
    "1-5 s apart (as Retry-After says), on 503, 429, 408, 409 (in progress) and on a connection\n",
    "dropped after it was made; a connection that cannot be made stops at once (exit code 6). The\n",
    "default key is derived from the request (its id and body): running the same command again\n",
    "returns the plan already booked instead of booking twice.",
);

// `serve`'s arguments make the enum large; it is parsed once per process.
#[allow(clippy::large_enum_variant)]
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
    /// Client of a running broker: submit, create, list, show and cancel plans (`-s/--server` /
    /// `CORESERVE_URL`, `-t/--token` / `CORESERVE_TOKEN`). Exit codes: 0 done, 1 client error,
    /// 2 bad command line, 3 plan rejected, 4 refused by the server (4xx), 5 server unavailable
    /// (5xx, 408, 429; retry with the same command), 6 no connection (nothing sent).
    #[command(subcommand, after_help = AFTER_HELP)]
    Plans(client::PlansCommand),
    /// Client: webhooks, where the events of your plans are POSTed (signed; see
    /// docs/protocol.md, "Webhooks").
    #[command(subcommand)]
    Webhooks(client::WebhooksCommand),
    /// Client: the broker's sites (CPUs, OS, price).
    Sites {
        #[command(flatten)]
        conn: client::Connection,
    },
    /// Client: the earliest start a site offers for CPUs over a window.
    Availability(client::AvailabilityArgs),
    /// Client: the network path between two sites with a bandwidth free over an interval.
    Route(client::RouteArgs),
    /// Print a shell completion script: `coreserve completions bash > /etc/bash_completion.d/coreserve`
    /// (also zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
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
        /// A planner of this deployment (implies --service): its holds belong to the
        /// deployment's planner principal, so any planner finishes another's in-doubt
        /// transactions (docs/protocol.md, "Identity").
        #[arg(long)]
        planner: bool,
        /// Refused from this instant on (RFC 3339, e.g. 2027-01-01T00:00:00Z); default: never.
        #[arg(long)]
        expires_at: Option<chrono::DateTime<chrono::Utc>>,
    },
    /// Revoke token ID (printed by `token create`, or `GET /v1/whoami`) in the database of
    /// DATABASE_URL: every process refuses it at once.
    Revoke {
        /// The token's id.
        id: uuid::Uuid,
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
        /// Site attributes: `none` (homogeneous) or `mixed` (architectures, extensions, GPUs,
        /// software, labels from a documented distribution; docs/model.md).
        #[arg(long, value_enum, default_value_t = Heterogeneity::None)]
        heterogeneity: Heterogeneity,
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
        /// Site attributes: `none` (homogeneous) or `mixed` (see `grid import-graphml`).
        #[arg(long, value_enum, default_value_t = Heterogeneity::None)]
        heterogeneity: Heterogeneity,
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
    pub trace: PathBuf,
    /// The grid the load is relative to (its total CPUs).
    #[arg(long)]
    pub grid: PathBuf,
    #[arg(long, default_value = "workflow")]
    pub kind: AppKind,
    #[arg(long, default_value_t = 1000)]
    pub requests: usize,
    /// Offered load: expected requested CPU-seconds per second / total CPUs of the grid.
    #[arg(long, default_value_t = 0.5)]
    pub load: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long)]
    pub out: PathBuf,
    /// The planners' w_interval; deadlines leave room for it.
    #[arg(long, default_value_t = 1800)]
    pub w_interval_s: i64,
    /// Arrival of the first request (`now+1h`, RFC 3339). Default: now + --w-interval-s + 10
    /// minutes, rounded up to the minute, so that the requests can be sent to a running broker
    /// (`plans submit`); give a fixed instant for the same file on every run.
    #[arg(long, value_parser = super::when::parse_time)]
    pub start: Option<DateTime<Utc>>,
    /// Job requirements: `none`, or `mixed` (part of the jobs require AVX2, GPUs or TensorFlow,
    /// drawn from a documented distribution; docs/model.md), so that they can run only on some
    /// sites of a `--heterogeneity mixed` grid.
    #[arg(long, value_enum, default_value_t = RequirementsProfile::None)]
    pub requirements: RequirementsProfile,
}

/// Settings shared by `plan`, `compare` and `demo`.
#[derive(Debug, Args, Clone)]
pub struct PlannerArgs {
    /// Number of competing planners.
    #[arg(long, default_value_t = 3)]
    pub planners: usize,
    /// Seeds the planner chosen per request and the planners' random streams.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, default_value_t = 1800)]
    pub w_interval_s: i64,
    /// NIS routing: shortest, widest or widest:K.
    #[arg(long, default_value = "shortest")]
    pub routing: Routing,
    /// Hold lease in seconds.
    #[arg(long, default_value_t = crate::in_process::DEFAULT_LEASE_S)]
    pub lease_s: i64,
    /// Prune reservations that ended this long before the replayed time.
    #[arg(long, default_value_t = 7 * 86_400)]
    pub prune_after_s: i64,
    /// Let the planners race on real threads (a contention test: outcomes vary from run to
    /// run). By default they interleave message by message on one thread, in an order fixed by
    /// the requests and --seed: the same table on every run and machine.
    #[arg(long)]
    pub racing: bool,
    /// Also print planning times (wall clock: they vary from run to run and machine to machine).
    #[arg(long)]
    pub timings: bool,
    /// The planners' search: `conflict-directed` (backjumping) or `chronological` (Ando &
    /// Aida's Fig. 3 as written); docs/algorithm.md "Backjumping".
    #[arg(long, value_enum, default_value_t = Backtrack::ConflictDirected)]
    pub backtrack: Backtrack,
}

impl PlannerArgs {
    /// The replay options of variant (`method`, `policy`) under these settings, without a
    /// progress bar.
    pub fn options(&self, policy: SelectionPolicy, method: ReservationMethod) -> ReplayOptions {
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
            backtrack: self.backtrack,
        }
    }
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[arg(long)]
    pub grid: PathBuf,
    #[arg(long)]
    pub requests: PathBuf,
    #[arg(long, default_value = "time")]
    pub policy: SelectionPolicy,
    /// Reservation method: bir, bbr or bbr-overlay.
    #[arg(long, visible_alias = "mode", default_value = "bir")]
    pub method: ReservationMethod,
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub planner: PlannerArgs,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    #[arg(long)]
    pub grid: PathBuf,
    #[arg(long)]
    pub requests: PathBuf,
    /// Where to write one outcomes file per variant (optional).
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
    #[command(flatten)]
    pub planner: PlannerArgs,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The data folder (topology-zoo/ and swf/); the repository's `data/` by default.
    #[arg(long, default_value = "data")]
    pub data: PathBuf,
    /// Output folder for grid.json, the request files and every variant's outcomes.
    #[arg(long, default_value = "out/demo")]
    pub out: PathBuf,
    #[arg(long, default_value_t = 1000)]
    pub requests: usize,
    #[arg(long, default_value_t = 0.5)]
    pub load: f64,
    /// `mixed`: give Geant2012's sites drawn attributes (architectures, extensions, GPUs,
    /// software, labels) and the jobs drawn requirements (`workload --requirements mixed`), then
    /// run the same comparison; the checker verifies every job landed on a site that can run it.
    #[arg(long, value_enum, default_value_t = Heterogeneity::None)]
    pub heterogeneity: Heterogeneity,
    #[command(flatten)]
    pub planner: PlannerArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A TOML file of settings: every flag of `serve` under its long name with `_` for `-`
    /// (`w_interval_s = 1800`, `lis = ["s1=https://..."]`, switches as booleans), plus
    /// `database_url`. Precedence: command line > environment (`CORESERVE_<NAME>`,
    /// `DATABASE_URL`) > this file > defaults. An unknown key is an error.
    #[arg(long, env = "CORESERVE_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Log lines as text (default) or as one JSON object per line (timestamp, level, target,
    /// fields) on stderr; RUST_LOG sets the filter (default warn).
    #[arg(long, env = "CORESERVE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: crate::api::telemetry::LogFormat,
    /// The grid (sites and topology) to serve (every role but `planner`); saved in the store.
    /// Without it, the grid saved by an earlier start on the same DATABASE_URL is served.
    #[arg(long, env = "CORESERVE_GRID")]
    pub grid: Option<PathBuf>,
    /// What this process serves: all (one process), lis (one site, --site), nis, gis, or
    /// planner (over remote participants: --gis, --nis, --lis).
    #[arg(long, value_enum, default_value = "all", env = "CORESERVE_ROLE")]
    pub role: ServeRole,
    /// The site of a `lis` process.
    #[arg(long, env = "CORESERVE_SITE")]
    pub site: Option<String>,
    /// Base URL of the GIS (`planner` role), e.g. http://127.0.0.1:8090.
    #[arg(long, env = "CORESERVE_GIS")]
    pub gis: Option<String>,
    /// Base URL of the NIS (`planner` role).
    #[arg(long, env = "CORESERVE_NIS")]
    pub nis: Option<String>,
    /// SITE=URL: the LIS of a site (`planner` role; once per site).
    #[arg(long = "lis", value_name = "SITE=URL", env = "CORESERVE_LIS", value_delimiter = ',')]
    pub lis: Vec<String>,
    /// Bootstrap token shared by the processes of a separated deployment: participants accept
    /// it as a service token (principal `service`); planners without --participant-token send
    /// it (and then act as one principal). Prefer one --participant-token per planner.
    #[arg(long, env = "CORESERVE_SERVICE_TOKEN", hide_env_values = true)]
    pub service_token: Option<String>,
    /// This planner's own credential towards its participants (made with `coreserve token
    /// create --user NAME --service`): its holds are owned by NAME, and no other principal but
    /// an admin may commit, abort, release or extend them.
    #[arg(long, env = "CORESERVE_PARTICIPANT_TOKEN", hide_env_values = true)]
    pub participant_token: Option<String>,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key).
    #[arg(long, env = "CORESERVE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "CORESERVE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// With --tls-cert: require a client certificate signed by this PEM CA (mutual TLS).
    #[arg(long, env = "CORESERVE_TLS_CLIENT_CA")]
    pub tls_client_ca: Option<PathBuf>,
    /// With --tls-client-ca: a caller without a valid token whose client certificate (signed by
    /// that CA) names CN=NAME is the planner principal NAME. Lets a participant on a database of
    /// its own trust another domain's planners by their CA, with no token rows to share.
    #[arg(long, env = "CORESERVE_TRUST_CLIENT_CERTIFICATES", requires = "tls_client_ca")]
    pub trust_client_certificates: bool,
    /// A planner trusts only this PEM CA for https:// participants (default: the system's roots).
    #[arg(long, env = "CORESERVE_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// A planner's PEM client certificate for participants that require one (with
    /// --tls-client-key).
    #[arg(long, env = "CORESERVE_TLS_CLIENT_CERT", requires = "tls_client_key")]
    pub tls_client_cert: Option<PathBuf>,
    /// The PEM private key of --tls-client-cert.
    #[arg(long, env = "CORESERVE_TLS_CLIENT_KEY", requires = "tls_client_cert")]
    pub tls_client_key: Option<PathBuf>,
    #[arg(long, default_value = "127.0.0.1:8080", env = "CORESERVE_LISTEN")]
    pub listen: String,
    /// Planners in the pool (each request goes to the least busy one).
    #[arg(long, default_value_t = 3, env = "CORESERVE_PLANNERS")]
    pub planners: usize,
    /// Hold lease in seconds.
    #[arg(long, default_value_t = crate::in_process::DEFAULT_LEASE_S, env = "CORESERVE_LEASE_S")]
    pub lease_s: i64,
    /// Plans start no earlier than receipt + this.
    #[arg(long, default_value_t = 1800, env = "CORESERVE_W_INTERVAL_S")]
    pub w_interval_s: i64,
    #[arg(long, default_value = "time", env = "CORESERVE_POLICY")]
    pub policy: SelectionPolicy,
    /// Reservation method of requests that name none: bir, bbr or bbr-overlay.
    #[arg(long, visible_alias = "mode", default_value = "bir", env = "CORESERVE_METHOD")]
    pub method: ReservationMethod,
    /// NIS routing: shortest, widest or widest:K.
    #[arg(long, default_value = "shortest", env = "CORESERVE_ROUTING")]
    pub routing: Routing,
    /// Request timestamps must lie within this many days of now.
    #[arg(long, default_value_t = 365, env = "CORESERVE_HORIZON_DAYS")]
    pub horizon_days: i64,
    /// The admin bearer token (also read from CORESERVE_ADMIN_TOKEN);
    /// without one, a token is generated and printed once.
    #[arg(long, env = "CORESERVE_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// actix worker threads (default: one per core).
    #[arg(long, env = "CORESERVE_WORKERS")]
    pub workers: Option<usize>,
    /// Seconds an idempotency key's or a decided transaction's claim lives without renewal:
    /// another planner process takes over the work of one that stopped (crashed, stalled)
    /// after this long.
    #[arg(long, default_value_t = crate::api::DEFAULT_CLAIM_LEASE_S, env = "CORESERVE_CLAIM_LEASE_S")]
    pub claim_lease_s: i64,
    /// This process's name in claims and logs (default: ROLE@LISTEN#PID).
    #[arg(long, env = "CORESERVE_INSTANCE")]
    pub instance: Option<String>,
    /// At most this many plan requests of one user in flight at once (429 beyond).
    #[arg(long, default_value_t = crate::api::config::DEFAULT_MAX_IN_FLIGHT_PER_USER, env = "CORESERVE_MAX_IN_FLIGHT_PER_USER")]
    pub max_in_flight_per_user: usize,
    /// At most this many plan requests plan at once, shared fairly between users.
    #[arg(long, default_value_t = crate::api::config::DEFAULT_PLANNING_SLOTS, env = "CORESERVE_PLANNING_SLOTS")]
    pub planning_slots: usize,
    /// Fair share's admission window, ms: requests arriving within one window plan in the
    /// order of their projects' priorities (0: no wait).
    #[arg(long, default_value_t = 0, env = "CORESERVE_ADMISSION_WINDOW_MS")]
    pub admission_window_ms: u64,
    /// Webhooks: the wait before a failed delivery's first retry, ms (doubling, with jitter,
    /// up to an hour).
    #[arg(long, default_value_t = 1000, env = "CORESERVE_WEBHOOK_RETRY_BASE_MS")]
    pub webhook_retry_base_ms: u64,
    /// Webhooks: one whose deliveries fail for longer than this many seconds is disabled
    /// (default 3 days).
    #[arg(long, default_value_t = 3 * 24 * 3600, env = "CORESERVE_WEBHOOK_DISABLE_AFTER_S")]
    pub webhook_disable_after_s: i64,
    /// Retention: delete what finished this many days ago or earlier (cancelled, rejected and
    /// completed plans with their keys, past journal rows and decisions, delivered events,
    /// old webhook delivery log entries); 0 (default): keep everything. See docs/deploy.md.
    #[arg(long, default_value_t = 0, env = "CORESERVE_RETENTION_DAYS")]
    pub retention_days: u32,
    /// Retention: seconds between two prunings.
    #[arg(long, default_value_t = crate::api::config::DEFAULT_RETENTION_EVERY_S, env = "CORESERVE_RETENTION_EVERY_S")]
    pub retention_every_s: u64,
    /// SITE=PARTITION: the LIS of SITE fronts this Slurm partition (every role that keeps the
    /// site: `all`, or `lis` with --site SITE; once per Slurm site; other sites stay calendars).
    /// Committed jobs become Slurm advance reservations; Slurm's own reservations are sold out.
    #[arg(long = "slurm", value_name = "SITE=PARTITION", env = "CORESERVE_SLURM", value_delimiter = ',')]
    pub slurm: Vec<String>,
    /// SLURM_CONF for the Slurm sites' scontrol (default: the environment's SLURM_CONF, else
    /// Slurm's default).
    #[arg(long, env = "CORESERVE_SLURM_CONF")]
    pub slurm_conf: Option<PathBuf>,
    /// The scontrol program of the Slurm sites.
    #[arg(long, default_value = "scontrol", env = "CORESERVE_SLURM_SCONTROL")]
    pub slurm_scontrol: PathBuf,
    /// USER=SLURM_USER: the Slurm user a coreserve user's reservations are made for (once per
    /// user).
    #[arg(long = "slurm-user", value_name = "USER=SLURM_USER", env = "CORESERVE_SLURM_USER", value_delimiter = ',')]
    pub slurm_user: Vec<String>,
    /// The Slurm user of coreserve users without --slurm-user (default: none; such users get
    /// 403 no-local-account at the Slurm sites).
    #[arg(long, env = "CORESERVE_SLURM_DEFAULT_USER")]
    pub slurm_default_user: Option<String>,
    /// Prefix of the names of coreserve's Slurm reservations (the hold id follows).
    #[arg(long, default_value = crate::lis::slurm::DEFAULT_PREFIX, env = "CORESERVE_SLURM_PREFIX")]
    pub slurm_prefix: String,
    /// Seconds between two synchronisations of a Slurm site with Slurm.
    #[arg(long, default_value_t = crate::lis::slurm::DEFAULT_SYNC_S, env = "CORESERVE_SLURM_SYNC_S")]
    pub slurm_sync_s: u64,
    /// The NIS programs a data plane: `tc` (Linux traffic control: an HTB class and a u32
    /// filter per committed transfer and link of its path, during its window). Needs
    /// --dataplane-map. Roles all and nis.
    #[arg(long, value_parser = ["tc"], env = "CORESERVE_DATAPLANE")]
    pub dataplane: Option<String>,
    /// The data plane's map (JSON: per link the namespace and interface of each end, per site
    /// its endpoint address; `scripts/emulated-wan start` writes one).
    #[arg(long, env = "CORESERVE_DATAPLANE_MAP")]
    pub dataplane_map: Option<PathBuf>,
    /// Milliseconds between two reconciliations of the data plane (besides window boundaries).
    #[arg(long, default_value_t = crate::nis::dataplane::DEFAULT_SYNC_MS, env = "CORESERVE_DATAPLANE_SYNC_MS")]
    pub dataplane_sync_ms: u64,
    /// First destination port of reserved transfers (the span is --dataplane-port-span).
    #[arg(long, default_value_t = crate::nis::dataplane::DEFAULT_PORT_BASE, env = "CORESERVE_DATAPLANE_PORT_BASE")]
    pub dataplane_port_base: u16,
    #[arg(long, default_value_t = crate::nis::dataplane::DEFAULT_PORT_SPAN, env = "CORESERVE_DATAPLANE_PORT_SPAN")]
    pub dataplane_port_span: u16,
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

impl ServeArgs {
    /// The service's settings: `--config` noted in the log, the numbers checked, the role of
    /// `--role` (with `--site`, or `--gis`, `--nis` and `--lis` for a planner), the grid of
    /// `--grid` read, and the store of `database_url` (`DATABASE_URL`).
    ///
    /// # Errors
    /// A number out of range, a role without the flags it needs, a `--lis` that is not
    /// `SITE=URL`, or a `--grid` file that cannot be read.
    pub fn into_settings(self, database_url: Option<String>) -> Result<Settings> {
        if let Some(file) = &self.config {
            tracing::info!(config = %file.display(), "settings read from the config file (command line and environment take precedence)");
        }
        if self.planners == 0
            || self.lease_s <= 0
            || self.w_interval_s < 0
            || self.horizon_days <= 0
            || self.claim_lease_s <= 0
            || self.max_in_flight_per_user == 0
            || self.planning_slots == 0
            || self.webhook_retry_base_ms == 0
            || self.webhook_disable_after_s <= 0
            || self.retention_every_s == 0
        {
            bail!(
                "--planners, --lease-s, --claim-lease-s, --max-in-flight-per-user, --planning-slots, --horizon-days, \
                 --webhook-retry-base-ms, --webhook-disable-after-s and --retention-every-s must be > 0 and \
                 --w-interval-s >= 0"
            );
        }
        let (role, grid) = self.role_and_grid()?;
        let slurm = self.slurm_sites(&role)?;
        let dataplane = match (&self.dataplane, &self.dataplane_map) {
            (None, _) => None,
            (Some(_), None) => bail!("--dataplane tc needs --dataplane-map"),
            (Some(_), Some(_)) if !matches!(role, Role::All | Role::Nis) => {
                bail!("--dataplane belongs to the process that keeps the NIS (roles all and nis)")
            }
            (Some(_), Some(map)) => Some(crate::nis::dataplane::DataplaneConfig {
                sync_ms: self.dataplane_sync_ms.max(50),
                port_base: self.dataplane_port_base,
                port_span: self.dataplane_port_span.clamp(1, u16::MAX - self.dataplane_port_base),
                ..crate::nis::dataplane::DataplaneConfig::new(map)
            }),
        };
        let tls_files = |cert_key: Option<(PathBuf, PathBuf)>| {
            cert_key.map(|(cert, key)| crate::api::config::TlsFiles { cert, key })
        };
        let config = ServeConfig {
            listen: self.listen,
            planners: self.planners,
            lease_s: self.lease_s,
            w_interval_s: self.w_interval_s,
            policy: self.policy,
            method: self.method,
            routing: self.routing,
            horizon_days: self.horizon_days,
            admin_token: self.admin_token,
            workers: self.workers,
            role,
            claim_lease_s: self.claim_lease_s,
            instance: self.instance,
            max_in_flight_per_user: self.max_in_flight_per_user,
            planning_slots: self.planning_slots,
            admission_window_ms: self.admission_window_ms,
            webhook_retry_base_ms: self.webhook_retry_base_ms,
            webhook_disable_after_s: self.webhook_disable_after_s,
            service_token: self.service_token,
            participant_token: self.participant_token,
            tls: tls_files(self.tls_cert.zip(self.tls_key)),
            tls_ca: self.tls_ca,
            tls_client: tls_files(self.tls_client_cert.zip(self.tls_client_key)),
            tls_client_ca: self.tls_client_ca,
            trust_client_certificates: self.trust_client_certificates,
            slurm,
            dataplane,
            retention_days: self.retention_days,
            retention_every_s: self.retention_every_s,
        };
        Ok(Settings { config, grid, database_url })
    }

    /// The Slurm sites of `--slurm`, each with the `--slurm-*` settings.
    ///
    /// # Errors
    /// A `--slurm` or `--slurm-user` that is not `A=B`, a site given twice, a Slurm site of a
    /// `lis` process that is not its `--site`, a `planner` with Slurm sites (its LIS processes
    /// have them), or an invalid setting ([`crate::lis::slurm::SlurmConfig::validate`]).
    fn slurm_sites(&self, role: &Role) -> Result<Vec<(String, crate::lis::slurm::SlurmConfig)>> {
        let pair = |flag: &str, v: &str| match v.split_once('=') {
            Some((a, b)) if !a.trim().is_empty() && !b.trim().is_empty() => {
                Ok((a.trim().to_owned(), b.trim().to_owned()))
            }
            _ => bail!("{flag} wants A=B, got `{v}`"),
        };
        let mut users = std::collections::BTreeMap::new();
        for u in &self.slurm_user {
            let (user, slurm_user) = pair("--slurm-user", u)?;
            users.insert(user, slurm_user);
        }
        let mut sites: Vec<(String, crate::lis::slurm::SlurmConfig)> = Vec::new();
        for s in &self.slurm {
            let (site, partition) = pair("--slurm", s)?;
            if sites.iter().any(|(x, _)| *x == site) {
                bail!("--slurm names site `{site}` twice");
            }
            match role {
                Role::Lis { site: mine } if *mine != site => {
                    bail!("--slurm names site `{site}`, but this LIS process serves `{mine}`")
                }
                Role::Planner(_) | Role::Nis | Role::Gis => {
                    bail!("--slurm belongs to the processes that keep the site (all, or lis with --site {site})")
                }
                _ => {}
            }
            let config = crate::lis::slurm::SlurmConfig {
                partition,
                scontrol: self.slurm_scontrol.clone(),
                slurm_conf: self.slurm_conf.clone(),
                users: users.clone(),
                default_user: self.slurm_default_user.clone(),
                prefix: self.slurm_prefix.clone(),
                sync_s: self.slurm_sync_s,
            };
            config.validate().map_err(|e| anyhow::anyhow!("site `{site}`: {e}"))?;
            sites.push((site, config));
        }
        Ok(sites)
    }

    /// The [`Role`] of `--role`, and the grid of `--grid` (empty for a planner, whatever
    /// `--grid` says; `None` when not given).
    fn role_and_grid(&self) -> Result<(Role, Option<Grid>)> {
        if self.role == ServeRole::Planner {
            let (Some(gis), Some(nis)) = (self.gis.clone(), self.nis.clone()) else {
                bail!("--role planner needs --gis URL and --nis URL");
            };
            let mut lis = Vec::new();
            for l in &self.lis {
                let Some((site, url)) = l.split_once('=') else { bail!("--lis wants SITE=URL, got `{l}`") };
                lis.push((site.to_owned(), url.to_owned()));
            }
            if lis.is_empty() {
                bail!("--role planner needs one --lis SITE=URL per site");
            }
            let empty = Grid::new(vec![], vec![], vec![])?;
            return Ok((Role::Planner(RemoteServices { gis, nis, lis }), Some(empty)));
        }
        let g = self.grid.as_deref().map(grid::load_grid).transpose()?;
        let role = match self.role {
            ServeRole::All => Role::All,
            ServeRole::Nis => Role::Nis,
            ServeRole::Gis => Role::Gis,
            ServeRole::Lis => {
                let Some(site) = self.site.clone() else { bail!("--role lis needs --site ID") };
                Role::Lis { site }
            }
            ServeRole::Planner => unreachable!("handled above"),
        };
        Ok((role, g))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("coreserve").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn the_command_line_is_consistent() {
        // clap's own checks (duplicate short flags, conflicting names), in release builds too.
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("6  no connection") && help.contains("Retries:"), "{help}");
    }

    #[test]
    fn the_method_flag_is_also_read_as_mode() {
        let plan =
            |flag: &str| match parse(&["plan", "--grid", "g", "--requests", "r", "--out", "o", flag, "bbr"]).command {
                Command::Plan(a) => a.method,
                other => panic!("{other:?}"),
            };
        assert_eq!(plan("--method"), ReservationMethod::Bbr);
        assert_eq!(plan("--mode"), ReservationMethod::Bbr);
        let serve = |args: &[&str]| match parse(&[&["serve"], args].concat()).command {
            Command::Serve(a) => a.method,
            other => panic!("{other:?}"),
        };
        assert_eq!(serve(&["--method", "bbr-overlay"]), ReservationMethod::BbrOverlay);
        assert_eq!(serve(&["--mode", "bbr"]), ReservationMethod::Bbr);
        // Default (unless the environment sets the method).
        if std::env::var_os("CORESERVE_METHOD").is_none() && std::env::var_os("CORESERVE_MODE").is_none() {
            assert_eq!(serve(&[]), ReservationMethod::Bir);
        }
    }

    #[test]
    fn the_backtrack_flag_picks_the_search() {
        let demo = |args: &[&str]| match parse(&[&["demo"], args].concat()).command {
            Command::Demo(a) => a.planner.backtrack,
            other => panic!("{other:?}"),
        };
        assert_eq!(demo(&[]), Backtrack::ConflictDirected);
        assert_eq!(demo(&["--backtrack", "chronological"]), Backtrack::Chronological);
        assert_eq!(demo(&["--backtrack", "conflict-directed"]), Backtrack::ConflictDirected);
        let compare = parse(&["compare", "--grid", "g", "--requests", "r", "--backtrack", "chronological"]);
        let Command::Compare(a) = compare.command else { unreachable!() };
        assert_eq!(
            a.planner.options(SelectionPolicy::Time, ReservationMethod::Bir).backtrack,
            Backtrack::Chronological
        );
    }

    #[test]
    fn serve_flags_become_settings() {
        let Command::Serve(a) =
            parse(&["serve", "--role", "planner", "--gis", "http://g", "--nis", "http://n"]).command
        else {
            unreachable!()
        };
        let e = a.into_settings(None).unwrap_err().to_string();
        assert!(e.contains("--lis SITE=URL"), "{e}");
        let Command::Serve(a) =
            parse(&["serve", "--role", "planner", "--gis", "http://g", "--nis", "http://n", "--lis", "s1=http://l"])
                .command
        else {
            unreachable!()
        };
        let s = a.into_settings(Some("postgres://x".into())).unwrap();
        assert_eq!(
            s.config.role,
            Role::Planner(RemoteServices {
                gis: "http://g".into(),
                nis: "http://n".into(),
                lis: vec![("s1".into(), "http://l".into())]
            })
        );
        assert_eq!(s.grid.map(|g| g.sites().len()), Some(0));
        assert_eq!(s.database_url.as_deref(), Some("postgres://x"));
        let Command::Serve(a) = parse(&["serve", "--planners", "0"]).command else { unreachable!() };
        assert!(a.into_settings(None).unwrap_err().to_string().contains("must be > 0"));
    }
}
