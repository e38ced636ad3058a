//! `coreserve workflow import FILE`: a WfCommons instance (WfFormat 1.4 or 1.5 JSON) made a
//! plan request: one job per task (`after` its parents, its cores as CPUs, its measured run
//! time times `--time-scale`), one staged transfer per edge that carries data (the bytes of the
//! files the parent writes and the child reads, at `--bandwidth-mbps`), and a deadline. It
//! prints the request, books it (`--submit`), and can write a Snakefile of the same DAG whose
//! tasks sleep their scaled run time (`--snakefile`), for the Snakemake executor plugin of
//! `clients/snakemake-executor-plugin-coreserve` (docs/engines.md).

mod snakefile;
pub mod wfformat;

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::client::{self, Connection};
use super::when::{parse_duration, parse_time_at};
use crate::model::{MAX_JOBS, MAX_TRANSFERS};
pub use wfformat::{Instance, WfFormatError};

/// `coreserve workflow ...`.
#[derive(Debug, Subcommand)]
pub enum WorkflowCommand {
    /// A WfCommons instance (WfFormat 1.4 or 1.5 JSON) as a plan request: printed (JSON), booked
    /// with --submit, and its DAG as a Snakefile with --snakefile.
    Import(ImportArgs),
}

/// `coreserve workflow import`'s flags.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The instance (a WfCommons JSON file; `-` for standard input).
    pub file: String,
    /// Each job's length is its task's measured run time times this, rounded up to a whole
    /// second (at least 1 s).
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// Each edge's data (megabytes) is the bytes its files hold times this.
    #[arg(long, default_value_t = 1.0)]
    pub data_scale: f64,
    /// Bandwidth of every staged transfer, in Mbit/s: its length is `size_mb * 8 /
    /// bandwidth_mbps`.
    #[arg(long, default_value_t = 1000)]
    pub bandwidth_mbps: u64,
    /// Edges with less data than this (megabytes, after --data-scale) book no transfer, only
    /// the dependency.
    #[arg(long, default_value_t = 0.0)]
    pub min_transfer_mb: f64,
    /// Required operating system of every job.
    #[arg(long, default_value = "linux")]
    pub os: String,
    /// The request id. Default: derived from the instance and the flags.
    #[arg(long)]
    pub id: Option<String>,
    /// The workflow's earliest start: `now+10m`, or RFC 3339 with a timezone. Default: as soon
    /// as the broker can.
    #[arg(long)]
    pub start: Option<String>,
    /// Every reservation must end by then: `now+1d`, or RFC 3339. Default: the start (or now)
    /// plus every job, gap, slack and transfer one after the other, plus one day.
    #[arg(long)]
    pub deadline: Option<String>,
    /// `dependency_gap_s`: time kept between a job's end and its successors' start (the
    /// engine's reaction time): seconds or `30s`, `2m`.
    #[arg(long, value_parser = parse_duration)]
    pub gap: Option<i64>,
    /// `slack_s`: time reserved after every job's run (a job started late still ends inside its
    /// reservation): seconds or `45s`.
    #[arg(long, value_parser = parse_duration)]
    pub slack: Option<i64>,
    /// Also write the DAG as a Snakefile here: one rule per task, named after its job, that
    /// sleeps the job's length (resources `runtime_s` and `coreserve_job`, threads = CPUs).
    #[arg(long)]
    pub snakefile: Option<std::path::PathBuf>,
    /// Book the request (as `plans submit` does) instead of printing it.
    #[arg(long)]
    pub submit: bool,
    #[command(flatten)]
    pub conn: Connection,
}

/// Why an instance cannot become a plan request (beyond [`WfFormatError`]).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ImportError {
    /// More tasks than a plan request holds.
    #[error("the instance has {0} tasks; a plan request holds at most {MAX_JOBS} jobs")]
    TooManyJobs(usize),
    /// More edges with data than a plan request holds transfers.
    #[error("the instance has {0} edges carrying data; a plan request holds at most {MAX_TRANSFERS} transfers (raise --min-transfer-mb)")]
    TooManyTransfers(usize),
    /// A scale or bandwidth that is not a positive number.
    #[error("{0} must be a number > 0")]
    NotPositive(&'static str),
}

/// What the jobs and transfers of an import need beyond the instance: scales, bandwidth, OS.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportOptions {
    /// Multiplies every run time (`--time-scale`).
    pub time_scale: f64,
    /// Multiplies every edge's bytes (`--data-scale`).
    pub data_scale: f64,
    /// Every staged transfer's bandwidth, Mbit/s.
    pub bandwidth_mbps: u64,
    /// Edges with less data (MB) get no transfer.
    pub min_transfer_mb: f64,
    /// Every job's OS.
    pub os: String,
}

/// A job's length: the run time scaled, rounded up, at least a second.
fn job_duration_s(runtime_s: f64, scale: f64) -> i64 {
    ((runtime_s * scale).ceil() as i64).max(1)
}

/// The jobs and transfers of `inst` (the request's `jobs` and `transfers` arrays), the jobs
/// named after their tasks' ids.
///
/// # Errors
/// [`ImportError`]: over [`MAX_JOBS`] tasks or [`MAX_TRANSFERS`] edges with data, a scale or
/// bandwidth not > 0.
pub fn jobs_and_transfers(inst: &Instance, o: &ImportOptions) -> Result<(Vec<Value>, Vec<Value>), ImportError> {
    if !(o.time_scale.is_finite() && o.time_scale > 0.0) {
        return Err(ImportError::NotPositive("--time-scale"));
    }
    if !(o.data_scale.is_finite() && o.data_scale > 0.0) {
        return Err(ImportError::NotPositive("--data-scale"));
    }
    if o.bandwidth_mbps == 0 {
        return Err(ImportError::NotPositive("--bandwidth-mbps"));
    }
    if inst.tasks.len() > MAX_JOBS {
        return Err(ImportError::TooManyJobs(inst.tasks.len()));
    }
    let jobs = inst
        .tasks
        .iter()
        .map(|t| {
            let mut j = json!({"name": t.id, "os": o.os, "cpus": t.cores, "duration_s": job_duration_s(t.runtime_s, o.time_scale)});
            if !t.parents.is_empty() {
                j["after"] = json!(t.parents.iter().map(|&p| &inst.tasks[p].id).collect::<Vec<_>>());
            }
            j
        })
        .collect();
    let transfers: Vec<Value> = inst
        .edges
        .iter()
        .filter_map(|&(from, to, bytes)| {
            // Megabytes to the kilobyte: the request's sizes stay short and exact.
            let size_mb = (bytes as f64 * o.data_scale / 1e3).round() / 1e3;
            (size_mb > 0.0 && size_mb >= o.min_transfer_mb).then(|| {
                json!({"from": inst.tasks[from].id, "to": inst.tasks[to].id, "bandwidth_mbps": o.bandwidth_mbps,
                       "mode": "staged", "size_mb": size_mb})
            })
        })
        .collect();
    if transfers.len() > MAX_TRANSFERS {
        return Err(ImportError::TooManyTransfers(transfers.len()));
    }
    Ok((jobs, transfers))
}

/// The whole request of `coreserve workflow import`, its times relative to `now`.
fn request_of(a: &ImportArgs, inst: &Instance, text: &str, now: DateTime<Utc>) -> Result<Value> {
    let o = ImportOptions {
        time_scale: a.time_scale,
        data_scale: a.data_scale,
        bandwidth_mbps: a.bandwidth_mbps,
        min_transfer_mb: a.min_transfer_mb,
        os: a.os.clone(),
    };
    let (jobs, transfers) = jobs_and_transfers(inst, &o)?;
    let at = |flag: &str, s: &str| parse_time_at(s, now).map_err(|e| anyhow::anyhow!("--{flag}: {e}"));
    let start = a.start.as_deref().map(|s| at("start", s)).transpose()?;
    let deadline = match &a.deadline {
        Some(d) => at("deadline", d)?,
        None => {
            // At most every job, gap, slack and transfer one after the other.
            let per_job = a.gap.unwrap_or(0) + a.slack.unwrap_or(0);
            let serial: i64 = jobs.iter().map(|j| j["duration_s"].as_i64().unwrap_or(0) + per_job).sum::<i64>()
                + transfers
                    .iter()
                    .map(|t| (t["size_mb"].as_f64().unwrap_or(0.0) * 8.0 / a.bandwidth_mbps as f64).ceil() as i64)
                    .sum::<i64>();
            start.unwrap_or(now) + chrono::Duration::seconds(serial) + chrono::Duration::days(1)
        }
    };
    let id = a.id.clone().unwrap_or_else(|| {
        let typed = format!(
            "{:?}",
            (
                a.time_scale,
                a.data_scale,
                a.bandwidth_mbps,
                a.min_transfer_mb,
                &a.os,
                &a.start,
                &a.deadline,
                a.gap,
                a.slack
            )
        );
        let digest = Sha256::new().chain_update(text.as_bytes()).chain_update(typed.as_bytes()).finalize();
        let name: String = inst
            .name
            .as_deref()
            .unwrap_or("workflow")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .take(40)
            .collect();
        format!("{}-{}", if name.is_empty() { "workflow" } else { &name }, &hex::encode(digest)[..12])
    });
    let mut r = json!({"id": id, "deadline": client::rfc3339(deadline), "jobs": jobs, "transfers": transfers});
    if let Some(s) = start {
        r["not_before"] = json!(client::rfc3339(s));
    }
    if let Some(g) = a.gap {
        r["dependency_gap_s"] = json!(g);
    }
    if let Some(s) = a.slack {
        r["slack_s"] = json!(s);
    }
    Ok(r)
}

/// `coreserve workflow ...`.
pub async fn workflow(cmd: WorkflowCommand) -> Result<()> {
    match cmd {
        WorkflowCommand::Import(a) => import(&a).await,
    }
}

async fn import(a: &ImportArgs) -> Result<()> {
    let text = if a.file == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading standard input")?
    } else {
        std::fs::read_to_string(&a.file).with_context(|| format!("reading {}", a.file))?
    };
    let inst = wfformat::parse(&text).with_context(|| a.file.clone())?;
    let body = request_of(a, &inst, &text, Utc::now()).with_context(|| a.file.clone())?;
    if let Some(path) = &a.snakefile {
        std::fs::write(path, snakefile::snakefile(&body)).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {} ({} rules)", path.display(), inst.tasks.len());
    }
    if a.submit {
        client::book(&a.conn, &body, false, None).await
    } else {
        crate::outln!("{}", serde_json::to_string_pretty(&body)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
