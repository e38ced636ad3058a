//! A LIS bound to its site's own reservation scheduler (Slurm): what the LIS promises is what
//! Slurm has (docs/protocol.md, "A LIS in front of Slurm").
//!
//! - **Before a hold is durable** (`persist`) or committed, whichever comes first, its Slurm
//!   reservation is made ([`Lis::ensure_local`]); a refusal (the cores were sold in Slurm since
//!   the last sync) is the participant's refusal, so the coordinator never decides a plan whose
//!   reservation Slurm does not have.
//! - **Abort and release delete it** ([`Lis::drop_local`]); a lapsed lease and a delete that
//!   failed leave a *stray* that the next [`Lis::sync`] deletes.
//! - **A modification** (a replacement hold) makes the new shape's reservation beside the old
//!   one (`Flags=OVERLAP`: the calendar holds `max(old, new)`, Slurm both), and its commit
//!   deletes the old one: `sbatch --reservation` then names the new reservation, which the
//!   modified plan's job carries.
//! - **[`Lis::sync`]**, at start and every `sync_s`: Slurm's reservations not made by coreserve
//!   are blocked in the CPU calendar (capacity already sold); coreserve's own are reconciled
//!   with the hold book both ways; a committed reservation that Slurm lost or changed while
//!   this LIS watched is *broken* ([`Drift`]), never silently re-made.

use std::collections::{HashMap, HashSet};

use futures::stream::{self, StreamExt};
use serde::Serialize;

use super::slurm::{NewReservation, Slurm, SlurmError, SlurmReservation};
use super::{Lis, State};
use crate::calendar::SpanId;
use crate::model::Time;
use crate::protocol::bookkeeping::KeepsHolds;
use crate::protocol::decision::crash_point;
use crate::protocol::{ComputeHoldRequest, Drift, HoldId, HoldState, ParticipantError};

/// At most this many `scontrol create` calls of one persist run at once (slurmctld handles
/// them one at a time; a few in flight hide the process start of each).
const CREATES_IN_FLIGHT: usize = 4;

/// The binding's state, under the LIS's lock.
#[derive(Debug, Default)]
pub(crate) struct LocalState {
    /// The Slurm user of each hold (mapped at prepare).
    pub(super) users: HashMap<HoldId, String>,
    /// Holds whose reservation Slurm has: made by this process, or seen at a sync.
    pub(super) created: HashSet<HoldId>,
    /// Reservations not made by coreserve, blocked in the CPU calendar, by name.
    foreign: HashMap<String, Foreign>,
    /// Committed holds that Slurm no longer honours, with why.
    pub(super) broken: HashMap<HoldId, String>,
}

#[derive(Debug)]
struct Foreign {
    window: (Time, Time, u64),
    spans: Vec<SpanId>,
}

/// What one [`Lis::sync`] found and did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SyncReport {
    /// Slurm reservations not made by coreserve now blocked in the calendar.
    pub foreign: usize,
    /// Of them, new or changed since the last sync.
    pub foreign_changed: usize,
    /// coreserve reservations with no live hold, deleted from Slurm.
    pub strays_deleted: usize,
    /// Live holds whose reservation was missing and was made again (after a restart).
    pub recreated: usize,
    /// Committed reservations found lost or changed in Slurm this sync.
    pub newly_broken: usize,
}

impl Lis {
    /// This LIS fronting Slurm (see the module docs). Call [`Lis::check_slurm`] and
    /// [`Lis::sync`] before serving.
    pub fn with_slurm(mut self, slurm: Slurm) -> Self {
        self.slurm = Some(slurm);
        self
    }

    /// The Slurm binding, if any.
    pub fn slurm(&self) -> Option<&Slurm> {
        self.slurm.as_ref()
    }

    /// The name of hold `hold`'s reservation in the site's scheduler (`None` for a LIS that
    /// fronts none).
    pub fn local_reservation(&self, hold: HoldId) -> Option<String> {
        self.slurm.as_ref().map(|s| s.reservation_name(hold))
    }

    /// Committed reservations the site's scheduler no longer honours.
    pub fn drift(&self) -> Vec<Drift> {
        let st = self.state();
        let mut out: Vec<Drift> = st
            .local
            .broken
            .iter()
            .map(|(&hold, reason)| Drift {
                hold,
                reservation: self.local_reservation(hold).unwrap_or_default(),
                reason: reason.clone(),
            })
            .collect();
        out.sort_by_key(|d| d.hold);
        out
    }

    /// The Slurm user of `req`'s user at this site; `Ok(None)` for a LIS without Slurm.
    ///
    /// # Errors
    /// [`ParticipantError::NoLocalAccount`] for a user the site does not map.
    pub(super) fn local_user(&self, req: &ComputeHoldRequest) -> Result<Option<String>, ParticipantError> {
        let Some(slurm) = &self.slurm else { return Ok(None) };
        let mapped = match &req.user {
            Some(u) => slurm.slurm_user(u),
            None => slurm.config().default_user.as_deref(),
        };
        match mapped {
            Some(m) => Ok(Some(m.to_owned())),
            None => Err(ParticipantError::NoLocalAccount {
                site: req.site.clone(),
                user: req.user.clone().unwrap_or_else(|| "(no user)".into()),
            }),
        }
    }

    /// Checks the site against its Slurm partition (at start).
    ///
    /// # Errors
    /// [`SlurmError::Mismatch`] naming both figures when the partition's CPUs differ from the
    /// site's, or the site has GPU pools (not sold through Slurm yet); Slurm's own errors.
    pub async fn check_slurm(&self) -> Result<(), SlurmError> {
        let Some(slurm) = &self.slurm else { return Ok(()) };
        let site = self.site();
        let p = slurm.partition().await?;
        if p.cpus != u64::from(site.cpus) {
            return Err(SlurmError::Mismatch(format!(
                "site `{}` has {} CPUs in the grid but Slurm partition `{}` has {} (TotalCPUs): make them agree",
                site.id, site.cpus, p.name, p.cpus
            )));
        }
        if !site.attributes.gpus.is_empty() {
            return Err(SlurmError::Mismatch(format!(
                "site `{}` has GPU pools in the grid; the Slurm LIS sells CPUs only (partition `{}`)",
                site.id, p.name
            )));
        }
        Ok(())
    }

    /// The reservation to make for hold `hold`, if it is live and not made yet.
    fn wanted(&self, st: &State, slurm: &Slurm, hold: HoldId) -> Option<Result<NewReservation, ParticipantError>> {
        if st.local.created.contains(&hold) {
            return None;
        }
        let (_, booked) = st.holds.get(hold)?;
        // A replacement hold's reservation is its new shape, made beside the one it replaces.
        let (start, end, cpus, overlap) = match &booked.growth {
            Some(g) => (g.request.start, g.request.end, u64::from(g.request.cpus), true),
            None => {
                let span = st.calendars.get(super::CPUS).span(super::cpu_span(booked))?;
                (span.start, span.end, span.amount, false)
            }
        };
        Some(match st.local.users.get(&hold) {
            Some(user) => {
                Ok(NewReservation { name: slurm.reservation_name(hold), start, end, cpus, user: user.clone(), overlap })
            }
            None => Err(ParticipantError::NoLocalAccount {
                site: self.site().id,
                user: format!("(the user of hold {hold})"),
            }),
        })
    }

    /// Makes the Slurm reservations of those of `holds` that are live here and not made yet
    /// (idempotent: a reservation that exists under the hold's name is found, not doubled).
    /// Holds unknown here are left to the caller's next message, which answers for them.
    ///
    /// # Errors
    /// The first refusal ([`ParticipantError::LocalScheduler`]) or
    /// [`ParticipantError::SchedulerUnavailable`]; the reservations that were made stay with
    /// their holds (the coordinator aborts them, which deletes them).
    pub(super) async fn ensure_local(&self, holds: &[HoldId]) -> Result<(), ParticipantError> {
        let Some(slurm) = &self.slurm else { return Ok(()) };
        let todo: Vec<NewReservation> = {
            let st = self.state();
            holds.iter().filter_map(|&h| self.wanted(&st, slurm, h)).collect::<Result<_, _>>()?
        };
        if !todo.is_empty() {
            crash_point("before-slurm-create");
        }
        let answers: Vec<Result<(), SlurmError>> = stream::iter(todo.clone())
            .map(|r| async move { slurm.create(&r).await })
            .buffered(CREATES_IN_FLIGHT)
            .collect()
            .await;
        if answers.iter().any(Result::is_ok) {
            crash_point("after-slurm-create");
        }
        let mut first = None;
        for (r, answer) in todo.iter().zip(answers) {
            let hold = slurm.hold_of(&r.name).expect("a name of ours");
            match answer {
                Ok(()) => {
                    let live = {
                        let mut st = self.state();
                        let live = st.holds.get(hold).is_some();
                        if live {
                            st.local.created.insert(hold);
                        }
                        live
                    };
                    if !live {
                        // Aborted or lapsed while Slurm made it: nobody will commit it.
                        self.delete_local(slurm, &r.name).await;
                    }
                }
                Err(e) => {
                    tracing::warn!(site = %self.site().id, reservation = %r.name, error = %e, "Slurm did not make a reservation");
                    first.get_or_insert_with(|| self.scheduler_error(e));
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Deletes hold `hold`'s Slurm reservation, if this process made or saw it (abort,
    /// release). A failed delete leaves a stray for the next sync.
    pub(super) async fn drop_local(&self, hold: HoldId) {
        let Some(slurm) = &self.slurm else { return };
        let made = {
            let mut st = self.state.lock().expect("LIS state lock");
            st.local.users.remove(&hold);
            st.local.broken.remove(&hold);
            st.local.created.remove(&hold)
        };
        if made {
            self.delete_local(slurm, &slurm.reservation_name(hold)).await;
        }
    }

    async fn delete_local(&self, slurm: &Slurm, name: &str) {
        if let Err(e) = slurm.delete(name).await {
            tracing::warn!(site = %self.site().id, reservation = name, error = %e, "Slurm reservation not deleted; the next sync deletes it");
        }
    }

    fn scheduler_error(&self, e: SlurmError) -> ParticipantError {
        let site = self.site().id;
        match e {
            SlurmError::Unavailable(reason) => ParticipantError::SchedulerUnavailable { site, reason },
            e => ParticipantError::LocalScheduler { site, reason: e.to_string() },
        }
    }

    /// One synchronisation with Slurm (at start, then every `sync_s`; see the module docs):
    /// blocks Slurm's other reservations in the calendar, deletes coreserve reservations that no
    /// live hold owns, makes again those of live holds that are missing and were never seen
    /// (a restart between Slurm's create and the journal), and marks broken a committed
    /// reservation that was seen and is now gone or changed.
    ///
    /// # Errors
    /// Slurm unreachable or its answer unreadable: nothing changed.
    pub async fn sync(&self) -> Result<SyncReport, SlurmError> {
        let Some(slurm) = &self.slurm else { return Ok(SyncReport::default()) };
        // Only what was made before the listing must be in it.
        let made_before = self.state().local.created.clone();
        let all = slurm.reservations().await?;
        let down: HashMap<String, String> = slurm.unusable_nodes().await?.into_iter().collect();
        let now = self.clock.now();
        let partition = &slurm.config().partition;
        let mut report = SyncReport::default();
        let (ours, foreign): (Vec<&SlurmReservation>, Vec<&SlurmReservation>) =
            all.iter().partition(|r| slurm.hold_of(&r.name).is_some());
        let mut strays = Vec::new();
        let mut missing = Vec::new();
        {
            let mut st = self.state();
            // Capacity sold in Slurm by others: blocked, as far as it is free here.
            let wanted: HashMap<&str, (Time, Time, u64)> = foreign
                .iter()
                .filter(|r| r.end > now && r.partition.as_ref().is_none_or(|p| p == partition))
                .map(|r| (r.name.as_str(), (r.start.max(now), r.end, r.cpus)))
                .collect();
            let gone: Vec<String> = st
                .local
                .foreign
                .iter()
                .filter(|(name, f)| wanted.get(name.as_str()) != Some(&f.window))
                .map(|(name, _)| name.clone())
                .collect();
            for name in gone {
                let f = st.local.foreign.remove(&name).expect("listed");
                for span in f.spans {
                    let _ = st.calendars.get_mut(super::CPUS).remove(span);
                }
            }
            for (name, window) in wanted {
                if st.local.foreign.contains_key(name) {
                    continue;
                }
                let spans = st.calendars.get_mut(super::CPUS).add_up_to(window.0, window.1, window.2);
                st.local.foreign.insert(name.to_owned(), Foreign { window, spans });
                report.foreign_changed += 1;
            }
            report.foreign = st.local.foreign.len();

            // coreserve's own reservations against the hold book.
            let mut seen = HashSet::new();
            for r in &ours {
                let hold = slurm.hold_of(&r.name).expect("ours");
                seen.insert(hold);
                let Some((state, booked)) = st.holds.get(hold) else {
                    strays.push(r.name.clone());
                    continue;
                };
                let span = st.calendars.get(super::CPUS).span(super::cpu_span(booked)).expect("a live hold's span");
                // A node of the reservation that Slurm holds unusable breaks it, while it lasts.
                let lost_node =
                    super::slurm::expand_hostlist(&r.nodes).into_iter().find_map(|n| down.get(&n).map(|why| (n, why)));
                if let Some((node, why)) = lost_node {
                    if state == HoldState::Committed && r.end > now && !st.local.broken.contains_key(&hold) {
                        st.local
                            .broken
                            .insert(hold, format!("node {node} of the reservation is unusable in Slurm ({why})"));
                        report.newly_broken += 1;
                    }
                }
                let changed = (r.start, r.end, r.cpus) != (span.start, span.end, span.amount);
                if changed && state == HoldState::Committed && !st.local.broken.contains_key(&hold) {
                    let reason = format!(
                        "changed in Slurm: {} CPUs over {} .. {} instead of {} CPUs over {} .. {}",
                        r.cpus,
                        crate::model::from_time(r.start).to_rfc3339(),
                        crate::model::from_time(r.end).to_rfc3339(),
                        span.amount,
                        crate::model::from_time(span.start).to_rfc3339(),
                        crate::model::from_time(span.end).to_rfc3339()
                    );
                    st.local.broken.insert(hold, reason);
                    report.newly_broken += 1;
                }
                st.local.created.insert(hold);
            }
            // Live holds whose reservation Slurm does not list.
            let live: Vec<(HoldId, HoldState, Time)> = st
                .holds
                .active()
                .filter_map(|(h, state, b)| {
                    st.calendars.get(super::CPUS).span(super::cpu_span(b)).map(|s| (h, state, s.end))
                })
                .filter(|&(h, _, end)| end > now && !seen.contains(&h))
                .collect();
            for (hold, state, _) in live {
                if made_before.contains(&hold) {
                    if state == HoldState::Committed && !st.local.broken.contains_key(&hold) {
                        st.local.broken.insert(
                            hold,
                            "deleted in Slurm behind coreserve (by an administrator, or its nodes went away)".into(),
                        );
                        report.newly_broken += 1;
                    }
                } else if state == HoldState::Committed && !st.local.created.contains(&hold) {
                    // Never seen by this process: made before a restart and lost with it.
                    missing.push(hold);
                }
            }
        }
        for name in &strays {
            self.delete_local(slurm, name).await;
            report.strays_deleted += 1;
        }
        for hold in missing {
            match self.ensure_local(&[hold]).await {
                Ok(()) => report.recreated += 1,
                Err(e) => {
                    let mut st = self.state();
                    if st.holds.get(hold).is_some() && !st.local.broken.contains_key(&hold) {
                        st.local.broken.insert(hold, format!("missing in Slurm and could not be made again: {e}"));
                        report.newly_broken += 1;
                    }
                }
            }
        }
        if (report.foreign_changed, report.strays_deleted, report.recreated, report.newly_broken) != (0, 0, 0, 0) {
            tracing::info!(site = %self.site().id, ?report, "synchronised with Slurm");
        }
        Ok(report)
    }
}
