//! Configuration of `coreserve serve` (the CLI fills it; tests build it directly).

use std::sync::Arc;

use crate::clock::{Clock, SystemClock};
use crate::model::{ReservationMethod, SelectionPolicy};
use crate::nis::Routing;

/// Default of [`ServeConfig::claim_lease_s`]: a stalled or dead process's claims are taken
/// over within this many seconds (plus one renewal period).
pub const DEFAULT_CLAIM_LEASE_S: i64 = 8;
/// Default of [`ServeConfig::max_in_flight_per_user`].
pub const DEFAULT_MAX_IN_FLIGHT_PER_USER: usize = 8;
/// Default of [`ServeConfig::webhook_max_per_user`].
pub const DEFAULT_WEBHOOK_MAX_PER_USER: usize = 10;
/// Default of [`ServeConfig::webhook_max_attempts_per_event`]: more than a webhook makes in the
/// 3 days before it is disabled (backoff doubling to an hour), so by default an event is given
/// up only with its webhook.
pub const DEFAULT_WEBHOOK_MAX_ATTEMPTS_PER_EVENT: i32 = 100;
/// Default of [`ServeConfig::planning_permits`].
pub const DEFAULT_PLANNING_PERMITS: usize = 16;
/// Largest accepted request body (bytes): 4 MiB, room for a 1,000-job, 4,000-transfer
/// workflow; larger bodies get 413.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The service's clock ([`ServeConfig::clock`]).
#[derive(Clone)]
pub struct ServiceClock(pub Arc<dyn Clock>);

impl Default for ServiceClock {
    /// The wall clock.
    fn default() -> Self {
        ServiceClock(Arc::new(SystemClock))
    }
}

impl std::fmt::Debug for ServiceClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ServiceClock(now {})", self.0.now())
    }
}

/// What one `coreserve serve` process does (role-separated deployment; see the README).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Role {
    /// Everything in one process: GIS, every LIS, the NIS and the planners (the default).
    #[default]
    All,
    /// The LIS of one site: `/v1/sites/...` for that site, `/v1/holds/...` and the participant
    /// endpoints under `/v1/participant/sites/{site}`.
    Lis { site: String },
    /// The NIS: `/v1/network...`, `/v1/holds/...` and `/v1/participant/network/...`.
    Nis,
    /// The GIS: `GET /v1/sites[/{id}]` and `POST /v1/participant/gis/candidates`.
    Gis,
    /// Planners only: `/v1/plans...` and `/v1/tokens`, over remote participants.
    Planner(RemoteServices),
}

/// Where a planner process finds its participants (base URLs such as `http://host:port`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteServices {
    /// The GIS.
    pub gis: String,
    /// The NIS.
    pub nis: String,
    /// The LIS of every site, by site id.
    pub lis: Vec<(String, String)>,
}

/// Every setting of the service.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address to listen on; port 0 picks a free port (tests).
    pub listen: String,
    /// Planners in the pool (each request goes to the least busy one).
    pub planners: usize,
    /// Hold lease in seconds.
    pub lease_s: i64,
    /// The clock the participants read (leases, the earliest start): the wall clock by
    /// default; a test about logic rather than time sets a [`crate::clock::ManualClock`].
    pub clock: ServiceClock,
    /// The planners' `w_interval`: plans start no earlier than receipt + this.
    pub w_interval_s: i64,
    /// Default selection policy (a request may name its own).
    pub policy: SelectionPolicy,
    /// Default reservation method (a request may name its own).
    pub method: ReservationMethod,
    /// NIS routing.
    pub routing: Routing,
    /// Every timestamp of a request must lie within this many days of now (422 otherwise).
    pub horizon_days: i64,
    /// The admin token; `None`: one is generated at start and printed once.
    pub admin_token: Option<String>,
    /// actix worker threads (`None`: one per core).
    pub workers: Option<usize>,
    /// This process's role (default: all in one).
    pub role: Role,
    /// Seconds an idempotency key's or a decided transaction's claim lives without renewal:
    /// another process takes over the work of a process that stopped renewing after this long
    /// (renewed every quarter of it).
    pub claim_lease_s: i64,
    /// At most this many plan requests plan at the same time, shared fairly between users
    /// (see [`crate::api::fair`]).
    pub planning_permits: usize,
    /// At most this many plan requests of one user in flight (waiting or planning) at once;
    /// one more is answered 429 (see [`crate::api::fair`]).
    pub max_in_flight_per_user: usize,
    /// Planned-Use fair share's admission window, milliseconds: a plan request waits for the
    /// end of its window before it may plan, so the arrivals of one window plan in the order of
    /// their projects' priorities (see [`crate::api::fair`]). 0 (the default): no wait; the
    /// priorities still order the requests waiting for a slot.
    pub admission_window_ms: u64,
    /// This process's name in claims (logs, diagnostics); `None`: `ROLE@LISTEN#PID`.
    pub instance: Option<String>,
    /// Bootstrap token shared by the processes of a separated deployment: participants accept
    /// it as a service token (principal `service`), and planners without a
    /// [`ServeConfig::participant_token`] send it. Every planner that sends it acts as the same
    /// principal, so they may drive each other's holds: give each planner its own token.
    pub service_token: Option<String>,
    /// This planner process's own credential towards its participants (a service token made
    /// with `coreserve token create --user NAME --service`): the participants record its user
    /// as the owner of the holds it prepares, and refuse phase 2 of them from anyone else.
    pub participant_token: Option<String>,
    /// TLS for the listener: PEM certificate chain and private key (`None`: plain HTTP).
    pub tls: Option<TlsFiles>,
    /// PEM file of the CA(s) a planner trusts for `https://` participants (`None`: the
    /// system's roots).
    pub tls_ca: Option<std::path::PathBuf>,
    /// A planner's client certificate and key (PEM) for participants that ask for one.
    pub tls_client: Option<TlsFiles>,
    /// With [`ServeConfig::tls`]: require a client certificate signed by this CA (PEM) of every
    /// caller (mutual TLS between the processes of a separated deployment).
    pub tls_client_ca: Option<std::path::PathBuf>,
    /// With [`ServeConfig::tls_client_ca`]: a caller without a valid token whose verified client
    /// certificate names `CN=NAME` is the planner principal NAME (participants that trust the
    /// planners of another domain by their CA, with no shared token store; [`crate::api::peer`]).
    pub trust_client_certificates: bool,
    /// The sites whose LIS fronts a Slurm partition, with how to reach it (`--slurm`); the
    /// other sites are calendars only.
    pub slurm: Vec<(String, crate::lis::slurm::SlurmConfig)>,
    /// The NIS's data plane (`--dataplane tc`), if any: see [`crate::nis::dataplane`].
    pub dataplane: Option<crate::nis::dataplane::DataplaneConfig>,
    /// Webhooks: the wait before a failed delivery's first retry, milliseconds (doubling, with
    /// jitter, up to an hour; see [`crate::api::webhooks`]).
    pub webhook_retry_base_ms: u64,
    /// Webhooks: one failing for longer than this (seconds) is disabled.
    pub webhook_disable_after_s: i64,
    /// Webhooks: the networks and hosts that deliveries may reach although they are not public
    /// (in-house receivers; see [`crate::api::destinations`]). Empty (the default): public
    /// addresses only.
    pub webhook_allow: Vec<crate::api::destinations::Allowed>,
    /// Webhooks: at most this many per user (admins: no limit); one more is refused (422
    /// `webhook-limit`).
    pub webhook_max_per_user: usize,
    /// Webhooks: an event not acknowledged after this many attempts is given up, and the
    /// webhook goes on with the next (at least 1).
    pub webhook_max_attempts_per_event: i32,
    /// Retention: what finished this many days ago or earlier is deleted from the store
    /// ([`crate::store::Store::prune_finished`]: cancelled, rejected and completed plans,
    /// past journal rows and decisions, delivered events); 0 (the default): nothing is ever
    /// deleted.
    pub retention_days: u32,
    /// Retention: seconds between two prunings (the first runs a minute after start).
    pub retention_every_s: u64,
    /// The base seed of the planners' random streams (`--planner-seed`; planner `i` gets
    /// [`crate::planner::Planner::seeds_from`]`(seed)(i)`); `None`: drawn at random at start.
    /// Experiments set it to compare a run with the simulator's.
    pub planner_seed: Option<u64>,
    /// Every message of the participant protocol this process answers over HTTP waits a
    /// service time drawn from these ranges first (`--service-times FILE`; an experiment's
    /// stand-in for the slow grid middleware of Ando & Aida's Table 2). `None`: no wait.
    pub service_times: Option<crate::protocol::ServiceTimes>,
}

/// Default of [`ServeConfig::retention_every_s`]: hourly.
pub const DEFAULT_RETENTION_EVERY_S: u64 = 3600;

/// A PEM certificate chain and its private key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Certificate chain, leaf first (PEM).
    pub cert: std::path::PathBuf,
    /// Private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: std::path::PathBuf,
}

/// The most actix worker threads `--workers` may ask for.
pub const MAX_WORKERS: usize = 1024;

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: "127.0.0.1:8080".into(),
            planners: 3,
            lease_s: crate::in_process::DEFAULT_LEASE_S,
            clock: ServiceClock::default(),
            w_interval_s: 1800,
            policy: SelectionPolicy::Time,
            method: ReservationMethod::Bir,
            routing: Routing::Shortest,
            horizon_days: 365,
            admin_token: None,
            workers: None,
            role: Role::All,
            claim_lease_s: DEFAULT_CLAIM_LEASE_S,
            instance: None,
            max_in_flight_per_user: DEFAULT_MAX_IN_FLIGHT_PER_USER,
            planning_permits: DEFAULT_PLANNING_PERMITS,
            admission_window_ms: 0,
            webhook_retry_base_ms: 1000,
            webhook_disable_after_s: 3 * 24 * 3600,
            webhook_allow: Vec::new(),
            webhook_max_per_user: DEFAULT_WEBHOOK_MAX_PER_USER,
            webhook_max_attempts_per_event: DEFAULT_WEBHOOK_MAX_ATTEMPTS_PER_EVENT,
            service_token: None,
            participant_token: None,
            tls: None,
            tls_ca: None,
            tls_client: None,
            tls_client_ca: None,
            trust_client_certificates: false,
            slurm: Vec::new(),
            planner_seed: None,
            service_times: None,
            dataplane: None,
            retention_days: 0,
            retention_every_s: DEFAULT_RETENTION_EVERY_S,
        }
    }
}

impl ServeConfig {
    /// The credential a planner process sends to its participants: its own
    /// [`ServeConfig::participant_token`], else the bootstrap [`ServeConfig::service_token`].
    pub fn participant_credential(&self) -> Option<&str> {
        fn set(t: &Option<String>) -> Option<&str> {
            t.as_deref().map(str::trim).filter(|t| !t.is_empty())
        }
        set(&self.participant_token).or_else(|| set(&self.service_token))
    }

    /// Checks what the command line's parser cannot: `workers` within
    /// 1..=[`MAX_WORKERS`], and every configured token at least
    /// [`MIN_TOKEN_CHARS`] visible ASCII characters (a one-character admin
    /// token is guessed at once).
    ///
    /// # Errors
    /// What is wrong, naming the flag (the process exits with it, as for any configuration
    /// error, before it binds or touches the store).
    pub fn validate(&self) -> anyhow::Result<()> {
        if let Some(w) = self.workers {
            if !(1..=MAX_WORKERS).contains(&w) {
                anyhow::bail!("--workers must be 1 ..= {MAX_WORKERS}, not {w}");
            }
        }
        for (flag, token) in [
            ("--admin-token", &self.admin_token),
            ("--service-token", &self.service_token),
            ("--participant-token", &self.participant_token),
        ] {
            if let Some(t) = token.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
                check_configured_token(flag, t).map_err(anyhow::Error::msg)?;
            }
        }
        Ok(())
    }

    /// The horizon in seconds.
    pub fn horizon_s(&self) -> i64 {
        self.horizon_days.saturating_mul(86_400)
    }

    /// Retention's horizon at `now`: what finished before it is pruned; `None` when retention
    /// is off ([`ServeConfig::retention_days`] 0).
    pub fn retention_horizon(&self, now: chrono::DateTime<chrono::Utc>) -> Option<chrono::DateTime<chrono::Utc>> {
        (self.retention_days > 0).then(|| now - chrono::Duration::days(i64::from(self.retention_days)))
    }
}

/// The shortest `--admin-token` / `--service-token` / `--participant-token` accepted.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Why a configured bootstrap token was refused ([`check_configured_token`]); the token itself
/// is never in the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfiguredTokenError {
    /// Fewer than [`MIN_TOKEN_CHARS`] characters.
    #[error(
        "{flag} is too short: {chars} characters, at least {MIN_TOKEN_CHARS} are needed (e.g. `openssl rand -hex 32`)"
    )]
    TooShort { flag: String, chars: usize },
    /// A character that is not visible ASCII (a space, a control, non-ASCII).
    #[error("{flag} must be visible ASCII characters only (no spaces)")]
    NotVisibleAscii { flag: String },
}

/// Checks a configured bootstrap token (`--admin-token` and the like): at least
/// [`MIN_TOKEN_CHARS`] characters, visible ASCII.
///
/// # Errors
/// The [`ConfiguredTokenError`], naming `flag`.
pub fn check_configured_token(flag: &str, token: &str) -> Result<(), ConfiguredTokenError> {
    let chars = token.chars().count();
    if chars < MIN_TOKEN_CHARS {
        return Err(ConfiguredTokenError::TooShort { flag: flag.to_owned(), chars });
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ConfiguredTokenError::NotVisibleAscii { flag: flag.to_owned() });
    }
    Ok(())
}
