//! A throwaway PostgreSQL cluster of a test's own (initdb + pg_ctl in a temporary directory, as
//! `.ci/test` starts one), so a test can stop and start it (an outage) without touching the
//! server of `CORESERVE_TEST_PG`. Run as root, the cluster runs as the `postgres` user (initdb
//! refuses root). Without the server binaries the test fails loudly: it is never skipped.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

/// A running cluster on 127.0.0.1:`port` with trust auth, fsync off (tests only); stopped
/// (immediate mode) and its directory deleted when dropped.
pub struct PgCluster {
    dir: PathBuf,
    data: PathBuf,
    bin: PathBuf,
    port: u16,
    as_root: bool,
    /// Server options added to every start (`-c name=value ...`).
    extra: String,
}

/// The directory holding `initdb` and `pg_ctl`: `PATH` first, else the highest
/// `/usr/lib/postgresql/*/bin`. Panics (with what to install) when there is none.
fn pg_bin() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file());
    if let Some(d) = on_path {
        return d;
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
                .filter(|(_, b): &(u32, PathBuf)| b.join("initdb").is_file() && b.join("pg_ctl").is_file())
                .collect()
        })
        .unwrap_or_default();
    versions.sort();
    versions.pop().map(|(_, b)| b).unwrap_or_else(|| {
        panic!(
            "this test starts a PostgreSQL cluster of its own and needs initdb and pg_ctl (on PATH or in \
             /usr/lib/postgresql/*/bin): install the PostgreSQL server (Debian: postgresql)"
        )
    })
}

fn check(what: &str, out: std::io::Result<Output>) -> Output {
    let out = out.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

impl PgCluster {
    /// initdb in a fresh directory under /tmp, then [`PgCluster::start`] on a free port.
    pub fn new() -> PgCluster {
        let bin = pg_bin();
        // SAFETY: geteuid has no preconditions and cannot fail.
        let as_root = unsafe { libc::geteuid() } == 0;
        let dir = tempfile::Builder::new().prefix("coreserve-faults-pg.").tempdir_in("/tmp").unwrap().keep();
        if as_root {
            check("chown postgres", Command::new("chown").args(["postgres:"]).arg(&dir).output());
        }
        let mut cluster = PgCluster { data: dir.join("data"), dir, bin, port: 0, as_root, extra: String::new() };
        let mut initdb = cluster.pg("initdb");
        initdb.arg("-D").arg(&cluster.data).args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        ]);
        check("initdb", initdb.output());
        for _ in 0..10 {
            cluster.port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            if cluster.try_start() {
                return cluster;
            }
        }
        panic!("the test's PostgreSQL cluster did not start:\n{}", cluster.log());
    }

    /// A command of the server's binaries, run as `postgres` when we are root.
    fn pg(&self, tool: &str) -> Command {
        let exe = self.bin.join(tool);
        let mut cmd = if self.as_root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        cmd.current_dir(&self.dir);
        cmd
    }

    fn try_start(&self) -> bool {
        let opts = format!(
            "-p {} -k '{}' -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off {}",
            self.port,
            self.dir.display(),
            self.extra
        );
        let mut cmd = self.pg("pg_ctl");
        cmd.arg("-D")
            .arg(&self.data)
            .arg("-l")
            .arg(self.dir.join("log"))
            .args(["-w", "-t", "60", "-o", &opts, "start"]);
        cmd.output().map(|o| o.status.success()).unwrap_or(false)
    }

    /// Starts the (stopped) cluster again on its port. Panics if it does not come up.
    pub fn start(&self) {
        for _ in 0..5 {
            if self.try_start() {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!("the test's PostgreSQL cluster did not start again:\n{}", self.log());
    }

    /// Stops the cluster at once (`pg_ctl stop -m immediate`: connections are cut as in a crash).
    pub fn stop(&self) {
        let mut cmd = self.pg("pg_ctl");
        cmd.arg("-D").arg(&self.data).args(["-m", "immediate", "-w", "stop"]);
        check("pg_ctl stop", cmd.output());
    }

    /// Stops the cluster and starts it again with the server options `extra` (`-c name=value
    /// ...`) added. Panics if it does not come up.
    pub fn restart_with(&mut self, extra: &str) {
        self.stop();
        self.extra = extra.to_owned();
        self.start();
    }

    /// Writes `contents` to `name` in the cluster's directory, readable by the server only
    /// (owned by `postgres` when we are root; mode 0600, as PostgreSQL wants of a key file);
    /// returns its path.
    pub fn write_private(&self, name: &str, contents: &[u8]) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.join(name);
        std::fs::write(&path, contents).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        if self.as_root {
            check("chown postgres", Command::new("chown").args(["postgres:"]).arg(&path).output());
        }
        path
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `db` (as the `postgres` user).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// The server's log (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        if self.data.join("postmaster.pid").exists() {
            let _ = self.pg("pg_ctl").arg("-D").arg(&self.data).args(["-m", "immediate", "-w", "stop"]).output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
