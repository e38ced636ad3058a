#![allow(dead_code)] // each bench binary uses part of this module

//! Writes criterion's medians into BENCHMARKS.md: each bench binary owns one section, delimited
//! by `<!-- bench:NAME -->` markers, that is replaced on every run with the machine, the
//! command, the date, the median of every benchmark and its ratio to the named baseline.

use std::path::{Path, PathBuf};

/// Where a figure comes from: a criterion benchmark id (`group/function`, its median), or a
/// median the bench measured itself, in nanoseconds.
pub enum Fig {
    Criterion(&'static str),
    Measured(f64),
}

impl Fig {
    fn ns(&self) -> Option<f64> {
        match self {
            Fig::Criterion(id) => median_ns(id),
            Fig::Measured(ns) => Some(*ns),
        }
    }
}

/// The `q`-quantile (0 < q <= 1) of `sorted` (ascending) by the nearest-rank method: the
/// smallest value with at least `q` of the samples at or below it; NaN for no samples.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// One row: a name, what it is, its median, its baseline's median, and a target, if any.
pub struct Row {
    pub name: &'static str,
    pub what: &'static str,
    pub median: Fig,
    pub baseline: Option<Fig>,
    pub target_ns: Option<f64>,
}

fn criterion_dir() -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    std::env::var("CRITERION_HOME").map(PathBuf::from).unwrap_or_else(|_| Path::new(&target).join("criterion"))
}

/// Median in nanoseconds from criterion's `new/estimates.json` of benchmark `id`.
fn median_ns(id: &str) -> Option<f64> {
    // criterion stores `group/function` as `group/function` with '/' inside the function
    // id replaced by '_'.
    let (group, function) = id.split_once('/').unwrap_or((id, ""));
    let path = criterion_dir().join(group).join(function.replace('/', "_")).join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// The CPU model (from /proc/cpuinfo) and the number of cores.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    format!("{cpu}, {cores} cores")
}

/// The heading of a section: its title, the machine, the command and the date.
pub fn heading(title: &str, command: &str) -> String {
    format!(
        "## {title}\n\n- machine: {}\n- command: `{command}`\n- date: {}\n",
        machine(),
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
    )
}

/// Replaces (or appends) section `name` of BENCHMARKS.md.
pub fn write_section(name: &str, title: &str, command: &str, notes: &str, rows: &[Row]) {
    let mut body = format!(
        "{}\n{notes}\n\n| benchmark | what | median | baseline median | baseline / median | target |\n|---|---|---|---|---|---|\n",
        heading(title, command)
    );
    for r in rows {
        let Some(m) = r.median.ns() else { continue };
        let (b, ratio) = match r.baseline.as_ref().and_then(Fig::ns) {
            Some(b) => (fmt_ns(b), format!("{:.1}x", b / m)),
            None => ("-".into(), "-".into()),
        };
        let target = r
            .target_ns
            .map_or("-".to_string(), |t| format!("<= {} {}", fmt_ns(t), if m <= t { "(met)" } else { "(MISSED)" }));
        body.push_str(&format!("| `{}` | {} | {} | {} | {} | {} |\n", r.name, r.what, fmt_ns(m), b, ratio, target));
    }
    write_markdown(name, &body);
}

/// Section `name` of BENCHMARKS.md as it stands (between its markers), if there is one: the
/// previous run's figures, for a bench that compares itself with them.
pub fn read_section(name: &str) -> Option<String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("BENCHMARKS.md")).ok()?;
    let start = text.find(&format!("<!-- bench:{name} -->"))?;
    let end = text[start..].find(&format!("<!-- /bench:{name} -->"))? + start;
    Some(text[start..end].to_owned())
}

/// Replaces (or appends) section `name` of BENCHMARKS.md with `body` (markdown ending in a
/// newline; the `<!-- bench:NAME -->` markers are added here).
pub fn write_markdown(name: &str, body: &str) {
    let body = format!("<!-- bench:{name} -->\n{body}<!-- /bench:{name} -->\n");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("BENCHMARKS.md");
    let old = std::fs::read_to_string(&path).unwrap_or_else(|_| "# Benchmarks\n\nFigures written by the bench binaries themselves (`cargo bench`); medians from criterion.\n".into());
    let (start, end) = (format!("<!-- bench:{name} -->"), format!("<!-- /bench:{name} -->\n"));
    let new = match (old.find(&start), old.find(&end)) {
        (Some(s), Some(e)) => format!("{}{}{}", &old[..s], body, &old[e + end.len()..]),
        _ => format!("{}\n{}", old.trim_end(), body),
    };
    std::fs::write(&path, new).expect("write BENCHMARKS.md");
}
