//! Workloads: the SWF trace reader ([`swf`]) and the synthetic plan-request generator
//! ([`generate`](mod@generate)) of the paper's experiment (Ando & Aida, section 4; docs/simulator.md).
//!
//! Typical use: `let cpus = swf::procs_of(&swf::read_swf(path)?);` then
//! `generate(&cpus, grid.total_cpus(), &WorkloadParams::for_kind(AppKind::Coallocation))`, and
//! [`write_jsonl`] to store the requests for the simulator or the CLI.

pub mod generate;
pub mod swf;

pub use generate::{
    generate, model_cpus, parse_jsonl, read_jsonl, write_jsonl, write_jsonl_to, AppKind, CpuModel, RequirementsProfile,
    Shape, WorkloadError, WorkloadParams, DEFAULT_START,
};
pub use swf::{parse_swf, procs_of, read_swf, SwfError, SwfJob};
