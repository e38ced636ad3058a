//! Real `coreserve serve` processes for the crash and fault tests: started on a database,
//! optionally with a fault-injection point (`CORESERVE_CRASH_AT`, see
//! `coreserve::protocol::decision::crash_point`), killed with SIGKILL, paused with SIGSTOP.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::ApiClient;

/// The admin token of every process started here.
pub const ADMIN: &str = "proc-admin-token";
/// The service token every process started here shares.
pub const SERVICE: &str = "proc-service-token";
/// The default hold lease (seconds) of the processes started here.
pub const LEASE_S: i64 = 5;

/// How to start one `coreserve serve` process.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// `DATABASE_URL`.
    pub db: String,
    /// `--grid` (absent: the grid saved in the database).
    pub grid: Option<PathBuf>,
    /// Further arguments; `--listen` (default `127.0.0.1:0`), `--lease-s` (default
    /// [`LEASE_S`]) and `--w-interval-s` (default 60) may be among them.
    pub args: Vec<String>,
    /// `CORESERVE_CRASH_AT`.
    pub crash_at: Option<String>,
    /// Append every line of the process's stderr to this file (else print the error lines).
    pub log: Option<PathBuf>,
}

/// One `coreserve serve` process (killed when dropped).
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `coreserve serve ARGS` on database `db` (and `--grid grid` when given), with the
    /// fault-injection point `crash_at`; returns once it listens (its start line). Defaults:
    /// `--workers 2 --w-interval-s 60 --listen 127.0.0.1:0 --lease-s 5`, tokens [`ADMIN`] and
    /// [`SERVICE`].
    pub fn start(db: &str, grid: Option<&Path>, args: &[&str], crash_at: Option<&str>) -> Server {
        Server::launch(&Launch {
            db: db.into(),
            grid: grid.map(Path::to_path_buf),
            args: args.iter().map(|a| a.to_string()).collect(),
            crash_at: crash_at.map(str::to_owned),
            log: None,
        })
    }

    /// Starts the process `l` describes; returns once it listens. Panics if it does not within
    /// 60 s.
    pub fn launch(l: &Launch) -> Server {
        Server::try_launch(l).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Server::launch`], or why the process did not start (it exited or did not listen
    /// within 60 s).
    pub fn try_launch(l: &Launch) -> Result<Server, String> {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_coreserve"));
        cmd.arg("serve").args(["--workers", "2", "--admin-token", ADMIN, "--service-token", SERVICE]);
        // Defaults that `args` may override.
        for (flag, value) in [
            ("--listen", "127.0.0.1:0".to_owned()),
            ("--lease-s", LEASE_S.to_string()),
            ("--w-interval-s", "60".to_owned()),
        ] {
            if !l.args.iter().any(|a| a == flag) {
                cmd.args([flag, &value]);
            }
        }
        cmd.args(&l.args)
            .env("DATABASE_URL", &l.db)
            .env_remove("CORESERVE_CRASH_AT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(g) = &l.grid {
            cmd.arg("--grid").arg(g);
        }
        if let Some(point) = &l.crash_at {
            cmd.env("CORESERVE_CRASH_AT", point);
        }
        let mut child = cmd.spawn().expect("coreserve starts");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        let mut log = l
            .log
            .as_ref()
            .map(|p| std::fs::OpenOptions::new().create(true).append(true).open(p).expect("the process log opens"));
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            // Keep draining stderr so the child never blocks on a full pipe.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) =
                    line.split_whitespace().find(|w| w.starts_with("http://") || w.starts_with("https://"))
                {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(url.to_owned());
                    }
                }
                match &mut log {
                    Some(f) => {
                        let _ = writeln!(f, "{line}");
                    }
                    None if line.contains("ERROR") || line.contains("Error") || line.contains("abort") => {
                        eprintln!("[serve] {line}")
                    }
                    None => {}
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(url) => Ok(Server { child, url }),
            Err(_) => {
                let _ = child.kill();
                let status = child.wait();
                Err(format!("`coreserve serve {}` did not start ({status:?}); log: {:?}", l.args.join(" "), l.log))
            }
        }
    }

    /// A client of this process that keeps no idle connections (processes are killed and
    /// restarted on the same port).
    pub fn api(&self) -> ApiClient {
        coreserve::protocol::http::install_crypto_provider();
        ApiClient::with_client(&self.url, reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap())
    }

    /// `kill -9`.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Waits for the process to die on its own (a fault-injection abort).
    pub fn wait_for_crash(mut self) {
        let status = self.child.wait().unwrap();
        assert!(!status.success(), "the process aborted at its crash point: {status}");
    }

    /// Has the process ended (e.g. aborted at its crash point)?
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Sends `signal` (e.g. `libc::SIGSTOP`, `libc::SIGCONT`) to the process.
    pub fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid");
        // SAFETY: kill(2) on our own child's pid; it has not been waited for, so the pid is
        // still ours.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "kill({pid}, {signal}): {}", std::io::Error::last_os_error());
    }
}
