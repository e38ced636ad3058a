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
//!
//! | module | what |
//! |---|---|
//! | this one | [`Connection`] and the HTTP client: calls, problem details as exit codes, the retry policy |
//! | `plans` | `plans`: its subcommands, `list`, `show`, `cancel` and `modify` |
//! | `submit` | `plans submit`: requests read from a file, their default Idempotency-Key |
//! | `create` | `plans create`: a request from flags |
//! | `watch` | `plans watch`: the event stream followed |
//! | `webhooks` | `webhooks` |
//! | `sites` | `sites`, `availability` and `route` |
//! | `render` | JSON as text: tables, times, prices, plans |

use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use reqwest::{Method, StatusCode};
use serde_json::Value;

use render::text;

mod create;
mod plans;
mod render;
mod sites;
mod submit;
mod watch;
mod webhooks;

pub use create::{book, CreateArgs};
pub use plans::{plans, ModifyArgs, PlansCommand};
pub use render::rfc3339;
pub use sites::{availability, route, sites, AvailabilityArgs, RouteArgs};
pub use submit::{derived_key, MAX_REQUEST_BYTES};
pub use webhooks::{webhooks, WebhooksCommand};

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

/// An HTTP answer: status and body (JSON, or `null`).
struct Answer {
    status: StatusCode,
    body: Value,
    /// `Retry-After`, in seconds.
    retry_after_s: Option<u64>,
}

/// An HTTP client of the broker at [`Connection::server`], with its token.
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
    fn paths_are_encoded_segment_by_segment() {
        let conn = Connection { server: "http://h:1/base/".into(), token: None, output: Output::Table, json: false };
        let c = Client::new(&conn).unwrap();
        let u = c.url(&["v1", "plans", "../plans?status=committed"], &[]).unwrap();
        assert_eq!(u.as_str(), "http://h:1/base/v1/plans/..%2Fplans%3Fstatus=committed");
    }
}
