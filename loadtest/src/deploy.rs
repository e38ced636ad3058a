//! The `coreserve serve` processes of a round: all-in-one, or one per role (a LIS per site,
//! the NIS, the GIS and a planner).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::settings::{HORIZON_DAYS, W_INTERVAL_S};
use crate::workload::Scenario;

/// `coreserve serve` processes of one round; killed when dropped.
pub(crate) struct Procs {
    /// The `coreserve` executable.
    bin: PathBuf,
    procs: Vec<(String, Child)>,
    /// Log lines that look like trouble (warnings, errors, failed participant calls).
    pub(crate) problems: Arc<AtomicUsize>,
}

impl Drop for Procs {
    fn drop(&mut self) {
        for (_, c) in &mut self.procs {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Procs {
    fn new(bin: &Path) -> Self {
        Procs { bin: bin.to_owned(), procs: Vec::new(), problems: Arc::new(AtomicUsize::new(0)) }
    }

    /// Starts `coreserve serve ARGS` on a free port with `DATABASE_URL=db` and returns its base
    /// URL (from the start line on stderr, printed once the listener is bound).
    fn serve(&mut self, label: &str, db: &str, admin: &str, service: &str, args: &[String]) -> Result<String> {
        let mut child = Command::new(&self.bin)
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--admin-token", admin, "--service-token", service])
            .args(["--horizon-days", HORIZON_DAYS, "--w-interval-s", &W_INTERVAL_S.to_string()])
            .args(args)
            .env("DATABASE_URL", db)
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

    pub(crate) fn pids(&self) -> Vec<(String, u32)> {
        self.procs.iter().map(|(l, c)| (l.clone(), c.id())).collect()
    }
}

pub(crate) async fn wait_ready(client: &reqwest::Client, url: &str) -> Result<()> {
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

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    AllInOne,
    Roles,
}

impl Mode {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::AllInOne => "all-in-one",
            Mode::Roles => "role-separated",
        }
    }
}

/// Starts the deployment on database `db` and returns the processes and the planner's URL.
pub(crate) fn deploy(
    bin: &Path,
    mode: Mode,
    sc: &Scenario,
    db: &str,
    admin: &str,
    service: &str,
) -> Result<(Procs, String)> {
    let mut procs = Procs::new(bin);
    let grid = sc.path.to_str().context("grid path")?.to_owned();
    let url = match mode {
        Mode::AllInOne => procs.serve("all", db, admin, service, &["--grid".into(), grid])?,
        Mode::Roles => {
            let mut planner = vec!["--role".to_owned(), "planner".into()];
            for s in sc.grid.sites() {
                let args = ["--role", "lis", "--site", &s.id, "--grid", &grid].map(String::from);
                let u = procs.serve(&format!("lis {}", s.id), db, admin, service, &args)?;
                planner.extend(["--lis".to_owned(), format!("{}={u}", s.id)]);
            }
            let nis = procs.serve("nis", db, admin, service, &["--role", "nis", "--grid", &grid].map(String::from))?;
            let gis = procs.serve("gis", db, admin, service, &["--role", "gis", "--grid", &grid].map(String::from))?;
            planner.extend(["--nis".to_owned(), nis, "--gis".into(), gis]);
            procs.serve("planner", db, admin, service, &planner)?
        }
    };
    Ok((procs, url))
}
