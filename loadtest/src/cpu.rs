//! CPU accounting from /proc (through procfs): the machine, this process, the `coreserve serve`
//! processes by role and every `postgres` process, in cores over a window.

use procfs::process::Process;
use procfs::{CurrentSI, KernelStats};

#[derive(Clone, Default)]
pub(crate) struct CpuSnap {
    /// Machine-wide busy and total ticks (/proc/stat).
    pub(crate) busy: u64,
    pub(crate) total: u64,
    /// This process (the load generator).
    pub(crate) generator: u64,
    /// The `coreserve serve` processes, by label.
    pub(crate) servers: Vec<(String, u64)>,
    /// Every `postgres` process.
    pub(crate) postgres: u64,
}

/// Clock ticks per second (`getconf CLK_TCK`), the unit of every counter here.
pub(crate) fn clk_tck() -> f64 {
    procfs::ticks_per_second() as f64
}

/// utime + stime of a process (every thread), in ticks.
fn proc_ticks(p: &Process) -> Option<u64> {
    p.stat().ok().map(|s| s.utime + s.stime)
}

pub(crate) fn snapshot(servers: &[(String, u32)]) -> CpuSnap {
    let mut s = CpuSnap::default();
    if let Ok(k) = KernelStats::current() {
        // guest time is inside user time
        let t = k.total;
        s.busy = t.user + t.nice + t.system + t.irq.unwrap_or(0) + t.softirq.unwrap_or(0) + t.steal.unwrap_or(0);
        s.total = s.busy + t.idle + t.iowait.unwrap_or(0);
    }
    s.generator = Process::myself().ok().as_ref().and_then(proc_ticks).unwrap_or(0);
    s.servers = servers
        .iter()
        .map(|(l, pid)| {
            let ticks = i32::try_from(*pid).ok().and_then(|pid| Process::new(pid).ok()).as_ref().and_then(proc_ticks);
            (l.clone(), ticks.unwrap_or(0))
        })
        .collect();
    if let Ok(all) = procfs::process::all_processes() {
        s.postgres = all
            .flatten()
            .filter_map(|p| p.stat().ok())
            .filter(|st| st.comm == "postgres")
            .map(|st| st.utime + st.stime)
            .sum();
    }
    s
}

/// CPU used during a window, in cores (CPU-seconds per second).
#[derive(Clone, Default)]
pub(crate) struct CpuSplit {
    pub(crate) generator: f64,
    /// coreserve processes grouped by role (`all`, `planner`, `lis`, `nis`, `gis`).
    pub(crate) servers: Vec<(String, f64)>,
    pub(crate) postgres: f64,
    /// Busy time of everything else on the machine (another build, the kernel's own threads).
    pub(crate) other: f64,
    pub(crate) idle: f64,
}

impl CpuSplit {
    pub(crate) fn of(a: &CpuSnap, b: &CpuSnap, secs: f64, tck: f64) -> Self {
        let cores = |t: u64| t as f64 / tck / secs;
        let d = |x: u64, y: u64| y.saturating_sub(x);
        let mut servers: Vec<(String, f64)> = Vec::new();
        for ((label, x), (_, y)) in a.servers.iter().zip(&b.servers) {
            let role = label.split_whitespace().next().unwrap_or_default().to_owned();
            match servers.iter_mut().find(|(r, _)| *r == role) {
                Some((_, c)) => *c += cores(d(*x, *y)),
                None => servers.push((role, cores(d(*x, *y)))),
            }
        }
        let (busy, total) = (cores(d(a.busy, b.busy)), cores(d(a.total, b.total)));
        let (generator, postgres) = (cores(d(a.generator, b.generator)), cores(d(a.postgres, b.postgres)));
        let known = generator + postgres + servers.iter().map(|s| s.1).sum::<f64>();
        CpuSplit { generator, servers, postgres, other: (busy - known).max(0.0), idle: (total - busy).max(0.0) }
    }

    pub(crate) fn coreserve(&self) -> f64 {
        self.servers.iter().map(|s| s.1).sum()
    }

    pub(crate) fn describe(&self) -> String {
        let roles: Vec<String> = self.servers.iter().map(|(r, c)| format!("{r} {c:.2}")).collect();
        format!(
            "coreserve {:.2} ({}), PostgreSQL {:.2}, load generator {:.2}, other {:.2}, idle {:.2}",
            self.coreserve(),
            roles.join(", "),
            self.postgres,
            self.generator,
            self.other,
            self.idle
        )
    }
}
