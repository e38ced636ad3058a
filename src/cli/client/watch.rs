//! `coreserve plans watch`: follows the broker's event stream (`GET /v1/events`, Server-Sent
//! Events), one line per event, reconnecting with `Last-Event-ID` after an outage.

use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::Value;

use super::render::text;
use super::{problem_exit, Answer, Client, Connection, Exit, Output, EXIT_UNREACHABLE};

/// `coreserve plans watch`: reads `GET /v1/events` (Server-Sent Events) and prints each event;
/// a dropped stream is opened again 2 s later with `Last-Event-ID`. The first connection that
/// cannot be made is exit 6, a refusal (4xx) exit 4; later outages are waited out.
pub(super) async fn watch(id: Option<&str>, after: Option<i64>, conn: &Connection) -> Result<()> {
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
                        // A job's or transfer's event names its part after the request.
                        let part = event["part"].as_str().map_or(String::new(), |p| format!(" {p}"));
                        outln!(
                            "{}  {:<16} {}  {}{part}{}",
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
                if one_plan && ["plan.completed", "plan.cancelled", "plan.rejected"].iter().any(|t| event["type"] == *t)
                {
                    return Ok(true);
                }
            }
        }
    }
}
