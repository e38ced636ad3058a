use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::attributes::{AttributeError, Requirements};
use super::layout::{self, Layout, Span};
use super::limits::{MAX_AMOUNT, MAX_JOBS, MAX_TRANSFERS};
use super::text::{check_text, TextError, UnknownValue};
use super::time::{to_time, Time};

/// Largest accepted `duration_s` of a job or transfer: 100 years (3,153,600,000 s). With
/// [`MAX_OFFSET_S`] it bounds every offset and end a request can produce, so that adding them
/// to any instant chrono can represent never overflows an `i64` (the planner relies on this).
pub const MAX_DURATION_S: i64 = 100 * 365 * 86_400;
/// Largest accepted `offset_s` of a job or transfer: 100 years, as [`MAX_DURATION_S`].
pub const MAX_OFFSET_S: i64 = MAX_DURATION_S;

/// One job of an application: where it may run and for how long (a vertex of the request graph).
///
/// The same type is the job of the REST body (`POST /v1/plans`) and of workload files; unknown
/// fields are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ComputeDemand {
    /// Job name, unique within the request; 1-128 characters, not blank, no control characters.
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = r"^[^\x00-\x1F\x7F-\x9F]*[^\s\x00-\x1F\x7F-\x9F][^\x00-\x1F\x7F-\x9F]*$"
    )]
    pub name: String,
    /// Required operating system, matched case-insensitively against a site's `os`; 1-128
    /// characters, not blank, no control characters.
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = r"^[^\x00-\x1F\x7F-\x9F]*[^\s\x00-\x1F\x7F-\x9F][^\x00-\x1F\x7F-\x9F]*$"
    )]
    pub os: String,
    /// CPUs to reserve, in `1 ..= MAX_AMOUNT` (2^30).
    #[schema(minimum = 1, maximum = 1073741824)]
    pub cpus: u32,
    /// Start offset in seconds from the application start, in `0 ..= MAX_OFFSET_S`
    /// (3,153,600,000: 100 years). Absent: the planner lays the job out, as early as its
    /// `after` jobs, its staged transfers and `dependency_gap_s` allow (0 without any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 3153600000_i64)]
    pub offset_s: Option<i64>,
    /// Run time in seconds, in `1 ..= MAX_DURATION_S` (3,153,600,000: 100 years); the
    /// reservation lasts `duration_s + slack_s`.
    #[schema(minimum = 1, maximum = 3153600000_i64)]
    pub duration_s: i64,
    /// Names of the jobs that must end (their reservation, slack included) before this one
    /// starts: the workflow's dependencies. Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// Seconds reserved after `duration_s`, so that a job the engine starts late still ends
    /// inside its reservation, in `0 ..= MAX_DURATION_S`. Default: the request's `slack_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 3153600000_i64)]
    pub slack_s: Option<i64>,
    /// What the job requires of its site beyond the OS and CPUs (architecture, extensions,
    /// GPUs, software, labels); a hard filter before any selection policy. Default: nothing.
    #[serde(default, skip_serializing_if = "Requirements::is_empty")]
    pub requires: Requirements,
}

impl ComputeDemand {
    /// A job with no requirement beyond its OS and CPUs.
    pub fn new(name: &str, os: &str, cpus: u32, offset_s: i64, duration_s: i64) -> Self {
        ComputeDemand {
            name: name.to_owned(),
            os: os.to_owned(),
            cpus,
            offset_s: Some(offset_s),
            duration_s,
            after: Vec::new(),
            slack_s: None,
            requires: Requirements::default(),
        }
    }

    /// GPUs the job reserves with its CPUs (0 if none).
    pub fn gpus(&self) -> u32 {
        self.requires.gpu_count()
    }
}

/// One communication between two jobs (an edge of the request graph).
///
/// The same type is the transfer of the REST body and of workload files; unknown fields are
/// refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkDemand {
    /// Name of the sending job.
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = r"^[^\x00-\x1F\x7F-\x9F]*[^\s\x00-\x1F\x7F-\x9F][^\x00-\x1F\x7F-\x9F]*$"
    )]
    pub from: String,
    /// Name of the receiving job (another job).
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = r"^[^\x00-\x1F\x7F-\x9F]*[^\s\x00-\x1F\x7F-\x9F][^\x00-\x1F\x7F-\x9F]*$"
    )]
    pub to: String,
    /// Bandwidth to reserve in Mbit/s, in `1 ..= MAX_AMOUNT` (2^30).
    #[schema(minimum = 1, maximum = 1073741824)]
    pub bandwidth_mbps: u64,
    /// Start offset in seconds from the application start, in `0 ..= MAX_OFFSET_S`.
    /// Concurrent: inside both jobs' reservations (absent: the later of their starts).
    /// Staged: at or after the producer's end (absent: its end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 3153600000_i64)]
    pub offset_s: Option<i64>,
    /// Reservation length in seconds, in `1 ..= MAX_DURATION_S`. Absent: `size_mb * 8 /
    /// bandwidth_mbps`, rounded up (then `size_mb` is required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 3153600000_i64)]
    pub duration_s: Option<i64>,
    /// `concurrent` (default: while both jobs run, Ando & Aida's rule) or `staged` (after the
    /// producer `from` ends and before the consumer `to` starts; implies `to` is after `from`).
    #[serde(default, skip_serializing_if = "TransferMode::is_concurrent")]
    pub mode: TransferMode,
    /// The data to move, in megabytes (10^6 bytes), in `(0, MAX_SIZE_MB]` (10^9: a petabyte):
    /// what sets `duration_s` when it is absent; with it, `duration_s` must be long enough.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(exclusive_minimum = 0, maximum = 1e9)]
    pub size_mb: Option<f64>,
}

/// Largest accepted `size_mb` of a transfer: 10^9 MB, a petabyte.
pub const MAX_SIZE_MB: f64 = 1e9;

impl NetworkDemand {
    /// A concurrent transfer at a fixed offset, for a fixed time.
    pub fn new(from: &str, to: &str, bandwidth_mbps: u64, offset_s: i64, duration_s: i64) -> Self {
        NetworkDemand {
            from: from.to_owned(),
            to: to.to_owned(),
            bandwidth_mbps,
            offset_s: Some(offset_s),
            duration_s: Some(duration_s),
            mode: TransferMode::Concurrent,
            size_mb: None,
        }
    }
}

/// When a transfer runs relative to its two jobs (docs/model.md, "Workflows").
///
/// Text (`Display`, `FromStr`): `concurrent` or `staged`; parsing ignores ASCII case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[derive(Serialize, Deserialize, utoipa::ToSchema)]
#[derive(strum::Display, strum::EnumString, strum::AsRefStr, strum::IntoStaticStr, strum::VariantArray)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase", ascii_case_insensitive)]
#[strum(parse_err_ty = UnknownValue, parse_err_fn = unknown_value::<Self>)]
pub enum TransferMode {
    /// Inside both jobs' reservations: coupled jobs that exchange data while both run (Ando &
    /// Aida's rule).
    #[default]
    Concurrent,
    /// After the producer (`from`) ends and before the consumer (`to`) starts: a workflow's
    /// file, staged from one site to the next.
    Staged,
}

impl TransferMode {
    /// Is this the default mode (what JSON leaves out)?
    pub fn is_concurrent(&self) -> bool {
        *self == TransferMode::Concurrent
    }
}

/// Order in which a vertex's reservation candidates are tried (Ando and Aida, section 3.1; docs/algorithm.md).
///
/// Text (`Display`, `FromStr`, `AsRef<str>`): the JSON spelling, `time`, `cost`, `load` or
/// `random`; parsing ignores ASCII case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[derive(Serialize, Deserialize, utoipa::ToSchema)]
#[derive(strum::Display, strum::EnumString, strum::AsRefStr, strum::IntoStaticStr, strum::VariantArray)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase", ascii_case_insensitive)]
#[strum(parse_err_ty = UnknownValue, parse_err_fn = unknown_value::<Self>)]
pub enum SelectionPolicy {
    /// Earliest feasible start first (the paper's best on success rate).
    #[default]
    Time,
    /// Lowest price per CPU-hour first.
    Cost,
    /// Lowest utilisation of the site over `[t_bgn, deadline]` first.
    Load,
    /// Seeded random order.
    Random,
}

/// How tentative choices are reserved (Ando and Aida, section 3.2; docs/algorithm.md).
///
/// Text (`Display`, `FromStr`, `AsRef<str>`): the JSON spelling, `bbr`, `bir` or
/// `bbr-overlay`; parsing ignores ASCII case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[derive(Serialize, Deserialize, utoipa::ToSchema)]
#[derive(strum::Display, strum::EnumString, strum::AsRefStr, strum::IntoStaticStr, strum::VariantArray)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case", ascii_case_insensitive)]
#[strum(parse_err_ty = UnknownValue, parse_err_fn = unknown_value::<Self>)]
pub enum ReservationMethod {
    /// Backtracking with Batch Reservation: plan first, then one prepare + commit round.
    Bbr,
    /// Backtracking with Incremental Reservation: hold at every tentative fix.
    #[default]
    Bir,
    /// BBR whose planner keeps a local overlay of its own tentative choices and asks every
    /// participant for its demand *plus* what the plan already put there, so a plan cannot
    /// conflict with itself while nothing is held remotely (our step past the paper: it tests
    /// the paper's explanation of why BBR loses).
    BbrOverlay,
}

impl ReservationMethod {
    /// The two methods of Ando & Aida (BBR and BIR).
    pub const PAPER: &'static [ReservationMethod] = &[ReservationMethod::Bbr, ReservationMethod::Bir];
}

/// The error of a text enum's `FromStr` (strum's `EnumString` with `parse_err_fn`): the input,
/// lowercased, and every accepted spelling, e.g. ``unknown value `x`; expected one of: time,
/// cost, load, random`` (the CLI and the simulator show it as is).
fn unknown_value<T: strum::VariantArray + AsRef<str>>(s: &str) -> UnknownValue {
    let names: Vec<&str> = T::VARIANTS.iter().map(AsRef::as_ref).collect();
    UnknownValue::new("value", &s.to_ascii_lowercase(), format!("one of: {}", names.join(", ")))
}

impl SelectionPolicy {
    /// Every variant, in declaration order.
    pub const ALL: &'static [SelectionPolicy] = <Self as strum::VariantArray>::VARIANTS;
}

impl ReservationMethod {
    /// Every variant, in declaration order.
    pub const ALL: &'static [ReservationMethod] = <Self as strum::VariantArray>::VARIANTS;
}

/// Why a plan request was refused before any planning.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RequestError {
    #[error("request id must not be empty")]
    EmptyId,
    #[error("a request needs at least one job")]
    NoJobs,
    #[error("duplicate job name `{0}`")]
    DuplicateJob(String),
    #[error("job `{0}`: cpus must be > 0")]
    ZeroCpus(String),
    #[error("{what}: duration_s must be > 0 (got {value})")]
    NonPositiveDuration { what: String, value: i64 },
    #[error("{what}: offset_s must be >= 0 (got {value})")]
    NegativeOffset { what: String, value: i64 },
    #[error("transfer {from}->{to}: unknown job `{job}`")]
    UnknownJob { from: String, to: String, job: String },
    #[error("transfer {0}->{0}: a transfer must join two different jobs")]
    SelfTransfer(String),
    #[error("transfer {from}->{to}: bandwidth_mbps must be > 0")]
    ZeroBandwidth { from: String, to: String },
    #[error("transfer {from}->{to}: its interval [{offset_s}, {end_s}) s is not inside job `{job}`")]
    TransferOutsideJob { from: String, to: String, job: String, offset_s: i64, end_s: i64 },
    #[error("deadline {deadline} is before the earliest possible end {earliest_end}")]
    DeadlineTooEarly { deadline: DateTime<Utc>, earliest_end: DateTime<Utc> },
    #[error("{what}: {field} must be at most {max} (got {value})")]
    TooLarge { what: String, field: &'static str, value: u64, max: u64 },
    #[error("{field}: {reason}")]
    BadText { field: String, reason: TextError },
    #[error("job `{job}`: {reason}")]
    BadRequirement { job: String, reason: AttributeError },
    #[error("the earliest possible end of the request is beyond the representable time range")]
    TimeOutOfRange,
    #[error("{count} {what}; at most {max} per request")]
    TooMany { what: &'static str, count: usize, max: usize },
    #[error("{what}: {field} must be >= 0 (got {value})")]
    Negative { what: String, field: &'static str, value: i64 },
    #[error("job `{job}`: `after` names unknown job `{after}`")]
    UnknownPredecessor { job: String, after: String },
    #[error("jobs depend on each other in a cycle: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
    #[error("transfer {from}->{to}: give duration_s or size_mb")]
    NoDuration { from: String, to: String },
    #[error("transfer {from}->{to}: size_mb must be a number > 0 and at most {MAX_SIZE_MB} (got {value})")]
    BadSize { from: String, to: String, value: f64 },
    #[error(
        "transfer {from}->{to}: duration_s {duration_s} s is too short to move {size_mb} MB at {bandwidth_mbps} \
         Mbit/s (it needs {needed_s} s)"
    )]
    TooShort { from: String, to: String, duration_s: i64, size_mb: f64, bandwidth_mbps: u64, needed_s: i64 },
    #[error("job `{job}`: offset_s {offset_s} is before {ready_s}, the earliest its dependency on {cause} allows")]
    BeforeDependency { job: String, offset_s: i64, ready_s: i64, cause: String },
    #[error("staged transfer {from}->{to}: offset_s {offset_s} is before {producer_end_s}, the end of job `{from}`")]
    StagedBeforeProducer { from: String, to: String, offset_s: i64, producer_end_s: i64 },
}

/// A reservation-plan request as it arrives (JSON), before validation.
///
/// JSON: `{"id","user","submitted_at","deadline","not_before"?,"jobs":[..],"transfers":[..],
/// "policy"?,"method"?}` with RFC 3339 UTC times (`mode` is accepted for `method`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawPlanRequest {
    pub id: String,
    #[serde(default)]
    pub user: String,
    pub submitted_at: DateTime<Utc>,
    pub deadline: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<DateTime<Utc>>,
    pub jobs: Vec<ComputeDemand>,
    #[serde(default)]
    pub transfers: Vec<NetworkDemand>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<SelectionPolicy>,
    /// The reservation method; `mode` is accepted as an alias (round 1's name).
    #[serde(default, alias = "mode", skip_serializing_if = "Option::is_none")]
    pub method: Option<ReservationMethod>,
    /// Seconds kept at least between a job's end and the start of a job `after` it (the
    /// time a workflow engine needs to notice the end and submit the next job). Default 0.
    #[serde(default, skip_serializing_if = "super::is_zero_s")]
    pub dependency_gap_s: i64,
    /// Every job's `slack_s` unless it gives its own. Default 0.
    #[serde(default, skip_serializing_if = "super::is_zero_s")]
    pub slack_s: i64,
}

/// A validated reservation-plan request (docs/model.md): an undirected graph whose vertices are
/// compute demands and whose edges are network demands, plus the application deadline.
///
/// Only [`PlanRequest::new`] (or deserialisation, which calls it) builds one, so every instance
/// satisfies: at least one job; the id, job names and OS names valid text
/// ([`check_text`]; the user has no control characters); unique job names; cpus and bandwidths
/// in `1 ..= MAX_AMOUNT`, durations in `1 ..= MAX_DURATION_S`, offsets in `0 ..= MAX_OFFSET_S`
/// (so no sum of times overflows); every transfer joins two distinct known jobs; `after`
/// names known jobs and the dependencies have no cycle; at most [`MAX_JOBS`] jobs and
/// [`MAX_TRANSFERS`] transfers; the layout exists ([`Layout`]: explicit offsets respect the
/// dependencies, concurrent transfers lie inside both jobs, staged ones between them); the
/// deadline is not before `max(submitted_at, not_before) + span`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawPlanRequest", into = "RawPlanRequest")]
pub struct PlanRequest {
    raw: RawPlanRequest,
    /// `(from, to)` job indices of every transfer, parallel to `raw.transfers`.
    ends: Vec<(usize, usize)>,
    /// Where every job and transfer lies relative to the application start.
    layout: Layout,
    /// `raw`'s instants as [`Time`], converted once (the search reads them at every step).
    submitted_at: Time,
    deadline: Time,
    not_before: Option<Time>,
}

impl TryFrom<RawPlanRequest> for PlanRequest {
    type Error = RequestError;
    fn try_from(raw: RawPlanRequest) -> Result<Self, RequestError> {
        PlanRequest::new(raw)
    }
}

impl From<PlanRequest> for RawPlanRequest {
    fn from(r: PlanRequest) -> Self {
        r.raw
    }
}

impl PlanRequest {
    /// Validates a raw request.
    ///
    /// # Errors
    /// The first [`RequestError`] found, in the order: id, user, jobs, transfers, deadline.
    pub fn new(raw: RawPlanRequest) -> Result<Self, RequestError> {
        if raw.id.trim().is_empty() {
            return Err(RequestError::EmptyId);
        }
        text("id", &raw.id)?;
        if raw.user.chars().any(char::is_control) {
            return Err(RequestError::BadText { field: "user".into(), reason: TextError::Control });
        }
        if raw.jobs.is_empty() {
            return Err(RequestError::NoJobs);
        }
        if raw.jobs.len() > MAX_JOBS {
            return Err(RequestError::TooMany { what: "jobs", count: raw.jobs.len(), max: MAX_JOBS });
        }
        if raw.transfers.len() > MAX_TRANSFERS {
            return Err(RequestError::TooMany { what: "transfers", count: raw.transfers.len(), max: MAX_TRANSFERS });
        }
        for (field, value) in [("dependency_gap_s", raw.dependency_gap_s), ("slack_s", raw.slack_s)] {
            at_least_zero("request", field, value)?;
            at_most("request", field, value as u64, MAX_DURATION_S as u64)?;
        }
        let mut index = HashMap::new();
        for (i, j) in raw.jobs.iter().enumerate() {
            text(&format!("jobs[{i}].name"), &j.name)?;
            text(&format!("jobs[{i}].os"), &j.os)?;
            if index.insert(j.name.as_str(), i).is_some() {
                return Err(RequestError::DuplicateJob(j.name.clone()));
            }
            if j.cpus == 0 {
                return Err(RequestError::ZeroCpus(j.name.clone()));
            }
            let what = format!("job `{}`", j.name);
            at_most(&what, "cpus", u64::from(j.cpus), MAX_AMOUNT)?;
            j.requires.validate().map_err(|reason| RequestError::BadRequirement { job: j.name.clone(), reason })?;
            check_interval(&what, j.offset_s, Some(j.duration_s))?;
            if let Some(slack) = j.slack_s {
                at_least_zero(&what, "slack_s", slack)?;
                at_most(&what, "slack_s", slack as u64, MAX_DURATION_S as u64)?;
            }
        }
        let mut ends = Vec::with_capacity(raw.transfers.len());
        let mut durations = Vec::with_capacity(raw.transfers.len());
        for t in &raw.transfers {
            let lookup = |job: &String| {
                index.get(job.as_str()).copied().ok_or_else(|| RequestError::UnknownJob {
                    from: t.from.clone(),
                    to: t.to.clone(),
                    job: job.clone(),
                })
            };
            let (a, b) = (lookup(&t.from)?, lookup(&t.to)?);
            if a == b {
                return Err(RequestError::SelfTransfer(t.from.clone()));
            }
            if t.bandwidth_mbps == 0 {
                return Err(RequestError::ZeroBandwidth { from: t.from.clone(), to: t.to.clone() });
            }
            let what = format!("transfer {}->{}", t.from, t.to);
            at_most(&what, "bandwidth_mbps", t.bandwidth_mbps, MAX_AMOUNT)?;
            check_interval(&what, t.offset_s, t.duration_s)?;
            durations.push(transfer_duration_s(t)?);
            ends.push((a, b));
        }
        let layout = layout::lay_out(&layout::Rules {
            jobs: &raw.jobs,
            transfers: &raw.transfers,
            ends: &ends,
            index: &index,
            dependency_gap_s: raw.dependency_gap_s,
            slack_s: raw.slack_s,
            transfer_duration_s: &durations,
        })?;
        let (submitted_at, deadline) = (to_time(&raw.submitted_at), to_time(&raw.deadline));
        let not_before = raw.not_before.as_ref().map(to_time);
        let req = PlanRequest { raw, ends, layout, submitted_at, deadline, not_before };
        // Bounded offsets and durations keep the span small, but the start may be any instant
        // chrono represents: check the sum and that it is still an instant.
        let earliest_end = req
            .earliest_start_without_window()
            .checked_add(req.span_s())
            .and_then(|t| chrono::TimeZone::timestamp_opt(&Utc, t, 0).single())
            .ok_or(RequestError::TimeOutOfRange)?;
        if req.deadline < earliest_end.timestamp() {
            return Err(RequestError::DeadlineTooEarly { deadline: req.raw.deadline, earliest_end });
        }
        Ok(req)
    }

    /// The client's request id.
    pub fn id(&self) -> &str {
        &self.raw.id
    }
    /// The submitting user.
    pub fn user(&self) -> &str {
        &self.raw.user
    }
    /// Arrival time of the request.
    pub fn submitted_at(&self) -> Time {
        self.submitted_at
    }
    /// Absolute time by which every reservation must have ended.
    pub fn deadline(&self) -> Time {
        self.deadline
    }
    /// Optional earliest application start requested by the user.
    pub fn not_before(&self) -> Option<Time> {
        self.not_before
    }
    /// Compute demands (vertices), in request order.
    pub fn jobs(&self) -> &[ComputeDemand] {
        &self.raw.jobs
    }
    /// Network demands (edges), in request order.
    pub fn transfers(&self) -> &[NetworkDemand] {
        &self.raw.transfers
    }
    /// `(from, to)` job indices of transfer `i`.
    pub fn transfer_ends(&self, i: usize) -> (usize, usize) {
        self.ends[i]
    }
    /// Per-request selection policy override.
    pub fn policy(&self) -> Option<SelectionPolicy> {
        self.raw.policy
    }
    /// Per-request reservation method override.
    pub fn method(&self) -> Option<ReservationMethod> {
        self.raw.method
    }
    /// The raw form (for serialisation or editing and re-validation).
    pub fn raw(&self) -> &RawPlanRequest {
        &self.raw
    }
    /// Job `i`'s reservation relative to the application start: its offset (given or laid
    /// out) and `duration_s + slack_s`.
    pub fn job_span(&self, i: usize) -> Span {
        self.layout.jobs[i]
    }
    /// Transfer `i`'s reservation relative to the application start (offset and duration,
    /// given or derived).
    pub fn transfer_span(&self, i: usize) -> Span {
        self.layout.transfers[i]
    }
    /// Job `i`'s slack in seconds: the part of its reservation after `duration_s`.
    pub fn slack_s(&self, i: usize) -> i64 {
        self.layout.slack_s[i]
    }
    /// The jobs job `i` must start after (its `after` and the producers of its staged
    /// transfers), by index.
    pub fn after(&self, i: usize) -> &[usize] {
        &self.layout.after[i]
    }
    /// The staged transfers into job `i`, by index.
    pub fn staged_in(&self, i: usize) -> &[usize] {
        &self.layout.staged_in[i]
    }
    /// Whether job `i` floats: it has dependencies, no explicit `offset_s` and no concurrent
    /// or explicitly timed transfer, so the planner places it per job, at or after the earliest
    /// start its placed predecessors allow (docs/algorithm.md, "Per-job placement"), instead
    /// of at `st + job_span(i).offset_s`.
    pub fn floats(&self, i: usize) -> bool {
        self.layout.floats[i]
    }
    /// Whether some job floats ([`PlanRequest::floats`]): the planner then places the jobs in
    /// dependency order, each as early as its predecessors allow.
    pub fn has_floating(&self) -> bool {
        self.layout.floats.iter().any(|&f| f)
    }
    /// Whether transfer `i` floats: staged, and one of its jobs floats. Its interval follows
    /// its producer's placed end (and takes no time when both jobs share a site).
    pub fn transfer_floats(&self, i: usize) -> bool {
        let (a, b) = self.ends[i];
        self.raw.transfers[i].mode == TransferMode::Staged && (self.layout.floats[a] || self.layout.floats[b])
    }
    /// Seconds kept at least between a job's end and the start of a job after it.
    pub fn dependency_gap_s(&self) -> i64 {
        self.raw.dependency_gap_s
    }
    /// The application's total reservation span in seconds: latest job end offset.
    pub fn span_s(&self) -> i64 {
        self.layout.jobs.iter().map(Span::end_s).max().unwrap_or(0)
    }
    /// The longest chain of run times (`duration_s`, no slack, gap nor transfer) through the
    /// dependencies, in seconds: the shortest makespan the workflow could have.
    pub fn critical_path_s(&self) -> i64 {
        let mut longest = vec![0; self.raw.jobs.len()];
        let mut order: Vec<usize> = (0..longest.len()).collect();
        order.sort_by_key(|&j| self.layout.jobs[j].offset_s);
        for j in order {
            let before = self.layout.after[j].iter().map(|&p| longest[p]).max().unwrap_or(0);
            longest[j] = before + self.raw.jobs[j].duration_s;
        }
        longest.into_iter().max().unwrap_or(0)
    }
    /// Total requested CPU-seconds, run times only (the unit of offered load).
    pub fn cpu_seconds(&self) -> f64 {
        self.raw.jobs.iter().map(|j| f64::from(j.cpus) * j.duration_s as f64).sum()
    }
    /// `max(submitted_at, not_before)`: the earliest start before the planner's `w_interval`.
    pub fn earliest_start_without_window(&self) -> Time {
        self.not_before().map_or(self.submitted_at(), |nb| nb.max(self.submitted_at()))
    }
}

fn text(field: &str, value: &str) -> Result<(), RequestError> {
    check_text(value).map_err(|reason| RequestError::BadText { field: field.into(), reason })
}

fn at_most(what: &str, field: &'static str, value: u64, max: u64) -> Result<(), RequestError> {
    if value > max {
        return Err(RequestError::TooLarge { what: what.into(), field, value, max });
    }
    Ok(())
}

fn at_least_zero(what: &str, field: &'static str, value: i64) -> Result<(), RequestError> {
    if value < 0 {
        return Err(RequestError::Negative { what: what.into(), field, value });
    }
    Ok(())
}

/// Checks an interval's given parts: `offset_s` in `0 ..= MAX_OFFSET_S`, `duration_s` in
/// `1 ..= MAX_DURATION_S`.
fn check_interval(what: &str, offset_s: Option<i64>, duration_s: Option<i64>) -> Result<(), RequestError> {
    if let Some(offset_s) = offset_s {
        if offset_s < 0 {
            return Err(RequestError::NegativeOffset { what: what.into(), value: offset_s });
        }
        at_most(what, "offset_s", offset_s as u64, MAX_OFFSET_S as u64)?;
    }
    if let Some(duration_s) = duration_s {
        if duration_s <= 0 {
            return Err(RequestError::NonPositiveDuration { what: what.into(), value: duration_s });
        }
        at_most(what, "duration_s", duration_s as u64, MAX_DURATION_S as u64)?;
    }
    Ok(())
}

/// A transfer's duration: `duration_s`, or the whole seconds `size_mb` takes at
/// `bandwidth_mbps` (`size_mb * 8 / bandwidth_mbps`, rounded up); with both, `duration_s`
/// must be at least that.
fn transfer_duration_s(t: &NetworkDemand) -> Result<i64, RequestError> {
    let (from, to) = (t.from.clone(), t.to.clone());
    let needed = match t.size_mb {
        None => None,
        Some(size) if !(size > 0.0 && size <= MAX_SIZE_MB) => {
            return Err(RequestError::BadSize { from, to, value: size })
        }
        // At most 8e9 Mbit at >= 1 Mbit/s: a whole number of seconds well inside i64.
        Some(size) => Some(((size * 8.0 / t.bandwidth_mbps as f64).ceil() as i64).max(1)),
    };
    match (t.duration_s, needed) {
        (None, None) => Err(RequestError::NoDuration { from, to }),
        (Some(d), Some(n)) if d < n => Err(RequestError::TooShort {
            from,
            to,
            duration_s: d,
            size_mb: t.size_mb.unwrap_or_default(),
            bandwidth_mbps: t.bandwidth_mbps,
            needed_s: n,
        }),
        (Some(d), _) => Ok(d),
        (None, Some(n)) => {
            at_most(&format!("transfer {}->{}", t.from, t.to), "duration_s", n as u64, MAX_DURATION_S as u64)?;
            Ok(n)
        }
    }
}

#[cfg(test)]
mod tests;
