//! The search of one planning attempt: the recursive search of Ando & Aida, Fig. 3, and the
//! `st` loop of Fig. 2. It ends with every job and transfer fixed (under BIR, held) or with a
//! rejection. It sends no message itself: the [`TentativeBook`] of its tentative holds asks
//! the participants and makes the fixes, so the search is driven by the answers alone (its
//! tests give it tables of answers). The planner then hands the finished plan to the
//! [`super::coordinator::Coordinator`].
//!
//! Backtracking ([`super::Backtrack`]) is Fig. 3's chronological one or, by default,
//! conflict-directed backjumping: the explanations it needs are in [`explain`].

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::fixes::{Fix, JobFix, Style, TentativeBook};
use super::{Backtrack, PlannerConfig};
use crate::model::{rfc3339, Outcome, PlanRequest, ReservationMethod, SelectionPolicy, SiteId, Time};
use crate::protocol::{ComputeOffer, NetworkQuery, Route};
use explain::{Answered, IndexSet};
use policy::stream_seed;

pub(super) mod explain;
pub(super) mod never;
mod policy;
#[cfg(test)]
mod tests;

/// Result of `search` (Ando & Aida, Fig. 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Success,
    NotFound,
    /// The whole application must start this many seconds later.
    Delay(i64),
}

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// At most this many later starts [`Attempt::slide_later`] asks the NIS about for one
/// floating transfer that does not fit at its producer's end.
const SLIDE_PROBES: i64 = 16;

/// At most this many times [`Attempt::search`] tries a floating job again later, when a
/// staged transfer into it found room on the network only after its start.
const LATER_RETRIES: usize = 16;

/// Space left on the stack below which a poll of [`GrowStack`] moves to a new segment (bytes):
/// a level of the search (its poll, [`Attempt::satisfy_transfers`]' and the book's) takes a
/// few KiB, more in debug builds.
const STACK_RED_ZONE: usize = 256 << 10;
/// Size of each new stack segment (bytes): some hundred levels of the search.
const STACK_SEGMENT: usize = 4 << 20;

/// The search's future, polled on a stack with room to spare ([`stacker::maybe_grow`]). The
/// search nests one level per job it fixes (per-job placement: one per job of the request, up
/// to [`crate::model::MAX_JOBS`]), and each nested future is polled from its parent's
/// poll, so the depth of the thread's stack grows with the request's. A worker thread's stack
/// (2 MiB for actix and tokio) would overflow at some hundreds of jobs.
pub(crate) struct GrowStack<'a, T>(BoxFut<'a, T>);

impl<T> Future for GrowStack<'_, T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || self.0.as_mut().poll(cx))
    }
}

/// One planning attempt: the search's state (this module) over a [`TentativeBook`] of its
/// tentative holds, which sends every participant message (the planner's: [`super::book::Book`]).
pub(crate) struct Attempt<'a, B> {
    cfg: &'a PlannerConfig,
    pub(super) req: &'a PlanRequest,
    policy: SelectionPolicy,
    style: Style,
    rng: ChaCha8Rng,
    /// Candidate sites of every job, from the GIS.
    candidates: Vec<Vec<SiteId>>,
    /// Transfer indices touching every job.
    incident: Vec<Vec<usize>>,
    /// The fixes made so far, held or not, and the messages they took.
    pub(super) book: B,
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
    /// A job no site of the catalogue can run: the request can never be planned.
    pub(super) unsatisfiable: bool,
    /// The earliest its consumer could start for a floating transfer that found room on the
    /// network only after the consumer's start ([`Self::slide_later`]): where the search
    /// tries the consumer again, later.
    consumer_later: Option<Time>,
    /// The last part the search could not place, and the resource that stopped it (what a
    /// rejection's reason names; see [`explain`]).
    blame: Option<String>,
    /// Per-job placement (the request has floating jobs, [`PlanRequest::floats`]): every job
    /// in dependency order (by laid-out offset, then index), the order the search fixes them
    /// in; empty otherwise (Fig. 3's order along the transfers).
    order: Vec<usize>,
    /// Each job's place in `order`.
    position: Vec<usize>,
}

impl<'a, B: TentativeBook> Attempt<'a, B> {
    /// The search of `req` under `cfg`, with `policy` and `method`, ties broken by a stream
    /// seeded from `seed`, fixing into `book` (empty).
    pub(crate) fn new(
        cfg: &'a PlannerConfig,
        req: &'a PlanRequest,
        policy: SelectionPolicy,
        method: ReservationMethod,
        seed: u64,
        book: B,
    ) -> Self {
        let n = req.jobs().len();
        let mut incident = vec![Vec::new(); n];
        for e in 0..req.transfers().len() {
            let (a, b) = req.transfer_ends(e);
            incident[a].push(e);
            incident[b].push(e);
        }
        // A job's laid-out offset is later than each of its predecessors' (their end at least):
        // ordered by it, every job comes after those it is after.
        let mut order: Vec<usize> = Vec::new();
        let mut position = Vec::new();
        if req.has_floating() {
            order = (0..n).collect();
            order.sort_by_key(|&j| (req.job_span(j).offset_s, j));
            position = vec![0; n];
            for (i, &j) in order.iter().enumerate() {
                position[j] = i;
            }
        }
        Attempt {
            cfg,
            req,
            policy,
            style: method.into(),
            rng: ChaCha8Rng::seed_from_u64(stream_seed(seed, policy)),
            candidates: Vec::new(),
            incident,
            book,
            fixes: 0,
            stopped: None,
            failure: IndexSet::default(),
            shifts: 0,
            jumps: 0,
            skipped: 0,
            memo_hits: 0,
            probes: 0,
            infeasible: HashMap::new(),
            unsatisfiable: false,
            consumer_later: None,
            blame: None,
            order,
            position,
        }
    }

    /// Searches until a complete plan is fixed (`Ok`) or the request is rejected.
    pub(crate) async fn search_plan(&mut self) -> Result<(), Outcome> {
        let r = self.search_plan_inner().await;
        tracing::debug!(
            request = %self.req.id(), planned = r.is_ok(), fixes = self.fixes, shifts = self.shifts,
            backjumps = self.jumps, skipped = self.skipped, nis_answers_reused = self.memo_hits,
            nis_probes = self.probes, messages = self.book.messages(), "search finished"
        );
        r
    }

    async fn search_plan_inner(&mut self) -> Result<(), Outcome> {
        let req = self.req;
        let w = self.cfg.w_interval_s;
        self.book.fixes_mut().st = req.not_before().map_or(req.submitted_at() + w, |nb| nb.max(req.submitted_at() + w));
        if self.book.fixes().st + req.span_s() > req.deadline() {
            return Err(self.book.reject(format!(
                "deadline cannot be met: the plan starts no earlier than {} and lasts {} s, past the deadline {}",
                rfc3339(&self.book.fixes().st),
                req.span_s(),
                rfc3339(&req.deadline())
            )));
        }
        // One message for every job's candidates.
        let all = match self.book.candidates().await {
            Ok(all) => all,
            Err(e) => return Err(self.book.reject(format!("GIS unavailable: {e}"))),
        };
        // What the catalogue says every job could ever get: its sites and their CPUs.
        let mut ever: Vec<Vec<(SiteId, u32)>> = Vec::new();
        for (job, mut c) in req.jobs().iter().zip(all) {
            if self.cfg.static_check && c.cpus.len() == c.sites.len() {
                ever.push(c.sites.iter().cloned().zip(c.cpus.iter().copied()).collect());
            }
            // Sites whose scheduler did not answer an earlier attempt are left out: a job
            // with none left is rejected for now, not unsatisfiable.
            let some = !c.sites.is_empty();
            c.sites.retain(|s| !self.book.excluded().contains(s));
            if !c.sites.is_empty() {
                self.candidates.push(c.sites);
                continue;
            }
            if some {
                return Err(self.book.reject(format!("no site that can run job `{}` is available", job.name)));
            }
            let why = match &c.nearest_miss {
                Some((site, unmet)) => format!("; nearest: site `{site}` lacks {unmet}"),
                None => String::new(),
            };
            self.unsatisfiable = true;
            return Err(self
                .book
                .reject(format!("no site can run job `{}` ({} CPUs of {}{why})", job.name, job.cpus, job.os)));
        }
        if self.cfg.static_check && ever.len() == req.jobs().len() {
            if let Some(never) = self.never_fits(&ever).await {
                self.unsatisfiable = true;
                return Err(self.book.reject(format!("can never fit on this grid: {never}")));
            }
        }
        let roots = self.roots();
        'shift: loop {
            for &root in &roots {
                if self.book.fixes().jobs[root].is_some() {
                    continue;
                }
                match self.search(root).await {
                    Step::Success => {}
                    Step::NotFound => {
                        self.book.undo_to(0).await;
                        let last = self.blame.take().map(|b| format!("; the last part that did not fit: {b}"));
                        let reason = match self.stopped.take() {
                            Some(stopped) => format!("{stopped}{}", last.unwrap_or_default()),
                            None => format!(
                                "no feasible plan before the deadline {}{}",
                                rfc3339(&req.deadline()),
                                last.unwrap_or_default()
                            ),
                        };
                        return Err(self.book.reject(reason));
                    }
                    Step::Delay(dt) => {
                        self.book.undo_to(0).await;
                        self.shifts += 1;
                        if self.shifts > self.cfg.max_shifts {
                            return Err(self.book.reject(format!("gave up after {} start-time shifts", self.shifts)));
                        }
                        self.book.fixes_mut().st += dt;
                        self.infeasible.clear();
                        continue 'shift;
                    }
                }
            }
            break;
        }
        if self.out_of_time() {
            self.book.undo_to(0).await;
            let reason = self.stopped.take().expect("out_of_time sets the reason");
            return Err(self.book.reject(reason));
        }
        Ok(())
    }

    /// True (and the reason recorded) once the planner's clock has passed arrival +
    /// `w_interval`: the time it allows itself to build a plan.
    fn out_of_time(&mut self) -> bool {
        let limit = self.req.submitted_at() + self.cfg.w_interval_s;
        let over = self.book.now() > limit;
        if over {
            self.stopped = Some(format!("planning took longer than w_interval ({} s)", self.cfg.w_interval_s));
        }
        over
    }

    /// One root per connected component of the request graph, each the job with the fewest
    /// candidates in its component (ties: lowest index); components ordered by that count.
    ///
    /// Per-job placement: the first job of the dependency order only (the search then walks
    /// the order, see [`Self::satisfy_transfers`]).
    fn roots(&self) -> Vec<usize> {
        if let Some(&first) = self.order.first() {
            return vec![first];
        }
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

    /// Reservation candidates of job `v` starting no earlier than `windows[i]` at its `i`-th
    /// candidate site, one per candidate site that can fit it before the deadline, ordered by
    /// the selection policy.
    async fn reservation_candidates(&mut self, v: usize, windows: &[Time]) -> Vec<(Time, ComputeOffer)> {
        let answers = self.book.offers(v, &self.candidates, windows).await;
        self.rank(v, answers)
    }

    /// The earliest start of job `v` at `site` ([`super::fixes::Fixes::window`]).
    fn window(&self, v: usize, site: &SiteId) -> Time {
        self.book.fixes().window(self.req, v, site)
    }

    /// `search(rm, st)` of Ando & Aida, Fig. 3. Under [`Backtrack::ConflictDirected`] a
    /// NOTFOUND leaves its explanation in `self.failure`, and a candidate whose failure is
    /// explained without `v` ends the loop (see [`Backtrack`] and docs/algorithm.md).
    ///
    /// A floating job whose candidates all failed because a staged transfer into it found room
    /// on the network only after its start ([`Self::slide_later`]) is tried again from then,
    /// up to [`LATER_RETRIES`] times.
    fn search(&mut self, v: usize) -> GrowStack<'_, Step> {
        GrowStack(Box::pin(async move {
            let mut not_before = Time::MIN;
            for _ in 0..LATER_RETRIES {
                let step = self.search_at(v, not_before).await;
                match (step, self.consumer_later.take()) {
                    (Step::NotFound, Some(t)) if self.req.floats(v) && t > not_before && self.stopped.is_none() => {
                        not_before = t;
                    }
                    (step, _) => return step,
                }
            }
            self.search_at(v, not_before).await
        }))
    }

    /// One pass of [`Self::search`] over `v`'s candidates, none starting before `not_before`.
    /// When they all fail, [`Self::consumer_later`] holds the earliest time a staged transfer
    /// into `v` found room after its candidate's start, if one did.
    async fn search_at(&mut self, v: usize, not_before: Time) -> Step {
        let span = self.req.job_span(v);
        let floats = self.req.floats(v);
        let mut later: Option<Time> = None;
        let windows: Vec<Time> = self.candidates[v].iter().map(|s| self.window(v, s).max(not_before)).collect();
        // A floating job takes any offer: it is placed where it starts, without a delay.
        let t_bgn = if floats {
            windows.iter().copied().min().unwrap_or(Time::MAX)
        } else {
            self.book.fixes().st + span.offset_s
        };
        let backjump = self.cfg.backtrack == Backtrack::ConflictDirected;
        let offers = self.reservation_candidates(v, &windows).await;
        if offers.is_empty() {
            self.blame = Some(self.no_site_for(v, t_bgn));
        }
        // Why every candidate failed, should they all fail: starting with the plan's own
        // fixes at the sites that did not offer a slot at all, and, for a floating job, the
        // jobs it is after (they set its window).
        let mut why = if backjump { self.absent_sites_conflict(v, t_bgn, &offers) } else { IndexSet::default() };
        if backjump && floats {
            for &p in self.req.after(v) {
                why.insert(p);
            }
        }
        for (i, (start, offer)) in offers.iter().enumerate() {
            let dt = if floats { 0 } else { start - t_bgn };
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
            if self.fixes > self.cfg.max_fixes {
                self.stopped = Some(format!("search budget of {} tentative fixes exhausted", self.cfg.max_fixes));
                return Step::NotFound;
            }
            if self.out_of_time() {
                return Step::NotFound;
            }
            let mark = self.book.fixes().trail.len();
            // `check_before_hold`: the network checks of `v`'s transfers to fixed jobs, asked
            // with `v` placed at this site but not held yet (they do not depend on its hold).
            let checked = if self.check_before_hold() { Some(self.check_transfers_at(v, offer).await) } else { None };
            let step = match checked {
                Some(Err(failure)) => {
                    self.failure = failure;
                    Step::NotFound
                }
                checked => {
                    // `v` and its checked transfers held together (one round in the planner's
                    // book, `hold_with_transfers`), or `v` alone (its transfers one by one after).
                    let routes = checked.and_then(Result::ok);
                    let held = match &routes {
                        Some(r) if !r.is_empty() && self.cfg.hold_with_transfers => {
                            self.book.fix_job_with(v, offer, *start, r.clone()).await
                        }
                        _ => self.book.fix_job(v, offer, *start).await.then(Vec::new),
                    };
                    let Some(held) = held else {
                        self.blame = Some(format!(
                            "job `{}`: site `{}` refused its hold (taken meanwhile)",
                            self.req.jobs()[v].name,
                            offer.site
                        ));
                        if backjump {
                            why.union(&self.own_jobs_at(&offer.site, *start, start + span.duration_s));
                        }
                        continue;
                    };
                    self.satisfy_transfers(v, routes, &held).await
                }
            };
            if let Some(t) = self.consumer_later.take() {
                later = Some(later.map_or(t, |l| l.min(t)));
            }
            match step {
                Step::Success => return Step::Success,
                Step::Delay(dt) => return Step::Delay(dt),
                Step::NotFound if !backjump => self.book.undo_to(mark).await,
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
                    self.book.undo_to(mark).await;
                    if self.stopped.is_some() {
                        return Step::NotFound;
                    }
                    if !involves_v {
                        // The failure holds whatever `v` is: every other on-time candidate
                        // would fail the same way, so do what the loop would do after them.
                        self.jumps += 1;
                        if let Some((later, _)) = offers[i + 1..].iter().find(|(t, _)| !floats && *t > t_bgn) {
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
        self.consumer_later = later;
        Step::NotFound
    }

    /// The network demands of freshly fixed job `v`: those whose other end is fixed first (in
    /// random order), then those whose other end is free (fewest candidates first). Under
    /// [`Backtrack::ConflictDirected`] (BIR and BBR) every check against a fixed end is asked
    /// before any of them is held, so that a check that fails is explained by fixes made
    /// before `v` only, not by `v`'s own holds.
    ///
    /// `checked`: the routes of the transfers to fixed jobs, already checked (in the order
    /// [`Self::fixed_transfers`] drew) by [`Self::check_transfers_at`]; `held`: whether the
    /// first of them were held with `v` ([`TentativeBook::fix_job_with`]).
    async fn satisfy_transfers(&mut self, v: usize, checked: Option<Vec<(usize, Route)>>, held: &[bool]) -> Step {
        let fixed = match &checked {
            Some(routes) => routes.iter().map(|(e, _)| *e).collect(),
            None => self.fixed_transfers(v),
        };
        let backjump = self.cfg.backtrack == Backtrack::ConflictDirected;
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
            for (i, (e, route)) in routes.into_iter().enumerate() {
                let ok = match held.get(i) {
                    Some(&ok) => ok,
                    None => self.book.hold_transfer(e, route).await,
                };
                if ok {
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
        if !self.order.is_empty() {
            // Per-job placement: the jobs before `v` in the order are fixed, and `v`'s transfers
            // to them with it; the next job of the order follows (its own transfers are fixed
            // with it).
            return match self.order.get(self.position[v] + 1) {
                Some(&u) => self.search(u).await,
                None => Step::Success,
            };
        }
        let mut free = self.unfixed_transfers(v, false);
        free.sort_by_key(|&e| (self.candidates[self.other_end(e, v)].len(), e));
        for e in free {
            if self.book.fixes().transfers[e].is_some() {
                continue; // fixed meanwhile by a deeper search
            }
            let u = self.other_end(e, v);
            // The other end may have been fixed meanwhile too (by a deeper search, through
            // another path): then it is a check like the ones above.
            let step =
                if self.book.fixes().jobs[u].is_some() { self.fix_transfer(e).await } else { self.search(u).await };
            if step != Step::Success {
                return step;
            }
        }
        Step::Success
    }

    /// Trail position of every fixed job (`usize::MAX` for a free one).
    fn fix_positions(&self) -> Vec<usize> {
        let mut at = vec![usize::MAX; self.req.jobs().len()];
        for (i, f) in self.book.fixes().trail.iter().enumerate() {
            if let Fix::Job(w) = f {
                at[*w] = i;
            }
        }
        at
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
        let mut fixed = self.unfixed_transfers(v, true);
        fixed.shuffle(&mut self.rng);
        fixed
    }

    /// The transfers of job `v` not fixed yet whose other end is fixed (`other_end_fixed`) or
    /// free, in the order of `v`'s incident transfers.
    fn unfixed_transfers(&self, v: usize, other_end_fixed: bool) -> Vec<usize> {
        let fixes = self.book.fixes();
        let unfixed =
            |&e: &usize| fixes.transfers[e].is_none() && fixes.jobs[self.other_end(e, v)].is_some() == other_end_fixed;
        self.incident[v].iter().copied().filter(unfixed).collect()
    }

    /// Asks the NIS about each of `transfers` (both ends fixed) in order; the first refusal's
    /// explanation ends it.
    ///
    /// With [`super::PlannerConfig::batch_queries`] the questions it would ask are sent to
    /// the NIS in one message first ([`crate::protocol::Participant::query_all`]). A check
    /// books nothing, so the answers are the ones the questions asked one by one would get
    /// (the same plan); only those after the first refusal go unused.
    async fn check_transfers(&mut self, transfers: &[usize]) -> Result<Vec<(usize, Route)>, IndexSet> {
        if self.cfg.batch_queries && transfers.len() > 1 {
            let asked: Vec<NetworkQuery> = transfers.iter().filter_map(|&e| self.nis_question(e).ok()).collect();
            if asked.len() > 1 {
                self.book.prefetch(asked).await;
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
        self.book.forget_prefetched();
        checked.map(|()| routes)
    }

    /// Whether the search checks a candidate's transfers to fixed jobs before it holds the
    /// candidate ([`super::PlannerConfig::check_before_hold`]; BIR with backjumping only).
    fn check_before_hold(&self) -> bool {
        self.cfg.check_before_hold
            && self.cfg.backtrack == Backtrack::ConflictDirected
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
        let start = offer.earliest_start.expect("a candidate has a start");
        self.book.fixes_mut().jobs[v] = Some(JobFix::on(offer, start));
        // Slides are the checks' own: from the producer's end again at each candidate.
        for &e in &transfers {
            self.book.fixes_mut().slide_s[e] = 0;
        }
        let checked = self.check_transfers(&transfers).await;
        self.book.fixes_mut().jobs[v] = None;
        if checked.is_err() {
            for &e in &transfers {
                self.book.fixes_mut().slide_s[e] = 0;
            }
        }
        checked
    }

    /// Checks and fixes transfer `e` between two fixed jobs (NOTFOUND when the network cannot
    /// carry it); under BIR this holds the bandwidth on the path.
    async fn fix_transfer(&mut self, e: usize) -> Step {
        let backjump = self.cfg.backtrack == Backtrack::ConflictDirected;
        self.book.fixes_mut().slide_s[e] = 0;
        match self.transfer_route(e).await {
            Ok(route) => {
                let links = if backjump { route.links.clone() } else { Vec::new() };
                if self.book.hold_transfer(e, route).await {
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
        let backjump = self.cfg.backtrack == Backtrack::ConflictDirected;
        let own_over = self.own_transfers_over(start, end);
        let answer = self.book.route(&q).await;
        match answer {
            Ok(Some(r)) => Ok(r),
            Ok(None) => {
                if let Some(r) = self.slide_later(e, &q).await {
                    return Ok(r);
                }
                self.blame = Some(self.no_path_for(e, &q));
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
                        self.probes += 1;
                        if let Ok(None) = self.book.ask_nis(&probe).await {
                            cause = IndexSet::default();
                        }
                    }
                }
                let why = self.ends_of(e, &cause);
                // A floating transfer's "no" also depends on how late its consumer starts (the
                // room to slide): not one to remember for other placements.
                if !self.req.transfer_floats(e) {
                    self.infeasible.insert(q, cause);
                }
                Err(why)
            }
            Err(err) => {
                tracing::warn!(error = %err, "NIS query failed");
                Err(self.ends_of(e, &own_over))
            }
        }
    }
    /// A floating transfer ([`PlanRequest::transfer_floats`]: staged, placed per job) that the
    /// network cannot carry right at its producer's end (`anchored`, the question refused) may
    /// start later, as long as it ends by its consumer's start (the consumer must be placed):
    /// the fan-in of a workflow ends many transfers at one consumer, whose access link carries
    /// them one after the other. Tries at most [`SLIDE_PROBES`] later starts, spread evenly
    /// over that room and at least the transfer's length apart, earliest first, all in one
    /// NIS message where the NIS takes them so ([`TentativeBook::first_route`]). The route,
    /// with the slide kept in [`super::fixes::Fixes::slide_s`], or `None` (slide back to 0).
    /// When there is no room before the consumer's start, it looks beyond it, as many times
    /// again in doubling steps: the end of the first start that fits there is left in
    /// [`Self::consumer_later`], for the search to try the consumer again from that time.
    async fn slide_later(&mut self, e: usize, anchored: &NetworkQuery) -> Option<Route> {
        if !self.req.transfer_floats(e) {
            return None;
        }
        let consumer = self.req.transfer_ends(e).1;
        let consumer_start = self.book.fixes().jobs[consumer].as_ref()?.start;
        let length = anchored.end - anchored.start;
        if length <= 0 {
            return None;
        }
        let mut step = ((consumer_start - anchored.end) / SLIDE_PROBES).max(length);
        let mut slide = self.book.fixes().slide_s[e];
        // The end with no slide: the producer's end plus the transfer's length.
        let unslid_end = anchored.end - slide;
        // The later starts to try, earliest first (the questions depend on the slide only).
        let (mut slides, mut questions): (Vec<i64>, Vec<NetworkQuery>) = (Vec::new(), Vec::new());
        for _ in 0..2 * SLIDE_PROBES {
            if unslid_end + slide > consumer_start {
                // Past the consumer's start: how late, in doubling steps (a busy link may stay
                // busy for hours).
                step *= 2;
            }
            slide += step;
            self.book.fixes_mut().slide_s[e] = slide;
            if let Ok(q) = self.nis_question(e) {
                slides.push(slide);
                questions.push(q);
            }
        }
        // All in one message where the NIS takes them so (the first with a path); else one
        // question after the other, stopping at the first with a path.
        let first = match self.book.first_route(&questions).await {
            Some(first) => first,
            None => {
                let mut first = None;
                for (i, q) in questions.iter().enumerate() {
                    if let Ok(Some(r)) = self.book.route(q).await {
                        first = Some((i, r));
                        break;
                    }
                }
                first
            }
        };
        let found = first.map(|(i, r)| (slides[i], questions[i].end, r));
        match found {
            Some((slide, end, r)) if end <= consumer_start => {
                self.book.fixes_mut().slide_s[e] = slide;
                return Some(r);
            }
            Some((_, end, _)) => self.consumer_later = Some(self.consumer_later.map_or(end, |t| t.min(end))),
            None => {}
        }
        self.book.fixes_mut().slide_s[e] = 0;
        None
    }
}
