//! What each role of a deployment used during the measured window: CPU, socket bytes and the
//! requests it served, summed over the role's processes.

use crate::cpu::CpuSnap;
use crate::traffic::{Counters, Traffic};

/// One role's use of the measured window (sums over its processes).
#[derive(Clone)]
pub(crate) struct RoleUsage {
    /// `all`, `planner`, `lis`, `nis` or `gis` (the process labels' first word).
    pub(crate) role: String,
    pub(crate) processes: usize,
    /// CPU time, seconds.
    pub(crate) cpu_s: f64,
    /// Socket bytes (`None` when `ss` is not available).
    pub(crate) traffic: Option<Traffic>,
    /// HTTP requests served: `POST /v1/plans` for `all` and `planner` (its plans counter), the
    /// planner's calls to LIS and to the NIS for `lis` and `nis`; `None` for the GIS, whose
    /// calls nothing counts.
    pub(crate) served: Option<u64>,
}

/// The roles of the servers `a` and `b` hold (in their order of first appearance), with the
/// socket traffic of each server (`traffic`, in the same order) and the planning process's
/// counters over the window.
pub(crate) fn by_role(
    a: &CpuSnap,
    b: &CpuSnap,
    traffic: Option<&[Traffic]>,
    counters: &Counters,
    tck: f64,
) -> Vec<RoleUsage> {
    let mut roles: Vec<RoleUsage> = Vec::new();
    for (i, ((label, x), (_, y))) in a.servers.iter().zip(&b.servers).enumerate() {
        let role = label.split_whitespace().next().unwrap_or_default().to_owned();
        let t = traffic.and_then(|t| t.get(i).copied());
        let cpu_s = y.saturating_sub(*x) as f64 / tck;
        match roles.iter_mut().find(|r| r.role == role) {
            Some(r) => {
                r.processes += 1;
                r.cpu_s += cpu_s;
                if let (Some(sum), Some(t)) = (&mut r.traffic, t) {
                    sum.sent += t.sent;
                    sum.received += t.received;
                    sum.closed += t.closed;
                }
            }
            None => {
                let served = match role.as_str() {
                    "all" | "planner" => Some(counters.plans),
                    "lis" => Some(counters.lis_calls),
                    "nis" => Some(counters.nis_calls),
                    _ => None,
                };
                roles.push(RoleUsage { role, processes: 1, cpu_s, traffic: t, served });
            }
        }
    }
    roles
}
