//! The command-line client of a running broker: `coreserve plans submit|list|show|cancel`,
//! `coreserve sites`, `availability` and `route`, over the REST API v1 (reqwest).
//!
//! Every command takes `--server` (`CORESERVE_URL`, default `http://127.0.0.1:8080`) and
//! `--token` (`CORESERVE_TOKEN`), prints a readable table by default and the server's JSON with
//! `--json`, and prints problem details (RFC 9457) plainly on stderr. Exit codes, for scripts:
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done (a plan committed, or planned by a dry run) |
//! | 1 | the client failed: unreadable file, server unreachable, unexpected answer |
//! | 2 | bad command line (clap) |
//! | 3 | a plan was rejected (no placement before its deadline) |
//! | 4 | the server refused the request (4xx: bad input, unknown id, no permission, conflict) |
//! | 5 | the server could not answer now (5xx, 408, 429, in doubt): retry, with the same key |
//!
//! With several requests (a JSON-lines file) the highest code of any request is the exit code.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Args, Subcommand};
use reqwest::{Method, StatusCode};
use serde_json::Value;

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

/// Exit code: a plan was rejected.
pub const EXIT_REJECTED: u8 = 3;
/// Exit code: the server refused the request (4xx).
pub const EXIT_REFUSED: u8 = 4;
/// Exit code: the server could not answer now (5xx, 408, 429): retry.
pub const EXIT_UNAVAILABLE: u8 = 5;

/// Where the broker is and who calls it.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// The broker's base URL.
    #[arg(long, env = "CORESERVE_URL", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// Bearer token (made by an admin: `POST /v1/tokens` or `coreserve token create`).
    #[arg(long, env = "CORESERVE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Print the server's JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `coreserve plans ...`
#[derive(Debug, Subcommand)]
pub enum PlansCommand {
    /// Plan and book requests: FILE holds one request (JSON) or many (JSON lines); `-` reads
    /// stdin. A request is the REST body of `POST /v1/plans`; `user` and `submitted_at` (as
    /// `coreserve workload` writes them) are dropped, the server takes them from the token and
    /// the time of receipt.
    Submit {
        /// The request file, or `-` for standard input.
        file: String,
        /// Plan only: book and store nothing (status `planned`).
        #[arg(long)]
        dry_run: bool,
        /// Idempotency key (a retry with the same key and body books once). With several
        /// requests, request N gets `KEY-N`. Default: a fresh key per request, so that the
        /// client's own retries (on a dropped connection or 503) never book twice.
        #[arg(long)]
        idempotency_key: Option<String>,
        #[command(flatten)]
        conn: Connection,
    },
    /// The caller's plans (an admin's: everyone's), oldest first.
    List {
        /// Only plans in this status: committed, rejected, cancelled, pending.
        #[arg(long)]
        status: Option<String>,
        /// Plans starting at or after this instant (RFC 3339).
        #[arg(long)]
        from: Option<DateTime<Utc>>,
        /// Plans starting before this instant (RFC 3339).
        #[arg(long)]
        to: Option<DateTime<Utc>>,
        #[command(flatten)]
        conn: Connection,
    },
    /// One plan: its jobs' sites and times, its transfers' paths.
    Show {
        /// The plan's id.
        id: String,
        #[command(flatten)]
        conn: Connection,
    },
    /// Cancel a committed plan: its reservations are released (the plan stays, `cancelled`).
    Cancel {
        /// The plan's id.
        id: String,
        #[command(flatten)]
        conn: Connection,
    },
}

/// `coreserve availability`: the earliest start a site offers.
#[derive(Debug, Args)]
pub struct AvailabilityArgs {
    /// The site.
    pub site: String,
    /// CPUs wanted.
    #[arg(long)]
    pub cpus: u32,
    /// Seconds wanted.
    #[arg(long)]
    pub duration_s: i64,
    /// Window start (RFC 3339; default: now).
    #[arg(long)]
    pub from: Option<DateTime<Utc>>,
    /// Window end: the job must end by then (RFC 3339; default: 7 days after the start).
    #[arg(long)]
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
    #[arg(long)]
    pub bandwidth_mbps: u64,
    /// Interval start (RFC 3339; default: in one hour).
    #[arg(long)]
    pub start: Option<DateTime<Utc>>,
    /// Interval end (RFC 3339; default: one hour after the start).
    #[arg(long)]
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

impl Client {
    fn new(conn: &Connection) -> Result<Client> {
        crate::protocol::http::install_crypto_provider();
        let http =
            reqwest::Client::builder().timeout(Duration::from_secs(120)).build().context("building the HTTP client")?;
        Ok(Client { http, conn: conn.clone() })
    }

    /// Sends one request; transport errors become exit code 1 with the server named.
    async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
        key: Option<&str>,
    ) -> Result<Answer> {
        let base = self.conn.server.trim_end_matches('/');
        let mut url =
            reqwest::Url::parse(&format!("{base}{path}")).with_context(|| format!("--server {base}: not a URL"))?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
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
        let r = rb.send().await.with_context(|| {
            format!("{} did not answer (is the broker running? --server / CORESERVE_URL)", self.conn.server)
        })?;
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
    async fn call(&self, method: Method, path: &str, query: &[(&str, String)]) -> Result<Value> {
        let a = self.send(method, path, query, None, None).await?;
        if a.status.is_success() {
            Ok(a.body)
        } else {
            Err(problem_exit(&a).into())
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
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

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
        println!("{}", s.join("  ").trim_end());
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for r in rows {
        line(r.clone());
    }
}

/// A plan: a summary line, its jobs and its transfers.
fn print_plan(p: &Value) {
    println!(
        "plan {}  request {}  user {}  {}  cost {:.2}  planned in {:.1} ms",
        text(&p["id"]),
        text(&p["request_id"]),
        text(&p["user"]),
        text(&p["status"]).to_uppercase(),
        p["cost"].as_f64().unwrap_or(0.0),
        p["planning_ms"].as_f64().unwrap_or(0.0)
    );
    if let Some(r) = p["reason"].as_str() {
        println!("reason: {r}");
    }
    let jobs: Vec<Vec<String>> = p["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|j| vec![text(&j["name"]), text(&j["site"]), time(&j["start"]), time(&j["end"]), text(&j["cpus"])])
        .collect();
    if !jobs.is_empty() {
        println!();
        table(&["job", "site", "start (UTC)", "end (UTC)", "cpus"], &jobs);
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
        println!();
        table(&["transfer", "path (links)", "mbps", "start (UTC)", "end (UTC)"], &transfers);
    }
}

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
                format!("{:.2}", p["cost"].as_f64().unwrap_or(0.0)),
            ]
        })
        .collect()
}

/// The requests of a submit: one JSON document, or JSON lines.
fn read_requests(file: &str) -> Result<Vec<Value>> {
    let text = if file == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).context("reading standard input")?;
        s
    } else {
        std::fs::read_to_string(PathBuf::from(file)).with_context(|| format!("reading {file}"))?
    };
    let mut requests = match serde_json::from_str::<Value>(&text) {
        Ok(v) => vec![v],
        Err(_) => text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| serde_json::from_str(l).with_context(|| format!("{file}, line {}: not JSON", i + 1)))
            .collect::<Result<Vec<Value>>>()?,
    };
    if requests.is_empty() {
        bail!("{file} holds no request");
    }
    for r in &mut requests {
        if let Value::Object(m) = r {
            m.remove("user");
            m.remove("submitted_at");
        }
    }
    Ok(requests)
}

/// How one submitted request ended: its exit code and the answer, if any.
struct Submitted {
    code: u8,
    answer: Option<Answer>,
    error: Option<String>,
}

/// Submits one request, retrying with the same key on a dropped connection, 503, 429, 408 and
/// 409 (in progress) (up to 5 tries, 1-5 s apart, as `Retry-After` says).
async fn submit_one(c: &Client, body: &Value, key: &str, dry_run: bool) -> Submitted {
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
        let a = c.send(Method::POST, "/v1/plans", &query, Some(body), Some(key)).await;
        let retry = match &a {
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
    match last.expect("at least one try") {
        Err(e) => Submitted { code: 1, answer: None, error: Some(format!("{e:#}")) },
        Ok(a) if a.status.is_success() => {
            let code = if a.body["status"] == "rejected" { EXIT_REJECTED } else { 0 };
            Submitted { code, answer: Some(a), error: None }
        }
        Ok(a) => Submitted { code: code_of(a.status), error: Some(problem_text(&a)), answer: Some(a) },
    }
}

async fn submit(file: &str, dry_run: bool, key: Option<&str>, conn: &Connection) -> Result<()> {
    let requests = read_requests(file)?;
    let c = Client::new(conn)?;
    let many = requests.len() > 1;
    let bar = if many && std::io::stderr().is_terminal() {
        let b = indicatif::ProgressBar::new(requests.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {pos}/{len} requests, {msg} [{elapsed_precise}, ETA {eta}]",
            )
            .expect("a valid template"),
        );
        Some(b)
    } else {
        None
    };
    let (mut worst, mut rows, mut answers) = (0u8, Vec::new(), Vec::new());
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for (i, body) in requests.iter().enumerate() {
        let key = match key {
            Some(k) if many => format!("{k}-{}", i + 1),
            Some(k) => k.to_string(),
            None => uuid::Uuid::new_v4().to_string(),
        };
        let s = submit_one(&c, body, &key, dry_run).await;
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
            let id = body.get("id").map_or_else(|| format!("#{}", i + 1), text);
            eprintln!("error: request {id}: {e}");
        }
        match s.answer {
            Some(a) if a.status.is_success() => {
                if many {
                    rows.extend(plan_rows(std::slice::from_ref(&a.body)));
                } else if !conn.json {
                    print_plan(&a.body);
                }
                answers.push(a.body);
            }
            Some(a) => answers.push(a.body),
            None => answers.push(Value::Null),
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if conn.json {
        if many {
            for a in &answers {
                println!("{a}");
            }
        } else {
            print_json(&answers[0]);
        }
    } else if many {
        table(&["plan", "request", "user", "status", "start (UTC)", "jobs", "sites", "cost"], &rows);
        println!("{}", counts.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", "));
    }
    if worst > 1 {
        return Err(Exit { code: worst, message: String::new() }.into());
    }
    if worst == 1 {
        bail!("some requests got no answer");
    }
    Ok(())
}

/// `coreserve plans ...`
pub async fn plans(cmd: PlansCommand) -> Result<()> {
    match cmd {
        PlansCommand::Submit { file, dry_run, idempotency_key, conn } => {
            submit(&file, dry_run, idempotency_key.as_deref(), &conn).await
        }
        PlansCommand::List { status, from, to, conn } => {
            let mut q = Vec::new();
            if let Some(s) = status {
                q.push(("status", s));
            }
            if let Some(t) = from {
                q.push(("from", rfc3339(t)));
            }
            if let Some(t) = to {
                q.push(("to", rfc3339(t)));
            }
            let v = Client::new(&conn)?.call(Method::GET, "/v1/plans", &q).await?;
            if conn.json {
                print_json(&v);
            } else {
                let plans = v.as_array().cloned().unwrap_or_default();
                table(
                    &["plan", "request", "user", "status", "start (UTC)", "jobs", "sites", "cost"],
                    &plan_rows(&plans),
                );
            }
            Ok(())
        }
        PlansCommand::Show { id, conn } => {
            let v = Client::new(&conn)?.call(Method::GET, &format!("/v1/plans/{id}"), &[]).await?;
            if conn.json {
                print_json(&v);
            } else {
                print_plan(&v);
            }
            Ok(())
        }
        PlansCommand::Cancel { id, conn } => {
            let v = Client::new(&conn)?.call(Method::DELETE, &format!("/v1/plans/{id}"), &[]).await?;
            if conn.json {
                print_json(&v);
            } else {
                println!("plan {} {}", text(&v["id"]), text(&v["status"]));
            }
            Ok(())
        }
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `coreserve sites`: every site with its CPUs, OS, price and network node.
pub async fn sites(conn: Connection) -> Result<()> {
    let v = Client::new(&conn)?.call(Method::GET, "/v1/sites", &[]).await?;
    if conn.json {
        print_json(&v);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = v
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            vec![text(&s["id"]), text(&s["node"]), text(&s["cpus"]), text(&s["os"]), text(&s["price_per_cpu_hour"])]
        })
        .collect();
    table(&["site", "node", "cpus", "os", "price_per_cpu_hour"], &rows);
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
    let v = Client::new(&a.conn)?.call(Method::GET, &format!("/v1/sites/{}/availability", a.site), &q).await?;
    if a.conn.json {
        print_json(&v);
    } else {
        let start =
            if v["earliest_start"].is_null() { "none in the window".to_string() } else { time(&v["earliest_start"]) };
        println!(
            "site {}: earliest start of {} CPUs for {} s: {start}; utilisation {:.1} %; {} per CPU-hour",
            text(&v["site"]),
            a.cpus,
            a.duration_s,
            v["utilisation"].as_f64().unwrap_or(0.0) * 100.0,
            text(&v["price_per_cpu_hour"])
        );
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
    let v = Client::new(&a.conn)?.call(Method::GET, "/v1/network/route", &q).await?;
    if a.conn.json {
        print_json(&v);
        return Ok(());
    }
    match v.get("route").filter(|r| !r.is_null()) {
        Some(r) => {
            let links: Vec<String> = r["links"].as_array().into_iter().flatten().map(text).collect();
            println!(
                "{} -> {}: {} ({} links), {} Mbit/s free, {} per Gbit/s-hour",
                a.from_site,
                a.to_site,
                if links.is_empty() { "same node".to_string() } else { links.join(" ") },
                links.len(),
                text(&r["free_mbps"]),
                text(&r["price_per_gbps_hour"])
            );
            Ok(())
        }
        None => Err(Exit {
            code: EXIT_REJECTED,
            message: format!(
                "no route from {} to {} with {} Mbit/s free over the interval",
                a.from_site, a.to_site, a.bandwidth_mbps
            ),
        }
        .into()),
    }
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
}
