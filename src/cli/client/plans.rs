//! `coreserve plans ...`: the subcommands, and the small ones (`list`, `show`, `cancel`,
//! `modify`); `submit`, `create` and `watch` have modules of their own.

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::Value;

use super::create::{create, CreateArgs};
use super::render::{plan_row, print_json, print_list, print_one, rfc3339, text, PLAN_HEADER};
use super::submit::submit;
use super::watch::watch;
use super::{problem_exit, Client, Connection, Exit, Output, EXIT_USAGE};
use crate::cli::when::{parse_duration, parse_time};

/// `coreserve plans ...`
#[derive(Debug, Subcommand)]
pub enum PlansCommand {
    /// Plan and book requests: FILE holds one request (JSON) or many (JSON lines), read and
    /// sent one at a time; `-` reads stdin. A request is the REST body of `POST /v1/plans`;
    /// `user` and `submitted_at` (as `coreserve workload` writes them) are dropped, the server
    /// takes them from the token and the time of receipt.
    Submit {
        /// The request file, or `-` for standard input.
        file: String,
        /// Plan only: book and store nothing (status `planned`).
        #[arg(short = 'n', long)]
        dry_run: bool,
        /// Idempotency key (a retry with the same key and body books once). With several
        /// requests, request N gets `KEY-N`. Default: derived from each request's `id` and body,
        /// so that running the same command again returns the plans already booked (change a
        /// request's `id` to book it again).
        #[arg(short = 'k', long)]
        idempotency_key: Option<String>,
        #[command(flatten)]
        conn: Connection,
    },
    /// Book from flags, no file: `plans create --cpus 16 --duration 2h --start now+1h`.
    Create(Box<CreateArgs>),
    /// The caller's plans (an admin's: everyone's), oldest first.
    #[command(visible_alias = "ls")]
    List {
        /// Only plans in this status: committed, rejected, cancelled, pending.
        #[arg(long)]
        status: Option<String>,
        /// Only plans of this request id.
        #[arg(short = 'r', long)]
        request_id: Option<String>,
        /// Plans starting at or after this instant (`now-1d`, RFC 3339).
        #[arg(long, value_parser = parse_time)]
        from: Option<DateTime<Utc>>,
        /// Plans starting before this instant (`now+1d`, RFC 3339).
        #[arg(long, value_parser = parse_time)]
        to: Option<DateTime<Utc>>,
        #[command(flatten)]
        conn: Connection,
    },
    /// One plan: its jobs' sites and times, its transfers' paths.
    Show {
        /// The plan's id (UUID) or its request id (the newest plan of that request id).
        id: String,
        #[command(flatten)]
        conn: Connection,
    },
    /// Follow the plans' events as they happen (`GET /v1/events`): one line per state change
    /// (committed, active, completed, broken, cancelled, ...). Reconnects after a dropped
    /// connection or a restart of the broker and resumes where it stopped (nothing missed,
    /// nothing twice). With ID: that plan's events from its first, until it is completed,
    /// cancelled or rejected; without: every event of the caller's plans (an admin's: all)
    /// from now on, until interrupted.
    Watch {
        /// The plan's id (UUID) or its request id.
        id: Option<String>,
        /// Start after this event id (what `-o json` prints as `id`).
        #[arg(long)]
        after: Option<i64>,
        #[command(flatten)]
        conn: Connection,
    },
    /// Change a committed plan, all of it or nothing (`PATCH /v1/plans/{id}`): move its start
    /// (`--start`), change one job (`--job NAME` with `--offset`, `--duration`, `--cpus`) or
    /// one transfer (`--transfer FROM:TO` with `--offset`, `--duration`, `--bandwidth`), or
    /// several at once from a file (`--file`, the JSON body). Offsets count from the plan's
    /// start. A change that does not fit says which part and when it could start (exit 4),
    /// and nothing changes.
    Modify(Box<ModifyArgs>),
    /// Cancel a committed plan: its reservations are released (the plan stays, `cancelled`).
    Cancel {
        /// The plan's id (UUID) or its request id (its one committed or pending plan).
        id: String,
        #[command(flatten)]
        conn: Connection,
    },
}

/// `coreserve plans ...`
pub async fn plans(cmd: PlansCommand) -> Result<()> {
    match cmd {
        PlansCommand::Submit { file, dry_run, idempotency_key, conn } => {
            submit(&file, dry_run, idempotency_key.as_deref(), &conn).await
        }
        PlansCommand::Create(a) => create(&a).await,
        PlansCommand::List { status, request_id, from, to, conn } => {
            let mut q = Vec::new();
            if let Some(s) = status {
                q.push(("status", s));
            }
            if let Some(r) = request_id {
                q.push(("request_id", r));
            }
            if let Some(t) = from {
                q.push(("from", rfc3339(t)));
            }
            if let Some(t) = to {
                q.push(("to", rfc3339(t)));
            }
            let v = Client::new(&conn)?.call(Method::GET, &["v1", "plans"], &q).await?;
            print_list(&conn, &v, |p| text(&p["id"]), &PLAN_HEADER, plan_row);
            Ok(())
        }
        PlansCommand::Show { id, conn } => {
            let c = Client::new(&conn)?;
            let id = c.resolve(&id, false).await?;
            let v = c.call(Method::GET, &["v1", "plans", &id], &[]).await?;
            print_one(&conn, &v)
        }
        PlansCommand::Watch { id, after, conn } => watch(id.as_deref(), after, &conn).await,
        PlansCommand::Modify(a) => modify(&a).await,
        PlansCommand::Cancel { id, conn } => {
            let c = Client::new(&conn)?;
            let id = c.resolve(&id, true).await?;
            let v = c.call(Method::DELETE, &["v1", "plans", &id], &[]).await?;
            match conn.out() {
                Output::Json => print_json(&v),
                Output::Ids => outln!("{}", text(&v["id"])),
                Output::Table => outln!("plan {} {}", text(&v["id"]), text(&v["status"])),
            }
            Ok(())
        }
    }
}

/// `coreserve plans modify`: what to change.
#[derive(Debug, Args)]
pub struct ModifyArgs {
    /// The plan's id (UUID) or its request id (its one committed plan).
    pub id: String,
    /// The plan's new start (`now+2h`, RFC 3339): every job and transfer moves with it.
    #[arg(long, value_parser = parse_time)]
    pub start: Option<DateTime<Utc>>,
    /// The job to change.
    #[arg(long, conflicts_with = "transfer")]
    pub job: Option<String>,
    /// The transfer to change, as `FROM:TO` (its jobs' names).
    #[arg(long)]
    pub transfer: Option<String>,
    /// The job's or transfer's new offset from the plan's start (`30m`, seconds).
    #[arg(long, value_parser = parse_duration)]
    pub offset: Option<i64>,
    /// The job's or transfer's new length (`2h`, seconds): extends or shortens its end.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<i64>,
    /// The job's new CPU count.
    #[arg(long, requires = "job")]
    pub cpus: Option<u32>,
    /// The transfer's new bandwidth in Mbit/s.
    #[arg(long, requires = "transfer")]
    pub bandwidth: Option<u64>,
    /// The whole change as JSON (the body of `PATCH /v1/plans/{id}`), `-` for standard
    /// input; instead of the flags above.
    #[arg(short = 'f', long, conflicts_with_all = ["start", "job", "transfer"])]
    pub file: Option<String>,
    /// Idempotency key: a retry with the same key and change answers the plan as modified
    /// without changing it again.
    #[arg(short = 'k', long)]
    pub idempotency_key: Option<String>,
    #[command(flatten)]
    pub conn: Connection,
}

/// The body of `PATCH /v1/plans/{id}` that `a` asks for.
fn modification_of(a: &ModifyArgs) -> Result<Value> {
    if let Some(f) = &a.file {
        let text = if f == "-" { std::io::read_to_string(std::io::stdin())? } else { std::fs::read_to_string(f)? };
        return serde_json::from_str(&text).with_context(|| format!("{f}: not JSON"));
    }
    let mut body = serde_json::Map::new();
    if let Some(t) = a.start {
        body.insert("start".into(), Value::String(rfc3339(t)));
    }
    let mut part = serde_json::Map::new();
    for (k, v) in [("offset_s", a.offset.map(Value::from)), ("duration_s", a.duration.map(Value::from))] {
        if let Some(v) = v {
            part.insert(k.into(), v);
        }
    }
    if let Some(job) = &a.job {
        part.insert("name".into(), Value::String(job.clone()));
        if let Some(c) = a.cpus {
            part.insert("cpus".into(), c.into());
        }
        body.insert("jobs".into(), Value::Array(vec![Value::Object(part)]));
    } else if let Some(t) = &a.transfer {
        let (from, to) = t.split_once(':').ok_or_else(|| Exit {
            code: EXIT_USAGE,
            message: format!("error: --transfer {t}: write FROM:TO, the names of its two jobs"),
        })?;
        part.insert("from".into(), Value::String(from.into()));
        part.insert("to".into(), Value::String(to.into()));
        if let Some(b) = a.bandwidth {
            part.insert("bandwidth_mbps".into(), b.into());
        }
        body.insert("transfers".into(), Value::Array(vec![Value::Object(part)]));
    } else if !part.is_empty() {
        return Err(Exit {
            code: EXIT_USAGE,
            message: "error: --offset and --duration need --job or --transfer".into(),
        }
        .into());
    }
    if body.is_empty() {
        return Err(Exit {
            code: EXIT_USAGE,
            message: "error: nothing to change: give --start, --job, --transfer or --file".into(),
        }
        .into());
    }
    Ok(Value::Object(body))
}

/// `coreserve plans modify`.
async fn modify(a: &ModifyArgs) -> Result<()> {
    let body = modification_of(a)?;
    let c = Client::new(&a.conn)?;
    let id = c.resolve(&a.id, true).await?;
    let answer = c.send(Method::PATCH, &["v1", "plans", &id], &[], Some(&body), a.idempotency_key.as_deref()).await?;
    if !answer.status.is_success() {
        return Err(problem_exit(&answer).into());
    }
    print_one(&a.conn, &answer.body)
}
