//! `coreserve plans submit`: requests read one at a time from a file (one JSON document or
//! JSON lines), each sent with its Idempotency-Key ([`derived_key`] by default) and the retry
//! policy of [`super::submit_one`]; one plan printed, or a table of several.

use std::io::{BufRead, IsTerminal, Read};

use anyhow::{bail, Context, Result};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::render::{plan_row, print_json, print_plan, table, text, PLAN_HEADER};
use super::{submit_one, Client, Connection, Exit, Output};

/// The longest request (one JSON document, or one line of JSON lines) `plans submit` reads:
/// four times the server's body limit, so that a file without newlines (`/dev/zero`) fails
/// after 1 MiB instead of filling the memory.
pub const MAX_REQUEST_BYTES: usize = 4 * crate::api::config::MAX_BODY_BYTES;

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

/// `coreserve plans submit`: every request of `file` (`-`: standard input), in order.
pub(super) async fn submit(file: &str, dry_run: bool, key: Option<&str>, conn: &Connection) -> Result<()> {
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
            Output::Table if ok && many => rows.push(plan_row(&answer)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
