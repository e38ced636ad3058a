//! The command-line client of a running broker: `coreserve plans submit|create|list|show|cancel`,
//! `coreserve sites`, `availability` and `route`, over the REST API v1 (reqwest).
//!
//! Every command takes `-s/--server` (`CORESERVE_URL`, default `http://127.0.0.1:8080`) and
//! `-t/--token` (`CORESERVE_TOKEN`), prints a readable table by default, the server's JSON with
//! `-o json` (or `--json`) and bare ids with `-o ids`, prints problem details (RFC 9457) plainly
//! on stderr, and times as 24-hour UTC. Exit codes, for scripts ([`EXIT_CODES`], also in
//! `coreserve --help`):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done (a plan committed, or planned by a dry run) |
//! | 1 | the client failed: unreadable or malformed input file, unexpected answer |
//! | 2 | bad command line (clap) |
//! | 3 | a plan was rejected (no placement before its deadline) |
//! | 4 | the server refused the request (4xx: bad input, unknown id, no permission, conflict) |
//! | 5 | the server could not answer now (5xx, 408, 429, in doubt, a dropped connection): retry, with the same key |
//! | 6 | no connection to the server (refused, unknown host, connect timeout): nothing was sent |
//!
//! With several requests (a JSON-lines file) the highest code of any request is the exit code;
//! no connection (6) stops at once.
//!
//! Retries ([`RETRY_POLICY`]): `plans submit` and `plans create` resend a request with the same
//! Idempotency-Key, up to 5 tries 1-5 s apart (as `Retry-After` says), on an answer that says
//! "not now" (503, 429, 408, 409 in progress) and on a connection dropped after it was made; a
//! connection that cannot be made is not retried. The default key is derived from the request
//! (its `id` and its body), so running the same command again never books twice.

use std::io::{BufRead, IsTerminal, Read};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Args, Subcommand, ValueEnum};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::when::{parse_duration, parse_time, parse_time_at};

/// The exit codes, as `coreserve --help` prints them.
pub const EXIT_CODES: &str = "\
Exit codes of the client commands (plans, sites, availability, route):
  0  done (a plan committed, or planned by a dry run)
  1  client error: unreadable or malformed input, unexpected answer
  2  bad command line
  3  a plan was rejected (no placement before its deadline)
  4  the server refused the request (4xx: bad input, unknown id, no permission)
  5  the server cannot answer now (5xx, 408, 429, in doubt, dropped connection): retry later
     with the same command (the same Idempotency-Key)
  6  no connection to the server (refused, unknown host, connect timeout): nothing was sent";

/// The retry policy, as `coreserve --help` prints it.
pub const RETRY_POLICY: &str = "\
Retries: plans submit/create resend a request with the same Idempotency-Key up to 5 times,
1-5 s apart (as Retry-After says), on 503, 429, 408, 409 (in progress) and on a connection
dropped after it was made; a connection that cannot be made stops at once (exit code 6). The
default key is derived from the request (its id and body): running the same command again
returns the plan already booked instead of booking twice.";

/// A command that ended with an exit code other than 0 or 1 (see the module docs); `main`
/// exits with [`Exit::code`] after printing the message, if any.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Exit {
    /// The process's exit code.
    pub code: u8,
    /// Printed on stderr (empty: nothing more to say).
    pub message: String,
}

/// Exit code: a bad command line (as clap's own).
pub const EXIT_USAGE: u8 = 2;
/// Exit code: a plan was rejected.
pub const EXIT_REJECTED: u8 = 3;
/// Exit code: the server refused the request (4xx).
pub const EXIT_REFUSED: u8 = 4;
/// Exit code: the server could not answer now (5xx, 408, 429): retry.
pub const EXIT_UNAVAILABLE: u8 = 5;
/// Exit code: no connection could be made to the server; nothing was sent.
pub const EXIT_UNREACHABLE: u8 = 6;

/// The longest request (one JSON document, or one line of JSON lines) `plans submit` reads:
/// four times the server's body limit, so that a file without newlines (`/dev/zero`) fails
/// after 1 MiB instead of filling the memory.
pub const MAX_REQUEST_BYTES: usize = 4 * crate::api::config::MAX_BODY_BYTES;

/// What a command prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Readable columns (default).
    Table,
    /// The server's JSON (JSON lines for several submitted requests).
    Json,
    /// Only ids, one per line (plans, sites, links), for scripts.
    Ids,
}

/// Where the broker is and who calls it.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// The broker's base URL.
    #[arg(short = 's', long, env = "CORESERVE_URL", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// Bearer token (made by an admin: `POST /v1/tokens` or `coreserve token create`).
    #[arg(short = 't', long, env = "CORESERVE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// What to print: table, json or ids.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// The same as `-o json`.
    #[arg(long)]
    pub json: bool,
}

impl Connection {
    /// The output chosen (`--json` wins).
    pub fn out(&self) -> Output {
        if self.json {
            Output::Json
        } else {
            self.output
        }
    }
}

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

/// `coreserve plans create`: a request from flags.
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

/// `coreserve availability`: the earliest start a site offers.
#[derive(Debug, Args)]
pub struct AvailabilityArgs {
    /// The site.
    pub site: String,
    /// CPUs wanted.
    #[arg(short = 'c', long)]
    pub cpus: u32,
    /// Seconds wanted.
    #[arg(short = 'd', long, alias = "duration", value_parser = parse_duration)]
    pub duration_s: i64,
    /// Window start (`now+1h`, RFC 3339; default: now). Nothing starts before now + the
    /// broker's w_interval, whatever the window.
    #[arg(long, value_parser = parse_time)]
    pub from: Option<DateTime<Utc>>,
    /// Window end: the job must end by then (`now+2d`, RFC 3339; default: 7 days after the
    /// start).
    #[arg(long, value_parser = parse_time)]
    pub to: Option<DateTime<Utc>>,
    #[command(flatten)]
    pub conn: Connection,
}

/// `coreserve route`: the NIS's path between two sites for a bandwidth over an interval.
#[derive(Debug, Args)]
pub struct RouteArgs {
    /// From this site.
    pub from_site: String,
    /// To this site.
    pub to_site: String,
    /// Bandwidth wanted, Mbit/s.
    #[arg(short = 'b', long)]
    pub bandwidth_mbps: u64,
    /// Interval start (`now+1h`, RFC 3339; default: in one hour).
    #[arg(long, value_parser = parse_time)]
    pub start: Option<DateTime<Utc>>,
    /// Interval end (`now+2h`, RFC 3339; default: one hour after the start).
    #[arg(long, value_parser = parse_time)]
    pub end: Option<DateTime<Utc>>,
    #[command(flatten)]
    pub conn: Connection,
}

/// An HTTP answer: status and body (JSON, or `null`).
struct Answer {
    status: StatusCode,
    body: Value,
    /// `Retry-After`, in seconds.
    retry_after_s: Option<u64>,
}

struct Client {
    http: reqwest::Client,
    conn: Connection,
}

/// Whether `e` is [`Exit`] with `code`.
fn is_exit(e: &anyhow::Error, code: u8) -> bool {
    e.downcast_ref::<Exit>().is_some_and(|x| x.code == code)
}

impl Client {
    fn new(conn: &Connection) -> Result<Client> {
        crate::protocol::http::install_crypto_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(120))
            .build()
            .context("building the HTTP client")?;
        Ok(Client { http, conn: conn.clone() })
    }

    /// The URL of `segments` (each percent-encoded as one path segment) under the server's
    /// base URL, with `query`.
    fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Result<reqwest::Url> {
        let base = self.conn.server.trim_end_matches('/');
        let mut url = reqwest::Url::parse(base).with_context(|| format!("--server {base}: not a URL"))?;
        url.path_segments_mut()
            .map_err(|()| anyhow::anyhow!("--server {base}: not a base URL"))?
            .pop_if_empty()
            .extend(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url)
    }

    /// Sends one request. No connection: [`Exit`] 6 (nothing was sent); another transport
    /// error (the connection dropped): an error for the caller to retry or report.
    async fn send(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&Value>,
        key: Option<&str>,
    ) -> Result<Answer> {
        let url = self.url(segments, query)?;
        let mut rb = self.http.request(method, url);
        if let Some(t) = &self.conn.token {
            rb = rb.bearer_auth(t);
        }
        if let Some(k) = key {
            rb = rb.header("Idempotency-Key", k);
        }
        if let Some(b) = body {
            rb = rb.json(b);
        }
        let r = match rb.send().await {
            Ok(r) => r,
            Err(e) if e.is_connect() => {
                // The innermost cause says it: "Connection refused (os error 111)".
                let mut cause: &dyn std::error::Error = &e;
                while let Some(next) = cause.source() {
                    cause = next;
                }
                return Err(Exit {
                    code: EXIT_UNREACHABLE,
                    message: format!(
                        "error: cannot connect to {} ({cause}); is the broker running? (--server / CORESERVE_URL)",
                        self.conn.server
                    ),
                }
                .into());
            }
            Err(e) => {
                return Err(anyhow::Error::new(e)
                    .context(format!("{} did not answer (the connection was dropped)", self.conn.server)))
            }
        };
        let status = r.status();
        let retry_after_s = r.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
        let text = r.text().await.context("reading the answer")?;
        let body = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok(Answer { status, body, retry_after_s })
    }

    /// [`Client::send`], then a problem answer becomes an [`Exit`] (4 or 5).
    async fn call(&self, method: Method, segments: &[&str], query: &[(&str, String)]) -> Result<Value> {
        let a = self.send(method, segments, query, None, None).await?;
        if a.status.is_success() {
            Ok(a.body)
        } else {
            Err(problem_exit(&a).into())
        }
    }

    /// The plans of request id `rid` (the caller's; an admin's: everyone's), oldest first.
    async fn plans_of_request(&self, rid: &str) -> Result<Vec<Value>> {
        let v = self.call(Method::GET, &["v1", "plans"], &[("request_id", rid.to_owned())]).await?;
        // Filtered here too: a server before `request_id` ignores the parameter.
        Ok(v.as_array().into_iter().flatten().filter(|p| p["request_id"] == rid).cloned().collect())
    }

    /// The plan id (UUID) that `id` names: itself if it is a UUID, else the plan of request id
    /// `id` (for a cancel, its one committed or pending plan; else the newest).
    async fn resolve(&self, id: &str, cancel: bool) -> Result<String> {
        if uuid::Uuid::parse_str(id).is_ok() {
            return Ok(id.to_owned());
        }
        let plans = self.plans_of_request(id).await?;
        let ids = |ps: &[&Value]| ps.iter().map(|p| text(&p["id"])).collect::<Vec<_>>().join(", ");
        let all: Vec<&Value> = plans.iter().collect();
        match all.as_slice() {
            [] => Err(Exit {
                code: EXIT_REFUSED,
                message: format!(
                    "error: no plan with id or request id `{id}` (a plan id is a UUID; `coreserve plans list` shows both)"
                ),
            }
            .into()),
            [one] => Ok(text(&one["id"])),
            _ if cancel => {
                let live: Vec<&Value> =
                    all.iter().copied().filter(|p| ["committed", "active", "pending"].iter().any(|s| p["status"] == *s)).collect();
                match live.as_slice() {
                    [one] => Ok(text(&one["id"])),
                    [] => Ok(text(&all[all.len() - 1]["id"])),
                    _ => Err(Exit {
                        code: EXIT_REFUSED,
                        message: format!(
                            "error: request id `{id}` has {} booked plans ({}); cancel one by its plan id",
                            live.len(),
                            ids(&live)
                        ),
                    }
                    .into()),
                }
            }
            _ => {
                let newest = all[all.len() - 1];
                eprintln!(
                    "note: request id `{id}` has {} plans ({}); showing the newest",
                    all.len(),
                    ids(&all)
                );
                Ok(text(&newest["id"]))
            }
        }
    }
}

/// Whether an answer says "not now" rather than "no": a 5xx, 429 (too many in flight) or 408
/// (the server timed out reading the request, e.g. after a pause, before it looked at it; RFC
/// 9110 §15.5.9 lets the client repeat it). The same request, with the same key, may succeed.
fn retryable(status: StatusCode) -> bool {
    status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::REQUEST_TIMEOUT
}

/// The exit code of a refused answer: 5 for a [`retryable`] one, 4 for other 4xx.
fn code_of(status: StatusCode) -> u8 {
    if retryable(status) {
        EXIT_UNAVAILABLE
    } else {
        EXIT_REFUSED
    }
}

/// A problem details body in plain words: `STATUS TITLE: DETAIL` and any extension members.
fn problem_text(a: &Answer) -> String {
    let mut s = format!("{}", a.status);
    match &a.body {
        Value::Object(m) => {
            if let Some(t) = m.get("title").and_then(Value::as_str) {
                s = format!("{} {t}", a.status.as_u16());
            }
            if let Some(d) = m.get("detail").and_then(Value::as_str) {
                s.push_str(&format!(": {d}"));
            }
            for (k, v) in m {
                if !matches!(k.as_str(), "type" | "title" | "status" | "detail" | "instance") {
                    s.push_str(&format!("\n  {k}: {}", v.as_str().map_or_else(|| v.to_string(), str::to_owned)));
                }
            }
        }
        Value::Null => {}
        other => s.push_str(&format!(": {}", other.as_str().map_or_else(|| other.to_string(), str::to_owned))),
    }
    s
}

fn problem_exit(a: &Answer) -> Exit {
    Exit { code: code_of(a.status), message: format!("error: {}", problem_text(a)) }
}

fn print_json(v: &Value) {
    outln!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// An instant as 24-hour UTC, `2026-11-27 09:00`.
fn time(v: &Value) -> String {
    v.as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map_or_else(|| "-".into(), |t| t.with_timezone(&Utc).format("%Y-%m-%d %H:%M").to_string())
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A price or cost, rounded to 4 decimals without trailing zeros (`0.30000000000000004` is
/// `0.3`).
fn amount(v: &Value) -> String {
    match v.as_f64() {
        Some(x) => {
            let s = format!("{x:.4}");
            let s = s.trim_end_matches('0').trim_end_matches('.');
            if s == "-0" {
                "0".into()
            } else {
                s.to_owned()
            }
        }
        None => text(v),
    }
}

/// Prints rows as left-aligned columns under a header.
fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let s: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        outln!("{}", s.join("  ").trim_end());
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for r in rows {
        line(r.clone());
    }
}

/// A plan: a summary line, its jobs and its transfers.
fn print_plan(p: &Value) {
    outln!(
        "plan {}  request {}  user {}  {}  cost {}  planned in {:.1} ms",
        text(&p["id"]),
        text(&p["request_id"]),
        text(&p["user"]),
        text(&p["status"]).to_uppercase(),
        amount(&p["cost"]),
        p["planning_ms"].as_f64().unwrap_or(0.0)
    );
    if let Some(r) = p["reason"].as_str() {
        outln!("reason: {r}");
    }
    // A job at a Slurm site names its reservation (for `sbatch --reservation=NAME`), and a
    // reservation the site no longer honours says why.
    let local = |j: &Value| match (j["reservation_name"].as_str(), j["broken"].as_str()) {
        (_, Some(why)) => format!("BROKEN: {why}"),
        (Some(name), None) => name.to_owned(),
        (None, None) => "-".into(),
    };
    let jobs: Vec<Vec<String>> = p["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|j| {
            vec![text(&j["name"]), text(&j["site"]), time(&j["start"]), time(&j["end"]), text(&j["cpus"]), local(j)]
        })
        .collect();
    if !jobs.is_empty() {
        outln!();
        table(&["job", "site", "start (UTC)", "end (UTC)", "cpus", "reservation"], &jobs);
    }
    let transfers: Vec<Vec<String>> = p["transfers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let path: Vec<String> = t["path"].as_array().into_iter().flatten().map(text).collect();
            vec![
                format!("{} -> {}", text(&t["from"]), text(&t["to"])),
                if path.is_empty() { "(same site)".into() } else { path.join(" ") },
                text(&t["bandwidth_mbps"]),
                time(&t["start"]),
                time(&t["end"]),
            ]
        })
        .collect();
    if !transfers.is_empty() {
        outln!();
        table(&["transfer", "path (links)", "mbps", "start (UTC)", "end (UTC)"], &transfers);
    }
}

const PLAN_HEADER: [&str; 8] = ["plan", "request", "user", "status", "start (UTC)", "jobs", "sites", "cost"];

fn plan_rows(plans: &[Value]) -> Vec<Vec<String>> {
    plans
        .iter()
        .map(|p| {
            let sites: std::collections::BTreeSet<String> =
                p["jobs"].as_array().into_iter().flatten().map(|j| text(&j["site"])).collect();
            vec![
                text(&p["id"]),
                text(&p["request_id"]),
                text(&p["user"]),
                text(&p["status"]),
                time(&p["start"]),
                p["jobs"].as_array().map_or(0, Vec::len).to_string(),
                sites.into_iter().collect::<Vec<_>>().join(","),
                amount(&p["cost"]),
            ]
        })
        .collect()
}

/// The requests of a submit, read one at a time: one JSON document (over several lines, e.g.
/// pretty-printed), or JSON lines; never more than [`MAX_REQUEST_BYTES`] of one in memory.
struct Requests {
    name: String,
    input: Box<dyn BufRead>,
    /// Lines read so far.
    line: usize,
}

impl Requests {
    fn open(file: &str) -> Result<Requests> {
        let input: Box<dyn BufRead> = if file == "-" {
            Box::new(std::io::BufReader::new(std::io::stdin()))
        } else {
            let f = std::fs::File::open(file).with_context(|| format!("reading {file}"))?;
            Box::new(std::io::BufReader::new(f))
        };
        let name = if file == "-" { "standard input".to_owned() } else { file.to_owned() };
        Ok(Requests { name, input, line: 0 })
    }

    /// The next request and the line it starts on, `user` and `submitted_at` removed; `None`
    /// at the end.
    fn next_request(&mut self) -> Result<Option<(usize, Value)>> {
        let (mut doc, mut first) = (Vec::new(), 0);
        loop {
            let mut buf = Vec::new();
            let limit = (MAX_REQUEST_BYTES + 1 - doc.len()) as u64;
            let n = (&mut self.input)
                .take(limit)
                .read_until(b'\n', &mut buf)
                .with_context(|| format!("reading {}", self.name))?;
            if n == 0 {
                if doc.is_empty() {
                    return Ok(None);
                }
                let e = serde_json::from_slice::<Value>(&doc).err().map_or_else(String::new, |e| e.to_string());
                bail!("{}, line {first}: not JSON (the input ends inside a request: {e})", self.name);
            }
            self.line += 1;
            if doc.len() + buf.len() > MAX_REQUEST_BYTES {
                let lines = if first == 0 || first == self.line {
                    format!("line {}", self.line)
                } else {
                    format!("lines {first}-{}", self.line)
                };
                bail!(
                    "{}, {lines}: a request longer than {} KiB; a request is one JSON object of at most {} KiB \
                     (several: one per line). Is this the right file?",
                    self.name,
                    MAX_REQUEST_BYTES / 1024,
                    crate::api::config::MAX_BODY_BYTES / 1024
                );
            }
            if doc.is_empty() {
                if buf.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                first = self.line;
            }
            doc.extend_from_slice(&buf);
            match serde_json::from_slice::<Value>(&doc) {
                Ok(mut v) => {
                    if let Value::Object(m) = &mut v {
                        m.remove("user");
                        m.remove("submitted_at");
                    }
                    return Ok(Some((first, v)));
                }
                Err(e) if e.is_eof() => continue,
                Err(e) => bail!("{}, line {first}: not JSON: {e}", self.name),
            }
        }
    }
}

/// `v` as JSON with every object's keys sorted: the same request gives the same text,
/// whatever the order of its fields in the file.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let fields: Vec<String> =
                keys.iter().map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&m[*k]))).collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// The default Idempotency-Key of a request: `cli-ID-HASH`, HASH from the request's canonical
/// JSON (id included), ID its `id` in visible ASCII (at most 64 characters; left out when it
/// has none). The same request sent again gets the same key (the server returns the plan it
/// booked); a changed request a new one.
pub fn derived_key(body: &Value) -> String {
    let hash = hex::encode(Sha256::digest(canonical(body).as_bytes()));
    let id: String =
        body.get("id").and_then(Value::as_str).unwrap_or("").chars().filter(char::is_ascii_graphic).take(64).collect();
    if id.is_empty() {
        format!("cli-{}", &hash[..32])
    } else {
        format!("cli-{id}-{}", &hash[..32])
    }
}

/// How one submitted request ended: its exit code and the answer, if any.
struct Submitted {
    code: u8,
    answer: Option<Answer>,
    error: Option<String>,
}

/// Submits one request, retrying with the same key on a dropped connection, 503, 429, 408 and
/// 409 (in progress) (up to 5 tries, 1-5 s apart, as `Retry-After` says).
///
/// # Errors
/// No connection ([`Exit`] 6): not retried, nothing was sent.
async fn submit_one(c: &Client, body: &Value, key: &str, dry_run: bool) -> Result<Submitted> {
    let query: Vec<(&str, String)> = if dry_run { vec![("dry_run", "true".into())] } else { vec![] };
    let mut last: Option<Result<Answer>> = None;
    for attempt in 0..5u64 {
        if attempt > 0 {
            let wait_s = match &last {
                Some(Ok(a)) => a.retry_after_s.unwrap_or(attempt),
                _ => attempt,
            };
            tokio::time::sleep(Duration::from_secs(wait_s.clamp(1, 5))).await;
        }
        let a = c.send(Method::POST, &["v1", "plans"], &query, Some(body), Some(key)).await;
        let retry = match &a {
            Err(e) if is_exit(e, EXIT_UNREACHABLE) => return Err(a.err().expect("an error")),
            Err(_) => true,
            Ok(a) => matches!(
                a.status,
                StatusCode::SERVICE_UNAVAILABLE
                    | StatusCode::TOO_MANY_REQUESTS
                    | StatusCode::REQUEST_TIMEOUT
                    | StatusCode::CONFLICT
            ),
        };
        last = Some(a);
        if !retry {
            break;
        }
    }
    Ok(match last.expect("at least one try") {
        Err(e) => Submitted { code: EXIT_UNAVAILABLE, answer: None, error: Some(format!("{e:#}")) },
        Ok(a) if a.status.is_success() => {
            let code = if a.body["status"] == "rejected" { EXIT_REJECTED } else { 0 };
            Submitted { code, answer: Some(a), error: None }
        }
        Ok(a) => Submitted { code: code_of(a.status), error: Some(problem_text(&a)), answer: Some(a) },
    })
}

/// A progress line on a terminal (stderr) for several requests; none in pipes.
fn progress() -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let b = indicatif::ProgressBar::new_spinner();
    b.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {pos} requests, {msg} [{elapsed_precise}]")
            .expect("a valid template"),
    );
    Some(b)
}

async fn submit(file: &str, dry_run: bool, key: Option<&str>, conn: &Connection) -> Result<()> {
    let mut requests = Requests::open(file)?;
    let c = Client::new(conn)?;
    let out = conn.out();
    let bar = progress();
    let (mut worst, mut sent, mut rows) = (0u8, 0usize, Vec::new());
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    // The first request is held back until the second is read: one request prints as a plan,
    // several as a table.
    let mut pending: Option<(usize, Value)> = None;
    let mut many = false;
    let mut read_error = None;
    loop {
        // After a read error nothing more is read: the requests before it are still sent.
        let next = match read_error.is_none().then(|| requests.next_request()) {
            Some(Ok(n)) => n,
            Some(Err(e)) => {
                read_error = Some(e);
                None
            }
            None => None,
        };
        let current = match (pending.take(), next) {
            (None, None) => break,
            (None, Some(n)) => {
                if many {
                    n
                } else {
                    pending = Some(n);
                    continue;
                }
            }
            (Some(p), n) => {
                if n.is_some() {
                    many = true;
                }
                pending = n;
                p
            }
        };
        sent += 1;
        let (line, body) = current;
        let k = match key {
            Some(k) if many => format!("{k}-{sent}"),
            Some(k) => k.to_owned(),
            None => derived_key(&body),
        };
        let s = match submit_one(&c, &body, &k, dry_run).await {
            Ok(s) => s,
            Err(e) => {
                if let Some(b) = bar {
                    b.finish_and_clear();
                }
                if sent > 1 {
                    eprintln!(
                        "stopped at request {sent} (line {line}): {} submitted before; the same command again \
                         submits the rest and returns the plans already booked",
                        sent - 1
                    );
                }
                return Err(e);
            }
        };
        worst = worst.max(s.code);
        let status = s
            .answer
            .as_ref()
            .filter(|a| a.status.is_success())
            .map_or("error".to_string(), |a| text(&a.body["status"]));
        *counts.entry(status.clone()).or_default() += 1;
        if let Some(b) = &bar {
            b.inc(1);
            b.set_message(counts.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", "));
        }
        if let Some(e) = &s.error {
            let id = body.get("id").map_or_else(|| format!("line {line}"), text);
            eprintln!("error: request {id}: {e}");
        }
        let answer = s.answer.map_or(Value::Null, |a| a.body);
        let ok = s.error.is_none();
        match out {
            Output::Json if many => outln!("{answer}"),
            Output::Json => print_json(&answer),
            Output::Ids if ok => outln!("{}", text(&answer["id"])),
            Output::Ids => {}
            Output::Table if ok && many => rows.extend(plan_rows(std::slice::from_ref(&answer))),
            Output::Table if ok => print_plan(&answer),
            Output::Table => {}
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if out == Output::Table && many {
        table(&PLAN_HEADER, &rows);
        outln!("{}", counts.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", "));
    }
    if let Some(e) = read_error {
        if sent > 0 {
            eprintln!("{sent} requests before it were submitted");
        }
        return Err(e);
    }
    if sent == 0 {
        bail!("{} holds no request", requests.name);
    }
    if worst > 1 {
        return Err(Exit { code: worst, message: String::new() }.into());
    }
    Ok(())
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
    let transfers: Vec<Value> = a.transfers.iter().map(|t| transfer_of(t, &jobs)).collect::<Result<_>>()?;
    let at = |flag: &str, s: &str| parse_time_at(s, now).map_err(|e| anyhow::anyhow!("--{flag}: {e}"));
    let start = a.start.as_deref().map(|s| at("start", s)).transpose()?;
    let span = jobs.iter().map(|j| j["offset_s"].as_i64().unwrap_or(0) + j["duration_s"].as_i64().unwrap_or(0)).max();
    let deadline = match &a.deadline {
        Some(d) => at("deadline", d)?,
        None => start.unwrap_or(now) + chrono::Duration::seconds(span.unwrap_or(0)) + chrono::Duration::days(1),
    };
    let id = a.id.clone().unwrap_or_else(|| {
        // The flags as typed (relative times unresolved): the same command, the same id.
        let typed = format!(
            "{:?}",
            (&a.jobs, a.count, a.cpus, a.duration, &a.start, &a.deadline, &a.os, &a.transfers, &a.policy, &a.method)
        );
        format!("create-{}", &hex::encode(Sha256::digest(typed.as_bytes()))[..12])
    });
    let rfc = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    let mut r = json!({"id": id, "deadline": rfc(deadline), "jobs": jobs, "transfers": transfers});
    if let Some(s) = start {
        r["not_before"] = json!(rfc(s));
    }
    if let Some(p) = &a.policy {
        r["policy"] = json!(p);
    }
    if let Some(m) = &a.method {
        r["method"] = json!(m);
    }
    Ok(r)
}

/// `coreserve plans create`: a request from flags; a request id already booked (committed or
/// pending) is shown instead of booked again.
async fn create(a: &CreateArgs) -> Result<()> {
    let body = request_of(a, Utc::now())?;
    if a.print_request {
        outln!("{body}");
        return Ok(());
    }
    let c = Client::new(&a.conn)?;
    let rid = text(&body["id"]);
    if !a.dry_run && a.idempotency_key.is_none() {
        let booked = c.plans_of_request(&rid).await?;
        if let Some(p) =
            booked.iter().rev().find(|p| ["committed", "active", "pending"].iter().any(|s| p["status"] == *s))
        {
            eprintln!(
                "note: request id `{rid}` is already booked as plan {}; nothing new was booked (give another --id to book again)",
                text(&p["id"])
            );
            return print_one(&a.conn, p);
        }
    }
    let key = a.idempotency_key.clone().unwrap_or_else(|| derived_key(&body));
    let s = submit_one(&c, &body, &key, a.dry_run).await?;
    let Some(answer) = s.answer.filter(|_| s.error.is_none()) else {
        return Err(Exit { code: s.code.max(1), message: format!("error: {}", s.error.unwrap_or_default()) }.into());
    };
    print_one(&a.conn, &answer.body)?;
    if a.conn.out() == Output::Table && answer.body["status"] == "committed" {
        eprintln!(
            "timeline: {}/ui#plan={} (paste your token there)",
            a.conn.server.trim_end_matches('/'),
            text(&answer.body["id"])
        );
    }
    if s.code > 1 {
        return Err(Exit { code: s.code, message: String::new() }.into());
    }
    Ok(())
}

/// One plan as `-o` says.
fn print_one(conn: &Connection, p: &Value) -> Result<()> {
    match conn.out() {
        Output::Json => print_json(p),
        Output::Ids => outln!("{}", text(&p["id"])),
        Output::Table => print_plan(p),
    }
    Ok(())
}

/// `coreserve webhooks ...`
#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Register URL: every event of your plans from now on is POSTed to it, signed with the
    /// secret printed (HMAC-SHA256, header Coreserve-Signature); keep the secret.
    Add {
        /// An http or https URL.
        url: String,
        /// Your own secret (16-256 characters); default: a generated one.
        #[arg(long)]
        secret: Option<String>,
        #[command(flatten)]
        conn: Connection,
    },
    /// Your webhooks (an admin's: everyone's), with where their deliveries stand.
    #[command(visible_alias = "ls")]
    List {
        #[command(flatten)]
        conn: Connection,
    },
    /// One webhook's newest delivery attempts.
    Deliveries {
        /// The webhook's id.
        id: String,
        #[command(flatten)]
        conn: Connection,
    },
    /// Delete a webhook: nothing more is sent to it.
    #[command(visible_alias = "remove")]
    Rm {
        /// The webhook's id.
        id: String,
        #[command(flatten)]
        conn: Connection,
    },
}

/// `coreserve webhooks ...`
pub async fn webhooks(cmd: WebhooksCommand) -> Result<()> {
    let opt =
        |v: &Value| v.as_str().map_or_else(|| v.as_i64().map_or_else(String::new, |n| n.to_string()), str::to_owned);
    match cmd {
        WebhooksCommand::Add { url, secret, conn } => {
            let c = Client::new(&conn)?;
            let mut body = json!({ "url": url });
            if let Some(s) = secret {
                body["secret"] = json!(s);
            }
            let a = c.send(Method::POST, &["v1", "webhooks"], &[], Some(&body), None).await?;
            if !a.status.is_success() {
                return Err(problem_exit(&a).into());
            }
            match conn.out() {
                Output::Json => print_json(&a.body),
                Output::Ids => outln!("{}", text(&a.body["id"])),
                Output::Table => {
                    outln!("webhook {} -> {}", text(&a.body["id"]), text(&a.body["url"]));
                    outln!(
                        "secret {} (shown once: verify each delivery's Coreserve-Signature with it)",
                        text(&a.body["secret"])
                    );
                }
            }
            Ok(())
        }
        WebhooksCommand::List { conn } => {
            let v = Client::new(&conn)?.call(Method::GET, &["v1", "webhooks"], &[]).await?;
            let hooks = v.as_array().cloned().unwrap_or_default();
            match conn.out() {
                Output::Json => print_json(&v),
                Output::Ids => hooks.iter().for_each(|w| outln!("{}", text(&w["id"]))),
                Output::Table => {
                    let rows: Vec<Vec<String>> = hooks
                        .iter()
                        .map(|w| {
                            vec![
                                text(&w["id"]),
                                text(&w["user"]),
                                text(&w["url"]),
                                if w["enabled"] == true { "yes".into() } else { "DISABLED".into() },
                                opt(&w["delivered_through"]),
                                opt(&w["failures"]),
                                opt(&w["last_error"]),
                            ]
                        })
                        .collect();
                    table(&["webhook", "user", "url", "enabled", "delivered through", "failures", "last error"], &rows);
                }
            }
            Ok(())
        }
        WebhooksCommand::Deliveries { id, conn } => {
            let v = Client::new(&conn)?.call(Method::GET, &["v1", "webhooks", &id, "deliveries"], &[]).await?;
            let log = v.as_array().cloned().unwrap_or_default();
            match conn.out() {
                Output::Json => print_json(&v),
                Output::Ids => log.iter().for_each(|d| outln!("{}", opt(&d["event_id"]))),
                Output::Table => {
                    let rows: Vec<Vec<String>> = log
                        .iter()
                        .map(|d| {
                            vec![
                                text(&d["at"]),
                                opt(&d["event_id"]),
                                opt(&d["attempt"]),
                                opt(&d["status_code"]),
                                opt(&d["error"]),
                            ]
                        })
                        .collect();
                    table(&["at (UTC)", "event", "attempt", "status", "error"], &rows);
                }
            }
            Ok(())
        }
        WebhooksCommand::Rm { id, conn } => {
            let c = Client::new(&conn)?;
            c.call(Method::DELETE, &["v1", "webhooks", &id], &[]).await?;
            if conn.out() == Output::Table {
                outln!("webhook {id} deleted");
            }
            Ok(())
        }
    }
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
            let plans = v.as_array().cloned().unwrap_or_default();
            match conn.out() {
                Output::Json => print_json(&v),
                Output::Ids => plans.iter().for_each(|p| outln!("{}", text(&p["id"]))),
                Output::Table => table(&PLAN_HEADER, &plan_rows(&plans)),
            }
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

/// `coreserve plans watch`: reads `GET /v1/events` (Server-Sent Events) and prints each event;
/// a dropped stream is opened again 2 s later with `Last-Event-ID`. The first connection that
/// cannot be made is exit 6, a refusal (4xx) exit 4; later outages are waited out.
async fn watch(id: Option<&str>, after: Option<i64>, conn: &Connection) -> Result<()> {
    let c = Client::new(conn)?;
    let plan = match id {
        Some(id) => Some(c.resolve(id, false).await?),
        None => None,
    };
    // A stream has no end: no overall timeout, but a silent one (no heartbeat for 45 s) is dead.
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .read_timeout(Duration::from_secs(45))
        .build()
        .context("building the HTTP client")?;
    let query: Vec<(&str, String)> = plan.iter().map(|p| ("plan_id", p.clone())).collect();
    let url = c.url(&["v1", "events"], &query)?;
    // With a plan: its whole history first.
    let mut last = after.or(plan.as_ref().map(|_| 0));
    let mut connected = false;
    loop {
        let mut rb = http.get(url.clone()).header("Accept", "text/event-stream");
        if let Some(t) = &conn.token {
            rb = rb.bearer_auth(t);
        }
        if let Some(n) = last {
            rb = rb.header("Last-Event-ID", n.to_string());
        }
        match rb.send().await {
            Ok(r) if r.status().is_success() => {
                connected = true;
                if follow(r, conn.out(), plan.is_some(), &mut last).await? {
                    return Ok(());
                }
            }
            Ok(r) if r.status().is_client_error() => {
                let status = r.status();
                let text = r.text().await.unwrap_or_default();
                let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
                return Err(problem_exit(&Answer { status, body, retry_after_s: None }).into());
            }
            Ok(r) => eprintln!("note: {} answered {}; reconnecting in 2 s", conn.server, r.status()),
            Err(e) if !connected && e.is_connect() => {
                return Err(Exit {
                    code: EXIT_UNREACHABLE,
                    message: format!("error: cannot connect to {} ({e}); is the broker running?", conn.server),
                }
                .into())
            }
            Err(e) => eprintln!("note: {} did not answer ({e}); reconnecting in 2 s", conn.server),
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Prints the events of one open stream, keeping `last` (the newest id printed) for the next
/// connection. True when the one plan watched (`one_plan`: the stream is filtered to it) is over
/// (completed, cancelled, rejected).
async fn follow(mut r: reqwest::Response, out: Output, one_plan: bool, last: &mut Option<i64>) -> Result<bool> {
    let mut buf: Vec<u8> = Vec::new();
    let (mut id, mut data) = (None::<i64>, String::new());
    loop {
        let chunk = match r.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) | Err(_) => return Ok(false),
        };
        buf.extend_from_slice(&chunk);
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if let Some(v) = line.strip_prefix("id:") {
                id = v.trim().parse().ok();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            } else if line.is_empty() && !data.is_empty() {
                let event: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
                match out {
                    Output::Json => outln!("{data}"),
                    Output::Ids => outln!("{}", text(&event["plan_id"])),
                    Output::Table => {
                        let broken: Vec<String> = ["jobs", "transfers"]
                            .iter()
                            .flat_map(|k| event[*k].as_array().into_iter().flatten())
                            .filter_map(|x| x["broken"].as_str().map(str::to_owned))
                            .collect();
                        outln!(
                            "{}  {:<15} {}  {}{}",
                            text(&event["at"]),
                            text(&event["type"]),
                            text(&event["plan_id"]),
                            text(&event["request_id"]),
                            if broken.is_empty() { String::new() } else { format!("  ({})", broken.join("; ")) }
                        );
                    }
                }
                *last = id.or(*last);
                data.clear();
                if one_plan && ["completed", "cancelled", "rejected"].iter().any(|s| event["status"] == *s) {
                    return Ok(true);
                }
            }
        }
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `coreserve sites`: every site with its CPUs, OS, price and network node.
pub async fn sites(conn: Connection) -> Result<()> {
    let v = Client::new(&conn)?.call(Method::GET, &["v1", "sites"], &[]).await?;
    let sites: Vec<&Value> = v.as_array().into_iter().flatten().collect();
    match conn.out() {
        Output::Json => print_json(&v),
        Output::Ids => sites.iter().for_each(|s| outln!("{}", text(&s["id"]))),
        Output::Table => {
            let rows: Vec<Vec<String>> = sites
                .iter()
                .map(|s| {
                    vec![
                        text(&s["id"]),
                        text(&s["node"]),
                        text(&s["cpus"]),
                        text(&s["os"]),
                        amount(&s["price_per_cpu_hour"]),
                    ]
                })
                .collect();
            table(&["site", "node", "cpus", "os", "price_per_cpu_hour"], &rows);
        }
    }
    Ok(())
}

/// `coreserve availability SITE --cpus N --duration-s S [--from T] [--to T]`.
pub async fn availability(a: AvailabilityArgs) -> Result<()> {
    let from = a.from.unwrap_or_else(Utc::now);
    let to = a.to.unwrap_or(from + chrono::Duration::days(7));
    let q = [
        ("from", rfc3339(from)),
        ("to", rfc3339(to)),
        ("cpus", a.cpus.to_string()),
        ("duration_s", a.duration_s.to_string()),
    ];
    let v = Client::new(&a.conn)?.call(Method::GET, &["v1", "sites", &a.site, "availability"], &q).await?;
    match a.conn.out() {
        Output::Json => print_json(&v),
        Output::Ids => {
            if let Some(t) = v["earliest_start"].as_str() {
                outln!("{t}");
            }
        }
        Output::Table => {
            let start = if v["earliest_start"].is_null() {
                "none in the window".to_string()
            } else {
                format!("{} UTC", time(&v["earliest_start"]))
            };
            outln!(
                "site {}: earliest start of {} CPUs for {} s: {start}; utilisation {:.1} %; {} per CPU-hour",
                text(&v["site"]),
                a.cpus,
                a.duration_s,
                v["utilisation"].as_f64().unwrap_or(0.0) * 100.0,
                amount(&v["price_per_cpu_hour"])
            );
        }
    }
    Ok(())
}

/// `coreserve route FROM TO --bandwidth-mbps B [--start T] [--end T]`.
pub async fn route(a: RouteArgs) -> Result<()> {
    let start = a.start.unwrap_or_else(|| Utc::now() + chrono::Duration::hours(1));
    let end = a.end.unwrap_or(start + chrono::Duration::hours(1));
    let q = [
        ("from_site", a.from_site.clone()),
        ("to_site", a.to_site.clone()),
        ("bandwidth_mbps", a.bandwidth_mbps.to_string()),
        ("start", rfc3339(start)),
        ("end", rfc3339(end)),
    ];
    let v = Client::new(&a.conn)?.call(Method::GET, &["v1", "network", "route"], &q).await?;
    let Some(r) = v.get("route").filter(|r| !r.is_null()) else {
        if a.conn.out() == Output::Json {
            print_json(&v);
        }
        return Err(Exit {
            code: EXIT_REJECTED,
            message: format!(
                "no route from {} to {} with {} Mbit/s free over the interval",
                a.from_site, a.to_site, a.bandwidth_mbps
            ),
        }
        .into());
    };
    let links: Vec<String> = r["links"].as_array().into_iter().flatten().map(text).collect();
    match a.conn.out() {
        Output::Json => print_json(&v),
        Output::Ids => links.iter().for_each(|l| outln!("{l}")),
        Output::Table => outln!(
            "{} -> {}: {} ({} links), {} Mbit/s free, {} per Gbit/s-hour",
            a.from_site,
            a.to_site,
            if links.is_empty() { "same node".to_string() } else { links.join(" ") },
            links.len(),
            text(&r["free_mbps"]),
            amount(&r["price_per_gbps_hour"])
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_timeout_is_retried_not_refused() {
        // actix answers 408 to a request it did not finish reading in time, e.g. after the
        // server was paused: it never looked at it, so the same key may be sent again.
        assert_eq!(code_of(StatusCode::REQUEST_TIMEOUT), EXIT_UNAVAILABLE);
        assert_eq!(code_of(StatusCode::TOO_MANY_REQUESTS), EXIT_UNAVAILABLE);
        assert_eq!(code_of(StatusCode::BAD_GATEWAY), EXIT_UNAVAILABLE);
        assert_eq!(code_of(StatusCode::BAD_REQUEST), EXIT_REFUSED);
        assert_eq!(code_of(StatusCode::NOT_FOUND), EXIT_REFUSED);
    }

    #[test]
    fn the_derived_key_depends_on_the_request_not_on_field_order() {
        let a: Value = serde_json::from_str(r#"{"id":"wf-1","deadline":"2030-01-01T00:00:00Z","jobs":[]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"jobs":[],"deadline":"2030-01-01T00:00:00Z","id":"wf-1"}"#).unwrap();
        assert_eq!(derived_key(&a), derived_key(&b));
        assert!(derived_key(&a).starts_with("cli-wf-1-"), "{}", derived_key(&a));
        let mut c = a.clone();
        c["deadline"] = json!("2030-01-02T00:00:00Z");
        assert_ne!(derived_key(&a), derived_key(&c));
        let k = derived_key(&json!({"id": "é \u{1}x".repeat(100)}));
        assert!(k.len() <= 255 && k.chars().all(|c| c.is_ascii_graphic()), "{k}");
    }

    #[test]
    fn prices_are_rounded() {
        assert_eq!(amount(&json!(0.1 + 0.2)), "0.3");
        assert_eq!(amount(&json!(1.0)), "1");
        assert_eq!(amount(&json!(2.125)), "2.125");
        assert_eq!(amount(&json!(0.00001)), "0");
    }

    #[test]
    fn paths_are_encoded_segment_by_segment() {
        let conn = Connection { server: "http://h:1/base/".into(), token: None, output: Output::Table, json: false };
        let c = Client::new(&conn).unwrap();
        let u = c.url(&["v1", "plans", "../plans?status=committed"], &[]).unwrap();
        assert_eq!(u.as_str(), "http://h:1/base/v1/plans/..%2Fplans%3Fstatus=committed");
    }

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
}
