//! Scenario files (`sim/scenarios/*.toml`): every set-up of an experiment is a file (the Bricks
//! simulator's lesson; docs/simulator.md). Paths inside a scenario are relative to the scenario file.
//!
//! ```toml
//! base = "paper.toml"                      # optional: a file of the same folder whose settings
//!                                          # this file's own replace (tables key by key)
//! name = "smoke"
//! trace = "../../data/swf/SDSC-BLUE-2000-4.2-cln.swf.gz"
//! topologies = ["gridg-n", "gridg-w"]    # also "fat-tree", or a .graphml / grid.json path
//! kinds = ["workflow", "coallocation"]
//! loads = [0.2, 0.6, 1.0]                 # offered loads to sweep
//! algorithms = ["bbr-time", "bir-time"]   # default: all 9 (bbr, bir, bbr-overlay x 4 policies
//!                                         # ... bbr-overlay only with `time` by default)
//! seeds = 2                                # runs per point: seeds seed_offset+1 ..= seed_offset+seeds
//! seed_offset = 0                          # default 0; e.g. 100 for seeds 101..=102
//! requests = 100                           # plan requests per run
//! planners = 3
//! planner_concurrency = 1                  # requests a planner works on at once
//! w_interval_s = 1800
//! warmup_requests = 25                     # requests simulated but not counted, per run
//!                                          # (default: a quarter of `requests`; 0: transient)
//! query_fanout = "parallel"                # or "sequential": a step's free-slot queries
//! bbr_replans = 0                          # re-plans of a refused BBR batch
//! backtrack = "conflict-directed"          # or "chronological": Fig. 3 as written
//! batch_messages = false                   # true: the service's batched queries, aborts, commits
//! check_before_hold = false                # true: as the service's planners
//! hold_with_transfers = false              # true: a job's prepare with its transfers' holds
//! plan_from_snapshots = false              # true: BIR searches replicas of snapshots (issue 53)
//! dispatch = "random"                      # or "least-busy": the service's planner pool
//! access_capacity_mbps = 2500              # gridg-n's site access links
//! [service_times]                          # uniform ranges, seconds (Ando & Aida, Table 2)
//! free_slot = [2.0, 3.0]
//! heterogeneity = "mixed"                  # default "none": site attributes (grid::heterogenize)
//! experiment = "heterogeneity"             # default "paper"; sim/src/heterogeneous/,
//!                                          # or "fairshare" (sim/src/fairshare/, [fairshare])
//! [workload]                               # any WorkloadParams field (shape, durations_s,
//!                                          # requirements = "mixed", ...)
//! [validation]                             # --validate: calibration_seeds, inject_service_times,
//! tolerance = { success_rate = 0.05 }      # tolerances fixed in advance (scenario/validation.rs)
//! [reduced]                                # the CI's short run (`--reduced`): any of the
//! seeds = 1                                # settings above, in place of the file's own
//! ```
//!
//! A variant of another scenario names it as its `base` and writes only what it changes
//! (`sensitivity/*.toml` over `sensitivity/base.toml`, `paper-sequential.toml` over
//! `paper.toml`): the base's settings, `[reduced]` included, are read first and the file's own
//! merged over them as `[reduced]` is ([`read_table`]).
//!
//! A committed scenario has a `[reduced]` table: `coreserve-sim FILE --reduced` runs the
//! scenario with those settings merged over the file's (tables key by key), and
//! `sim/tests/reduced.rs` compares that run's summary with the committed one in
//! `sim/results/reduced/`, so a change to the planner's plans, or to the file, fails CI.
//!
//! The experiments' own settings are in [`fairshare`] (`[fairshare]`), [`heterogeneity`]
//! (`type_choice`) and [`validation`] (`[validation]`): a scenario imports nothing from the
//! experiments that read it.

pub mod fairshare;
pub mod heterogeneity;
pub mod validation;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use coreserve::grid::{
    fat_tree, gridg, heterogenize, import_graphml, load_grid, GridgParams, GridgVariant, Heterogeneity, ImportOptions,
    SiteParams,
};
use coreserve::model::{Grid, UnknownValue};
use coreserve::nis::Routing;
use coreserve::planner::{Backtrack, QueryFanout};
use coreserve::replay::DispatchRule;
use coreserve::workload::{AppKind, RequirementsProfile, WorkloadParams};
use serde::Deserialize;

use crate::algorithm::{default_algorithms, Algorithm};
use crate::transport::ServiceTimes;

/// The parameters of the `gridg-w-8` topology.
fn gridg_8() -> GridgParams {
    GridgParams { wan_nodes: 2, man_per_wan: 2, lan_per_man: 1, hosts_per_lan: 2, ..Default::default() }
}

/// A scenario as written in its file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    /// SWF trace the CPU counts come from (relative to the scenario file).
    pub trace: PathBuf,
    /// Keep only the trace's jobs of at most this many CPUs: a trace of small jobs (default:
    /// every job).
    pub max_trace_cpus: Option<u32>,
    #[serde(default = "default_topologies")]
    pub topologies: Vec<String>,
    #[serde(default = "default_kinds")]
    pub kinds: Vec<AppKind>,
    pub loads: Vec<f64>,
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<Algorithm>,
    /// Runs per point, with seeds `seed_offset + 1 ..= seed_offset + seeds`.
    #[serde(default = "default_seeds")]
    pub seeds: u64,
    /// Added to every run's seed (default 0), so that runs outside the published seeds need no
    /// code change: each seed draws its own workload, grid (unless `topology_seed`), planner
    /// and latency streams.
    #[serde(default)]
    pub seed_offset: u64,
    /// Plan requests per run.
    #[serde(default = "default_requests")]
    pub requests: usize,
    #[serde(default = "default_planners")]
    pub planners: usize,
    /// Requests one planner works on at once (default 1: a planner handles its queue one
    /// request at a time, and queueing counts against `w_interval`).
    #[serde(default = "default_concurrency")]
    pub planner_concurrency: usize,
    #[serde(default = "default_w_interval")]
    pub w_interval_s: i64,
    /// Hold lease; default `2 * w_interval_s`, so a hold outlives any search (the paper has
    /// no leases; BIR's holds must survive planning).
    pub lease_s: Option<i64>,
    /// NIS routing: `shortest`, `widest`, `widest:K`.
    #[serde(default = "default_routing")]
    pub routing: String,
    /// Arity of `fat-tree` topologies.
    #[serde(default = "default_k")]
    pub fat_tree_k: u32,
    /// Seed of generated topologies; default: the run's seed (each seed its own grid).
    pub topology_seed: Option<u64>,
    #[serde(default)]
    pub service_times: ServiceTimes,
    /// Requests at the start of every run that are simulated but not counted (a warm-up).
    /// A file that does not set it gets a quarter of its `requests` ([`Scenario::load`]); 0
    /// counts every request from an empty grid (a transient).
    #[serde(default)]
    pub warmup_requests: usize,
    /// How a search step's free-slot queries go out: `parallel` (default) or `sequential`.
    #[serde(default)]
    pub query_fanout: QueryFanout,
    /// BBR: re-plans of a request whose batch prepare was refused (default 0, the paper's).
    #[serde(default)]
    pub bbr_replans: u32,
    /// How the planners' search backtracks: `conflict-directed` (default, backjumping) or
    /// `chronological` (Ando & Aida's Fig. 3 as written; docs/algorithm.md).
    #[serde(default)]
    pub backtrack: Backtrack,
    /// The planners batch what the service's planner process batches between processes
    /// (`PlannerConfig::batch_queries` and `batch_aborts`), and a batch travels as one message
    /// with one service time, commits included (default false: every query, abort and commit
    /// is a message of its own, as in Ando & Aida's Table 2).
    #[serde(default)]
    pub batch_messages: bool,
    /// `PlannerConfig::check_before_hold`, which the service turns on (default false).
    #[serde(default)]
    pub check_before_hold: bool,
    /// `PlannerConfig::hold_with_transfers`, which the service turns on (default false: the
    /// results committed before it were planned without it).
    #[serde(default)]
    pub hold_with_transfers: bool,
    /// `PlannerConfig::plan_from_snapshots`, which the service turns on (default false: the
    /// results committed before it were planned without it). A snapshot takes a query's
    /// service time, a batch of prepares one prepare's with `batch_messages`, else one each.
    #[serde(default)]
    pub plan_from_snapshots: bool,
    /// Which planner an arriving request goes to: `random` (default: a seeded draw) or
    /// `least-busy` (the fewest requests waiting or planning, ties the first: the service's
    /// rule).
    #[serde(default)]
    pub dispatch: DispatchRule,
    /// Capacity of `gridg-n`'s site access links, Mbit/s (default 2,500; `gridg-w` keeps 5,000).
    pub access_capacity_mbps: Option<u64>,
    /// Site attributes drawn for every grid (`grid::heterogenize` with the grid's seed):
    /// `none` (default: round 1's homogeneous sites) or `mixed`.
    #[serde(default)]
    pub heterogeneity: Heterogeneity,
    /// What the scenario measures: `paper` (default: success rate and cost of every algorithm,
    /// the figures and findings) or `heterogeneity` (seed 003's placement validity and single
    /// vs per-type queues; `crate::heterogeneous`) or `fairshare` (seed 002's Planned-Use fair
    /// share against first come, first served; `crate::fairshare`).
    #[serde(default)]
    pub experiment: Experiment,
    /// Experiment `heterogeneity`, arm `per-type`: how a request that several site types can
    /// run is given one: `weighted` (default: at random, weighted by the types' CPUs) or
    /// `largest` (the type with the most CPUs).
    #[serde(default)]
    pub type_choice: heterogeneity::TypeChoice,
    /// Workload parameters (kind, requests, load, seed and w_interval are set per run).
    #[serde(default)]
    pub workload: WorkloadParams,
    /// `experiment = "fairshare"`: the projects, the run's span and the arms (`[fairshare]`).
    #[serde(default)]
    pub fairshare: fairshare::FairShareParams,
    /// `--validate`: calibration runs, injected service times and tolerances
    /// (`[validation]`).
    #[serde(default)]
    pub validation: validation::ValidationParams,
    #[serde(skip)]
    pub dir: PathBuf,
}

/// The experiments a scenario can run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Experiment {
    /// Ando & Aida's: runs.csv, summary.csv, figures, findings.md.
    #[default]
    Paper,
    /// Seed 003's (Saito & Hirotsu): requirements filter vs OS-only matching, one queue vs
    /// per-type queues (`crate::heterogeneous`).
    Heterogeneity,
    /// Seed 002's (Nakajima et al.): Planned-Use fair share against first come, first served
    /// when an idle project floods the grid (`crate::fairshare`; `loads` are the flood's).
    Fairshare,
    /// Issue 46's: the paper's workflows as drawn (concurrent transfers) against their staged
    /// twins (`crate::staged`).
    Staged,
}

fn default_topologies() -> Vec<String> {
    vec!["gridg-n".into(), "gridg-w".into()]
}
fn default_kinds() -> Vec<AppKind> {
    AppKind::ALL.to_vec()
}
fn default_seeds() -> u64 {
    10
}
fn default_requests() -> usize {
    200
}
fn default_planners() -> usize {
    3
}
fn default_concurrency() -> usize {
    1
}
fn default_w_interval() -> i64 {
    1800
}
fn default_routing() -> String {
    "shortest".into()
}
fn default_k() -> u32 {
    4
}

impl Scenario {
    /// Reads and checks a scenario file (its `[reduced]` table, if any, is not applied).
    pub fn load(path: &Path) -> Result<Scenario> {
        Self::load_as(path, false)
    }

    /// Reads and checks a scenario file with its `[reduced]` table's settings in place of the
    /// file's own: the short run CI compares with the committed `sim/results/reduced/`.
    pub fn load_reduced(path: &Path) -> Result<Scenario> {
        Self::load_as(path, true)
    }

    fn load_as(path: &Path, reduced: bool) -> Result<Scenario> {
        let mut table = read_table(path, 0)?;
        match (table.remove("reduced"), reduced) {
            (Some(toml::Value::Table(over)), true) => merge(&mut table, over),
            (None, true) => bail!("scenario {} has no [reduced] table", path.display()),
            (Some(v), _) if !v.is_table() => bail!("scenario {}: `reduced` must be a table", path.display()),
            _ => {}
        }
        let warmup_given = table.contains_key("warmup_requests");
        let mut s: Scenario =
            toml::Value::Table(table).try_into().with_context(|| format!("parsing scenario {}", path.display()))?;
        if !warmup_given {
            // Steady state by default: the first quarter of a run's requests is a warm-up.
            s.warmup_requests = s.requests / 4;
        }
        s.dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        s.validate().with_context(|| format!("scenario {}", path.display()))?;
        Ok(s)
    }

    /// Checks the settings (also after command-line overrides).
    pub fn validate(&self) -> Result<()> {
        if self.loads.is_empty() || self.loads.iter().any(|l| !(l.is_finite() && *l > 0.0)) {
            bail!("loads must be a non-empty list of numbers > 0");
        }
        if self.topologies.is_empty() || self.kinds.is_empty() || self.algorithms.is_empty() {
            bail!("topologies, kinds and algorithms must not be empty");
        }
        if self.seeds == 0 || self.requests == 0 || self.planners == 0 || self.planner_concurrency == 0 {
            bail!("seeds, requests, planners and planner_concurrency must be >= 1");
        }
        if self.seed_offset.checked_add(self.seeds).is_none() {
            bail!("seed_offset + seeds must fit in 64 bits");
        }
        if self.warmup_requests >= self.requests {
            bail!("warmup_requests ({}) must be fewer than requests ({})", self.warmup_requests, self.requests);
        }
        if self.access_capacity_mbps == Some(0) {
            bail!("access_capacity_mbps must be > 0");
        }
        if self.w_interval_s < 0 || self.lease_s.is_some_and(|l| l <= 0) {
            bail!("w_interval_s must be >= 0 and lease_s > 0");
        }
        if self.experiment == Experiment::Heterogeneity
            && (self.heterogeneity == Heterogeneity::None || self.workload.requirements == RequirementsProfile::None)
        {
            bail!("experiment = \"heterogeneity\" needs heterogeneity = \"mixed\" and [workload] requirements = \"mixed\"");
        }
        self.fairshare.validate().context("[fairshare]")?;
        self.routing()?;
        self.service_times.validate()?;
        Ok(())
    }

    /// The NIS routing policy.
    pub fn routing(&self) -> std::result::Result<Routing, UnknownValue> {
        self.routing.parse()
    }

    /// The run seeds: `seed_offset + 1 ..= seed_offset + seeds`.
    pub fn run_seeds(&self) -> std::ops::RangeInclusive<u64> {
        self.seed_offset + 1..=self.seed_offset + self.seeds
    }

    /// The hold lease in seconds.
    pub fn lease_s(&self) -> i64 {
        self.lease_s.unwrap_or(2 * self.w_interval_s.max(60))
    }

    /// A path from the scenario file, resolved against its folder.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.dir.join(p)
        }
    }

    /// Builds topology `name` for run seed `seed`, its sites' attributes drawn for the
    /// scenario's `heterogeneity` from the same (topology) seed.
    pub fn grid(&self, name: &str, seed: u64) -> Result<Grid> {
        let seed = self.topology_seed.unwrap_or(seed);
        Ok(heterogenize(self.topology(name, seed)?, self.heterogeneity, seed))
    }

    /// Topology `name` for topology seed `seed`, default site attributes.
    fn topology(&self, name: &str, seed: u64) -> Result<Grid> {
        let narrow = |mut p: GridgParams| {
            if let Some(c) = self.access_capacity_mbps {
                p.access.capacity_mbps = c;
            }
            gridg(GridgVariant::Narrow, seed, &p)
        };
        Ok(match name {
            "gridg-n" => narrow(GridgParams::default()),
            "gridg-w" => gridg(GridgVariant::Wide, seed, &GridgParams::default()),
            // 2 WAN routers x 2 MAN x 1 LAN x 2 hosts: 8 sites (the load test's small grid; a
            // role-separated deployment of it is 11 processes).
            "gridg-w-8" => gridg(GridgVariant::Wide, seed, &gridg_8()),
            "gridg-n-8" => narrow(gridg_8()),
            "fat-tree" => fat_tree(self.fat_tree_k, seed, &SiteParams::default()),
            path if path.ends_with(".graphml") => {
                let p = self.resolve(Path::new(path));
                let xml = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
                import_graphml(&xml, &ImportOptions { seed, ..Default::default() })?
            }
            path if path.ends_with(".json") => load_grid(&self.resolve(Path::new(path)))?,
            other => {
                bail!("unknown topology `{other}`: gridg-n, gridg-w, gridg-n-8, gridg-w-8, fat-tree, or a .graphml / .json path")
            }
        })
    }

    /// The workload of one point: the scenario's `[workload]` with `requests` and `w_interval_s`
    /// set, at offered load `load` of `kind`, drawn with `seed`.
    pub fn workload_params(&self, kind: AppKind, load: f64, seed: u64) -> WorkloadParams {
        WorkloadParams {
            kind,
            requests: self.requests,
            load,
            seed,
            w_interval_s: self.w_interval_s,
            ..self.workload.clone()
        }
    }

    /// The short name of a topology for file names and tables.
    pub fn topology_label(name: &str) -> String {
        Path::new(name).file_stem().map_or(name.to_string(), |s| s.to_string_lossy().to_lowercase())
    }
}

/// How deep `base` files may name bases of their own (a deeper chain is taken for a cycle).
const MAX_BASE_DEPTH: usize = 4;

/// A scenario file's settings as a table, over those of the file its `base` key names (a file
/// of the same folder, itself read so), merged by [`merge`]: `[reduced]` and the other tables
/// key by key.
///
/// # Errors
/// The file or a base cannot be read or parsed; `base` is not the name of a file of the same
/// folder; bases nest deeper than [`MAX_BASE_DEPTH`].
fn read_table(path: &Path, depth: usize) -> Result<toml::Table> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading scenario {}", path.display()))?;
    let mut table: toml::Table =
        toml::from_str(&text).with_context(|| format!("parsing scenario {}", path.display()))?;
    let Some(base) = table.remove("base") else { return Ok(table) };
    // Paths inside a scenario are read relative to the file that is run: a base of another
    // folder would read its own paths wrongly.
    let Some(name) = base.as_str().filter(|n| !n.is_empty() && Path::new(n).file_name() == Some(n.as_ref())) else {
        bail!("scenario {}: `base` must name a file of the same folder", path.display());
    };
    if depth >= MAX_BASE_DEPTH {
        bail!("scenario {}: bases nest more than {MAX_BASE_DEPTH} deep (a cycle?)", path.display());
    }
    let mut merged = read_table(&path.with_file_name(name), depth + 1)?;
    merge(&mut merged, table);
    Ok(merged)
}

/// Puts `over`'s settings into `base`: a table into a table key by key, anything else in place.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(extra: &str) -> Scenario {
        toml::from_str(&format!("name = 't'\ntrace = 'unused'\nloads = [1.0]\n{extra}")).unwrap()
    }

    #[test]
    fn seeds_start_after_the_offset() {
        assert_eq!(scenario("seeds = 3").run_seeds(), 1..=3, "no offset: the published seeds 1..=N");
        let s = scenario("seeds = 2\nseed_offset = 100");
        assert_eq!(s.run_seeds().collect::<Vec<_>>(), vec![101, 102]);
        s.validate().unwrap();
        // TOML integers are i64; the command line's --seed-offset reaches u64.
        let mut s = scenario("seeds = 2");
        s.seed_offset = u64::MAX - 1;
        let e = s.validate().unwrap_err();
        assert!(e.to_string().contains("seed_offset + seeds"), "{e}");
    }

    #[test]
    fn reduced_settings_replace_the_files_key_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        std::fs::write(
            &path,
            "name = 't'\ntrace = 'u'\nloads = [0.2, 1.0]\nseeds = 5\n[workload]\nrequirements = 'mixed'\n\
             [reduced]\nseeds = 1\n[reduced.workload]\nshape = { chain = 1 }\n",
        )
        .unwrap();
        let full = Scenario::load(&path).unwrap();
        assert_eq!((full.seeds, full.loads.len()), (5, 2));
        let short = Scenario::load_reduced(&path).unwrap();
        assert_eq!((short.seeds, short.loads.len()), (1, 2), "only what [reduced] names changes");
        assert_eq!(short.workload.requirements, RequirementsProfile::Mixed, "tables merge key by key");
        assert!(short.workload.shape.is_some() && full.workload.shape.is_none());
        std::fs::write(&path, "name = 't'\ntrace = 'u'\nloads = [1.0]\n").unwrap();
        let e = Scenario::load_reduced(&path).unwrap_err();
        assert!(e.to_string().contains("no [reduced]"), "{e}");
    }

    #[test]
    fn a_base_files_settings_lie_under_the_files_own() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write(
            "base.toml",
            "name = 'b'\ntrace = 'u'\nloads = [0.2, 1.0]\nseeds = 5\nrequests = 1200\nwarmup_requests = 300\n\
             [service_times]\nhold = [3.0, 4.0]\n[reduced]\nseeds = 1\nrequests = 30\nwarmup_requests = 10\n",
        );
        write(
            "v.toml",
            "base = 'base.toml'\nname = 'v'\nseeds = 3\n[service_times]\ncommit = [0.1, 0.2]\n\
             [reduced]\nwarmup_requests = 0\n",
        );
        let v = Scenario::load(&dir.path().join("v.toml")).unwrap();
        assert_eq!((v.name.as_str(), v.seeds, v.loads.len(), v.warmup_requests), ("v", 3, 2, 300));
        let base = Scenario::load(&dir.path().join("base.toml")).unwrap();
        assert_eq!(v.service_times.hold, base.service_times.hold, "tables merge key by key");
        assert_ne!(v.service_times.commit, base.service_times.commit);
        let short = Scenario::load_reduced(&dir.path().join("v.toml")).unwrap();
        assert_eq!((short.seeds, short.requests, short.warmup_requests), (1, 30, 0), "[reduced] merges too");

        write("w.toml", "base = 'v.toml'\nname = 'w'\nseeds = 2\n");
        let w = Scenario::load(&dir.path().join("w.toml")).unwrap();
        assert_eq!((w.name.as_str(), w.seeds, w.requests), ("w", 2, 1200), "a base may have a base");
        write("loop.toml", "base = 'loop.toml'\nname = 'l'\n");
        let e = Scenario::load(&dir.path().join("loop.toml")).unwrap_err();
        assert!(format!("{e:#}").contains("nest more than"), "{e:#}");
        write("far.toml", "base = '../base.toml'\nname = 'f'\n");
        let e = Scenario::load(&dir.path().join("far.toml")).unwrap_err();
        assert!(format!("{e:#}").contains("same folder"), "{e:#}");
    }

    #[test]
    fn a_quarter_of_the_requests_is_a_warm_up_unless_the_file_says_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        let load = |text: &str, reduced: bool| {
            std::fs::write(&path, format!("name = 't'\ntrace = 'u'\nloads = [1.0]\n{text}")).unwrap();
            let s = if reduced { Scenario::load_reduced(&path) } else { Scenario::load(&path) };
            s.unwrap().warmup_requests
        };
        assert_eq!(load("requests = 1200\n", false), 300, "steady state by default");
        assert_eq!(load("requests = 1200\nwarmup_requests = 0\n", false), 0, "a transient when asked");
        assert_eq!(load("requests = 1200\n[reduced]\nrequests = 30\n", true), 7, "a quarter of the reduced run");
        assert_eq!(
            load("requests = 1200\nwarmup_requests = 0\n[reduced]\nrequests = 30\n", true),
            0,
            "the file's own setting holds in its reduced run"
        );
    }
}
