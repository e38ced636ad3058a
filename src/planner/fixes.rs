//! What the search fixes and what it asks of the book of its tentative holds.
//!
//! The search ([`super::search`]) sends no message: every question it has for the
//! participants (candidate sites, earliest starts, paths) and every fix it makes (a hold under
//! BIR, an overlay entry under BBR-overlay, nothing under plain BBR) goes through a
//! [`TentativeBook`]. The planner's is [`super::book::Book`], which talks to the GIS, the LISes
//! and the NIS; the search's own tests drive it with a book of tabled answers. The fixes
//! ([`JobFix`], [`TransferFix`]) and the trail ([`Fix`]) are data both sides read.

use std::future::Future;

use crate::calendar::SpanId;
use crate::model::{LinkId, Outcome, PlanRequest, ReservationMethod, SiteId, Time};
use crate::protocol::{Candidates, ComputeOffer, HoldId, NetworkQuery, ParticipantError, Route};

/// The fixes of one attempt so far, at the current `st`.
#[derive(Debug, Clone)]
pub(in crate::planner) struct Fixes {
    /// The application's start time (Ando & Aida's `st`): every fix is at `st + offset`.
    pub(in crate::planner) st: Time,
    /// By job index (`None`: free).
    pub(in crate::planner) jobs: Vec<Option<JobFix>>,
    /// By transfer index (`None`: free).
    pub(in crate::planner) transfers: Vec<Option<TransferFix>>,
    /// The fixes in the order they were made (what [`TentativeBook::undo_to`] undoes, last
    /// first).
    pub(in crate::planner) trail: Vec<Fix>,
    /// By transfer index: how many seconds after its producer's end a floating transfer
    /// starts (0: at once). The search slides one later when the network cannot carry it at
    /// once but can before its consumer starts (a fan-in's transfers share the consumer's
    /// access link); 0 again when its fix is undone.
    pub(in crate::planner) slide_s: Vec<Time>,
}

impl Fixes {
    /// Nothing fixed yet of `req`.
    pub(in crate::planner) fn new(req: &PlanRequest) -> Self {
        Fixes {
            st: 0,
            jobs: vec![None; req.jobs().len()],
            transfers: vec![None; req.transfers().len()],
            trail: Vec::new(),
            slide_s: vec![0; req.transfers().len()],
        }
    }

    /// Job `v`'s reservation `[start, end)` as fixed (absolute seconds).
    ///
    /// # Panics
    /// If `v` is not fixed.
    pub(in crate::planner) fn job_interval(&self, req: &PlanRequest, v: usize) -> (Time, Time) {
        let start = self.jobs[v].as_ref().expect("job is fixed").start;
        (start, start + req.job_span(v).duration_s)
    }

    /// Undoes transfer `e`'s fix (its slide back to 0): the fix, if it was fixed.
    pub(in crate::planner) fn unfix_transfer(&mut self, e: usize) -> Option<TransferFix> {
        self.slide_s[e] = 0;
        self.transfers[e].take()
    }

    /// Transfer `e`'s interval `[start, end)` at the current `st` with its two jobs on one
    /// site (`same_site`) or not. A floating transfer ([`PlanRequest::transfer_floats`]) starts
    /// at its producer's placed end (which must be fixed) plus its slide ([`Fixes::slide_s`])
    /// and, on one site, at the end and takes no time: it needs no network. Any other lies at
    /// `st + offset`, as laid out.
    pub(in crate::planner) fn transfer_interval_at(
        &self,
        req: &PlanRequest,
        e: usize,
        same_site: bool,
    ) -> (Time, Time) {
        let span = req.transfer_span(e);
        if req.transfer_floats(e) {
            let (_, end) = self.job_interval(req, req.transfer_ends(e).0);
            if same_site {
                return (end, end);
            }
            let start = end + self.slide_s[e];
            return (start, start + span.duration_s);
        }
        (self.st + span.offset_s, self.st + span.end_s())
    }

    /// The earliest start of job `v` at `site` (absolute seconds). A job that does not float
    /// starts at `st + offset`; under per-job placement (the request has floating jobs,
    /// [`PlanRequest::has_floating`]) no earlier than its placed predecessors allow either
    /// (their ends plus `dependency_gap_s`; a staged transfer's end when its producer is at
    /// another site, its producer's end on the same site, where the transfer needs no
    /// network), which makes a site that `st + offset` does not suit answer later, so the
    /// search delays `st`. A floating job starts as early as they allow
    /// ([`PlanRequest::floats`]; every predecessor is fixed before it).
    pub(in crate::planner) fn window(&self, req: &PlanRequest, v: usize, site: &SiteId) -> Time {
        let mut w = if req.floats(v) { Time::MIN } else { self.st + req.job_span(v).offset_s };
        if !req.has_floating() {
            return w;
        }
        for &p in req.after(v) {
            if self.jobs[p].is_some() {
                w = w.max(self.job_interval(req, p).1 + req.dependency_gap_s());
            }
        }
        for &e in req.staged_in(v) {
            let p = req.transfer_ends(e).0;
            if let Some(f) = &self.jobs[p] {
                w = w.max(self.transfer_interval_at(req, e, f.site == *site).1);
            }
        }
        w
    }

    /// Whether floating job `u` is free and every job it is after is fixed: its window
    /// ([`Self::window`]) is what the search will ask it at, unless those move first.
    pub(in crate::planner) fn ready(&self, req: &PlanRequest, u: usize) -> bool {
        req.floats(u) && self.jobs[u].is_none() && req.after(u).iter().all(|&p| self.jobs[p].is_some())
    }

    /// Transfer `e`'s interval with both its jobs fixed ([`Fixes::transfer_interval_at`]; a
    /// fixed transfer's own).
    pub(in crate::planner) fn transfer_interval(&self, req: &PlanRequest, e: usize) -> (Time, Time) {
        if let Some(f) = &self.transfers[e] {
            return f.interval;
        }
        let (a, b) = req.transfer_ends(e);
        let same = self.jobs[a].as_ref().zip(self.jobs[b].as_ref()).is_some_and(|(x, y)| x.site == y.site);
        self.transfer_interval_at(req, e, same)
    }
}

/// A job tentatively fixed on a site (under BIR, held there).
#[derive(Debug, Clone)]
pub(in crate::planner) struct JobFix {
    pub(in crate::planner) site: SiteId,
    /// Where its reservation starts (absolute seconds): `st + offset` for a job that does not
    /// float, its own placement for one that does.
    pub(in crate::planner) start: Time,
    pub(in crate::planner) price_per_cpu_hour: f64,
    pub(in crate::planner) price_per_gpu_hour: f64,
    /// The GPU pool the offer found free (jobs with GPUs).
    pub(in crate::planner) gpu_model: Option<String>,
    /// BIR: the hold made at the fix (BBR: set when the plan's batch is held).
    pub(in crate::planner) hold: Option<HoldId>,
    /// The site's prefix of its scheduler's reservation names (a LIS in front of Slurm).
    pub(in crate::planner) reservation_prefix: Option<String>,
    /// BBR-overlay: the fix's spans in the plan's own overlay of that site (CPUs, GPUs).
    pub(in crate::planner) overlay: Option<(SpanId, Option<SpanId>)>,
}

impl JobFix {
    /// The job placed on `offer`'s site from `start`, neither held nor overlaid yet.
    pub(in crate::planner) fn on(offer: &ComputeOffer, start: Time) -> Self {
        JobFix {
            site: offer.site.clone(),
            start,
            price_per_cpu_hour: offer.price_per_cpu_hour,
            price_per_gpu_hour: offer.price_per_gpu_hour,
            gpu_model: offer.gpu_model.clone(),
            hold: None,
            reservation_prefix: offer.reservation_prefix.clone(),
            overlay: None,
        }
    }
}

/// A transfer tentatively fixed on a route (under BIR, held on it).
#[derive(Debug, Clone)]
pub(in crate::planner) struct TransferFix {
    pub(in crate::planner) route: Route,
    /// BIR: the hold made at the fix.
    pub(in crate::planner) hold: Option<HoldId>,
    /// BBR-overlay: the fix's spans in the plan's own overlay of its links.
    pub(in crate::planner) overlay: Vec<(LinkId, SpanId)>,
    /// Its interval `[start, end)` ([`Fixes::transfer_interval`] when it was fixed; it does not
    /// change while it stays fixed): what the search's explanations read, often.
    pub(in crate::planner) interval: (Time, Time),
}

impl TransferFix {
    /// Whether the NIS's later answers see this fix: held (BIR), or in the overlay its
    /// questions add (BBR-overlay).
    pub(in crate::planner) fn seen_by_answers(&self) -> bool {
        self.hold.is_some() || !self.overlay.is_empty()
    }
}

/// What to undo on backtrack, in reverse order.
#[derive(Debug, Clone, Copy)]
pub(in crate::planner) enum Fix {
    Job(usize),
    Transfer(usize),
}

/// What a reservation method does during the search, decided once per attempt (Ando & Aida,
/// section 3.2): BIR holds every tentative fix; BBR-overlay keeps the plan's own fixes in a
/// local overlay; plain BBR does neither (the coordinator prepares the whole plan at the end).
#[derive(Debug, Clone, Copy)]
pub(in crate::planner) struct Style {
    pub(in crate::planner) hold_each_fix: bool,
    pub(in crate::planner) overlay: bool,
}

impl From<ReservationMethod> for Style {
    fn from(m: ReservationMethod) -> Self {
        Style { hold_each_fix: m == ReservationMethod::Bir, overlay: m == ReservationMethod::BbrOverlay }
    }
}

/// The book of one attempt's tentative holds, as the search sees it: the fixes so far at the
/// current `st`, and the questions and fixes that need a participant (Ando & Aida, Fig. 3's
/// "candidates of rm", "check the NIS", "fix"). Each answer is what the participant said;
/// the search decides on them alone.
pub(in crate::planner) trait TentativeBook: Send {
    /// The fixes so far.
    fn fixes(&self) -> &Fixes;

    /// The fixes so far, to change: `st` (its first value, or a shift once every fix is
    /// undone), and a job placed without a hold or a trail entry (the checks of
    /// `check_before_hold` see it placed) and freed again.
    fn fixes_mut(&mut self) -> &mut Fixes;

    /// Messages sent so far.
    fn messages(&self) -> u64;

    /// The planner's clock, now (seconds since the epoch): the `w_interval` limit.
    fn now(&self) -> Time;

    /// The rejection of the request for `reason`, with the messages and holds counted so far.
    fn reject(&self, reason: impl Into<String>) -> Outcome;

    /// BBR-overlay: the plan's own peak bandwidth over `[start, end)` on the busiest link it
    /// uses (Mbit/s).
    fn own_peak_on_links(&self, start: Time, end: Time) -> u64;

    /// Sites this attempt leaves out of every job's candidates (their local scheduler did not
    /// answer an earlier attempt of the same request).
    fn excluded(&self) -> &[SiteId] {
        &[]
    }

    /// The candidate sites of every job of the request, in job order (one GIS message).
    fn candidates(&mut self) -> impl Future<Output = Result<Vec<Candidates>, ParticipantError>> + Send;

    /// The answers of every candidate site of job `v` (`candidates[v]`, in order) to "the
    /// earliest start no earlier than `windows[i]`" (one window start per candidate site: a
    /// floating job's depends on the site, see [`PlanRequest::floats`]).
    fn offers(
        &mut self,
        v: usize,
        candidates: &[Vec<SiteId>],
        windows: &[Time],
    ) -> impl Future<Output = Vec<Result<ComputeOffer, ParticipantError>>> + Send;

    /// Fixes job `v` on `offer`'s site from `start` and trails it; false when its hold was
    /// refused (nothing fixed).
    fn fix_job(&mut self, v: usize, offer: &ComputeOffer, start: Time) -> impl Future<Output = bool> + Send;

    /// Fixes transfer `e` on `route` and trails it; false when its hold was refused.
    fn hold_transfer(&mut self, e: usize, route: Route) -> impl Future<Output = bool> + Send;

    /// Fixes job `v` as [`Self::fix_job`] and then each of `routes` (checked transfers of `v`
    /// to fixed jobs) as [`Self::hold_transfer`], in order: whether each was held (a refused
    /// one is not fixed), or `None` when `v`'s hold was refused (nothing fixed). The planner's
    /// book sends `v`'s prepare and the holds of the first transfers whose paths share no link
    /// all at once: one round, not one per part (issue 53).
    fn fix_job_with(
        &mut self,
        v: usize,
        offer: &ComputeOffer,
        start: Time,
        routes: Vec<(usize, Route)>,
    ) -> impl Future<Output = Option<Vec<bool>>> + Send {
        one_after_another(self, v, offer, start, routes)
    }

    /// Undoes the fixes after `mark`, last first, aborting their holds.
    fn undo_to(&mut self, mark: usize) -> impl Future<Output = ()> + Send;

    /// Asks the NIS `questions` in one message; [`Self::route`] takes their answers until
    /// [`Self::forget_prefetched`].
    fn prefetch(&mut self, questions: Vec<NetworkQuery>) -> impl Future<Output = ()> + Send;

    /// Drops the prefetched answers not taken.
    fn forget_prefetched(&mut self);

    /// The NIS's answer to `q`: prefetched, or asked now (`Ok(None)`: no path).
    fn route(&mut self, q: &NetworkQuery) -> impl Future<Output = Result<Option<Route>, ParticipantError>> + Send;

    /// Asks the NIS `q` now, whatever was prefetched (the backjumping probe).
    fn ask_nis(&mut self, q: &NetworkQuery) -> impl Future<Output = Result<Option<Route>, ParticipantError>> + Send;

    /// Asks the NIS, in one message, for the first of `qs` it has a path for
    /// ([`crate::protocol::Participant::first_granted`]): its index and route, or `Some(None)`
    /// for none; `None`: the NIS does not say (ask them one by one with [`Self::route`]).
    fn first_route(&mut self, qs: &[NetworkQuery]) -> impl Future<Output = Option<Option<(usize, Route)>>> + Send {
        let _ = qs;
        async { None }
    }

    /// Asks the NIS, in one message, the most each of `qs` could ever be granted (the widest
    /// path's bottleneck: [`crate::protocol::Participant::ceilings`]); `None`: it does not say.
    fn ceilings(&mut self, qs: Vec<NetworkQuery>) -> impl Future<Output = Option<Vec<u64>>> + Send {
        let _ = qs;
        async { None }
    }
}

/// [`TentativeBook::fix_job_with`] one message after the other: job `v` as
/// [`TentativeBook::fix_job`], then each of `routes` as [`TentativeBook::hold_transfer`].
pub(in crate::planner) async fn one_after_another<B: TentativeBook + ?Sized>(
    book: &mut B,
    v: usize,
    offer: &ComputeOffer,
    start: Time,
    routes: Vec<(usize, Route)>,
) -> Option<Vec<bool>> {
    if !book.fix_job(v, offer, start).await {
        return None;
    }
    let mut held = Vec::with_capacity(routes.len());
    for (e, route) in routes {
        held.push(book.hold_transfer(e, route).await);
    }
    Some(held)
}
