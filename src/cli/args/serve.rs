//! The flags of `serve` (each also a `CORESERVE_*` variable, and a key of `--config`), and
//! their conversion into the service's [`Settings`].

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::api::{RemoteServices, Role, ServeConfig, Settings};
use crate::grid;
use crate::model::{Grid, ReservationMethod, SelectionPolicy};
use crate::nis::Routing;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A TOML file of settings: every flag of `serve` under its long name with `_` for `-`
    /// (`w_interval_s = 1800`, `lis = ["s1=https://..."]`, switches as booleans), plus
    /// `database_url`. Precedence: command line > environment (`CORESERVE_<NAME>`,
    /// `DATABASE_URL`) > this file > defaults. An unknown key is an error.
    #[arg(long, env = "CORESERVE_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Log lines as text (default) or as one JSON object per line (timestamp, level, target,
    /// fields) on stderr; RUST_LOG sets the filter (default warn).
    #[arg(long, env = "CORESERVE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: crate::api::telemetry::LogFormat,
    /// The grid (sites and topology) to serve (every role but `planner`); saved in the store.
    /// Without it, the grid saved by an earlier start on the same DATABASE_URL is served.
    #[arg(long, env = "CORESERVE_GRID")]
    pub grid: Option<PathBuf>,
    /// What this process serves: all (one process), lis (one site, --site), nis, gis, or
    /// planner (over remote participants: --gis, --nis, --lis).
    #[arg(long, value_enum, default_value = "all", env = "CORESERVE_ROLE")]
    pub role: ServeRole,
    /// The site of a `lis` process.
    #[arg(long, env = "CORESERVE_SITE")]
    pub site: Option<String>,
    /// Base URL of the GIS (`planner` role), e.g. http://127.0.0.1:8090.
    #[arg(long, env = "CORESERVE_GIS")]
    pub gis: Option<String>,
    /// Base URL of the NIS (`planner` role).
    #[arg(long, env = "CORESERVE_NIS")]
    pub nis: Option<String>,
    /// SITE=URL: the LIS of a site (`planner` role; once per site).
    #[arg(long = "lis", value_name = "SITE=URL", env = "CORESERVE_LIS", value_delimiter = ',')]
    pub lis: Vec<String>,
    /// Bootstrap token shared by the processes of a separated deployment: participants accept
    /// it as a service token (principal `service`); planners without --participant-token send
    /// it (and then act as one principal). Prefer one --participant-token per planner.
    #[arg(long, env = "CORESERVE_SERVICE_TOKEN", hide_env_values = true)]
    pub service_token: Option<String>,
    /// This planner's own credential towards its participants (made with `coreserve token
    /// create --user NAME --service`): its holds are owned by NAME, and no other principal but
    /// an admin may commit, abort, release or extend them.
    #[arg(long, env = "CORESERVE_PARTICIPANT_TOKEN", hide_env_values = true)]
    pub participant_token: Option<String>,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key).
    #[arg(long, env = "CORESERVE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "CORESERVE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// With --tls-cert: require a client certificate signed by this PEM CA (mutual TLS).
    #[arg(long, env = "CORESERVE_TLS_CLIENT_CA")]
    pub tls_client_ca: Option<PathBuf>,
    /// With --tls-client-ca: a caller without a valid token whose client certificate (signed by
    /// that CA) names CN=NAME is the planner principal NAME. Lets a participant on a database of
    /// its own trust another domain's planners by their CA, with no token rows to share.
    #[arg(long, env = "CORESERVE_TRUST_CLIENT_CERTIFICATES", requires = "tls_client_ca")]
    pub trust_client_certificates: bool,
    /// A planner trusts only this PEM CA for https:// participants (default: the system's roots).
    #[arg(long, env = "CORESERVE_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// A planner's PEM client certificate for participants that require one (with
    /// --tls-client-key).
    #[arg(long, env = "CORESERVE_TLS_CLIENT_CERT", requires = "tls_client_key")]
    pub tls_client_cert: Option<PathBuf>,
    /// The PEM private key of --tls-client-cert.
    #[arg(long, env = "CORESERVE_TLS_CLIENT_KEY", requires = "tls_client_cert")]
    pub tls_client_key: Option<PathBuf>,
    #[arg(long, default_value = "127.0.0.1:8080", env = "CORESERVE_LISTEN")]
    pub listen: String,
    /// Planners in the pool (each request goes to the least busy one).
    #[arg(long, default_value_t = 3, env = "CORESERVE_PLANNERS")]
    pub planners: usize,
    /// Hold lease in seconds.
    #[arg(long, default_value_t = crate::in_process::DEFAULT_LEASE_S, env = "CORESERVE_LEASE_S")]
    pub lease_s: i64,
    /// Plans start no earlier than receipt + this.
    #[arg(long, default_value_t = 1800, env = "CORESERVE_W_INTERVAL_S")]
    pub w_interval_s: i64,
    #[arg(long, default_value = "time", env = "CORESERVE_POLICY")]
    pub policy: SelectionPolicy,
    /// Reservation method of requests that name none: bir, bbr or bbr-overlay.
    #[arg(long, visible_alias = "mode", default_value = "bir", env = "CORESERVE_METHOD")]
    pub method: ReservationMethod,
    /// NIS routing: shortest, widest or widest:K.
    #[arg(long, default_value = "shortest", env = "CORESERVE_ROUTING")]
    pub routing: Routing,
    /// Request timestamps must lie within this many days of now.
    #[arg(long, default_value_t = 365, env = "CORESERVE_HORIZON_DAYS")]
    pub horizon_days: i64,
    /// The admin bearer token (also read from CORESERVE_ADMIN_TOKEN);
    /// without one, a token is generated and printed once.
    #[arg(long, env = "CORESERVE_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// actix worker threads (default: one per core).
    #[arg(long, env = "CORESERVE_WORKERS")]
    pub workers: Option<usize>,
    /// Seconds an idempotency key's or a decided transaction's claim lives without renewal:
    /// another planner process takes over the work of one that stopped (crashed, stalled)
    /// after this long.
    #[arg(long, default_value_t = crate::api::DEFAULT_CLAIM_LEASE_S, env = "CORESERVE_CLAIM_LEASE_S")]
    pub claim_lease_s: i64,
    /// This process's name in claims and logs (default: ROLE@LISTEN#PID).
    #[arg(long, env = "CORESERVE_INSTANCE")]
    pub instance: Option<String>,
    /// At most this many plan requests of one user in flight at once (429 beyond).
    #[arg(long, default_value_t = crate::api::config::DEFAULT_MAX_IN_FLIGHT_PER_USER, env = "CORESERVE_MAX_IN_FLIGHT_PER_USER")]
    pub max_in_flight_per_user: usize,
    /// At most this many plan requests plan at once, shared fairly between users (planning
    /// permits; `--planning-slots`, the name before round 3, still works).
    #[arg(long, alias = "planning-slots", default_value_t = crate::api::config::DEFAULT_PLANNING_PERMITS, env = "CORESERVE_PLANNING_PERMITS")]
    pub planning_permits: usize,
    /// Fair share's admission window, ms: requests arriving within one window plan in the
    /// order of their projects' priorities (0: no wait).
    #[arg(long, default_value_t = 0, env = "CORESERVE_ADMISSION_WINDOW_MS")]
    pub admission_window_ms: u64,
    /// Webhooks: the wait before a failed delivery's first retry, ms (doubling, with jitter,
    /// up to an hour).
    #[arg(long, default_value_t = 1000, env = "CORESERVE_WEBHOOK_RETRY_BASE_MS")]
    pub webhook_retry_base_ms: u64,
    /// Webhooks: one whose deliveries fail for longer than this many seconds is disabled
    /// (default 3 days).
    #[arg(long, default_value_t = 3 * 24 * 3600, env = "CORESERVE_WEBHOOK_DISABLE_AFTER_S")]
    pub webhook_disable_after_s: i64,
    /// Webhooks: a network (CIDR, or one address) or a host name that deliveries may reach
    /// although it is not public (loopback, private, link-local, ...: refused by default, see
    /// docs/deploy.md); once per entry, or comma-separated. For in-house receivers.
    #[arg(long = "webhook-allow", value_name = "CIDR|HOST", env = "CORESERVE_WEBHOOK_ALLOW", value_delimiter = ',')]
    pub webhook_allow: Vec<crate::api::destinations::Allowed>,
    /// Webhooks: at most this many per user (admins: no limit).
    #[arg(long, default_value_t = crate::api::config::DEFAULT_WEBHOOK_MAX_PER_USER, env = "CORESERVE_WEBHOOK_MAX_PER_USER")]
    pub webhook_max_per_user: usize,
    /// Webhooks: an event not acknowledged after this many delivery attempts is given up (the
    /// webhook goes on with the next event).
    #[arg(long, default_value_t = crate::api::config::DEFAULT_WEBHOOK_MAX_ATTEMPTS_PER_EVENT, env = "CORESERVE_WEBHOOK_MAX_ATTEMPTS_PER_EVENT")]
    pub webhook_max_attempts_per_event: i32,
    /// Retention: delete what finished this many days ago or earlier (cancelled, rejected and
    /// completed plans with their keys, past journal rows and decisions, delivered events,
    /// old webhook delivery log entries); 0 (default): keep everything. See docs/deploy.md.
    #[arg(long, default_value_t = 0, env = "CORESERVE_RETENTION_DAYS")]
    pub retention_days: u32,
    /// Retention: seconds between two prunings.
    #[arg(long, default_value_t = crate::api::config::DEFAULT_RETENTION_EVERY_S, env = "CORESERVE_RETENTION_EVERY_S")]
    pub retention_every_s: u64,
    /// Experiments: the base seed of the planners' random streams (policy `random`, ties of
    /// `time`), so that a run can be repeated and compared with the simulator's (default: a
    /// random seed at every start).
    #[arg(long, env = "CORESERVE_PLANNER_SEED")]
    pub planner_seed: Option<u64>,
    /// Experiments: a TOML file of service times (`free_slot = [LO, HI]`, seconds, and
    /// `availability`, `hold`, `commit`, `cancel`: the simulator's `[service_times]` keys);
    /// every participant-protocol message this process answers waits a uniform draw from its
    /// range first, as the grid middleware of Ando & Aida's Table 2 did.
    #[arg(long, env = "CORESERVE_SERVICE_TIMES", value_name = "FILE")]
    pub service_times: Option<PathBuf>,
    // `[@SLURM_CONF]` in the help text is optional syntax, not an intra-doc link.
    #[allow(rustdoc::broken_intra_doc_links)]
    /// SITE=PARTITION[@SLURM_CONF]: the LIS of SITE fronts this Slurm partition (every role
    /// that keeps the site: `all`, or `lis` with --site SITE; once per Slurm site; other sites
    /// stay calendars), of the cluster of SLURM_CONF if given (else --slurm-conf's), so one
    /// process can front several clusters. Committed jobs become Slurm advance reservations;
    /// Slurm's own reservations are sold out.
    #[arg(long = "slurm", value_name = "SITE=PARTITION[@SLURM_CONF]", env = "CORESERVE_SLURM", value_delimiter = ',')]
    pub slurm: Vec<String>,
    /// Per-site Slurm settings as JSON, `{"SITE": {"slurm": {"partition": ..., "slurm_conf":
    /// ..., "users": {...}, "default_user": ..., "prefix": ..., "sync_s": ..., "scontrol":
    /// ...}}}`: what a config file's `[sites.SITE.slurm]` tables set (its `sites` key). Each
    /// table is a whole site's settings (unset keys take SlurmConfig's defaults, not the
    /// --slurm-* flags); a site may not also be given by --slurm.
    #[arg(long = "slurm-sites", value_name = "JSON", env = "CORESERVE_SLURM_SITES", hide = true)]
    pub slurm_site_tables: Option<String>,
    /// SLURM_CONF for the Slurm sites' scontrol (default: the environment's SLURM_CONF, else
    /// Slurm's default).
    #[arg(long, env = "CORESERVE_SLURM_CONF")]
    pub slurm_conf: Option<PathBuf>,
    /// The scontrol program of the Slurm sites.
    #[arg(long, default_value = "scontrol", env = "CORESERVE_SLURM_SCONTROL")]
    pub slurm_scontrol: PathBuf,
    /// USER=SLURM_USER: the Slurm user a coreserve user's reservations are made for (once per
    /// user).
    #[arg(long = "slurm-user", value_name = "USER=SLURM_USER", env = "CORESERVE_SLURM_USER", value_delimiter = ',')]
    pub slurm_user: Vec<String>,
    /// The Slurm user of coreserve users without --slurm-user (default: none; such users get
    /// 403 no-local-account at the Slurm sites).
    #[arg(long, env = "CORESERVE_SLURM_DEFAULT_USER")]
    pub slurm_default_user: Option<String>,
    /// Prefix of the names of coreserve's Slurm reservations (the hold id follows).
    #[arg(long, default_value = crate::lis::slurm::DEFAULT_PREFIX, env = "CORESERVE_SLURM_PREFIX")]
    pub slurm_prefix: String,
    /// Seconds between two synchronisations of a Slurm site with Slurm.
    #[arg(long, default_value_t = crate::lis::slurm::DEFAULT_SYNC_S, env = "CORESERVE_SLURM_SYNC_S")]
    pub slurm_sync_s: u64,
    /// The NIS programs a data plane: `tc` (Linux traffic control and policy routing: an HTB
    /// class, a u32 filter and an `ip rule` per committed transfer and hop of its path, during
    /// its window, so that its traffic takes the booked path at the booked rate), or
    /// `tc-rate-only` (no routing rules: the NIS then books only the paths the network routes).
    /// Needs --dataplane-map. Roles all and nis.
    #[arg(long, value_parser = ["tc", "tc-rate-only"], env = "CORESERVE_DATAPLANE")]
    pub dataplane: Option<String>,
    /// The data plane's map (JSON: per link the namespace and interface of each end, per site
    /// its endpoint address; `scripts/emulated-wan start` writes one).
    #[arg(long, env = "CORESERVE_DATAPLANE_MAP")]
    pub dataplane_map: Option<PathBuf>,
    /// Milliseconds between two reconciliations of the data plane (besides window boundaries).
    #[arg(long, default_value_t = crate::nis::dataplane::DEFAULT_SYNC_MS, env = "CORESERVE_DATAPLANE_SYNC_MS")]
    pub dataplane_sync_ms: u64,
    /// First destination port of reserved transfers (the span is --dataplane-port-span).
    #[arg(long, default_value_t = crate::nis::dataplane::DEFAULT_PORT_BASE, env = "CORESERVE_DATAPLANE_PORT_BASE")]
    pub dataplane_port_base: u16,
    #[arg(long, default_value_t = crate::nis::dataplane::DEFAULT_PORT_SPAN, env = "CORESERVE_DATAPLANE_PORT_SPAN")]
    pub dataplane_port_span: u16,
}

/// `coreserve serve --role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServeRole {
    All,
    Lis,
    Nis,
    Gis,
    Planner,
}

impl ServeArgs {
    /// The service's settings: `--config` noted in the log, the numbers checked, the role of
    /// `--role` (with `--site`, or `--gis`, `--nis` and `--lis` for a planner), the grid of
    /// `--grid` read, and the store of `database_url` (`DATABASE_URL`).
    ///
    /// # Errors
    /// A number out of range, a role without the flags it needs, a `--lis` that is not
    /// `SITE=URL`, or a `--grid` file that cannot be read.
    pub fn into_settings(self, database_url: Option<String>) -> Result<Settings> {
        if let Some(file) = &self.config {
            tracing::info!(config = %file.display(), "settings read from the config file (command line and environment take precedence)");
        }
        if self.planners == 0
            || self.lease_s <= 0
            || self.w_interval_s < 0
            || self.horizon_days <= 0
            || self.claim_lease_s <= 0
            || self.max_in_flight_per_user == 0
            || self.planning_permits == 0
            || self.webhook_retry_base_ms == 0
            || self.webhook_disable_after_s <= 0
            || self.webhook_max_attempts_per_event <= 0
            || self.retention_every_s == 0
        {
            bail!(
                "--planners, --lease-s, --claim-lease-s, --max-in-flight-per-user, --planning-permits, --horizon-days, \
                 --webhook-retry-base-ms, --webhook-disable-after-s, --webhook-max-attempts-per-event and \
                 --retention-every-s must be > 0 and \
                 --w-interval-s >= 0"
            );
        }
        let (role, grid) = self.role_and_grid()?;
        let slurm = self.slurm_sites(&role)?;
        let dataplane = match (&self.dataplane, &self.dataplane_map) {
            (None, _) => None,
            (Some(_), None) => bail!("--dataplane tc needs --dataplane-map"),
            (Some(_), Some(_)) if !matches!(role, Role::All | Role::Nis) => {
                bail!("--dataplane belongs to the process that keeps the NIS (roles all and nis)")
            }
            (Some(mode), Some(map)) => Some(crate::nis::dataplane::DataplaneConfig {
                steering: mode == "tc",
                sync_ms: self.dataplane_sync_ms.max(50),
                port_base: self.dataplane_port_base,
                port_span: self.dataplane_port_span.clamp(1, u16::MAX - self.dataplane_port_base),
                ..crate::nis::dataplane::DataplaneConfig::new(map)
            }),
        };
        let tls_files = |cert_key: Option<(PathBuf, PathBuf)>| {
            cert_key.map(|(cert, key)| crate::api::config::TlsFiles { cert, key })
        };
        let config = ServeConfig {
            listen: self.listen,
            planners: self.planners,
            lease_s: self.lease_s,
            clock: Default::default(),
            w_interval_s: self.w_interval_s,
            policy: self.policy,
            method: self.method,
            routing: self.routing,
            horizon_days: self.horizon_days,
            admin_token: self.admin_token,
            workers: self.workers,
            role,
            claim_lease_s: self.claim_lease_s,
            instance: self.instance,
            max_in_flight_per_user: self.max_in_flight_per_user,
            planning_permits: self.planning_permits,
            admission_window_ms: self.admission_window_ms,
            webhook_retry_base_ms: self.webhook_retry_base_ms,
            webhook_disable_after_s: self.webhook_disable_after_s,
            webhook_allow: self.webhook_allow,
            webhook_max_per_user: self.webhook_max_per_user,
            webhook_max_attempts_per_event: self.webhook_max_attempts_per_event,
            service_token: self.service_token,
            participant_token: self.participant_token,
            tls: tls_files(self.tls_cert.zip(self.tls_key)),
            tls_ca: self.tls_ca,
            tls_client: tls_files(self.tls_client_cert.zip(self.tls_client_key)),
            tls_client_ca: self.tls_client_ca,
            trust_client_certificates: self.trust_client_certificates,
            slurm,
            dataplane,
            retention_days: self.retention_days,
            retention_every_s: self.retention_every_s,
            planner_seed: self.planner_seed,
            service_times: self.service_times.as_deref().map(read_service_times).transpose()?,
        };
        Ok(Settings { config, grid, database_url })
    }

    /// The Slurm sites of `--slurm`, each with the `--slurm-*` settings.
    ///
    /// # Errors
    /// A `--slurm` or `--slurm-user` that is not `A=B`, a site given twice, a Slurm site of a
    /// `lis` process that is not its `--site`, a `planner` with Slurm sites (its LIS processes
    /// have them), or an invalid setting ([`crate::lis::slurm::SlurmConfig::validate`]).
    fn slurm_sites(&self, role: &Role) -> Result<Vec<(String, crate::lis::slurm::SlurmConfig)>> {
        let pair = |flag: &str, v: &str| match v.split_once('=') {
            Some((a, b)) if !a.trim().is_empty() && !b.trim().is_empty() => {
                Ok((a.trim().to_owned(), b.trim().to_owned()))
            }
            _ => bail!("{flag} wants A=B, got `{v}`"),
        };
        let mut users = std::collections::BTreeMap::new();
        for u in &self.slurm_user {
            let (user, slurm_user) = pair("--slurm-user", u)?;
            users.insert(user, slurm_user);
        }
        let mut sites: Vec<(String, crate::lis::slurm::SlurmConfig)> = Vec::new();
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct SiteTable {
            slurm: crate::lis::slurm::SlurmConfig,
        }
        let tables: std::collections::BTreeMap<String, SiteTable> = match &self.slurm_site_tables {
            Some(json) => serde_json::from_str(json)
                .map_err(|e| anyhow::anyhow!("[sites.SITE.slurm] settings: {e} (keys: partition, slurm_conf, scontrol, users, default_user, prefix, sync_s, gpu_licenses)"))?,
            None => Default::default(),
        };
        let mut given: Vec<(String, crate::lis::slurm::SlurmConfig)> = Vec::new();
        for s in &self.slurm {
            let (site, rest) = pair("--slurm", s)?;
            let (partition, conf) = match rest.split_once('@') {
                Some((p, c)) if !p.is_empty() && !c.is_empty() => (p.to_owned(), Some(PathBuf::from(c))),
                Some(_) => bail!("--slurm wants SITE=PARTITION[@SLURM_CONF], got `{s}`"),
                None => (rest, None),
            };
            let config = crate::lis::slurm::SlurmConfig {
                partition,
                scontrol: self.slurm_scontrol.clone(),
                slurm_conf: conf.or_else(|| self.slurm_conf.clone()),
                users: users.clone(),
                default_user: self.slurm_default_user.clone(),
                prefix: self.slurm_prefix.clone(),
                sync_s: self.slurm_sync_s,
                gpu_licenses: Default::default(),
            };
            given.push((site, config));
        }
        given.extend(tables.into_iter().map(|(site, t)| (site, t.slurm)));
        for (site, config) in given {
            if sites.iter().any(|(x, _)| *x == site) {
                bail!("--slurm (or [sites.SITE.slurm]) names site `{site}` twice");
            }
            match role {
                Role::Lis { site: mine } if *mine != site => {
                    bail!("--slurm names site `{site}`, but this LIS process serves `{mine}`")
                }
                Role::Planner(_) | Role::Nis | Role::Gis => {
                    bail!("--slurm belongs to the processes that keep the site (all, or lis with --site {site})")
                }
                _ => {}
            }
            config.validate().map_err(|e| anyhow::anyhow!("site `{site}`: {e}"))?;
            sites.push((site, config));
        }
        Ok(sites)
    }

    /// The [`Role`] of `--role`, and the grid of `--grid` (empty for a planner, whatever
    /// `--grid` says; `None` when not given).
    fn role_and_grid(&self) -> Result<(Role, Option<Grid>)> {
        if self.role == ServeRole::Planner {
            let (Some(gis), Some(nis)) = (self.gis.clone(), self.nis.clone()) else {
                bail!("--role planner needs --gis URL and --nis URL");
            };
            let mut lis = Vec::new();
            for l in &self.lis {
                let Some((site, url)) = l.split_once('=') else { bail!("--lis wants SITE=URL, got `{l}`") };
                lis.push((site.to_owned(), url.to_owned()));
            }
            if lis.is_empty() {
                bail!("--role planner needs one --lis SITE=URL per site");
            }
            let empty = Grid::new(vec![], vec![], vec![])?;
            return Ok((Role::Planner(RemoteServices { gis, nis, lis }), Some(empty)));
        }
        let g = self.grid.as_deref().map(grid::load_grid).transpose()?;
        let role = match self.role {
            ServeRole::All => Role::All,
            ServeRole::Nis => Role::Nis,
            ServeRole::Gis => Role::Gis,
            ServeRole::Lis => {
                let Some(site) = self.site.clone() else { bail!("--role lis needs --site ID") };
                Role::Lis { site }
            }
            ServeRole::Planner => unreachable!("handled above"),
        };
        Ok((role, g))
    }
}

/// The service times of `--service-times FILE` (see [`crate::protocol::ServiceTimes`]).
///
/// # Errors
/// The file cannot be read, is not such a table, or a range is not `0 <= LO <= HI`.
fn read_service_times(file: &std::path::Path) -> Result<crate::protocol::ServiceTimes> {
    let text = std::fs::read_to_string(file).with_context(|| format!("--service-times {}", file.display()))?;
    let times: crate::protocol::ServiceTimes =
        toml::from_str(&text).with_context(|| format!("--service-times {}", file.display()))?;
    times.validate()?;
    Ok(times)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::tests::parse;
    use crate::cli::Command;

    #[test]
    fn serve_flags_become_settings() {
        let Command::Serve(a) =
            parse(&["serve", "--role", "planner", "--gis", "http://g", "--nis", "http://n"]).command
        else {
            unreachable!()
        };
        let e = a.into_settings(None).unwrap_err().to_string();
        assert!(e.contains("--lis SITE=URL"), "{e}");
        let Command::Serve(a) =
            parse(&["serve", "--role", "planner", "--gis", "http://g", "--nis", "http://n", "--lis", "s1=http://l"])
                .command
        else {
            unreachable!()
        };
        let s = a.into_settings(Some("postgres://x".into())).unwrap();
        assert_eq!(
            s.config.role,
            Role::Planner(RemoteServices {
                gis: "http://g".into(),
                nis: "http://n".into(),
                lis: vec![("s1".into(), "http://l".into())]
            })
        );
        assert_eq!(s.grid.map(|g| g.sites().len()), Some(0));
        assert_eq!(s.database_url.as_deref(), Some("postgres://x"));
        let Command::Serve(a) = parse(&["serve", "--planners", "0"]).command else { unreachable!() };
        assert!(a.into_settings(None).unwrap_err().to_string().contains("must be > 0"));
    }

    /// Issue 45: several Slurm clusters in one process: a conf per `--slurm` site, and
    /// `[sites.ID.slurm]` tables of a config file (as `CORESERVE_SLURM_SITES`).
    #[test]
    fn each_slurm_site_names_its_own_cluster() {
        let role = Role::All;
        let Command::Serve(a) = parse(&[
            "serve",
            "--slurm",
            "s1=batch@/a/slurm.conf,s2=gpu",
            "--slurm-conf",
            "/b/slurm.conf",
            "--slurm-sites",
            r#"{"s3": {"slurm": {"partition": "p3", "slurm_conf": "/c/slurm.conf", "users": {"alice": "asmith"}, "prefix": "cs3_"}}}"#,
        ])
        .command
        else {
            unreachable!()
        };
        let sites = a.slurm_sites(&role).unwrap();
        let conf = |site: &str| sites.iter().find(|(s, _)| s == site).unwrap().1.clone();
        assert_eq!(conf("s1").slurm_conf, Some(PathBuf::from("/a/slurm.conf")));
        assert_eq!(conf("s1").partition, "batch");
        assert_eq!(conf("s2").slurm_conf, Some(PathBuf::from("/b/slurm.conf")), "the shared --slurm-conf");
        let s3 = conf("s3");
        assert_eq!((s3.partition.as_str(), s3.prefix.as_str()), ("p3", "cs3_"));
        assert_eq!(s3.slurm_conf, Some(PathBuf::from("/c/slurm.conf")));
        assert_eq!(s3.users.get("alice").map(String::as_str), Some("asmith"));
        let Command::Serve(a) =
            parse(&["serve", "--slurm", "s1=batch", "--slurm-sites", r#"{"s1": {"slurm": {"partition": "x"}}}"#])
                .command
        else {
            unreachable!()
        };
        assert!(a.slurm_sites(&role).unwrap_err().to_string().contains("`s1` twice"));
        let Command::Serve(a) =
            parse(&["serve", "--slurm-sites", r#"{"s1": {"slurm": {"partition": "x", "partiton": "y"}}}"#]).command
        else {
            unreachable!()
        };
        assert!(a.slurm_sites(&role).unwrap_err().to_string().contains("partiton"));
    }
}
