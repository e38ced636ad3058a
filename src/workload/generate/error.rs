//! [`WorkloadError`]: why a workload could not be generated, written or read.

use std::io;

use crate::model::RequestError;

/// Why a workload could not be generated, written or read.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The trace's CPU list is empty.
    #[error("the trace has no processor counts")]
    EmptyTrace,
    /// With [`CpuModel::Discard`](super::CpuModel::Discard), no trace value lies in the range.
    #[error("no trace processor count lies in [{min}, {max}]")]
    NoCpusInRange {
        /// Range minimum.
        min: u32,
        /// Range maximum.
        max: u32,
    },
    /// `total_cpus` is 0 (the offered load would be undefined).
    #[error("the grid has no CPUs")]
    ZeroTotalCpus,
    /// A [`WorkloadParams`](super::WorkloadParams) field is out of its domain.
    #[error("workload parameter `{name}`: {reason}")]
    BadParam {
        /// Field name.
        name: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The request graph is unusable for the kind.
    #[error("bad request shape: {0}")]
    BadShape(String),
    /// A generated request failed [`PlanRequest::new`](crate::model::PlanRequest::new) (a generator bug).
    #[error("generated request {id} is invalid: {source}")]
    Invalid {
        /// Request id.
        id: String,
        /// The validation error.
        source: RequestError,
    },
    /// Reading or writing a JSON-lines file failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
    /// A JSON line could not be parsed or is not a valid request.
    #[error("JSON line {line}: {source}")]
    Json {
        /// 1-based line number.
        line: usize,
        /// The parse / validation error.
        source: serde_json::Error,
    },
}
