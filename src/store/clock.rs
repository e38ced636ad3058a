//! What the clock does to a stored plan: its status in time ([`status_in_time`]), the starts
//! and ends of its parts that become `job.*` and `transfer.*` events ([`part_boundaries`]), and
//! its parts' states ([`stamp_part_states`]). All re-exported by `crate::store`.

use chrono::{DateTime, Utc};

use crate::model::{Outcome, PartState, PlanStatus};

/// One start or end of a plan's part: a `job.*` or `transfer.*` event once the clock passes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartBoundary {
    pub at: DateTime<Utc>,
    /// `job.running`, `job.ended`, `transfer.running` or `transfer.ended`.
    pub kind: &'static str,
    /// The job's name, or the transfer's `from->to`.
    pub part: String,
}

/// The starts and ends of `outcome`'s parts that are not broken, in the order their events are
/// written: by time; at one instant ends before starts, jobs before transfers, each in the
/// plan's order. The PostgreSQL store computes the same in SQL (`plan_boundaries`,
/// migrations/0023_part_events.sql).
pub fn part_boundaries(outcome: &crate::model::Outcome) -> Vec<PartBoundary> {
    let jobs = outcome.jobs.iter().filter(|j| j.broken.is_none()).map(|j| (j.name.clone(), j.start, j.end));
    let transfers = outcome
        .transfers
        .iter()
        .filter(|t| t.broken.is_none())
        .map(|t| (format!("{}->{}", t.from, t.to), t.start, t.end));
    let parts: Vec<(bool, String, DateTime<Utc>, DateTime<Utc>)> =
        jobs.map(|j| (true, j.0, j.1, j.2)).chain(transfers.map(|t| (false, t.0, t.1, t.2))).collect();
    let mut out: Vec<(DateTime<Utc>, u8, PartBoundary)> = Vec::new();
    for (job, part, start, end) in parts {
        let (running, ended) = if job { ("job.running", "job.ended") } else { ("transfer.running", "transfer.ended") };
        // The rank at one instant: job ends, transfer ends, job starts, transfer starts.
        out.push((end, u8::from(!job), PartBoundary { at: end, kind: ended, part: part.clone() }));
        out.push((start, 2 + u8::from(!job), PartBoundary { at: start, kind: running, part }));
    }
    // A stable sort keeps the plan's order within one rank.
    out.sort_by_key(|(at, rank, _)| (*at, *rank));
    out.into_iter().map(|(_, _, b)| b).collect()
}

/// Sets each job's and transfer's `state` at `now` ([`PartState::at`]) for a plan in `status`
/// that was booked (committed, active, completed, broken or cancelled); leaves them unset
/// otherwise.
pub fn stamp_part_states(
    status: PlanStatus,
    jobs: &mut [crate::model::JobPlacement],
    transfers: &mut [crate::model::TransferPlacement],
    now: DateTime<Utc>,
) {
    let cancelled = status == PlanStatus::Cancelled;
    if !(status.holds_reservations() || matches!(status, PlanStatus::Completed) || cancelled) {
        return;
    }
    for j in jobs {
        j.state = Some(PartState::at(now, j.start, j.end, j.broken.is_some(), cancelled));
    }
    for t in transfers {
        t.state = Some(PartState::at(now, t.start, t.end, t.broken.is_some(), cancelled));
    }
}

/// The status a committed or active plan has at `now`: active from its first job's start,
/// completed from its last job's end (a plan without jobs keeps its status).
pub fn status_in_time(status: PlanStatus, outcome: &Outcome, now: DateTime<Utc>) -> PlanStatus {
    let first = outcome.jobs.iter().map(|j| j.start).min();
    let last = outcome.jobs.iter().map(|j| j.end).max();
    match (status, first, last) {
        (PlanStatus::Committed | PlanStatus::Active, _, Some(end)) if end <= now => PlanStatus::Completed,
        (PlanStatus::Committed, Some(start), _) if start <= now => PlanStatus::Active,
        (s, _, _) => s,
    }
}
