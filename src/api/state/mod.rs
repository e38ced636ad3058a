//! The application state shared by every worker: participants, planners, store, holds.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::config::{Role, ServeConfig};
use super::fair::{FairQueue, Priority};
use super::metrics::Metrics;
use super::problem::ApiError;
use crate::clock::Clock;
use crate::fairshare::{FairShareConfig, Ledger};
use crate::in_process::InProcessGrid;
use crate::lis::Lis;
use crate::model::{from_time, to_time, Grid, SiteId, Time};
use crate::planner::{ParticipantRef, Services};
use crate::protocol::http::{ClientTls, HttpCatalogue, HttpParticipant};
use crate::protocol::{
    Backlog, CallObserver, Compute, HoldId, Participant, ParticipantKind, Tentative, Timed, Yielding,
};
use crate::store::{Claim, Store, StoreError, TokenRecord};

mod maintenance;
mod participants;
mod pool;

pub use maintenance::RecoveryError;
pub use pool::{Lent, PlannerPool};

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
    /// Set once the store's token changes are watched ([`crate::store::TokenStore::token_changes`]): true while
    /// the watch sees every change.
    tokens_watched: OnceLock<Arc<AtomicBool>>,
    /// This process's name in claims (see [`ServeConfig::instance`]).
    pub instance: String,
    /// The claims this process works on right now, renewed by [`AppState::renew_claims`].
    claims: Arc<Mutex<HashSet<Uuid>>>,
    /// All-in-one: the threads and slots the requests of a user with others in flight plan in
    /// ([`super::lanes`]); `None` in other roles.
    pub background: Option<super::lanes::BackgroundLane>,
    /// Where webhooks may deliver ([`ServeConfig::webhook_allow`]).
    pub webhook_policy: Arc<super::destinations::DestinationPolicy>,
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
    /// Participants over `grid` on `config.clock` (the wall clock by default), `config.planners`
    /// planners, `store`.
    ///
    /// By role: a LIS process keeps only its site's LIS (the grid is cut down to that site);
    /// a planner process's planners talk to the remote participants of
    /// [`Role::Planner`] over HTTP ([`crate::protocol::http`]) and its local participants
    /// are unused.
    ///
    /// # Errors
    /// A planner process's TLS files (`tls_ca`, `tls_client`) cannot be read or parsed.
    pub fn new(config: ServeConfig, grid: Grid, store: Arc<dyn Store>) -> anyhow::Result<Self> {
        let clock: Arc<dyn Clock> = config.clock.0.clone();
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
        let mut fair = FairQueue::new(config.planning_permits, config.max_in_flight_per_user)
            .with_priority(priority, std::time::Duration::from_millis(config.admission_window_ms));
        if config.role == Role::All {
            // In process, planning is CPU-bound: one user's searches take at most every core,
            // never more than that from the other users (see api::fair). A planner process
            // waits on its participants most of the time and keeps no such cap.
            let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
            fair = fair.with_planning_per_user(cores);
        }
        // All-in-one: one user's many requests plan on a lane of all cores but one (see
        // api::lanes).
        let background = if config.role == Role::All {
            let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
            Some(super::lanes::BackgroundLane::new(super::lanes::BackgroundLane::threads_for(cores))?)
        } else {
            None
        };
        Ok(AppState {
            background,
            webhook_policy: Arc::new(super::destinations::DestinationPolicy::new(config.webhook_allow.clone())),
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
    /// up. An expired token is returned as is: [`crate::api::auth::Caller`] refuses it.
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

    /// Starts watching the store's token changes ([`crate::store::TokenStore::token_changes`]):
    /// the changes, one `()` each (coalesced), which the `token_watch` task
    /// ([`crate::api::supervisor`]) turns into [`AppState::invalidate_tokens`]; `None` for a
    /// store whose tokens change only through this process. Call once, at start; the watch ends
    /// (and with it the store's listening connection) when the receiver is dropped.
    ///
    /// # Errors
    /// The store cannot start watching.
    pub async fn watch_tokens(&self) -> Result<Option<tokio::sync::mpsc::Receiver<()>>, StoreError> {
        let Some(watch) = self.store.token_changes().await? else { return Ok(None) };
        let _ = self.tokens_watched.set(watch.watching.clone());
        Ok(Some(watch.changed))
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
