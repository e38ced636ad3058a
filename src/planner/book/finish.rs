//! The finished plan: its outcome, phase 1 of two-phase commit for the parts not held yet
//! (BBR's batch prepare, Ando & Aida, section 3.2) and the hand-over of every held part to the
//! [`Coordinator`].

use super::Book;
use crate::calendar::CapacityCalendar;
use crate::model::{
    from_time, Footprint, JobPlacement, LinkId, Outcome, PlanStatus, SiteId, Time, TransferPlacement, TransferTraffic,
    MAX_AMOUNT,
};
use crate::planner::commit::{self, PartName, TwoPhaseError};
use crate::planner::coordinator::{self, Coordinator, HeldPart};
use crate::planner::fixes::TentativeBook;
use crate::planner::{ParticipantRef, PlanResult, Settlement};
use crate::protocol::{HoldId, Participant, ParticipantError, Role};

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

impl Book<'_> {
    /// The outcome of the complete plan, as committed.
    pub(in crate::planner) fn outcome(&self) -> Outcome {
        let req = self.req;
        let mut cost = 0.0;
        let jobs = req
            .jobs()
            .iter()
            .zip(&self.fixes.jobs)
            .enumerate()
            .map(|(v, (job, fix))| {
                let fix = fix.as_ref().expect("complete plan");
                let span = req.job_span(v);
                let start = fix.start;
                let per_hour =
                    f64::from(job.cpus) * fix.price_per_cpu_hour + f64::from(job.gpus()) * fix.price_per_gpu_hour;
                cost += span.duration_s as f64 / 3600.0 * per_hour;
                JobPlacement {
                    name: job.name.clone(),
                    site: fix.site.clone(),
                    start: from_time(start),
                    end: from_time(start + span.duration_s),
                    cpus: job.cpus,
                    gpus: Self::gpus_of(job, fix),
                    reservation_name: fix
                        .reservation_prefix
                        .as_ref()
                        .zip(fix.hold)
                        .map(|(p, h)| crate::protocol::local_reservation_name(p, h)),
                    broken: None,
                    state: None,
                    price_per_cpu_hour: fix.price_per_cpu_hour,
                    price_per_gpu_hour: if job.gpus() > 0 { fix.price_per_gpu_hour } else { 0.0 },
                    after: req.after(v).iter().map(|&p| req.jobs()[p].name.clone()).collect(),
                    slack_s: req.slack_s(v),
                }
            })
            .collect::<Vec<_>>();
        let transfers = req
            .transfers()
            .iter()
            .zip(&self.fixes.transfers)
            .enumerate()
            .map(|(e, (t, fix))| {
                let fix = fix.as_ref().expect("complete plan");
                let (start, end) = self.fixes.transfer_interval(req, e);
                cost +=
                    t.bandwidth_mbps as f64 / 1000.0 * (end - start) as f64 / 3600.0 * fix.route.price_per_gbps_hour;
                TransferPlacement {
                    from: t.from.clone(),
                    to: t.to.clone(),
                    path: fix.route.links.clone(),
                    bandwidth_mbps: t.bandwidth_mbps,
                    start: from_time(start),
                    end: from_time(end),
                    traffic: fix.route.marking.as_ref().zip(fix.hold).map(|(m, h)| TransferTraffic {
                        protocol: "tcp".into(),
                        from_addr: m.from_addr.clone(),
                        to_addr: m.to_addr.clone(),
                        port: m.port(h),
                    }),
                    broken: None,
                    state: None,
                    price_per_gbps_hour: fix.route.price_per_gbps_hour,
                    mode: t.mode,
                }
            })
            .collect();
        Outcome {
            footprint: Footprint::of(&jobs),
            request_id: req.id().to_owned(),
            status: PlanStatus::Committed,
            reason: None,
            start: Some(from_time(self.fixes.st)),
            deadline: Some(from_time(req.deadline())),
            jobs,
            transfers,
            cost,
            planning_ms: self.elapsed_ms(),
            planner: self.planner.cfg.name.clone(),
            messages: self.sent.messages,
            rounds: self.sent.rounds,
            holds_aborted: self.holds_aborted,
        }
    }
    /// Every hold of the complete plan: under BBR the batch prepare happens here.
    ///
    /// A refused prepare rejects the request; its reason ends in `(self-conflict: ...)` when
    /// the plan's own parts prepared before it explain the refusal (see [`self_conflict`]).
    pub(in crate::planner) async fn prepare_all(&mut self) -> Result<Vec<HeldPart>, TwoPhaseError> {
        let mut parts = Vec::new();
        // What this batch has prepared so far: (site, start, end, CPUs), (links, start, end, Mbit/s).
        let mut own_jobs: Vec<(SiteId, Time, Time, u64)> = Vec::new();
        let mut own_transfers: Vec<(Vec<LinkId>, Time, Time, u64)> = Vec::new();
        for v in 0..self.fixes.jobs.len() {
            let f = self.fixes.jobs[v].clone().expect("complete plan");
            let p = self.lis(&f.site).map_err(TwoPhaseError::UnknownParticipant)?;
            let req = self.job_hold(v, &f);
            let hold = match self.held_or_prepare(f.hold, &*p, &req).await {
                Ok(h) => h,
                Err(e) => {
                    let own = own_jobs.iter().filter(|(s, ..)| *s == f.site).map(|(_, a, b, n)| (*a, *b, *n));
                    let part = PartName::Job { job: self.req.jobs()[v].name.clone(), site: f.site.clone() };
                    return Err(self.refused(&parts, part, e, own).await);
                }
            };
            own_jobs.push((f.site.clone(), req.start, req.end, u64::from(req.cpus)));
            parts.push(HeldPart::new(p, ParticipantRef::Site(f.site.clone()), hold, req.into()));
        }
        for e in 0..self.fixes.transfers.len() {
            let f = self.fixes.transfers[e].clone().expect("complete plan");
            if f.route.links.is_empty() {
                continue;
            }
            let nis = self.planner.services.nis.clone();
            let req = self.transfer_hold(e, &f.route.links);
            let hold = match self.held_or_prepare(f.hold, &*nis, &req).await {
                Ok(h) => h,
                Err(err) => {
                    let link = match &err {
                        ParticipantError::LinkCapacity { link, .. } => Some(link.clone()),
                        _ => None,
                    };
                    let own = own_transfers
                        .iter()
                        .filter(|(links, ..)| link.as_ref().is_some_and(|l| links.contains(l)))
                        .map(|(_, a, b, n)| (*a, *b, *n));
                    let t = &self.req.transfers()[e];
                    let part = PartName::Transfer { from: t.from.clone(), to: t.to.clone() };
                    return Err(self.refused(&parts, part, err, own).await);
                }
            };
            own_transfers.push((req.links.clone(), req.start, req.end, req.bandwidth_mbps));
            parts.push(HeldPart::new(nis, ParticipantRef::Network, hold, req.into()));
        }
        Ok(parts)
    }

    /// The hold a fix already has (BIR holds as it searches), or one prepared now with `req` at
    /// `p` (BBR's batch; one message).
    async fn held_or_prepare<R: Role>(
        &mut self,
        held: Option<HoldId>,
        p: &dyn Participant<R>,
        req: &R::Prepare,
    ) -> Result<HoldId, ParticipantError> {
        if let Some(h) = held {
            return Ok(h);
        }
        self.sent.one();
        p.prepare(req).await.map(|h| h.id)
    }

    /// A batch prepare refused with `e` at `part`: the holds prepared so far (`parts`) given
    /// back, and the refusal, with its self-conflict explained from `own` (see
    /// [`self_conflict`]).
    async fn refused(
        &mut self,
        parts: &[HeldPart],
        part: PartName,
        e: ParticipantError,
        own: impl Iterator<Item = (Time, Time, u64)>,
    ) -> TwoPhaseError {
        let self_conflict = self_conflict(&e, own);
        self.give_back(parts).await;
        TwoPhaseError::PrepareRefused { part, source: e, self_conflict }
    }

    /// A final rejection (nothing booked).
    pub(in crate::planner) fn rejected(&self, reason: impl Into<String>) -> PlanResult {
        PlanResult { outcome: self.reject(reason), bookings: vec![], settlement: Settlement::Final }
    }

    /// Aborts the holds of a refused batch (best effort: what is not aborted ends at its lease).
    async fn give_back(&mut self, parts: &[HeldPart]) {
        let targets = coordinator::targets(parts);
        let mut tally = commit::Tally::default();
        let _ = commit::compensate(&targets, &[], true, &mut tally).await;
        self.sent.then(tally.sent);
        self.holds_aborted += tally.holds_aborted;
    }

    /// Hands the held parts to a coordinator: the jobs' holds (BBR's batch made them just now)
    /// go into the outcome, which names their local reservations. Parts list the jobs first,
    /// in order. From here the parts own the holds (the search's trail is dropped).
    pub(in crate::planner) fn into_coordinator(mut self, parts: Vec<HeldPart>) -> Coordinator {
        for (fix, held) in self.fixes.jobs.iter_mut().zip(&parts) {
            if let Some(f) = fix {
                f.hold = Some(held.part.hold);
            }
        }
        Coordinator::planning(self.txn, parts, self.outcome(), self.started)
    }
}
