//! [`TestApp`]: the application spawned in process for one test.

use std::ops::Deref;
use std::sync::Arc;

use actix_web::web::Data;
use coreserve::api::{AppState, Application, ServeConfig};
use coreserve::model::Grid;
use coreserve::store::{MemoryStore, PgStore, Store};
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::{grid, in_hours, ApiClient, TestDb};

/// The admin token of every [`TestApp`].
pub const ADMIN: &str = "test-admin-token";

/// The API (all-in-one) in process on 127.0.0.1:0, and a client of it ([`ApiClient`]'s
/// methods and fields through `Deref`). Defaults: 2 planners, one worker, a 60 s W interval,
/// [`ADMIN`] as admin token; constructors with a `tweak` argument let the test change the
/// configuration. The server runs on the test's runtime and stops with it.
pub struct TestApp {
    pub api: ApiClient,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    pub state: Data<AppState>,
    /// The database of [`TestApp::spawn`], dropped with the app; `None` on the memory store or
    /// on a database the app does not own ([`TestApp::on_database`], [`TestApp::restarted`]).
    _db: Option<TestDb>,
    /// The database's URL ([`TestApp::db_url`]).
    db_url: Option<String>,
}

impl Deref for TestApp {
    type Target = ApiClient;
    fn deref(&self) -> &ApiClient {
        &self.api
    }
}

impl TestApp {
    /// Over [`grid`], on a fresh PostgreSQL database ([`TestDb`]).
    pub async fn spawn() -> TestApp {
        TestApp::spawn_with(|_| {}).await
    }

    /// [`TestApp::spawn`] with `tweak` applied to the configuration.
    pub async fn spawn_with(tweak: impl FnOnce(&mut ServeConfig)) -> TestApp {
        let db = TestDb::new().await;
        let mut app = TestApp::on_database(&db.url, tweak).await;
        app._db = Some(db);
        app
    }

    /// Over `grid`, on the memory store.
    pub async fn memory(grid: Grid, tweak: impl FnOnce(&mut ServeConfig)) -> TestApp {
        TestApp::build(grid, Arc::new(MemoryStore::new()), tweak, None).await
    }

    /// Over [`grid`], on the existing database `url` (which it does not drop).
    pub async fn on_database(url: &str, tweak: impl FnOnce(&mut ServeConfig)) -> TestApp {
        let store = Arc::new(PgStore::connect(url).await.unwrap());
        TestApp::build(grid(), store, tweak, Some(url.to_owned())).await
    }

    /// The URL of the database the application runs on.
    pub fn db_url(&self) -> &str {
        self.db_url.as_deref().expect("an application on PostgreSQL")
    }

    /// A second application (default configuration) on this one's database, as a restarted
    /// broker finds it; this one keeps running.
    pub async fn restarted(&self) -> TestApp {
        TestApp::on_database(self.db_url(), |_| {}).await
    }

    async fn build(
        grid: Grid,
        store: Arc<dyn Store>,
        tweak: impl FnOnce(&mut ServeConfig),
        db_url: Option<String>,
    ) -> TestApp {
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
        TestApp { api: ApiClient::new(&format!("http://127.0.0.1:{port}")), port, state, _db: None, db_url }
    }

    /// A new token for `user` (a service principal when `service`), made by the admin.
    pub async fn token(&self, user: &str, service: bool) -> String {
        let r = self.post("/v1/tokens", ADMIN, &json!({"user": user, "service": service})).await;
        assert_eq!(r.status(), StatusCode::CREATED);
        r.json::<Value>().await.unwrap()["token"].as_str().unwrap().to_owned()
    }

    /// Every hold and reservation of `site` over the next two days, as the admin sees them.
    pub async fn reservations(&self, site: &str) -> Vec<Value> {
        self.reservations_as(site, ADMIN).await
    }

    /// Every hold and reservation of `site` over the next two days, as `token` sees them.
    pub async fn reservations_as(&self, site: &str, token: &str) -> Vec<Value> {
        self.site_reservations(site, token, &in_hours(-1), &in_hours(48)).await
    }

    /// How many holds and reservations the sites of [`grid`] have over the next two days.
    pub async fn booked_anywhere(&self) -> usize {
        let mut n = 0;
        for s in ["s1", "s2", "s3"] {
            n += self.reservations(s).await.len();
        }
        n
    }
}
