//! A change to a committed plan (`PATCH /v1/plans/{id}`, `coreserve plans modify`): move the
//! application's start, change a job's interval or CPUs, a transfer's interval or bandwidth.
//!
//! [`PlanModification::apply`] checks the change against the plan as booked and returns the
//! plan as it would be; the planner then books the difference with one replacement hold per
//! changed part ([`crate::protocol::ComputeHoldRequest::replaces`]) and one two-phase commit.
//! Every job and transfer keeps its site and path.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use super::{Footprint, Outcome, TransferMode, MAX_AMOUNT, MAX_DURATION_S, MAX_OFFSET_S};

/// What to change in a committed plan; what is absent stays as it is. Offsets count from the
/// application's start (the plan's `start`, or the new `start`), as in a plan request.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanModification {
    /// The application's new start (RFC 3339 with a time zone): every job and transfer moves
    /// with it, keeping its offset.
    pub start: Option<DateTime<Utc>>,
    /// Changes to jobs, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<JobChange>,
    /// Changes to transfers, by their two jobs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transfers: Vec<TransferChange>,
}

/// A job's new offset, length or CPUs.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobChange {
    /// The job's name.
    pub name: String,
    /// New start offset in seconds from the application's start, in `0 ..= MAX_OFFSET_S`.
    #[schema(minimum = 0, maximum = 3153600000_i64)]
    pub offset_s: Option<i64>,
    /// New length in seconds (extends or shortens the job's end), in `1 ..= MAX_DURATION_S`.
    #[schema(minimum = 1, maximum = 3153600000_i64)]
    pub duration_s: Option<i64>,
    /// New CPU count, > 0.
    #[schema(minimum = 1)]
    pub cpus: Option<u32>,
}

/// A transfer's new offset, length or bandwidth.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferChange {
    /// The sending job's name.
    pub from: String,
    /// The receiving job's name.
    pub to: String,
    /// New start offset in seconds from the application's start.
    #[schema(minimum = 0, maximum = 3153600000_i64)]
    pub offset_s: Option<i64>,
    /// New length in seconds.
    #[schema(minimum = 1, maximum = 3153600000_i64)]
    pub duration_s: Option<i64>,
    /// New bandwidth in Mbit/s, in `1 ..= MAX_AMOUNT`.
    #[schema(minimum = 1, maximum = 1073741824)]
    pub bandwidth_mbps: Option<u64>,
}

/// Why a modification cannot be made as asked. Nothing changes when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModificationError {
    /// The body changes nothing.
    #[error("the modification changes nothing")]
    NothingChanges,
    /// A job change names no job of the plan.
    #[error("the plan has no job `{0}`")]
    UnknownJob(String),
    /// A transfer change names no transfer of the plan.
    #[error("the plan has no transfer {from}->{to}")]
    UnknownTransfer { from: String, to: String },
    /// The same job or transfer is named twice.
    #[error("{0} is changed twice")]
    Twice(String),
    /// A value outside its bounds.
    #[error("{what}: {field} must be in {min} ..= {max} (got {value})")]
    OutOfBounds { what: String, field: &'static str, value: i64, min: i64, max: i64 },
    /// A part that has started can only have its end changed (its start, CPUs or bandwidth
    /// are in use).
    #[error("{0} has started: only its end may change")]
    Started(String),
    /// A changed part would start before now.
    #[error("{what} would start at {start}, in the past (now {now})")]
    InThePast { what: String, start: DateTime<Utc>, now: DateTime<Utc> },
    /// A changed part would end at or before now.
    #[error("{what} would end at {end}, not after now ({now})")]
    EndsInThePast { what: String, end: DateTime<Utc>, now: DateTime<Utc> },
    /// A part would end after the request's deadline.
    #[error("{what} would end at {end}, after the plan's deadline {deadline}")]
    PastDeadline { what: String, end: DateTime<Utc>, deadline: DateTime<Utc> },
    /// A concurrent transfer would not lie inside both of its jobs.
    #[error("transfer {from}->{to} would not lie inside job `{job}`")]
    TransferOutsideJob { from: String, to: String, job: String },
    /// A staged transfer would not lie between its producer's end and its consumer's start.
    #[error("staged transfer {from}->{to} would not lie between job `{from}`'s end and job `{to}`'s start")]
    StagedOutOfOrder { from: String, to: String },
    /// A job would start before a job it is after ends.
    #[error("job `{job}` would start before job `{after}` ends")]
    BeforeDependency { job: String, after: String },
    /// The plan has no start (it was never booked).
    #[error("the plan is not booked")]
    NotBooked,
}

impl PlanModification {
    /// The plan `plan` (a committed outcome) changed as this modification asks, at `now`.
    ///
    /// Rules: every named job and transfer exists and is named once; values are in their
    /// bounds; a part that has started (start <= now) keeps its start, CPUs and bandwidth
    /// and may only change its end, which must stay after now; a changed part that has not
    /// started must start at or after now. A part waiting for a dependency that ends, in the
    /// changed plan, after the part's booked start (a job it is `after`, a staged transfer
    /// into it, a staged transfer's producer) has not started, whatever the clock says: an
    /// engine that extends an overrunning job moves what waits for it even when the
    /// dependant's booked start has passed; every part ends by the plan's deadline (when
    /// recorded); every transfer lies inside both of its jobs. The result's `cost` is
    /// recomputed from each part's prices.
    ///
    /// # Errors
    /// [`ModificationError`]: the first rule broken; `plan` is not touched.
    pub fn apply(&self, plan: &Outcome, now: DateTime<Utc>) -> Result<Outcome, ModificationError> {
        let old_start = plan.start.ok_or(ModificationError::NotBooked)?;
        let new_start = self.start.unwrap_or(old_start);
        let mut out = plan.clone();
        out.start = Some(new_start);
        let mut seen = std::collections::HashSet::new();
        for c in &self.jobs {
            if !seen.insert(format!("job `{}`", c.name)) {
                return Err(ModificationError::Twice(format!("job `{}`", c.name)));
            }
        }
        for c in &self.transfers {
            if !seen.insert(format!("transfer {}->{}", c.from, c.to)) {
                return Err(ModificationError::Twice(format!("transfer {}->{}", c.from, c.to)));
            }
        }
        for c in &self.jobs {
            let what = format!("job `{}`", c.name);
            let j =
                out.jobs.iter_mut().find(|j| j.name == c.name).ok_or(ModificationError::UnknownJob(c.name.clone()))?;
            let offset =
                bounded(&what, "offset_s", c.offset_s, 0, MAX_OFFSET_S)?.unwrap_or((j.start - old_start).num_seconds());
            let duration = bounded(&what, "duration_s", c.duration_s, 1, MAX_DURATION_S)?
                .unwrap_or((j.end - j.start).num_seconds());
            if let Some(cpus) = bounded(&what, "cpus", c.cpus.map(i64::from), 1, i64::from(u32::MAX))? {
                j.cpus = cpus as u32;
            }
            // A shorter reservation gives back its slack first (an engine ending a job early
            // gives back what it did not use: its run is what it ran); a longer one is run.
            let shorter_by = (j.end - j.start).num_seconds() - duration;
            if shorter_by > 0 {
                j.slack_s = (j.slack_s - shorter_by).max(0);
            }
            j.start = old_start + Duration::seconds(offset);
            j.end = j.start + Duration::seconds(duration);
        }
        for c in &self.transfers {
            let what = format!("transfer {}->{}", c.from, c.to);
            let t = out
                .transfers
                .iter_mut()
                .find(|t| t.from == c.from && t.to == c.to)
                .ok_or_else(|| ModificationError::UnknownTransfer { from: c.from.clone(), to: c.to.clone() })?;
            let offset =
                bounded(&what, "offset_s", c.offset_s, 0, MAX_OFFSET_S)?.unwrap_or((t.start - old_start).num_seconds());
            let duration = bounded(&what, "duration_s", c.duration_s, 1, MAX_DURATION_S)?
                .unwrap_or((t.end - t.start).num_seconds());
            if let Some(bw) = bounded(
                &what,
                "bandwidth_mbps",
                c.bandwidth_mbps.map(|b| b.min(i64::MAX as u64) as i64),
                1,
                MAX_AMOUNT as i64,
            )? {
                t.bandwidth_mbps = bw as u64;
            }
            t.start = old_start + Duration::seconds(offset);
            t.end = t.start + Duration::seconds(duration);
        }
        // The whole application moves with its start.
        let shift = new_start - old_start;
        for j in &mut out.jobs {
            j.start += shift;
            j.end += shift;
        }
        for t in &mut out.transfers {
            t.start += shift;
            t.end += shift;
        }
        if out.jobs == plan.jobs && out.transfers == plan.transfers {
            return Err(ModificationError::NothingChanges);
        }
        let job = |name: &str| out.jobs.iter().find(|j| j.name == name);
        // A part waits, and so has not begun whatever the clock says, while something it
        // depends on ends after its booked start in the changed plan: a job it is `after`, a
        // staged transfer into it, a staged transfer's producer. (An engine extends a job that
        // overran past the booked start of what waits for it.)
        let parts = out.jobs.iter().zip(&plan.jobs).map(|(n, o)| {
            let what = format!("job `{}`", n.name);
            let staged_in = out.transfers.iter().filter(|t| t.mode == TransferMode::Staged && t.to == n.name);
            let waiting = n
                .after
                .iter()
                .filter_map(|a| job(a))
                .map(|a| a.end)
                .chain(staged_in.map(|t| t.end))
                .any(|end| end > o.start);
            (what, waiting, (n.start, n.end, u64::from(n.cpus)), (o.start, o.end, u64::from(o.cpus)))
        });
        let transfers = out.transfers.iter().zip(&plan.transfers).map(|(n, o)| {
            let what = format!("transfer {}->{}", n.from, n.to);
            let waiting = n.mode == TransferMode::Staged && job(&n.from).is_some_and(|a| a.end > o.start);
            (what, waiting, (n.start, n.end, n.bandwidth_mbps), (o.start, o.end, o.bandwidth_mbps))
        });
        for (what, waiting, new, old) in parts.chain(transfers) {
            if new == old {
                continue;
            }
            if old.0 <= now && !waiting {
                if new.0 != old.0 || new.2 != old.2 {
                    return Err(ModificationError::Started(what));
                }
                if new.1 <= now {
                    return Err(ModificationError::EndsInThePast { what, end: new.1, now });
                }
            } else if new.0 < now {
                return Err(ModificationError::InThePast { what, start: new.0, now });
            }
            if let Some(deadline) = plan.deadline.filter(|d| new.1 > *d) {
                return Err(ModificationError::PastDeadline { what, end: new.1, deadline });
            }
        }
        for t in &out.transfers {
            let (Some(a), Some(b)) = (job(&t.from), job(&t.to)) else { continue };
            let (from, to) = (t.from.clone(), t.to.clone());
            match t.mode {
                TransferMode::Concurrent => {
                    if let Some(j) = [a, b].into_iter().find(|j| t.start < j.start || t.end > j.end) {
                        return Err(ModificationError::TransferOutsideJob { from, to, job: j.name.clone() });
                    }
                }
                TransferMode::Staged if t.start < a.end || t.end > b.start => {
                    return Err(ModificationError::StagedOutOfOrder { from, to })
                }
                TransferMode::Staged => {}
            }
        }
        for j in &out.jobs {
            for before in j.after.iter().filter_map(|name| job(name)) {
                if j.start < before.end {
                    return Err(ModificationError::BeforeDependency {
                        job: j.name.clone(),
                        after: before.name.clone(),
                    });
                }
            }
        }
        out.footprint = Footprint::of(&out.jobs);
        out.cost = out.jobs.iter().map(|j| j.cost()).sum::<f64>() + out.transfers.iter().map(|t| t.cost()).sum::<f64>();
        Ok(out)
    }
}

/// `value` if it lies in `min ..= max`.
fn bounded(
    what: &str,
    field: &'static str,
    value: Option<i64>,
    min: i64,
    max: i64,
) -> Result<Option<i64>, ModificationError> {
    match value {
        Some(v) if v < min || v > max => {
            Err(ModificationError::OutOfBounds { what: what.to_owned(), field, value: v, min, max })
        }
        v => Ok(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{JobPlacement, PlanStatus, TransferPlacement};

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(s, 0).unwrap()
    }

    fn job(name: &str, start: i64, end: i64, cpus: u32) -> JobPlacement {
        JobPlacement {
            name: name.into(),
            site: "s1".into(),
            start: t(start),
            end: t(end),
            cpus,
            price_per_cpu_hour: 1.0,
            ..Default::default()
        }
    }

    /// Jobs A [1000, 4600) and B [4000, 7600) with 4 CPUs, a transfer A->B over
    /// [4000, 4600) at 1000 Mbit/s (inside both); deadline 20000.
    fn plan() -> Outcome {
        let mut o = Outcome::rejected("r", "", "p");
        o.status = PlanStatus::Committed;
        o.reason = None;
        o.start = Some(t(1000));
        o.deadline = Some(t(20_000));
        o.jobs = vec![job("A", 1000, 4600, 4), job("B", 4000, 7600, 4)];
        o.transfers = vec![TransferPlacement {
            from: "A".into(),
            to: "B".into(),
            path: vec!["l1".into()],
            bandwidth_mbps: 1000,
            start: t(4000),
            end: t(4600),
            traffic: None,
            broken: None,
            state: None,
            price_per_gbps_hour: 2.0,
            ..Default::default()
        }];
        o.cost = 8.0;
        o
    }

    /// `plan()` as a workflow: B is after A, A->B staged between them: A [1000, 4000), the
    /// transfer [4000, 4600), B [4600, 7600).
    fn workflow() -> Outcome {
        let mut o = plan();
        o.jobs[0].end = t(4000);
        o.jobs[1].start = t(4600);
        o.jobs[1].after = vec!["A".into()];
        o.transfers[0].mode = TransferMode::Staged;
        o
    }

    #[test]
    fn a_workflow_keeps_its_order_and_its_footprint_follows() {
        let later = |name: &str, offset_s, duration_s| JobChange { offset_s, duration_s, ..change(name) };
        let m = |jobs| PlanModification { jobs, ..Default::default() };
        // A runs longer: it would overlap its staged transfer.
        let err = m(vec![later("A", None, Some(3100))]).apply(&workflow(), t(0)).unwrap_err();
        assert_eq!(err, ModificationError::StagedOutOfOrder { from: "A".into(), to: "B".into() });
        // B moved before A's end, or the transfer before it.
        let mut no_transfer = workflow();
        no_transfer.transfers.clear();
        let err = m(vec![later("B", Some(1000), None)]).apply(&no_transfer, t(0)).unwrap_err();
        assert_eq!(err, ModificationError::BeforeDependency { job: "B".into(), after: "A".into() });
        let early = TransferChange { from: "A".into(), to: "B".into(), offset_s: Some(600), ..Default::default() };
        let err = PlanModification { transfers: vec![early], ..Default::default() }.apply(&workflow(), t(0));
        assert!(err.unwrap_err().to_string().contains("staged transfer A->B would not lie between"));
        // B starts later: fine, and the footprint is recomputed (A and B: 4 CPUs * 3000 s).
        let o = m(vec![later("B", Some(4000), None)]).apply(&workflow(), t(0)).unwrap();
        let f = o.footprint.unwrap();
        assert_eq!((f.booked_cpu_s, f.makespan_s, f.critical_path_s), (4 * 3000 + 4 * 3000, 7000, 6000));
        // A concurrent transfer still lies inside both jobs.
        let err = m(vec![later("A", None, Some(3000))]).apply(&plan(), t(0)).unwrap_err().to_string();
        assert!(err.contains("not lie inside job `A`"), "{err}");
    }

    /// An overrunning producer is extended after its dependants' booked starts have passed
    /// (an engine's extension refused once, then asked again): the staged transfer and the
    /// consumer wait for it, have not begun, and move. Before, both "had started" and the
    /// extension was refused (issue 47's 197-task run).
    #[test]
    fn what_waits_for_an_extended_job_moves_though_its_booked_start_has_passed() {
        let now = t(4700); // the transfer [4000, 4600) and B's start (4600) have passed
        let a = JobChange { duration_s: Some(4000), ..change("A") }; // A ends at 5000
        let moved = TransferChange { from: "A".into(), to: "B".into(), offset_s: Some(4000), ..Default::default() };
        let b = JobChange { offset_s: Some(4600), ..change("B") };
        let m =
            PlanModification { jobs: vec![a.clone(), b.clone()], transfers: vec![moved.clone()], ..Default::default() };
        let o = m.apply(&workflow(), now).unwrap();
        assert_eq!((o.jobs[0].end, o.transfers[0].start, o.jobs[1].start), (t(5000), t(5000), t(5600)));
        // Without the extension nothing waits: B and the transfer have started, as before.
        let alone = PlanModification { jobs: vec![b.clone()], ..Default::default() };
        assert_eq!(alone.apply(&workflow(), now).unwrap_err(), ModificationError::Started("job `B`".into()));
        let alone = PlanModification { transfers: vec![moved.clone()], ..Default::default() };
        let err = alone.apply(&workflow(), now).unwrap_err();
        assert_eq!(err, ModificationError::Started("transfer A->B".into()));
        // What waits still starts after now.
        let mut no_transfer = workflow();
        no_transfer.transfers.clear();
        let a_later = JobChange { duration_s: Some(3750), ..a }; // A ends at 4750
        let b_early = JobChange { offset_s: Some(3690), ..b }; // B would start at 4690
        let m = PlanModification { jobs: vec![a_later, b_early], ..Default::default() };
        assert!(matches!(m.apply(&no_transfer, now), Err(ModificationError::InThePast { .. })));
    }

    fn change(name: &str) -> JobChange {
        JobChange { name: name.into(), ..Default::default() }
    }

    /// A job ended early and its reservation shortened gives back its slack first: the
    /// footprint's slack and critical path stay true (before, a job shortened below its slack
    /// kept it all: more slack than booked, and a run of less than nothing).
    #[test]
    fn a_shorter_job_gives_back_its_slack_first() {
        let mut w = workflow();
        w.transfers.clear();
        w.jobs[0].slack_s = 600; // A: 2400 s of run, 600 of slack
        let length =
            |s| PlanModification { jobs: vec![JobChange { duration_s: Some(s), ..change("A") }], ..Default::default() };
        let o = length(2700).apply(&w, t(0)).unwrap();
        assert_eq!(o.jobs[0].slack_s, 300);
        let f = o.footprint.unwrap();
        assert_eq!((f.slack_cpu_s, f.critical_path_s), (4 * 300, 2400 + 3000));
        let o = length(1000).apply(&w, t(0)).unwrap();
        assert_eq!(o.jobs[0].slack_s, 0, "shorter than its run: no slack left");
        let f = o.footprint.unwrap();
        assert_eq!((f.booked_cpu_s, f.slack_cpu_s, f.critical_path_s), (4 * 1000 + 4 * 3000, 0, 1000 + 3000));
        // Longer: the slack stays, the rest is run.
        let o = length(3600).apply(&w, t(0)).unwrap();
        assert_eq!((o.jobs[0].slack_s, o.footprint.unwrap().critical_path_s), (600, 3000 + 3000));
    }

    #[test]
    fn extending_a_job_moves_its_end_and_its_cost() {
        let m = PlanModification {
            jobs: vec![JobChange { duration_s: Some(7200), cpus: Some(8), ..change("B") }],
            ..Default::default()
        };
        let o = m.apply(&plan(), t(0)).unwrap();
        assert_eq!((o.jobs[1].start, o.jobs[1].end, o.jobs[1].cpus), (t(4000), t(11_200), 8));
        assert_eq!(o.jobs[0], plan().jobs[0], "A is unchanged");
        // A: 1 h x 4 CPUs x 1; B: 2 h x 8 CPUs x 1; the transfer: 1 Gbit/s x 1/6 h x 2.
        assert!((o.cost - (4.0 + 16.0 + 2.0 / 6.0)).abs() < 1e-9, "{}", o.cost);
    }

    #[test]
    fn a_new_start_moves_every_part() {
        let m = PlanModification { start: Some(t(3000)), ..Default::default() };
        let o = m.apply(&plan(), t(0)).unwrap();
        assert_eq!(o.start, Some(t(3000)));
        assert_eq!((o.jobs[0].start, o.jobs[1].end), (t(3000), t(9600)));
        assert_eq!((o.transfers[0].start, o.transfers[0].end), (t(6000), t(6600)));
    }

    #[test]
    fn bad_changes_are_refused_with_their_reason() {
        let cases: Vec<(PlanModification, i64, &str)> = vec![
            (PlanModification::default(), 0, "changes nothing"),
            (PlanModification { start: Some(t(1000)), ..Default::default() }, 0, "changes nothing"),
            (PlanModification { jobs: vec![change("Z")], ..Default::default() }, 0, "no job `Z`"),
            (PlanModification { jobs: vec![change("A"), change("A")], ..Default::default() }, 0, "changed twice"),
            (
                PlanModification {
                    transfers: vec![TransferChange { from: "B".into(), to: "A".into(), ..Default::default() }],
                    ..Default::default()
                },
                0,
                "no transfer B->A",
            ),
            (
                PlanModification { jobs: vec![JobChange { cpus: Some(0), ..change("A") }], ..Default::default() },
                0,
                "cpus must be in",
            ),
            (
                PlanModification { jobs: vec![JobChange { duration_s: Some(0), ..change("A") }], ..Default::default() },
                0,
                "duration_s must be in",
            ),
            (PlanModification { start: Some(t(500)), ..Default::default() }, 800, "in the past"),
            (
                PlanModification { jobs: vec![JobChange { cpus: Some(8), ..change("A") }], ..Default::default() },
                2000,
                "has started",
            ),
            (
                PlanModification {
                    jobs: vec![JobChange { duration_s: Some(500), ..change("A") }],
                    ..Default::default()
                },
                2000,
                "not after now",
            ),
            (
                PlanModification {
                    jobs: vec![JobChange { duration_s: Some(20_000), ..change("B") }],
                    ..Default::default()
                },
                0,
                "after the plan's deadline",
            ),
            (
                PlanModification {
                    jobs: vec![JobChange { duration_s: Some(3000), ..change("A") }],
                    ..Default::default()
                },
                0,
                "not lie inside job `A`",
            ),
        ];
        for (m, now, want) in cases {
            let err = m.apply(&plan(), t(now)).unwrap_err().to_string();
            assert!(err.contains(want), "{m:?}: {err} (want {want})");
        }
    }

    #[test]
    fn a_started_job_may_still_change_its_end() {
        let m =
            PlanModification { jobs: vec![JobChange { duration_s: Some(4000), ..change("A") }], ..Default::default() };
        let o = m.apply(&plan(), t(2000)).unwrap();
        assert_eq!(o.jobs[0].end, t(5000));
    }
}
