//! Two-phase commit of a plan (Ando & Aida, section 3.2; docs/protocol.md).
//!
//! Phase 1 is the book's ([`super::book`]): under BIR the search held every part as it fixed
//! it; under BBR (and BBR-overlay) the whole plan is prepared in one batch
//! ([`super::book::Book::prepare_all`]). Then a [`Coordinator`] owns the held parts: the
//! decision (durable when there is a decision log, see [`crate::protocol::decision`]) and
//! phase 2 ([`super::commit`]): commit every part, or give every part back. Planning
//! ([`Coordinator::planning`]), modification ([`Coordinator::modifying`]) and recovery
//! ([`Coordinator::recovering`]) each make one over their parts; recovery finishes a decided
//! transaction with the same [`Coordinator::finish_decided`] that planning uses.

use std::sync::Arc;

use super::commit::{self, Phase2, TwoPhaseError, Unsettled};
use super::sent::Sent;
use super::{Charge, ParticipantRef, PlanResult, Settlement};
use crate::fairshare::Usage;
use crate::model::{Outcome, PlanStatus, Time};
use crate::protocol::decision::{crash_point, Decision, DecisionLog, Ending, LogError, PartHold};
use crate::protocol::{HoldId, HoldLifecycle, HoldRequest, ParticipantError, TxnId};

/// A part's hold as the coordinator drives it: the participant that keeps it, and the hold
/// as the decision log records it.
pub(super) struct HeldPart {
    pub(super) participant: Arc<dyn HoldLifecycle>,
    pub(super) part: PartHold,
}

impl HeldPart {
    /// Hold `hold` of `participant` (reached as `target`), made by `request`.
    pub(super) fn new(
        participant: Arc<dyn HoldLifecycle>,
        target: ParticipantRef,
        hold: HoldId,
        request: HoldRequest,
    ) -> Self {
        HeldPart { participant, part: PartHold { participant: target, hold, request } }
    }
}

/// Every part of `parts` as its participant and hold id (what phase 2 sends).
pub(super) fn targets(parts: &[HeldPart]) -> Vec<(Arc<dyn HoldLifecycle>, HoldId)> {
    parts.iter().map(|p| (p.participant.clone(), p.part.hold)).collect()
}

/// The coordinator of one transaction over its held parts: decides, commits or gives back,
/// and records it in the decision log. Used by planning ([`Coordinator::book`]) and by
/// recovery ([`Coordinator::finish_decided`]).
pub(super) struct Coordinator {
    txn: TxnId,
    parts: Vec<HeldPart>,
    /// The plan as committed. Its `holds_aborted` counts on as the coordinator aborts holds
    /// (the search's first); its `messages` and `rounds` are `sent`'s.
    outcome: Outcome,
    /// The messages and rounds so far, the search's first.
    sent: Sent,
    /// When planning began (`planning_ms` of the outcome); `None` in recovery (the outcome's
    /// own `planning_ms` stands).
    started: Option<tokio::time::Instant>,
    /// Settling a transaction another coordinator decided: no crash points, and a rejection
    /// says the coordinator was interrupted.
    recovering: bool,
    /// The parts are replacement holds of a plan modification: a part known committed has
    /// taken its reservation's place, so giving it back would cancel that job or transfer;
    /// compensation aborts the others only, and phase 2 renews every lease first.
    modification: bool,
    /// Why phase 1's end (persist, or the all-in-one's commit before its decision) failed,
    /// when it did: the participant's error, for the planner to plan again without what
    /// failed ([`Coordinator::failure_cell`]).
    failure: Arc<std::sync::Mutex<Option<ParticipantError>>>,
}

/// The lease a modification's holds get before phase 2 (seconds).
const MODIFICATION_LEASE_S: i64 = 60;

/// How [`Coordinator::finish_decided`] ended a decided transaction.
pub(super) enum Ended {
    /// Every part is committed and the end recorded.
    Committed,
    /// A part refused its commit: every part was given back and the rejection recorded.
    Compensated(Box<Outcome>),
}

impl Coordinator {
    /// The coordinator of a freshly planned transaction `txn`: its held `parts` (jobs first,
    /// in order) and the plan as it will be committed; `started` when planning began.
    pub(super) fn planning(txn: TxnId, parts: Vec<HeldPart>, outcome: Outcome, started: tokio::time::Instant) -> Self {
        Coordinator {
            txn,
            parts,
            sent: Sent::of(&outcome),
            outcome,
            started: Some(started),
            recovering: false,
            modification: false,
            failure: Default::default(),
        }
    }

    /// A coordinator that settles the decided transaction `txn` (recovery): its `parts`, and
    /// the committed `outcome` logged with the decision.
    pub(super) fn recovering(txn: TxnId, parts: Vec<HeldPart>, outcome: Outcome, modification: bool) -> Self {
        Coordinator {
            txn,
            parts,
            sent: Sent::of(&outcome),
            outcome,
            started: None,
            recovering: true,
            modification,
            failure: Default::default(),
        }
    }

    /// A coordinator for a plan modification's replacement holds (`parts`, every one held),
    /// whose committed result is `outcome`; `started` when the modification began.
    pub(super) fn modifying(txn: TxnId, parts: Vec<HeldPart>, outcome: Outcome, started: tokio::time::Instant) -> Self {
        Coordinator { modification: true, ..Self::planning(txn, parts, outcome, started) }
    }

    /// Where the planner reads, once this coordinator is done, the participant error that
    /// rejected the plan before any decision (a persist, or an all-in-one commit, refused or
    /// unanswered); empty otherwise.
    pub(super) fn failure_cell(&self) -> Arc<std::sync::Mutex<Option<ParticipantError>>> {
        self.failure.clone()
    }

    /// Records `cause` as the failure of phase 1's end, if it carries a participant's error.
    fn note_failure(&self, cause: &TwoPhaseError) {
        let e = match cause {
            TwoPhaseError::NotDurable(e)
            | TwoPhaseError::CommitRefused(e)
            | TwoPhaseError::CommitUnanswered { source: e, .. } => e.clone(),
            _ => return,
        };
        *self.failure.lock().expect("failure cell") = Some(e);
    }

    /// A modification's holds with their leases renewed, so that none runs out between the
    /// decision and its commit (a replacement committed while another part's commit is refused
    /// cannot be given back). `Err`: a hold is gone; every part was aborted.
    async fn renew_leases(&mut self) -> Result<(), PlanResult> {
        for p in &self.parts {
            self.sent.one();
            if let Err(e) = p.participant.extend(p.part.hold, MODIFICATION_LEASE_S).await {
                let _ = self.compensate(&[]).await;
                return Err(self.rejected(format!("a replacement hold ran out before the decision: {e}")));
            }
        }
        Ok(())
    }

    /// The outcome as of now: committed, with the messages so far.
    fn current(&self) -> Outcome {
        let mut o = self.outcome.clone();
        self.sent.write_to(&mut o);
        if let Some(s) = self.started {
            o.planning_ms = s.elapsed().as_secs_f64() * 1000.0;
        }
        o
    }

    /// A rejection of the plan for `reason`, with the messages and aborts so far.
    fn reject(&self, reason: impl Into<String>) -> Outcome {
        let o = self.current();
        let mut r = Outcome::rejected(&o.request_id, reason, &o.planner);
        Sent::of(&o).write_to(&mut r);
        r.holds_aborted = o.holds_aborted;
        r.planning_ms = o.planning_ms;
        r
    }

    /// A final rejection (nothing booked).
    fn rejected(&self, reason: impl Into<String>) -> PlanResult {
        PlanResult { outcome: self.reject(reason), bookings: vec![], settlement: Settlement::Final }
    }

    fn committed(self) -> PlanResult {
        let outcome = self.current();
        let bookings = self.parts.iter().map(|p| p.part.booking()).collect();
        PlanResult { outcome, bookings, settlement: Settlement::Final }
    }

    fn crash_point(&self, point: &str) {
        if !self.recovering {
            crash_point(point);
        }
    }

    /// The parts grouped by participant (see [`commit::Groups`]).
    fn groups(&self) -> commit::Groups {
        let mut targets: Vec<&ParticipantRef> = Vec::new();
        let mut groups: commit::Groups = Vec::new();
        for (i, p) in self.parts.iter().enumerate() {
            match targets.iter().position(|t| **t == p.part.participant) {
                Some(g) => groups[g].1.push(i),
                None => {
                    targets.push(&p.part.participant);
                    groups.push((p.participant.clone(), vec![i]));
                }
            }
        }
        groups
    }

    fn holds(&self) -> Vec<HoldId> {
        self.parts.iter().map(|p| p.part.hold).collect()
    }

    /// Phase 2 in order, one commit per part (see [`commit::commit_parts`]).
    async fn phase2(&mut self) -> Phase2 {
        commit::commit_parts(&targets(&self.parts), &mut self.sent).await
    }

    /// Gives every part back: releases those known committed (`committed[i]`), aborts the
    /// others (see [`commit::compensate`]).
    ///
    /// # Errors
    /// A participant did not answer: that part may still be booked.
    async fn compensate(&mut self, committed: &[bool]) -> Result<(), TwoPhaseError> {
        let mut tally = commit::Tally::default();
        let r = commit::compensate(&targets(&self.parts), committed, !self.modification, &mut tally).await;
        self.sent.then(tally.sent);
        self.outcome.holds_aborted += tally.holds_aborted;
        r
    }

    /// Phase 2 in memory: commit every part; on failure give every part back and answer the
    /// rejection.
    async fn commit_or_give_back(&mut self) -> Result<(), PlanResult> {
        match self.phase2().await {
            Phase2::Committed => Ok(()),
            Phase2::Refused { committed, cause } => {
                self.note_failure(&cause);
                let _ = self.compensate(&committed).await;
                Err(self.rejected(cause.to_string()))
            }
            Phase2::Unreachable { cause } => {
                self.note_failure(&cause);
                let _ = self.compensate(&[]).await;
                Err(self.rejected(cause.to_string()))
            }
        }
    }

    /// [`Self::book`] under fair share's allocation limit (`charge`, if any): the plan is
    /// charged to `user`'s project before the decision (atomically per project) and rejected
    /// if it does not fit; the charge is given back unless the plan commits or stays in doubt.
    pub(super) async fn book_charged(
        mut self,
        user: &str,
        charge: Option<Charge<'_>>,
        log: Option<&dyn DecisionLog>,
    ) -> PlanResult {
        let Some(c) = charge else { return self.book(log).await };
        if let Err(e) = c.ledger.charge(c.key, user, Usage::of_outcome(&self.outcome)) {
            let _ = self.compensate(&[]).await;
            return self.rejected(e.to_string());
        }
        let result = self.book(log).await;
        let booked = matches!(result.status(), PlanStatus::Committed | PlanStatus::Pending);
        if !booked {
            c.ledger.forget(c.key);
        }
        result
    }

    /// The decision and phase 2 of a plan whose every part is held; with a decision log, the
    /// decision is made durable in the order [`DecisionLog::shares_fate`] asks for, and a plan
    /// whose phase 2 cannot be finished now is left in doubt (see
    /// [`crate::protocol::decision`]).
    pub(super) async fn book(mut self, log: Option<&dyn DecisionLog>) -> PlanResult {
        self.crash_point("after-prepare");
        if self.modification {
            if let Err(rejected) = self.renew_leases().await {
                return rejected;
            }
        }
        let Some(log) = log else {
            // No log, so no recovery: whatever stops phase 2 ends in compensation.
            return match self.commit_or_give_back().await {
                Ok(()) => self.committed(),
                Err(rejected) => rejected,
            };
        };
        let decided: Vec<PartHold> = self.parts.iter().map(|p| p.part.clone()).collect();
        if log.shares_fate() {
            // The outcome as it will be once every commit is sent (one message each, one after
            // the other).
            let mut outcome = self.current();
            let mut will = Sent::of(&outcome);
            will.one_by_one(self.parts.len() as u64);
            will.write_to(&mut outcome);
            if self.modification {
                return self.decide_then_commit(log, &decided, &outcome).await;
            }
            // Participants in this process: commit in memory, then one durable write.
            if let Err(rejected) = self.commit_or_give_back().await {
                return rejected;
            }
            self.crash_point("after-commit");
            let decision = Decision { txn: self.txn, parts: &decided, outcome: &outcome };
            if let Err(e) = log.decide(&decision).await {
                let _ = self.compensate(&vec![true; self.parts.len()]).await;
                return self.undecided(e);
            }
            self.crash_point("after-decision");
            return self.committed();
        }
        // Participants in other processes: they may have granted tentative holds, which must
        // survive their crash once a commit decision is logged. One persist per participant,
        // then the decision, then one commit per participant, all participants at once.
        let groups = self.groups();
        if let Err(cause) = commit::persist_groups(&groups, &self.holds(), &mut self.sent).await {
            self.note_failure(&cause);
            let _ = self.compensate(&[]).await;
            return self.rejected(cause.to_string());
        }
        // The outcome as it will be once every commit is sent (one message per participant, all
        // at once).
        let mut outcome = self.current();
        let mut will = Sent::of(&outcome);
        will.together(groups.len() as u64);
        will.write_to(&mut outcome);
        let decision = Decision { txn: self.txn, parts: &decided, outcome: &outcome };
        if let Err(e) = log.decide(&decision).await {
            let _ = self.compensate(&[]).await;
            return self.undecided(e);
        }
        self.crash_point("after-decision");
        match self.finish_decided(log, false).await {
            Ok(Ended::Committed) => self.committed(),
            Ok(Ended::Compensated(rejected)) => {
                PlanResult { outcome: *rejected, bookings: vec![], settlement: Settlement::Final }
            }
            Err(cause) => {
                tracing::warn!(txn = %self.txn, reason = %cause, "a decided transaction stays in doubt");
                PlanResult { outcome, bookings: vec![], settlement: Settlement::InDoubt(Box::new(cause)) }
            }
        }
    }

    /// A modification with participants in this process: the durable write first (the plan
    /// as modified, the replacements committed and the replaced reservations released), then
    /// the commits in memory. The other order, planning's, cannot be undone when the write
    /// fails: a committed replacement has released its reservation, and giving it back would
    /// cancel the part. This way a refused write aborts every hold and nothing changed, and a
    /// crash after it is restored from the store as modified. The commits cannot be refused
    /// in process once the leases were renewed; if one still is, the decision stands for the
    /// other parts and that part is broken ([`Coordinator::break_failed`]).
    async fn decide_then_commit(
        mut self,
        log: &dyn DecisionLog,
        decided: &[PartHold],
        outcome: &Outcome,
    ) -> PlanResult {
        // A participant in front of a local scheduler makes the new shapes there now, so that
        // its refusal comes before the decision (see `crate::lis::binding`).
        if let Err(cause) = commit::persist_groups(&self.groups(), &self.holds(), &mut self.sent).await {
            let _ = self.compensate(&[]).await;
            return self.rejected(cause.to_string());
        }
        let decision = Decision { txn: self.txn, parts: decided, outcome };
        if let Err(e) = log.decide(&decision).await {
            let _ = self.compensate(&[]).await;
            return self.undecided(e);
        }
        self.crash_point("after-decision");
        // Every part is sent its commit, whatever the others answer: the decision stands.
        let answers = commit::commit_each_part(&self.groups(), &self.holds(), &mut self.sent).await;
        let failed: Vec<usize> = answers.iter().enumerate().filter(|(_, r)| r.is_err()).map(|(i, _)| i).collect();
        if let Some(Err(e)) = answers.into_iter().find(Result::is_err) {
            self.break_failed(&failed, &TwoPhaseError::CommitRefused(e)).await;
        }
        self.crash_point("after-commit");
        self.committed()
    }

    /// A decided modification whose parts `failed` (indices) could not be committed: the
    /// decision stands for the others. Each failed part's replacement hold is aborted and the
    /// reservation it replaced released, so that no reservation outlives the plan's record of
    /// it, and the part is marked broken with `cause` (the caller marks the plan broken).
    async fn break_failed(&mut self, failed: &[usize], cause: &TwoPhaseError) {
        tracing::error!(txn = %self.txn, parts = failed.len(), reason = %cause, "a decided modification's commit failed: its part is broken");
        let reason =
            format!("its modification was decided but could not be committed ({cause}); it holds no reservation");
        for &i in failed {
            let p = &self.parts[i];
            let replaced = match &p.part.request {
                HoldRequest::Compute(r) => r.replaces,
                HoldRequest::Network(r) => r.replaces,
            };
            self.sent.one();
            let _ = p.participant.abort(p.part.hold).await;
            if let Some(old) = replaced {
                self.sent.one();
                if let Err(e) = p.participant.release(old).await {
                    tracing::warn!(hold = %old, error = %e, "a broken part's old reservation was not released");
                }
            }
            let at = |start: &chrono::DateTime<chrono::Utc>, end: &chrono::DateTime<chrono::Utc>, s: Time, e: Time| {
                (crate::model::to_time(start), crate::model::to_time(end)) == (s, e)
            };
            match &p.part.request {
                HoldRequest::Compute(r) => {
                    let job = self
                        .outcome
                        .jobs
                        .iter_mut()
                        .find(|j| j.site == r.site && j.cpus == r.cpus && at(&j.start, &j.end, r.start, r.end));
                    if let Some(j) = job {
                        j.broken = Some(reason.clone());
                    }
                }
                HoldRequest::Network(r) => {
                    let transfer = self
                        .outcome
                        .transfers
                        .iter_mut()
                        .find(|t| t.path == r.links && at(&t.start, &t.end, r.start, r.end));
                    if let Some(t) = transfer {
                        t.broken = Some(reason.clone());
                    }
                }
            }
        }
    }

    /// The log did not take the decision: nothing is booked (the parts were given back).
    fn undecided(&self, e: LogError) -> PlanResult {
        if let LogError::Refused(reason) = e {
            return self.rejected(reason);
        }
        PlanResult { outcome: self.reject(e.to_string()), bookings: vec![], settlement: Settlement::Undecided(e) }
    }

    /// Phase 2 of a decided transaction whose participants keep their holds durable, and its
    /// end in `log`: commit every part (one message per participant, again while the answer
    /// is indeterminate) and record the end. If a part refuses, all-or-nothing again: the log
    /// first records that the transaction is given up (so that recovery knows a released part
    /// was compensated, not cancelled), then every part is given back, then the rejection is
    /// recorded. `given_up`: the log already says so (recovery); only the compensation
    /// remains. A modification is not given back once decided: a part that refuses is broken
    /// ([`Coordinator::break_failed`]) and the end recorded says so ([`Ending::Broken`]), in
    /// planning and in recovery alike.
    ///
    /// # Errors
    /// [`Unsettled`]: a participant or the log did not answer; the transaction stays in doubt
    /// for a later recovery round.
    pub(super) async fn finish_decided(&mut self, log: &dyn DecisionLog, given_up: bool) -> Result<Ended, Unsettled> {
        let (cause, committed) = if given_up {
            (TwoPhaseError::GivenUp, Vec::new())
        } else {
            match commit::commit_groups(&self.groups(), &self.holds(), &mut self.sent).await {
                Phase2::Committed => {
                    self.crash_point("after-commit");
                    log.finish(self.txn, Ending::Committed).await.map_err(Unsettled::EndNotRecorded)?;
                    return Ok(Ended::Committed);
                }
                Phase2::Unreachable { cause } => return Err(cause.into()),
                // A modification's decision stands for the parts that committed (they have
                // released what they replaced): the others are broken, not given back.
                Phase2::Refused { committed, cause } if self.modification => {
                    let failed: Vec<usize> = (0..self.parts.len()).filter(|&i| !committed[i]).collect();
                    self.break_failed(&failed, &cause).await;
                    self.crash_point("after-commit");
                    log.finish(self.txn, Ending::Broken(&self.current())).await.map_err(Unsettled::EndNotRecorded)?;
                    return Ok(Ended::Committed);
                }
                Phase2::Refused { committed, cause } => {
                    if let Err(source) = log.compensating(self.txn).await {
                        return Err(Unsettled::GiveUpNotRecorded { cause, source });
                    }
                    self.crash_point("after-compensating");
                    (cause, committed)
                }
            }
        };
        if let Err(source) = self.compensate(&committed).await {
            return Err(Unsettled::CompensationUnanswered { cause, source });
        }
        let rejected = if self.recovering {
            self.reject(format!("{cause} (after its coordinator was interrupted)"))
        } else {
            self.reject(cause.to_string())
        };
        log.finish(self.txn, Ending::Compensated(&rejected)).await.map_err(Unsettled::RejectionNotRecorded)?;
        Ok(Ended::Compensated(Box::new(rejected)))
    }
}
