//! The two projects of the fair-share experiment: their names and the ledger of their
//! allocations that each arm plans with.

use std::sync::Arc;

use coreserve::fairshare::{Allocation, FairShareConfig, Ledger, PriorityFunction, Project, DAY_S};
use coreserve::model::{from_time, Time};

use crate::scenario::fairshare::{Arm, FairShareParams};

/// The project that books at its planned pace, and the one that floods.
pub const STEADY: &str = "steady";
pub const FLOOD: &str = "flood";

/// A ledger with both projects as `arm` sets them under `p` (the paper's decay and interval),
/// periods from `start`. `fcfs` gets `planned-use`'s (what its plans would be judged by); the
/// decay arms their priority function and `overdraft` (no limit).
pub fn ledger(p: &FairShareParams, grid_cpus: u64, start: Time, arm: Arm) -> Arc<Ledger> {
    let priority = match arm {
        Arm::DecayExponential => PriorityFunction::ExponentialDecay,
        Arm::DecayLinear => PriorityFunction::LinearDecay { window_days: p.linear_window_days },
        _ => PriorityFunction::PlannedUse,
    };
    let ledger = Ledger::new(FairShareConfig { priority, ..FairShareConfig::default() }, grid_cpus);
    let period_s = if arm == Arm::PlannedUseDaily { DAY_S } else { p.period_s() };
    for id in [STEADY, FLOOD] {
        let allocation = Allocation {
            cpu_hours: p.allocation_cpu_hours(grid_cpus, period_s),
            gpu_hours: None,
            period_s,
            period_start: from_time(start),
            overdraft: arm.has_priority() && !arm.has_limit(),
        };
        ledger
            .set_project(Project { id: id.into(), allocation, members: vec![id.into()] })
            .expect("validated allocations");
    }
    Arc::new(ledger)
}
