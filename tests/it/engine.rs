//! A real workflow engine end to end: Snakemake, with this repository's executor plugin
//! (`clients/snakemake-executor-plugin-coreserve`), runs a WfCommons workflow booked through a
//! `coreserve serve` process on two local Slurm clusters (`scripts/slurm-local`). Everything is
//! real: Snakemake, its Slurm executor plugin and WfCommons from PyPI, in the virtualenv
//! `.ci/test` makes (`CORESERVE_ENGINE_VENV`); Slurm from Debian's packages. What is asserted
//! comes from Slurm's own records (`scontrol show job`) and the plans' answers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::support::machine;
use crate::support::serve::{Launch, Server, ADMIN};
use crate::support::slurm::SlurmCluster;

/// The virtualenv with Snakemake, WfCommons and the plugin. Panics when it is not set: these
/// tests run through `.ci/test`, which makes it.
fn venv() -> PathBuf {
    let v = std::env::var("CORESERVE_ENGINE_VENV")
        .expect("CORESERVE_ENGINE_VENV is not set: run the tests with .ci/test, which makes the engine's virtualenv");
    let v = PathBuf::from(v);
    assert!(v.join("bin/snakemake").exists(), "{} has no snakemake: run .ci/test", v.display());
    v
}

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Two 16-core clusters behind sites s1 and s2 of a two-site grid, one `coreserve serve`
/// fronting both (a `[sites.ID.slurm]` table each, synchronised every 2 s).
struct Grid {
    clusters: Vec<SlurmCluster>,
    server: Server,
    dir: tempfile::TempDir,
    _db: crate::support::TestDb,
}

impl Grid {
    async fn start() -> Grid {
        let clusters = vec![SlurmCluster::start(16), SlurmCluster::start(16)];
        let dir = tempfile::tempdir().unwrap();
        let grid = json!({
            "nodes": [{"id": "n1", "label": "one"}, {"id": "n2", "label": "two"}],
            "links": [{"id": "l1", "a": "n1", "b": "n2", "capacity_mbps": 1000, "price_per_gbps_hour": 0.1}],
            "sites": [
                {"id": "s1", "node": "n1", "cpus": 16, "os": "linux", "price_per_cpu_hour": 1.0},
                {"id": "s2", "node": "n2", "cpus": 16, "os": "linux", "price_per_cpu_hour": 1.0}
            ]
        });
        std::fs::write(dir.path().join("grid.json"), grid.to_string()).unwrap();
        let toml: String = clusters
            .iter()
            .enumerate()
            .map(|(i, c)| {
                format!(
                    "[sites.s{}.slurm]\npartition = \"batch\"\nslurm_conf = \"{}\"\ndefault_user = \"root\"\nsync_s = 2\n",
                    i + 1,
                    c.conf.display()
                )
            })
            .collect();
        std::fs::write(dir.path().join("coreserve.toml"), toml).unwrap();
        let db = crate::support::TestDb::new().await;
        let server = Server::launch(&Launch {
            db: db.url.clone(),
            grid: Some(dir.path().join("grid.json")),
            args: vec![
                "--config".into(),
                dir.path().join("coreserve.toml").to_str().unwrap().into(),
                "--w-interval-s".into(),
                "5".into(),
            ],
            crash_at: None,
            log: Some(dir.path().join("serve.log")),
        });
        Grid { clusters, server, dir, _db: db }
    }

    fn clusters_flag(&self) -> String {
        self.clusters
            .iter()
            .enumerate()
            .map(|(i, c)| format!("s{}={}", i + 1, c.conf.display()))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `coreserve workflow import FILE ARGS --snakefile DIR/Snakefile`: the request, written to
    /// DIR/request.json.
    fn import(&self, instance: &Path, args: &[&str]) -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_coreserve"))
            .args(["workflow", "import"])
            .arg(instance)
            .args(args)
            .arg("--snakefile")
            .arg(self.dir.path().join("Snakefile"))
            .output()
            .unwrap();
        assert!(out.status.success(), "workflow import: {}", String::from_utf8_lossy(&out.stderr));
        std::fs::write(self.dir.path().join("request.json"), &out.stdout).unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Starts Snakemake on DIR/Snakefile with the coreserve executor, `--coreserve-request
    /// DIR/request.json`, its output going to DIR/snakemake.log.
    fn spawn_snakemake(&self) -> std::process::Child {
        let log = self.dir.path().join("snakemake.log");
        Command::new(venv().join("bin/snakemake"))
            .current_dir(self.dir.path())
            .args([
                "-s",
                "Snakefile",
                "--executor",
                "coreserve",
                "--jobs",
                "100",
                "--seconds-between-status-checks",
                "2",
            ])
            .args(["--coreserve-url", &self.server.url, "--coreserve-token", ADMIN])
            .args(["--coreserve-clusters", &self.clusters_flag(), "--coreserve-request", "request.json"])
            .env("TZ", "UTC")
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::options().append(true).open(&log).unwrap())
            .spawn()
            .unwrap()
    }

    /// Waits (at most 20 minutes) for Snakemake to end, calling `meanwhile` every 500 ms; its
    /// success and log.
    async fn finish(&self, mut child: std::process::Child, mut meanwhile: impl AsyncFnMut()) -> (bool, String) {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(1200);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if std::time::Instant::now() > until {
                let _ = child.kill();
                break child.wait().unwrap();
            }
            meanwhile().await;
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        };
        (status.success(), std::fs::read_to_string(self.dir.path().join("snakemake.log")).unwrap())
    }

    /// The plans the plugin booked (their request ids start with `prefix`), as they are now.
    async fn plans(&self, prefix: &str) -> Vec<Value> {
        let api = self.server.api();
        let mut plans = Vec::new();
        for p in api.plans(ADMIN, "?limit=100").await {
            if p["request_id"].as_str().is_some_and(|r| r.starts_with(prefix)) {
                plans.push(api.json(&format!("/v1/plans/{}", p["id"].as_str().unwrap()), ADMIN).await);
            }
        }
        plans
    }
}

/// A failed test shows the service's warnings and what it said about Slurm reservations (its
/// log is deleted with the grid's directory).
impl Drop for Grid {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.path().join("serve.log")).unwrap_or_default();
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("reservation"))
                .collect();
            eprintln!(
                "coreserve serve said ({} lines):\n{}",
                lines.len(),
                lines[lines.len().saturating_sub(80)..].join("\n")
            );
        }
    }
}

/// One Slurm job as `scontrol show job` records it.
#[derive(Debug, Clone)]
struct SlurmJob {
    id: String,
    state: String,
    reservation: String,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
}

/// A time of `scontrol show job`; a job not started yet has `Unknown` (or `None`): the
/// earliest instant, which no window contains.
fn slurm_time(s: &str) -> DateTime<Utc> {
    if matches!(s, "Unknown" | "None" | "N/A") {
        return DateTime::<Utc>::MIN_UTC;
    }
    let naive = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S").unwrap_or_else(|e| panic!("{s}: {e}"));
    naive.and_utc()
}

/// Every job the cluster still knows (`MinJobAge` 300 s keeps finished ones), as `scontrol
/// show job --oneliner` says in UTC.
fn slurm_jobs(c: &SlurmCluster) -> Vec<SlurmJob> {
    let text = c.scontrol(&["show", "job", "--oneliner"]);
    text.lines()
        .filter(|l| l.starts_with("JobId="))
        .map(|l| {
            let f: HashMap<&str, &str> = l.split_whitespace().filter_map(|kv| kv.split_once('=')).collect();
            SlurmJob {
                id: f["JobId"].to_owned(),
                state: f["JobState"].to_owned(),
                reservation: f.get("Reservation").copied().unwrap_or("(null)").to_owned(),
                start: slurm_time(f["StartTime"]),
                end: slurm_time(f["EndTime"]),
            }
        })
        .collect()
}

/// Each job's booked window by reservation name, over `plans`: (plan id, job name, start, end).
fn windows(plans: &[Value]) -> HashMap<String, (String, String, DateTime<Utc>, DateTime<Utc>)> {
    let t = |v: &Value| v.as_str().unwrap().parse::<DateTime<Utc>>().unwrap();
    plans
        .iter()
        .flat_map(|p| p["jobs"].as_array().unwrap().iter().map(move |j| (p, j)))
        .filter_map(|(p, j)| {
            let name = j["reservation_name"].as_str()?;
            Some((
                name.to_owned(),
                (
                    p["id"].as_str().unwrap().to_owned(),
                    j["name"].as_str().unwrap().to_owned(),
                    t(&j["start"]),
                    t(&j["end"]),
                ),
            ))
        })
        .collect()
}

/// The reservation of each Slurm job seen in one, by (cluster index, job id): Slurm clears a
/// job's `Reservation` once that reservation is gone (ended, or deleted when the plan is
/// cancelled), so the tests note it while the jobs wait and run.
#[derive(Default)]
struct SeenIn(HashMap<(usize, String), String>);

impl SeenIn {
    /// Notes the reservation of every job of `grid`'s clusters that has one now.
    fn look(&mut self, grid: &Grid) {
        for (i, c) in grid.clusters.iter().enumerate() {
            for j in slurm_jobs(c).into_iter().filter(|j| j.reservation != "(null)") {
                self.0.insert((i, j.id), j.reservation);
            }
        }
    }
}

/// Every Slurm job that ran in a reservation (`seen`, or still in Slurm's record) started and
/// ended inside the window its plan gives that reservation, and completed; the jobs, by job
/// name. A failure shows what the plugin said in Snakemake's `log`.
fn ran_inside(grid: &Grid, plans: &[Value], seen: &SeenIn, log: &str) -> HashMap<String, SlurmJob> {
    let windows = windows(plans);
    let said = log.lines().filter(|l| l.contains("coreserve:")).collect::<Vec<_>>().join("\n");
    let mut by_job = HashMap::new();
    for (i, c) in grid.clusters.iter().enumerate() {
        let jobs = slurm_jobs(c).into_iter().map(|mut j| {
            if let Some(r) = seen.0.get(&(i, j.id.clone())) {
                j.reservation = r.clone();
            }
            j
        });
        for j in jobs.filter(|j| j.reservation != "(null)") {
            let (_, name, start, end) = windows
                .get(&j.reservation)
                .unwrap_or_else(|| panic!("Slurm job {j:?} ran in a reservation no plan gave"));
            assert_eq!(j.state, "COMPLETED", "{name}: {j:?}; the plugin said:\n{said}");
            assert!(
                j.start >= *start && j.end <= *end,
                "{name} ran [{}, {}) outside its reservation [{start}, {end}); the plugin said:\n{said}",
                j.start,
                j.end
            );
            assert!(by_job.insert(name.clone(), j.clone()).is_none(), "{name} ran twice");
        }
    }
    by_job
}

/// Nothing of the plans is left in Slurm: no coreserve reservation, no job waiting or running.
fn nothing_left(grid: &Grid) {
    for c in &grid.clusters {
        assert!(c.ours().is_empty(), "reservations left: {:?}", c.ours());
        let left: Vec<_> =
            slurm_jobs(c).into_iter().filter(|j| ["PENDING", "RUNNING"].contains(&j.state.as_str())).collect();
        assert!(left.is_empty(), "jobs left: {left:?}");
    }
}

/// The plugin's own unit tests (its plan logic) pass in the engine's virtualenv.
#[test]
fn the_plugins_own_tests_pass() {
    let out = Command::new(venv().join("bin/python"))
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(repo("clients/snakemake-executor-plugin-coreserve/tests"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("passed"), "{text}{}", String::from_utf8_lossy(&out.stderr));
}

/// Issue 47's test: a WfCommons Epigenomics instance (41 tasks, 48 edges, seed 42, run times
/// a tenth of the recipe's) run by Snakemake through coreserve on two Slurm clusters: every task
/// started and ended inside its reservation (Slurm's records against the plan), the workflow
/// completed, one task made to run 60 s past its booking was extended and not killed, and
/// nothing of the plan is left in Slurm at the end.
#[tokio::test]
async fn a_wfcommons_workflow_runs_inside_its_reservations_on_two_clusters() {
    let _machine = machine::reserve("engine").await;
    let grid = Grid::start().await;
    let instance = grid.dir.path().join("epigenomics.json");
    let out = Command::new(venv().join("bin/python"))
        .arg(repo("scripts/wfcommons-instance"))
        .args(["epigenomics", "43", "42"])
        .arg(&instance)
        .output()
        .unwrap();
    assert!(out.status.success(), "wfcommons-instance: {}", String::from_utf8_lossy(&out.stderr));
    let request = grid.import(
        &instance,
        &["--time-scale", "0.1", "--data-scale", "0.1", "--bandwidth-mbps", "100", "--id", "epigenomics"],
    );
    let jobs = request["jobs"].as_array().unwrap();
    assert!(jobs.len() >= 40, "{} tasks", jobs.len());
    // The last task (pileup, which nothing depends on) runs 60 s longer than its booking.
    let late = jobs.iter().find(|j| j["name"].as_str().unwrap().starts_with("pileup_")).unwrap();
    let (late_name, late_s) = (late["name"].as_str().unwrap().to_owned(), late["duration_s"].as_i64().unwrap());
    let snakefile = grid.dir.path().join("Snakefile");
    let text = std::fs::read_to_string(&snakefile).unwrap();
    let rule = format!("coreserve_job=\"{late_name}\"\n    shell:\n        \"sleep {late_s} ");
    assert!(text.contains(&rule), "{rule}");
    let text =
        text.replace(&rule, &format!("coreserve_job=\"{late_name}\"\n    shell:\n        \"sleep {} ", late_s + 60));
    std::fs::write(&snakefile, text).unwrap();

    let mut seen = SeenIn::default();
    let (ok, log) = grid.finish(grid.spawn_snakemake(), async || seen.look(&grid)).await;
    assert!(ok, "snakemake failed:\n{log}");
    assert!(log.contains(&format!("extended `{late_name}`")), "the late task was not extended:\n{log}");

    let plans = grid.plans("epigenomics-").await;
    let said: Vec<&str> = log.lines().filter(|l| l.contains("coreserve:")).collect();
    let statuses: Vec<(&Value, &Value)> = plans.iter().map(|p| (&p["status"], &p["reason"])).collect();
    assert_eq!(plans.len(), 1, "one plan for the workflow: {statuses:?}; the plugin said:\n{}", said.join("\n"));
    let ran = ran_inside(&grid, &plans, &seen, &log);
    assert_eq!(ran.len(), jobs.len(), "every task ran in its reservation once: {:?}", ran.keys());
    let late_run = &ran[&late_name];
    assert!((late_run.end - late_run.start).num_seconds() >= late_s + 60, "{late_run:?}");
    let booked = plans[0]["jobs"].as_array().unwrap().iter().find(|j| j["name"] == late_name.as_str()).unwrap();
    let slack = booked["slack_s"].as_i64().unwrap();
    let window = |j: &Value| {
        (j["end"].as_str().unwrap().parse::<DateTime<Utc>>().unwrap()
            - j["start"].as_str().unwrap().parse::<DateTime<Utc>>().unwrap())
        .num_seconds()
    };
    assert!(window(booked) > late_s + slack, "the late task's reservation was not extended: {booked}");
    nothing_left(&grid);

    // What it cost, for BENCHMARKS.md (tests print, benches judge).
    let first = ran.values().map(|j| j.start).min().unwrap();
    let last = ran.values().map(|j| j.end).max().unwrap();
    let used: i64 = ran
        .iter()
        .map(|(n, j)| {
            let cpus = jobs.iter().find(|x| x["name"] == n.as_str()).unwrap()["cpus"].as_i64().unwrap();
            cpus * (j.end - j.start).num_seconds()
        })
        .sum();
    eprintln!(
        "engine: {} tasks, makespan {} s, plan footprint {}, Slurm jobs used {used} CPU-seconds",
        ran.len(),
        (last - first).num_seconds(),
        plans[0]["footprint"]
    );
}

/// Issue 47's second test: a reservation deleted in Slurm while the workflow runs breaks the
/// plan, and the tasks that have not started are booked again (a new plan) and run there, inside
/// their new reservations. A chain of four tasks from a WfFormat 1.4 instance.
#[tokio::test]
async fn a_broken_reservation_is_replanned_for_the_tasks_not_started() {
    let _machine = machine::reserve("engine-broken").await;
    let grid = Grid::start().await;
    let task = |name: &str, parents: &[&str]| json!({"name": name, "type": "compute", "parents": parents, "runtimeInSeconds": 15, "cores": 2, "files": []});
    let instance = grid.dir.path().join("chain.json");
    let chain = json!({"name": "chain", "schemaVersion": "1.4", "workflow": {"tasks": [
        task("t1", &[]), task("t2", &["t1"]), task("t3", &["t2"]), task("t4", &["t3"])
    ]}});
    std::fs::write(&instance, chain.to_string()).unwrap();
    grid.import(&instance, &["--id", "chain"]);

    // While Snakemake runs: once t1 runs, delete t4's reservation behind the service.
    let mut deleted: Option<String> = None;
    let mut seen = SeenIn::default();
    let child = grid.spawn_snakemake();
    let (ok, log) = grid
        .finish(child, async || {
            seen.look(&grid);
            if deleted.is_some() {
                return;
            }
            let Some(plan) = grid.plans("chain-").await.into_iter().next() else { return };
            let job = |n: &str| plan["jobs"].as_array().unwrap().iter().find(|j| j["name"] == n).cloned().unwrap();
            let t1_start: DateTime<Utc> = job("t1")["start"].as_str().unwrap().parse().unwrap();
            if Utc::now() < t1_start {
                return;
            }
            let t4 = job("t4");
            let name = t4["reservation_name"].as_str().unwrap().to_owned();
            let cluster = &grid.clusters[if t4["site"] == "s1" { 0 } else { 1 }];
            cluster.scontrol(&["delete", &format!("ReservationName={name}")]);
            deleted = Some(name);
        })
        .await;
    let deleted = deleted.expect("t4's reservation was never deleted");
    assert!(ok, "snakemake failed:\n{log}");
    assert!(log.contains("re-planned as plan"), "nothing was re-planned:\n{log}");

    let plans = grid.plans("chain-").await;
    assert_eq!(plans.len(), 2, "the workflow's plan and the re-plan: {plans:?}");
    let ran = ran_inside(&grid, &plans, &seen, &log);
    assert_eq!(ran.len(), 4, "{ran:?}");
    assert_ne!(ran["t4"].reservation, deleted, "t4 ran in its new reservation");
    let plan_of = |job: &str| windows(&plans)[&ran[job].reservation].0.clone();
    assert_ne!(plan_of("t4"), plan_of("t1"), "t4 ran under the re-plan, t1 under the first plan");
    nothing_left(&grid);
}
