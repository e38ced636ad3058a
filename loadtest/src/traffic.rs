//! Per-process socket traffic and the servers' own counters, read at the measured window's
//! ends:
//! - TCP bytes each `coreserve serve` process sent and received: the kernel's per-socket
//!   counters (`tcp_info`'s `bytes_sent`, `bytes_received`, as `ss -tinHOe` prints them),
//!   summed over the sockets the process holds (`/proc/PID/fd`), sampled every
//!   [`SAMPLE_EVERY`] through the window: a socket counts from its value at the window's start
//!   (0 if it opened later) to the last sample that saw it, so a connection that closes inside
//!   the window (an idle keep-alive one the server drops) keeps its bytes but those of its last
//!   moments before a sample. /proc/PID/io's `rchar` and `wchar` would not do: they count
//!   read(2)/write(2) but not recv(2)/send(2), and Rust's standard library reads sockets with
//!   recv(2).
//! - The planner's (or the all-in-one process's) `/metrics`: plans it answered and the
//!   participant calls it made, by participant kind (the requests the LIS and NIS processes
//!   served). `coreserve serve` keeps no total of the HTTP requests a process serves, and none
//!   counts the GIS calls.

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use procfs::process::{FDTarget, Process};

/// TCP counters of one socket: bytes sent and received.
type SocketBytes = (u64, u64);

/// Every TCP socket's counters on this machine, by inode; `None` if `ss` fails.
fn tcp_sockets() -> Option<HashMap<u64, SocketBytes>> {
    let out = Command::new("ss").args(["-tinHOe"]).output().ok().filter(|o| o.status.success())?;
    let mut all = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let (mut ino, mut sent, mut received) = (None, 0, 0);
        for field in line.split_whitespace() {
            let value = |prefix: &str| field.strip_prefix(prefix).and_then(|v| v.parse::<u64>().ok());
            if let Some(v) = value("ino:") {
                ino = Some(v);
            } else if let Some(v) = value("bytes_sent:") {
                sent = v;
            } else if let Some(v) = value("bytes_received:") {
                received = v;
            }
        }
        if let Some(ino) = ino.filter(|i| *i != 0) {
            all.insert(ino, (sent, received));
        }
    }
    Some(all)
}

/// The socket inodes a process holds (empty if it is gone).
fn socket_inodes(pid: u32) -> Vec<u64> {
    let Some(p) = i32::try_from(pid).ok().and_then(|pid| Process::new(pid).ok()) else { return Vec::new() };
    let Ok(fds) = p.fd() else { return Vec::new() };
    fds.flatten()
        .filter_map(|fd| match fd.target {
            FDTarget::Socket(inode) => Some(inode),
            _ => None,
        })
        .collect()
}

/// How often the sockets are sampled during the window.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// Each server's TCP sockets with their counters, in the order of the pids given; `None`
/// without `ss`.
fn socket_snapshot(servers: &[(String, u32)]) -> Option<Vec<HashMap<u64, SocketBytes>>> {
    let all = tcp_sockets()?;
    Some(
        servers
            .iter()
            .map(|(_, pid)| socket_inodes(*pid).into_iter().filter_map(|i| all.get(&i).map(|b| (i, *b))).collect())
            .collect(),
    )
}

/// Samples the servers' sockets from `from` to `to` (blocking: run it on a thread of its own)
/// and returns each server's traffic in between, in the order of `servers`; `None` without
/// `ss`.
pub(crate) fn sample_traffic(servers: &[(String, u32)], from: Instant, to: Instant) -> Option<Vec<Traffic>> {
    std::thread::sleep(from.saturating_duration_since(Instant::now()));
    let start = socket_snapshot(servers)?;
    let mut last = start.clone();
    let mut next = from;
    while next < to {
        next = (next + SAMPLE_EVERY).min(to);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        for (seen, now) in last.iter_mut().zip(socket_snapshot(servers)?) {
            seen.extend(now);
        }
    }
    let end = socket_snapshot(servers)?;
    Some(start.iter().zip(&last).zip(&end).map(|((a, seen), b)| traffic(a, seen, b)).collect())
}

/// What one process's sockets carried during a window.
#[derive(Clone, Copy, Default)]
pub(crate) struct Traffic {
    pub(crate) sent: u64,
    pub(crate) received: u64,
    /// Sockets seen during the window and gone at its end (counted up to their last sample).
    pub(crate) closed: usize,
}

/// One server's bytes from `start` (a socket not in it counts from 0) to the last value `seen`
/// of each socket; the sockets seen but not in `end` closed inside the window.
fn traffic(
    start: &HashMap<u64, SocketBytes>,
    seen: &HashMap<u64, SocketBytes>,
    end: &HashMap<u64, SocketBytes>,
) -> Traffic {
    let mut t = Traffic::default();
    for (ino, (sent, received)) in seen {
        let (s0, r0) = start.get(ino).copied().unwrap_or_default();
        t.sent += sent.saturating_sub(s0);
        t.received += received.saturating_sub(r0);
    }
    t.closed = seen.keys().filter(|i| !end.contains_key(i)).count();
    t
}

/// Counters of a planning process's `/metrics`.
#[derive(Clone, Copy, Default)]
pub(crate) struct Counters {
    /// Plans answered (`coreserve_plans_total`, every status but `cancelled`).
    pub(crate) plans: u64,
    /// Calls to LIS and to the NIS (`coreserve_participant_call_seconds_count`, every message).
    pub(crate) lis_calls: u64,
    pub(crate) nis_calls: u64,
}

impl Counters {
    /// The counters in a Prometheus text exposition.
    pub(crate) fn parse(text: &str) -> Self {
        let mut c = Counters::default();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((name, value)) = line.rsplit_once(' ') else { continue };
            let Ok(v) = value.trim().parse::<f64>() else { continue };
            let v = v as u64;
            if let Some(labels) = name.strip_prefix("coreserve_plans_total{") {
                if !labels.contains("status=\"cancelled\"") {
                    c.plans += v;
                }
            } else if let Some(labels) = name.strip_prefix("coreserve_participant_call_seconds_count{") {
                if labels.contains("participant=\"lis\"") {
                    c.lis_calls += v;
                } else if labels.contains("participant=\"nis\"") {
                    c.nis_calls += v;
                }
            }
        }
        c
    }

    /// `b - self`, counter by counter.
    pub(crate) fn until(&self, b: &Counters) -> Counters {
        Counters {
            plans: b.plans.saturating_sub(self.plans),
            lis_calls: b.lis_calls.saturating_sub(self.lis_calls),
            nis_calls: b.nis_calls.saturating_sub(self.nis_calls),
        }
    }
}

/// GET `url/metrics`.
pub(crate) async fn scrape(client: &reqwest::Client, url: &str) -> Result<Counters> {
    let r = client.get(format!("{url}/metrics")).send().await?;
    if !r.status().is_success() {
        bail!("GET {url}/metrics answered {}", r.status());
    }
    Ok(Counters::parse(&r.text().await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_from_an_exposition() {
        let text = "# TYPE coreserve_plans_total counter\n\
                    coreserve_plans_total{status=\"committed\"} 7\n\
                    coreserve_plans_total{status=\"rejected\"} 2\n\
                    coreserve_plans_total{status=\"cancelled\"} 5\n\
                    coreserve_participant_call_seconds_bucket{participant=\"lis\",message=\"query\",le=\"+Inf\"} 9\n\
                    coreserve_participant_call_seconds_count{participant=\"lis\",message=\"query\"} 9\n\
                    coreserve_participant_call_seconds_count{participant=\"lis\",message=\"commit\"} 3\n\
                    coreserve_participant_call_seconds_count{participant=\"nis\",message=\"prepare\"} 4\n";
        let c = Counters::parse(text);
        assert_eq!((c.plans, c.lis_calls, c.nis_calls), (9, 12, 4));
        let d = Counters::default().until(&c);
        assert_eq!((d.plans, d.lis_calls, d.nis_calls), (9, 12, 4));
    }

    #[test]
    fn traffic_counts_closed_and_new_sockets_from_their_samples() {
        let start = HashMap::from([(1, (100, 10)), (2, (50, 5))]);
        // 2 closed after a last sample at (80, 9); 3 opened inside the window.
        let seen = HashMap::from([(1, (150, 30)), (2, (80, 9)), (3, (7, 1))]);
        let end = HashMap::from([(1, (150, 30)), (3, (7, 1))]);
        let t = traffic(&start, &seen, &end);
        assert_eq!((t.sent, t.received, t.closed), (50 + 30 + 7, 20 + 4 + 1, 1));
    }
}
