//! LIS — Local Information Service, one per site (Ando & Aida, section 2.3; docs/algorithm.md).
//!
//! Manages the site's compute reservations in a [`MultiCalendar`] of its CPUs and GPU pools,
//! answers free-slot searches (earliest start in a window at which the CPUs, and the GPUs
//! of one suitable pool, are free together, with the site's utilisation and prices) and is a
//! two-phase-commit participant. Check-and-hold is atomic: one mutex guards the calendars and
//! the hold book, so two planners can never both get the last CPUs or GPUs, and a hold books
//! its CPUs and GPUs together or not at all.
//!
//! A LIS may front a real batch scheduler ([`slurm`], bound with [`Lis::with_slurm`]): then a
//! hold becomes a Slurm advance reservation before it is durable, Slurm's own reservations are
//! blocked in the calendar, and [`Lis::sync`] reconciles the two (module `binding`,
//! docs/protocol.md "A LIS in front of Slurm").

mod binding;
pub mod slurm;

pub use binding::SyncReport;

use std::sync::{Arc, Mutex, RwLock};

use crate::protocol::bookkeeping::{self, Bookkeeping, KeepsHolds};
use async_trait::async_trait;

use crate::calendar::{MultiCalendar, ResourceKey, SpanId};
use crate::clock::Clock;
use crate::model::{
    check_text, price_ok, AttributeError, GpuDemand, PoolGpus, Site, SiteAttributes, SiteId, TextError, Time, MAX_PRICE,
};
use crate::protocol::{
    book_steps, usage_steps, Compute, ComputeHoldRequest, ComputeOffer, ComputeQuery, ComputeSnapshot, Hold, HoldId,
    HoldState, Participant, ParticipantError, SnapshotWindow,
};

/// Why [`Lis::update_site`] refused a change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SiteUpdateError {
    /// Id, node, CPU count or GPU pools differ: they cannot change at run time.
    #[error(
        "site `{0}`: id, node, cpus and gpus are fixed at run time (prices, os and the other attributes can change)"
    )]
    Fixed(SiteId),
    /// A price outside `0 ..= MAX_PRICE` (the value given).
    #[error("price_per_cpu_hour must be a finite number in 0..={MAX_PRICE} (got {0})")]
    BadPrice(f64),
    /// An invalid OS name.
    #[error("os: {0}")]
    BadOs(TextError),
    /// Invalid attributes.
    #[error(transparent)]
    BadAttributes(#[from] AttributeError),
    /// The OS or another attribute a job can require would change under holds or
    /// reservations that end in the future.
    #[error("site `{site}`: os and attributes cannot change while {} holds or reservations end in the future", holds.len())]
    OsInUse { site: SiteId, holds: Vec<HoldId> },
}

/// One hold or reservation in a LIS's book, as [`Lis::booked`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Booked {
    pub hold: HoldId,
    pub start: Time,
    pub end: Time,
    pub cpus: u64,
    /// GPUs held with the CPUs, if any.
    pub gpus: Option<PoolGpus>,
    /// Held (with its lease end) or committed.
    pub state: HoldState,
    /// The principal that prepared it through this LIS's HTTP endpoints; `None` for holds of
    /// the process's own planners (all-in-one) and for holds journaled before owners were
    /// recorded.
    pub owner: Option<String>,
    /// At a Slurm site: the name of its Slurm reservation.
    pub local_reservation: Option<String>,
    /// Why the site's scheduler no longer honours this reservation, if it does not.
    pub broken: Option<String>,
}

/// A resource of a site, named: each is a calendar of the site's [`MultiCalendar`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum SiteResource {
    /// The site's CPUs.
    Cpus,
    /// GPU pool `i`: the site's `attributes.gpus[i]` (one model).
    GpuPool(usize),
}

impl ResourceKey for SiteResource {
    fn position(self) -> usize {
        match self {
            SiteResource::Cpus => 0,
            SiteResource::GpuPool(i) => 1 + i,
        }
    }
}

/// The site's state of holds: its resources' calendars ([`SiteResource`]), its book of holds,
/// and the site's scheduler's own state for a LIS bound to one (empty otherwise).
pub(crate) type State = Bookkeeping<SiteResource, ComputeHoldRequest, binding::LocalState>;

/// What one hold booked: its CPUs' span and, with GPUs, its pool's span (see
/// [`bookkeeping::HoldSpans`]).
pub(crate) type HoldSpans = bookkeeping::HoldSpans<SiteResource, ComputeHoldRequest>;

/// The span of `b`'s CPUs.
fn cpu_span(b: &HoldSpans) -> SpanId {
    b.spans.iter().find_map(|&(r, span)| (r == SiteResource::Cpus).then_some(span)).expect("a hold books CPUs")
}

/// The pool index and span of `b`'s GPUs, if it has any.
fn gpu_span(b: &HoldSpans) -> Option<(usize, SpanId)> {
    b.spans.iter().find_map(|&(r, span)| match r {
        SiteResource::GpuPool(i) => Some((i, span)),
        SiteResource::Cpus => None,
    })
}

/// The attributes a job can require, without the prices (what may not change under bookings).
fn requirable(site: &Site) -> (String, SiteAttributes) {
    (site.os.to_ascii_lowercase(), SiteAttributes { price_per_gpu_hour: 0.0, ..site.attributes.clone() })
}

/// The local reservation manager of one site.
pub struct Lis {
    /// The site's catalogue entry; its price and OS may change at run time
    /// ([`Lis::update_site`]), its id, node and CPU count may not.
    site: RwLock<Site>,
    clock: Arc<dyn Clock>,
    lease_s: i64,
    state: Mutex<State>,
    /// The site's own reservation scheduler, if this LIS fronts one.
    slurm: Option<slurm::Slurm>,
    /// Slurm changes that must not interleave: a reservation deleted to be made again in
    /// another shape ([`Lis::reshape`], write) against creates and the sync's listing (read).
    slurm_lock: tokio::sync::RwLock<()>,
    /// A replica ([`Lis::replica`]): the reservation prefix its offers carry, the real LIS's.
    replica_prefix: Option<String>,
}

impl Lis {
    /// A LIS for `site` with an empty calendar; holds live `lease_s` seconds of `clock` time.
    pub fn new(site: Site, clock: Arc<dyn Clock>, lease_s: i64) -> Self {
        let pools = site.attributes.gpus.iter().enumerate();
        let calendars = MultiCalendar::new(
            std::iter::once((SiteResource::Cpus, u64::from(site.cpus)))
                .chain(pools.map(|(i, g)| (SiteResource::GpuPool(i), u64::from(g.count)))),
        );
        Lis {
            site: RwLock::new(site),
            clock,
            lease_s,
            state: Mutex::new(State::new(calendars, binding::LocalState::default())),
            slurm: None,
            slurm_lock: tokio::sync::RwLock::new(()),
            replica_prefix: None,
        }
    }

    /// A local replica of a LIS from its snapshot (docs/algorithm.md, "Plans from snapshots"):
    /// a LIS of the snapshot's site whose calendars hold, over the snapshot's window, what the
    /// real one held when it took it, and whose offers carry its reservation prefix. Its free-slot
    /// search is this type's own, so inside the window it answers as the real LIS did; its
    /// holds are the planner's own tentative ones, never seen by anyone else. Holds live
    /// `lease_s` seconds of `clock` time.
    ///
    /// # Errors
    /// `Invalid` if the snapshot books more than the site has (it is not of this site's size)
    /// or names GPU pools the site does not have.
    pub fn replica(snapshot: &ComputeSnapshot, clock: Arc<dyn Clock>, lease_s: i64) -> Result<Self, ParticipantError> {
        let lis = Lis {
            replica_prefix: snapshot.reservation_prefix.clone(),
            ..Lis::new(snapshot.site.clone(), clock, lease_s)
        };
        if snapshot.gpu_pools.len() > snapshot.site.attributes.gpus.len() {
            return Err(ParticipantError::Invalid("a snapshot names GPU pools its site does not have".into()));
        }
        {
            let mut st = lis.state.lock().expect("LIS state lock");
            let bad = |e: crate::calendar::CalendarError| ParticipantError::Invalid(format!("snapshot: {e}"));
            book_steps(st.calendars.get_mut(SiteResource::Cpus), &snapshot.cpus).map_err(bad)?;
            for (i, steps) in snapshot.gpu_pools.iter().enumerate() {
                book_steps(st.calendars.get_mut(SiteResource::GpuPool(i)), steps).map_err(bad)?;
            }
        }
        Ok(lis)
    }

    /// The site this LIS manages (a copy: the price and OS may change).
    pub fn site(&self) -> Site {
        self.site.read().expect("LIS site lock").clone()
    }

    /// Replaces the site's price and OS (the values later offers carry).
    ///
    /// The OS may change only while no hold or reservation of the site ends after now (a
    /// committed job must keep the OS it was booked for); the check and the change are atomic
    /// with every prepare (under the calendar's lock). A price change always applies, to later
    /// offers only.
    ///
    /// # Errors
    /// [`SiteUpdateError::Fixed`] if `site` changes the id, node or CPU count (the calendar
    /// and the NIS's site-to-node map are built from them); [`SiteUpdateError::BadPrice`],
    /// [`SiteUpdateError::BadOs`] or [`SiteUpdateError::BadAttributes`] for a price outside
    /// `0 ..= MAX_PRICE`, an invalid OS name or invalid attributes; [`SiteUpdateError::OsInUse`] with
    /// the holds and reservations that end in the future, for an OS change.
    pub fn update_site(&self, site: Site) -> Result<(), SiteUpdateError> {
        let st = self.state();
        let mut cur = self.site.write().expect("LIS site lock");
        if site.id != cur.id
            || site.node != cur.node
            || site.cpus != cur.cpus
            || site.attributes.gpus != cur.attributes.gpus
        {
            return Err(SiteUpdateError::Fixed(cur.id.clone()));
        }
        if !price_ok(site.price_per_cpu_hour) {
            return Err(SiteUpdateError::BadPrice(site.price_per_cpu_hour));
        }
        check_text(&site.os).map_err(SiteUpdateError::BadOs)?;
        site.attributes.validate()?;
        if site.os != cur.os || requirable(&site) != requirable(&cur) {
            let now = self.clock.now();
            let mut holds: Vec<HoldId> = st
                .holds
                .active()
                .filter(|(_, _, b)| st.calendars.get(SiteResource::Cpus).span(cpu_span(b)).is_some_and(|s| s.end > now))
                .map(|(id, _, _)| id)
                .collect();
            if !holds.is_empty() {
                holds.sort();
                return Err(SiteUpdateError::OsInUse { site: cur.id.clone(), holds });
            }
        }
        *cur = site;
        Ok(())
    }

    /// Puts back a hold or reservation read from a journal (at start, before any other call):
    /// books `req`'s CPUs (and GPUs) as hold `id` of `req`'s transaction, held until
    /// `expires_at` or committed (`state`).
    ///
    /// # Errors
    /// `UnknownSite` for a request not for this site; `Capacity` if it does not fit (the
    /// journal contradicts the site's capacity: the caller must stop).
    ///
    /// A replacement hold is put back as it was: held, with its growth over the reservation it
    /// replaces; committed, in that reservation's place (which is released, if still there).
    ///
    /// At a Slurm site, a replacement hold is bound to the name of the reservation it replaces
    /// (`req.reservation_name`, else that reservation's, if it is still here).
    pub fn restore(&self, id: HoldId, req: &ComputeHoldRequest, state: HoldState) -> Result<(), ParticipantError> {
        let mut st = self.state();
        let name = match (&self.slurm, req.replaces) {
            (Some(slurm), Some(old)) => req
                .reservation_name
                .clone()
                .or_else(|| st.holds.get(old).is_some().then(|| Self::name_in(&st, slurm, old))),
            _ => None,
        };
        bookkeeping::restore(&mut st, id, req.txn, req.replaces, state, |st, over| self.book(st, req, over))?;
        if let Some(user) = self.local_user(req).ok().flatten() {
            st.local.users.insert(id, user);
        }
        match (state, req.replaces) {
            (HoldState::Committed, Some(old)) => {
                // In its reservation's place, under its name.
                st.local.names.remove(&old);
                st.local.users.remove(&old);
                st.local.created.remove(&old);
                Self::bind_name(&mut st, id, name, None);
            }
            _ => Self::bind_name(&mut st, id, name, req.replaces),
        }
        Ok(())
    }

    /// Books `req`'s CPUs and GPUs in the calendars, all or none (check and book in one step,
    /// under the state lock). A replacement hold books its growth over the committed
    /// reservation it replaces (`grows_over`), which must be this site's and keep its GPU
    /// pool; `None` books `req`'s shape outright.
    fn book(
        &self,
        st: &mut State,
        req: &ComputeHoldRequest,
        grows_over: Option<HoldId>,
    ) -> Result<HoldSpans, ParticipantError> {
        match grows_over {
            None => self.book_new(st, req),
            Some(old) => self.book_growth(st, old, req),
        }
    }

    fn book_growth(
        &self,
        st: &mut State,
        old: HoldId,
        req: &ComputeHoldRequest,
    ) -> Result<HoldSpans, ParticipantError> {
        let pool = self.pool_of(req)?;
        let base = bookkeeping::replaced(st, old)?;
        if gpu_span(&base).map(|g| g.0) != pool.map(|p| p.0) {
            return Err(ParticipantError::InvalidHold(format!(
                "a modification keeps the GPU pool of reservation {old}"
            )));
        }
        let mut grow = vec![(SiteResource::Cpus, cpu_span(&base), u64::from(req.cpus))];
        let pool = match (gpu_span(&base), pool) {
            (Some((i, span)), Some((_, g))) => {
                grow.push((SiteResource::GpuPool(i), span, u64::from(g.count)));
                Some((i, g))
            }
            _ => None,
        };
        let request = ComputeHoldRequest { replaces: None, ..req.clone() };
        st.add_growth(old, base, &grow, (req.start, req.end), request).map_err(|r| Self::refusal(r, pool.map(|p| p.1)))
    }

    /// The GPU pool `req` asks for (its index and the GPUs asked), if any.
    fn pool_of<'r>(&self, req: &'r ComputeHoldRequest) -> Result<Option<(usize, &'r PoolGpus)>, ParticipantError> {
        let site = self.site.read().expect("LIS site lock");
        if req.site != site.id {
            return Err(ParticipantError::UnknownSite(req.site.clone()));
        }
        match &req.gpus {
            None => Ok(None),
            Some(g) => match site.attributes.gpu_pool(&g.model) {
                Some((i, _)) => Ok(Some((i, g))),
                None => {
                    Err(ParticipantError::InvalidHold(format!("site `{}` has no GPU model `{}`", site.id, g.model)))
                }
            },
        }
    }

    fn book_new(&self, st: &mut State, req: &ComputeHoldRequest) -> Result<HoldSpans, ParticipantError> {
        let pool = self.pool_of(req)?;
        let mut demand = vec![(SiteResource::Cpus, u64::from(req.cpus))];
        demand.extend(pool.map(|(i, g)| (SiteResource::GpuPool(i), u64::from(g.count))));
        let spans = st.calendars.add(req.start, req.end, &demand).map_err(|r| Self::refusal(r, pool.map(|p| p.1)))?;
        Ok(HoldSpans { spans: demand.iter().map(|&(resource, _)| resource).zip(spans).collect(), growth: None })
    }

    /// A [`MultiCalendar`]'s refusal of a demand (the CPUs first, then the pool of `gpus`, if
    /// any) as the participant's: the index in the demand of the resource that refused, and
    /// its error.
    fn refusal((r, e): (usize, crate::calendar::CalendarError), gpus: Option<&PoolGpus>) -> ParticipantError {
        match gpus.filter(|_| r > 0) {
            None => ParticipantError::from_calendar(e, None),
            Some(g) => ParticipantError::from_gpu_calendar(e, &g.model),
        }
    }

    /// The owner of hold `id` (see [`crate::protocol::HoldBook::owner`]): `None` for an unknown
    /// hold, `Some(None)` for one without a recorded owner.
    pub fn owner(&self, id: HoldId) -> Option<Option<String>> {
        self.state().holds.owner(id).map(|o| o.map(str::to_owned))
    }

    /// Sets the owner of hold `id` (at start, after [`Lis::restore`], from the journal).
    pub fn set_owner(&self, id: HoldId, owner: Option<String>) {
        self.state().holds.set_owner(id, owner);
    }

    fn prepare_owned(&self, req: &ComputeHoldRequest, owner: Option<&str>) -> Result<Hold, ParticipantError> {
        let user = self.local_user(req)?;
        let mut st = self.state();
        let name = self.local_name(&st, req)?;
        let booked = self.book(&mut st, req, req.replaces)?;
        let hold = Hold { id: HoldId::new(), expires_at: self.clock.now() + self.lease_s };
        st.holds.hold(hold.id, req.txn, booked, hold.expires_at);
        st.holds.set_owner(hold.id, owner.map(str::to_owned));
        if let Some(user) = user {
            st.local.users.insert(hold.id, user);
        }
        Self::bind_name(&mut st, hold.id, name, req.replaces);
        Ok(hold)
    }

    /// Holds and reservations overlapping `[from, to)`, sorted by start then id.
    pub fn booked(&self, from: Time, to: Time) -> Vec<Booked> {
        let st = self.state();
        let site = self.site.read().expect("LIS site lock");
        let mut out: Vec<Booked> = st
            .holds
            .active()
            .filter_map(|(hold, state, b)| {
                let (s, gpus) = match &b.growth {
                    // A replacement hold: the new shape it holds.
                    Some(g) => {
                        let r = &g.request;
                        (
                            crate::calendar::Span { start: r.start, end: r.end, amount: u64::from(r.cpus) },
                            r.gpus.clone(),
                        )
                    }
                    None => {
                        let s = st.calendars.get(SiteResource::Cpus).span(cpu_span(b))?; // pruned reservations are gone
                        let gpus = gpu_span(b).and_then(|(pool, span)| {
                            let g = st.calendars.get(SiteResource::GpuPool(pool)).span(span)?;
                            let count = u32::try_from(g.amount).expect("a GPU count fits a pool's u32 size");
                            Some(PoolGpus { model: site.attributes.gpus[pool].model.clone(), count })
                        });
                        (s, gpus)
                    }
                };
                (s.start < to && s.end > from).then(|| Booked {
                    hold,
                    start: s.start,
                    end: s.end,
                    cpus: s.amount,
                    gpus,
                    state,
                    owner: st.holds.owner(hold).flatten().map(str::to_owned),
                    local_reservation: self.slurm.as_ref().map(|s| Self::name_in(&st, s, hold)),
                    broken: st.local.broken.get(&hold).cloned(),
                })
            })
            .collect();
        out.sort_by_key(|r| (r.start, r.hold));
        out
    }

    /// Booked CPUs at instant `t` (holds included).
    pub fn usage_at(&self, t: Time) -> u64 {
        self.state().calendars.get(SiteResource::Cpus).usage_at(t)
    }

    /// Booked GPUs of each pool (in the site's order) at instant `t` (holds included).
    pub fn gpu_usage_at(&self, t: Time) -> Vec<u64> {
        let pools = self.site.read().expect("LIS site lock").attributes.gpus.len();
        let st = self.state();
        (0..pools).map(|i| st.calendars.get(SiteResource::GpuPool(i)).usage_at(t)).collect()
    }

    /// Live holds (not committed, not expired).
    pub fn holds_outstanding(&self) -> usize {
        self.state().holds.outstanding()
    }

    /// Spans (holds and reservations) booked in the calendar.
    pub fn booked_spans(&self) -> usize {
        self.state().calendars.get(SiteResource::Cpus).len()
    }

    /// Forgets reservations (and holds) that ended at or before `horizon`: history no query
    /// can reach. Returns how many spans were pruned.
    pub fn prune_before(&self, horizon: Time) -> usize {
        let mut st = self.state();
        // A GPU span ends with its CPU span: the pools are pruned to the same horizon.
        let pruned: std::collections::HashSet<SpanId> =
            st.calendars.prune_before(horizon).swap_remove(SiteResource::Cpus.position()).into_iter().collect();
        st.holds.forget(|b| b.growth.is_none() && pruned.contains(&cpu_span(b)));
        pruned.len()
    }
}

impl Lis {
    /// The prefix of the site's scheduler's reservation names its offers carry: its Slurm
    /// binding's, or a replica's real LIS's.
    fn reservation_prefix(&self) -> Option<String> {
        self.slurm.as_ref().map(|s| s.config().prefix.clone()).or_else(|| self.replica_prefix.clone())
    }
}

#[async_trait]
impl Participant<Compute> for Lis {
    async fn query(&self, q: &ComputeQuery) -> Result<ComputeOffer, ParticipantError> {
        let me = self.site();
        if q.site != me.id {
            return Err(ParticipantError::UnknownSite(q.site.clone()));
        }
        let st = self.state();
        let (earliest_start, gpu_model) = match &q.gpus {
            None => {
                let cpus = [(SiteResource::Cpus, u64::from(q.cpus))];
                (st.calendars.earliest_start(q.window_start, q.duration_s, &cpus, q.deadline), None)
            }
            Some(g) => earliest_with_gpus(&st, &me, q, g),
        };
        Ok(ComputeOffer {
            site: q.site.clone(),
            earliest_start,
            utilisation: st.calendars.get(SiteResource::Cpus).utilisation(q.window_start, q.deadline),
            price_per_cpu_hour: me.price_per_cpu_hour,
            gpu_model,
            price_per_gpu_hour: me.attributes.price_per_gpu_hour,
            reservation_prefix: self.reservation_prefix(),
        })
    }

    /// The calendars over `window`, as [`Participant::query`] reads them (at a Slurm site with
    /// what is blocked for Slurm's own reservations), after lapsed holds are released.
    async fn snapshot(&self, window: &SnapshotWindow) -> Result<Option<ComputeSnapshot>, ParticipantError> {
        let me = self.site();
        let st = self.state();
        let pools = me.attributes.gpus.len();
        Ok(Some(ComputeSnapshot {
            window: *window,
            cpus: usage_steps(st.calendars.get(SiteResource::Cpus), *window),
            gpu_pools: (0..pools).map(|i| usage_steps(st.calendars.get(SiteResource::GpuPool(i)), *window)).collect(),
            reservation_prefix: self.reservation_prefix(),
            site: me,
        }))
    }

    async fn prepare(&self, req: &ComputeHoldRequest) -> Result<Hold, ParticipantError> {
        self.prepare_owned(req, None)
    }

    async fn prepare_for(&self, req: &ComputeHoldRequest, owner: &str) -> Result<Hold, ParticipantError> {
        self.prepare_owned(req, Some(owner))
    }

    async fn drift(&self) -> Result<Vec<crate::protocol::Drift>, ParticipantError> {
        Ok(Lis::drift(self))
    }
}

/// Phase 2. At a Slurm site the reservation is made in Slurm before a hold is durable
/// (`persist`) or committed, whichever comes first, and deleted when the hold is aborted or
/// released (see module `binding`).
#[async_trait]
impl KeepsHolds for Lis {
    type Resource = SiteResource;
    type Request = ComputeHoldRequest;
    type Local = binding::LocalState;

    fn kept(&self) -> (&Mutex<State>, &dyn Clock) {
        (&self.state, &*self.clock)
    }

    async fn commit_hold(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.commit_holds(&[hold]).await.pop().expect("one answer per hold")
    }

    /// The holds' Slurm reservations made first (normally at persist already); a replaced
    /// reservation's local one (Slurm) is its replacement's then, in its new shape: all of
    /// them shrunk together, so that a modification that moved a workflow's dozens of jobs
    /// commits in a few `scontrol` calls per reservation ([`Lis::reshape_all`]).
    async fn commit_holds(&self, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
        let siblings = self.uncreated_siblings(holds);
        if !siblings.is_empty() {
            // Made with these, by start; a sibling's refusal is the answer to its own commit.
            let _ = self.ensure_local(&[holds, &siblings].concat()).await;
        }
        if let Err(e) = self.ensure_local(holds).await {
            if let [_] = holds {
                return vec![Err(e)];
            }
            // Each answers for itself.
            let mut answers = Vec::with_capacity(holds.len());
            for &h in holds {
                answers.push(self.commit_hold(h).await);
            }
            return answers;
        }
        let alone = self.alone_for_replacements(holds).await;
        let mut taken = Vec::new();
        let answers = holds
            .iter()
            .map(|&hold| -> Result<(), ParticipantError> {
                let replaced = bookkeeping::commit(&mut *self.state(), hold, |st, g| self.book_new(st, &g.request))?;
                taken.extend(replaced.map(|old| (hold, old)));
                Ok(())
            })
            .collect();
        if let Some(alone) = &alone {
            self.take_over(alone, &taken).await;
        }
        answers
    }

    /// In memory nothing is made durable; at a Slurm site the holds' reservations are made in
    /// Slurm (all or the first refusal), so that a decided transaction never waits on Slurm.
    async fn persist_holds(&self, holds: &[HoldId]) -> Result<(), ParticipantError> {
        self.ensure_local(holds).await
    }

    /// The hold's Slurm reservation, at a Slurm site.
    async fn withdraw(&self, hold: HoldId) {
        self.drop_local(hold).await;
    }
}

/// The earliest start of `q` with `g`'s GPUs, over the site's pools that meet `g`'s bounds, and
/// the pool that gives it (the first such pool in the site's order on a tie).
fn earliest_with_gpus(st: &State, site: &Site, q: &ComputeQuery, g: &GpuDemand) -> (Option<Time>, Option<String>) {
    site.attributes
        .gpus
        .iter()
        .enumerate()
        .filter(|(_, pool)| g.accepts(pool))
        .filter_map(|(i, pool)| {
            let demand = [(SiteResource::Cpus, u64::from(q.cpus)), (SiteResource::GpuPool(i), u64::from(g.count))];
            st.calendars
                .earliest_start(q.window_start, q.duration_s, &demand, q.deadline)
                .map(|t| (t, i, pool.model.clone()))
        })
        .min_by_key(|&(t, i, _)| (t, i))
        .map_or((None, None), |(t, _, model)| (Some(t), Some(model)))
}

#[cfg(test)]
mod tests;
