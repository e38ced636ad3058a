//! The `coreserve serve` processes of a round: all-in-one, or one per role (a LIS per site,
//! the NIS, the GIS and a planner). Public: the simulator's validation against the service
//! (`coreserve-sim --validate`) deploys the service with it too.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use coreserve::model::Grid;

/// `coreserve serve` processes on one database; killed when dropped.
pub struct Procs {
    /// The `coreserve` executable.
    bin: PathBuf,
    /// `DATABASE_URL` of every process.
    db: String,
    /// `--admin-token`, `--service-token` and the flags every process gets.
    args: Vec<String>,
    procs: Vec<(String, Child)>,
    /// Log lines that look like trouble (warnings, errors, failed participant calls).
    pub problems: Arc<AtomicUsize>,
}

impl Drop for Procs {
    fn drop(&mut self) {
        // Last started first: a planner goes before its participants (so it does not log the
        // failed calls of plans still in flight to participants already gone).
        for (_, c) in self.procs.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Procs {
    /// No process yet: each will run `bin serve` on `db` with these tokens and `common` flags
    /// (e.g. `--w-interval-s`, `--method`).
    pub fn new(bin: &Path, db: &str, admin: &str, service: &str, common: &[String]) -> Self {
        let mut args = vec!["--admin-token".to_owned(), admin.to_owned(), "--service-token".into(), service.into()];
        args.extend_from_slice(common);
        Procs {
            bin: bin.to_owned(),
            db: db.to_owned(),
            args,
            procs: Vec::new(),
            problems: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Starts `coreserve serve ARGS` on a free port and returns its base URL (from the start
    /// line on stderr, printed once the listener is bound).
    fn serve(&mut self, label: &str, args: &[String]) -> Result<String> {
        let mut child = Command::new(&self.bin)
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(&self.args)
            .args(args)
            .env("DATABASE_URL", &self.db)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", self.bin.display()))?;
        let stderr = child.stderr.take().expect("piped stderr");
        self.procs.push((label.to_owned(), child));
        let (tx, rx) = std::sync::mpsc::channel();
        let (label, problems) = (label.to_owned(), self.problems.clone());
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            let mut shown = 0;
            // Keep draining stderr so the child never blocks on a full pipe.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(i) = line.find(" on http://") {
                    let url = line[i + 4..].split_whitespace().next().unwrap_or_default().to_owned();
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(url);
                    }
                    continue;
                }
                let trouble = ["WARN", "ERROR", "panicked", "failed"].iter().any(|w| line.contains(w));
                if trouble {
                    problems.fetch_add(1, Ordering::Relaxed);
                }
                if (trouble || tx.is_some()) && shown < 10 && !line.starts_with("store: postgres") {
                    shown += 1;
                    eprintln!("  [{label}] {line}");
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(60))
            .map_err(|_| anyhow!("`coreserve serve` ({}) did not start", args.join(" ")))
    }

    /// Each process's label and pid.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.procs.iter().map(|(l, c)| (l.clone(), c.id())).collect()
    }
}

/// Waits (30 s at most) until `url/readyz` answers 200.
pub async fn wait_ready(client: &reqwest::Client, url: &str) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = client.get(format!("{url}/readyz")).send().await {
            if r.status().is_success() {
                return Ok(());
            }
        }
        if Instant::now() > until {
            bail!("{url}/readyz did not answer 200 within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The two deployments.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One process with every role.
    AllInOne,
    /// A LIS per site, the NIS, the GIS and one planner, each a process.
    Roles,
}

impl Mode {
    /// `all-in-one` or `role-separated`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::AllInOne => "all-in-one",
            Mode::Roles => "role-separated",
        }
    }
}

impl Procs {
    /// Starts the deployment of `grid` (saved at `grid_path`) and returns the URL of its
    /// planner (or of the all-in-one process).
    ///
    /// # Errors
    /// A process does not start (its first lines are printed) or the path is not UTF-8.
    pub fn deploy(&mut self, mode: Mode, grid: &Grid, grid_path: &Path) -> Result<String> {
        self.deploy_via(mode, grid, grid_path, |_, url| Ok(url.to_owned()))
    }

    /// [`Procs::deploy`], with the planner of [`Mode::Roles`] reaching each participant (every
    /// LIS, the NIS, the GIS) at the URL `via(label, url)` returns for it instead of its own
    /// (e.g. a [`crate::delay::DelayProxy`] in front of it); `label` is `lis SITE`, `nis` or
    /// `gis`. All-in-one has no participant to reach: `via` is not called.
    ///
    /// # Errors
    /// A process does not start, `via` fails, or the path is not UTF-8.
    pub fn deploy_via(
        &mut self,
        mode: Mode,
        grid: &Grid,
        grid_path: &Path,
        mut via: impl FnMut(&str, &str) -> Result<String>,
    ) -> Result<String> {
        let path = grid_path.to_str().context("grid path")?.to_owned();
        let with_grid = |role: &[&str]| -> Vec<String> {
            role.iter().map(|a| a.to_string()).chain(["--grid".to_owned(), path.clone()]).collect()
        };
        match mode {
            Mode::AllInOne => self.serve("all", &with_grid(&[])),
            Mode::Roles => {
                let mut planner = vec!["--role".to_owned(), "planner".into()];
                for s in grid.sites() {
                    let label = format!("lis {}", s.id);
                    let u = self.serve(&label, &with_grid(&["--role", "lis", "--site", &s.id]))?;
                    planner.extend(["--lis".to_owned(), format!("{}={}", s.id, via(&label, &u)?)]);
                }
                let nis = self.serve("nis", &with_grid(&["--role", "nis"]))?;
                let gis = self.serve("gis", &with_grid(&["--role", "gis"]))?;
                planner.extend(["--nis".to_owned(), via("nis", &nis)?, "--gis".into(), via("gis", &gis)?]);
                self.serve("planner", &planner)
            }
        }
    }
}
