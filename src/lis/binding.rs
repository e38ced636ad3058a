//! A LIS bound to its site's own reservation scheduler (Slurm): what the LIS promises is what
//! Slurm has (docs/protocol.md, "A LIS in front of Slurm").
//!
//! - **Before a hold is durable** (`persist`) or committed, whichever comes first, its Slurm
//!   reservation is made ([`Lis::ensure_local`]; a plan's, one at a time in the order of their
//!   starts, so that Slurm's choice of cores never strands a later one); a refusal (the cores
//!   were sold in Slurm since the last sync) is the participant's refusal, so the coordinator
//!   never decides a plan whose reservation Slurm does not have.
//! - **Abort and release delete it** ([`Lis::drop_local`]); a lapsed lease and a delete that
//!   failed (Slurm keeps a reservation jobs were submitted into) leave a *stray* that the next
//!   [`Lis::sync`] deletes, once Slurm lets it.
//! - **A modification** (a replacement hold) changes the job's reservation **in place, under
//!   its name** (the replacement is bound to the name of the reservation it replaces), so that
//!   a job running or pending in it stays there: persist grows it to the union of the old and
//!   the new shape (both stay possible until the decision), commit shrinks it to the new shape,
//!   abort back to the old one ([`Lis::reshape`]). Never `Flags=OVERLAP`.
//! - **[`Lis::sync`]**, at start and every `sync_s`: Slurm's reservations not made by coreserve
//!   are blocked in the CPU calendar (capacity already sold); coreserve's own are reconciled
//!   with the hold book both ways; a committed reservation that Slurm lost or changed while
//!   this LIS watched is *broken* ([`Drift`]), never silently re-made.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::slurm::{NewReservation, Shape, Slurm, SlurmError, SlurmReservation};
use super::{Lis, SiteResource, State};
use crate::calendar::SpanId;
use crate::model::Time;
use crate::protocol::bookkeeping::KeepsHolds;
use crate::protocol::decision::crash_point;
use crate::protocol::{ComputeHoldRequest, Drift, HoldId, HoldState, ParticipantError};

/// The LIS's Slurm lock held for writing: no other change in Slurm and no sync meanwhile.
pub(super) type SlurmAlone<'a> = tokio::sync::RwLockWriteGuard<'a, ()>;

/// The binding's state, under the LIS's lock.
#[derive(Debug, Default)]
pub(crate) struct LocalState {
    /// The Slurm user of each hold (mapped at prepare).
    pub(super) users: HashMap<HoldId, String>,
    /// The name of the Slurm reservation of each hold that has one (a replacement hold: the
    /// name of the reservation it replaces, which it takes over at commit).
    pub(super) names: HashMap<HoldId, String>,
    /// Replacement holds not yet ended or committed, and the reservation each replaces.
    pub(super) replacing: HashMap<HoldId, HoldId>,
    /// Holds whose reservation Slurm has (for a replacement: grown to both shapes): made by
    /// this process, or seen at a sync.
    pub(super) created: HashSet<HoldId>,
    /// Reservations not made by coreserve, blocked in the CPU calendar, by name.
    foreign: HashMap<String, Foreign>,
    /// Committed holds that Slurm no longer honours, with why.
    pub(super) broken: HashMap<HoldId, String>,
    /// Holds whose create Slurm refused although the calendars had room, with what to block
    /// (the window and `(calendar resource, amount)`): the job's CPUs for their cores
    /// ("Requested nodes are busy"), its GPU pool down to one GPU fewer than the job's for its
    /// license ("Invalid license specification": another reservation took the GPUs since the
    /// last sync). Blocked in the calendars (as far as free) when the hold ends.
    refused: HashMap<HoldId, (Time, Time, (SiteResource, u64))>,
    /// What Slurm refused, blocked in the calendars until the next sync (so that the planner's
    /// next search does not offer it again): `(calendar resource, span)`.
    learned: Vec<(SiteResource, SpanId)>,
    /// Committed holds whose reservation this process grew to both shapes for a replacement:
    /// while no replacement of it is pending, a reservation still so grown is given back its
    /// own shape (at once when the replacement ended while Slurm grew it, else at the next
    /// sync: a lapsed replacement), never taken for drift.
    pub(super) grown: HashSet<HoldId>,
}

/// One step [`Lis::ensure_local`] takes in Slurm.
#[derive(Debug, Clone)]
enum Todo {
    /// Make hold `.0`'s reservation.
    Create(HoldId, NewReservation),
    /// Grow replacement hold `hold`'s reservation (that of `old`, the one it replaces) to
    /// `to`.
    Reshape { hold: HoldId, old: HoldId, to: NewShape },
}

/// A reservation [`Lis::reshape_all`] gives another shape: reservation `name` to `target`,
/// its GPUs counted by `license`, for Slurm user `user` (if it must be made again).
#[derive(Debug, Clone)]
pub(super) struct NewShape {
    pub(super) name: String,
    pub(super) target: Shape,
    pub(super) user: String,
    pub(super) license: Option<String>,
}

impl NewShape {
    /// The reservation to create for it in shape `s`.
    fn made(&self, s: Shape) -> NewReservation {
        NewReservation {
            name: self.name.clone(),
            start: s.start,
            end: s.end,
            cpus: s.cpus,
            user: self.user.clone(),
            gpus: self.license.clone().map(|l| (l, s.gpus)),
        }
    }

    /// Its licenses in shape `s`, as [`Slurm::update`] takes them (`None`: no GPU license).
    fn licenses(&self, s: Shape) -> Option<(&str, u64)> {
        self.license.as_deref().map(|l| (l, s.gpus))
    }

    /// Changes its reservation in place from shape `from` to `into` (same CPUs, same cores):
    /// the start and the licenses only if they differ, and the end.
    ///
    /// # Errors
    /// As [`Slurm::update`].
    async fn update(&self, slurm: &Slurm, from: Shape, into: Shape) -> Result<(), SlurmError> {
        let start = (from.start != into.start).then_some(into.start);
        let licenses = if from.gpus != into.gpus { self.licenses(into) } else { None };
        slurm.update(&self.name, start, into.end, licenses).await
    }
}

/// What a reservation grown in place meets ([`Lis::reshape_all`]).
#[derive(Debug)]
struct Clashes<'a> {
    /// The reservations on its cores at a common instant.
    cores: Vec<&'a SlurmReservation>,
    /// The reservations whose licenses, with its own, are more than Slurm has.
    licenses: Vec<String>,
}

/// What the first step of [`Lis::reshape_all`] did to one reservation.
#[derive(Debug, Clone, Copy)]
enum Changed {
    /// Changed in place to a shape no larger, or left alone: checked by Slurm, or nothing new.
    InPlace,
    /// Changed in place to a larger shape, which Slurm does not check.
    Grown(Grown),
    /// Made by Slurm, which placed it on free cores.
    Placed,
    /// Not started and to be made again in shape `target` (other CPUs: Slurm cannot change a
    /// core reservation's cores), once the reservations grown in place are off its cores.
    Again { was: Shape, target: Shape },
}

/// A reservation [`Lis::reshape_all`] changed in place from shape `was` to the larger
/// `target` (a later end, an earlier start or more GPUs), which Slurm did not check against
/// the others; `started`: it had started.
#[derive(Debug, Clone, Copy)]
struct Grown {
    was: Shape,
    target: Shape,
    started: bool,
}

/// A reservation not made by coreserve, as blocked in the calendars.
#[derive(Debug)]
struct Foreign {
    window: ForeignWindow,
    /// What it blocks: `(resource, span)` in the site's calendars.
    spans: Vec<(SiteResource, SpanId)>,
}

/// A foreign reservation's window `[start, end)` (from now on), its CPUs in this site's
/// partition (0: another partition's) and the GPUs of each of the site's pools it holds
/// through their licenses (`(calendar resource, count)`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ForeignWindow {
    start: Time,
    end: Time,
    cpus: u64,
    gpus: Vec<(SiteResource, u64)>,
}

/// Whether Slurm's refusal of a create means its cores are placed so that the reservation
/// does not fit, though the CPUs are there in number ("Requested nodes are busy"; 22.05 also
/// says "Requested node configuration is not available" when no node has the cores free).
fn is_placement_refusal(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("nodes are busy") || m.contains("node configuration is not available")
}

/// Whether Slurm's refusal of a create means the license its GPUs are counted by is taken in
/// that window (22.05: "Invalid license specification", also said of a license the cluster
/// does not have, which [`Lis::check_slurm`]'s start-up check rules out).
fn is_license_refusal(msg: &str) -> bool {
    msg.to_ascii_lowercase().contains("invalid license")
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
    /// coreserve reservations with no live hold that Slurm would not delete yet (jobs were
    /// submitted into them: "Requested reservation is in use"); retried at every sync.
    pub strays_in_use: usize,
    /// Live holds whose reservation was missing and was made again (after a restart).
    pub recreated: usize,
    /// Live holds whose reservation a previous life of this process left holding more than
    /// the hold (a modification interrupted between Slurm's growth and its end, by a crash),
    /// given back the hold's shape.
    pub reshaped: usize,
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
    /// fronts none): its own name, or for a replacement hold the name of the reservation it
    /// replaces (a modified job keeps its reservation's name).
    pub fn local_reservation(&self, hold: HoldId) -> Option<String> {
        let slurm = self.slurm.as_ref()?;
        Some(Self::name_in(&self.state.lock().expect("LIS state lock"), slurm, hold))
    }

    /// Hold `hold`'s reservation name in `st`.
    pub(super) fn name_in(st: &State, slurm: &Slurm, hold: HoldId) -> String {
        st.local.names.get(&hold).cloned().unwrap_or_else(|| slurm.reservation_name(hold))
    }

    /// The local reservation name `req` will have, checked before anything is booked: a
    /// replacement hold's is the name of the reservation it replaces (which `req` may repeat,
    /// as the planner sends the plan's); any other hold's is derived from its id, so `req`
    /// may not name one. `None` for a LIS without Slurm.
    ///
    /// # Errors
    /// [`ParticipantError::InvalidHold`] for a name that differs from the replaced
    /// reservation's, or a name given for a hold that replaces nothing.
    pub(super) fn local_name(&self, st: &State, req: &ComputeHoldRequest) -> Result<Option<String>, ParticipantError> {
        let Some(slurm) = &self.slurm else { return Ok(None) };
        match (req.replaces, &req.reservation_name) {
            (None, None) => Ok(None),
            (None, Some(n)) => Err(ParticipantError::InvalidHold(format!(
                "reservation_name `{n}`: only a replacement hold names its reservation (it keeps the replaced one's)"
            ))),
            (Some(old), given) => {
                let name = Self::name_in(st, slurm, old);
                match given {
                    Some(n) if *n != name => Err(ParticipantError::InvalidHold(format!(
                        "reservation_name `{n}` is not the name of reservation {old} (`{name}`)"
                    ))),
                    _ => Ok(Some(name)),
                }
            }
        }
    }

    /// Records hold `id`'s reservation name (from [`Lis::local_name`]) and what it replaces.
    /// Without a name (a site without Slurm) there is nothing to record: nothing would ever
    /// take the record back ([`Lis::take_over`] has no Slurm to follow there).
    pub(super) fn bind_name(st: &mut State, id: HoldId, name: Option<String>, replaces: Option<HoldId>) {
        let Some(name) = name else { return };
        st.local.names.insert(id, name);
        if let Some(old) = replaces {
            st.local.replacing.insert(id, old);
        }
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
                reservation: self.slurm.as_ref().map(|s| Self::name_in(&st, s, hold)).unwrap_or_default(),
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
    /// site's, or when a GPU pool's license ([`super::slurm::SlurmConfig::gpu_license`]) is
    /// missing in Slurm or counts other than the pool's GPUs; Slurm's own errors.
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
        for pool in &site.attributes.gpus {
            let license = slurm.config().gpu_license(&pool.model);
            match slurm.license_total(&license).await? {
                Some(n) if n == u64::from(pool.count) => {}
                Some(n) => {
                    return Err(SlurmError::Mismatch(format!(
                    "site `{}` has {} GPUs `{}` in the grid but Slurm license `{license}` counts {n}: make them agree",
                    site.id, pool.count, pool.model
                )))
                }
                None => {
                    return Err(SlurmError::Mismatch(format!(
                        "site `{}` has {} GPUs `{}` but Slurm has no license `{license}` to reserve them by \
                         (slurm.conf `Licenses={license}:{}`, or map the model in gpu_licenses)",
                        site.id, pool.count, pool.model, pool.count
                    )))
                }
            }
        }
        Ok(())
    }

    /// Hold `booked`'s shape in Slurm's terms (its CPUs' span and the GPUs of its pool) and
    /// the license its GPUs are reserved by (`None`: no GPU).
    fn booked_shape(&self, st: &State, slurm: &Slurm, booked: &super::HoldSpans) -> Option<(Shape, Option<String>)> {
        let span = st.calendars.get(SiteResource::Cpus).span(super::cpu_span(booked))?;
        let (gpus, license) = match super::gpu_span(booked) {
            Some((pool, gpu_span)) => {
                let g = st.calendars.get(SiteResource::GpuPool(pool)).span(gpu_span)?;
                let model = self.site.read().expect("LIS site lock").attributes.gpus.get(pool)?.model.clone();
                (g.amount, Some(slurm.config().gpu_license(&model)))
            }
            None => (0, None),
        };
        Some((Shape { start: span.start, end: span.end, cpus: span.amount, gpus }, license))
    }

    /// The shape a replacement hold's request asks for.
    fn requested_shape(r: &ComputeHoldRequest) -> Shape {
        Shape {
            start: r.start,
            end: r.end,
            cpus: u64::from(r.cpus),
            gpus: r.gpus.as_ref().map_or(0, |g| u64::from(g.count)),
        }
    }

    /// What to do in Slurm for hold `hold`, if it is live and not made yet: make its
    /// reservation, or for a replacement hold grow the reservation it replaces to both shapes.
    fn wanted(&self, st: &State, slurm: &Slurm, hold: HoldId) -> Option<Result<Todo, ParticipantError>> {
        if st.local.created.contains(&hold) {
            return None;
        }
        let (_, booked) = st.holds.get(hold)?;
        let Some(user) = st.local.users.get(&hold) else {
            return Some(Err(ParticipantError::NoLocalAccount {
                site: self.site().id,
                user: format!("(the user of hold {hold})"),
            }));
        };
        let name = Self::name_in(st, slurm, hold);
        let (shape, license) = self.booked_shape(st, slurm, booked)?;
        Some(Ok(match &booked.growth {
            // `booked.spans` are the replaced reservation's until the commit.
            Some(g) => {
                let target = shape.union(Self::requested_shape(&g.request));
                Todo::Reshape { hold, old: g.replaces, to: NewShape { name, target, user: user.clone(), license } }
            }
            None => Todo::Create(
                hold,
                NewReservation {
                    name,
                    start: shape.start,
                    end: shape.end,
                    cpus: shape.cpus,
                    user: user.clone(),
                    gpus: license.map(|l| (l, shape.gpus)),
                },
            ),
        }))
    }

    /// Makes the Slurm reservations of those of `holds` that are live here and not made yet
    /// (idempotent: a reservation that exists under the hold's name is found, not doubled);
    /// grows the reservation a replacement hold replaces to hold both shapes.
    /// Holds unknown here are left to the caller's next message, which answers for them.
    ///
    /// # Errors
    /// The first refusal ([`ParticipantError::LocalScheduler`]) or
    /// [`ParticipantError::SchedulerUnavailable`]; the reservations that were made stay with
    /// their holds (the coordinator aborts them, which deletes them).
    pub(super) async fn ensure_local(&self, holds: &[HoldId]) -> Result<(), ParticipantError> {
        let Some(slurm) = &self.slurm else { return Ok(()) };
        let todo: Vec<Todo> = {
            let st = self.state();
            holds.iter().filter_map(|&h| self.wanted(&st, slurm, h)).collect::<Result<_, _>>()?
        };
        let (creates, reshapes): (Vec<Todo>, Vec<Todo>) = todo.into_iter().partition(|t| matches!(t, Todo::Create(..)));
        let mut creates: Vec<(HoldId, NewReservation)> = creates
            .into_iter()
            .filter_map(|t| match t {
                Todo::Create(h, r) => Some((h, r)),
                Todo::Reshape { .. } => None,
            })
            .collect();
        let mut first = None;
        let reshapes: Vec<(HoldId, HoldId, NewShape)> = reshapes
            .into_iter()
            .filter_map(|t| match t {
                Todo::Reshape { hold, old, to } => Some((hold, old, to)),
                Todo::Create(..) => None,
            })
            .collect();
        let shapes: Vec<NewShape> = reshapes.iter().map(|(_, _, to)| to.clone()).collect();
        let answers = self.reshape_all(slurm, &shapes).await;
        for ((hold, old, to), answer) in reshapes.into_iter().zip(answers) {
            match answer {
                Ok(()) => {
                    crash_point("after-slurm-reshape");
                    let give_back = {
                        let mut st = self.state();
                        st.local.grown.insert(old);
                        if st.holds.get(hold).is_some() {
                            st.local.created.insert(hold);
                            None
                        } else {
                            // Aborted or lapsed while Slurm grew it: nobody will decide it.
                            self.own_shape(&st, slurm, old)
                        }
                    };
                    if let Some(own) = give_back {
                        self.give_back(slurm, old, own).await;
                    }
                }
                Err(e) => {
                    tracing::warn!(site = %self.site().id, reservation = %to.name, error = %e, "Slurm did not grow a reservation for its modification");
                    first.get_or_insert_with(|| self.scheduler_error(e));
                }
            }
        }
        if !creates.is_empty() {
            crash_point("before-slurm-create");
        }
        // One at a time, in the order of their starts: Slurm pins a reservation's cores when
        // it makes it (those free throughout its window), so a reservation made before an
        // earlier one that it overlaps can take the only cores that one could have, where the
        // CPU calendar counts room for both ("Requested nodes are busy"). Made in start order,
        // each meets only the earlier ones still holding cores at its start, which the
        // calendar counted (a greedy colouring of an interval graph). Tried on a 16-core
        // `scripts/slurm-local` node with 128 random windows the calendar fits: 12 refused in
        // random order, 8 in start order shuffled by fours (as four creates in flight may
        // reach slurmctld), none in start order (about 4 ms a create).
        creates.sort_by_key(|(_, r)| (r.start, r.end));
        let mut answers = Vec::with_capacity(creates.len());
        {
            let _creating = self.slurm_lock.read().await;
            for (_, r) in &creates {
                answers.push(slurm.create(r).await);
            }
        }
        if answers.iter().any(Result::is_ok) {
            crash_point("after-slurm-create");
        }
        for ((hold, r), answer) in creates.iter().zip(answers) {
            match answer {
                Ok(()) => {
                    let live = {
                        let mut st = self.state();
                        let live = st.holds.get(*hold).is_some();
                        if live {
                            st.local.created.insert(*hold);
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
                    if let SlurmError::Refused(m) = &e {
                        let mut st = self.state();
                        let what = if is_placement_refusal(m) {
                            Some((SiteResource::Cpus, r.cpus))
                        } else if is_license_refusal(m) {
                            // Slurm has fewer than the job's `n` licenses free somewhere in
                            // the window, by how many it does not say: the pool keeps at most
                            // `n - 1` free there until the next sync.
                            let pool = st.holds.get(*hold).and_then(|(_, b)| super::gpu_span(b)).map(|(p, _)| p);
                            pool.zip(r.gpus.as_ref()).map(|(p, (_, n))| {
                                let resource = SiteResource::GpuPool(p);
                                (resource, st.calendars.get(resource).capacity().saturating_sub(n.saturating_sub(1)))
                            })
                        } else {
                            None
                        };
                        if let Some(what) = what {
                            st.local.refused.insert(*hold, (r.start, r.end, what));
                        }
                    }
                    first.get_or_insert_with(|| self.scheduler_error(e));
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// At a Slurm site, the other holds here of `holds`' transactions that are held and not
    /// made in Slurm yet: [`Lis::ensure_local`] makes their reservations with those of `holds`,
    /// in the order of their starts. A coordinator in this process commits a plan's parts one
    /// at a time with no persist before; made one per commit, in the order of the plan's jobs,
    /// Slurm could pin cores that a later commit's earlier window needs.
    pub(super) fn uncreated_siblings(&self, holds: &[HoldId]) -> Vec<HoldId> {
        if self.slurm.is_none() {
            return vec![];
        }
        let st = self.state();
        let txns: HashSet<_> = holds.iter().filter_map(|&h| st.holds.txn(h)).collect();
        st.holds
            .active()
            .filter(|&(h, state, _)| {
                matches!(state, HoldState::Held { .. })
                    && !holds.contains(&h)
                    && !st.local.created.contains(&h)
                    && st.holds.txn(h).is_some_and(|t| txns.contains(&t))
            })
            .map(|(h, _, _)| h)
            .collect()
    }

    /// Gives reservation `to.name` the shape `to.target` in Slurm: [`Lis::reshape_all`] for
    /// one reservation.
    ///
    /// # Errors
    /// As [`Lis::reshape_all`]'s answer.
    pub(super) async fn reshape(&self, slurm: &Slurm, to: NewShape) -> Result<(), SlurmError> {
        self.reshape_all(slurm, std::slice::from_ref(&to)).await.pop().expect("one answer per reservation")
    }

    /// Gives each reservation of `all` its `target` shape in Slurm, keeping its name
    /// (idempotent: one already so is left alone), and answers for each, in order. Each
    /// reservation is:
    ///
    /// - missing: made ([`Slurm::create`]);
    /// - same CPUs: its window and GPUs changed in place (`scontrol update`, only `EndTime`
    ///   once it has started; `Licenses=`), keeping its cores and every job in it;
    /// - other CPUs (Slurm 22.05 cannot change a core reservation's cores: "Core-based
    ///   reservation can not be updated"): deleted and made again with the new shape, Slurm
    ///   choosing free cores and checking the licenses ([`Lis::make_again`]).
    ///
    /// Slurm does not check the cores or the licenses of a window changed in place against the
    /// others, so the LIS does, from one listing after all the changes
    /// ([`super::slurm::core_clashes`], [`Slurm::license_conflicts`]); a core slurmctld has not
    /// listed yet (it lists a new reservation's cores a few seconds after its create) counts as
    /// clashing, rather than waited for. A grown reservation that clashes is made again where
    /// Slurm finds room, if it has not started: first every such one goes back to its old
    /// shape in place, then each is made again (the latest first, as are those with other
    /// CPUs), so that one whose new shape Slurm refuses always finds its old cores free to be
    /// made again on. If it has started (Slurm cannot move it), the reservations on its cores
    /// are made again elsewhere ([`Lis::make_room`]), or else its change is undone and
    /// refused. Slurm refuses to delete a reservation that jobs were submitted into
    /// ([`SlurmError::InUse`]): such a change is refused and the reservation stays as it was.
    ///
    /// So a modification that moves a workflow's dozens of reservations takes two listings and
    /// one to four `scontrol` calls per reservation, and never waits on slurmctld's lists (the
    /// latest first: a modification that extends a running job moves its successors later,
    /// and once they are moved the job's new end finds their cores free). Each answer is `Ok`,
    /// or [`SlurmError::Refused`] (nothing changed, as far as Slurm lets it),
    /// [`SlurmError::InUse`], [`SlurmError::Unavailable`].
    pub(super) async fn reshape_all(&self, slurm: &Slurm, all: &[NewShape]) -> Vec<Result<(), SlurmError>> {
        if all.is_empty() {
            return vec![];
        }
        let alone = self.slurm_lock.write().await;
        self.reshape_all_alone(&alone, slurm, all).await
    }

    /// [`Lis::reshape_all`] by a caller that holds the LIS's Slurm lock for writing (`_alone`).
    async fn reshape_all_alone(
        &self,
        _alone: &SlurmAlone<'_>,
        slurm: &Slurm,
        all: &[NewShape],
    ) -> Vec<Result<(), SlurmError>> {
        if all.is_empty() {
            return vec![];
        }
        let listed = match slurm.reservations().await {
            Ok(listed) => listed,
            Err(e) => return vec![Err(e); all.len()],
        };
        let mut answers: Vec<Result<(), SlurmError>> = vec![Ok(()); all.len()];
        let mut order: Vec<usize> = (0..all.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(all[i].target.start));
        let mut grown = Vec::new();
        // To be made again (deleted, then made by Slurm), with their old and new shapes.
        let mut again = Vec::new();
        // Made (again) by Slurm, so off every other reservation's cores.
        let mut placed = HashSet::new();
        for i in order {
            let cur = listed.iter().find(|r| r.name == all[i].name);
            match self.change(slurm, &all[i], cur).await {
                Ok(Changed::Grown(g)) => grown.push((i, g)),
                Ok(Changed::Again { was, target }) => again.push((i, was, target)),
                Ok(Changed::Placed) => {
                    placed.insert(all[i].name.clone());
                }
                Ok(Changed::InPlace) => {}
                Err(e) => answers[i] = Err(e),
            }
        }
        let listed = if grown.is_empty() {
            Vec::new()
        } else {
            match slurm.reservations().await {
                Ok(listed) => listed,
                Err(e) => {
                    for (i, _) in &grown {
                        answers[*i] = Err(e.clone());
                    }
                    grown.clear();
                    Vec::new()
                }
            }
        };
        // Those not started first: made again, they leave the started ones' cores. Every one
        // of them that meets another goes back to its old shape, in place, before any is made
        // again: its old cores are then free of every other reservation's (as before this
        // change), so one whose new shape Slurm refuses is surely made again in its old one.
        // Made again while others still sat grown on its old cores, one was lost (deleted,
        // neither shape made), and its plan broke.
        // (Those with other CPUs were not touched yet: [`Changed::Again`].)
        let (waiting, started): (Vec<_>, Vec<_>) = grown.into_iter().partition(|(_, g)| !g.started);
        for (i, g) in waiting {
            let to = &all[i];
            let clashes = match self.clashes(slurm, &listed, to, g, &placed).await {
                Ok(c) if c.cores.is_empty() && c.licenses.is_empty() => continue,
                Ok(c) => c,
                Err(e) => {
                    answers[i] = Err(e);
                    continue;
                }
            };
            self.note_clashes(to, &clashes);
            match to.update(slurm, g.target, g.was).await {
                Ok(()) => again.push((i, g.was, g.target)),
                Err(e) => answers[i] = Err(e),
            }
        }
        // The latest first, as above.
        again.sort_by_key(|&(_, _, target)| std::cmp::Reverse(target.start));
        for (i, was, target) in again {
            answers[i] = self.make_again(slurm, &all[i], was, target).await.inspect(|()| {
                placed.insert(all[i].name.clone());
            });
        }
        for (i, g) in started {
            let to = &all[i];
            let clashes = match self.clashes(slurm, &listed, to, g, &placed).await {
                Ok(c) => c,
                Err(e) => {
                    answers[i] = Err(e);
                    continue;
                }
            };
            if clashes.cores.is_empty() && clashes.licenses.is_empty() {
                continue;
            }
            self.note_clashes(to, &clashes);
            answers[i] = self.settle_started(slurm, to, g, &clashes).await.inspect(|()| {
                placed.extend(clashes.cores.iter().map(|r| r.name.clone()));
            });
        }
        answers
    }

    /// The first step of [`Lis::reshape_all`] for reservation `to.name`, Slurm's `cur`: made,
    /// changed in place, or made again; with Slurm's lock held.
    async fn change(
        &self,
        slurm: &Slurm,
        to: &NewShape,
        cur: Option<&SlurmReservation>,
    ) -> Result<Changed, SlurmError> {
        let Some(cur) = cur else {
            return slurm.create(&to.made(to.target)).await.map(|()| Changed::Placed);
        };
        let was = cur.shape();
        let now = self.clock.now();
        let started = cur.start <= now;
        let mut target = to.target;
        // Slurm refuses an end in the past ("Invalid time specified"): a window that is over
        // (a modification given back, or decided, after the booked end) ends now.
        if target.end <= now {
            target.end = now + 2;
        }
        // Slurm 22.05 moves only the end of a started core reservation. A shape that starts
        // later (a job moved later whose reservation began while the change was decided: the
        // shrink at commit) keeps Slurm's earlier start; the hold's window lies inside it, and
        // [`Lis::sync`] takes that shape for the hold's own.
        if started && target.start > was.start {
            target.start = was.start;
        }
        if was == target {
            return Ok(Changed::InPlace);
        }
        if was.cpus == target.cpus && (!started || was.start == target.start) {
            to.update(slurm, was, target).await?;
            let longer = target.start < was.start || target.end > was.end;
            return Ok(if longer || target.gpus > was.gpus {
                Changed::Grown(Grown { was, target, started })
            } else {
                Changed::InPlace
            });
        }
        if started {
            return Err(SlurmError::Refused(format!(
                "reservation {} has started: Slurm 22.05 changes only the end of a started core reservation, not its start or cores",
                to.name
            )));
        }
        Ok(Changed::Again { was, target })
    }

    /// What reservation `to.name`, grown in place to `g.target`, meets: the reservations of
    /// `listed` whose cores it shares at a common instant (unlisted cores included), but for
    /// those Slurm placed since (`placed`), and the names of those whose licenses, with its
    /// own, are more than Slurm has.
    async fn clashes<'a>(
        &self,
        slurm: &Slurm,
        listed: &'a [SlurmReservation],
        to: &NewShape,
        g: Grown,
        placed: &HashSet<String>,
    ) -> Result<Clashes<'a>, SlurmError> {
        let longer = g.target.start < g.was.start || g.target.end > g.was.end;
        let mut names = if longer { super::slurm::core_clashes(listed, &to.name)? } else { vec![] };
        names.retain(|n| !placed.contains(n));
        let licenses = if g.target.gpus > 0 { slurm.license_conflicts(&to.name).await? } else { vec![] };
        Ok(Clashes { cores: listed.iter().filter(|r| names.contains(&r.name)).collect(), licenses })
    }

    /// Logs that reservation `to.name`, changed, meets `clashes`.
    fn note_clashes(&self, to: &NewShape, clashes: &Clashes<'_>) {
        let cores: Vec<&str> = clashes.cores.iter().map(|r| r.name.as_str()).collect();
        tracing::info!(site = %self.site().id, reservation = %to.name, ?cores, licenses = ?clashes.licenses, "the changed reservation meets another's cores or licenses");
    }

    /// Started reservation `to.name`, grown in place to `g.target`, meets `clashes`: room is
    /// made on its cores ([`Lis::make_room`]), or else (licenses, or reservations that cannot
    /// move) its change is undone and refused: Slurm cannot move a started reservation to other
    /// cores; with Slurm's lock held.
    async fn settle_started(
        &self,
        slurm: &Slurm,
        to: &NewShape,
        g: Grown,
        clashes: &Clashes<'_>,
    ) -> Result<(), SlurmError> {
        if !clashes.licenses.is_empty() {
            return self.undo(slurm, to, g, Vec::new(), &clashes.licenses).await;
        }
        match self.make_room(slurm, &to.name, &clashes.cores).await {
            Ok(()) => Ok(()),
            Err((e, deleted)) => {
                tracing::info!(site = %self.site().id, reservation = %to.name, error = %e, "no room made for a started reservation's new end");
                let names: Vec<String> = clashes.cores.iter().map(|r| r.name.clone()).collect();
                self.undo(slurm, to, g, deleted, &names).await
            }
        }
    }

    /// Puts started reservation `to.name` back in shape `g.was`, and the reservations
    /// `put_back` (deleted to make room for it) back as they were: its change is refused,
    /// because of the reservations `clashes`.
    async fn undo(
        &self,
        slurm: &Slurm,
        to: &NewShape,
        g: Grown,
        put_back: Vec<NewReservation>,
        clashes: &[String],
    ) -> Result<(), SlurmError> {
        // A started reservation grows only its end (and GPUs): its start stays.
        to.update(slurm, g.target, g.was).await?;
        for r in put_back {
            if let Err(e) = slurm.create(&r).await {
                tracing::error!(site = %self.site().id, reservation = %r.name, error = %e, "a reservation moved to make room could not be made again");
            }
        }
        Err(SlurmError::Refused(format!(
            "reservation {} has started and its cores or licenses are reserved by {} in its new shape; Slurm cannot move a started reservation to other cores",
            to.name,
            clashes.join(", ")
        )))
    }

    /// Deletes reservation `to.name` (shape `was` in Slurm, not started) and makes it again in
    /// shape `target`, where Slurm picks free cores and checks the licenses; a create that
    /// fails puts `was` back (sure to fit while no other reservation sits on its old cores:
    /// the caller sees to it). A reservation Slurm keeps (jobs were submitted into it) stays
    /// as it is, and the change is refused.
    async fn make_again(&self, slurm: &Slurm, to: &NewShape, was: Shape, target: Shape) -> Result<(), SlurmError> {
        let name = &to.name;
        match slurm.delete(name).await {
            Ok(()) => {}
            Err(SlurmError::InUse(m)) => {
                return Err(SlurmError::InUse(format!(
                    "reservation {name} must be made again for its new cores, but jobs were submitted into it ({m})"
                )));
            }
            Err(e) => return Err(e),
        }
        match slurm.create(&to.made(target)).await {
            Ok(()) => Ok(()),
            Err(e) => {
                if let Err(back) = slurm.create(&to.made(was)).await {
                    tracing::error!(site = %self.site().id, reservation = %name, error = %back, "a reservation deleted for its new shape could not be made again in its old one");
                }
                Err(e)
            }
        }
    }

    /// Makes room on the cores of started reservation `name`, whose end grew in place onto
    /// the reservations `clashes`: each is deleted and made again in its own shape, where Slurm
    /// picks cores free of `name`'s (a create checks the cores against every reservation's,
    /// `name`'s new window included; the calendar counted the CPUs). Only coreserve's own
    /// reservations that have not started and hold no job move: a job pending in one keeps
    /// Slurm from deleting it ([`SlurmError::InUse`]), and a started one cannot move. Called
    /// with the LIS's Slurm lock held.
    ///
    /// # Errors
    /// Why room could not be made, and the reservations deleted but not made again (the
    /// caller makes them again, in their own shape, once `name` is back to its old end).
    async fn make_room(
        &self,
        slurm: &Slurm,
        name: &str,
        clashes: &[&SlurmReservation],
    ) -> Result<(), (SlurmError, Vec<NewReservation>)> {
        let now = self.clock.now();
        let mut deleted = Vec::new();
        for r in clashes {
            let movable = slurm.hold_of(&r.name).is_some() && r.start > now && r.licenses.len() <= 1;
            let user = r.users.as_deref().and_then(|u| u.split(',').next()).filter(|_| movable);
            let Some(user) = user.map(str::to_owned) else {
                let why = format!(
                    "reservation {} is on its cores and is not coreserve's, has started or has no user",
                    r.name
                );
                return Err((SlurmError::Refused(why), deleted));
            };
            let again = NewReservation {
                name: r.name.clone(),
                start: r.start,
                end: r.end,
                cpus: r.cpus,
                user,
                gpus: r.licenses.first().cloned(),
            };
            if let Err(e) = slurm.delete(&r.name).await {
                return Err((e, deleted));
            }
            if let Err(e) = slurm.create(&again).await {
                deleted.push(again);
                return Err((e, deleted));
            }
            tracing::info!(site = %self.site().id, reservation = %r.name, room_for = name, "a reservation not started moved to other cores to make room for a running one");
        }
        Ok(())
    }

    /// Takes hold `hold`'s reservation out of Slurm when it ends (abort, release): deleted, if
    /// this process made or saw it and no other live hold has it; a replacement hold's is
    /// given back the shape of the reservation it replaced. A failed delete leaves a stray for
    /// the next sync.
    pub(super) async fn drop_local(&self, hold: HoldId) {
        let Some(slurm) = &self.slurm else { return };
        enum Then {
            Nothing,
            Delete(String),
            Restore(HoldId, NewShape),
        }
        let then = {
            let mut st = self.state.lock().expect("LIS state lock");
            if let Some((start, end, (resource, amount))) = st.local.refused.remove(&hold) {
                // What Slurm refused stays refused here until the next sync reads Slurm again.
                let spans = st.calendars.get_mut(resource).add_up_to(start, end, amount);
                st.local.learned.extend(spans.into_iter().map(|s| (resource, s)));
            }
            let name = Self::name_in(&st, slurm, hold);
            let user = st.local.users.remove(&hold);
            st.local.broken.remove(&hold);
            st.local.grown.remove(&hold);
            st.local.names.remove(&hold);
            let made = st.local.created.remove(&hold);
            match st.local.replacing.remove(&hold) {
                // A replacement hold: its reservation is still the replaced one's.
                Some(old) => match (st.holds.get(old), user) {
                    (Some((HoldState::Committed, b)), Some(user)) if b.growth.is_none() => {
                        match self.booked_shape(&st, slurm, b) {
                            Some((target, license)) => Then::Restore(old, NewShape { name, target, user, license }),
                            None => Then::Nothing,
                        }
                    }
                    _ => Then::Nothing,
                },
                None if made && !st.local.names.values().any(|n| *n == name) => Then::Delete(name),
                None => Then::Nothing,
            }
        };
        match then {
            Then::Nothing => {}
            Then::Delete(name) => self.delete_local(slurm, &name).await,
            Then::Restore(old, own) => self.give_back(slurm, old, own).await,
        }
    }

    /// Committed hold `old`'s reservation in its own shape, if it is a live committed
    /// reservation (not itself a replacement).
    fn own_shape(&self, st: &State, slurm: &Slurm, old: HoldId) -> Option<NewShape> {
        match st.holds.get(old) {
            Some((HoldState::Committed, b)) if b.growth.is_none() => {
                let (target, license) = self.booked_shape(st, slurm, b)?;
                let user = st.local.users.get(&old)?.clone();
                Some(NewShape { name: Self::name_in(st, slurm, old), target, user, license })
            }
            _ => None,
        }
    }

    /// Gives the reservation of committed hold `old` back its own shape `own` after a
    /// modification of it ended undecided (aborted, lapsed); a failure is left to the next sync.
    async fn give_back(&self, slurm: &Slurm, old: HoldId, own: NewShape) {
        let name = own.name.clone();
        match self.reshape(slurm, own).await {
            Ok(()) => {
                self.state().local.grown.remove(&old);
            }
            Err(e) => {
                tracing::warn!(site = %self.site().id, reservation = %name, error = %e, "a reservation could not be given back its shape after its modification ended; the next sync tries again");
            }
        }
    }

    /// The LIS's Slurm lock for writing, if any of `holds` is a replacement at a Slurm site:
    /// held from the book's swap until [`Lis::take_over`] has shrunk the reservations, so that
    /// no [`Lis::sync`] judges a reservation in between (still grown to both shapes, no longer
    /// pending: it would read as changed in Slurm and break its plan).
    pub(super) async fn alone_for_replacements(&self, holds: &[HoldId]) -> Option<SlurmAlone<'_>> {
        self.slurm.as_ref()?;
        let replaces = {
            let st = self.state();
            holds.iter().any(|&h| st.holds.get(h).is_some_and(|(_, b)| b.growth.is_some()))
        };
        if replaces {
            Some(self.slurm_lock.write().await)
        } else {
            None
        }
    }

    /// Commit of replacement holds `(hold, old)` of reservations `old` (after the book's
    /// swap, under `alone` from [`Lis::alone_for_replacements`]): each `hold` takes over its
    /// reservation's name, and Slurm's reservations are shrunk from both shapes to the new
    /// ones, together ([`Lis::reshape_all`]). One that Slurm cannot shrink is broken (it still
    /// holds the union, which covers the new shape: no job in it is cut short).
    pub(super) async fn take_over(&self, alone: &SlurmAlone<'_>, taken: &[(HoldId, HoldId)]) {
        let Some(slurm) = &self.slurm else { return };
        let todo: Vec<(HoldId, NewShape)> = {
            let mut st = self.state.lock().expect("LIS state lock");
            taken
                .iter()
                .filter_map(|&(hold, old)| {
                    st.local.replacing.remove(&hold);
                    st.local.grown.remove(&old);
                    st.local.names.remove(&old);
                    st.local.users.remove(&old);
                    st.local.broken.remove(&old);
                    st.local.created.remove(&old);
                    let name = Self::name_in(&st, slurm, hold);
                    let user = st.local.users.get(&hold).cloned()?;
                    let (target, license) = st.holds.get(hold).and_then(|(_, b)| self.booked_shape(&st, slurm, b))?;
                    Some((hold, NewShape { name, target, user, license }))
                })
                .collect()
        };
        let shapes: Vec<NewShape> = todo.iter().map(|(_, to)| to.clone()).collect();
        let answers = self.reshape_all_alone(alone, slurm, &shapes).await;
        for ((hold, to), answer) in todo.into_iter().zip(answers) {
            let Err(e) = answer else { continue };
            tracing::warn!(site = %self.site().id, reservation = %to.name, error = %e, "a modified reservation could not be shrunk to its new shape");
            let mut st = self.state();
            if st.holds.get(hold).is_some() {
                st.local
                    .broken
                    .insert(hold, format!("its modification was committed but Slurm kept another shape: {e}"));
            }
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
        // Not in the middle of a reshape (a reservation deleted to be made again), and no
        // reshape between the listing and its judgement below (a modification's commit
        // shrinking the reservations it swapped: [`Lis::alone_for_replacements`]).
        let listing = self.slurm_lock.read().await;
        let all = slurm.reservations().await?;
        let down: HashMap<String, String> = slurm.unusable_nodes().await?.into_iter().collect();
        let now = self.clock.now();
        let partition = &slurm.config().partition;
        let mut report = SyncReport::default();
        let (ours, foreign): (Vec<&SlurmReservation>, Vec<&SlurmReservation>) =
            all.iter().partition(|r| slurm.hold_of(&r.name).is_some());
        let mut strays = Vec::new();
        let mut missing = Vec::new();
        // (hold, name, shape, user, license): reservations to give back their booked shape.
        let mut leftovers = Vec::new();
        {
            let mut st = self.state();
            // Windows Slurm refused are offered again: the listing above is the new truth.
            for (resource, span) in std::mem::take(&mut st.local.learned) {
                let _ = st.calendars.get_mut(resource).remove(span);
            }
            // Capacity sold in Slurm by others: blocked, as far as it is free here. The cores
            // of this partition's reservations; the licenses of the site's GPU pools, whatever
            // the partition (a license is the cluster's).
            let pools: Vec<(SiteResource, String)> = self
                .site
                .read()
                .expect("LIS site lock")
                .attributes
                .gpus
                .iter()
                .enumerate()
                .map(|(i, g)| (SiteResource::GpuPool(i), slurm.config().gpu_license(&g.model)))
                .collect();
            let wanted: HashMap<&str, ForeignWindow> = foreign
                .iter()
                .filter(|r| r.end > now)
                .map(|r| {
                    let here = r.partition.as_ref().is_none_or(|p| p == partition);
                    let gpus: Vec<(SiteResource, u64)> = pools
                        .iter()
                        .filter_map(|(pool, l)| r.licenses.iter().find(|(x, _)| x == l).map(|(_, n)| (*pool, *n)))
                        .collect();
                    let w = ForeignWindow {
                        start: r.start.max(now),
                        end: r.end,
                        cpus: if here { r.cpus } else { 0 },
                        gpus,
                    };
                    (r.name.as_str(), w)
                })
                .filter(|(_, w)| w.cpus > 0 || !w.gpus.is_empty())
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
                for (resource, span) in f.spans {
                    let _ = st.calendars.get_mut(resource).remove(span);
                }
            }
            for (name, window) in wanted {
                if st.local.foreign.contains_key(name) {
                    continue;
                }
                let mut spans = Vec::new();
                for (resource, n) in
                    std::iter::once((SiteResource::Cpus, window.cpus)).chain(window.gpus.iter().copied())
                {
                    let got = st.calendars.get_mut(resource).add_up_to(window.start, window.end, n);
                    spans.extend(got.into_iter().map(|s| (resource, s)));
                }
                st.local.foreign.insert(name.to_owned(), Foreign { window, spans });
                report.foreign_changed += 1;
            }
            report.foreign = st.local.foreign.len();

            // Replacements whose lease lapsed (never aborted): their growth is given back below.
            let lapsed: Vec<HoldId> =
                st.local.replacing.keys().copied().filter(|b| st.holds.get(*b).is_none()).collect();
            for b in lapsed {
                let old = st.local.replacing.remove(&b).expect("listed");
                st.local.names.remove(&b);
                st.local.users.remove(&b);
                if st.local.created.remove(&b) {
                    st.local.grown.insert(old);
                }
            }

            // coreserve's own reservations against the hold book, by name: the owner of a
            // name is the live hold it was made for (a pending replacement shares the name of
            // the reservation it replaces, which stays the owner until the commit).
            let mut owner: HashMap<String, HoldId> = HashMap::new();
            for (h, _, _) in st.holds.active() {
                if !st.local.replacing.contains_key(&h) {
                    owner.insert(Self::name_in(&st, slurm, h), h);
                }
            }
            let mut seen = HashSet::new();
            for r in &ours {
                let Some(&hold) = owner.get(&r.name) else {
                    strays.push(r.name.clone());
                    continue;
                };
                let Some((state, booked)) = st.holds.get(hold) else { continue };
                seen.insert(hold);
                let span =
                    st.calendars.get(SiteResource::Cpus).span(super::cpu_span(booked)).expect("a live hold's span");
                let (own, own_license) = self.booked_shape(&st, slurm, booked).expect("a live hold's spans");
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
                // Its shape, or while a modification of it is pending, the new shape or both.
                let mut shapes = vec![own];
                if r.start <= now && r.start < own.start {
                    // Started before the hold's window: Slurm kept the start ([`Lis::reshape`]).
                    shapes.push(Shape { start: r.start, ..own });
                }
                // A pending modification grows what Slurm has, the started shape included.
                let bases = shapes.clone();
                for (&b, &old) in &st.local.replacing {
                    if old != hold {
                        continue;
                    }
                    if let Some(g) = st.holds.get(b).and_then(|(_, bb)| bb.growth.as_ref()) {
                        let new = Self::requested_shape(&g.request);
                        shapes.push(new);
                        shapes.extend(bases.iter().map(|base| base.union(new)));
                    }
                }
                let changed = !shapes.contains(&r.shape());
                // Holding more than the hold, with no modification of it pending: left so by a
                // modification that ended undecided while Slurm grew it (aborted meanwhile,
                // lapsed), or that a crash interrupted after Slurm's growth (to both shapes)
                // and before its shrink (to the decided one), in a previous life (not seen by
                // this process yet). Given back the booked shape, as a missing one is made
                // again; anything else is drift.
                let pending = st.local.replacing.values().any(|&old| old == hold);
                let covers = r.shape().union(own) == r.shape();
                let grown_here = st.local.grown.contains(&hold);
                if changed && covers && !pending && (grown_here || !made_before.contains(&hold)) {
                    if let Some(user) = st.local.users.get(&hold).cloned() {
                        leftovers
                            .push((hold, NewShape { name: r.name.clone(), target: own, user, license: own_license }));
                        st.local.created.insert(hold);
                        continue;
                    }
                }
                // A window that is over is not judged: Slurm takes no end in the past, so one
                // given back or decided after its end ends a moment after it ([`Lis::reshape`]).
                let over = own.end <= now;
                if changed && !over && state == HoldState::Committed && !st.local.broken.contains_key(&hold) {
                    let reason = format!(
                        "changed in Slurm: {} CPUs, {} GPUs over {} .. {} instead of {} CPUs, {} GPUs over {} .. {}",
                        r.cpus,
                        r.shape().gpus,
                        crate::model::from_time(r.start).to_rfc3339(),
                        crate::model::from_time(r.end).to_rfc3339(),
                        span.amount,
                        own.gpus,
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
                    st.calendars.get(SiteResource::Cpus).span(super::cpu_span(b)).map(|s| (h, state, s.end))
                })
                .filter(|&(h, _, end)| end > now && !seen.contains(&h) && !st.local.replacing.contains_key(&h))
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
        drop(listing);
        for name in &strays {
            // Slurm keeps a reservation jobs were submitted into: not deleted, so not counted
            // as deleted; the next sync tries again (a job is never taken out of it).
            match slurm.delete(name).await {
                Ok(()) => report.strays_deleted += 1,
                Err(SlurmError::InUse(_)) => report.strays_in_use += 1,
                Err(e) => {
                    tracing::warn!(site = %self.site().id, reservation = %name, error = %e, "stray Slurm reservation not deleted; the next sync tries again");
                }
            }
        }
        let shapes: Vec<NewShape> = leftovers.iter().map(|(_, to)| to.clone()).collect();
        let answers = self.reshape_all(slurm, &shapes).await;
        for ((hold, _), answer) in leftovers.into_iter().zip(answers) {
            match answer {
                Ok(()) => {
                    self.state().local.grown.remove(&hold);
                    report.reshaped += 1;
                }
                Err(e) => {
                    let mut st = self.state();
                    if st.holds.get(hold).is_some() && !st.local.broken.contains_key(&hold) {
                        st.local.broken.insert(
                            hold,
                            format!("left in another shape in Slurm and could not be given its own: {e}"),
                        );
                        report.newly_broken += 1;
                    }
                }
            }
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
        if report.strays_in_use > 0 {
            tracing::debug!(site = %self.site().id, strays = report.strays_in_use, "stray Slurm reservations kept by Slurm while jobs are in them");
        }
        if (report.foreign_changed, report.strays_deleted, report.recreated, report.reshaped, report.newly_broken)
            != (0, 0, 0, 0, 0)
        {
            tracing::info!(site = %self.site().id, ?report, "synchronised with Slurm");
        }
        Ok(report)
    }
}
