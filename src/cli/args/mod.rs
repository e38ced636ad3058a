//! The command line's types (clap): every subcommand, its flags and their defaults, and the
//! conversion of `serve`'s flags into the service's [`Settings`](crate::api::Settings).
//!
//! | module | what |
//! |---|---|
//! | this one | [`Cli`], [`Command`], and the flags of `grid`, `workload` and `token` |
//! | `replay` | `plan`, `compare` and `demo`: [`PlannerArgs`] and each command's files |
//! | `serve` | `serve`: [`ServeArgs`] and their [`Settings`](crate::api::Settings) |
//!
//! The client commands' flags (`plans`, `webhooks`, `sites`, `availability`, `route`) are in
//! [`super::client`], next to the commands.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};

use super::client;
use crate::grid::Heterogeneity;
use crate::workload::{AppKind, RequirementsProfile};

mod replay;
mod serve;

pub use replay::{CompareArgs, DemoArgs, PlanArgs, PlannerArgs};
pub use serve::{ServeArgs, ServeRole};

/// coreserve: an advance co-reservation broker for compute and network bandwidth.
#[derive(Debug, Parser)]
#[command(version, about, after_help = after_help())]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The end of `coreserve --help` (and of `coreserve plans --help`): the client's exit codes and
/// retry policy, [`client::EXIT_CODES`] and [`client::RETRY_POLICY`].
fn after_help() -> String {
    format!("{}\n\n{}", client::EXIT_CODES, client::RETRY_POLICY)
}

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
    #[command(subcommand, after_help = after_help())]
    Plans(client::PlansCommand),
    /// WfCommons workflows: `workflow import FILE` makes a plan request of an instance (prints
    /// it, books it with --submit, writes its Snakefile with --snakefile).
    #[command(subcommand)]
    Workflow(super::workflow::WorkflowCommand),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ReservationMethod;

    /// Parses `coreserve ARGS...` (for the tests of `replay` and `serve` too).
    pub(super) fn parse(args: &[&str]) -> Cli {
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
}
