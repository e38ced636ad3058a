//! Fresh PostgreSQL databases on the server of `CORESERVE_TEST_PG`.

use sqlx::{Connection, Executor, PgConnection};
use uuid::Uuid;

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

/// A fresh, empty database `test_<uuid>` on [`server_url`] (migrations run when a store or a
/// process first connects), dropped (its connections closed) when this is dropped, also when
/// the test panics.
pub struct TestDb {
    /// Its URL.
    pub url: String,
    name: String,
}

impl TestDb {
    pub async fn new() -> TestDb {
        let server = server_url();
        let name = format!("test_{}", Uuid::new_v4().simple());
        admin_conn(&server).await.execute(format!("CREATE DATABASE {name}").as_str()).await.unwrap();
        TestDb { url: url_of(&server, &name), name }
    }
}

impl Drop for TestDb {
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
