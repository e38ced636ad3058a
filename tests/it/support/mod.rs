//! Fixtures shared by the integration tests (`mod common;`): the small grid and a workflow for
//! it, the application spawned in process, and fresh PostgreSQL databases.
//!
//! PostgreSQL: the server of `CORESERVE_TEST_PG` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`); `.ci/test`, the project's test command,
//! starts a throwaway cluster and sets it unless it is already set. An unreachable server fails
//! the tests that need it: they are never skipped.

// Every test crate compiles its own copy of this module and uses a part of it.
#![allow(dead_code)]

pub mod cluster;
pub mod serve;

use std::future::Future;
use std::sync::Arc;

use actix_web::web::Data;
use chrono::{DateTime, Utc};
use coreserve::api::{AppState, Application, ServeConfig};
use coreserve::model::Grid;
use coreserve::store::Store;
use serde_json::{json, Value};
use sqlx::{Connection, Executor, PgConnection};
use uuid::Uuid;

/// The admin token of every spawned application.
pub const ADMIN: &str = "test-admin-token";

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

/// An application started by [`spawn_app`].
pub struct Spawned {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub state: Data<AppState>,
}

/// Starts the API (all-in-one) over [`grid`] with `store` on 127.0.0.1:0: 2 planners, one
/// worker, a 60 s W interval, [`ADMIN`] as admin token; `tweak` changes the configuration.
pub async fn spawn_app(store: Arc<dyn Store>, tweak: impl FnOnce(&mut ServeConfig)) -> Spawned {
    spawn_app_on(grid(), store, tweak).await
}

/// [`spawn_app`] over another grid.
pub async fn spawn_app_on(grid: Grid, store: Arc<dyn Store>, tweak: impl FnOnce(&mut ServeConfig)) -> Spawned {
    let mut config = ServeConfig {
        listen: "127.0.0.1:0".into(),
        planners: 2,
        w_interval_s: 60,
        admin_token: Some(ADMIN.into()),
        workers: Some(1),
        ..ServeConfig::default()
    };
    tweak(&mut config);
    let app = Application::build(config, grid, store).await.unwrap();
    let (port, state) = (app.port(), app.state());
    tokio::spawn(app.run_until_stopped());
    Spawned { base: format!("http://127.0.0.1:{port}"), state }
}

const DEFAULT_SERVER: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The PostgreSQL server of the tests: `CORESERVE_TEST_PG`, else [`DEFAULT_SERVER`].
fn server_url() -> String {
    std::env::var("CORESERVE_TEST_PG").ok().filter(|u| !u.trim().is_empty()).unwrap_or_else(|| DEFAULT_SERVER.into())
}

/// `server` with its database name replaced by `db`.
fn url_of(server: &str, db: &str) -> String {
    use sqlx::ConnectOptions;
    let options: sqlx::postgres::PgConnectOptions = server.parse().expect("a PostgreSQL URL");
    options.database(db).to_url_lossy().to_string()
}

async fn admin_conn(server: &str) -> PgConnection {
    PgConnection::connect(server).await.unwrap_or_else(|e| {
        panic!(
            "PostgreSQL is required for these tests and is unreachable at {server}: {e}\n\
             run them with .ci/test (it starts a throwaway cluster) or point CORESERVE_TEST_PG at a server"
        )
    })
}

/// A fresh database `test_<uuid>` on [`server_url`], dropped (its connections closed) when
/// this is dropped, also when the test panics.
pub struct FreshDb {
    /// Its URL.
    pub url: String,
    name: String,
}

impl FreshDb {
    pub async fn new() -> FreshDb {
        let server = server_url();
        let name = format!("test_{}", Uuid::new_v4().simple());
        admin_conn(&server).await.execute(format!("CREATE DATABASE {name}").as_str()).await.unwrap();
        FreshDb { url: url_of(&server, &name), name }
    }
}

impl Drop for FreshDb {
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        // Drop may run inside the test's runtime: use a thread with a runtime of its own.
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move { admin_conn(&server_url()).await.execute(sql.as_str()).await.map(|_| ()) })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) && !std::thread::panicking() {
            panic!("could not drop test database {}: {dropped:?}", self.name);
        }
    }
}

/// Runs `test` with the URL of a [`FreshDb`].
pub async fn with_db<F, Fut>(test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    let db = FreshDb::new().await;
    test(db.url.clone()).await;
}
