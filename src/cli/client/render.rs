//! How the client shows the server's JSON: values as text (ids, 24-hour UTC times, rounded
//! prices), left-aligned tables, and plans (a summary line, their jobs and transfers). Every
//! line goes through [`outln!`](crate::outln) ([`crate::cli::output`]).

use anyhow::Result;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

use super::{Connection, Output};

/// Prints `v` as pretty JSON (`-o json`).
pub(super) fn print_json(v: &Value) {
    outln!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// An instant as 24-hour UTC, `2026-11-27 09:00`.
pub(super) fn time(v: &Value) -> String {
    v.as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map_or_else(|| "-".into(), |t| t.with_timezone(&Utc).format("%Y-%m-%d %H:%M").to_string())
}

/// A JSON value as a table cell: a string as is, `null` as `-`, anything else as JSON.
pub(super) fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A price or cost, rounded to 4 decimals without trailing zeros (`0.30000000000000004` is
/// `0.3`).
pub(super) fn amount(v: &Value) -> String {
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
pub(super) fn table(header: &[&str], rows: &[Vec<String>]) {
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

/// An instant as RFC 3339 UTC to the second (`2026-11-27T09:00:00Z`), for queries and request
/// bodies.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A plan: a summary line, its jobs and its transfers.
pub(super) fn print_plan(p: &Value) {
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

/// The columns of a list of plans ([`plan_row`]).
pub(super) const PLAN_HEADER: [&str; 8] = ["plan", "request", "user", "status", "start (UTC)", "jobs", "sites", "cost"];

/// The row of [`PLAN_HEADER`] of one plan.
pub(super) fn plan_row(p: &Value) -> Vec<String> {
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
}

/// A list the service answered (a JSON array) as `-o` says: the JSON as it came, one
/// `id(item)` a line, or a table of `header` with one `row(item)` per item.
pub(super) fn print_list(
    conn: &Connection,
    list: &Value,
    id: impl Fn(&Value) -> String,
    header: &[&str],
    row: impl Fn(&Value) -> Vec<String>,
) {
    let items = list.as_array().map(Vec::as_slice).unwrap_or_default();
    match conn.out() {
        Output::Json => print_json(list),
        Output::Ids => items.iter().for_each(|i| outln!("{}", id(i))),
        Output::Table => table(header, &items.iter().map(row).collect::<Vec<_>>()),
    }
}

/// One plan as `-o` says.
pub(super) fn print_one(conn: &Connection, p: &Value) -> Result<()> {
    match conn.out() {
        Output::Json => print_json(p),
        Output::Ids => outln!("{}", text(&p["id"])),
        Output::Table => print_plan(p),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prices_are_rounded() {
        assert_eq!(amount(&json!(0.1 + 0.2)), "0.3");
        assert_eq!(amount(&json!(1.0)), "1");
        assert_eq!(amount(&json!(2.125)), "2.125");
        assert_eq!(amount(&json!(0.00001)), "0");
    }
}
