//! What the outcome checker reports: a [`Violation`] is either a rule broken by the outcome of
//! one request ([`Violation::Plan`], the request id written once, the rule in
//! [`PlanViolation`]) or a resource over its capacity ([`Violation::SiteOverbooked`],
//! [`Violation::GpuOverbooked`], [`Violation::LinkOverbooked`]), which involves every committed
//! outcome using it.

use std::fmt;

use chrono::{DateTime, Utc};

use crate::model::{LinkId, SiteId, Unmet};

/// One rule broken by a batch of outcomes. `Display` gives a one-line English description.
#[derive(Debug, Clone, PartialEq)]
pub enum Violation {
    /// The outcome of request `request_id` breaks the rule `kind`.
    Plan {
        /// The request the outcome answers.
        request_id: String,
        /// The rule it breaks.
        kind: PlanViolation,
    },
    /// Committed jobs on a site exceed its CPUs over `[from, to)` (peak reported).
    SiteOverbooked {
        /// The site.
        site: SiteId,
        /// Start of the overbooked interval.
        from: DateTime<Utc>,
        /// End of the overbooked interval (exclusive).
        to: DateTime<Utc>,
        /// Highest CPU count booked within it.
        peak: u64,
        /// The site's CPUs.
        capacity: u64,
    },
    /// Committed jobs on a site exceed the GPUs of its pool `model` over `[from, to)`.
    GpuOverbooked {
        /// The site.
        site: SiteId,
        /// The GPU pool's model.
        model: String,
        /// Start of the overbooked interval.
        from: DateTime<Utc>,
        /// End of the overbooked interval (exclusive).
        to: DateTime<Utc>,
        /// Highest GPU count booked within it.
        peak: u64,
        /// The pool's GPUs.
        capacity: u64,
    },
    /// Committed transfers on a link exceed its capacity over `[from, to)` (peak reported).
    LinkOverbooked {
        /// The link.
        link: LinkId,
        /// Start of the overbooked interval.
        from: DateTime<Utc>,
        /// End of the overbooked interval (exclusive).
        to: DateTime<Utc>,
        /// Highest bandwidth booked within it, Mbit/s.
        peak: u64,
        /// The link's `capacity_mbps`.
        capacity: u64,
    },
    /// A project's committed plans use more than its allocation in one period (fair share;
    /// projects with `overdraft` are exempt).
    OverAllocation {
        /// The project.
        project: String,
        /// `CPU-hours` or `GPU-hours`.
        unit: &'static str,
        /// Start of the allocation period.
        period_start: DateTime<Utc>,
        /// What its committed plans use inside the period.
        booked: f64,
        /// The allocation.
        allocated: f64,
    },
}

/// A rule broken by the outcome of one request (the request is [`Violation::Plan`]'s
/// `request_id`).
#[derive(Debug, Clone, PartialEq)]
pub enum PlanViolation {
    /// The outcome answers a request id that is not among the requests.
    UnknownRequest,
    /// A second (or later) outcome for the same request.
    DuplicateOutcome,
    /// An outcome in a state a planner never answers (a stored plan's: pending, active,
    /// completed, cancelled or broken): the checker judges planners' answers only.
    NotAnAnswer(crate::model::PlanStatus),
    /// A rejected outcome that still carries a start, placements or a non-zero cost.
    RejectedNotEmpty {
        /// What it carries, e.g. `a start, 2 job placements, cost 3.5`.
        detail: String,
    },
    /// A committed outcome without an application start.
    MissingStart,
    /// The plan starts before `max(submitted_at + w_interval, not_before)`.
    StartTooEarly {
        /// The outcome's application start.
        start: DateTime<Utc>,
        /// `max(submitted_at + w_interval_s, not_before)`.
        earliest: DateTime<Utc>,
    },
    /// Some reservation of the plan ends after the deadline (the latest end is reported).
    PastDeadline {
        /// The placement that ends last, e.g. ``job `B` `` or `transfer A->B`.
        what: String,
        /// Its end.
        end: DateTime<Utc>,
        /// The request's deadline.
        deadline: DateTime<Utc>,
    },
    /// A job placement names a job the request does not have.
    UnknownJob {
        /// The placement's job name.
        job: String,
    },
    /// A job of the request has no placement.
    JobNotPlaced {
        /// The unplaced job.
        job: String,
    },
    /// A job of the request is placed more than once.
    JobPlacedTwice {
        /// The job.
        job: String,
        /// Number of placements (>= 2).
        count: usize,
    },
    /// A job placement names a site the grid does not have.
    UnknownSite {
        /// The job.
        job: String,
        /// The unknown site id.
        site: SiteId,
    },
    /// The site's OS differs from the job's (compared case-insensitively).
    WrongOs {
        /// The job.
        job: String,
        /// The site it is placed on.
        site: SiteId,
        /// The OS the job requires.
        job_os: String,
        /// The OS the site runs.
        site_os: String,
    },
    /// The site fails a requirement of the job's `requires` (architecture, extensions, GPUs,
    /// software, labels), or the GPUs are of a pool the site lacks or that fails the bounds.
    UnmetRequirement {
        /// The job.
        job: String,
        /// The site it is placed on.
        site: SiteId,
        /// What the site lacks.
        unmet: Unmet,
    },
    /// The placement holds another GPU count than the job asked for (0 when it holds none).
    WrongGpus {
        /// The job.
        job: String,
        /// GPUs in the placement.
        placed: u32,
        /// GPUs in the request.
        requested: u32,
    },
    /// The placement holds a different CPU count than the job asked for.
    WrongCpus {
        /// The job.
        job: String,
        /// CPUs in the placement.
        placed: u32,
        /// CPUs in the request.
        requested: u32,
    },
    /// The job does not occupy exactly `[start + offset_s, start + offset_s + duration_s)`.
    JobTiming {
        /// The job.
        job: String,
        /// The placement's start.
        start: DateTime<Utc>,
        /// The placement's end.
        end: DateTime<Utc>,
        /// Plan start + the job's offset.
        expected_start: DateTime<Utc>,
        /// Expected start + the job's duration.
        expected_end: DateTime<Utc>,
    },
    /// The number of placements of transfer `from->to` differs from the number of such transfers
    /// in the request (0 placed = missing; `requested` 0 = a transfer the request does not have;
    /// a reversed direction counts as a different transfer).
    TransferCount {
        /// Sending job.
        from: String,
        /// Receiving job.
        to: String,
        /// Placements with these ends.
        placed: usize,
        /// Transfers of the request with these ends.
        requested: usize,
    },
    /// The placement reserves a different bandwidth than the transfer asked for.
    WrongBandwidth {
        /// Sending job.
        from: String,
        /// Receiving job.
        to: String,
        /// Mbit/s in the placement.
        placed: u64,
        /// Mbit/s in the request.
        requested: u64,
    },
    /// The transfer does not occupy exactly `[start + offset_s, start + offset_s + duration_s)`.
    TransferTiming {
        /// Sending job.
        from: String,
        /// Receiving job.
        to: String,
        /// The placement's start.
        start: DateTime<Utc>,
        /// The placement's end.
        end: DateTime<Utc>,
        /// Plan start + the transfer's offset.
        expected_start: DateTime<Utc>,
        /// Expected start + the transfer's duration.
        expected_end: DateTime<Utc>,
    },
    /// The job's reservation does not last its `duration_s` plus its slack.
    WrongLength {
        /// The job.
        job: String,
        /// The placement's length, seconds.
        length_s: i64,
        /// `duration_s + slack_s`.
        expected_s: i64,
    },
    /// The job starts less than `dependency_gap_s` after a job it is after ends.
    DependencyBroken {
        /// The job.
        job: String,
        /// The job it is after (by `after` or a staged transfer).
        after: String,
        /// That job's end.
        after_end: DateTime<Utc>,
        /// The job's start.
        start: DateTime<Utc>,
        /// The request's `dependency_gap_s`.
        gap_s: i64,
    },
    /// A staged transfer not between its jobs, a concurrent one not inside both, or a
    /// transfer too short for its `size_mb`.
    TransferOutOfPlace {
        /// Sending job.
        from: String,
        /// Receiving job.
        to: String,
        /// What is wrong.
        detail: String,
    },
    /// The path is not a chain of existing links from the sender's site node to the receiver's
    /// (or is not empty although both sites share a node).
    BrokenPath {
        /// Sending job.
        from: String,
        /// Receiving job.
        to: String,
        /// What is wrong with the path.
        reason: String,
    },
    /// The reported cost differs from the recomputed one by more than
    /// [`COST_REL_TOLERANCE`](super::COST_REL_TOLERANCE).
    WrongCost {
        /// The outcome's `cost`.
        reported: f64,
        /// [`plan_cost`](super::plan_cost) of the outcome.
        expected: f64,
    },
}

impl Violation {
    /// The violation `kind` of the outcome of request `request_id`.
    pub fn plan(request_id: impl Into<String>, kind: PlanViolation) -> Self {
        Violation::Plan { request_id: request_id.into(), kind }
    }

    /// The request the violation is about; `None` for the capacity violations, which involve
    /// every outcome using the resource.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            Violation::Plan { request_id, .. } => Some(request_id),
            _ => None,
        }
    }

    /// The rule a request's outcome breaks; `None` for the capacity violations.
    pub fn plan_violation(&self) -> Option<&PlanViolation> {
        match self {
            Violation::Plan { kind, .. } => Some(kind),
            _ => None,
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use PlanViolation::*;
        let (id, kind) = match self {
            Violation::Plan { request_id, kind } => (request_id, kind),
            Violation::SiteOverbooked { site, from, to, peak, capacity } => {
                return write!(f, "site `{site}` is overbooked over [{from}, {to}): {peak} CPUs of {capacity}");
            }
            Violation::GpuOverbooked { site, model, from, to, peak, capacity } => {
                return write!(
                    f,
                    "site `{site}` is overbooked over [{from}, {to}): {peak} GPUs of model `{model}` of {capacity}"
                );
            }
            Violation::OverAllocation { project, unit, period_start, booked, allocated } => {
                return write!(
                    f,
                    "project `{project}` is over its allocation in the period from {period_start}: {booked:.3} {unit} of {allocated:.3}"
                );
            }
            Violation::LinkOverbooked { link, from, to, peak, capacity } => {
                return write!(f, "link `{link}` is overbooked over [{from}, {to}): {peak} Mbit/s of {capacity}");
            }
        };
        match kind {
            UnknownRequest => write!(f, "outcome for unknown request `{id}`"),
            NotAnAnswer(status) => write!(f, "outcome of request `{id}` is {status}: not a planner's answer"),
            DuplicateOutcome => write!(f, "request `{id}` has more than one outcome"),
            RejectedNotEmpty { detail } => write!(f, "rejected request `{id}` is not empty: {detail}"),
            MissingStart => write!(f, "committed request `{id}` has no start"),
            StartTooEarly { start, earliest } => {
                write!(f, "request `{id}` starts at {start}, before its earliest start {earliest}")
            }
            PastDeadline { what, end, deadline } => {
                write!(f, "request `{id}`: {what} ends at {end}, after the deadline {deadline}")
            }
            UnknownJob { job } => write!(f, "request `{id}`: placement for unknown job `{job}`"),
            JobNotPlaced { job } => write!(f, "request `{id}`: job `{job}` is not placed"),
            JobPlacedTwice { job, count } => write!(f, "request `{id}`: job `{job}` is placed {count} times"),
            UnknownSite { job, site } => write!(f, "request `{id}`: job `{job}` is placed on unknown site `{site}`"),
            WrongOs { job, site, job_os, site_os } => {
                write!(f, "request `{id}`: job `{job}` needs OS `{job_os}` but site `{site}` runs `{site_os}`")
            }
            UnmetRequirement { job, site, unmet } => {
                write!(f, "request `{id}`: job `{job}` is placed on site `{site}`, which lacks {unmet}")
            }
            WrongGpus { job, placed, requested } => {
                write!(f, "request `{id}`: job `{job}` holds {placed} GPUs, requested {requested}")
            }
            WrongCpus { job, placed, requested } => {
                write!(f, "request `{id}`: job `{job}` holds {placed} CPUs, requested {requested}")
            }
            JobTiming { job, start, end, expected_start, expected_end } => write!(
                f,
                "request `{id}`: job `{job}` runs [{start}, {end}), expected [{expected_start}, {expected_end})"
            ),
            TransferCount { from, to, placed, requested } => {
                write!(f, "request `{id}`: transfer {from}->{to} is placed {placed} times, requested {requested}")
            }
            WrongBandwidth { from, to, placed, requested } => {
                write!(f, "request `{id}`: transfer {from}->{to} holds {placed} Mbit/s, requested {requested}")
            }
            TransferTiming { from, to, start, end, expected_start, expected_end } => write!(
                f,
                "request `{id}`: transfer {from}->{to} runs [{start}, {end}), expected [{expected_start}, {expected_end})"
            ),
            WrongLength { job, length_s, expected_s } => {
                write!(f, "request `{id}`: job `{job}`'s reservation lasts {length_s} s, expected {expected_s} s")
            }
            DependencyBroken { job, after, after_end, start, gap_s } => write!(
                f,
                "request `{id}`: job `{job}` starts at {start}, less than {gap_s} s after job `{after}` ends at {after_end}"
            ),
            TransferOutOfPlace { from, to, detail } => write!(f, "request `{id}`: transfer {from}->{to} is {detail}"),
            BrokenPath { from, to, reason } => {
                write!(f, "request `{id}`: transfer {from}->{to} has a broken path: {reason}")
            }
            WrongCost { reported, expected } => {
                write!(f, "request `{id}`: cost {reported} differs from the recomputed {expected}")
            }
        }
    }
}

impl std::error::Error for Violation {}
