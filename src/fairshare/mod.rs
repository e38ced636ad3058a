//! Planned-Use fair share: allocations per project, the usage index, the priority, and the
//! allocation limit (Nakajima, Iwata, Sekizawa, Uno & Yamamoto, *A proposal of a fair-share
//! function based on allocated resource amounts*, section 4, eqs. 11-12; docs/fairshare.md).
//!
//! Every user belongs to one project (by default the project named like the user). A project
//! has an [`Allocation`]: `cpu_hours` (and optionally `gpu_hours`) per period of `period_s`.
//!
//! - **Entitled rate** `R_i = w_i / sum_j w_j * N` CPUs, with `w_i = cpu_hours_i / period_s_i`
//!   the allocation's pace and `N` the grid's CPUs (with equal periods, the paper's
//!   `S_i / sum_j S_j * N`).
//! - **Usage index** `u_i = (1 - D) / (R_i * dt) * sum_m D^m * s_i(n - m)`: time is cut into
//!   intervals `T_m = [m dt, (m + 1) dt)` since the epoch, `n` is the interval holding now, and
//!   `s_i(m)` is the CPU-time (CPU-seconds) of the project's committed jobs that *start* in
//!   `T_m` (the paper's definition: a job counts whole, in the interval where it starts, and
//!   only once it has started: booked in advance, it does not count yet). `D` is the decay per
//!   interval: the paper's 10^(-1/15) per day by default. A project using exactly its rate
//!   converges to `u_i = 1`.
//! - **Priority** `p_i = 0` if `u_i <= 1`, else `1 - u_i` (higher first; ties first come,
//!   first served).
//! - **Allocation limit**: a plan may not take a project past `cpu_hours` (or `gpu_hours`) in
//!   any allocation period its jobs run in, unless the allocation allows `overdraft`. Periods
//!   are `[period_start + k * period_s, ...)`; a job's CPU-hours count in each period by the
//!   part of the job inside it. A project without an allocation is not limited and has an
//!   entitled rate of 0: while it has used nothing its priority is 0, once it has, it is the
//!   lowest (`u_i` infinite).
//!
//! [`Ledger`] keeps the allocations and the committed usage of one planning process; the
//! planner charges a plan to it atomically before deciding to commit (see
//! [`crate::planner::PlanOptions`]).

mod ledger;
#[cfg(test)]
mod tests;

pub use ledger::{Ledger, UsageReport};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::model::{check_text, to_time, JobPlacement, Outcome, Time};

/// One day, seconds: the paper's unit interval `dt`.
pub const DAY_S: i64 = 86_400;

/// The paper's decay per day, `10^(-1/15)`: usage loses 90 % of its weight in 15 days.
pub fn paper_decay_per_day() -> f64 {
    10f64.powf(-1.0 / 15.0)
}

/// Errors of fair-share settings.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FairShareError {
    /// An allocation or setting out of range (the text says which).
    #[error("invalid allocation: {0}")]
    Invalid(String),
}

/// A project's allocation for one period (admin-set).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Allocation {
    /// CPU-hours the project may use per period, >= 0 and finite.
    pub cpu_hours: f64,
    /// GPU-hours per period; absent: GPUs are not limited.
    pub gpu_hours: Option<f64>,
    /// Length of a period, seconds (> 0; default 30 days).
    #[serde(default = "default_period_s")]
    pub period_s: i64,
    /// Where periods are counted from (default: the Unix epoch).
    #[serde(default = "default_period_start")]
    pub period_start: DateTime<Utc>,
    /// May book past the allocation (an admin's exception).
    #[serde(default)]
    pub overdraft: bool,
}

fn default_period_s() -> i64 {
    30 * DAY_S
}

fn default_period_start() -> DateTime<Utc> {
    DateTime::UNIX_EPOCH
}

impl Allocation {
    /// `cpu_hours` per 30-day period from the epoch, no GPU limit, no overdraft.
    pub fn cpu_hours(cpu_hours: f64) -> Self {
        Allocation {
            cpu_hours,
            gpu_hours: None,
            period_s: default_period_s(),
            period_start: default_period_start(),
            overdraft: false,
        }
    }

    /// Checks the ranges.
    ///
    /// # Errors
    /// [`FairShareError::Invalid`] naming the field.
    pub fn validate(&self) -> Result<(), FairShareError> {
        let hours = |name: &str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(FairShareError::Invalid(format!("{name} must be a finite number >= 0, not {v}")))
            }
        };
        hours("cpu_hours", self.cpu_hours)?;
        if let Some(g) = self.gpu_hours {
            hours("gpu_hours", g)?;
        }
        // At most 100 years from a start within years 0-9999: period arithmetic never overflows.
        if !(1..=3_153_600_000).contains(&self.period_s) {
            return Err(FairShareError::Invalid(format!("period_s must be 1 ..= 3153600000, not {}", self.period_s)));
        }
        if !(-62_167_219_200..=253_402_300_799).contains(&to_time(&self.period_start)) {
            return Err(FairShareError::Invalid("period_start must be within the years 0 to 9999".into()));
        }
        Ok(())
    }

    /// The period holding instant `t`: `[start, end)`.
    pub fn period_of(&self, t: Time) -> (Time, Time) {
        let origin = to_time(&self.period_start);
        let k = (t - origin).div_euclid(self.period_s);
        (origin + k * self.period_s, origin + (k + 1) * self.period_s)
    }
}

/// A project: its allocation and its members (users). Users not named by any project form a
/// project of their own, named like them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Project {
    /// 1-128 characters, no control characters.
    pub id: String,
    pub allocation: Allocation,
    /// The users whose plans count against this project (a user is in one project at most:
    /// naming them here moves them).
    #[serde(default)]
    pub members: Vec<String>,
}

impl Project {
    /// Checks the id, the members and the allocation.
    ///
    /// # Errors
    /// [`FairShareError::Invalid`] naming the field.
    pub fn validate(&self) -> Result<(), FairShareError> {
        check_text(&self.id).map_err(|e| FairShareError::Invalid(format!("project id {e}")))?;
        for m in &self.members {
            check_text(m).map_err(|e| FairShareError::Invalid(format!("member `{m}` {e}")))?;
        }
        self.allocation.validate()
    }
}

/// How past usage orders the projects: the paper's Planned-Use priority, or one of the
/// decayed-usage priorities it is compared with (Nakajima et al., section 3), where the
/// project that used least comes first, so a newly active project goes to the top.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum PriorityFunction {
    /// The paper's (eq. 11): `p = 0` up to `u = 1`, then `1 - u` ([`priority`]).
    #[default]
    PlannedUse,
    /// Exponentially decayed usage: `p = -u`, `u` the paper's usage index (the same decay `D`).
    ExponentialDecay,
    /// Linearly decayed usage: a day's usage weighs `max(0, 1 - age / window_days)`, and
    /// `p = -u` with `u` that weighted sum over what the entitled rate would use in the same
    /// weights (1 for a project at its rate) ([`linear_usage_index`]).
    LinearDecay {
        /// Days after which usage no longer counts (> 0).
        window_days: f64,
    },
}

/// Fair-share settings (the paper's operator parameters).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FairShareConfig {
    /// The interval `dt`, seconds (default one day, the paper's).
    pub interval_s: i64,
    /// `D` per day (default 10^(-1/15), the paper's); per interval it is `D^(dt / 1 day)`.
    pub decay_per_day: f64,
    /// The priority from usage (default the paper's).
    pub priority: PriorityFunction,
}

impl Default for FairShareConfig {
    fn default() -> Self {
        FairShareConfig {
            interval_s: DAY_S,
            decay_per_day: paper_decay_per_day(),
            priority: PriorityFunction::PlannedUse,
        }
    }
}

impl FairShareConfig {
    /// `D` per interval `dt`.
    pub fn decay_per_interval(&self) -> f64 {
        self.decay_per_day.powf(self.interval_s as f64 / DAY_S as f64)
    }
}

/// One job's booked resources: CPUs and GPUs over `[start, end)` (Unix seconds; JSON as the
/// store's charges keep it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub start: Time,
    pub end: Time,
    pub cpus: u32,
    pub gpus: u32,
}

impl Usage {
    /// The usage of every job of a committed (or planned) outcome.
    pub fn of_outcome(o: &Outcome) -> Vec<Usage> {
        o.jobs.iter().map(Usage::of_job).collect()
    }

    /// The usage of one placed job.
    pub fn of_job(j: &JobPlacement) -> Usage {
        Usage {
            start: to_time(&j.start),
            end: to_time(&j.end),
            cpus: j.cpus,
            gpus: j.gpus.as_ref().map_or(0, |g| g.count),
        }
    }

    /// CPU-seconds and GPU-seconds inside `[a, b)`.
    pub fn inside(&self, a: Time, b: Time) -> (f64, f64) {
        let s = (self.end.min(b) - self.start.max(a)).max(0) as f64;
        (s * f64::from(self.cpus), s * f64::from(self.gpus))
    }
}

/// The paper's entitled rate `R_i = w_i / sum_j w_j * N` (CPUs); 0 when nothing is allocated.
pub fn entitled_rate(pace: f64, total_pace: f64, grid_cpus: u64) -> f64 {
    if pace <= 0.0 || total_pace <= 0.0 {
        0.0
    } else {
        pace / total_pace * grid_cpus as f64
    }
}

/// The paper's usage index (eq. 12): `(1 - d) / (rate * dt) * sum_m d^m * s(n - m)`, with
/// `per_interval[m] = s(n - m)` in CPU-seconds (the newest first). Infinite when `rate` is 0
/// and something was used; 0 when nothing was.
pub fn usage_index(rate: f64, interval_s: i64, d: f64, per_interval: &[f64]) -> f64 {
    let mut sum = 0.0;
    let mut w = 1.0;
    for s in per_interval {
        sum += w * s;
        w *= d;
    }
    if sum <= 0.0 {
        0.0
    } else if rate <= 0.0 {
        f64::INFINITY
    } else {
        (1.0 - d) / (rate * interval_s as f64) * sum
    }
}

/// The linearly decayed usage index: `sum_m w_m * s(n - m) / (rate * dt * sum_m w_m)` with
/// `w_m = max(0, 1 - m * dt / window_s)` and `per_interval[m] = s(n - m)` in CPU-seconds (the
/// newest first): 1 for a project using exactly `rate` CPUs. Infinite when `rate` is 0 and
/// something was used in the window; 0 when nothing was.
pub fn linear_usage_index(rate: f64, interval_s: i64, window_s: f64, per_interval: &[f64]) -> f64 {
    let weight = |m: usize| (1.0 - m as f64 * interval_s as f64 / window_s).max(0.0);
    let sum: f64 = per_interval.iter().enumerate().map(|(m, s)| weight(m) * s).sum();
    let weights: f64 = (0..).map(weight).take_while(|w| *w > 0.0).sum();
    if sum <= 0.0 {
        0.0
    } else if rate <= 0.0 {
        f64::INFINITY
    } else {
        sum / (rate * interval_s as f64 * weights)
    }
}

/// The paper's priority (eq. 11): 0 up to `u = 1`, then `1 - u` (higher is served first).
pub fn priority(u: f64) -> f64 {
    if u <= 1.0 {
        0.0
    } else {
        1.0 - u
    }
}

/// A plan that would take its project past its allocation (the planner rejects it).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "allocation exceeded: project `{project}` has {booked:.1} of {allocated:.1} {unit} booked in the period from {period_start}; this plan needs {needed:.1} more"
)]
pub struct AllocationExceeded {
    pub project: String,
    pub unit: &'static str,
    pub period_start: DateTime<Utc>,
    pub booked: f64,
    pub allocated: f64,
    pub needed: f64,
}

/// The periods of `a` that `usage` runs in (each once), in order of first use.
pub fn periods_of(a: &Allocation, usage: &[Usage]) -> Vec<(Time, Time)> {
    let mut periods: Vec<(Time, Time)> = Vec::new();
    for u in usage {
        let mut t = u.start;
        while t < u.end {
            let per = a.period_of(t);
            if !periods.contains(&per) {
                periods.push(per);
            }
            t = per.1;
        }
    }
    periods
}

/// The allocation limit: may project `p`, with `booked` already charged, take `usage` too?
/// Checked in every period of `p`'s allocation that `usage` runs in, for CPU-hours and (if
/// limited) GPU-hours; an allocation with `overdraft` always may. What the in-memory
/// [`Ledger`] and the stores' charges ([`crate::store::DecisionStore::record_decision`]) both apply.
///
/// # Errors
/// [`AllocationExceeded`] for the first period and resource that would go over.
pub fn check_limit(p: &Project, booked: &[Usage], usage: &[Usage]) -> Result<(), AllocationExceeded> {
    let a = &p.allocation;
    if a.overdraft {
        return Ok(());
    }
    let sum = |us: &[Usage], ps: Time, pe: Time| {
        us.iter().fold((0.0, 0.0), |(c, g), u| {
            let (uc, ug) = u.inside(ps, pe);
            (c + uc / 3600.0, g + ug / 3600.0)
        })
    };
    for (ps, pe) in periods_of(a, usage) {
        let (booked_c, booked_g) = sum(booked, ps, pe);
        let (need_c, need_g) = sum(usage, ps, pe);
        let over = |unit, booked: f64, allocated: f64, needed: f64| {
            // A millionth of an hour of slack for float sums.
            (needed > 0.0 && booked + needed > allocated + 1e-6).then(|| AllocationExceeded {
                project: p.id.clone(),
                unit,
                period_start: crate::model::from_time(ps),
                booked,
                allocated,
                needed,
            })
        };
        let exceeded = over("CPU-hours", booked_c, a.cpu_hours, need_c)
            .or_else(|| a.gpu_hours.and_then(|g| over("GPU-hours", booked_g, g, need_g)));
        if let Some(e) = exceeded {
            return Err(e);
        }
    }
    Ok(())
}

/// The project `user`'s plans count against, among `projects`: the one whose members name
/// the user, else the one named like the user (which may have no allocation: `None`).
pub fn project_of<'a>(projects: impl IntoIterator<Item = &'a Project>, user: &str) -> (String, Option<&'a Project>) {
    let mut own = None;
    for p in projects {
        if p.members.iter().any(|m| m == user) {
            return (p.id.clone(), Some(p));
        }
        if p.id == user {
            own = Some(p);
        }
    }
    (user.to_owned(), own)
}
