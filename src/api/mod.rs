//! The broker service: `coreserve serve` (REST API v1 over actix-web).
//!
//! All-in-one mode: one process holds the GIS, every LIS and the NIS ([`InProcessGrid`]), a pool
//! of planners over them, and a [`Store`] for the API's own state (plans, idempotency keys,
//! tokens). Role-separated deployment ([`Role`]): the same code serves one LIS, the NIS, the
//! GIS or only planners (over [`crate::protocol::http`] participants) per process. Layout, one
//! concern per module:
//!
//! | module | what |
//! |---|---|
//! | [`config`] | [`ServeConfig`]: every knob of `serve`, and the request limits |
//! | [`startup`] | [`Application`] from [`Settings`]: opens the store, builds the state, binds the listener, runs the server |
//! | [`state`] | [`AppState`]: participants, planner pool, store, hold registry, metrics; recovery at start |
//! | [`decision_log`] | the planners' decision log over the store (durable two-phase commit) |
//! | [`destinations`] | where webhooks may deliver: public addresses and what an admin allowed (SSRF) |
//! | [`idempotency`] | `Idempotency-Key`: the key, one claim -> next action for create and modify, the one place a key is released; the plans' locks |
//! | [`routes`] | one file per resource: plans, sites (GIS + LIS), network (NIS), holds, participant protocol, tokens, health |
//! | [`extract`] | [`extract::JsonBody`]: JSON object bodies, control characters refused |
//! | [`problem`] | RFC 9457 `application/problem+json` errors and the library-error mapping |
//! | [`auth`] | bearer tokens (only SHA-256 hashes are stored) and the [`Caller`] extractor |
//! | [`body`] | JSON bodies parsed after the caller's role is checked |
//! | [`gateway`] | a planner process as the deployment's entry point: reads of sites and the network forwarded, participants checked at start |
//! | [`fair`] | fair admission to planning: per-user limits, permits shared between users, the lanes |
//! | [`lanes`] | the all-in-one's background lane: a user's requests beside another of theirs plan on all cores but one, as many at once |
//! | [`metrics`] | Prometheus text exposition |
//! | [`middleware`] | around every request: HEAD as GET, panics answered 500, the HTTP histogram and access log, 413/405 as problems |
//! | [`supervisor`] | the background tasks: named, with a period and metrics, stopped on shutdown |
//! | [`webhooks`] | delivery of the plans' events to users' webhooks: signed, in order, at least once |
//! | [`openapi`] | the OpenAPI 3.1 document generated from the handlers (utoipa) |
//!
//! [`InProcessGrid`]: crate::in_process::InProcessGrid
//! [`Store`]: crate::store::Store
//! [`Caller`]: auth::Caller

pub mod auth;
pub mod body;
pub mod config;
pub mod decision_log;
pub mod destinations;
pub mod extract;
pub mod fair;
pub mod gateway;
pub mod idempotency;
pub mod lanes;
pub mod metrics;
pub mod middleware;
pub mod openapi;
pub mod peer;
pub mod problem;
pub mod routes;
pub mod startup;
pub mod state;
pub mod supervisor;
pub mod telemetry;
pub mod webhooks;

pub use config::{RemoteServices, Role, ServeConfig, ServiceClock, DEFAULT_CLAIM_LEASE_S};
pub use startup::{Application, Settings};
pub use state::AppState;
