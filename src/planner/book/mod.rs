//! The book of one planning attempt's tentative holds: what the search has fixed so far and
//! every message that fixing takes (Ando & Aida, section 3.2: BIR holds each tentative fix,
//! BBR fixes locally and prepares the whole plan in one batch, BBR-overlay keeps a local
//! overlay of the plan's own fixes).
//!
//! The search ([`super::search`]) decides *what* to fix and in what order; the book does the
//! rest: it asks the participants (availability queries, batched per site when
//! [`super::PlannerConfig::batch_queries`] is on, with the answers kept in
//! [`super::queries::QueryCache`]; network checks, batched the same way), holds or overlays
//! each fix and keeps the trail that undoes them (one abort message per participant with
//! [`super::PlannerConfig::batch_aborts`]). Once the plan is complete, [`Book::prepare_all`]
//! makes the holds BBR has not made yet and [`Book::into_coordinator`] hands every held part
//! to the [`Coordinator`](super::coordinator::Coordinator), which decides and commits.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::join_all;

use super::fixes::{one_after_another, Fix, Fixes, JobFix, Style, TentativeBook, TransferFix};
use super::queries::QueryCache;
use super::sent::Sent;
use super::{Planner, QueryFanout};
use crate::model::{
    ComputeDemand, LinkId, Outcome, PlanRequest, PoolGpus, ReservationMethod, SelectionPolicy, SiteId, Time,
};
use crate::protocol::{
    Candidates, Compute, ComputeHoldRequest, ComputeOffer, ComputeQuery, HoldId, HoldLifecycle, NetworkHoldRequest,
    NetworkQuery, Participant, ParticipantError, Role, Route, TxnId,
};

mod finish;
mod overlay;

use overlay::{Overlay, Own};

/// BBR-overlay, a floating job: how many times a site whose offer lies where the plan's own
/// peak is higher than its query covered is asked again (see [`Book::offers`]).
const OVERLAY_REASKS: usize = 4;

/// The holds of one participant (`None`: the NIS) that one backtrack aborts together.
type AbortBatch = (Option<SiteId>, Arc<dyn HoldLifecycle>, Vec<HoldId>);

/// The tentative holds of one attempt and the messages they took.
pub(super) struct Book<'a> {
    pub(super) planner: &'a Planner,
    pub(super) req: &'a PlanRequest,
    policy: SelectionPolicy,
    pub(super) style: Style,
    pub(super) txn: TxnId,
    /// The fixes so far.
    pub(super) fixes: Fixes,
    /// The messages sent so far, and their rounds.
    pub(super) sent: Sent,
    pub(super) holds_aborted: u64,
    overlay: Overlay,
    /// Batched query answers (see [`super::queries`]).
    queries: QueryCache,
    /// [`super::PlannerConfig::batch_queries`]: the NIS's answers to the checks of one
    /// batch ([`Book::prefetch`]), taken by [`Book::route`] in the order the search
    /// asks them; emptied when that check ends.
    prefetched: HashMap<NetworkQuery, Result<Option<Route>, ParticipantError>>,
    /// The user the plan is booked for (prepare messages carry it: [`ComputeHoldRequest::user`]).
    pub(super) user: Option<String>,
    /// When planning of the request began (the outcome's `planning_ms`; before the first
    /// attempt when a refused BBR batch is planned again).
    pub(super) started: tokio::time::Instant,
    /// Sites left out of this attempt's candidates (their local scheduler did not answer an
    /// earlier attempt, see [`super::Planner::plan_with`]).
    pub(super) excluded: Vec<SiteId>,
}

impl<'a> Book<'a> {
    pub(super) fn new(
        planner: &'a Planner,
        req: &'a PlanRequest,
        policy: SelectionPolicy,
        method: ReservationMethod,
        started: tokio::time::Instant,
    ) -> Self {
        Book {
            planner,
            req,
            policy,
            style: method.into(),
            txn: TxnId::new(),
            fixes: Fixes::new(req),
            sent: Sent::default(),
            holds_aborted: 0,
            overlay: Overlay::default(),
            queries: QueryCache::default(),
            prefetched: HashMap::new(),
            user: None,
            started,
            excluded: Vec::new(),
        }
    }

    /// `n` queries sent under the planner's [`QueryFanout`]: at once (one round) or one after
    /// the other.
    fn sent_to(&mut self, n: usize) {
        match self.planner.cfg.query_fanout {
            QueryFanout::Parallel => self.sent.together(n as u64),
            QueryFanout::Sequential => self.sent.one_by_one(n as u64),
        }
    }

    pub(super) fn elapsed_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1000.0
    }

    pub(super) fn lis(&self, site: &SiteId) -> Result<Arc<dyn Participant<Compute>>, ParticipantError> {
        self.planner.services.lis.get(site).cloned().ok_or_else(|| ParticipantError::UnknownSite(site.clone()))
    }

    /// The offers of job `v` from every candidate site, batched (see [`super::queries`]): each
    /// candidate site not asked yet at this `st` gets one message with the queries of `v` and
    /// of every other unfixed job it could run.
    ///
    /// A floating job's window depends on where its predecessors went
    /// ([`PlanRequest::floats`]): its answers are kept by window, and a message that asks about
    /// one also asks, once per site and `st`, about every other floating job that is ready
    /// there ([`super::fixes::Fixes::ready`]). A job that does not float asked at another
    /// window than its laid-out one (its predecessors ended late) is asked each time, its
    /// answers not kept.
    async fn batched_offers(
        &mut self,
        v: usize,
        candidates: &[Vec<SiteId>],
        windows: &[Time],
    ) -> Vec<Result<ComputeOffer, ParticipantError>> {
        self.queries.at(self.fixes.st, self.policy != SelectionPolicy::Load);
        let (req, deadline) = (self.req, self.req.deadline());
        let query = |u: usize, site: &SiteId, window_start: Time| {
            let job = &req.jobs()[u];
            ComputeQuery {
                site: site.clone(),
                cpus: job.cpus,
                duration_s: req.job_span(u).duration_s,
                window_start,
                deadline,
                gpus: job.requires.gpus.clone(),
            }
        };
        let laid_out = self.fixes.st + req.job_span(v).offset_s;
        let floats = req.floats(v);
        let kept = |window: Time| floats || window == laid_out;
        let cached = |book: &Self, site: &SiteId, window: Time| {
            if floats {
                book.queries.get_floating(v, site, window).cloned()
            } else if window == laid_out {
                book.queries.get(v, site).cloned()
            } else {
                None
            }
        };
        // The floating jobs ready to be asked about ahead of their turn.
        let ready: Vec<usize> = if req.has_floating() {
            (0..req.jobs().len()).filter(|&u| u != v && self.fixes.ready(req, u)).collect()
        } else {
            Vec::new()
        };
        let mut batches = Vec::new();
        for (site, &window) in candidates[v].iter().zip(windows) {
            if cached(self, site, window).is_some() {
                continue;
            }
            let mut qs = vec![query(v, site, window)];
            let mut jobs = vec![v];
            for (u, sites) in candidates.iter().enumerate() {
                let other = u != v
                    && !req.floats(u)
                    && self.fixes.jobs[u].is_none()
                    && self.queries.get(u, site).is_none()
                    && sites.contains(site);
                if other {
                    qs.push(query(u, site, self.fixes.st + req.job_span(u).offset_s));
                    jobs.push(u);
                }
            }
            for &u in &ready {
                if self.queries.asked_ahead(u, site) || !candidates[u].contains(site) {
                    continue;
                }
                let w = self.fixes.window(req, u, site);
                self.queries.ask_ahead(u, site);
                if self.queries.get_floating(u, site, w).is_none() {
                    qs.push(query(u, site, w));
                    jobs.push(u);
                }
            }
            batches.push((site.clone(), jobs, qs));
        }
        self.sent_to(batches.len());
        let calls = batches.iter().map(|(site, _, qs)| {
            let lis = self.lis(site);
            async move {
                match lis {
                    Ok(p) => p.query_all(qs).await,
                    Err(e) => vec![Err(e); qs.len()],
                }
            }
        });
        let answers = match self.planner.cfg.query_fanout {
            QueryFanout::Parallel => join_all(calls).await,
            QueryFanout::Sequential => {
                let mut all = Vec::with_capacity(batches.len());
                for c in calls {
                    all.push(c.await);
                }
                all
            }
        };
        let mut failed = HashMap::new();
        let mut own = HashMap::new();
        for ((site, jobs, qs), answers) in batches.into_iter().zip(answers) {
            for ((u, q), a) in jobs.into_iter().zip(qs).zip(answers) {
                match a {
                    Ok(offer) if u == v && !kept(q.window_start) => {
                        own.insert(site.clone(), offer);
                    }
                    Ok(offer) => self.queries.put(u, offer, &q, req.floats(u)),
                    Err(e) if u == v => {
                        failed.insert(site.clone(), e);
                    }
                    Err(_) => {}
                }
            }
        }
        candidates[v]
            .iter()
            .zip(windows)
            .map(|(site, &window)| match (failed.remove(site), own.remove(site)) {
                (Some(e), _) => Err(e),
                (None, Some(offer)) => Ok(offer),
                (None, None) => Ok(cached(self, site, window).expect("asked at this st")),
            })
            .collect()
    }

    /// The answers of `sites` to "the earliest start of job `v` no earlier than `windows[i]`",
    /// one message each (BBR-overlay: for the job on top of the plan's own peak there over
    /// `[window, window + duration)`).
    async fn ask_offers(
        &mut self,
        v: usize,
        sites: &[SiteId],
        windows: &[Time],
    ) -> Vec<Result<ComputeOffer, ParticipantError>> {
        let (job, span) = (&self.req.jobs()[v], self.req.job_span(v));
        let deadline = self.req.deadline();
        let overlay = self.style.overlay;
        let queries = sites.iter().zip(windows).map(|(site, &t_bgn)| {
            // BBR-overlay asks for room for this job on top of the plan's own peak there.
            let own = |resource: Own| {
                let peak =
                    if overlay { self.overlay.site_peak(site, resource, t_bgn, t_bgn + span.duration_s) } else { 0 };
                u32::try_from(peak).unwrap_or(u32::MAX)
            };
            let gpus = job.requires.gpus.clone().map(|mut g| {
                g.count = g.count.saturating_add(own(Own::Gpus));
                g
            });
            let q = ComputeQuery {
                site: site.clone(),
                cpus: job.cpus.saturating_add(own(Own::Cpus)),
                duration_s: span.duration_s,
                window_start: t_bgn,
                deadline,
                gpus,
            };
            let lis = self.lis(site);
            async move { lis?.query(&q).await }
        });
        let answers = match self.planner.cfg.query_fanout {
            QueryFanout::Parallel => join_all(queries).await,
            QueryFanout::Sequential => {
                let mut answers = Vec::with_capacity(sites.len());
                for q in queries {
                    answers.push(q.await);
                }
                answers
            }
        };
        self.sent_to(answers.len());
        answers
    }

    /// The prepare message for job `v` fixed as `fix`.
    pub(super) fn job_hold(&self, v: usize, fix: &JobFix) -> ComputeHoldRequest {
        let (job, span) = (&self.req.jobs()[v], self.req.job_span(v));
        let start = fix.start;
        ComputeHoldRequest {
            replaces: None,
            reservation_name: None,
            txn: self.txn,
            site: fix.site.clone(),
            cpus: job.cpus,
            start,
            end: start + span.duration_s,
            gpus: Self::gpus_of(job, fix),
            user: self.user.clone(),
        }
    }

    /// The GPUs job `job` reserves when fixed as `fix`.
    fn gpus_of(job: &ComputeDemand, fix: &JobFix) -> Option<PoolGpus> {
        fix.gpu_model.clone().filter(|_| job.gpus() > 0).map(|model| PoolGpus { model, count: job.gpus() })
    }

    /// The prepare message for transfer `e` on `links` (both its jobs fixed).
    pub(super) fn transfer_hold(&self, e: usize, links: &[LinkId]) -> NetworkHoldRequest {
        let t = &self.req.transfers()[e];
        let (start, end) = self.fixes.transfer_interval(self.req, e);
        let (a, b) = self.req.transfer_ends(e);
        let site = |j: usize| self.fixes.jobs[j].as_ref().map(|f| f.site.clone());
        NetworkHoldRequest {
            replaces: None,
            port: None,
            txn: self.txn,
            links: links.to_vec(),
            bandwidth_mbps: t.bandwidth_mbps,
            start,
            end,
            sites: site(a).zip(site(b)),
        }
    }

    async fn prepare<R: Role>(
        &mut self,
        participant: Result<Arc<dyn Participant<R>>, ParticipantError>,
        req: &R::Prepare,
    ) -> Option<HoldId> {
        self.sent.one();
        match participant {
            Ok(p) => p.prepare(req).await.map(|h| h.id).ok(),
            Err(_) => None,
        }
    }

    /// This attempt held or aborted something at `site` over `[start, end)`: drops the batched
    /// answers that may have changed (all of the site's under the `load` policy, which ranks
    /// by a utilisation over the whole window; see [`super::queries`]).
    pub(super) fn forget_answers(&mut self, site: &SiteId, start: Time, end: Time) {
        if self.policy == SelectionPolicy::Load {
            self.queries.forget_site(site);
        } else {
            self.queries.forget_over(site, start, end);
        }
    }

    /// After the abort of `hold` at `p` answered `answer`.
    async fn aborted(&mut self, p: &Arc<dyn HoldLifecycle>, hold: HoldId, answer: Result<(), ParticipantError>) {
        match answer {
            Ok(()) => {}
            // A commit whose answer was lost (compensation after a failed commit): give the
            // reservation back instead.
            Err(ParticipantError::AlreadyCommitted(_)) => {
                self.sent.one();
                if let Err(e) = p.release(hold).await {
                    tracing::error!(error = %e, %hold, "release of a hold committed behind our back failed");
                }
            }
            // The lease will release it anyway.
            Err(e) => tracing::warn!(error = %e, %hold, "abort failed"),
        }
    }
}

impl TentativeBook for Book<'_> {
    fn fixes(&self) -> &Fixes {
        &self.fixes
    }

    fn fixes_mut(&mut self) -> &mut Fixes {
        &mut self.fixes
    }

    fn messages(&self) -> u64 {
        self.sent.messages
    }

    fn now(&self) -> Time {
        self.planner.services.clock.now()
    }

    fn excluded(&self) -> &[SiteId] {
        &self.excluded
    }

    async fn candidates(&mut self) -> Result<Vec<Candidates>, ParticipantError> {
        self.sent.round();
        self.planner.services.gis.candidates_all(self.req.jobs()).await
    }

    fn reject(&self, reason: impl Into<String>) -> Outcome {
        let mut o = Outcome::rejected(self.req.id(), reason, &self.planner.cfg.name);
        self.sent.write_to(&mut o);
        o.holds_aborted = self.holds_aborted;
        o.planning_ms = self.elapsed_ms();
        o
    }

    /// BBR-overlay: the plan's own peak bandwidth over `[start, end)` on the busiest link it
    /// uses (Mbit/s).
    fn own_peak_on_links(&self, start: Time, end: Time) -> u64 {
        self.overlay.links.values().map(|c| c.peak_usage(start, end)).max().unwrap_or(0)
    }

    /// The answers of every candidate site of job `v` (`candidates[v]`, in order) to "the
    /// earliest start no earlier than `t_bgn`" (Ando & Aida, Fig. 3, "candidates of rm").
    /// BBR-overlay asks for the job on top of the plan's own peak at each site; with
    /// [`super::PlannerConfig::batch_queries`] the answers come batched ([`Self::batched_offers`]).
    ///
    /// A floating job ([`PlanRequest::floats`]) may be placed later than its window: under
    /// BBR-overlay an offer later than the window is accepted only if the plan's own peak over
    /// the offered interval is no more than what the query added, else the site is asked
    /// again from that start with the new peak (at most [`OVERLAY_REASKS`] times).
    async fn offers(
        &mut self,
        v: usize,
        candidates: &[Vec<SiteId>],
        windows: &[Time],
    ) -> Vec<Result<ComputeOffer, ParticipantError>> {
        if self.planner.cfg.batch_queries && !self.style.overlay {
            return self.batched_offers(v, candidates, windows).await;
        }
        let mut answers = self.ask_offers(v, &candidates[v], windows).await;
        if !(self.style.overlay && self.req.floats(v)) {
            return answers;
        }
        let duration_s = self.req.job_span(v).duration_s;
        // Where each site's last query started: the interval whose own peak it covered.
        let mut from = windows.to_vec();
        let uncovered = |book: &Self, site: &SiteId, asked: Time, e: Time| {
            let peak = |r, t: Time| book.overlay.site_peak(site, r, t, t + duration_s);
            e > asked && [Own::Cpus, Own::Gpus].into_iter().any(|r| peak(r, e) > peak(r, asked))
        };
        for _ in 0..OVERLAY_REASKS {
            let mut again = Vec::new();
            for (i, site) in candidates[v].iter().enumerate() {
                if let Ok(ComputeOffer { earliest_start: Some(e), .. }) = &answers[i] {
                    if uncovered(self, site, from[i], *e) {
                        again.push((i, site.clone(), *e));
                    }
                }
            }
            if again.is_empty() {
                return answers;
            }
            let (sites, starts): (Vec<SiteId>, Vec<Time>) = again.iter().map(|(_, s, e)| (s.clone(), *e)).unzip();
            let fresh = self.ask_offers(v, &sites, &starts).await;
            for ((i, _, e), a) in again.into_iter().zip(fresh) {
                from[i] = e;
                answers[i] = a;
            }
        }
        // Still not covered: those sites offer nothing this time.
        for (i, site) in candidates[v].iter().enumerate() {
            let late = matches!(&answers[i], Ok(ComputeOffer { earliest_start: Some(e), .. }) if uncovered(self, site, from[i], *e));
            if late {
                if let Ok(o) = &mut answers[i] {
                    o.earliest_start = None;
                }
            }
        }
        answers
    }

    /// Tentatively fixes job `v` on `offer`'s site from `start`; under BIR this holds the CPUs,
    /// under BBR-overlay it enters the overlay. False when the hold was refused (another
    /// planner took the slot since the query).
    async fn fix_job(&mut self, v: usize, offer: &ComputeOffer, start: Time) -> bool {
        let job = &self.req.jobs()[v];
        let overlay = self.style.overlay.then(|| {
            self.overlay.add_job(&offer.site, start, start + self.req.job_span(v).duration_s, job.cpus, job.gpus())
        });
        let fix = JobFix { overlay, ..JobFix::on(offer, start) };
        let hold = if self.style.hold_each_fix {
            let req = self.job_hold(v, &fix);
            match self.prepare(self.lis(&offer.site), &req).await {
                Some(h) => {
                    self.forget_answers(&offer.site, req.start, req.end);
                    Some(h)
                }
                None => {
                    // Refused: the site changed since it answered (another planner).
                    self.queries.forget_site(&offer.site);
                    return false;
                }
            }
        } else {
            None
        };
        self.fixes.jobs[v] = Some(JobFix { hold, ..fix });
        self.fixes.trail.push(Fix::Job(v));
        true
    }

    /// Under BIR: job `v`'s prepare and the holds of the first of `routes` whose paths share no
    /// link with each other's, sent at once (one round: the holds do not depend on each
    /// other's answers, and on disjoint links, or at a site and on the network, each answer is
    /// what it would be one after the other); the rest one after the other, as
    /// [`TentativeBook::hold_transfer`]. A refused job gives back the transfers held with it
    /// (one abort message). Otherwise as the trait's sequential default.
    async fn fix_job_with(
        &mut self,
        v: usize,
        offer: &ComputeOffer,
        start: Time,
        routes: Vec<(usize, Route)>,
    ) -> Option<Vec<bool>> {
        if !self.style.hold_each_fix || self.style.overlay {
            return one_after_another(self, v, offer, start, routes).await;
        }
        // The transfers that go with the job: up to the first whose path shares a link with an
        // earlier one's (paths on one site need no hold).
        let mut links: Vec<&LinkId> = Vec::new();
        let mut together = 0;
        for (_, route) in &routes {
            if route.links.iter().any(|l| links.contains(&l)) {
                break;
            }
            links.extend(&route.links);
            together += 1;
        }
        // `v` placed (not held yet) so that its transfers' intervals and sites are known.
        let fix = JobFix::on(offer, start);
        let job_req = self.job_hold(v, &fix);
        self.fixes.jobs[v] = Some(fix.clone());
        let sent: Vec<NetworkHoldRequest> = routes[..together]
            .iter()
            .filter(|(_, r)| !r.links.is_empty())
            .map(|(e, r)| self.transfer_hold(*e, &r.links))
            .collect();
        let lis = self.lis(&offer.site);
        let nis = self.planner.services.nis.clone();
        self.sent.together(1 + sent.len() as u64);
        let job_call = async {
            match &lis {
                Ok(p) => p.prepare(&job_req).await.map(|h| h.id).ok(),
                Err(_) => None,
            }
        };
        let transfer_calls = join_all(sent.iter().map(|r| nis.prepare(r)));
        let (job_hold, transfer_holds) = futures::join!(job_call, transfer_calls);
        let granted: Vec<Option<HoldId>> = transfer_holds.into_iter().map(|h| h.ok().map(|h| h.id)).collect();
        let Some(job_hold) = job_hold else {
            // Refused: the site changed since it answered (another planner). What was held
            // with it goes back.
            self.fixes.jobs[v] = None;
            self.queries.forget_site(&offer.site);
            let back: Vec<HoldId> = granted.iter().flatten().copied().collect();
            if !back.is_empty() {
                let nis: Arc<dyn HoldLifecycle> = nis;
                self.sent.one();
                self.holds_aborted += back.len() as u64;
                for (&hold, answer) in back.iter().zip(nis.abort_all(&back).await) {
                    self.aborted(&nis, hold, answer).await;
                }
            }
            return None;
        };
        self.forget_answers(&offer.site, job_req.start, job_req.end);
        self.fixes.jobs[v] = Some(JobFix { hold: Some(job_hold), ..fix });
        self.fixes.trail.push(Fix::Job(v));
        let mut held = Vec::with_capacity(routes.len());
        let mut granted = granted.into_iter();
        for (i, (e, route)) in routes.into_iter().enumerate() {
            if i >= together {
                held.push(self.hold_transfer(e, route).await);
                continue;
            }
            let hold = if route.links.is_empty() {
                None
            } else {
                match granted.next().expect("one answer per hold sent") {
                    Some(h) => Some(h),
                    None => {
                        held.push(false);
                        continue;
                    }
                }
            };
            let interval = self.fixes.transfer_interval(self.req, e);
            self.fixes.transfers[e] = Some(TransferFix { route, hold, overlay: Vec::new(), interval });
            self.fixes.trail.push(Fix::Transfer(e));
            held.push(true);
        }
        Some(held)
    }

    /// Fixes transfer `e` on `route`; under BIR this holds the bandwidth on it (false when the
    /// hold was refused), under BBR-overlay it enters the overlay.
    async fn hold_transfer(&mut self, e: usize, route: Route) -> bool {
        let t = &self.req.transfers()[e];
        let (start, end) = self.fixes.transfer_interval(self.req, e);
        let hold = if self.style.hold_each_fix && !route.links.is_empty() {
            let req = self.transfer_hold(e, &route.links);
            match self.prepare(Ok(self.planner.services.nis.clone()), &req).await {
                Some(h) => Some(h),
                None => {
                    return false;
                }
            }
        } else {
            None
        };
        let overlay = if self.style.overlay {
            let bw = t.bandwidth_mbps;
            route.links.iter().map(|l| (l.clone(), self.overlay.add_link(l, start, end, bw))).collect()
        } else {
            Vec::new()
        };
        self.fixes.transfers[e] = Some(TransferFix { route, hold, overlay, interval: (start, end) });
        self.fixes.trail.push(Fix::Transfer(e));
        true
    }

    /// Undoes the fixes after `mark`, aborting their holds.
    async fn undo_to(&mut self, mark: usize) {
        // The holds to abort, in trail order, each with its participant (`None`: the NIS).
        let mut aborts: Vec<(Option<SiteId>, Arc<dyn HoldLifecycle>, HoldId)> = Vec::new();
        while self.fixes.trail.len() > mark {
            let fix = self.fixes.trail.pop().expect("trail longer than mark");
            let (participant, hold) = match fix {
                Fix::Job(v) => {
                    let f = self.fixes.jobs[v].take().expect("trail names a fixed job");
                    if let Some(spans) = f.overlay {
                        self.overlay.remove_job(&f.site, spans);
                    }
                    if f.hold.is_some() {
                        let end = f.start + self.req.job_span(v).duration_s;
                        self.forget_answers(&f.site, f.start, end);
                    }
                    let p = self.lis(&f.site).ok().map(|p| (Some(f.site.clone()), p as Arc<dyn HoldLifecycle>));
                    (p, f.hold)
                }
                Fix::Transfer(e) => {
                    let f = self.fixes.unfix_transfer(e).expect("trail names a fixed transfer");
                    for (link, span) in &f.overlay {
                        self.overlay.remove_link(link, *span);
                    }
                    (Some((None, self.planner.services.nis.clone() as Arc<dyn HoldLifecycle>)), f.hold)
                }
            };
            if let (Some((key, p)), Some(h)) = (participant, hold) {
                aborts.push((key, p, h));
            }
        }
        if !self.planner.cfg.batch_aborts {
            for (_, p, hold) in aborts {
                self.sent.one();
                self.holds_aborted += 1;
                let answer = p.abort(hold).await;
                self.aborted(&p, hold, answer).await;
            }
            return;
        }
        // One message per participant, all at once.
        let mut batches: Vec<AbortBatch> = Vec::new();
        for (key, p, hold) in aborts {
            match batches.iter_mut().find(|b| b.0 == key) {
                Some(b) => b.2.push(hold),
                None => batches.push((key, p, vec![hold])),
            }
        }
        self.sent.together(batches.len() as u64);
        self.holds_aborted += batches.iter().map(|b| b.2.len() as u64).sum::<u64>();
        let answers = join_all(batches.iter().map(|(_, p, holds)| p.abort_all(holds))).await;
        for ((_, p, holds), answers) in batches.iter().zip(answers) {
            for (&hold, answer) in holds.iter().zip(answers) {
                self.aborted(p, hold, answer).await;
            }
        }
    }

    /// Asks the NIS `questions` in one message ([`crate::protocol::Participant::query_all`]);
    /// [`Self::route`] takes the answers until [`Self::forget_prefetched`]. A check books
    /// nothing, so they are the answers the questions asked one by one would get.
    async fn prefetch(&mut self, questions: Vec<NetworkQuery>) {
        self.sent.one();
        let answers = self.planner.services.nis.query_all(&questions).await;
        self.prefetched = questions.into_iter().zip(answers).collect();
    }

    /// Drops the prefetched answers not taken.
    fn forget_prefetched(&mut self) {
        self.prefetched.clear();
    }

    /// The NIS's answer to `q`: prefetched, or asked now.
    async fn route(&mut self, q: &NetworkQuery) -> Result<Option<Route>, ParticipantError> {
        match self.prefetched.remove(q) {
            Some(answer) => answer,
            None => self.ask_nis(q).await,
        }
    }

    async fn first_route(&mut self, qs: &[NetworkQuery]) -> Option<Option<(usize, Route)>> {
        // One message when the NIS says; none when it does not (the default over HTTP).
        let answer = self.planner.services.nis.first_granted(qs).await?;
        self.sent.one();
        Some(answer.and_then(|(i, r)| r.map(|r| (i, r))))
    }

    async fn ceilings(&mut self, qs: Vec<NetworkQuery>) -> Option<Vec<u64>> {
        self.sent.one();
        self.planner.services.nis.ceilings(&qs).await
    }

    /// Asks the NIS for a path (one message).
    async fn ask_nis(&mut self, q: &NetworkQuery) -> Result<Option<Route>, ParticipantError> {
        self.sent.one();
        self.planner.services.nis.query(q).await
    }
}
