//! The settings of `--validate` (`crate::validate`) in a scenario: the table `[validation]`.

/// How the validation runs and judges the service against the simulator.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ValidationParams {
    /// Service runs that calibrate the simulator's service times and are not compared: seeds
    /// `seed_offset + seeds + 1 ..= seed_offset + seeds + calibration_seeds`, every algorithm.
    pub calibration_seeds: u64,
    /// The service's participant processes wait the scenario's `[service_times]` before each
    /// message (`serve --service-times`): the paper's regime of slow messages, where
    /// `w_interval` binds. The simulator's service times are then those ranges shifted by
    /// what the calibration runs measured beyond them (the transport and the participant's
    /// work).
    pub inject_service_times: bool,
    /// The agreement the comparison must show, fixed before it is run (sim/VALIDATION.md).
    pub tolerance: Tolerance,
}

impl Default for ValidationParams {
    fn default() -> Self {
        ValidationParams { calibration_seeds: 2, inject_service_times: false, tolerance: Tolerance::default() }
    }
}

/// Per metric, the largest difference between simulator and service (simulator minus service,
/// paired by seed) that still counts as agreement: a metric agrees when the 95 % confidence
/// interval of its mean paired difference lies within `[-tolerance, +tolerance]`. Relative
/// tolerances are fractions of the service's mean.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Tolerance {
    /// Success rate, absolute.
    pub success_rate: f64,
    /// Average cost per CPU-hour, relative.
    pub cost: f64,
    /// Messages per plan, relative.
    pub messages: f64,
    /// Share of the requests rejected because `w_interval` ran out, absolute.
    pub time_limit_share: f64,
    /// Planning time per plan, relative; 0: reported, not judged.
    pub planning_time: f64,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance { success_rate: 0.05, cost: 0.05, messages: 0.15, time_limit_share: 0.05, planning_time: 0.0 }
    }
}
