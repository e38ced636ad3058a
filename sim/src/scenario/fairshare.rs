//! The `[fairshare]` table of a scenario (`experiment = "fairshare"`, `crate::fairshare`): the
//! two projects' set-up, the run's span and the arms to run.

use std::fmt;

use anyhow::{bail, Result};
use coreserve::fairshare::DAY_S;
use serde::{Deserialize, Serialize, Serializer};

/// How requests are taken: the arms of the experiment (`crate::fairshare`'s module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arm {
    /// First come, first served (`fair_share: None`).
    Fcfs,
    /// Planned-Use priority in admission windows, and the allocation limit.
    PlannedUse,
    /// The priority only: both allocations allow `overdraft`.
    PlannedUseNoLimit,
    /// As `planned-use` with allocation periods of one day (the same pace): the limit as a cap
    /// on each day's bookings.
    PlannedUseDaily,
    /// The paper's baselines: priority from exponentially decayed usage (`p = -u`, the same
    /// decay), no allocation limit. A newly active project comes first.
    DecayExponential,
    /// Priority from linearly decayed usage over `linear_window_days`, no allocation limit.
    DecayLinear,
}

impl Arm {
    /// Every arm, in the order of the tables.
    pub const ALL: [Arm; 6] = [
        Arm::Fcfs,
        Arm::PlannedUse,
        Arm::PlannedUseNoLimit,
        Arm::PlannedUseDaily,
        Arm::DecayExponential,
        Arm::DecayLinear,
    ];

    /// Whether the arm orders requests by a fair-share priority (all but `fcfs`).
    pub fn has_priority(self) -> bool {
        self != Arm::Fcfs
    }

    /// Whether the arm enforces the allocation limit.
    pub fn has_limit(self) -> bool {
        matches!(self, Arm::PlannedUse | Arm::PlannedUseDaily)
    }
}

impl fmt::Display for Arm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arm::Fcfs => "fcfs",
            Arm::PlannedUse => "planned-use",
            Arm::PlannedUseNoLimit => "planned-use-no-limit",
            Arm::PlannedUseDaily => "planned-use-daily",
            Arm::DecayExponential => "decay-exponential",
            Arm::DecayLinear => "decay-linear",
        })
    }
}

impl Serialize for Arm {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The scenario's `[fairshare]` table (every field optional).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FairShareParams {
    /// Length of the run (arrivals), virtual days. Default 30.
    pub days: f64,
    /// When `flood` starts, days from the run's start (it floods to the end). Default 10.
    pub flood_from_day: f64,
    /// Offered load of `steady` over the whole run: its planned pace. Default 0.4.
    pub steady_load: f64,
    /// Both allocations are `steady_load` x the grid's CPUs x the period, plus this share.
    /// Default 0.2.
    pub margin: f64,
    /// The allocation period, days, from the run's start. Default: the whole run (one
    /// period, the paper's set-up: the flood is a project that saved its allocation).
    pub period_days: Option<f64>,
    /// The planned-use arms' admission window, seconds. Default 600.
    pub window_s: i64,
    /// The arms to run. Default all six.
    pub arms: Vec<Arm>,
    /// `decay-linear`: days after which usage no longer counts. Default 15 (the paper's decay
    /// forgets 90 % of usage in 15 days).
    pub linear_window_days: f64,
}

impl Default for FairShareParams {
    fn default() -> Self {
        FairShareParams {
            days: 30.0,
            flood_from_day: 10.0,
            steady_load: 0.4,
            margin: 0.2,
            period_days: None,
            window_s: 600,
            arms: Arm::ALL.to_vec(),
            linear_window_days: 15.0,
        }
    }
}

/// Whole seconds of `days` days.
pub fn seconds(days: f64) -> i64 {
    (days * DAY_S as f64).round() as i64
}

impl FairShareParams {
    /// Checks the ranges.
    ///
    /// # Errors
    /// The first field out of range.
    pub fn validate(&self) -> Result<()> {
        if !(self.days.is_finite() && self.days > 0.0 && seconds(self.days) > 0) {
            bail!("days must be > 0");
        }
        if !(self.flood_from_day > 0.0 && self.flood_from_day < self.days) {
            bail!("flood_from_day must be inside the run: 0 < flood_from_day < days ({})", self.days);
        }
        if !(self.steady_load.is_finite() && self.steady_load > 0.0) {
            bail!("steady_load must be > 0");
        }
        if !(self.margin.is_finite() && self.margin >= 0.0) {
            bail!("margin must be >= 0");
        }
        if self.period_days.is_some_and(|p| !(p.is_finite() && seconds(p) > 0)) {
            bail!("period_days must be > 0");
        }
        if self.window_s < 0 {
            bail!("window_s must be >= 0");
        }
        if self.arms.is_empty() {
            bail!("arms must not be empty");
        }
        if !(self.linear_window_days.is_finite() && self.linear_window_days > 0.0) {
            bail!("linear_window_days must be > 0");
        }
        Ok(())
    }

    /// The allocation period, seconds.
    pub fn period_s(&self) -> i64 {
        seconds(self.period_days.unwrap_or(self.days))
    }

    /// CPU-hours per period of `period_s` of either project on a grid of `grid_cpus` CPUs.
    pub fn allocation_cpu_hours(&self, grid_cpus: u64, period_s: i64) -> f64 {
        self.steady_load * grid_cpus as f64 * period_s as f64 / 3600.0 * (1.0 + self.margin)
    }
}
