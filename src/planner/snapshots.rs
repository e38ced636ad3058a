//! Plans from snapshots (issue 53; [`super::PlannerConfig::plan_from_snapshots`],
//! docs/algorithm.md "Plans from snapshots"): one round asks every candidate LIS and the NIS,
//! all at once, for its calendars over the request's window
//! ([`crate::protocol::Participant::snapshot`]); the search then runs, unchanged, against
//! local replicas built from them ([`crate::lis::Lis::replica`], [`crate::nis::Nis::replica`]:
//! the participants' own query code over the same calendars), holding and aborting its
//! tentative holds there, without a message; and the chosen holds go out in one round, several
//! per participant in one message ([`crate::protocol::Participant::prepare_all`]). The
//! participants check every one of them again under their lock: a snapshot is advice. When
//! one is refused (another planner took the capacity since the snapshot), what was granted is
//! aborted (one round) and the planner searches again from fresh snapshots, at most
//! [`SNAPSHOT_REPLANS`] times, then as before.
//!
//! A query the snapshot cannot answer (its interval reaches outside the window: a staged
//! transfer slid past the deadline, a window before the first start) goes to the real
//! participant, counted as a message and a round of its own, so the answers are always the
//! participants'.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::future::join_all;

use super::book::Book;
use super::coordinator::HeldPart;
use super::search::Attempt;
use super::sent::Sent;
use super::{Again, PlanOptions, PlanResult, Planner, Services, Settlement};
use crate::lis::Lis;
use crate::model::{ComputeDemand, PlanRequest, PlanStatus, ReservationMethod, SelectionPolicy, SiteId, Time};
use crate::nis::Nis;
use crate::protocol::{
    Candidates, Catalogue, Compute, ComputeHoldRequest, ComputeQuery, Hold, HoldId, HoldLifecycle, Network,
    NetworkHoldRequest, NetworkQuery, Participant, ParticipantError, ParticipantRef, Role, SnapshotWindow,
};

/// How many times a plan whose prepares were refused (the capacity was taken since its
/// snapshots) is searched again from fresh snapshots before it is planned as before, asking
/// the participants as it searches.
pub const SNAPSHOT_REPLANS: u32 = 2;

/// The lease of a replica's holds (seconds): they live only as long as the search, which
/// `w_interval` bounds; a replica never expires one under it.
const REPLICA_LEASE_S: i64 = 100 * 365 * 24 * 3600;

/// The interval of the calendar a query reads: whether a snapshot can answer it.
pub(super) trait Reads {
    /// `[start, end)` of the calendar the answer depends on.
    fn reads(&self) -> (Time, Time);
}

impl Reads for ComputeQuery {
    /// The free-slot search reads `[window_start, deadline)`.
    fn reads(&self) -> (Time, Time) {
        (self.window_start, self.deadline)
    }
}

impl Reads for NetworkQuery {
    fn reads(&self) -> (Time, Time) {
        (self.start, self.end)
    }
}

/// A participant as the search sees it when it plans from snapshots: its queries answered by
/// `local` (a replica over `window`), or by `remote` when they read outside the window
/// (counted in `missed`); its holds and aborts `local`'s (the search's tentative holds, which
/// nobody else sees).
struct Replica<R: Role> {
    local: Arc<dyn Participant<R>>,
    remote: Arc<dyn Participant<R>>,
    window: SnapshotWindow,
    missed: Arc<Mutex<Sent>>,
}

impl<R: Role> Replica<R>
where
    R::Query: Reads,
{
    fn covers(&self, q: &R::Query) -> bool {
        let (start, end) = q.reads();
        self.window.covers(start, end)
    }
}

#[async_trait]
impl<R: Role> Participant<R> for Replica<R>
where
    R::Query: Reads,
{
    async fn query(&self, q: &R::Query) -> Result<R::Answer, ParticipantError> {
        if self.covers(q) {
            return self.local.query(q).await;
        }
        self.missed.lock().expect("missed lock").one();
        self.remote.query(q).await
    }

    /// The queries the window covers answered locally, the others in one message.
    async fn query_all(&self, qs: &[R::Query]) -> Vec<Result<R::Answer, ParticipantError>> {
        let outside: Vec<usize> = (0..qs.len()).filter(|&i| !self.covers(&qs[i])).collect();
        if outside.is_empty() {
            return self.local.query_all(qs).await;
        }
        self.missed.lock().expect("missed lock").one();
        let asked: Vec<R::Query> = outside.iter().map(|&i| qs[i].clone()).collect();
        let mut remote = self.remote.query_all(&asked).await.into_iter();
        let mut answers = Vec::with_capacity(qs.len());
        for q in qs {
            answers.push(match self.covers(q) {
                true => self.local.query(q).await,
                false => remote.next().expect("one answer per query"),
            });
        }
        answers
    }

    async fn prepare(&self, req: &R::Prepare) -> Result<Hold, ParticipantError> {
        self.local.prepare(req).await
    }

    async fn ceilings(&self, qs: &[R::Query]) -> Option<Vec<u64>> {
        self.local.ceilings(qs).await
    }

    /// The queries up to the first the window does not cover answered by `local`; if none of
    /// them is granted, the rest by `remote` in one message (counted in `missed`). Not said
    /// when either does not say (the search then asks them one by one).
    async fn first_granted(&self, qs: &[R::Query]) -> Option<Option<(usize, R::Answer)>> {
        let covered = qs.iter().position(|q| !self.covers(q)).unwrap_or(qs.len());
        if let Some(first) = self.local.first_granted(&qs[..covered]).await? {
            return Some(Some(first));
        }
        if covered == qs.len() {
            return Some(None);
        }
        let rest = self.remote.first_granted(&qs[covered..]).await?;
        self.missed.lock().expect("missed lock").one();
        Some(rest.map(|(i, answer)| (covered + i, answer)))
    }
}

#[async_trait]
impl<R: Role> HoldLifecycle for Replica<R> {
    async fn commit(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.local.commit(hold).await
    }
    async fn abort(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.local.abort(hold).await
    }
    async fn abort_all(&self, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
        self.local.abort_all(holds).await
    }
    async fn release(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.local.release(hold).await
    }
    async fn extend(&self, hold: HoldId, lease_s: i64) -> Result<Hold, ParticipantError> {
        self.local.extend(hold, lease_s).await
    }
    async fn persist(&self, holds: &[HoldId]) -> Result<(), ParticipantError> {
        self.local.persist(holds).await
    }
    async fn commit_all(&self, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
        self.local.commit_all(holds).await
    }
}

/// The catalogue's answer for the request, asked once before the snapshots.
struct Listed(Vec<Candidates>);

#[async_trait]
impl Catalogue for Listed {
    async fn candidates(&self, _: &ComputeDemand) -> Result<Candidates, ParticipantError> {
        Err(ParticipantError::Invalid("a listed catalogue answers for the whole request only".into()))
    }

    async fn candidates_all(&self, demands: &[ComputeDemand]) -> Result<Vec<Candidates>, ParticipantError> {
        if demands.len() != self.0.len() {
            return Err(ParticipantError::Invalid("a listed catalogue answers for its request only".into()));
        }
        Ok(self.0.clone())
    }
}

/// The prepares of one participant in the plan's batch, each with its part (job or transfer
/// index).
struct Batch<P: Role> {
    participant: Arc<dyn Participant<P>>,
    parts: Vec<(usize, <P as Role>::Prepare)>,
}

impl<P: Role> Batch<P> {
    /// Sends every prepare in one message: the answers, by part.
    async fn send(self) -> (Arc<dyn Participant<P>>, Vec<(usize, P::Prepare, Result<Hold, ParticipantError>)>) {
        let reqs: Vec<P::Prepare> = self.parts.iter().map(|(_, r)| r.clone()).collect();
        let answers = self.participant.prepare_all(&reqs).await;
        let out = self.parts.into_iter().zip(answers).map(|((i, r), a)| (i, r, a)).collect();
        (self.participant, out)
    }
}

/// What [`Planner::attempt_from_snapshots`] asks of one attempt.
pub(super) struct SnapshotAttempt<'o> {
    pub(super) policy: SelectionPolicy,
    pub(super) method: ReservationMethod,
    pub(super) seed: u64,
    pub(super) started: tokio::time::Instant,
    pub(super) excluded: Vec<SiteId>,
    pub(super) opts: PlanOptions<'o>,
}

impl Planner {
    /// One planning attempt from snapshots (see the module docs): the GIS, one round of
    /// snapshots, the search on replicas, one round of prepares, then the coordinator as for
    /// any plan. `Err` with the messages it sent when some participant gives no snapshot (or
    /// the GIS did not answer): the caller plans as before.
    pub(super) async fn attempt_from_snapshots(
        &self,
        req: &PlanRequest,
        a: SnapshotAttempt<'_>,
    ) -> Result<(PlanResult, Again), Sent> {
        let mut sent = Sent::default();
        let w = self.cfg.w_interval_s;
        let from = req.not_before().map_or(req.submitted_at() + w, |nb| nb.max(req.submitted_at() + w));
        if from + req.span_s() > req.deadline() {
            return Err(sent); // rejected at once, without a message
        }
        let window = SnapshotWindow { from, to: req.deadline() };
        sent.round();
        let Ok(candidates) = self.services.gis.candidates_all(req.jobs()).await else { return Err(sent) };
        let missed = Arc::new(Mutex::new(Sent::default()));
        // A job with no site left, or jobs that run together needing more CPUs than their sites
        // have (the static check), are rejected before any question: nothing to snapshot.
        let no_site_left = candidates.iter().any(|c| c.sites.iter().all(|s| a.excluded.contains(s)));
        let ever: Vec<Vec<(SiteId, u32)>> = candidates
            .iter()
            .filter(|c| c.cpus.len() == c.sites.len())
            .map(|c| c.sites.iter().cloned().zip(c.cpus.iter().copied()).collect())
            .collect();
        let never = self.cfg.static_check
            && ever.len() == req.jobs().len()
            && super::search::never::peak_demand(req, &ever).is_some();
        let (replicas, nis) = if no_site_left || never {
            (HashMap::new(), self.services.nis.clone())
        } else {
            match self.replicas(&candidates, &a.excluded, window, &missed, &mut sent).await {
                Some(r) => r,
                None => return Err(sent),
            }
        };
        let services =
            Services { gis: Arc::new(Listed(candidates)), lis: replicas, nis, clock: self.services.clock.clone() };
        let local = Planner::new(self.cfg.clone(), services);
        let mut book = Book::new(&local, req, a.policy, a.method, a.started);
        book.user = a.opts.user.map(str::to_owned);
        book.excluded = a.excluded;
        let mut search = Attempt::new(&self.cfg, req, a.policy, a.method, a.seed, book);
        let found = search.search_plan().await;
        sent.then(*missed.lock().expect("missed lock"));
        let unsatisfiable = search.unsatisfiable;
        let mut book = search.book;
        // The search's messages went to the replicas: what the plan cost is `sent`.
        book.sent = sent;
        book.holds_aborted = 0;
        match found {
            Err(mut outcome) => {
                sent.write_to(&mut outcome);
                outcome.holds_aborted = 0;
                let settlement = if unsatisfiable { Settlement::Unsatisfiable } else { Settlement::Final };
                Ok((PlanResult { outcome, bookings: vec![], settlement }, Again::No))
            }
            Ok(()) if a.opts.dry_run => {
                let mut outcome = book.outcome();
                outcome.status = PlanStatus::Planned;
                Ok((PlanResult { outcome, bookings: vec![], settlement: Settlement::Final }, Again::No))
            }
            Ok(()) => Ok(self.prepare_from_snapshots(book, req, a.opts).await),
        }
    }

    /// Replicas of the LIS of every candidate site (but `excluded`) and of the NIS, from
    /// snapshots over `window` asked all at once (one round, counted in `sent`); their misses
    /// counted in `missed`. `None` when one gives no snapshot.
    async fn replicas(
        &self,
        candidates: &[Candidates],
        excluded: &[SiteId],
        window: SnapshotWindow,
        missed: &Arc<Mutex<Sent>>,
        sent: &mut Sent,
    ) -> Option<(HashMap<SiteId, Arc<dyn Participant<Compute>>>, Arc<dyn Participant<Network>>)> {
        let mut sites: Vec<SiteId> =
            candidates.iter().flat_map(|c| c.sites.iter()).filter(|s| !excluded.contains(s)).cloned().collect();
        sites.sort();
        sites.dedup();
        let lis = sites.iter().map(|s| self.services.lis.get(s).cloned()).collect::<Option<Vec<_>>>()?;
        sent.together(lis.len() as u64 + 1);
        let (lis_snapshots, nis_snapshot) =
            futures::join!(join_all(lis.iter().map(|p| p.snapshot(&window))), self.services.nis.snapshot(&window));
        let clock = &self.services.clock;
        let mut replicas: HashMap<SiteId, Arc<dyn Participant<Compute>>> = HashMap::new();
        for ((site, remote), snapshot) in sites.into_iter().zip(lis).zip(lis_snapshots) {
            let local = Lis::replica(&snapshot.ok()??, clock.clone(), REPLICA_LEASE_S).ok()?;
            let replica = Replica { local: Arc::new(local), remote, window, missed: missed.clone() };
            replicas.insert(site, Arc::new(replica));
        }
        let nis = Nis::replica(&nis_snapshot.ok()??, clock.clone(), REPLICA_LEASE_S).ok()?;
        let nis = Replica { local: Arc::new(nis), remote: self.services.nis.clone(), window, missed: missed.clone() };
        Some((replicas, Arc::new(nis)))
    }

    /// The holds of `book`'s complete plan (fixed on replicas), prepared in one round: one
    /// [`Participant::prepare_all`] per participant, all at once. Granted, the parts go to the
    /// coordinator; a refusal gives back what was granted (one round) and asks for another
    /// attempt ([`Again::Snapshot`]).
    async fn prepare_from_snapshots(
        &self,
        mut book: Book<'_>,
        req: &PlanRequest,
        opts: PlanOptions<'_>,
    ) -> (PlanResult, Again) {
        let mut sites: BTreeMap<SiteId, Batch<Compute>> = BTreeMap::new();
        for v in 0..book.fixes.jobs.len() {
            let f = book.fixes.jobs[v].clone().expect("complete plan");
            let r: ComputeHoldRequest = book.job_hold(v, &f);
            let Some(p) = self.services.lis.get(&f.site) else {
                return (book.rejected(ParticipantError::UnknownSite(f.site).to_string()), Again::No);
            };
            sites
                .entry(f.site.clone())
                .or_insert_with(|| Batch { participant: p.clone(), parts: vec![] })
                .parts
                .push((v, r));
        }
        let mut network = Batch::<Network> { participant: self.services.nis.clone(), parts: vec![] };
        for e in 0..book.fixes.transfers.len() {
            let f = book.fixes.transfers[e].clone().expect("complete plan");
            if !f.route.links.is_empty() {
                let r: NetworkHoldRequest = book.transfer_hold(e, &f.route.links);
                network.parts.push((e, r));
            }
        }
        let has_network = !network.parts.is_empty();
        book.sent.together(sites.len() as u64 + u64::from(has_network));
        let site_refs: Vec<SiteId> = sites.keys().cloned().collect();
        let network_call = async {
            if has_network {
                Some(network.send().await)
            } else {
                None
            }
        };
        let (site_answers, network_answers) =
            futures::join!(join_all(sites.into_values().map(Batch::send)), network_call);
        // Jobs first, in order, then transfers, in order: the parts as the coordinator keeps them.
        let mut jobs: Vec<Option<HeldPart>> = (0..book.fixes.jobs.len()).map(|_| None).collect();
        let mut transfers: Vec<Option<HeldPart>> = (0..book.fixes.transfers.len()).map(|_| None).collect();
        let mut refused: Option<String> = None;
        let mut granted: Vec<(Arc<dyn HoldLifecycle>, Vec<HoldId>)> = Vec::new();
        for (site, (p, answers)) in site_refs.into_iter().zip(site_answers) {
            let mut held = Vec::new();
            for (v, r, answer) in answers {
                match answer {
                    Ok(h) => {
                        held.push(h.id);
                        let part = HeldPart::new(
                            p.clone() as Arc<dyn HoldLifecycle>,
                            ParticipantRef::Site(site.clone()),
                            h.id,
                            r.into(),
                        );
                        jobs[v] = Some(part);
                    }
                    Err(e) => {
                        let job = &req.jobs()[v].name;
                        refused.get_or_insert(format!("job `{job}` at site `{site}`: {e}"));
                    }
                }
            }
            granted.push((p as Arc<dyn HoldLifecycle>, held));
        }
        if let Some((p, answers)) = network_answers {
            let mut held = Vec::new();
            for (e, r, answer) in answers {
                match answer {
                    Ok(h) => {
                        held.push(h.id);
                        transfers[e] = Some(HeldPart::new(
                            p.clone() as Arc<dyn HoldLifecycle>,
                            ParticipantRef::Network,
                            h.id,
                            r.into(),
                        ));
                    }
                    Err(err) => {
                        let t = &req.transfers()[e];
                        refused.get_or_insert(format!("transfer `{}` -> `{}`: {err}", t.from, t.to));
                    }
                }
            }
            granted.push((p as Arc<dyn HoldLifecycle>, held));
        }
        if let Some(why) = refused {
            granted.retain(|(_, holds)| !holds.is_empty());
            book.sent.together(granted.len() as u64);
            book.holds_aborted += granted.iter().map(|(_, h)| h.len() as u64).sum::<u64>();
            let aborts = granted.iter().map(|(p, holds)| p.abort_all(holds));
            for ((_, holds), answers) in granted.iter().zip(join_all(aborts).await) {
                for (hold, answer) in holds.iter().zip(answers) {
                    if let Err(e) = answer {
                        tracing::warn!(error = %e, %hold, "abort of a hold prepared from a snapshot failed; its lease ends it");
                    }
                }
            }
            let reason = format!("a prepare was refused since the snapshots (taken meanwhile): {why}");
            return (book.rejected(reason), Again::Snapshot);
        }
        for (v, part) in jobs.iter().enumerate() {
            if let (Some(f), Some(p)) = (book.fixes.jobs[v].as_mut(), part) {
                f.hold = Some(p.part.hold);
            }
        }
        for (e, part) in transfers.iter().enumerate() {
            if let (Some(f), Some(p)) = (book.fixes.transfers[e].as_mut(), part) {
                f.hold = Some(p.part.hold);
            }
        }
        let parts: Vec<HeldPart> = jobs.into_iter().chain(transfers).flatten().collect();
        let coordinator = book.into_coordinator(parts);
        Self::book_parts(coordinator, req, opts).await
    }
}
