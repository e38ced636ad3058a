//! What the integration tests share:
//!
//! - [`TestApp`]: the application spawned in process on 127.0.0.1:0 (a random port), on a fresh
//!   PostgreSQL database of its own ([`TestApp::spawn`]) or on the memory store
//!   ([`TestApp::memory`]), with an [`ApiClient`] for it;
//! - [`ApiClient`]: an HTTP client of one running service (in process or a real process) with
//!   the readers every test uses (plans, reservations, metrics, RFC 9457 [`problem`]s);
//! - [`TestDb`]: a fresh PostgreSQL database, for tests that start processes on it;
//! - [`serve`]: real `coreserve serve` processes (kill -9, SIGSTOP, crash points);
//! - [`cluster`]: a PostgreSQL cluster of a test's own (to stop and start it);
//! - [`machine`]: keeps the multi-process tests apart from other areas and CPU-bound tests;
//! - the small grid and the workflow most tests book on it.
//!
//! PostgreSQL: the server of `CORESERVE_TEST_PG` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`) for [`TestDb`] and [`TestApp`]; the store's
//! pool-level tests use `#[sqlx::test]`, which reads `DATABASE_URL`. `.ci/test`, the project's
//! test command, starts a throwaway cluster and sets both (with `SQLX_OFFLINE=true`, so that
//! the build never asks that database about the store's queries). An unreachable server fails
//! the tests that need it: they are never skipped.

pub mod cluster;
pub mod machine;
pub mod serve;
pub mod slurm;

mod app;
mod db;
mod http;

pub use app::{TestApp, ADMIN};
pub use db::TestDb;
pub use http::{problem, ApiClient};

use chrono::{DateTime, Utc};
use coreserve::model::Grid;
use serde_json::{json, Value};

/// Two nodes joined by one 1 Gbit/s link; two 16-CPU linux sites (one per node) and one 8-CPU
/// bsd site.
pub fn grid() -> Grid {
    serde_json::from_value(json!({
        "nodes": [{"id": "n1", "label": "one"}, {"id": "n2", "label": "two"}],
        "links": [{"id": "l1", "a": "n1", "b": "n2", "capacity_mbps": 1000, "price_per_gbps_hour": 0.1}],
        "sites": [
            {"id": "s1", "node": "n1", "cpus": 16, "os": "linux", "price_per_cpu_hour": 1.0},
            {"id": "s2", "node": "n2", "cpus": 16, "os": "linux", "price_per_cpu_hour": 2.0},
            {"id": "s3", "node": "n2", "cpus": 8, "os": "bsd", "price_per_cpu_hour": 1.5}
        ]
    }))
    .unwrap()
}

/// RFC 3339, whole seconds, `Z`.
pub fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `h` hours from now, as [`ts`].
pub fn in_hours(h: i64) -> String {
    ts(Utc::now() + chrono::Duration::hours(h))
}

/// Two 12-CPU jobs (so they need both linux sites of [`grid`]) and a transfer between them.
pub fn workflow() -> Value {
    json!({
        "id": "wf-1",
        "deadline": in_hours(24),
        "jobs": [
            {"name": "A", "os": "linux", "cpus": 12, "offset_s": 0, "duration_s": 3600},
            {"name": "B", "os": "linux", "cpus": 12, "offset_s": 0, "duration_s": 3600}
        ],
        "transfers": [{"from": "A", "to": "B", "bandwidth_mbps": 500, "offset_s": 0, "duration_s": 600}]
    })
}
