//! The application state shared by every worker: participants, planners, store, holds.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::auth::Caller;
use super::config::{Role, ServeConfig};
use super::fair::{FairQueue, Priority};
use super::metrics::Metrics;
use super::problem::ApiError;
use crate::clock::{Clock, SystemClock};
use crate::fairshare::{FairShareConfig, Ledger};
use crate::in_process::InProcessGrid;
use crate::lis::Lis;
use crate::model::{from_time, to_time, Grid, SiteId, Time};
use crate::planner::{ParticipantRef, Planner, PlannerConfig, Recovery, Services};
use crate::protocol::http::{ClientTls, HttpCatalogue, HttpParticipant};
use crate::protocol::{
    Backlog, CallObserver, Compute, HoldId, HoldLifecycle, HoldRequest, Journal, Journaled, Network, Participant,
    ParticipantKind, Tentative, Timed, Yielding,
};
use crate::store::{Claim, Store, StoreError, TokenRecord};

/// Everything a handler may need (behind `web::Data`, i.e. an `Arc`).
pub struct AppState {
    /// The settings of `serve`.
    pub config: ServeConfig,
    /// The topology as loaded (nodes and links do not change at run time).
    pub grid: Grid,
    /// GIS, every LIS, the NIS (a LIS process: its site only; a planner process: none used).
    pub participants: InProcessGrid,
    /// The planners requests are lent to.
    pub planners: PlannerPool,
    /// A planner process's forwarding of the other roles' reads ([`super::gateway`]); `None`
    /// in any other role.
    pub gateway: Option<super::gateway::Gateway>,
    /// Journal entries not written yet because the store failed (see [`Backlog`]).
    pub backlog: Backlog,
    /// Holds granted to remote planners and not journaled yet (see [`Tentative`]).
    pub tentative: Tentative,
    /// Fair admission to the planners: a limit per user, slots shared between users, by
    /// fair-share priority.
    pub fair: FairQueue,
    /// Planned-Use fair share: the projects' allocations and committed usage (loaded from the
    /// store at start; see [`crate::fairshare`]).
    pub ledger: Arc<Ledger>,
    /// The service's persistent state (memory or PostgreSQL).
    pub store: Arc<dyn Store>,
    /// Holds made through the API (`POST /v1/sites/{id}/holds`, `POST /v1/network/holds`):
    /// hold id -> the participant that keeps it, for commit / abort / extend.
    pub holds: Mutex<HashMap<HoldId, ParticipantRef>>,
    /// Counters and histograms behind `/metrics` (also the planners' [`Timed`] participants'
    /// observer).
    pub metrics: Arc<Metrics>,
    /// Tokens found in the store, by hash, with when they were read (see [`AppState::token`]).
    tokens: Mutex<HashMap<String, (TokenRecord, std::time::Instant)>>,
    /// Bumped by every [`AppState::invalidate_tokens`]: a lookup that started before it does
    /// not cache what it read.
    token_generation: AtomicU64,
    /// Set once the store's token changes are watched ([`Store::token_changes`]): true while
    /// the watch sees every change.
    tokens_watched: OnceLock<Arc<AtomicBool>>,
    /// This process's name in claims (see [`ServeConfig::instance`]).
    pub instance: String,
    /// The claims this process works on right now, renewed by [`AppState::renew_claims`].
    claims: Arc<Mutex<HashSet<Uuid>>>,
}

/// A claim this process works on: renewed while this lives ([`AppState::renew_claims`]).
/// Dropped (the request ended, even by a panic), the claim is no longer renewed and lapses
/// after its lease unless it was settled first.
pub struct ClaimGuard {
    registry: Arc<Mutex<HashSet<Uuid>>>,
    /// The claim.
    pub claim: Claim,
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        self.registry.lock().expect("claim registry").remove(&self.claim.id);
    }
}

/// Days of charges the fair-share ledger caches ([`AppState::refresh_charges`]): the usage
/// index forgets 90 % in 15 days, so older usage no longer moves a priority.
pub const CHARGE_CACHE_DAYS: i64 = 90;

/// How long a token read from the store is trusted without asking the store again.
pub const TOKEN_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(60);

impl AppState {
    /// Participants over `grid` on the wall clock, `config.planners` planners, `store`.
    ///
    /// By role: a LIS process keeps only its site's LIS (the grid is cut down to that site);
    /// a planner process's planners talk to the remote participants of
    /// [`Role::Planner`] over HTTP ([`crate::protocol::http`]) and its local participants
    /// are unused.
    ///
    /// # Errors
    /// A planner process's TLS files (`tls_ca`, `tls_client`) cannot be read or parsed.
    pub fn new(config: ServeConfig, grid: Grid, store: Arc<dyn Store>) -> anyhow::Result<Self> {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let grid = match &config.role {
            Role::Lis { site } => grid.retain_sites(|s| s.id == *site),
            _ => grid,
        };
        let mut participants = InProcessGrid::new(&grid, clock.clone(), config.lease_s, config.routing);
        // Sites whose LIS fronts Slurm (the others stay calendars).
        for (site, slurm) in &config.slurm {
            let Some(s) = grid.sites().iter().find(|s| s.id == site.as_str()) else {
                anyhow::bail!("--slurm names site `{site}`, which is not in the grid");
            };
            let lis = Lis::new(s.clone(), clock.clone(), config.lease_s)
                .with_slurm(crate::lis::slurm::Slurm::new(slurm.clone()));
            participants.lis.insert(s.id.clone(), Arc::new(lis));
        }
        // The NIS programs a data plane.
        if let Some(dp) = &config.dataplane {
            let plane = crate::nis::dataplane::TcPlane::open(dp.clone())?;
            participants.nis = Arc::new(
                crate::nis::Nis::new(&grid, clock.clone(), config.lease_s, config.routing).with_dataplane(plane),
            );
        }
        let mut gateway = None;
        let services = match &config.role {
            Role::Planner(remote) => {
                let token = config.participant_credential().map(str::to_owned);
                let client = participant_client(&config)?;
                gateway = Some(super::gateway::Gateway::new(client.clone(), remote.clone()));
                Services {
                    gis: Arc::new(HttpCatalogue::new(&remote.gis, token.clone()).with_client(client.clone())),
                    lis: remote
                        .lis
                        .iter()
                        .map(|(site, url)| {
                            (
                                SiteId::from(site),
                                Arc::new(HttpParticipant::site(url, site, token.clone()).with_client(client.clone()))
                                    as Arc<dyn Participant<Compute>>,
                            )
                        })
                        .collect(),
                    nis: Arc::new(HttpParticipant::network(&remote.nis, token).with_client(client)),
                    clock: clock.clone(),
                }
            }
            _ => {
                // In process: a message may yield, so that long searches share their worker
                // thread (see [`Yielding`]).
                let mut s = participants.services();
                for p in s.lis.values_mut() {
                    *p = Arc::new(Yielding(p.clone()));
                }
                s.nis = Arc::new(Yielding(s.nis.clone()));
                s
            }
        };
        // Every planner call to a participant is timed for /metrics (protocol::Timed).
        let metrics = Arc::new(Metrics::default());
        let mut services = services;
        let observer: Arc<dyn CallObserver> = metrics.clone();
        for p in services.lis.values_mut() {
            *p = Arc::new(Timed::new(p.clone(), ParticipantKind::Compute, observer.clone()));
        }
        services.nis = Arc::new(Timed::new(services.nis.clone(), ParticipantKind::Network, observer));
        let planners = PlannerPool::new(&config, services);
        let instance = config.instance.clone().unwrap_or_else(|| {
            let role = match &config.role {
                Role::All => "all".to_owned(),
                Role::Lis { site } => format!("lis:{site}"),
                Role::Nis => "nis".into(),
                Role::Gis => "gis".into(),
                Role::Planner(_) => "planner".into(),
            };
            format!("{role}@{}#{}", config.listen, std::process::id())
        });
        let grid_cpus = grid.sites().iter().map(|s| u64::from(s.cpus)).sum();
        let ledger = Arc::new(Ledger::new(FairShareConfig::default(), grid_cpus));
        let priority = {
            let (ledger, clock) = (ledger.clone(), clock.clone());
            Arc::new(move |user: &str| ledger.priority_of(user, clock.now())) as Priority
        };
        let mut fair = FairQueue::new(config.planning_slots, config.max_in_flight_per_user)
            .with_priority(priority, std::time::Duration::from_millis(config.admission_window_ms));
        if config.role == Role::All {
            // In process, planning is CPU-bound: one user's searches take at most every core,
            // never more than that from the other users (see api::fair). A planner process
            // waits on its participants most of the time and keeps no such cap.
            let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
            fair = fair.with_planning_per_user(cores);
        }
        Ok(AppState {
            backlog: Backlog::default(),
            tentative: Tentative::default(),
            fair,
            ledger,
            instance,
            claims: Arc::new(Mutex::new(HashSet::new())),
            config,
            grid,
            participants,
            planners,
            gateway,
            store,
            holds: Mutex::new(HashMap::new()),
            metrics,
            tokens: Mutex::new(HashMap::new()),
            token_generation: AtomicU64::new(0),
            tokens_watched: OnceLock::new(),
        })
    }

    /// Loads fair share's projects and the committed plans' usage from the store (at start: the
    /// ledger is in memory; a planning process charges its own plans from then on).
    ///
    /// # Errors
    /// The store fails, or holds a project that is no longer valid.
    pub async fn load_fair_share(&self) -> anyhow::Result<usize> {
        for p in self.store.projects().await? {
            self.ledger.set_project(p)?;
        }
        self.refresh_charges().await.map_err(anyhow::Error::from)
    }

    /// Replaces the ledger's usage by the store's live charges of the last
    /// [`CHARGE_CACHE_DAYS`] (every planner's bookings; the recovery loop calls it every few
    /// seconds): the ledger is a cache for the priorities, the limit is the store's. Returns
    /// the charges read.
    ///
    /// # Errors
    /// The store fails.
    pub async fn refresh_charges(&self) -> Result<usize, StoreError> {
        let since = self.now() - CHARGE_CACHE_DAYS * crate::fairshare::DAY_S;
        let charges = self.store.live_charges(since).await?;
        let n = charges.len();
        self.ledger.replace_charges(charges.into_iter().map(|(id, p, u)| (id.to_string(), p, u)));
        Ok(n)
    }

    /// The token with this hash, unless revoked. Found tokens are cached for
    /// [`TOKEN_CACHE_TTL`] (every participant call of a separated deployment is authenticated;
    /// without the cache each costs a database round trip), but only while the store's token
    /// changes are watched ([`AppState::watch_tokens`]): a revocation or role change in any
    /// process drops every process's cache at once ([`AppState::invalidate_tokens`]), and
    /// while the watch is down every lookup asks the store. Unknown hashes are always looked
    /// up. An expired token is returned as is: [`Caller`] refuses it.
    pub async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        let cacheable = match self.tokens_watched.get() {
            Some(w) => w.load(Ordering::SeqCst),
            None => self.store.kind() == "memory", // one process: its own revocations clear it
        };
        if cacheable {
            if let Some((rec, at)) = self.tokens.lock().expect("token cache").get(hash) {
                if at.elapsed() < TOKEN_CACHE_TTL {
                    return Ok(Some(rec.clone()));
                }
            }
        }
        let generation = self.token_generation.load(Ordering::SeqCst);
        let rec = self.store.token(hash).await?;
        if let Some(r) = rec.as_ref().filter(|_| cacheable) {
            let mut cache = self.tokens.lock().expect("token cache");
            // Not if the cache was dropped while the store was asked: what was read may be
            // what the change replaced.
            if self.token_generation.load(Ordering::SeqCst) == generation {
                if cache.len() >= 10_000 {
                    cache.clear();
                }
                cache.insert(hash.to_owned(), (r.clone(), std::time::Instant::now()));
            }
        }
        Ok(rec)
    }

    /// Drops every cached token (a token changed somewhere).
    pub fn invalidate_tokens(&self) {
        let mut cache = self.tokens.lock().expect("token cache");
        self.token_generation.fetch_add(1, Ordering::SeqCst);
        cache.clear();
    }

    /// Watches the store's token changes ([`Store::token_changes`]) for as long as the state
    /// lives: every change drops the cache. Call once, at start.
    ///
    /// # Errors
    /// The store cannot start watching.
    pub async fn watch_tokens(self: &Arc<Self>) -> Result<(), StoreError> {
        let Some(mut watch) = self.store.token_changes().await? else { return Ok(()) };
        let _ = self.tokens_watched.set(watch.watching.clone());
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                // Every few seconds at least, see whether the state is gone: then the watch
                // ends, and with it the store's listening connection.
                let changed = tokio::time::timeout(std::time::Duration::from_secs(5), watch.changed.recv()).await;
                let Some(state) = weak.upgrade() else { return };
                match changed {
                    Ok(Some(())) => state.invalidate_tokens(),
                    Ok(None) => return,
                    Err(_) => {} // nothing changed
                }
            }
        });
        Ok(())
    }

    /// True in the all-in-one deployment: the planners' participants live in this process and
    /// share its fate (see [`crate::protocol::decision`]).
    pub fn shares_fate(&self) -> bool {
        self.config.role == Role::All
    }

    /// Does this process keep participant `who`?
    fn keeps(&self, who: &ParticipantRef) -> bool {
        match (&self.config.role, who) {
            (Role::All, _) | (Role::Nis, ParticipantRef::Network) => true,
            (Role::Lis { site }, ParticipantRef::Site(s)) => site == s,
            _ => false,
        }
    }

    /// `inner` (the local participant `who`), journaled: every change it acknowledges is
    /// durable in the store first ([`Journaled`]). `via_api`: for the REST hold endpoints.
    /// With a `caller`, the holds it prepares are recorded and journaled as owned by
    /// `caller`'s hold principal ([`Caller::hold_principal`]: the deployment's planner
    /// principal for a planner credential, else its user; [`Journaled::owned_by`]).
    fn journal<T: ?Sized>(
        &self,
        inner: Arc<T>,
        who: ParticipantRef,
        via_api: bool,
        caller: Option<&Caller>,
    ) -> Journaled<T> {
        let journal: Arc<dyn Journal> = self.store.clone();
        let j = Journaled::new(inner, who, journal, via_api)
            .with_backlog(self.backlog.clone())
            .with_tentative(self.tentative.clone());
        match caller {
            Some(c) => j.owned_by(c.hold_principal()),
            None => j,
        }
    }

    /// The LIS of `site`, journaled (see [`AppState::journal`]); 404 if this process does not
    /// keep it.
    pub fn journaled_site(
        &self,
        site: &str,
        via_api: bool,
        caller: Option<&Caller>,
    ) -> Result<Arc<dyn Participant<Compute>>, ApiError> {
        let lis = self.lis(site)?.clone();
        Ok(Arc::new(self.journal(lis, ParticipantRef::Site(site.into()), via_api, caller)))
    }

    /// The LIS of `site` granting tentative holds ([`Journaled::tentative_prepares`]): the
    /// participant protocol's prepare for a coordinator that persists its holds before its
    /// decision. 404 if this process does not keep it.
    pub fn tentative_site(&self, site: &str, caller: &Caller) -> Result<Arc<dyn Participant<Compute>>, ApiError> {
        let lis = self.lis(site)?.clone();
        Ok(Arc::new(self.journal(lis, ParticipantRef::Site(site.into()), false, Some(caller)).tentative_prepares()))
    }

    /// The NIS of this process, or 404.
    fn nis(&self) -> Result<Arc<crate::nis::Nis>, ApiError> {
        if !self.keeps(&ParticipantRef::Network) {
            return Err(ApiError::not_found("this process does not serve the network"));
        }
        Ok(self.participants.nis.clone())
    }

    /// The NIS granting tentative holds (see [`AppState::tentative_site`]).
    pub fn tentative_network(&self, caller: &Caller) -> Result<Arc<dyn Participant<Network>>, ApiError> {
        let nis = self.nis()?;
        Ok(Arc::new(self.journal(nis, ParticipantRef::Network, false, Some(caller)).tentative_prepares()))
    }

    /// The NIS, journaled (see [`AppState::journal`]); 404 if this process does not keep it.
    pub fn journaled_network(
        &self,
        via_api: bool,
        caller: Option<&Caller>,
    ) -> Result<Arc<dyn Participant<Network>>, ApiError> {
        let nis = self.nis()?;
        Ok(Arc::new(self.journal(nis, ParticipantRef::Network, via_api, caller)))
    }

    /// Participant `who`'s phase 2 (commit, abort, release, extend), journaled; 404 if this
    /// process does not keep it.
    pub fn journaled_holds(
        &self,
        who: &ParticipantRef,
        via_api: bool,
        caller: Option<&Caller>,
    ) -> Result<Arc<dyn HoldLifecycle>, ApiError> {
        Ok(match who {
            ParticipantRef::Site(s) => self.journaled_site(s, via_api, caller)?,
            ParticipantRef::Network => self.journaled_network(via_api, caller)?,
        })
    }

    /// May `caller` `verb` (commit, abort, release, extend) hold `hold` of the local
    /// participant `who`? Checked before anything changes.
    ///
    /// - the principal that prepared the hold may; a hold prepared by a planner credential
    ///   belongs to the deployment's planner principal ([`super::auth::PLANNERS`]) and every
    ///   planner credential may drive it (audited at `info`, target `audit`);
    /// - an admin may, and the override is logged (`tracing::warn!`, target `audit`);
    /// - a hold without a recorded owner was made by this process's own planners (all-in-one)
    ///   and only an admin may touch it from outside; in a participant-only process such a
    ///   hold was journaled before owners were recorded (migration 0004) and any service
    ///   principal may, as before;
    /// - an unknown hold is left to the participant, which answers for it (nothing changes).
    ///
    /// # Errors
    /// 403 for anyone else; 404 if this process does not keep `who`.
    pub fn authorize_hold(
        &self,
        caller: &Caller,
        who: &ParticipantRef,
        hold: HoldId,
        verb: &str,
    ) -> Result<(), ApiError> {
        let owner = match who {
            ParticipantRef::Site(s) => self.lis(s)?.owner(hold),
            ParticipantRef::Network if self.keeps(who) => self.participants.nis.owner(hold),
            ParticipantRef::Network => return Err(ApiError::not_found("this process does not serve the network")),
        };
        let Some(owner) = owner else { return Ok(()) };
        if let Some(o) = owner.as_deref().filter(|o| caller.owns_hold(o)) {
            if o != caller.user {
                // A planner drives a hold another planner prepared (recovery, compensation,
                // cancellation through another planner process): allowed, and audited.
                tracing::info!(target: "audit", principal = %caller.user, owner = o, %hold, participant = %who, verb,
                    "planner acts on a hold of the deployment's planners");
            }
            return Ok(());
        }
        let owner_name = owner.as_deref().unwrap_or("this broker's planners");
        if caller.admin {
            tracing::warn!(target: "audit", principal = %caller.user, owner = owner_name, %hold, participant = %who, verb,
                "admin acts on a hold of another principal");
            return Ok(());
        }
        if owner.is_none() && !self.shares_fate() {
            return Ok(()); // journaled before owners were recorded
        }
        tracing::warn!(target: "audit", principal = %caller.user, owner = owner_name, %hold, participant = %who, verb,
            "refused: hold of another principal");
        Err(ApiError::new(
            actix_web::http::StatusCode::FORBIDDEN,
            "hold-not-owned",
            "The hold belongs to another principal",
            format!("hold {hold} belongs to another principal; only it or an admin may {verb} it"),
        ))
    }

    /// Start-up recovery, before the first request:
    /// 1. the participants of this process rebuild their calendars from the journal
    ///    (committed reservations, and holds whose lease still runs, with that lease);
    ///    holds whose lease ended while the process was down are marked expired;
    /// 2. the only planning process of its store (all-in-one) ends the claims of its previous
    ///    life at once (keys without a plan are freed, unfinished transactions become free);
    /// 3. a planning process runs a first recovery round ([`AppState::recover_in_doubt`]).
    ///
    /// # Errors
    /// The store fails, or the journal does not fit the grid (a reservation over capacity, an
    /// unknown link): the process must not serve on a calendar it cannot trust.
    pub async fn recover(&self) -> anyhow::Result<(usize, Recovery)> {
        let now = self.now();
        self.store.expire_holds(now).await?;
        let mut restored = 0;
        for h in self.store.live_holds(now).await? {
            if !self.keeps(&h.participant) {
                continue;
            }
            let r = match (&h.participant, &h.request) {
                (ParticipantRef::Site(s), HoldRequest::Compute(req)) => match self.participants.lis.get(s) {
                    Some(lis) => lis.restore(h.hold, req, h.state),
                    None => anyhow::bail!("the journal has a hold {} at site `{s}`, which is not in the grid", h.hold),
                },
                (ParticipantRef::Network, HoldRequest::Network(req)) => {
                    self.participants.nis.restore(h.hold, req, h.state)
                }
                (who, _) => anyhow::bail!("the journal has hold {} of {who} with a request of the other kind", h.hold),
            };
            r.map_err(|e| anyhow::anyhow!("journaled hold {} of {} cannot be restored: {e}", h.hold, h.participant))?;
            if h.via_api {
                self.holds.lock().expect("hold registry").insert(h.hold, h.participant.clone());
            }
            restored += 1;
        }
        for (hold, owner) in self.store.live_hold_owners(now).await? {
            match self.participants.lis.values().find(|l| l.owner(hold).is_some()) {
                Some(lis) => lis.set_owner(hold, Some(owner)),
                None if self.keeps(&ParticipantRef::Network) => self.participants.nis.set_owner(hold, Some(owner)),
                None => {}
            }
        }
        if self.shares_fate() {
            self.store.end_all_claims().await?;
        }
        let report = if self.plans() { self.recover_in_doubt().await? } else { Recovery::default() };
        Ok((restored, report))
    }

    /// The LIS of this process that front Slurm.
    pub fn slurm_sites(&self) -> Vec<Arc<Lis>> {
        let mut v: Vec<Arc<Lis>> = self.participants.lis.values().filter(|l| l.slurm().is_some()).cloned().collect();
        v.sort_by_key(|l| l.site().id);
        v
    }

    /// One synchronisation of Slurm site `lis` ([`Lis::sync`]), counted in `/metrics` and
    /// logged when it fails.
    ///
    /// # Errors
    /// Slurm unreachable or unreadable.
    pub async fn sync_slurm(&self, lis: &Lis) -> Result<crate::lis::SyncReport, crate::lis::slurm::SlurmError> {
        let site = lis.site().id;
        let r = lis.sync().await;
        match &r {
            Ok(report) => self.metrics.slurm_synced(site.as_str(), Some(report), lis.drift().len()),
            Err(e) => {
                tracing::warn!(site = %site, error = %e, "synchronisation with Slurm failed");
                self.metrics.slurm_synced(site.as_str(), None, lis.drift().len());
            }
        }
        r
    }

    /// Marks broken the plans whose reservations a site can no longer honour: asks every LIS
    /// of this process's planners for its drift ([`Participant::drift`]) and writes, for each
    /// reservation newly reported, its job's reason into the plan and the plan `broken`.
    /// A LIS that does not answer is skipped until the next round. Returns the plans marked.
    ///
    /// # Errors
    /// The store fails.
    pub async fn watch_drift(&self) -> Result<usize, StoreError> {
        let planner = self.planners.lend();
        let mut marked = self.watch_network_drift(planner.services().nis.as_ref()).await?;
        for (site, lis) in &planner.services().lis {
            let drift = match lis.drift().await {
                Ok(d) => d,
                Err(e) => {
                    tracing::debug!(site = %site, error = %e, "drift not read");
                    continue;
                }
            };
            for d in drift {
                let Some(rec) = self.store.plan_of_hold(d.hold).await? else { continue };
                // A plan's bookings list its jobs first, in order.
                let Some(i) = rec.bookings.iter().position(|b| b.hold == d.hold) else { continue };
                let mut outcome = rec.outcome.clone();
                let Some(job) = outcome.jobs.get_mut(i).filter(|j| j.site == *site) else { continue };
                let reason = format!("reservation {}: {}", d.reservation, d.reason);
                if job.broken.as_deref() == Some(reason.as_str()) {
                    continue;
                }
                tracing::warn!(plan = %rec.id, user = %rec.user, job = %job.name, site = %site, %reason, "plan broken");
                job.broken = Some(reason);
                if self.store.mark_broken(rec.id, &outcome).await?.is_some() {
                    marked += 1;
                }
            }
        }
        Ok(marked)
    }

    /// [`AppState::watch_drift`] for the NIS: a transfer whose data-plane rules vanished marks
    /// its plan broken (the transfer's `broken`).
    async fn watch_network_drift(&self, nis: &dyn Participant<Network>) -> Result<usize, StoreError> {
        let drift = match nis.drift().await {
            Ok(d) => d,
            Err(e) => {
                tracing::debug!(error = %e, "network drift not read");
                return Ok(0);
            }
        };
        let mut marked = 0;
        for d in drift {
            let Some(rec) = self.store.plan_of_hold(d.hold).await? else { continue };
            // A plan's bookings list its jobs first, then its transfers, in order.
            let Some(i) = rec.bookings.iter().position(|b| b.hold == d.hold) else { continue };
            let mut outcome = rec.outcome.clone();
            let Some(t) = i.checked_sub(outcome.jobs.len()).and_then(|t| outcome.transfers.get_mut(t)) else {
                continue;
            };
            let reason = format!("{}: {}", d.reservation, d.reason);
            if t.broken.as_deref() == Some(reason.as_str()) {
                continue;
            }
            tracing::warn!(plan = %rec.id, user = %rec.user, %reason, "plan broken (network)");
            t.broken = Some(reason);
            if self.store.mark_broken(rec.id, &outcome).await?.is_some() {
                marked += 1;
            }
        }
        Ok(marked)
    }

    /// One reconciliation of the NIS's data plane, logged when it fails; see
    /// [`crate::nis::Nis::reconcile_dataplane`].
    ///
    /// # Errors
    /// An interface could not be read.
    pub async fn reconcile_dataplane(
        &self,
    ) -> Result<crate::nis::dataplane::ReconcileReport, crate::nis::dataplane::DataplaneError> {
        self.participants.nis.reconcile_dataplane().await
    }

    /// Does this process plan (all-in-one or planner role)?
    pub fn plans(&self) -> bool {
        matches!(self.config.role, Role::All | Role::Planner(_))
    }

    /// A fresh claim of this process, renewed until the guard drops.
    pub fn claim(&self) -> ClaimGuard {
        let claim = Claim::new(&self.instance, self.config.claim_lease_s);
        self.claims.lock().expect("claim registry").insert(claim.id);
        ClaimGuard { registry: self.claims.clone(), claim }
    }

    /// Renews every claim this process works on (the background loop calls it every quarter
    /// of [`ServeConfig::claim_lease_s`]).
    pub async fn renew_claims(&self) -> Result<(), StoreError> {
        let claims: Vec<Uuid> = self.claims.lock().expect("claim registry").iter().copied().collect();
        if claims.is_empty() {
            return Ok(());
        }
        self.store.renew_claims(&claims, self.config.claim_lease_s).await
    }

    /// One recovery round: takes over the decided, unfinished transactions whose claim lapsed
    /// (their coordinator crashed, stalled, or gave up answering 503) and settles them
    /// ([`Planner::recover`]); what cannot be settled now lapses again for a later round.
    pub async fn recover_in_doubt(&self) -> Result<Recovery, StoreError> {
        let guard = self.claim();
        let in_doubt = self.store.take_in_doubt(&guard.claim, 64).await?;
        if in_doubt.is_empty() {
            return Ok(Recovery::default());
        }
        let log =
            super::decision_log::StoreDecisionLog::new(self.store.as_ref(), self.shares_fate(), &guard.claim, None);
        let report = self.planners.lend().recover(&in_doubt, &log).await;
        self.metrics.recovered(report.committed, report.compensated);
        Ok(report)
    }

    /// Lease expiry in the background: releases lapsed holds in memory and marks them
    /// expired in the store. Returns the holds marked.
    pub async fn sweep(&self) -> Result<u64, StoreError> {
        // First the journal entries a store outage made it miss (see protocol::Backlog).
        let journal: Arc<dyn Journal> = self.store.clone();
        match self.backlog.flush(journal.as_ref()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(entries = n, "journal backlog written"),
            Err(e) => tracing::warn!(error = %e, "journal backlog still waits"),
        }
        self.participants.holds_outstanding(); // expires in memory as a side effect
        self.tentative.prune(self.now());
        self.store.expire_holds(self.now()).await
    }

    /// Forgets, in memory, reservations that ended more than the horizon ago: no request can
    /// reach them (timestamps are refused beyond `--horizon-days`). The journal keeps them.
    /// Returns the spans pruned. O(spans): the sweeper calls it hourly.
    pub fn prune_history(&self) -> usize {
        self.participants.prune_before(self.now() - self.config.horizon_s())
    }

    /// Now, by the participants' clock.
    pub fn now(&self) -> Time {
        self.participants.clock.now()
    }

    /// Now as a timestamp.
    pub fn now_utc(&self) -> DateTime<Utc> {
        from_time(self.now())
    }

    /// 422 unless `t` lies within the configured horizon of now (either way).
    pub fn check_horizon(&self, what: &str, t: &DateTime<Utc>) -> Result<Time, ApiError> {
        let (t, now, h) = (to_time(t), self.now(), self.config.horizon_s());
        if (t - now).abs() > h {
            return Err(ApiError::invalid(format!(
                "{what} {} is more than {} days from now (--horizon-days)",
                from_time(t).to_rfc3339(),
                self.config.horizon_days
            )));
        }
        Ok(t)
    }

    /// The LIS of `site`, or 404.
    pub fn lis(&self, site: &str) -> Result<&Arc<Lis>, ApiError> {
        self.participants.lis.get(site).ok_or_else(|| ApiError::not_found(format!("unknown site `{site}`")))
    }
}

/// The HTTP client a planner process speaks to its participants with: it trusts the CA of
/// `config.tls_ca` (else the system's roots) and presents `config.tls_client` (mutual TLS).
///
/// # Errors
/// A file cannot be read, or holds no usable certificate or key.
pub fn participant_client(config: &ServeConfig) -> anyhow::Result<reqwest::Client> {
    use anyhow::Context;
    let read = |p: &std::path::Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    let mut tls = ClientTls::default();
    if let Some(ca) = &config.tls_ca {
        tls.ca_pem = Some(read(ca)?);
    }
    if let Some(id) = &config.tls_client {
        let mut pem = read(&id.cert)?;
        pem.push(b'\n');
        pem.extend(read(&id.key)?);
        tls.identity_pem = Some(pem);
    }
    crate::protocol::http::client(&tls).map_err(|e| anyhow::anyhow!("participant client TLS: {e}"))
}

/// N planners over one set of participants; each request goes to the least busy one.
pub struct PlannerPool {
    planners: Vec<(Planner, AtomicUsize)>,
}

/// A planner lent to one request (its in-flight count drops when this does).
pub struct Lent<'a> {
    pool: &'a PlannerPool,
    i: usize,
}

impl std::ops::Deref for Lent<'_> {
    type Target = Planner;
    fn deref(&self) -> &Planner {
        &self.pool.planners[self.i].0
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        self.pool.planners[self.i].1.fetch_sub(1, Ordering::SeqCst);
    }
}

impl PlannerPool {
    fn new(config: &ServeConfig, services: Services) -> Self {
        let template = PlannerConfig {
            w_interval_s: config.w_interval_s,
            policy: config.policy,
            method: config.method,
            // Remote participants: a message costs far more than an answer (see planner::queries).
            batch_queries: matches!(config.role, Role::Planner(_)),
            batch_aborts: matches!(config.role, Role::Planner(_)),
            check_before_hold: true,
            ..PlannerConfig::default()
        };
        let planners = Planner::pool(config.planners.max(1), &template, &services, |_| rand::random())
            .into_iter()
            .map(|p| (p, AtomicUsize::new(0)))
            .collect();
        PlannerPool { planners }
    }

    /// The planner with the fewest requests in flight (ties: the first).
    pub fn lend(&self) -> Lent<'_> {
        let i = (0..self.planners.len())
            .min_by_key(|&i| self.planners[i].1.load(Ordering::SeqCst))
            .expect("the pool is never empty");
        self.planners[i].1.fetch_add(1, Ordering::SeqCst);
        Lent { pool: self, i }
    }

    /// Planners in the pool.
    pub fn len(&self) -> usize {
        self.planners.len()
    }

    /// Never true: a pool has at least one planner.
    pub fn is_empty(&self) -> bool {
        self.planners.is_empty()
    }
}
