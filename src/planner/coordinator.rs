//! The coordinator of one planning attempt: books the plan [`super::search`] fixed, with
//! two-phase commit (Ando & Aida, section 3.2; docs/protocol.md).
//!
//! Phase 1 is whatever the search did not hold yet: under BBR (and BBR-overlay) the whole plan
//! is prepared in one batch here, and a refused prepare aborts the batch and rejects the
//! request; under BIR every part is already held. Then the decision (durable when there is a
//! decision log, see [`crate::protocol::decision`]) and phase 2 ([`super::commit`]): commit every part, or
//! give every part back.

use std::sync::Arc;

use super::commit::{self, Phase2};
use super::search::Attempt;
use super::{Booking, ParticipantRef, PlanOptions, PlanResult, Settlement};
use crate::calendar::CapacityCalendar;
use crate::fairshare::Usage;
use crate::model::{LinkId, Outcome, OutcomeStatus, SiteId, Time, MAX_AMOUNT};
use crate::protocol::decision::{crash_point, Decision, DecisionLog, LogError, Part};
use crate::protocol::{HoldId, HoldLifecycle, HoldRequest, ParticipantError};

/// Whether a refused batch prepare is a **self-conflict** (Ando & Aida, section 3.2: BBR's
/// searches cannot see the plan's own choices, so two parts of one plan may need the same
/// capacity at once): `e` is a capacity refusal — `requested` over `[start, end)` with only
/// `free` left — and the peak of the plan's own parts already prepared on the same site or
/// link (`own`: `(start, end, amount)`) within that interval is at least what was missing.
/// Then, were those parts not there, the refused one would have had room at the instant the
/// participant measured `free` (up to the own peak falling at another instant of the interval,
/// which makes this an upper bound). Returns the text appended to the rejection's reason, or
/// an empty string.
fn self_conflict(e: &ParticipantError, own: impl Iterator<Item = (Time, Time, u64)>) -> String {
    let (ParticipantError::Capacity { start, end, requested, free }
    | ParticipantError::LinkCapacity { start, end, requested, free, .. }) = *e
    else {
        return String::new();
    };
    let mut cal = CapacityCalendar::new(MAX_AMOUNT);
    for (a, b, n) in own {
        let _ = cal.add(a, b, n);
    }
    let peak = cal.peak_usage(start, end);
    if peak > 0 && free + peak >= requested {
        format!(" (self-conflict: the plan's own parts hold {peak} there at that time)")
    } else {
        String::new()
    }
}

/// A booked part of the plan, as the commit phase sees it.
struct HeldPart {
    participant: Arc<dyn HoldLifecycle>,
    target: ParticipantRef,
    hold: HoldId,
    /// The prepare message that made the hold (what the decision log records).
    request: HoldRequest,
}

impl Attempt<'_> {
    /// The `st` loop (Ando & Aida, Fig. 2), then booking (or, for a dry run, releasing).
    /// The flag is true when the plan was rejected because its batch prepare was refused
    /// (BBR; the planner may plan such a request again, see `PlannerConfig::bbr_replans`).
    pub(crate) async fn run(mut self, opts: PlanOptions<'_>) -> (PlanResult, bool) {
        let rejected = |outcome: Outcome| PlanResult { outcome, bookings: vec![], settlement: Settlement::Final };
        match self.search_plan().await {
            Err(outcome) if self.unsatisfiable => {
                (PlanResult { outcome, bookings: vec![], settlement: Settlement::Unsatisfiable }, false)
            }
            Err(outcome) => (rejected(outcome), false),
            Ok(()) if opts.dry_run => {
                let mut outcome = self.outcome();
                outcome.status = OutcomeStatus::Planned;
                self.undo_to(0).await;
                outcome.messages = self.messages;
                outcome.holds_aborted = self.holds_aborted;
                (rejected(outcome), false)
            }
            Ok(()) => match self.prepare_all().await {
                Ok(parts) => {
                    // The allocation limit: charged before the decision (atomically per
                    // project), given back unless the plan commits or stays in doubt.
                    if let Some(c) = opts.charge {
                        let usage = Usage::of_outcome(&self.outcome());
                        if let Err(e) = c.ledger.charge(c.key, self.req.user(), usage) {
                            let _ = self.compensate(&parts, &[]).await;
                            return (self.rejected(e.to_string()), false);
                        }
                    }
                    let result = self.book(parts, opts.log).await;
                    if let Some(c) = opts.charge {
                        let booked = result.outcome.status == OutcomeStatus::Committed
                            || matches!(result.settlement, Settlement::InDoubt(_));
                        if !booked {
                            c.ledger.forget(c.key);
                        }
                    }
                    (result, false)
                }
                Err(reason) => {
                    // Only BBR reaches here with holds of its own not yet aborted: BIR's are parts.
                    self.undo_to(0).await;
                    (self.rejected(reason), true)
                }
            },
        }
    }

    /// Every hold of the complete plan: under BBR the batch prepare happens here.
    ///
    /// A refused prepare rejects the request; its reason ends in `(self-conflict: ...)` when
    /// the plan's own parts prepared before it explain the refusal (see [`self_conflict`]).
    async fn prepare_all(&mut self) -> Result<Vec<HeldPart>, String> {
        let mut parts = Vec::new();
        // What this batch has prepared so far: (site, start, end, CPUs), (links, start, end, Mbit/s).
        let mut own_jobs: Vec<(SiteId, Time, Time, u64)> = Vec::new();
        let mut own_transfers: Vec<(Vec<LinkId>, Time, Time, u64)> = Vec::new();
        for v in 0..self.jobs.len() {
            let f = self.jobs[v].clone().expect("complete plan");
            let p = self.lis(&f.site).map_err(|e| e.to_string())?;
            let req = self.job_hold(v, &f);
            let hold = match f.hold {
                Some(h) => h,
                None => {
                    let job = &self.req.jobs()[v];
                    self.messages += 1;
                    match p.prepare(&req).await {
                        Ok(h) => h.id,
                        Err(e) => {
                            let own = own_jobs.iter().filter(|(s, ..)| *s == f.site).map(|(_, a, b, n)| (*a, *b, *n));
                            let why = self_conflict(&e, own);
                            let _ = self.compensate(&parts, &[]).await;
                            return Err(format!(
                                "batch prepare failed: job `{}` on site `{}`: {e}{why}",
                                job.name, f.site
                            ));
                        }
                    }
                }
            };
            own_jobs.push((f.site.clone(), req.start, req.end, u64::from(req.cpus)));
            parts.push(HeldPart {
                participant: p,
                target: ParticipantRef::Site(f.site.clone()),
                hold,
                request: req.into(),
            });
        }
        for e in 0..self.transfers.len() {
            let f = self.transfers[e].clone().expect("complete plan");
            if f.route.links.is_empty() {
                continue;
            }
            let nis = self.planner.services.nis.clone();
            let req = self.transfer_hold(e, &f.route.links);
            let hold = match f.hold {
                Some(h) => h,
                None => {
                    let t = &self.req.transfers()[e];
                    self.messages += 1;
                    match nis.prepare(&req).await {
                        Ok(h) => h.id,
                        Err(err) => {
                            let link = match &err {
                                ParticipantError::LinkCapacity { link, .. } => Some(link),
                                _ => None,
                            };
                            let own = own_transfers
                                .iter()
                                .filter(|(links, ..)| link.is_some_and(|l| links.contains(l)))
                                .map(|(_, a, b, n)| (*a, *b, *n));
                            let why = self_conflict(&err, own);
                            let _ = self.compensate(&parts, &[]).await;
                            return Err(format!("batch prepare failed: transfer {}->{}: {err}{why}", t.from, t.to));
                        }
                    }
                }
            };
            own_transfers.push((req.links.clone(), req.start, req.end, req.bandwidth_mbps));
            parts.push(HeldPart { participant: nis, target: ParticipantRef::Network, hold, request: req.into() });
        }
        Ok(parts)
    }

    /// Every part as its participant and hold id (what phase 2 sends).
    fn targets(parts: &[HeldPart]) -> Vec<(Arc<dyn HoldLifecycle>, HoldId)> {
        parts.iter().map(|p| (p.participant.clone(), p.hold)).collect()
    }

    /// The parts grouped by participant (see [`commit::Groups`]).
    fn groups(parts: &[HeldPart]) -> commit::Groups {
        let mut targets: Vec<&ParticipantRef> = Vec::new();
        let mut groups: commit::Groups = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            match targets.iter().position(|t| **t == p.target) {
                Some(g) => groups[g].1.push(i),
                None => {
                    targets.push(&p.target);
                    groups.push((p.participant.clone(), vec![i]));
                }
            }
        }
        groups
    }

    /// Phase 2: commits every part (see [`commit::commit_parts`]).
    async fn phase2(&mut self, parts: &[HeldPart]) -> Phase2 {
        commit::commit_parts(&Self::targets(parts), &mut self.messages).await
    }

    /// Gives every part back: releases those known committed (`committed[i]`), aborts the
    /// others (see [`commit::compensate`]). `Err`: a participant did not answer.
    async fn compensate(&mut self, parts: &[HeldPart], committed: &[bool]) -> Result<(), String> {
        let mut tally = commit::Tally::default();
        let r = commit::compensate(&Self::targets(parts), committed, &mut tally).await;
        self.messages += tally.messages;
        self.holds_aborted += tally.holds_aborted;
        r
    }

    /// A final rejection (nothing booked).
    fn rejected(&self, reason: impl Into<String>) -> PlanResult {
        PlanResult { outcome: self.reject(reason), bookings: vec![], settlement: Settlement::Final }
    }

    /// The decision and phase 2 of a plan whose every part is held (`parts`, from
    /// [`Self::prepare_all`]); with a commit log, the decision is made durable in the order
    /// [`DecisionLog::shares_fate`] asks for, and a plan whose phase 2 cannot be finished now
    /// is left in doubt (see [`crate::protocol::decision`]).
    async fn book(mut self, parts: Vec<HeldPart>, log: Option<&dyn DecisionLog>) -> PlanResult {
        self.trail.clear(); // from here the parts own the holds
                            // Every job's hold (BBR's batch made them just now): the outcome names their local
                            // reservations. Parts list the jobs first, in order.
        for (fix, part) in self.jobs.iter_mut().zip(&parts) {
            if let Some(f) = fix {
                f.hold = Some(part.hold);
            }
        }
        crash_point("after-prepare");
        let Some(log) = log else {
            // No log, so no recovery: whatever stops phase 2 ends in compensation.
            return match self.phase2(&parts).await {
                Phase2::Committed => self.committed(parts),
                Phase2::Refused { committed, reason } => {
                    let _ = self.compensate(&parts, &committed).await;
                    self.rejected(reason)
                }
                Phase2::Unreachable { reason } => {
                    let _ = self.compensate(&parts, &[]).await;
                    self.rejected(reason)
                }
            };
        };
        let decided: Vec<Part> = parts
            .iter()
            .map(|p| Part { participant: p.target.clone(), hold: p.hold, request: p.request.clone() })
            .collect();
        if log.shares_fate() {
            // The outcome as it will be once every commit is sent (one message each).
            let mut outcome = self.outcome();
            outcome.messages += parts.len() as u64;
            let decision = Decision { txn: self.txn, parts: &decided, outcome: &outcome };
            // Participants in this process: commit in memory, then one durable write.
            match self.phase2(&parts).await {
                Phase2::Committed => {}
                Phase2::Refused { committed, reason } => {
                    let _ = self.compensate(&parts, &committed).await;
                    return self.rejected(reason);
                }
                Phase2::Unreachable { reason } => {
                    let _ = self.compensate(&parts, &[]).await;
                    return self.rejected(reason);
                }
            }
            crash_point("after-commit");
            if let Err(e) = log.decide(&decision).await {
                let _ = self.compensate(&parts, &vec![true; parts.len()]).await;
                if let LogError::Refused(reason) = e {
                    return self.rejected(reason);
                }
                return PlanResult {
                    outcome: self.reject(e.to_string()),
                    bookings: vec![],
                    settlement: Settlement::Undecided(e),
                };
            }
            crash_point("after-decision");
            return self.committed(parts);
        }
        // Participants in other processes: they may have granted tentative holds, which must
        // survive their crash once a commit decision is logged. One persist per participant,
        // then the decision, then one commit per participant, all participants at once.
        let groups = Self::groups(&parts);
        let holds: Vec<HoldId> = parts.iter().map(|p| p.hold).collect();
        if let Err(reason) = commit::persist_groups(&groups, &holds, &mut self.messages).await {
            let _ = self.compensate(&parts, &[]).await;
            return self.rejected(reason);
        }
        // The outcome as it will be once every commit is sent (one message per participant).
        let mut outcome = self.outcome();
        outcome.messages += groups.len() as u64;
        let decision = Decision { txn: self.txn, parts: &decided, outcome: &outcome };
        if let Err(e) = log.decide(&decision).await {
            let _ = self.compensate(&parts, &[]).await;
            if let LogError::Refused(reason) = e {
                return self.rejected(reason);
            }
            return PlanResult {
                outcome: self.reject(e.to_string()),
                bookings: vec![],
                settlement: Settlement::Undecided(e),
            };
        }
        crash_point("after-decision");
        let txn = self.txn;
        let in_doubt = |reason: String| {
            tracing::warn!(%txn, %reason, "a decided transaction stays in doubt");
            PlanResult { outcome: outcome.clone(), bookings: vec![], settlement: Settlement::InDoubt(reason) }
        };
        match commit::commit_groups(&groups, &holds, &mut self.messages).await {
            Phase2::Committed => {
                crash_point("after-commit");
                match log.finish(txn, Ok(())).await {
                    Ok(()) => self.committed(parts),
                    Err(e) => in_doubt(format!("every part is committed, but the end could not be recorded: {e}")),
                }
            }
            Phase2::Unreachable { reason } => in_doubt(reason),
            Phase2::Refused { committed, reason } => {
                // Logged before anything is given back: recovery must know a released part
                // was compensated, not cancelled.
                if let Err(e) = log.compensating(txn).await {
                    return in_doubt(format!("{reason}; giving the plan up could not be recorded: {e}"));
                }
                crash_point("after-compensating");
                if let Err(e) = self.compensate(&parts, &committed).await {
                    return in_doubt(format!("{reason}; {e}"));
                }
                let rejected = self.reject(reason);
                match log.finish(txn, Err(&rejected)).await {
                    Ok(()) => PlanResult { outcome: rejected, bookings: vec![], settlement: Settlement::Final },
                    Err(e) => in_doubt(format!("compensated, but the end could not be recorded: {e}")),
                }
            }
        }
    }

    fn committed(&self, parts: Vec<HeldPart>) -> PlanResult {
        let bookings = parts.into_iter().map(|p| Booking { participant: p.target, hold: p.hold }).collect();
        PlanResult { outcome: self.outcome(), bookings, settlement: Settlement::Final }
    }
}
