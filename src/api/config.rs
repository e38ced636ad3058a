//! Configuration of `coreserve serve` (the CLI fills it; tests build it directly).

use crate::model::{ReservationMethod, SelectionPolicy};
use crate::nis::Routing;

/// At most this many jobs in one plan request.
pub const MAX_JOBS: usize = 64;
/// At most this many transfers in one plan request.
pub const MAX_TRANSFERS: usize = 256;
/// Default of [`ServeConfig::claim_lease_s`]: a stalled or dead process's claims are taken
/// over within this many seconds (plus one renewal period).
pub const DEFAULT_CLAIM_LEASE_S: i64 = 8;
/// Default of [`ServeConfig::max_in_flight_per_user`].
pub const DEFAULT_MAX_IN_FLIGHT_PER_USER: usize = 8;
/// Default of [`ServeConfig::planning_slots`].
pub const DEFAULT_PLANNING_SLOTS: usize = 16;
/// Largest accepted request body (bytes); larger bodies get 413.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// What one `coreserve serve` process does (role-separated deployment; see the README).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Role {
    /// Everything in one process: GIS, every LIS, the NIS and the planners (the default).
    #[default]
    All,
    /// The LIS of one site: `/v1/sites/...` for that site, `/v1/holds/...` and the participant
    /// endpoints under `/v1/participant/sites/{site}`.
    Lis { site: String },
    /// The NIS: `/v1/network...`, `/v1/holds/...` and `/v1/participant/network/...`.
    Nis,
    /// The GIS: `GET /v1/sites[/{id}]` and `POST /v1/participant/gis/candidates`.
    Gis,
    /// Planners only: `/v1/plans...` and `/v1/tokens`, over remote participants.
    Planner(RemoteServices),
}

/// Where a planner process finds its participants (base URLs such as `http://host:port`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteServices {
    /// The GIS.
    pub gis: String,
    /// The NIS.
    pub nis: String,
    /// The LIS of every site, by site id.
    pub lis: Vec<(String, String)>,
}

/// Every setting of the service.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address to listen on; port 0 picks a free port (tests).
    pub listen: String,
    /// Planners in the pool (each request goes to the least busy one).
    pub planners: usize,
    /// Hold lease in seconds.
    pub lease_s: i64,
    /// The planners' `w_interval`: plans start no earlier than receipt + this.
    pub w_interval_s: i64,
    /// Default selection policy (a request may name its own).
    pub policy: SelectionPolicy,
    /// Default reservation method (a request may name its own).
    pub mode: ReservationMethod,
    /// NIS routing.
    pub routing: Routing,
    /// Every timestamp of a request must lie within this many days of now (422 otherwise).
    pub horizon_days: i64,
    /// The admin token; `None`: one is generated at start and printed once.
    pub admin_token: Option<String>,
    /// actix worker threads (`None`: one per core).
    pub workers: Option<usize>,
    /// This process's role (default: all in one).
    pub role: Role,
    /// Seconds an idempotency key's or a decided transaction's claim lives without renewal:
    /// another process takes over the work of a process that stopped renewing after this long
    /// (renewed every quarter of it).
    pub claim_lease_s: i64,
    /// At most this many plan requests plan at the same time, shared fairly between users
    /// (see [`crate::api::fair`]).
    pub planning_slots: usize,
    /// At most this many plan requests of one user in flight (waiting or planning) at once;
    /// one more is answered 429 (see [`crate::api::fair`]).
    pub max_in_flight_per_user: usize,
    /// This process's name in claims (logs, diagnostics); `None`: `ROLE@LISTEN#PID`.
    pub instance: Option<String>,
    /// The token processes of a separated deployment share: participants accept it as a
    /// service token, planners send it to their participants.
    pub service_token: Option<String>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: "127.0.0.1:8080".into(),
            planners: 3,
            lease_s: crate::local::DEFAULT_LEASE_S,
            w_interval_s: 1800,
            policy: SelectionPolicy::Time,
            mode: ReservationMethod::Bir,
            routing: Routing::Shortest,
            horizon_days: 365,
            admin_token: None,
            workers: None,
            role: Role::All,
            claim_lease_s: DEFAULT_CLAIM_LEASE_S,
            instance: None,
            max_in_flight_per_user: DEFAULT_MAX_IN_FLIGHT_PER_USER,
            planning_slots: DEFAULT_PLANNING_SLOTS,
            service_token: None,
        }
    }
}

impl ServeConfig {
    /// The horizon in seconds.
    pub fn horizon_s(&self) -> i64 {
        self.horizon_days.saturating_mul(86_400)
    }
}
