//! JSON-lines files of plan requests: one raw request object per line, the format the
//! simulator and the CLI read.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use super::WorkloadError;
use crate::model::PlanRequest;

/// Writes requests as JSON lines (one raw request object per line, the format
/// [`read_jsonl`] and the CLI read) to any writer.
///
/// # Errors
/// [`WorkloadError::Io`] if writing fails.
pub fn write_jsonl_to<W: Write>(reqs: &[PlanRequest], mut w: W) -> Result<(), WorkloadError> {
    let io_err = |source| WorkloadError::Io { context: "writing JSON lines".into(), source };
    for r in reqs {
        serde_json::to_writer(&mut w, r).map_err(|e| io_err(io::Error::other(e)))?;
        w.write_all(b"\n").map_err(io_err)?;
    }
    w.flush().map_err(io_err)
}

/// Writes requests to `path` as JSON lines (creating or truncating the file).
///
/// # Errors
/// [`WorkloadError::Io`] (with the path) if the file cannot be created or written.
pub fn write_jsonl(reqs: &[PlanRequest], path: &Path) -> Result<(), WorkloadError> {
    let file = File::create(path)
        .map_err(|source| WorkloadError::Io { context: format!("cannot create {}", path.display()), source })?;
    write_jsonl_to(reqs, BufWriter::new(file)).map_err(|e| match e {
        WorkloadError::Io { source, .. } => {
            WorkloadError::Io { context: format!("writing {}", path.display()), source }
        }
        other => other,
    })
}

/// Parses JSON lines of requests from a reader; blank lines are skipped; every request is
/// validated ([`PlanRequest::new`]).
///
/// # Errors
/// [`WorkloadError::Json`] with the 1-based line number of the first bad line;
/// [`WorkloadError::Io`] if reading fails.
pub fn parse_jsonl<R: BufRead>(reader: R) -> Result<Vec<PlanRequest>, WorkloadError> {
    let mut out = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|source| WorkloadError::Io { context: format!("reading line {}", i + 1), source })?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(serde_json::from_str(&line).map_err(|source| WorkloadError::Json { line: i + 1, source })?);
    }
    Ok(out)
}

/// Reads a JSON-lines request file written by [`write_jsonl`] (or by hand).
///
/// # Errors
/// As [`parse_jsonl`]; [`WorkloadError::Io`] names the path.
pub fn read_jsonl(path: &Path) -> Result<Vec<PlanRequest>, WorkloadError> {
    let file = File::open(path)
        .map_err(|source| WorkloadError::Io { context: format!("cannot open {}", path.display()), source })?;
    parse_jsonl(BufReader::new(file)).map_err(|e| match e {
        WorkloadError::Io { context, source } => {
            WorkloadError::Io { context: format!("{}: {context}", path.display()), source }
        }
        other => other,
    })
}
