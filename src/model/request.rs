use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::attributes::{AttributeError, Requirements};
use super::limits::MAX_AMOUNT;
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
    /// (3,153,600,000: 100 years).
    #[schema(minimum = 0, maximum = 3153600000_i64)]
    pub offset_s: i64,
    /// Reservation length in seconds, in `1 ..= MAX_DURATION_S` (3,153,600,000: 100 years).
    #[schema(minimum = 1, maximum = 3153600000_i64)]
    pub duration_s: i64,
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
            offset_s,
            duration_s,
            requires: Requirements::default(),
        }
    }

    /// GPUs the job reserves with its CPUs (0 if none).
    pub fn gpus(&self) -> u32 {
        self.requires.gpu_count()
    }

    /// Offset of the end, seconds from the application start.
    pub fn end_offset_s(&self) -> i64 {
        self.offset_s + self.duration_s
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
    /// Start offset in seconds from the application start, in `0 ..= MAX_OFFSET_S`; inside
    /// both jobs' intervals.
    #[schema(minimum = 0, maximum = 3153600000_i64)]
    pub offset_s: i64,
    /// Reservation length in seconds, in `1 ..= MAX_DURATION_S`.
    #[schema(minimum = 1, maximum = 3153600000_i64)]
    pub duration_s: i64,
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
}

/// A validated reservation-plan request (docs/model.md): an undirected graph whose vertices are
/// compute demands and whose edges are network demands, plus the application deadline.
///
/// Only [`PlanRequest::new`] (or deserialisation, which calls it) builds one, so every instance
/// satisfies: at least one job; the id, job names and OS names valid text
/// ([`check_text`]; the user has no control characters); unique job names; cpus and bandwidths
/// in `1 ..= MAX_AMOUNT`, durations in `1 ..= MAX_DURATION_S`, offsets in `0 ..= MAX_OFFSET_S`
/// (so no sum of times overflows); every transfer joins two distinct known jobs and lies inside both jobs' intervals; the
/// deadline is not before `max(submitted_at, not_before) + span`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawPlanRequest", into = "RawPlanRequest")]
pub struct PlanRequest {
    raw: RawPlanRequest,
    /// `(from, to)` job indices of every transfer, parallel to `raw.transfers`.
    ends: Vec<(usize, usize)>,
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
            check_interval(&what, j.offset_s, j.duration_s)?;
        }
        let mut ends = Vec::with_capacity(raw.transfers.len());
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
            for &j in &[a, b] {
                let job = &raw.jobs[j];
                if t.offset_s < job.offset_s || t.offset_s + t.duration_s > job.end_offset_s() {
                    return Err(RequestError::TransferOutsideJob {
                        from: t.from.clone(),
                        to: t.to.clone(),
                        job: job.name.clone(),
                        offset_s: t.offset_s,
                        end_s: t.offset_s + t.duration_s,
                    });
                }
            }
            ends.push((a, b));
        }
        let (submitted_at, deadline) = (to_time(&raw.submitted_at), to_time(&raw.deadline));
        let not_before = raw.not_before.as_ref().map(to_time);
        let req = PlanRequest { raw, ends, submitted_at, deadline, not_before };
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
    /// The application's total reservation span in seconds: latest job end offset.
    pub fn span_s(&self) -> i64 {
        self.raw.jobs.iter().map(ComputeDemand::end_offset_s).max().unwrap_or(0)
    }
    /// Total requested CPU-seconds (the unit of offered load).
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

fn check_interval(what: &str, offset_s: i64, duration_s: i64) -> Result<(), RequestError> {
    if offset_s < 0 {
        return Err(RequestError::NegativeOffset { what: what.into(), value: offset_s });
    }
    if duration_s <= 0 {
        return Err(RequestError::NonPositiveDuration { what: what.into(), value: duration_s });
    }
    // Both are positive here, so the casts are exact.
    at_most(what, "offset_s", offset_s as u64, MAX_OFFSET_S as u64)?;
    at_most(what, "duration_s", duration_s as u64, MAX_DURATION_S as u64)?;
    Ok(())
}

#[cfg(test)]
mod tests;
