//! Modifying a committed plan (issue 25): one replacement hold per changed part, then the same
//! [`Coordinator`] as planning decides and commits them all or none (docs/protocol.md,
//! "Modification").
//!
//! The plan as it should be comes from [`crate::model::PlanModification::apply`]. Every part
//! keeps its site or path; a part that changes gets a hold that *replaces* its committed
//! reservation ([`crate::protocol::ComputeHoldRequest::replaces`]): the participant checks the
//! new shape as if the old one were gone, keeps both until the decision, and swaps them at
//! commit. A refused prepare aborts the others: the plan, the calendars and the event log stay
//! as they were, and the answer names the part and when it could start instead.

use super::commit::{self, PartName};
use super::coordinator::{self, Coordinator, HeldPart};
use super::sent::Sent;
use super::{Booking, PlanResult, Planner, Settlement};
use crate::model::{to_time, Outcome, PlanStatus, SiteId};
use crate::protocol::decision::{replaced_bookings, DecisionLog, PartHold};
use crate::protocol::{ComputeHoldRequest, ComputeQuery, NetworkHoldRequest, ParticipantError, ParticipantRef, TxnId};

/// Per-call options of [`Planner::modify`].
#[derive(Clone, Copy, Default)]
pub struct ModifyOptions<'a> {
    /// The plan's owner (prepare messages carry it, as for planning).
    pub user: Option<&'a str>,
    /// Where the coordinator logs its decision; `None`: nothing is logged.
    pub log: Option<&'a dyn DecisionLog>,
}

/// One part of a plan and its committed reservation.
enum PartBooking<'a> {
    Job(usize, &'a Booking),
    Transfer(usize, &'a Booking),
}

/// Why a plan's bookings do not match its parts (a store that lost or reordered them): the plan
/// cannot be modified.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum BookingMismatch {
    #[error("the plan has {parts} parts but {bookings} bookings")]
    Count { parts: usize, bookings: usize },
    #[error("job `{job}` is booked at {at}, not at site `{site}`")]
    JobElsewhere { job: String, at: ParticipantRef, site: SiteId },
    #[error("transfer {transfer} is booked at {at}")]
    TransferElsewhere { transfer: usize, at: ParticipantRef },
}

/// The plan's parts matched with its bookings: one per job, in order, then one per transfer
/// that crosses the network, in order (what the coordinator booked, see `into_coordinator`).
fn booked_parts<'a>(plan: &Outcome, bookings: &'a [Booking]) -> Result<Vec<PartBooking<'a>>, BookingMismatch> {
    let networked: Vec<usize> = (0..plan.transfers.len()).filter(|&e| !plan.transfers[e].path.is_empty()).collect();
    if bookings.len() != plan.jobs.len() + networked.len() {
        return Err(BookingMismatch::Count { parts: plan.jobs.len() + networked.len(), bookings: bookings.len() });
    }
    let mut parts = Vec::with_capacity(bookings.len());
    for (i, (j, b)) in plan.jobs.iter().zip(bookings).enumerate() {
        if b.participant != ParticipantRef::Site(j.site.clone()) {
            return Err(BookingMismatch::JobElsewhere {
                job: j.name.clone(),
                at: b.participant.clone(),
                site: j.site.clone(),
            });
        }
        parts.push(PartBooking::Job(i, b));
    }
    for (&e, b) in networked.iter().zip(&bookings[plan.jobs.len()..]) {
        if b.participant != ParticipantRef::Network {
            return Err(BookingMismatch::TransferElsewhere { transfer: e, at: b.participant.clone() });
        }
        parts.push(PartBooking::Transfer(e, b));
    }
    Ok(parts)
}

impl Planner {
    /// Books `new` (the plan as [`crate::model::PlanModification::apply`] returned it) in the
    /// place of `old`, whose committed reservations are `bookings` (as the plan was booked:
    /// jobs, then networked transfers). Only the parts that differ are touched, each with a
    /// replacement hold, all committed together or none.
    ///
    /// The result's outcome is `new` committed (with this modification's messages, planning
    /// time and planner) and its bookings the plan's whole new list; or a rejection whose
    /// reason names the part that did not fit (and, for a job, when it could start), with
    /// nothing changed. With a log, [`Settlement`] says as for planning whether the outcome is
    /// final.
    pub async fn modify(
        &self,
        old: &Outcome,
        bookings: &[Booking],
        new: &Outcome,
        opts: ModifyOptions<'_>,
    ) -> PlanResult {
        let started = tokio::time::Instant::now();
        let reject = |reason: String, sent: Sent, aborted: u64| {
            let mut o = Outcome::rejected(&old.request_id, reason, &self.cfg.name);
            sent.write_to(&mut o);
            o.holds_aborted = aborted;
            o.planning_ms = started.elapsed().as_secs_f64() * 1000.0;
            PlanResult { outcome: o, bookings: vec![], settlement: Settlement::Final }
        };
        let parts = match booked_parts(old, bookings) {
            Ok(p) => p,
            Err(e) => return reject(format!("the plan cannot be modified: {e}"), Sent::default(), 0),
        };
        let txn = TxnId::new();
        let user = opts.user.map(str::to_owned);
        let mut held: Vec<HeldPart> = Vec::new();
        // The replacements are prepared one after the other: a refusal stops the others.
        let mut sent = Sent::default();
        for part in parts {
            let (name, target, prepared) = match part {
                PartBooking::Job(i, b) => {
                    let (o, n) = (&old.jobs[i], &new.jobs[i]);
                    if (o.start, o.end, o.cpus) == (n.start, n.end, n.cpus) {
                        continue;
                    }
                    let req = ComputeHoldRequest {
                        txn,
                        site: n.site.clone(),
                        cpus: n.cpus,
                        start: to_time(&n.start),
                        end: to_time(&n.end),
                        gpus: n.gpus.clone(),
                        user: user.clone(),
                        replaces: Some(b.hold),
                        // The job keeps its local reservation, under its name (docs/protocol.md).
                        reservation_name: o.reservation_name.clone(),
                    };
                    let lis = match self.services.lis.get(&n.site) {
                        Some(l) => l.clone(),
                        None => {
                            let aborted = give_back(&held, &mut sent).await;
                            return reject(format!("unknown site `{}`", n.site), sent, aborted);
                        }
                    };
                    sent.one();
                    let r = lis.prepare(&req).await;
                    let name = PartName::Job { job: n.name.clone(), site: n.site.clone() };
                    (name, (lis as std::sync::Arc<dyn crate::protocol::HoldLifecycle>, b, req.into()), r)
                }
                PartBooking::Transfer(e, b) => {
                    let (o, n) = (&old.transfers[e], &new.transfers[e]);
                    if (o.start, o.end, o.bandwidth_mbps) == (n.start, n.end, n.bandwidth_mbps) {
                        continue;
                    }
                    let site = |job: &str| new.jobs.iter().find(|j| j.name == job).map(|j| j.site.clone());
                    let req = NetworkHoldRequest {
                        txn,
                        links: n.path.clone(),
                        bandwidth_mbps: n.bandwidth_mbps,
                        start: to_time(&n.start),
                        end: to_time(&n.end),
                        sites: site(&n.from).zip(site(&n.to)),
                        replaces: Some(b.hold),
                        // The application keeps sending to the port the plan named.
                        port: o.traffic.as_ref().map(|t| t.port),
                    };
                    sent.one();
                    let nis = self.services.nis.clone();
                    let r = nis.prepare(&req).await;
                    let name = PartName::Transfer { from: n.from.clone(), to: n.to.clone() };
                    (name, (nis as std::sync::Arc<dyn crate::protocol::HoldLifecycle>, b, req.into()), r)
                }
            };
            let (participant, booking, request) = target;
            match prepared {
                Ok(h) => {
                    held.push(HeldPart::new(participant, booking.participant.clone(), h.id, request));
                }
                Err(e) => {
                    let when = self.when_it_could(&name, new, &e, &mut sent).await;
                    let aborted = give_back(&held, &mut sent).await;
                    return reject(format!("modification refused: {name}: {e}{when}"), sent, aborted);
                }
            }
        }
        let decided: Vec<PartHold> = held.iter().map(|p| p.part.clone()).collect();
        let mut outcome = new.clone();
        outcome.status = PlanStatus::Committed;
        outcome.reason = None;
        outcome.planner = self.cfg.name.clone();
        sent.write_to(&mut outcome);
        outcome.holds_aborted = 0;
        // A job keeps its local reservation's name (the LIS changes it in place): the plan's
        // `reservation_name`s stay as they were.
        let mut result = Coordinator::modifying(txn, held, outcome, started).book(opts.log).await;
        if result.status() == PlanStatus::Committed {
            result.bookings = replaced_bookings(bookings, &decided);
        }
        result
    }

    /// For a job whose replacement did not fit: when its new shape could start at its site
    /// (asked of its LIS, which counts the job's current reservation as busy), as text to
    /// append to the refusal; empty for a transfer or when the LIS does not say.
    async fn when_it_could(&self, part: &PartName, new: &Outcome, e: &ParticipantError, sent: &mut Sent) -> String {
        let PartName::Job { job, site } = part else { return String::new() };
        if !matches!(e, ParticipantError::Capacity { .. } | ParticipantError::GpuCapacity { .. }) {
            return String::new();
        }
        let (Some(j), Some(lis)) = (new.jobs.iter().find(|j| &j.name == job), self.services.lis.get(site)) else {
            return String::new();
        };
        let start = to_time(&j.start);
        let q = ComputeQuery {
            site: site.clone(),
            cpus: j.cpus,
            duration_s: to_time(&j.end) - start,
            window_start: start,
            deadline: new.deadline.as_ref().map_or(start + 30 * 86_400, to_time),
            gpus: j.gpus.as_ref().map(|g| crate::model::GpuDemand {
                count: g.count,
                min_compute_capability: None,
                min_memory_gib: None,
                model: Some(g.model.clone()),
            }),
        };
        sent.one();
        match lis.query(&q).await.ok().and_then(|o| o.earliest_start) {
            Some(t) => format!(
                " (it could start at {} at the earliest with its current reservation still booked)",
                crate::model::from_time(t).to_rfc3339()
            ),
            None => " (it does not fit before the deadline)".into(),
        }
    }
}

/// Aborts the replacement holds of a refused modification (their reservations stay), as any
/// compensation does ([`commit::compensate`]: retried, a lost answer logged; the lease ends a
/// hold it could not reach); counts the messages, and answers how many holds it aborted.
async fn give_back(held: &[HeldPart], sent: &mut Sent) -> u64 {
    let parts = coordinator::targets(held);
    let mut tally = commit::Tally::default();
    if let Err(e) = commit::compensate(&parts, &[], false, &mut tally).await {
        tracing::warn!(error = %e, "abort of a replacement hold got no answer; its lease ends it");
    }
    sent.then(tally.sent);
    tally.holds_aborted
}
