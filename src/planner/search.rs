//! The search of one planning attempt: the recursive search of Ando & Aida, Fig. 3, and the
//! `st` loop of Fig. 2. It ends with every job and transfer fixed (under BIR, held) or with a
//! rejection; [`super::coordinator`] books the fixed plan.
//!
//! **Backtracking** ([`super::Backtrack`], docs/algorithm.md "Backjumping"). Fig. 3 as written
//! (`Chronological`) undoes a failed candidate and tries the next candidate of the same job,
//! whatever made it fail. When the failure was caused by a job fixed earlier (a transfer from
//! the root that no site of a deep job can carry, say), every candidate of every job in
//! between is tried in vain, each time asking all their sites again: the 4-job diamonds of
//! `benches/planner.rs` that did so took up to 20,000 fixes (the budget) and half a second,
//! and were rejected. The default (`ConflictDirected`) is conflict-directed backjumping
//! (Prosser, 1993) fitted to Fig. 3, with the same candidate order, the same delays and the
//! same `st` loop:
//!
//! - every NOTFOUND carries an explanation: the jobs whose fixes made it fail (`failure`).
//!   A check of transfer `e` that the NIS refuses is explained by `e`'s two ends, plus (BIR,
//!   BBR-overlay) the ends of the plan's own transfers held over an overlapping interval,
//!   which may have taken the bandwidth, unless a probe clears them (below). A refused hold
//!   of a job, or a site that offered no slot, is explained by the plan's own jobs held at
//!   that site over an overlapping interval (none under plain BBR: its queries do not see
//!   them). A job whose candidates all failed is explained by the union of their
//!   explanations, less itself.
//! - when the failure below candidate `c` of job `v` is explained by jobs fixed before `v`
//!   only, no other candidate of `v` can change it: `v` skips its remaining on-time
//!   candidates and returns what Fig. 3's loop would have returned after them, the delay of
//!   its next late candidate or NOTFOUND with the same explanation. Otherwise `v` tries its
//!   next candidate, as in Fig. 3.
//! - a check the NIS refused is remembered (`infeasible`) with the plan's own overlapping
//!   held transfers at the time, until the next shift of `st`; while they are all still held
//!   the answer could only be "no" again, so it is not asked again, and a candidate of `v`
//!   that such a remembered "no" rules out is skipped before it is held.
//! - the checks of `v`'s transfers to already fixed jobs are all asked before any is held
//!   (BIR; under BBR nothing is held anyway), so that a refused check is explained by fixes
//!   made before `v`, not by `v`'s own sibling holds. A hold refused after its check (a
//!   sibling took the bandwidth, or another planner) is checked again and held once more.
//! - the probe: a check of bandwidth `b` refused while the plan holds at most `m < b` on any
//!   one link over that interval is asked once more for `b - m`. If that is refused too, no
//!   path could carry `b` even without the plan's holds (each link would have at most `m`
//!   more free), so the holds are cleared of the blame. This relies on the NIS answering
//!   whether some path of its path set has the bandwidth free over the interval, as both
//!   routings do (docs/algorithm.md).
//!
//! What it keeps from Fig. 3: the candidates, their order and their delays; a skipped
//! candidate is one Fig. 3 would have tried and seen fail for the same reason (up to the
//! plan's own holds making a site late in a branch that was skipped, which would have
//! delayed `st` instead: under BIR the search can then reject a request at this `st` where
//! Fig. 3 would have shifted).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::future::join_all;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::queries::QueryCache;
use super::{Backtrack, Planner, QueryFanout};
use crate::calendar::{CapacityCalendar, SpanId};
use crate::model::{
    from_time, ComputeDemand, GpuAllocation, JobPlacement, LinkId, Outcome, OutcomeStatus, PlanRequest,
    ReservationMethod, SelectionPolicy, SiteId, Time, TransferPlacement, TransferTraffic, MAX_AMOUNT,
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
    /// BIR: the hold made at the fix (BBR: set when the plan's batch is held).
    pub(super) hold: Option<HoldId>,
    /// The site's prefix of its scheduler's reservation names (a LIS in front of Slurm).
    reservation_prefix: Option<String>,
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

/// The holds of one participant (`None`: the NIS) that one backtrack aborts together.
type AbortBatch = (Option<SiteId>, Arc<dyn HoldLifecycle>, Vec<HoldId>);

/// A set of job (or transfer) indices of one request, as a bitset: the explanation of a
/// failure under conflict-directed backjumping (the jobs whose fixes made it fail).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct IndexSet(Vec<u64>);

impl IndexSet {
    pub(super) fn insert(&mut self, i: usize) {
        let (w, b) = (i / 64, i % 64);
        if self.0.len() <= w {
            self.0.resize(w + 1, 0);
        }
        self.0[w] |= 1 << b;
    }
    #[cfg(test)]
    pub(super) fn contains(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
    pub(super) fn union(&mut self, other: &IndexSet) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a |= b;
        }
    }
    /// Every element of `self` is in `other`.
    pub(super) fn is_subset(&self, other: &IndexSet) -> bool {
        self.0.iter().enumerate().all(|(i, a)| a & !other.0.get(i).copied().unwrap_or(0) == 0)
    }
    pub(super) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0
            .iter()
            .enumerate()
            .flat_map(|(w, &bits)| (0..64).filter(move |b| bits & (1 << b) != 0).map(move |b| w * 64 + b))
    }
}

/// Why a transfer needs no NIS question (see `Attempt::nis_question`).
enum Answered {
    /// Both ends on one site: the empty route.
    SameSite,
    /// A recorded "no path" that still stands, with its explanation.
    Infeasible(IndexSet),
}

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

/// The seed of a search's random stream (tie-breaks, the order transfers are checked in): the
/// request's `seed`, except under `time`, which draws from a stream of its own. Sharing one,
/// whenever CPUs did not bind (every site offering the job's own start), `time` booked exactly
/// what `random` booked under the same seed, and the simulator counted those cells as
/// evidence. A fixed tie-break instead (say, price then site id) piles a plan's jobs on one
/// site, which BBR pays for with refused batches (docs/algorithm.md).
fn stream_seed(seed: u64, policy: SelectionPolicy) -> u64 {
    const TIME_STREAM: u64 = 0x7469_6d65_5f74_6965; // "time_tie"
    match policy {
        SelectionPolicy::Time => seed ^ TIME_STREAM,
        _ => seed,
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
    /// [`Backtrack::ConflictDirected`]: the jobs whose fixes explain the last NOTFOUND (set
    /// by whoever returns it, read by the caller at once).
    failure: IndexSet,
    /// `st` shifts so far.
    shifts: u32,
    /// Search statistics (logged at debug level): backjumps, candidates skipped because a
    /// check of theirs is recorded in `infeasible`, checks answered from it, and probes (the
    /// second NIS question that tells whether the plan's own holds caused a "no").
    jumps: u64,
    skipped: u64,
    memo_hits: u64,
    probes: u64,
    /// [`Backtrack::ConflictDirected`]: network checks proven infeasible at the current `st`,
    /// each with the plan's own held transfers that overlapped it then (under BIR they may be
    /// the cause; the answer stands while they are all still held). Cleared on every shift.
    infeasible: HashMap<NetworkQuery, IndexSet>,
    /// [`super::PlannerConfig::batch_queries`]: the NIS's answers to the checks of one
    /// [`Self::check_transfers`], asked in one message and taken by [`Self::transfer_route`]
    /// in the order it would have asked them; emptied when that check ends.
    prefetched: HashMap<NetworkQuery, Result<Option<Route>, ParticipantError>>,
    /// A job no site of the catalogue can run: the request can never be planned.
    pub(super) unsatisfiable: bool,
    overlay: Overlay,
    /// Batched query answers (see [`super::queries`]).
    queries: QueryCache,
    /// The user the plan is booked for (prepare messages carry it: [`ComputeHoldRequest::user`]).
    pub(super) user: Option<String>,
    /// When planning of the request began (the outcome's `planning_ms`; before the first
    /// attempt when a refused BBR batch is planned again).
    pub(super) started: tokio::time::Instant,
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
            rng: ChaCha8Rng::seed_from_u64(stream_seed(seed, policy)),
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
            failure: IndexSet::default(),
            shifts: 0,
            jumps: 0,
            skipped: 0,
            memo_hits: 0,
            probes: 0,
            infeasible: HashMap::new(),
            prefetched: HashMap::new(),
            unsatisfiable: false,
            user: None,
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
        let r = self.search_plan_inner().await;
        tracing::debug!(
            request = %self.req.id(), planned = r.is_ok(), fixes = self.fixes, shifts = self.shifts,
            backjumps = self.jumps, skipped = self.skipped, nis_answers_reused = self.memo_hits,
            nis_probes = self.probes, messages = self.messages, "search finished"
        );
        r
    }

    async fn search_plan_inner(&mut self) -> Result<(), Outcome> {
        let req = self.req;
        let w = self.planner.cfg.w_interval_s;
        self.st = req.not_before().map_or(req.submitted_at() + w, |nb| nb.max(req.submitted_at() + w));
        if self.st + req.span_s() > req.deadline() {
            return Err(
                self.reject(format!("deadline cannot be met: the plan starts no earlier than {}", from_time(self.st)))
            );
        }
        // One message for every job's candidates.
        let all = match self.planner.services.gis.candidates_all(req.jobs()).await {
            Ok(all) => all,
            Err(e) => return Err(self.reject(format!("GIS unavailable: {e}"))),
        };
        for (job, c) in req.jobs().iter().zip(all) {
            if !c.sites.is_empty() {
                self.candidates.push(c.sites);
                continue;
            }
            let why = match &c.nearest_miss {
                Some((site, unmet)) => format!("; nearest: site `{site}` lacks {unmet}"),
                None => String::new(),
            };
            self.unsatisfiable = true;
            return Err(
                self.reject(format!("no site can run job `{}` ({} CPUs of {}{why})", job.name, job.cpus, job.os))
            );
        }
        let roots = self.roots();
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
                        self.shifts += 1;
                        if self.shifts > self.planner.cfg.max_shifts {
                            return Err(self.reject(format!("gave up after {} start-time shifts", self.shifts)));
                        }
                        self.st += dt;
                        self.infeasible.clear();
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
        self.queries.at(self.st, self.policy != SelectionPolicy::Load);
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
                    Ok(offer) => {
                        let job = &self.req.jobs()[u];
                        let from = self.st + job.offset_s;
                        self.queries.put(u, site.clone(), offer, from, job.duration_s, deadline);
                    }
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
    /// at random, `time`'s from a stream of its own: [`stream_seed`]).
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

    /// `search(rm, st)` of Ando & Aida, Fig. 3. Under [`Backtrack::ConflictDirected`] a
    /// NOTFOUND leaves its explanation in `self.failure`, and a candidate whose failure is
    /// explained without `v` ends the loop (see [`Backtrack`] and docs/algorithm.md).
    fn search(&mut self, v: usize) -> BoxFut<'_, Step> {
        Box::pin(async move {
            let job = self.req.jobs()[v].clone();
            let t_bgn = self.st + job.offset_s;
            let backjump = self.planner.cfg.backtrack == Backtrack::ConflictDirected;
            let offers = self.reservation_candidates(v, t_bgn).await;
            // Why every candidate failed, should they all fail: starting with the plan's own
            // fixes at the sites that did not offer a slot at all.
            let mut why = if backjump { self.absent_sites_conflict(v, t_bgn, &offers) } else { IndexSet::default() };
            for (i, (start, offer)) in offers.iter().enumerate() {
                let dt = start - t_bgn;
                if dt > 0 {
                    return Step::Delay(dt);
                }
                if backjump {
                    // A candidate whose check against a fixed neighbour is already known to fail
                    // is not held only to be given back: it fails for the same reason.
                    if let Some(known) = self.known_infeasible(v, &offer.site) {
                        self.skipped += 1;
                        for w in known.iter().filter(|&w| w != v) {
                            why.insert(w);
                        }
                        continue;
                    }
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
                // `check_before_hold`: the network checks of `v`'s transfers to fixed jobs, asked
                // with `v` placed at this site but not held yet (they do not depend on its hold).
                let checked =
                    if self.check_before_hold() { Some(self.check_transfers_at(v, offer).await) } else { None };
                let step = match checked {
                    Some(Err(failure)) => {
                        self.failure = failure;
                        Step::NotFound
                    }
                    checked => {
                        if !self.fix_job(v, offer, t_bgn).await {
                            if backjump {
                                why.union(&self.own_jobs_at(&offer.site, t_bgn, t_bgn + job.duration_s));
                            }
                            continue;
                        }
                        self.satisfy_transfers(v, checked.and_then(Result::ok)).await
                    }
                };
                match step {
                    Step::Success => return Step::Success,
                    Step::Delay(dt) => return Step::Delay(dt),
                    Step::NotFound if !backjump => self.undo_to(mark).await,
                    Step::NotFound => {
                        let failure = std::mem::take(&mut self.failure);
                        let fixed_at = self.fix_positions();
                        // Jobs fixed from `mark` on are `v` and what was fixed under it.
                        let (mut before, mut involves_v) = (IndexSet::default(), false);
                        for w in failure.iter() {
                            if fixed_at[w] < mark {
                                before.insert(w);
                            } else {
                                involves_v = true;
                            }
                        }
                        self.undo_to(mark).await;
                        if self.stopped.is_some() {
                            return Step::NotFound;
                        }
                        if !involves_v {
                            // The failure holds whatever `v` is: every other on-time candidate
                            // would fail the same way, so do what the loop would do after them.
                            self.jumps += 1;
                            if let Some((later, _)) = offers[i + 1..].iter().find(|(t, _)| *t > t_bgn) {
                                return Step::Delay(later - t_bgn);
                            }
                            self.failure = before;
                            return Step::NotFound;
                        }
                        why.union(&before);
                    }
                }
            }
            self.failure = why;
            Step::NotFound
        })
    }

    /// The network demands of freshly fixed job `v`: those whose other end is fixed first (in
    /// random order), then those whose other end is free (fewest candidates first). Under
    /// [`Backtrack::ConflictDirected`] (BIR and BBR) every check against a fixed end is asked
    /// before any of them is held, so that a check that fails is explained by fixes made
    /// before `v` only, not by `v`'s own holds.
    ///
    /// `checked`: the routes of the transfers to fixed jobs, already checked (in the order
    /// [`Self::fixed_transfers`] drew) by [`Self::check_transfers_at`].
    async fn satisfy_transfers(&mut self, v: usize, checked: Option<Vec<(usize, Route)>>) -> Step {
        let fixed = match &checked {
            Some(routes) => routes.iter().map(|(e, _)| *e).collect(),
            None => self.fixed_transfers(v),
        };
        let mut free: Vec<usize> = self.incident[v]
            .iter()
            .copied()
            .filter(|&e| self.transfers[e].is_none() && self.jobs[self.other_end(e, v)].is_none())
            .collect();
        free.sort_by_key(|&e| (self.candidates[self.other_end(e, v)].len(), e));
        let backjump = self.planner.cfg.backtrack == Backtrack::ConflictDirected;
        if backjump && !self.style.overlay {
            let routes = match checked {
                Some(routes) => routes,
                None => match self.check_transfers(&fixed).await {
                    Ok(routes) => routes,
                    Err(why) => {
                        self.failure = why;
                        return Step::NotFound;
                    }
                },
            };
            for (e, route) in routes {
                if self.hold_transfer(e, route).await {
                    continue;
                }
                // Refused: a hold of `v`'s made since the check, or another planner, took the
                // bandwidth. Ask again, seeing it, as the interleaved order would have.
                if self.fix_transfer(e).await != Step::Success {
                    return Step::NotFound;
                }
            }
        } else {
            for &e in &fixed {
                if self.fix_transfer(e).await != Step::Success {
                    return Step::NotFound;
                }
            }
        }
        for e in free {
            if self.transfers[e].is_some() {
                continue; // fixed meanwhile by a deeper search
            }
            let u = self.other_end(e, v);
            // The other end may have been fixed meanwhile too (by a deeper search, through
            // another path): then it is a check like the ones above.
            let step = if self.jobs[u].is_some() { self.fix_transfer(e).await } else { self.search(u).await };
            if step != Step::Success {
                return step;
            }
        }
        Step::Success
    }

    /// The other end of transfer `e` of job `v`.
    fn other_end(&self, e: usize, v: usize) -> usize {
        let (a, b) = self.req.transfer_ends(e);
        if a == v {
            b
        } else {
            a
        }
    }

    /// The transfers of `v` still to fix whose other end is fixed, in random order (the order
    /// they are checked and held in).
    fn fixed_transfers(&mut self, v: usize) -> Vec<usize> {
        let mut fixed: Vec<usize> = self.incident[v]
            .iter()
            .copied()
            .filter(|&e| self.transfers[e].is_none() && self.jobs[self.other_end(e, v)].is_some())
            .collect();
        fixed.shuffle(&mut self.rng);
        fixed
    }

    /// Asks the NIS about each of `transfers` (both ends fixed) in order; the first refusal's
    /// explanation ends it.
    ///
    /// With [`super::PlannerConfig::batch_queries`] the questions it would ask are sent to
    /// the NIS in one message first ([`crate::protocol::Participant::query_all`]). A check
    /// books nothing, so the answers are the ones the questions asked one by one would get
    /// (the same plan); only those after the first refusal go unused.
    async fn check_transfers(&mut self, transfers: &[usize]) -> Result<Vec<(usize, Route)>, IndexSet> {
        if self.planner.cfg.batch_queries && transfers.len() > 1 {
            let asked: Vec<NetworkQuery> = transfers.iter().filter_map(|&e| self.nis_question(e).ok()).collect();
            if asked.len() > 1 {
                self.messages += 1;
                let answers = self.planner.services.nis.query_all(&asked).await;
                self.prefetched = asked.into_iter().zip(answers).collect();
            }
        }
        let mut routes = Vec::with_capacity(transfers.len());
        let mut checked = Ok(());
        for &e in transfers {
            match self.transfer_route(e).await {
                Ok(route) => routes.push((e, route)),
                Err(why) => {
                    checked = Err(why);
                    break;
                }
            }
        }
        self.prefetched.clear();
        checked.map(|()| routes)
    }

    /// Whether the search checks a candidate's transfers to fixed jobs before it holds the
    /// candidate ([`super::PlannerConfig::check_before_hold`]; BIR with backjumping only).
    fn check_before_hold(&self) -> bool {
        self.planner.cfg.check_before_hold
            && self.planner.cfg.backtrack == Backtrack::ConflictDirected
            && self.style.hold_each_fix
            && !self.style.overlay
    }

    /// The checks of [`Self::satisfy_transfers`] for `v` on `offer`'s site, asked before `v`
    /// is held there: a network check does not depend on `v`'s CPUs, so a refused one costs
    /// no hold and no abort (and leaves the site's batched answers in place). `v` is placed
    /// for the checks only.
    async fn check_transfers_at(&mut self, v: usize, offer: &ComputeOffer) -> Result<Vec<(usize, Route)>, IndexSet> {
        let transfers = self.fixed_transfers(v);
        if transfers.is_empty() {
            return Ok(Vec::new());
        }
        self.jobs[v] = Some(JobFix {
            site: offer.site.clone(),
            price_per_cpu_hour: offer.price_per_cpu_hour,
            price_per_gpu_hour: offer.price_per_gpu_hour,
            gpu_model: offer.gpu_model.clone(),
            hold: None,
            reservation_prefix: offer.reservation_prefix.clone(),
            overlay: None,
        });
        let checked = self.check_transfers(&transfers).await;
        self.jobs[v] = None;
        checked
    }

    /// Trail position of every fixed job (`usize::MAX` for a free one).
    fn fix_positions(&self) -> Vec<usize> {
        let mut at = vec![usize::MAX; self.jobs.len()];
        for (i, f) in self.trail.iter().enumerate() {
            if let Fix::Job(w) = f {
                at[*w] = i;
            }
        }
        at
    }

    /// Whether the participants see the plan's own fixes in their answers: under BIR as holds,
    /// under BBR-overlay through the overlay added to every query; under plain BBR not at all.
    fn own_fixes_visible(&self) -> bool {
        self.style.hold_each_fix || self.style.overlay
    }

    /// The fixed jobs at `site` whose run overlaps `[start, end)`, when the plan's own fixes
    /// are visible: what may have made that site refuse or not offer a slot.
    fn own_jobs_at(&self, site: &SiteId, start: Time, end: Time) -> IndexSet {
        let mut set = IndexSet::default();
        if !self.own_fixes_visible() {
            return set;
        }
        for (w, fix) in self.jobs.iter().enumerate() {
            let Some(fix) = fix else { continue };
            let job = &self.req.jobs()[w];
            let (s, e) = (self.st + job.offset_s, self.st + job.offset_s + job.duration_s);
            if &fix.site == site && s < end && start < e {
                set.insert(w);
            }
        }
        set
    }

    /// The explanation of the candidate sites of `v` that offered no slot before the deadline:
    /// the plan's own jobs at those sites over `[t_bgn, deadline)`.
    fn absent_sites_conflict(&self, v: usize, t_bgn: Time, offers: &[(Time, ComputeOffer)]) -> IndexSet {
        let mut set = IndexSet::default();
        if !self.own_fixes_visible() {
            return set;
        }
        for site in &self.candidates[v] {
            if !offers.iter().any(|(_, o)| &o.site == site) {
                set.union(&self.own_jobs_at(site, t_bgn, self.req.deadline()));
            }
        }
        set
    }

    /// The plan's own transfers that may narrow the NIS's answer for `[start, end)`: those held
    /// (BIR) or in the overlay (BBR-overlay) over an overlapping interval, on some link.
    fn own_transfers_over(&self, start: Time, end: Time) -> IndexSet {
        let mut set = IndexSet::default();
        for (f, fix) in self.transfers.iter().enumerate() {
            let Some(fix) = fix else { continue };
            if fix.hold.is_none() && fix.overlay.is_empty() {
                continue;
            }
            let t = &self.req.transfers()[f];
            let (s, e) = (self.st + t.offset_s, self.st + t.offset_s + t.duration_s);
            if s < end && start < e {
                set.insert(f);
            }
        }
        set
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
            reservation_prefix: offer.reservation_prefix.clone(),
            overlay,
        };
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
        self.jobs[v] = Some(JobFix { hold, ..fix });
        self.trail.push(Fix::Job(v));
        true
    }

    /// Checks and fixes transfer `e` between two fixed jobs (NOTFOUND when the network cannot
    /// carry it); under BIR this holds the bandwidth on the path.
    async fn fix_transfer(&mut self, e: usize) -> Step {
        let backjump = self.planner.cfg.backtrack == Backtrack::ConflictDirected;
        match self.transfer_route(e).await {
            Ok(route) => {
                let links = if backjump { route.links.clone() } else { Vec::new() };
                if self.hold_transfer(e, route).await {
                    return Step::Success;
                }
                if backjump {
                    self.failure = self.hold_conflict(e, &links);
                }
                Step::NotFound
            }
            Err(why) => {
                self.failure = why;
                Step::NotFound
            }
        }
    }

    /// Asks the NIS for a path for transfer `e` between its two fixed jobs over its interval at
    /// the current `st` (none needed on one site: the empty route, no message). `None`: no
    /// path, or the NIS did not answer. Under [`Backtrack::ConflictDirected`] a question the
    /// NIS answered "no path" at this `st` is not asked again while the plan's own transfers
    /// that overlapped it then are all still held (it could only be answered "no" again).
    async fn transfer_route(&mut self, e: usize) -> Result<Route, IndexSet> {
        let q = match self.nis_question(e) {
            Ok(asked) => asked,
            Err(Answered::SameSite) => {
                return Ok(Route { links: vec![], price_per_gbps_hour: 0.0, free_mbps: u64::MAX, marking: None });
            }
            Err(Answered::Infeasible(why)) => {
                self.memo_hits += 1;
                return Err(why);
            }
        };
        let (bandwidth, start, end) = (self.req.transfers()[e].bandwidth_mbps, q.start, q.end);
        let backjump = self.planner.cfg.backtrack == Backtrack::ConflictDirected;
        let own_over = self.own_transfers_over(start, end);
        let answer = match self.prefetched.remove(&q) {
            Some(answer) => answer,
            None => {
                self.messages += 1;
                self.planner.services.nis.query(&q).await
            }
        };
        match answer {
            Ok(Some(r)) => Ok(r),
            Ok(None) => {
                if !backjump {
                    return Err(IndexSet::default());
                }
                // Which of the plan's own transfers may have caused the "no": those held over an
                // overlapping interval. Under BIR, if even `bandwidth` minus the most the plan
                // holds on any one link at that time finds no path, the plan's holds are not
                // the cause (without them every link would have at most that much more free).
                let mut cause = own_over;
                if self.style.hold_each_fix && cause != IndexSet::default() {
                    let most = self.own_peak_on_a_link(&cause);
                    if most < bandwidth {
                        let probe = NetworkQuery { bandwidth_mbps: bandwidth - most, ..q.clone() };
                        self.messages += 1;
                        self.probes += 1;
                        if let Ok(None) = self.planner.services.nis.query(&probe).await {
                            cause = IndexSet::default();
                        }
                    }
                }
                let why = self.ends_of(e, &cause);
                self.infeasible.insert(q, cause);
                Err(why)
            }
            Err(err) => {
                tracing::warn!(error = %err, "NIS query failed");
                Err(self.ends_of(e, &own_over))
            }
        }
    }

    /// The question [`Self::transfer_route`] asks the NIS about transfer `e` (both ends fixed)
    /// at the current `st`; or why it needs none.
    fn nis_question(&self, e: usize) -> Result<NetworkQuery, Answered> {
        let (a, b) = self.req.transfer_ends(e);
        let site_a = &self.jobs[a].as_ref().expect("fixed").site;
        let site_b = &self.jobs[b].as_ref().expect("fixed").site;
        if site_a == site_b {
            return Err(Answered::SameSite);
        }
        self.question(e, site_a, site_b).map_err(Answered::Infeasible)
    }

    /// The NIS question about transfer `e` from `site_a` to `site_b` (two different sites) at
    /// the current `st`; `Err`, with its explanation, when a "no path" recorded for it in
    /// `infeasible` still stands (only [`Backtrack::ConflictDirected`] records them).
    fn question(&self, e: usize, site_a: &SiteId, site_b: &SiteId) -> Result<NetworkQuery, IndexSet> {
        let t = &self.req.transfers()[e];
        let (start, end) = (self.st + t.offset_s, self.st + t.offset_s + t.duration_s);
        // BBR-overlay: on top of the plan's own peak on any link it uses (the route is not
        // known before the answer, so this bound covers every link of it).
        let own = if self.style.overlay {
            self.overlay.links.values().map(|c| c.peak_usage(start, end)).max().unwrap_or(0)
        } else {
            0
        };
        let q = NetworkQuery {
            from_site: site_a.clone(),
            to_site: site_b.clone(),
            bandwidth_mbps: t.bandwidth_mbps + own,
            start,
            end,
        };
        match self.infeasible.get(&q) {
            Some(then) if then.is_subset(&self.own_transfers_over(start, end)) => Err(self.ends_of(e, then)),
            _ => Ok(q),
        }
    }

    /// If job `v` fixed at `site` has a transfer to a fixed neighbour whose check is recorded
    /// in `infeasible` (and still valid), the explanation of that failure.
    fn known_infeasible(&self, v: usize, site: &SiteId) -> Option<IndexSet> {
        if self.infeasible.is_empty() {
            return None;
        }
        for &e in &self.incident[v] {
            let (Some(fu), None) = (&self.jobs[self.other_end(e, v)], &self.transfers[e]) else { continue };
            let (site_a, site_b) = if self.req.transfer_ends(e).0 == v { (site, &fu.site) } else { (&fu.site, site) };
            if site_a == site_b {
                continue;
            }
            if let Err(why) = self.question(e, site_a, site_b) {
                return Some(why);
            }
        }
        None
    }

    /// The ends of transfer `e` and of the transfers in `others`: the jobs a network failure
    /// of `e` is blamed on.
    fn ends_of(&self, e: usize, others: &IndexSet) -> IndexSet {
        let mut set = IndexSet::default();
        for f in std::iter::once(e).chain(others.iter()) {
            let (a, b) = self.req.transfer_ends(f);
            set.insert(a);
            set.insert(b);
        }
        set
    }

    /// The most bandwidth the held transfers `held` take together on any one link (their
    /// routes are known; each counted whole, whatever part of the interval it overlaps).
    fn own_peak_on_a_link(&self, held: &IndexSet) -> u64 {
        let mut per_link: HashMap<&LinkId, u64> = HashMap::new();
        for f in held.iter() {
            let fix = self.transfers[f].as_ref().expect("held transfer is fixed");
            for l in &fix.route.links {
                *per_link.entry(l).or_default() += self.req.transfers()[f].bandwidth_mbps;
            }
        }
        per_link.into_values().max().unwrap_or(0)
    }

    /// The explanation of a refused hold of transfer `e` on `route`: its ends, and the ends of
    /// the plan's own held transfers over an overlapping interval on a link of `route`.
    fn hold_conflict(&self, e: usize, route: &[LinkId]) -> IndexSet {
        let t = &self.req.transfers()[e];
        let start = self.st + t.offset_s;
        let mut sharing = IndexSet::default();
        for f in self.own_transfers_over(start, start + t.duration_s).iter() {
            let fix = self.transfers[f].as_ref().expect("held transfer is fixed");
            if fix.route.links.iter().any(|l| route.contains(l)) {
                sharing.insert(f);
            }
        }
        self.ends_of(e, &sharing)
    }

    /// Fixes transfer `e` on `route`; under BIR this holds the bandwidth on it (false when the
    /// hold was refused), under BBR-overlay it enters the overlay.
    async fn hold_transfer(&mut self, e: usize, route: Route) -> bool {
        let t = &self.req.transfers()[e];
        let (start, end) = (self.st + t.offset_s, self.st + t.offset_s + t.duration_s);
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
            route.links.iter().map(|l| (l.clone(), Overlay::add(&mut self.overlay.links, l, start, end, bw))).collect()
        } else {
            Vec::new()
        };
        self.transfers[e] = Some(TransferFix { route, hold, overlay });
        self.trail.push(Fix::Transfer(e));
        true
    }

    /// The prepare message for job `v` fixed as `fix` at the current `st`.
    pub(super) fn job_hold(&self, v: usize, fix: &JobFix) -> ComputeHoldRequest {
        let job = &self.req.jobs()[v];
        let start = self.st + job.offset_s;
        ComputeHoldRequest {
            replaces: None,
            txn: self.txn,
            site: fix.site.clone(),
            cpus: job.cpus,
            start,
            end: start + job.duration_s,
            gpus: Self::gpus_of(job, fix),
            user: self.user.clone(),
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
        let (a, b) = self.req.transfer_ends(e);
        let site = |j: usize| self.jobs[j].as_ref().map(|f| f.site.clone());
        NetworkHoldRequest {
            replaces: None,
            port: None,
            txn: self.txn,
            links: links.to_vec(),
            bandwidth_mbps: t.bandwidth_mbps,
            start,
            end: start + t.duration_s,
            sites: site(a).zip(site(b)),
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

    /// This attempt held or aborted something at `site` over `[start, end)`: drops the batched
    /// answers that may have changed (all of the site's under the `load` policy, which ranks
    /// by a utilisation over the whole window; see [`super::queries`]).
    fn forget_answers(&mut self, site: &SiteId, start: Time, end: Time) {
        if self.policy == SelectionPolicy::Load {
            self.queries.forget_site(site);
        } else {
            self.queries.forget_over(site, start, end);
        }
    }

    /// Undoes the fixes after `mark`, aborting their holds.
    pub(super) async fn undo_to(&mut self, mark: usize) {
        // The holds to abort, in trail order, each with its participant (`None`: the NIS).
        let mut aborts: Vec<(Option<SiteId>, Arc<dyn HoldLifecycle>, HoldId)> = Vec::new();
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
                        let job = &self.req.jobs()[v];
                        let start = self.st + job.offset_s;
                        self.forget_answers(&f.site, start, start + job.duration_s);
                    }
                    let p = self.lis(&f.site).ok().map(|p| (Some(f.site.clone()), p as Arc<dyn HoldLifecycle>));
                    (p, f.hold)
                }
                Fix::Transfer(e) => {
                    let f = self.transfers[e].take().expect("trail names a fixed transfer");
                    for (link, span) in &f.overlay {
                        Overlay::remove(&mut self.overlay.links, link, *span);
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
                self.messages += 1;
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
        self.messages += batches.len() as u64;
        self.holds_aborted += batches.iter().map(|b| b.2.len() as u64).sum::<u64>();
        let answers = join_all(batches.iter().map(|(_, p, holds)| p.abort_all(holds))).await;
        for ((_, p, holds), answers) in batches.iter().zip(answers) {
            for (&hold, answer) in holds.iter().zip(answers) {
                self.aborted(p, hold, answer).await;
            }
        }
    }

    /// After the abort of `hold` at `p` answered `answer`.
    async fn aborted(&mut self, p: &Arc<dyn HoldLifecycle>, hold: HoldId, answer: Result<(), ParticipantError>) {
        match answer {
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
                    reservation_name: fix
                        .reservation_prefix
                        .as_ref()
                        .zip(fix.hold)
                        .map(|(p, h)| crate::protocol::local_reservation_name(p, h)),
                    broken: None,
                    state: None,
                    price_per_cpu_hour: fix.price_per_cpu_hour,
                    price_per_gpu_hour: if job.gpus() > 0 { fix.price_per_gpu_hour } else { 0.0 },
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
                    traffic: fix.route.marking.as_ref().zip(fix.hold).map(|(m, h)| TransferTraffic {
                        protocol: "tcp".into(),
                        from_addr: m.from_addr.clone(),
                        to_addr: m.to_addr.clone(),
                        port: m.port(h),
                    }),
                    broken: None,
                    state: None,
                    price_per_gbps_hour: fix.route.price_per_gbps_hour,
                }
            })
            .collect();
        Outcome {
            request_id: req.id().to_owned(),
            status: OutcomeStatus::Committed,
            reason: None,
            start: Some(from_time(self.st)),
            deadline: Some(from_time(req.deadline())),
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
