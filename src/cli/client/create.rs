//! `coreserve plans create`: one request built from flags (`--cpus`, `--job`, `--transfer`,
//! times as `now+1h`), booked like `plans submit` books one.

use anyhow::{bail, Result};
use chrono::{DateTime, Utc};
use clap::Args;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::render::{print_one, rfc3339, text};
use super::submit::derived_key;
use super::{submit_one, Client, Connection, Exit, Output};
use crate::cli::when::{parse_duration, parse_time_at};

/// `coreserve plans create`: a request from flags.
// The help's brackets (`NAME:CPUS[:DURATION[:OFFSET]]`) are argument syntax, not doc links.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The request id (echoed as `request_id`; `plans show ID` finds it). Default: derived
    /// from the flags, so that the same command books once; give another id to book again.
    #[arg(long)]
    pub id: Option<String>,
    /// A job, NAME:CPUS[:DURATION[:OFFSET]] (durations as `--duration`; OFFSET from the
    /// application's start, default 0). Repeat for several jobs.
    #[arg(short = 'j', long = "job", value_name = "NAME:CPUS[:DURATION[:OFFSET]]")]
    pub jobs: Vec<String>,
    /// Without --job: this many jobs (j1, j2, ...) of --cpus each, all starting together (a
    /// co-allocation).
    #[arg(long, default_value_t = 1)]
    pub count: u32,
    /// CPUs of each job made by --count.
    #[arg(short = 'c', long)]
    pub cpus: Option<u32>,
    /// Default length of a job: seconds (`3600`) or `90m`, `2h`, `1d12h`.
    #[arg(short = 'd', long, default_value = "1h", value_parser = parse_duration)]
    pub duration: i64,
    /// The application's earliest start: `now+1h`, or RFC 3339 with a timezone. Default: as
    /// soon as the broker can (now + its w_interval).
    #[arg(long)]
    pub start: Option<String>,
    /// Every reservation must end by then: `now+2d`, or RFC 3339 with a timezone. Default: one
    /// day after the last job would end if the application began at --start (or now).
    #[arg(long)]
    pub deadline: Option<String>,
    /// Required operating system of every job.
    #[arg(long, default_value = "linux")]
    pub os: String,
    /// A transfer between two jobs, FROM:TO:MBPS[:DURATION[:OFFSET]] (default: the sending
    /// job's duration, offset 0). Repeat for several.
    #[arg(short = 'T', long = "transfer", value_name = "FROM:TO:MBPS[:DURATION[:OFFSET]]")]
    pub transfers: Vec<String>,
    /// A workflow dependency, JOB:BEFORE[,BEFORE...]: JOB starts after each BEFORE job ends
    /// (a job without an OFFSET is then laid out by the broker, as early as its dependencies
    /// allow). Repeat for several jobs.
    #[arg(long = "after", value_name = "JOB:BEFORE[,BEFORE...]")]
    pub after: Vec<String>,
    /// A staged transfer, FROM:TO:MBPS:SIZE_MB: SIZE_MB megabytes moved at MBPS after FROM
    /// ends and before TO starts (TO is then after FROM). Repeat for several.
    #[arg(long = "staged", value_name = "FROM:TO:MBPS:SIZE_MB")]
    pub staged: Vec<String>,
    /// Time kept at least between a job's end and the start of a job after it (the workflow
    /// engine's reaction time): seconds or `30s`, `2m`. Default 0.
    #[arg(long, value_parser = parse_duration)]
    pub gap: Option<i64>,
    /// Time reserved after every job's run, so that a job started late still ends inside its
    /// reservation: seconds or `45s`, `5m`. Default 0.
    #[arg(long, value_parser = parse_duration)]
    pub slack: Option<i64>,
    /// Selection policy: time, cost, load or random (default: the server's).
    #[arg(long)]
    pub policy: Option<String>,
    /// Reservation method: bir, bbr or bbr-overlay (default: the server's).
    #[arg(long)]
    pub method: Option<String>,
    /// Plan only: book and store nothing.
    #[arg(short = 'n', long)]
    pub dry_run: bool,
    /// Print the request's JSON (for `plans submit`) instead of sending it.
    #[arg(long)]
    pub print_request: bool,
    /// Idempotency key (default: derived from the request).
    #[arg(short = 'k', long)]
    pub idempotency_key: Option<String>,
    #[command(flatten)]
    pub conn: Connection,
}

/// `NAME:CPUS[:DURATION[:OFFSET]]` of `--job`.
fn job_of(spec: &str, default_duration: i64, os: &str) -> Result<Value> {
    let parts: Vec<&str> = spec.split(':').collect();
    let bad =
        || anyhow::anyhow!("--job `{spec}`: write NAME:CPUS[:DURATION[:OFFSET]], e.g. `sim:16:2h` or `post:4:30m:2h`");
    if !(2..=4).contains(&parts.len()) || parts[0].trim().is_empty() {
        return Err(bad());
    }
    let cpus: u32 = parts[1].trim().parse().map_err(|_| bad())?;
    let duration = parts.get(2).map_or(Ok(default_duration), |d| parse_duration(d)).map_err(anyhow::Error::msg)?;
    let offset = parts.get(3).map_or(Ok(0), |d| parse_duration(d)).map_err(anyhow::Error::msg)?;
    Ok(json!({"name": parts[0].trim(), "os": os, "cpus": cpus, "offset_s": offset, "duration_s": duration}))
}

/// `FROM:TO:MBPS[:DURATION[:OFFSET]]` of `--transfer`.
fn transfer_of(spec: &str, jobs: &[Value]) -> Result<Value> {
    let parts: Vec<&str> = spec.split(':').collect();
    let bad = || {
        anyhow::anyhow!(
            "--transfer `{spec}`: write FROM:TO:MBPS[:DURATION[:OFFSET]] with two --job names, e.g. `sim:post:500:10m`"
        )
    };
    if !(3..=5).contains(&parts.len()) {
        return Err(bad());
    }
    let mbps: u64 = parts[2].trim().parse().map_err(|_| bad())?;
    let from = jobs.iter().find(|j| j["name"] == parts[0]).ok_or_else(bad)?;
    let duration = match parts.get(3) {
        Some(d) => parse_duration(d).map_err(anyhow::Error::msg)?,
        None => from["duration_s"].as_i64().unwrap_or(0),
    };
    let offset = parts.get(4).map_or(Ok(0), |d| parse_duration(d)).map_err(anyhow::Error::msg)?;
    Ok(json!({"from": parts[0], "to": parts[1], "bandwidth_mbps": mbps, "offset_s": offset, "duration_s": duration}))
}

/// `FROM:TO:MBPS:SIZE_MB` of `--staged`.
fn staged_of(spec: &str, jobs: &[Value]) -> Result<Value> {
    let parts: Vec<&str> = spec.split(':').collect();
    let bad = || {
        anyhow::anyhow!("--staged `{spec}`: write FROM:TO:MBPS:SIZE_MB with two --job names, e.g. `sim:post:1000:500`")
    };
    if parts.len() != 4 || !parts[..2].iter().all(|n| jobs.iter().any(|j| j["name"] == *n)) {
        return Err(bad());
    }
    let mbps: u64 = parts[2].trim().parse().map_err(|_| bad())?;
    let size_mb: f64 = parts[3].trim().parse().map_err(|_| bad())?;
    Ok(json!({"from": parts[0], "to": parts[1], "bandwidth_mbps": mbps, "mode": "staged", "size_mb": size_mb}))
}

/// Applies `--after JOB:BEFORE[,BEFORE...]` to `jobs` (`specs`: their `--job` flags, to tell
/// a job whose OFFSET was given, which keeps it, from one the broker lays out).
fn apply_after(after: &[String], jobs: &mut [Value], specs: &[String]) -> Result<()> {
    for spec in after {
        let bad =
            || anyhow::anyhow!("--after `{spec}`: write JOB:BEFORE[,BEFORE...] with --job names, e.g. `post:sim`");
        let (job, before) = spec.split_once(':').ok_or_else(bad)?;
        let i = jobs.iter().position(|j| j["name"] == job.trim()).ok_or_else(bad)?;
        let names: Vec<&str> = before.split(',').map(str::trim).collect();
        if names.iter().any(|n| n.is_empty()) {
            return Err(bad());
        }
        let list = jobs[i]["after"].as_array_mut().map(std::mem::take).unwrap_or_default();
        jobs[i]["after"] = json!(list.into_iter().chain(names.iter().map(|n| json!(n))).collect::<Vec<_>>());
        if specs.get(i).is_none_or(|s| s.split(':').count() < 4) {
            jobs[i].as_object_mut().expect("a job is an object").remove("offset_s");
        }
    }
    Ok(())
}

/// The request of `plans create`'s flags, its times relative to `now`.
fn request_of(a: &CreateArgs, now: DateTime<Utc>) -> Result<Value> {
    let jobs: Vec<Value> = if a.jobs.is_empty() {
        let Some(cpus) = a.cpus else {
            bail!("say what to book: --cpus N (and --count K for K jobs), or --job NAME:CPUS")
        };
        if a.count == 0 {
            bail!("--count must be at least 1");
        }
        (1..=a.count)
            .map(
                |i| json!({"name": format!("j{i}"), "os": a.os, "cpus": cpus, "offset_s": 0, "duration_s": a.duration}),
            )
            .collect()
    } else {
        if a.cpus.is_some() {
            bail!("--cpus is for jobs made by --count; with --job, give each job's CPUs (NAME:CPUS)");
        }
        a.jobs.iter().map(|j| job_of(j, a.duration, &a.os)).collect::<Result<_>>()?
    };
    let mut jobs = jobs;
    apply_after(&a.after, &mut jobs, &a.jobs)?;
    let mut transfers: Vec<Value> = a.transfers.iter().map(|t| transfer_of(t, &jobs)).collect::<Result<_>>()?;
    for s in &a.staged {
        transfers.push(staged_of(s, &jobs)?);
    }
    let at = |flag: &str, s: &str| parse_time_at(s, now).map_err(|e| anyhow::anyhow!("--{flag}: {e}"));
    let start = a.start.as_deref().map(|s| at("start", s)).transpose()?;
    let length = |j: &Value| j["duration_s"].as_i64().unwrap_or(0);
    let span = if a.after.is_empty() && a.staged.is_empty() {
        jobs.iter().map(|j| j["offset_s"].as_i64().unwrap_or(0) + length(j)).max()
    } else {
        // A workflow laid out by the broker: at most every job, slack and gap one after the
        // other, and every staged transfer.
        let per_job = a.slack.unwrap_or(0) + a.gap.unwrap_or(0);
        let staged: f64 =
            transfers.iter().filter_map(|t| Some(t["size_mb"].as_f64()? * 8.0 / t["bandwidth_mbps"].as_f64()?)).sum();
        Some(jobs.iter().map(|j| length(j) + per_job).sum::<i64>() + staged.ceil() as i64)
    };
    let deadline = match &a.deadline {
        Some(d) => at("deadline", d)?,
        None => start.unwrap_or(now) + chrono::Duration::seconds(span.unwrap_or(0)) + chrono::Duration::days(1),
    };
    let id = a.id.clone().unwrap_or_else(|| {
        // The flags as typed (relative times unresolved): the same command, the same id.
        let mut typed = format!(
            "{:?}",
            (&a.jobs, a.count, a.cpus, a.duration, &a.start, &a.deadline, &a.os, &a.transfers, &a.policy, &a.method)
        );
        // The workflow's flags only when given: the ids of other commands stay as they were.
        let workflow = (&a.after, &a.staged, a.gap, a.slack);
        if workflow != (&vec![], &vec![], None, None) {
            typed.push_str(&format!("{workflow:?}"));
        }
        format!("create-{}", &hex::encode(Sha256::digest(typed.as_bytes()))[..12])
    });
    let mut r = json!({"id": id, "deadline": rfc3339(deadline), "jobs": jobs, "transfers": transfers});
    if let Some(s) = start {
        r["not_before"] = json!(rfc3339(s));
    }
    if let Some(p) = &a.policy {
        r["policy"] = json!(p);
    }
    if let Some(m) = &a.method {
        r["method"] = json!(m);
    }
    if let Some(g) = a.gap {
        r["dependency_gap_s"] = json!(g);
    }
    if let Some(s) = a.slack {
        r["slack_s"] = json!(s);
    }
    Ok(r)
}

/// `coreserve plans create`: a request from flags, booked by [`book`].
pub(super) async fn create(a: &CreateArgs) -> Result<()> {
    let body = request_of(a, Utc::now())?;
    if a.print_request {
        outln!("{body}");
        return Ok(());
    }
    book(&a.conn, &body, a.dry_run, a.idempotency_key.as_deref()).await
}

/// Books one request body (`plans create`, `workflow import --submit`) and prints the plan; a
/// request id already booked (committed or pending) is shown instead of booked again.
///
/// # Errors
/// [`Exit`] with the client's exit codes: rejected (3), refused (4), unavailable (5), no
/// connection (6).
pub async fn book(conn: &Connection, body: &Value, dry_run: bool, idempotency_key: Option<&str>) -> Result<()> {
    let c = Client::new(conn)?;
    let rid = text(&body["id"]);
    if !dry_run && idempotency_key.is_none() {
        let booked = c.plans_of_request(&rid).await?;
        if let Some(p) =
            booked.iter().rev().find(|p| ["committed", "active", "pending"].iter().any(|s| p["status"] == *s))
        {
            eprintln!(
                "note: request id `{rid}` is already booked as plan {}; nothing new was booked (give another --id to book again)",
                text(&p["id"])
            );
            return print_one(conn, p);
        }
    }
    let key = idempotency_key.map_or_else(|| derived_key(body), str::to_owned);
    let s = submit_one(&c, body, &key, dry_run).await?;
    let Some(answer) = s.answer.filter(|_| s.error.is_none()) else {
        return Err(Exit { code: s.code.max(1), message: format!("error: {}", s.error.unwrap_or_default()) }.into());
    };
    print_one(conn, &answer.body)?;
    if conn.out() == Output::Table && answer.body["status"] == "committed" {
        eprintln!(
            "timeline: {}/ui#plan={} (paste your token there)",
            conn.server.trim_end_matches('/'),
            text(&answer.body["id"])
        );
    }
    if s.code > 1 {
        return Err(Exit { code: s.code, message: String::new() }.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::client::PlansCommand;

    #[test]
    fn create_builds_a_request_from_flags() {
        use clap::Parser;
        let now = DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z").unwrap().with_timezone(&Utc);
        let args = |a: &[&str]| {
            let cli = crate::cli::Cli::try_parse_from([&["coreserve", "plans", "create"], a].concat()).unwrap();
            match cli.command {
                crate::cli::Command::Plans(PlansCommand::Create(c)) => c,
                other => panic!("{other:?}"),
            }
        };
        let r = request_of(&args(&["-c", "16", "--count", "2", "-d", "2h", "--start", "now+1h"]), now).unwrap();
        assert_eq!(r["not_before"], "2030-01-01T01:00:00Z");
        assert_eq!(r["deadline"], "2030-01-02T03:00:00Z");
        assert_eq!(r["jobs"].as_array().unwrap().len(), 2);
        assert_eq!(r["jobs"][1], json!({"name": "j2", "os": "linux", "cpus": 16, "offset_s": 0, "duration_s": 7200}));
        let again = request_of(&args(&["-c", "16", "--count", "2", "-d", "2h", "--start", "now+1h"]), now).unwrap();
        assert_eq!(r["id"], again["id"], "the same flags, the same request id");
        let r = request_of(
            &args(&["-j", "sim:8:1h", "-j", "post:4:30m:1h", "-T", "sim:post:500:10m", "--deadline", "now+1d"]),
            now,
        )
        .unwrap();
        assert_eq!(r["jobs"][1]["offset_s"], 3600);
        assert_eq!(
            r["transfers"][0],
            json!({"from": "sim", "to": "post", "bandwidth_mbps": 500, "offset_s": 0, "duration_s": 600})
        );
        assert_eq!(r["deadline"], "2030-01-02T00:00:00Z");
        let e = request_of(&args(&["-c", "4", "--start", "2030-01-01T10:00:00"]), now).unwrap_err().to_string();
        assert!(e.contains("naive timestamp"), "{e}");
        let e = request_of(&args(&["-j", "a"]), now).unwrap_err().to_string();
        assert!(e.contains("NAME:CPUS"), "{e}");
    }

    #[test]
    fn create_builds_a_workflow_from_after_and_staged() {
        use clap::Parser;
        let now = DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z").unwrap().with_timezone(&Utc);
        let cli = crate::cli::Cli::try_parse_from([
            "coreserve",
            "plans",
            "create",
            "-j",
            "sim:8:1h",
            "-j",
            "post:4:30m",
            "-j",
            "fixed:2:10m:3h",
            "--after",
            "post:sim",
            "--after",
            "fixed:sim,post",
            "--staged",
            "sim:post:1000:4500",
            "--gap",
            "30s",
            "--slack",
            "1m",
        ])
        .unwrap();
        let crate::cli::Command::Plans(PlansCommand::Create(a)) = cli.command else { panic!() };
        let r = request_of(&a, now).unwrap();
        assert_eq!(
            r["jobs"][1],
            json!({"name": "post", "os": "linux", "cpus": 4, "duration_s": 1800, "after": ["sim"]})
        );
        assert_eq!(r["jobs"][2]["after"], json!(["sim", "post"]));
        assert_eq!(r["jobs"][2]["offset_s"], 10800, "a given OFFSET is kept");
        assert_eq!(r["jobs"][0]["offset_s"], 0);
        assert_eq!(
            r["transfers"][0],
            json!({"from": "sim", "to": "post", "bandwidth_mbps": 1000, "mode": "staged", "size_mb": 4500.0})
        );
        assert_eq!((r["dependency_gap_s"].as_i64(), r["slack_s"].as_i64()), (Some(30), Some(60)));
        // The default deadline covers the jobs one after the other: 3600 + 1800 + 600 + 3 * 90
        // + 36 s of staging, plus a day.
        assert_eq!(r["deadline"], "2030-01-02T01:45:06Z");
        // The broker accepts it as a plan request.
        let raw: crate::model::RawPlanRequest = serde_json::from_value(json!({
            "id": r["id"], "submitted_at": "2030-01-01T00:00:00Z", "deadline": r["deadline"],
            "jobs": r["jobs"], "transfers": r["transfers"],
            "dependency_gap_s": r["dependency_gap_s"], "slack_s": r["slack_s"]
        }))
        .unwrap();
        let req = crate::model::PlanRequest::new(raw).unwrap();
        // post: after sim (3660) + 30 s gap, or the staging (3660 + 36 s): 3696.
        assert_eq!(req.job_span(1).offset_s, 3696);
        for bad in [&["--after", "post"][..], &["--after", "nope:sim"], &["--staged", "sim:post:10"]] {
            let cli = crate::cli::Cli::try_parse_from(
                [&["coreserve", "plans", "create", "-j", "sim:8", "-j", "post:4"][..], bad].concat(),
            )
            .unwrap();
            let crate::cli::Command::Plans(PlansCommand::Create(a)) = cli.command else { panic!() };
            assert!(request_of(&a, now).is_err(), "{bad:?}");
        }
    }
}
