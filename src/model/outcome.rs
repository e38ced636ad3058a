use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{LinkId, PlanStatus, SiteId, TransferMode};

/// Where and when one job runs.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct JobPlacement {
    pub name: String,
    pub site: SiteId,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub cpus: u32,
    /// GPUs reserved with the CPUs (absent: none).
    pub gpus: Option<PoolGpus>,
    /// At a site whose LIS fronts Slurm: the job's Slurm advance reservation, for
    /// `sbatch --reservation=NAME` (absent elsewhere, and before the plan is booked).
    pub reservation_name: Option<String>,
    /// Why the site can no longer honour this job's reservation, once it cannot (the plan is
    /// then `broken`); absent while it is honoured.
    pub broken: Option<String>,
    /// Where the job stands at the service's clock (in the REST API's plans and events; absent
    /// elsewhere, and while the plan is not booked).
    pub state: Option<PartState>,
    /// The site's price of one CPU-hour when the job was booked (what its cost and a
    /// modification's are computed from; 0 and absent on a free site).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub price_per_cpu_hour: f64,
    /// The site's price of one GPU-hour of the job's pool (0 and absent without GPUs).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub price_per_gpu_hour: f64,
    /// The jobs this one starts after: its `after` and the producers of its staged transfers
    /// (absent: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// Seconds of the reservation after the job's run time, for an engine that starts it
    /// late (absent: 0).
    #[serde(default, skip_serializing_if = "super::is_zero_s")]
    pub slack_s: i64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl JobPlacement {
    /// What the job costs: `duration_s/3600 * (cpus * price_per_cpu_hour + gpus *
    /// price_per_gpu_hour)`.
    pub fn cost(&self) -> f64 {
        let gpus = self.gpus.as_ref().map_or(0, |g| g.count);
        let hours = (self.end - self.start).num_seconds() as f64 / 3600.0;
        hours * (f64::from(self.cpus) * self.price_per_cpu_hour + f64::from(gpus) * self.price_per_gpu_hour)
    }
}

/// Where one job or transfer of a booked plan stands at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PartState {
    /// Booked; its start has not come.
    Scheduled,
    /// Between its start and its end.
    Running,
    /// Its end has passed.
    Ended,
    /// Its participant can no longer honour its reservation (`broken` says why).
    Broken,
    /// Its plan was cancelled.
    Cancelled,
}

impl PartState {
    /// The state at `now` of a part from `start` to `end`, `broken` or not, of a plan that is
    /// `cancelled` or not.
    pub fn at(
        now: DateTime<Utc>,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        broken: bool,
        cancelled: bool,
    ) -> PartState {
        if cancelled {
            PartState::Cancelled
        } else if broken {
            PartState::Broken
        } else if now < start {
            PartState::Scheduled
        } else if now < end {
            PartState::Running
        } else {
            PartState::Ended
        }
    }
}

/// GPUs of one pool of a site, reserved with a job's CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PoolGpus {
    /// The pool's model, as the site names it.
    pub model: String,
    /// How many GPUs, > 0.
    pub count: u32,
}

/// The bandwidth reservation of one transfer. `path` is empty when both jobs share a node
/// (no network reservation is needed).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TransferPlacement {
    pub from: String,
    pub to: String,
    pub path: Vec<LinkId>,
    pub bandwidth_mbps: u64,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// When the NIS programs a data plane: how it recognises this transfer's traffic (send it
    /// so, and it gets `bandwidth_mbps` from `start` to `end`); absent otherwise.
    pub traffic: Option<TransferTraffic>,
    /// Why the network can no longer honour this transfer's guaranteed rate, once it cannot
    /// (the plan is then `broken`); absent while it is honoured.
    pub broken: Option<String>,
    /// Where the transfer stands at the service's clock (as a job's `state`).
    pub state: Option<PartState>,
    /// The path's price of one Gbit/s-hour when the transfer was booked (0 and absent on a
    /// free path or none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub price_per_gbps_hour: f64,
    /// `staged` for a transfer between its producer's end and its consumer's start (absent:
    /// `concurrent`, inside both jobs).
    #[serde(default, skip_serializing_if = "TransferMode::is_concurrent")]
    pub mode: TransferMode,
}

impl TransferPlacement {
    /// What the transfer costs: `bandwidth_mbps/1000 * duration_s/3600 * price_per_gbps_hour`.
    pub fn cost(&self) -> f64 {
        self.bandwidth_mbps as f64 / 1000.0 * (self.end - self.start).num_seconds() as f64 / 3600.0
            * self.price_per_gbps_hour
    }
}

/// The traffic of one transfer as the NIS's data plane recognises it: TCP from `from_addr` to
/// `to_addr`, destination port `port` (the receiver listens on it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TransferTraffic {
    /// Always `tcp`.
    pub protocol: String,
    /// The sending site's endpoint address.
    pub from_addr: String,
    /// The receiving site's endpoint address.
    pub to_addr: String,
    /// The destination port.
    pub port: u16,
}

/// What became of one plan request (one line of outcomes.jsonl).
///
/// `cost` = sum over jobs of `duration_s/3600 * (cpus * price_per_cpu_hour + gpus *
/// price_per_gpu_hour)` plus sum over
/// transfers of `bandwidth_mbps/1000 * duration_s/3600 * sum(price_per_gbps_hour of its path)`;
/// 0 for a rejected request. `planning_ms` is wall-clock planning time (virtual in the simulator).
///
/// `status` is the planner's (committed, rejected or planned); a plan shown by the REST API
/// carries its stored plan's status instead (any `PlanStatus`).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Outcome {
    /// The request's `id` (the client's reference).
    pub request_id: String,
    pub status: PlanStatus,
    /// Why the request was rejected.
    pub reason: Option<String>,
    /// Application start `st` of a committed plan.
    pub start: Option<DateTime<Utc>>,
    /// The request's deadline, for a committed or planned plan: no modification may end a
    /// part after it.
    pub deadline: Option<DateTime<Utc>>,
    #[serde(default)]
    pub jobs: Vec<JobPlacement>,
    #[serde(default)]
    pub transfers: Vec<TransferPlacement>,
    pub cost: f64,
    pub planning_ms: f64,
    pub planner: String,
    /// Participant messages this plan cost (queries, prepares, commits, aborts).
    #[serde(default)]
    pub messages: u64,
    /// Sequential message rounds this plan cost: its critical path in round trips. Messages
    /// sent together and awaited together (one per site of a batch, the commits of every
    /// participant) count once; the GIS's catalogue counts as one round (it is no participant
    /// message). Across a wide-area network planning time is about `rounds` round trips.
    #[serde(default)]
    pub rounds: u64,
    /// Holds released before commit (backtracks, `st` shifts, failed batches).
    #[serde(default)]
    pub holds_aborted: u64,
    /// What the plan's reservations hold and how much of it the workflow's run times need
    /// (a committed or planned plan; absent on a rejection).
    pub footprint: Option<Footprint>,
}

/// What a plan's reservations hold, against what its jobs need: how much slack and the gaps
/// between dependent jobs cost (docs/model.md, "Workflows").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Footprint {
    /// CPU-seconds the jobs' reservations hold: the sum of `cpus * (end - start)`.
    pub booked_cpu_s: i64,
    /// Of `booked_cpu_s`, those of the jobs' slack: the sum of `cpus * slack_s`.
    pub slack_cpu_s: i64,
    /// Seconds from the first job's start to the last job's end.
    pub makespan_s: i64,
    /// The longest chain of run times (reservation less slack) through the jobs' `after`, in
    /// seconds: the makespan without slack, gaps nor staged transfers. `makespan_s -
    /// critical_path_s` is what they (and waiting for resources) cost the workflow.
    pub critical_path_s: i64,
}

impl Footprint {
    /// The footprint of `jobs` (placements of one plan, with their `after` and `slack_s`).
    pub fn of(jobs: &[JobPlacement]) -> Option<Footprint> {
        let first = jobs.iter().map(|j| j.start).min()?;
        let last = jobs.iter().map(|j| j.end).max()?;
        let run_s = |j: &JobPlacement| (j.end - j.start).num_seconds() - j.slack_s;
        let mut booked_cpu_s = 0;
        let mut slack_cpu_s = 0;
        for j in jobs {
            booked_cpu_s += i64::from(j.cpus) * (j.end - j.start).num_seconds();
            slack_cpu_s += i64::from(j.cpus) * j.slack_s;
        }
        // Longest chain, jobs in start order (a job starts after every job it is after ends).
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by_key(|&i| jobs[i].start);
        let mut chain: std::collections::HashMap<&str, i64> = std::collections::HashMap::new();
        for i in order {
            let j = &jobs[i];
            let before = j.after.iter().filter_map(|p| chain.get(p.as_str())).copied().max().unwrap_or(0);
            chain.insert(&j.name, before + run_s(j));
        }
        let critical_path_s = chain.into_values().max().unwrap_or(0);
        Some(Footprint { booked_cpu_s, slack_cpu_s, makespan_s: (last - first).num_seconds(), critical_path_s })
    }
}

impl Outcome {
    /// A rejection with nothing booked.
    pub fn rejected(request_id: &str, reason: impl Into<String>, planner: &str) -> Self {
        Outcome {
            request_id: request_id.to_owned(),
            status: PlanStatus::Rejected,
            reason: Some(reason.into()),
            start: None,
            deadline: None,
            jobs: vec![],
            transfers: vec![],
            cost: 0.0,
            planning_ms: 0.0,
            planner: planner.to_owned(),
            messages: 0,
            rounds: 0,
            holds_aborted: 0,
            footprint: None,
        }
    }

    /// True when a job or transfer is broken.
    pub fn has_broken_part(&self) -> bool {
        self.jobs.iter().any(|j| j.broken.is_some()) || self.transfers.iter().any(|t| t.broken.is_some())
    }

    /// Copies `other`'s broken marks (each job and transfer by its place in the plan) onto the
    /// parts of this outcome that are not broken yet: the plan as recorded, with what a
    /// coordinator found broken.
    pub fn take_broken_from(&mut self, other: &Outcome) {
        for (to, from) in self.jobs.iter_mut().zip(&other.jobs) {
            to.broken = to.broken.take().or_else(|| from.broken.clone());
        }
        for (to, from) in self.transfers.iter_mut().zip(&other.transfers) {
            to.broken = to.broken.take().or_else(|| from.broken.clone());
        }
    }

    /// `cost` divided by the plan's CPU-hours: the paper's "average cost" (a CPU unit price
    /// per hour). `None` for a rejected plan.
    pub fn average_cost(&self) -> Option<f64> {
        let cpu_hours: f64 =
            self.jobs.iter().map(|j| f64::from(j.cpus) * (j.end - j.start).num_seconds() as f64 / 3600.0).sum();
        (self.status == PlanStatus::Committed && cpu_hours > 0.0).then(|| self.cost / cpu_hours)
    }
}
