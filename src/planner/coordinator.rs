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
use crate::model::{Outcome, OutcomeStatus};
use crate::protocol::decision::{crash_point, Decision, DecisionLog, Part};
use crate::protocol::{HoldId, HoldLifecycle, HoldRequest};

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
    pub(crate) async fn run(mut self, opts: PlanOptions<'_>) -> PlanResult {
        let rejected = |outcome: Outcome| PlanResult { outcome, bookings: vec![], settlement: Settlement::Final };
        match self.search_plan().await {
            Err(outcome) => rejected(outcome),
            Ok(()) if opts.dry_run => {
                let mut outcome = self.outcome();
                outcome.status = OutcomeStatus::Planned;
                self.undo_to(0).await;
                outcome.messages = self.messages;
                outcome.holds_aborted = self.holds_aborted;
                rejected(outcome)
            }
            Ok(()) => self.book(opts.log).await,
        }
    }

    /// Every hold of the complete plan: under BBR the batch prepare happens here.
    async fn prepare_all(&mut self) -> Result<Vec<HeldPart>, String> {
        let mut parts = Vec::new();
        for v in 0..self.jobs.len() {
            let f = self.jobs[v].clone().expect("complete plan");
            let p = self.lis(&f.site).map_err(|e| e.to_string())?;
            let req = self.job_hold(v, &f.site);
            let hold = match f.hold {
                Some(h) => h,
                None => {
                    let job = &self.req.jobs()[v];
                    self.messages += 1;
                    match p.prepare(&req).await {
                        Ok(h) => h.id,
                        Err(e) => {
                            let _ = self.compensate(&parts, &[]).await;
                            return Err(format!("batch prepare failed: job `{}` on site `{}`: {e}", job.name, f.site));
                        }
                    }
                }
            };
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
                            let _ = self.compensate(&parts, &[]).await;
                            return Err(format!("batch prepare failed: transfer {}->{}: {err}", t.from, t.to));
                        }
                    }
                }
            };
            parts.push(HeldPart { participant: nis, target: ParticipantRef::Network, hold, request: req.into() });
        }
        Ok(parts)
    }

    /// Every part as its participant and hold id (what phase 2 sends).
    fn targets(parts: &[HeldPart]) -> Vec<(Arc<dyn HoldLifecycle>, HoldId)> {
        parts.iter().map(|p| (p.participant.clone(), p.hold)).collect()
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

    /// Phase 1 (BBR batch or BIR's holds), decision, phase 2; with a commit log, the decision
    /// is made durable in the order [`DecisionLog::shares_fate`] asks for, and a plan whose
    /// phase 2 cannot be finished now is left in doubt (see [`crate::protocol::decision`]).
    async fn book(mut self, log: Option<&dyn DecisionLog>) -> PlanResult {
        let parts = match self.prepare_all().await {
            Ok(parts) => parts,
            Err(reason) => {
                // Only BBR reaches here with holds of its own not yet aborted: BIR's are parts.
                self.undo_to(0).await;
                return self.rejected(reason);
            }
        };
        self.trail.clear(); // from here the parts own the holds
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
        // The outcome as it will be once every commit is sent (one message each).
        let mut outcome = self.outcome();
        outcome.messages += parts.len() as u64;
        let decision = Decision { txn: self.txn, parts: &decided, outcome: &outcome };
        if log.shares_fate() {
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
                return PlanResult {
                    outcome: self.reject(e.to_string()),
                    bookings: vec![],
                    settlement: Settlement::Undecided(e),
                };
            }
            crash_point("after-decision");
            return self.committed(parts);
        }
        if let Err(e) = log.decide(&decision).await {
            let _ = self.compensate(&parts, &[]).await;
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
        match self.phase2(&parts).await {
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
