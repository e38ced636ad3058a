//! The search of one planning attempt: the recursive search of Ando & Aida, Fig. 3, and the
//! `st` loop of Fig. 2. It ends with every job and transfer fixed (under BIR, held) or with a
//! rejection; [`super::coordinator`] books the fixed plan.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::future::join_all;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::queries::QueryCache;
use super::{Planner, QueryFanout};
use crate::calendar::{CapacityCalendar, SpanId};
use crate::model::{
    from_time, ComputeDemand, GpuAllocation, JobPlacement, LinkId, Outcome, OutcomeStatus, PlanRequest,
    ReservationMethod, SelectionPolicy, SiteId, Time, TransferPlacement, MAX_AMOUNT,
};
use crate::protocol::{
    Compute, ComputeHoldRequest, ComputeOffer, ComputeQuery, HoldId, HoldLifecycle, NetworkHoldRequest, NetworkQuery,
    Participant, ParticipantError, Role, Route, TxnId,
};

/// Result of `search` (Ando & Aida, Fig. 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Success,
    NotFound,
    /// The whole application must start this many seconds later.
    Delay(i64),
}

#[derive(Debug, Clone)]
pub(super) struct JobFix {
    pub(super) site: SiteId,
    price_per_cpu_hour: f64,
    price_per_gpu_hour: f64,
    /// The GPU pool the offer found free (jobs with GPUs).
    gpu_model: Option<String>,
    /// BIR: the hold made at the fix.
    pub(super) hold: Option<HoldId>,
    /// BBR-overlay: the fix's spans in the plan's own overlay of that site (CPUs, GPUs).
    overlay: Option<(SpanId, Option<SpanId>)>,
}

#[derive(Debug, Clone)]
pub(super) struct TransferFix {
    pub(super) route: Route,
    /// BIR: the hold made at the fix.
    pub(super) hold: Option<HoldId>,
    /// BBR-overlay: the fix's spans in the plan's own overlay of its links.
    overlay: Vec<(LinkId, SpanId)>,
}

/// BBR-overlay's local view of what the plan itself has placed: own usage per site and link.
#[derive(Default)]
struct Overlay {
    sites: HashMap<SiteId, CapacityCalendar>,
    /// Own GPUs per site, all pools together (conservative: a query adds them to the pool it
    /// asks about).
    gpus: HashMap<SiteId, CapacityCalendar>,
    links: HashMap<LinkId, CapacityCalendar>,
}

impl Overlay {
    fn peak(cal: Option<&CapacityCalendar>, start: Time, end: Time) -> u64 {
        cal.map_or(0, |c| c.peak_usage(start, end))
    }
    fn add<K: Eq + std::hash::Hash + for<'a> From<&'a str> + std::borrow::Borrow<str>>(
        map: &mut HashMap<K, CapacityCalendar>,
        key: &str,
        start: Time,
        end: Time,
        amount: u64,
    ) -> SpanId {
        let cal = map.entry(K::from(key)).or_insert_with(|| CapacityCalendar::new(MAX_AMOUNT));
        cal.add(start, end, amount).expect("the overlay has room for any plan")
    }
    fn remove<K: Eq + std::hash::Hash + std::borrow::Borrow<str>>(
        map: &mut HashMap<K, CapacityCalendar>,
        key: &str,
        span: SpanId,
    ) {
        map.get_mut(key).and_then(|c| c.remove(span).ok()).expect("overlay span is booked");
    }
}

/// What to undo on backtrack, in reverse order.
#[derive(Debug, Clone, Copy)]
pub(super) enum Fix {
    Job(usize),
    Transfer(usize),
}

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a reservation method does during the search, decided once per attempt (Ando & Aida,
/// section 3.2): BIR holds every tentative fix; BBR-overlay keeps the plan's own fixes in a
/// local overlay; plain BBR does neither (the coordinator prepares the whole plan at the end).
#[derive(Debug, Clone, Copy)]
struct Style {
    hold_each_fix: bool,
    overlay: bool,
}

impl From<ReservationMethod> for Style {
    fn from(m: ReservationMethod) -> Self {
        Style { hold_each_fix: m == ReservationMethod::Bir, overlay: m == ReservationMethod::BbrOverlay }
    }
}

/// One planning attempt: the search's state (this module) and the booking of the plan it
/// fixes ([`super::coordinator`]).
pub(crate) struct Attempt<'a> {
    pub(super) planner: &'a Planner,
    pub(super) req: &'a PlanRequest,
    policy: SelectionPolicy,
    style: Style,
    pub(super) txn: TxnId,
    rng: ChaCha8Rng,
    /// Candidate sites of every job, from the GIS.
    candidates: Vec<Vec<SiteId>>,
    /// Transfer indices touching every job.
    incident: Vec<Vec<usize>>,
    st: Time,
    pub(super) jobs: Vec<Option<JobFix>>,
    pub(super) transfers: Vec<Option<TransferFix>>,
    pub(super) trail: Vec<Fix>,
    pub(super) messages: u64,
    pub(super) holds_aborted: u64,
    /// Tentative fixes made so far (the search budget's meter).
    fixes: u32,
    /// Why the search was cut short (budget or w_interval), if it was.
    stopped: Option<String>,
    /// A job no site of the catalogue can run: the request can never be planned.
    pub(super) unsatisfiable: bool,
    overlay: Overlay,
    /// Batched query answers (see [`super::queries`]).
    queries: QueryCache,
    /// When planning of the request began (the outcome's `planning_ms`; before the first
    /// attempt when a refused BBR batch is planned again).
    started: tokio::time::Instant,
}

impl<'a> Attempt<'a> {
    pub(crate) fn new(
        planner: &'a Planner,
        req: &'a PlanRequest,
        policy: SelectionPolicy,
        method: ReservationMethod,
        seed: u64,
        started: tokio::time::Instant,
    ) -> Self {
        let mut incident = vec![Vec::new(); req.jobs().len()];
        for e in 0..req.transfers().len() {
            let (a, b) = req.transfer_ends(e);
            incident[a].push(e);
            incident[b].push(e);
        }
        Attempt {
            planner,
            req,
            policy,
            style: method.into(),
            txn: TxnId::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            candidates: Vec::new(),
            incident,
            st: 0,
            jobs: vec![None; req.jobs().len()],
            transfers: vec![None; req.transfers().len()],
            trail: Vec::new(),
            messages: 0,
            holds_aborted: 0,
            fixes: 0,
            stopped: None,
            unsatisfiable: false,
            overlay: Overlay::default(),
            queries: QueryCache::default(),
            started,
        }
    }

    pub(super) fn reject(&self, reason: impl Into<String>) -> Outcome {
        let mut o = Outcome::rejected(self.req.id(), reason, &self.planner.cfg.name);
        o.messages = self.messages;
        o.holds_aborted = self.holds_aborted;
        o.planning_ms = self.elapsed_ms();
        o
    }

    pub(super) fn elapsed_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1000.0
    }

    pub(super) fn lis(&self, site: &SiteId) -> Result<Arc<dyn Participant<Compute>>, ParticipantError> {
        self.planner.services.lis.get(site).cloned().ok_or_else(|| ParticipantError::UnknownSite(site.clone()))
    }

    /// Searches until a complete plan is fixed (`Ok`) or the request is rejected.
    pub(super) async fn search_plan(&mut self) -> Result<(), Outcome> {
        let req = self.req;
        let w = self.planner.cfg.w_interval_s;
        self.st = req.not_before().map_or(req.submitted_at() + w, |nb| nb.max(req.submitted_at() + w));
        if self.st + req.span_s() > req.deadline() {
            return Err(
                self.reject(format!("deadline cannot be met: the plan starts no earlier than {}", from_time(self.st)))
            );
        }
        for job in req.jobs() {
            match self.planner.services.gis.candidates(job).await {
                Ok(c) if !c.sites.is_empty() => self.candidates.push(c.sites),
                Ok(c) => {
                    let why = match &c.nearest_miss {
                        Some((site, unmet)) => format!("; nearest: site `{site}` lacks {unmet}"),
                        None => String::new(),
                    };
                    self.unsatisfiable = true;
                    return Err(self
                        .reject(format!("no site can run job `{}` ({} CPUs of {}{why})", job.name, job.cpus, job.os)));
                }
                Err(e) => return Err(self.reject(format!("GIS unavailable: {e}"))),
            }
        }
        let roots = self.roots();
        let mut shifts = 0u32;
        'shift: loop {
            for &root in &roots {
                if self.jobs[root].is_some() {
                    continue;
                }
                match self.search(root).await {
                    Step::Success => {}
                    Step::NotFound => {
                        self.undo_to(0).await;
                        let reason =
                            self.stopped.take().unwrap_or_else(|| "no feasible plan before the deadline".into());
                        return Err(self.reject(reason));
                    }
                    Step::Delay(dt) => {
                        self.undo_to(0).await;
                        shifts += 1;
                        if shifts > self.planner.cfg.max_shifts {
                            return Err(self.reject(format!("gave up after {shifts} start-time shifts")));
                        }
                        self.st += dt;
                        continue 'shift;
                    }
                }
            }
            break;
        }
        if self.out_of_time() {
            self.undo_to(0).await;
            let reason = self.stopped.take().expect("out_of_time sets the reason");
            return Err(self.reject(reason));
        }
        Ok(())
    }

    /// True (and the reason recorded) once the planner's clock has passed arrival +
    /// `w_interval`: the time it allows itself to build a plan.
    fn out_of_time(&mut self) -> bool {
        let limit = self.req.submitted_at() + self.planner.cfg.w_interval_s;
        let over = self.planner.services.clock.now() > limit;
        if over {
            self.stopped = Some(format!("planning took longer than w_interval ({} s)", self.planner.cfg.w_interval_s));
        }
        over
    }

    /// One root per connected component of the request graph, each the job with the fewest
    /// candidates in its component (ties: lowest index); components ordered by that count.
    fn roots(&self) -> Vec<usize> {
        let n = self.req.jobs().len();
        let mut component = vec![usize::MAX; n];
        let mut roots = Vec::new();
        for start in 0..n {
            if component[start] != usize::MAX {
                continue;
            }
            let mut stack = vec![start];
            component[start] = start;
            let mut best = start;
            while let Some(v) = stack.pop() {
                if (self.candidates[v].len(), v) < (self.candidates[best].len(), best) {
                    best = v;
                }
                for &e in &self.incident[v] {
                    let (a, b) = self.req.transfer_ends(e);
                    let other = if a == v { b } else { a };
                    if component[other] == usize::MAX {
                        component[other] = start;
                        stack.push(other);
                    }
                }
            }
            roots.push(best);
        }
        roots.sort_by_key(|&r| (self.candidates[r].len(), r));
        roots
    }

    /// Reservation candidates of job `v` starting no earlier than `t_bgn`, one per candidate
    /// site that can fit it before the deadline, ordered by the selection policy.
    async fn reservation_candidates(&mut self, v: usize, t_bgn: Time) -> Vec<(Time, ComputeOffer)> {
        if self.planner.cfg.batch_queries && !self.style.overlay {
            let answers = self.batched_offers(v).await;
            return self.rank(v, answers);
        }
        let job = &self.req.jobs()[v];
        let deadline = self.req.deadline();
        let overlay = self.style.overlay;
        let queries = self.candidates[v].iter().map(|site| {
            // BBR-overlay asks for room for this job on top of the plan's own peak there.
            let own = |cals: &HashMap<SiteId, CapacityCalendar>| {
                let peak = if overlay { Overlay::peak(cals.get(site), t_bgn, t_bgn + job.duration_s) } else { 0 };
                u32::try_from(peak).unwrap_or(u32::MAX)
            };
            let gpus = job.requires.gpus.clone().map(|mut g| {
                g.count = g.count.saturating_add(own(&self.overlay.gpus));
                g
            });
            let q = ComputeQuery {
                site: site.clone(),
                cpus: job.cpus.saturating_add(own(&self.overlay.sites)),
                duration_s: job.duration_s,
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
                let mut answers = Vec::with_capacity(self.candidates[v].len());
                for q in queries {
                    answers.push(q.await);
                }
                answers
            }
        };
        self.messages += answers.len() as u64;
        self.rank(v, answers)
    }

    /// The offers of job `v` from every candidate site, batched (see [`super::queries`]): each
    /// candidate site not asked yet at this `st` gets one message with the queries of `v` and
    /// of every other unfixed job it could run.
    async fn batched_offers(&mut self, v: usize) -> Vec<Result<ComputeOffer, ParticipantError>> {
        self.queries.at(self.st);
        let deadline = self.req.deadline();
        let query = |u: usize, site: &SiteId| {
            let job = &self.req.jobs()[u];
            ComputeQuery {
                site: site.clone(),
                cpus: job.cpus,
                duration_s: job.duration_s,
                window_start: self.st + job.offset_s,
                deadline,
                gpus: job.requires.gpus.clone(),
            }
        };
        let mut batches = Vec::new();
        for site in &self.candidates[v] {
            if self.queries.get(v, site).is_some() {
                continue;
            }
            let others = (0..self.jobs.len()).filter(|&u| {
                u != v
                    && self.jobs[u].is_none()
                    && self.queries.get(u, site).is_none()
                    && self.candidates[u].contains(site)
            });
            let jobs: Vec<usize> = std::iter::once(v).chain(others).collect();
            let qs: Vec<ComputeQuery> = jobs.iter().map(|&u| query(u, site)).collect();
            batches.push((site.clone(), jobs, qs));
        }
        self.messages += batches.len() as u64;
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
        for ((site, jobs, _), answers) in batches.into_iter().zip(answers) {
            for (u, a) in jobs.into_iter().zip(answers) {
                match a {
                    Ok(offer) => self.queries.put(u, site.clone(), offer),
                    Err(e) if u == v => {
                        failed.insert(site.clone(), e);
                    }
                    Err(_) => {}
                }
            }
        }
        self.candidates[v]
            .iter()
            .map(|site| match failed.remove(site) {
                Some(e) => Err(e),
                None => Ok(self.queries.get(v, site).cloned().expect("asked at this st")),
            })
            .collect()
    }

    /// The usable offers among `answers` for job `v`, ordered by the selection policy (ties
    /// at random).
    fn rank(&mut self, v: usize, answers: Vec<Result<ComputeOffer, ParticipantError>>) -> Vec<(Time, ComputeOffer)> {
        let job = &self.req.jobs()[v];
        let mut offers: Vec<(Time, ComputeOffer)> = answers
            .into_iter()
            .filter_map(|a| match a {
                Ok(o) => o.earliest_start.map(|t| (t, o)),
                Err(e) => {
                    tracing::warn!(error = %e, "LIS query failed; site skipped");
                    None
                }
            })
            .collect();
        // Ties are broken at random: a fixed tie-break (say, by site id) would pile every
        // demand of a plan onto the same site whenever several are equally good.
        offers.shuffle(&mut self.rng);
        match self.policy {
            SelectionPolicy::Time => offers.sort_by_key(|o| o.0),
            SelectionPolicy::Cost => {
                let price = |o: &ComputeOffer| o.price_per_hour(job.cpus, job.gpus());
                offers.sort_by(|a, b| price(&a.1).total_cmp(&price(&b.1)).then(a.0.cmp(&b.0)))
            }
            SelectionPolicy::Load => {
                offers.sort_by(|a, b| a.1.utilisation.total_cmp(&b.1.utilisation).then(a.0.cmp(&b.0)))
            }
            SelectionPolicy::Random => {}
        }
        offers
    }

    /// `search(rm, st)` of Ando & Aida, Fig. 3.
    fn search(&mut self, v: usize) -> BoxFut<'_, Step> {
        Box::pin(async move {
            let job = self.req.jobs()[v].clone();
            let t_bgn = self.st + job.offset_s;
            for (start, offer) in self.reservation_candidates(v, t_bgn).await {
                let dt = start - t_bgn;
                if dt > 0 {
                    return Step::Delay(dt);
                }
                self.fixes += 1;
                if self.fixes > self.planner.cfg.max_fixes {
                    self.stopped =
                        Some(format!("search budget of {} tentative fixes exhausted", self.planner.cfg.max_fixes));
                    return Step::NotFound;
                }
                if self.out_of_time() {
                    return Step::NotFound;
                }
                let mark = self.trail.len();
                if !self.fix_job(v, &offer, t_bgn).await {
                    continue;
                }
                match self.satisfy_transfers(v).await {
                    Step::Success => return Step::Success,
                    Step::Delay(dt) => return Step::Delay(dt),
                    Step::NotFound => self.undo_to(mark).await,
                }
            }
            Step::NotFound
        })
    }

    /// The network demands of freshly fixed job `v`: those whose other end is fixed first (in
    /// random order), then those whose other end is free (fewest candidates first).
    async fn satisfy_transfers(&mut self, v: usize) -> Step {
        let other = |e: usize| {
            let (a, b) = self.req.transfer_ends(e);
            if a == v {
                b
            } else {
                a
            }
        };
        let (mut fixed, mut free): (Vec<usize>, Vec<usize>) = self.incident[v]
            .iter()
            .copied()
            .filter(|&e| self.transfers[e].is_none())
            .partition(|&e| self.jobs[other(e)].is_some());
        fixed.shuffle(&mut self.rng);
        free.sort_by_key(|&e| (self.candidates[other(e)].len(), e));
        for e in fixed.into_iter().chain(free) {
            if self.transfers[e].is_some() {
                continue; // fixed meanwhile by a deeper search
            }
            let u = other(e);
            let step = if self.jobs[u].is_some() { self.fix_transfer(e).await } else { self.search(u).await };
            if step != Step::Success {
                return step;
            }
        }
        Step::Success
    }

    /// Tentatively fixes job `v` on `offer`'s site from `start`; under BIR this holds the CPUs,
    /// under BBR-overlay it enters the overlay. False when the hold was refused (another
    /// planner took the slot since the query).
    async fn fix_job(&mut self, v: usize, offer: &ComputeOffer, start: Time) -> bool {
        let job = &self.req.jobs()[v];
        let overlay = self.style.overlay.then(|| {
            let end = start + job.duration_s;
            let cpus = Overlay::add(&mut self.overlay.sites, &offer.site, start, end, u64::from(job.cpus));
            let gpus = (job.gpus() > 0)
                .then(|| Overlay::add(&mut self.overlay.gpus, &offer.site, start, end, u64::from(job.gpus())));
            (cpus, gpus)
        });
        let fix = JobFix {
            site: offer.site.clone(),
            price_per_cpu_hour: offer.price_per_cpu_hour,
            price_per_gpu_hour: offer.price_per_gpu_hour,
            gpu_model: offer.gpu_model.clone(),
            hold: None,
            overlay,
        };
        let hold = if self.style.hold_each_fix {
            let req = self.job_hold(v, &fix);
            // Held or refused, the site's answers to this attempt's batch are out of date.
            self.queries.forget_site(&offer.site);
            match self.prepare(self.lis(&offer.site), &req).await {
                Some(h) => Some(h),
                None => return false,
            }
        } else {
            None
        };
        self.jobs[v] = Some(JobFix { hold, ..fix });
        self.trail.push(Fix::Job(v));
        true
    }

    /// Checks and fixes transfer `e` between two fixed jobs (NOTFOUND when the network cannot
    /// carry it); under BIR this holds the bandwidth on the path.
    async fn fix_transfer(&mut self, e: usize) -> Step {
        let t = &self.req.transfers()[e];
        let (a, b) = self.req.transfer_ends(e);
        let site_a = self.jobs[a].as_ref().expect("fixed").site.clone();
        let site_b = self.jobs[b].as_ref().expect("fixed").site.clone();
        let (start, end) = (self.st + t.offset_s, self.st + t.offset_s + t.duration_s);
        let route = if site_a == site_b {
            Route { links: vec![], price_per_gbps_hour: 0.0, free_mbps: u64::MAX }
        } else {
            // BBR-overlay: on top of the plan's own peak on any link it uses (the route is not
            // known before the answer, so this bound covers every link of it).
            let own = if self.style.overlay {
                self.overlay.links.values().map(|c| c.peak_usage(start, end)).max().unwrap_or(0)
            } else {
                0
            };
            let q =
                NetworkQuery { from_site: site_a, to_site: site_b, bandwidth_mbps: t.bandwidth_mbps + own, start, end };
            self.messages += 1;
            match self.planner.services.nis.query(&q).await {
                Ok(Some(r)) => r,
                Ok(None) => return Step::NotFound,
                Err(err) => {
                    tracing::warn!(error = %err, "NIS query failed");
                    return Step::NotFound;
                }
            }
        };
        let hold = if self.style.hold_each_fix && !route.links.is_empty() {
            let req = self.transfer_hold(e, &route.links);
            match self.prepare(Ok(self.planner.services.nis.clone()), &req).await {
                Some(h) => Some(h),
                None => return Step::NotFound,
            }
        } else {
            None
        };
        let overlay = if self.style.overlay {
            let bw = t.bandwidth_mbps;
            route.links.iter().map(|l| (l.clone(), Overlay::add(&mut self.overlay.links, l, start, end, bw))).collect()
        } else {
            Vec::new()
        };
        self.transfers[e] = Some(TransferFix { route, hold, overlay });
        self.trail.push(Fix::Transfer(e));
        Step::Success
    }

    /// The prepare message for job `v` fixed as `fix` at the current `st`.
    pub(super) fn job_hold(&self, v: usize, fix: &JobFix) -> ComputeHoldRequest {
        let job = &self.req.jobs()[v];
        let start = self.st + job.offset_s;
        ComputeHoldRequest {
            txn: self.txn,
            site: fix.site.clone(),
            cpus: job.cpus,
            start,
            end: start + job.duration_s,
            gpus: Self::gpus_of(job, fix),
        }
    }

    /// The GPUs job `job` reserves when fixed as `fix`.
    fn gpus_of(job: &ComputeDemand, fix: &JobFix) -> Option<GpuAllocation> {
        fix.gpu_model.clone().filter(|_| job.gpus() > 0).map(|model| GpuAllocation { model, count: job.gpus() })
    }

    /// The prepare message for transfer `e` on `links` at the current `st`.
    pub(super) fn transfer_hold(&self, e: usize, links: &[LinkId]) -> NetworkHoldRequest {
        let t = &self.req.transfers()[e];
        let start = self.st + t.offset_s;
        NetworkHoldRequest {
            txn: self.txn,
            links: links.to_vec(),
            bandwidth_mbps: t.bandwidth_mbps,
            start,
            end: start + t.duration_s,
        }
    }

    async fn prepare<R: Role>(
        &mut self,
        participant: Result<Arc<dyn Participant<R>>, ParticipantError>,
        req: &R::Prepare,
    ) -> Option<HoldId> {
        self.messages += 1;
        match participant {
            Ok(p) => p.prepare(req).await.map(|h| h.id).ok(),
            Err(_) => None,
        }
    }

    /// Undoes the fixes after `mark`, aborting their holds.
    pub(super) async fn undo_to(&mut self, mark: usize) {
        while self.trail.len() > mark {
            let fix = self.trail.pop().expect("trail longer than mark");
            let (participant, hold) = match fix {
                Fix::Job(v) => {
                    let f = self.jobs[v].take().expect("trail names a fixed job");
                    if let Some((cpus, gpus)) = f.overlay {
                        Overlay::remove(&mut self.overlay.sites, &f.site, cpus);
                        if let Some(span) = gpus {
                            Overlay::remove(&mut self.overlay.gpus, &f.site, span);
                        }
                    }
                    if f.hold.is_some() {
                        self.queries.forget_site(&f.site);
                    }
                    (self.lis(&f.site).ok().map(|p| p as Arc<dyn HoldLifecycle>), f.hold)
                }
                Fix::Transfer(e) => {
                    let f = self.transfers[e].take().expect("trail names a fixed transfer");
                    for (link, span) in &f.overlay {
                        Overlay::remove(&mut self.overlay.links, link, *span);
                    }
                    (Some(self.planner.services.nis.clone() as Arc<dyn HoldLifecycle>), f.hold)
                }
            };
            if let (Some(p), Some(h)) = (participant, hold) {
                self.abort(&p, h).await;
            }
        }
    }

    async fn abort(&mut self, p: &Arc<dyn HoldLifecycle>, hold: HoldId) {
        self.messages += 1;
        self.holds_aborted += 1;
        match p.abort(hold).await {
            Ok(()) => {}
            // A commit whose answer was lost (compensation after a failed commit): give the
            // reservation back instead.
            Err(ParticipantError::AlreadyCommitted(_)) => {
                self.messages += 1;
                if let Err(e) = p.release(hold).await {
                    tracing::error!(error = %e, %hold, "release of a hold committed behind our back failed");
                }
            }
            // The lease will release it anyway.
            Err(e) => tracing::warn!(error = %e, %hold, "abort failed"),
        }
    }

    /// The outcome of the complete plan, as committed.
    pub(super) fn outcome(&self) -> Outcome {
        let req = self.req;
        let mut cost = 0.0;
        let jobs = req
            .jobs()
            .iter()
            .zip(&self.jobs)
            .map(|(job, fix)| {
                let fix = fix.as_ref().expect("complete plan");
                let start = self.st + job.offset_s;
                let per_hour =
                    f64::from(job.cpus) * fix.price_per_cpu_hour + f64::from(job.gpus()) * fix.price_per_gpu_hour;
                cost += job.duration_s as f64 / 3600.0 * per_hour;
                JobPlacement {
                    name: job.name.clone(),
                    site: fix.site.clone(),
                    start: from_time(start),
                    end: from_time(start + job.duration_s),
                    cpus: job.cpus,
                    gpus: Self::gpus_of(job, fix),
                }
            })
            .collect();
        let transfers = req
            .transfers()
            .iter()
            .zip(&self.transfers)
            .map(|(t, fix)| {
                let fix = fix.as_ref().expect("complete plan");
                let start = self.st + t.offset_s;
                cost += t.bandwidth_mbps as f64 / 1000.0 * t.duration_s as f64 / 3600.0 * fix.route.price_per_gbps_hour;
                TransferPlacement {
                    from: t.from.clone(),
                    to: t.to.clone(),
                    path: fix.route.links.clone(),
                    bandwidth_mbps: t.bandwidth_mbps,
                    start: from_time(start),
                    end: from_time(start + t.duration_s),
                }
            })
            .collect();
        Outcome {
            request_id: req.id().to_owned(),
            status: OutcomeStatus::Committed,
            reason: None,
            start: Some(from_time(self.st)),
            jobs,
            transfers,
            cost,
            planning_ms: self.elapsed_ms(),
            planner: self.planner.cfg.name.clone(),
            messages: self.messages,
            holds_aborted: self.holds_aborted,
        }
    }
}
