//! Two-phase commit of a plan (Ando & Aida, section 3.2; docs/protocol.md).
//!
//! Phase 1 is whatever the search ([`super::search`]) did not hold yet: under BBR (and
//! BBR-overlay) the whole plan is prepared in one batch ([`Attempt::prepare_all`]), and a
//! refused prepare aborts the batch and rejects the request; under BIR every part is already
//! held. Then a [`Coordinator`] owns the held parts: the decision (durable when there is a
//! decision log, see [`crate::protocol::decision`]) and phase 2 ([`super::commit`]): commit
//! every part, or give every part back. Recovery ([`super::recover`]) finishes a decided
//! transaction with the same [`Coordinator::finish_decided`] that planning uses.

use std::sync::Arc;

use super::commit::{self, PartName, Phase2, TwoPhaseError, Unsettled};
use super::search::Attempt;
use super::{Booking, ParticipantRef, PlanOptions, PlanResult, Settlement};
use crate::calendar::CapacityCalendar;
use crate::fairshare::Usage;
use crate::model::{LinkId, Outcome, OutcomeStatus, SiteId, Time, MAX_AMOUNT};
use crate::protocol::decision::{crash_point, Decision, DecisionLog, Ending, LogError, Part};
use crate::protocol::{HoldId, HoldLifecycle, HoldRequest, ParticipantError, TxnId};

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

/// A held part of the plan, as the coordinator sees it.
pub(super) struct HeldPart {
    pub(super) participant: Arc<dyn HoldLifecycle>,
    pub(super) target: ParticipantRef,
    pub(super) hold: HoldId,
    /// The prepare message that made the hold (what the decision log records).
    pub(super) request: HoldRequest,
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
                    let user = self.req.user().to_owned();
                    let mut coordinator = self.into_coordinator(parts);
                    // The allocation limit: charged before the decision (atomically per
                    // project), given back unless the plan commits or stays in doubt.
                    if let Some(c) = opts.charge {
                        let usage = Usage::of_outcome(&coordinator.outcome);
                        if let Err(e) = c.ledger.charge(c.key, &user, usage) {
                            let _ = coordinator.compensate(&[]).await;
                            return (coordinator.rejected(e.to_string()), false);
                        }
                    }
                    let result = coordinator.book(opts.log).await;
                    if let Some(c) = opts.charge {
                        let booked = result.outcome.status == OutcomeStatus::Committed
                            || matches!(result.settlement, Settlement::InDoubt(_));
                        if !booked {
                            c.ledger.forget(c.key);
                        }
                    }
                    (result, false)
                }
                Err(cause) => {
                    // Only BBR reaches here with holds of its own not yet aborted: BIR's are parts.
                    self.undo_to(0).await;
                    (self.rejected(cause.to_string()), true)
                }
            },
        }
    }

    /// Every hold of the complete plan: under BBR the batch prepare happens here.
    ///
    /// A refused prepare rejects the request; its reason ends in `(self-conflict: ...)` when
    /// the plan's own parts prepared before it explain the refusal (see [`self_conflict`]).
    pub(super) async fn prepare_all(&mut self) -> Result<Vec<HeldPart>, TwoPhaseError> {
        let mut parts = Vec::new();
        // What this batch has prepared so far: (site, start, end, CPUs), (links, start, end, Mbit/s).
        let mut own_jobs: Vec<(SiteId, Time, Time, u64)> = Vec::new();
        let mut own_transfers: Vec<(Vec<LinkId>, Time, Time, u64)> = Vec::new();
        for v in 0..self.jobs.len() {
            let f = self.jobs[v].clone().expect("complete plan");
            let p = self.lis(&f.site).map_err(TwoPhaseError::UnknownParticipant)?;
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
                            let self_conflict = self_conflict(&e, own);
                            self.give_back(&parts).await;
                            let part = PartName::Job { job: job.name.clone(), site: f.site.clone() };
                            return Err(TwoPhaseError::PrepareRefused { part, source: e, self_conflict });
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
                            let self_conflict = self_conflict(&err, own);
                            self.give_back(&parts).await;
                            let part = PartName::Transfer { from: t.from.clone(), to: t.to.clone() };
                            return Err(TwoPhaseError::PrepareRefused { part, source: err, self_conflict });
                        }
                    }
                }
            };
            own_transfers.push((req.links.clone(), req.start, req.end, req.bandwidth_mbps));
            parts.push(HeldPart { participant: nis, target: ParticipantRef::Network, hold, request: req.into() });
        }
        Ok(parts)
    }

    /// A final rejection (nothing booked).
    fn rejected(&self, reason: impl Into<String>) -> PlanResult {
        PlanResult { outcome: self.reject(reason), bookings: vec![], settlement: Settlement::Final }
    }

    /// Aborts the holds of a refused batch (best effort: what is not aborted ends at its lease).
    async fn give_back(&mut self, parts: &[HeldPart]) {
        let targets: Vec<_> = parts.iter().map(|p| (p.participant.clone(), p.hold)).collect();
        let mut tally = commit::Tally::default();
        let _ = commit::compensate(&targets, &[], true, &mut tally).await;
        self.messages += tally.messages;
        self.holds_aborted += tally.holds_aborted;
    }

    /// Hands the held parts to a coordinator: the jobs' holds (BBR's batch made them just now)
    /// go into the outcome, which names their local reservations. Parts list the jobs first,
    /// in order. From here the parts own the holds (the search's trail is dropped).
    fn into_coordinator(mut self, parts: Vec<HeldPart>) -> Coordinator {
        for (fix, part) in self.jobs.iter_mut().zip(&parts) {
            if let Some(f) = fix {
                f.hold = Some(part.hold);
            }
        }
        Coordinator {
            txn: self.txn,
            outcome: self.outcome(),
            parts,
            started: Some(self.started),
            recovering: false,
            modification: false,
        }
    }
}

/// The coordinator of one transaction over its held parts: decides, commits or gives back,
/// and records it in the decision log. Used by planning ([`Coordinator::book`]) and by
/// recovery ([`Coordinator::finish_decided`]).
pub(super) struct Coordinator {
    txn: TxnId,
    parts: Vec<HeldPart>,
    /// The plan as committed. Its `messages` and `holds_aborted` count on as the coordinator
    /// sends messages (the search's first).
    outcome: Outcome,
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
}

/// The lease a modification's holds get before phase 2 (seconds).
const MODIFICATION_LEASE_S: i64 = 60;

/// How [`Coordinator::finish_decided`] ended a decided transaction.
pub(super) enum Ended {
    /// Every part is committed and the end recorded.
    Committed,
    /// A part refused its commit: every part was given back and the rejection recorded.
    Compensated(Outcome),
}

impl Coordinator {
    /// A coordinator that settles the decided transaction `txn` (recovery): its `parts`, and
    /// the committed `outcome` logged with the decision.
    pub(super) fn recovering(txn: TxnId, parts: Vec<HeldPart>, outcome: Outcome, modification: bool) -> Self {
        Coordinator { txn, parts, outcome, started: None, recovering: true, modification }
    }

    /// A coordinator for a plan modification's replacement holds (`parts`, every one held),
    /// whose committed result is `outcome`; `started` when the modification began.
    pub(super) fn modifying(txn: TxnId, parts: Vec<HeldPart>, outcome: Outcome, started: tokio::time::Instant) -> Self {
        Coordinator { txn, parts, outcome, started: Some(started), recovering: false, modification: true }
    }

    /// A modification's holds with their leases renewed, so that none runs out between the
    /// decision and its commit (a replacement committed while another part's commit is refused
    /// cannot be given back). `Err`: a hold is gone; every part was aborted.
    async fn renew_leases(&mut self) -> Result<(), PlanResult> {
        for p in &self.parts {
            self.outcome.messages += 1;
            if let Err(e) = p.participant.extend(p.hold, MODIFICATION_LEASE_S).await {
                let _ = self.compensate(&[]).await;
                return Err(self.rejected(format!("a replacement hold ran out before the decision: {e}")));
            }
        }
        Ok(())
    }

    /// The outcome as of now: committed, with the messages so far.
    fn current(&self) -> Outcome {
        let mut o = self.outcome.clone();
        if let Some(s) = self.started {
            o.planning_ms = s.elapsed().as_secs_f64() * 1000.0;
        }
        o
    }

    /// A rejection of the plan for `reason`, with the messages and aborts so far.
    fn reject(&self, reason: impl Into<String>) -> Outcome {
        let o = self.current();
        let mut r = Outcome::rejected(&o.request_id, reason, &o.planner);
        r.messages = o.messages;
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
        let bookings = self.parts.into_iter().map(|p| Booking { participant: p.target, hold: p.hold }).collect();
        PlanResult { outcome, bookings, settlement: Settlement::Final }
    }

    fn crash_point(&self, point: &str) {
        if !self.recovering {
            crash_point(point);
        }
    }

    /// Every part as its participant and hold id (what phase 2 sends).
    fn targets(&self) -> Vec<(Arc<dyn HoldLifecycle>, HoldId)> {
        self.parts.iter().map(|p| (p.participant.clone(), p.hold)).collect()
    }

    /// The parts grouped by participant (see [`commit::Groups`]).
    fn groups(&self) -> commit::Groups {
        let mut targets: Vec<&ParticipantRef> = Vec::new();
        let mut groups: commit::Groups = Vec::new();
        for (i, p) in self.parts.iter().enumerate() {
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

    fn holds(&self) -> Vec<HoldId> {
        self.parts.iter().map(|p| p.hold).collect()
    }

    /// Phase 2 in order, one commit per part (see [`commit::commit_parts`]).
    async fn phase2(&mut self) -> Phase2 {
        commit::commit_parts(&self.targets(), &mut self.outcome.messages).await
    }

    /// Gives every part back: releases those known committed (`committed[i]`), aborts the
    /// others (see [`commit::compensate`]).
    ///
    /// # Errors
    /// A participant did not answer: that part may still be booked.
    async fn compensate(&mut self, committed: &[bool]) -> Result<(), TwoPhaseError> {
        let mut tally = commit::Tally::default();
        let r = commit::compensate(&self.targets(), committed, !self.modification, &mut tally).await;
        self.outcome.messages += tally.messages;
        self.outcome.holds_aborted += tally.holds_aborted;
        r
    }

    /// Phase 2 in memory: commit every part; on failure give every part back and answer the
    /// rejection.
    async fn commit_or_give_back(&mut self) -> Result<(), PlanResult> {
        match self.phase2().await {
            Phase2::Committed => Ok(()),
            Phase2::Refused { committed, cause } => {
                let _ = self.compensate(&committed).await;
                Err(self.rejected(cause.to_string()))
            }
            Phase2::Unreachable { cause } => {
                let _ = self.compensate(&[]).await;
                Err(self.rejected(cause.to_string()))
            }
        }
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
        let decided: Vec<Part> = self
            .parts
            .iter()
            .map(|p| Part { participant: p.target.clone(), hold: p.hold, request: p.request.clone() })
            .collect();
        if log.shares_fate() {
            // The outcome as it will be once every commit is sent (one message each).
            let mut outcome = self.current();
            outcome.messages += self.parts.len() as u64;
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
        if let Err(cause) = commit::persist_groups(&groups, &self.holds(), &mut self.outcome.messages).await {
            let _ = self.compensate(&[]).await;
            return self.rejected(cause.to_string());
        }
        // The outcome as it will be once every commit is sent (one message per participant).
        let mut outcome = self.current();
        outcome.messages += groups.len() as u64;
        let decision = Decision { txn: self.txn, parts: &decided, outcome: &outcome };
        if let Err(e) = log.decide(&decision).await {
            let _ = self.compensate(&[]).await;
            return self.undecided(e);
        }
        self.crash_point("after-decision");
        match self.finish_decided(log, false).await {
            Ok(Ended::Committed) => self.committed(),
            Ok(Ended::Compensated(rejected)) => {
                PlanResult { outcome: rejected, bookings: vec![], settlement: Settlement::Final }
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
    async fn decide_then_commit(mut self, log: &dyn DecisionLog, decided: &[Part], outcome: &Outcome) -> PlanResult {
        // A participant in front of a local scheduler makes the new shapes there now, so that
        // its refusal comes before the decision (see `crate::lis::binding`).
        if let Err(cause) = commit::persist_groups(&self.groups(), &self.holds(), &mut self.outcome.messages).await {
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
        let answers = commit::commit_each_part(&self.targets(), &mut self.outcome.messages).await;
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
            let replaced = match &p.request {
                HoldRequest::Compute(r) => r.replaces,
                HoldRequest::Network(r) => r.replaces,
            };
            self.outcome.messages += 1;
            let _ = p.participant.abort(p.hold).await;
            if let Some(old) = replaced {
                self.outcome.messages += 1;
                if let Err(e) = p.participant.release(old).await {
                    tracing::warn!(hold = %old, error = %e, "a broken part's old reservation was not released");
                }
            }
            let at = |start: &chrono::DateTime<chrono::Utc>, end: &chrono::DateTime<chrono::Utc>, s: Time, e: Time| {
                (crate::model::to_time(start), crate::model::to_time(end)) == (s, e)
            };
            match &p.request {
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
            match commit::commit_groups(&self.groups(), &self.holds(), &mut self.outcome.messages).await {
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
                    log.finish(self.txn, Ending::Broken(&self.outcome)).await.map_err(Unsettled::EndNotRecorded)?;
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
        Ok(Ended::Compensated(rejected))
    }
}
