//! PostgreSQL: a fresh database per round (all dropped at the end), the server's description,
//! transaction counters, and pgbench on the same server.

use std::process::Command;
use std::sync::Mutex;

use anyhow::{anyhow, bail, Context, Result};
use sqlx::{Connection, Executor, PgConnection, Row};

/// `server` with its database name replaced by `db`, every other part (user, host, port,
/// query parameters such as `sslmode`) as given: a URL both libpq (pgbench) and sqlx accept.
/// (sqlx's own `to_url_lossy` adds `statement-cache-capacity`, which pgbench refuses.)
fn url_of(server: &str, db: &str) -> String {
    let mut url = url::Url::parse(server).expect("a PostgreSQL URL");
    url.set_path(&format!("/{db}"));
    url.to_string()
}

/// The databases this run created (all dropped at the end, also after a failure).
pub struct Databases {
    /// The server's URL (any database of it).
    server: String,
    names: Mutex<Vec<String>>,
}

impl Databases {
    /// None yet, on the PostgreSQL server at `server` (a URL).
    pub fn new(server: &str) -> Self {
        Databases { server: server.to_owned(), names: Mutex::new(Vec::new()) }
    }

    async fn admin(&self) -> Result<PgConnection> {
        PgConnection::connect(&self.server).await.with_context(|| {
            format!(
                "PostgreSQL is required and is unreachable at {} \
                 (start it, see .ci/run, or point CORESERVE_TEST_PG at a server)",
                self.server
            )
        })
    }

    /// Creates a fresh database `coreserve_load_<what>_<uuid>` and returns its URL.
    pub async fn create(&self, what: &str) -> Result<String> {
        let name = format!("coreserve_load_{what}_{}", uuid::Uuid::new_v4().simple());
        self.admin().await?.execute(format!("CREATE DATABASE {name}").as_str()).await?;
        self.names.lock().unwrap().push(name.clone());
        Ok(url_of(&self.server, &name))
    }

    /// Drops every database [`Databases::create`] made.
    pub async fn drop_all(&self) -> Result<()> {
        let names = std::mem::take(&mut *self.names.lock().unwrap());
        let mut conn = self.admin().await?;
        for n in names {
            conn.execute(format!("DROP DATABASE IF EXISTS {n} WITH (FORCE)").as_str()).await?;
        }
        Ok(())
    }
}

/// What the PostgreSQL server is and how it commits.
pub(crate) async fn server_info(dbs: &Databases) -> Result<String> {
    async fn show(c: &mut PgConnection, q: &str) -> Result<String> {
        Ok(sqlx::query(q).fetch_one(c).await?.try_get::<String, _>(0)?)
    }
    let mut c = dbs.admin().await?;
    let version = show(&mut c, "SHOW server_version").await?;
    let sync = show(&mut c, "SHOW synchronous_commit").await?;
    let fsync = show(&mut c, "SHOW fsync").await?;
    let version = version.split_whitespace().next().unwrap_or_default().to_owned();
    Ok(format!("PostgreSQL {version} (synchronous_commit {sync}, fsync {fsync})"))
}

/// Transactions committed or rolled back so far in database `name` (pg_stat_database).
pub(crate) async fn xacts(dbs: &Databases, name: &str) -> Result<i64> {
    let row = sqlx::query("SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database WHERE datname = $1")
        .bind(name)
        .fetch_one(&mut dbs.admin().await?)
        .await?;
    Ok(row.try_get(0)?)
}

/// The server's durable work so far, cluster-wide: transaction ids handed out (PostgreSQL gives
/// one to each transaction that writes, and to none that only reads) and WAL flushes to disk
/// (`pg_stat_wal.wal_sync`: one flush commits every transaction waiting for it, so fewer
/// flushes than writing transactions is group commit). Only the measured deployment runs
/// during a window, so the differences are its own.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Durable {
    pub(crate) xids: i64,
    pub(crate) wal_syncs: i64,
}

pub(crate) async fn durable(dbs: &Databases) -> Result<Durable> {
    let row = sqlx::query(
        "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint, (SELECT wal_sync FROM pg_stat_wal)::bigint",
    )
    .fetch_one(&mut dbs.admin().await?)
    .await?;
    Ok(Durable { xids: row.try_get(0)?, wal_syncs: row.try_get(1)? })
}

pub(crate) struct Pgbench {
    pub(crate) tps: f64,
    pub(crate) latency_ms: f64,
    pub(crate) command: String,
}

/// `pgbench -i -s 8`, then tpcb-like with 8 clients on 2 threads, on a database of its own.
pub(crate) async fn pgbench(dbs: &Databases, seconds: u64) -> Result<Pgbench> {
    let url = dbs.create("pgbench").await?;
    let run = |args: &[&str]| -> Result<String> {
        let out = Command::new("pgbench")
            .args(args)
            .arg(&url)
            .output()
            .context("running pgbench (is it installed? Debian: postgresql-client)")?;
        if !out.status.success() {
            bail!("pgbench {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    eprintln!("pgbench: initialising scale 8");
    run(&["-i", "-s", "8", "-q"])?;
    let t = seconds.to_string();
    let args = ["-c", "8", "-j", "2", "-T", t.as_str()];
    eprintln!("pgbench: tpcb-like {} for {seconds} s", args.join(" "));
    let out = run(&args)?;
    let field = |prefix: &str| {
        out.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| anyhow!("no `{prefix}` in pgbench's output:\n{out}"))
    };
    Ok(Pgbench {
        tps: field("tps = ")?,
        latency_ms: field("latency average = ")?,
        command: format!("pgbench -i -s 8; pgbench {}", args.join(" ")),
    })
}
