//! The flags of `plan`, `compare` and `demo`, which replay requests through competing planners
//! ([`crate::replay`]): [`PlannerArgs`], shared by the three, and each command's files.

use std::path::PathBuf;

use clap::Args;

use crate::grid::Heterogeneity;
use crate::model::{ReservationMethod, SelectionPolicy};
use crate::nis::Routing;
use crate::planner::Backtrack;
use crate::replay::ReplayOptions;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::tests::parse;
    use crate::cli::Command;

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
}
