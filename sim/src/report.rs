//! Simulation outputs: runs.csv, summary.csv and the figures (being written).

/// One simulated run: one topology x kind x algorithm x offered load x seed.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunRow {
    /// Topology name, e.g. `gridg-n`.
    pub topology: String,
    /// `workflow` or `coallocation`.
    pub kind: String,
    /// e.g. `bir-time`, `bbr-overlay-cost`.
    pub algorithm: String,
    /// Offered load of the run's workload.
    pub load: f64,
    pub seed: u64,
    pub requests: u64,
    pub committed: u64,
    /// committed / requests.
    pub success_rate: f64,
    /// Mean over committed plans of cost per CPU-hour (seed 001's "average cost"); 0 when none.
    pub mean_cost: f64,
    /// Participant messages (queries, prepares, commits, aborts, releases) of all plans.
    pub messages: u64,
    /// Holds aborted before commit.
    pub holds_aborted: u64,
    /// Mean virtual planning time per request, seconds.
    pub planning_s_mean: f64,
}
