//! Domain model: the grid (sites, topology nodes and links), plan requests (compute demands
//! and network demands with a deadline) and plan outcomes.
//!
//! Every type that comes from outside (JSON files, the CLI, later the REST API) is parsed
//! through a checked constructor ("parse, don't validate"): once a [`PlanRequest`] or a
//! [`Grid`] exists, its invariants hold and the rest of the crate relies on them.
//!
//! Times are whole seconds since the Unix epoch ([`Time`]) inside the engine and RFC 3339
//! UTC strings in JSON.

mod attributes;
mod grid;
mod ids;
mod layout;
mod limits;
mod modification;
mod outcome;
mod request;
mod status;
mod text;
mod time;

pub use attributes::{
    unmet, Arch, AttributeError, GpuDemand, GpuPool, Package, Requirements, SiteAttributes, SoftwareRequirement, Unmet,
    Version,
};
pub use grid::{Grid, GridError, Link, Node, Site};
pub(crate) use ids::uuid_id;
pub use ids::{LinkId, NodeId, SiteId};
pub use layout::{Layout, Span};
pub use limits::{price_ok, MAX_AMOUNT, MAX_JOBS, MAX_PRICE, MAX_TRANSFERS};
pub use modification::{JobChange, ModificationError, PlanModification, TransferChange};
pub use outcome::{Footprint, JobPlacement, Outcome, PartState, PoolGpus, TransferPlacement, TransferTraffic};
pub use request::{
    ComputeDemand, NetworkDemand, PlanRequest, RawPlanRequest, RequestError, ReservationMethod, SelectionPolicy,
    TransferMode, MAX_DURATION_S, MAX_OFFSET_S, MAX_SIZE_MB,
};
pub use status::PlanStatus;
pub use text::{check_text, TextError, UnknownValue, MAX_TEXT_CHARS};
pub(crate) use time::is_zero_s;
pub use time::{from_time, rfc3339, to_time, Time};
