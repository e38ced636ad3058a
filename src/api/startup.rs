//! Startup: from the [`Settings`] of a process to a running server. [`Application::start`]
//! opens the store (PostgreSQL or in memory), takes the grid (given, or the one the store saved
//! at an earlier start) and calls [`Application::build`], which builds the state, recovers,
//! starts the background tasks ([`supervisor`]) and binds the listener;
//! [`Application::run_until_stopped`] serves, and stops the tasks once the server has stopped.
//! `coreserve serve` fills the settings from its flags; tests build either directly. What every
//! request goes through is [`middleware`]'s.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::{Server, ServerHandle};
use actix_web::{web, App, HttpServer};
use anyhow::{bail, Context};

use super::auth::{generate_token, register_token, register_token_with, Roles, ADMIN_PRINCIPAL, SERVICE_PRINCIPAL};
use super::config::{Role, ServeConfig, MAX_BODY_BYTES};
use super::gateway::Gateway;
use super::middleware;
use super::problem::ApiError;
use super::routes;
use super::state::{participant_client, AppState};
use super::supervisor::{self, Supervisor};
use super::telemetry::notice;
use crate::model::Grid;
use crate::store::{MemoryStore, PgStore, Store};

/// Everything a broker process starts from: the service's settings, its grid and its store.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Every knob of the service.
    pub config: ServeConfig,
    /// The grid to serve (saved in the store); `None`: the grid an earlier start saved in the
    /// store. A planner process serves no grid of its own: give it an empty one.
    pub grid: Option<Grid>,
    /// The PostgreSQL store (grid, journal, decision log, plans, keys and tokens persist);
    /// `None`: an in-memory store, nothing survives a restart.
    pub database_url: Option<String>,
}

/// The listener's TLS settings from `config.tls` (certificate chain and key) and
/// `config.tls_client_ca` (require client certificates signed by it); `None` without
/// `config.tls`. rustls with the `ring` provider; TLS 1.2 and 1.3.
///
/// # Errors
/// A file cannot be read or holds no certificate or key, the key does not match the
/// certificate, or `tls_client_ca` is given without `tls`.
pub fn server_tls(config: &ServeConfig) -> anyhow::Result<Option<rustls::ServerConfig>> {
    use anyhow::Context;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let Some(files) = &config.tls else {
        anyhow::ensure!(config.tls_client_ca.is_none(), "--tls-client-ca needs --tls-cert and --tls-key");
        return Ok(None);
    };
    crate::protocol::http::install_crypto_provider();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading certificates from {}", files.cert.display()))?;
    anyhow::ensure!(!certs.is_empty(), "{} holds no PEM certificate", files.cert.display());
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .with_context(|| format!("reading a private key from {}", files.key.display()))?;
    let builder =
        rustls::ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions()?;
    let builder = match &config.tls_client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(ca).with_context(|| format!("reading {}", ca.display()))? {
                roots.add(c.with_context(|| format!("reading {}", ca.display()))?)?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .context("client certificate verifier")?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    Ok(Some(builder.with_single_cert(certs, key).context("the TLS certificate and key do not fit")?))
}

/// A bound, not yet running server.
pub struct Application {
    port: u16,
    server: Server,
    state: web::Data<AppState>,
    /// The background tasks, stopped once the server has stopped.
    tasks: Supervisor,
    generated_admin_token: Option<String>,
}

impl Application {
    /// Opens the store of `settings.database_url` (in memory without one), takes the grid of
    /// the settings or else the one saved in the store, and [builds](Application::build) the
    /// application; says on stderr which store it uses, the admin token if it generated one,
    /// and where it serves what.
    ///
    /// # Errors
    /// The database cannot be reached; no grid is given and the store has none; a LIS's site
    /// is not in the grid; or [`Application::build`] fails.
    pub async fn start(settings: Settings) -> anyhow::Result<Self> {
        let Settings { config, grid, database_url } = settings;
        config.validate()?;
        let role_name = match &config.role {
            Role::All => "all",
            Role::Lis { .. } => "lis",
            Role::Nis => "nis",
            Role::Gis => "gis",
            Role::Planner(_) => "planner",
        };
        let store: Arc<dyn Store> = match database_url {
            Some(url) => {
                let store = PgStore::connect(&url).await.context("connecting to DATABASE_URL")?;
                tracing::info!("store: postgres (everything persists)");
                notice(
                    "store: postgres (DATABASE_URL): grid, holds, reservations, decisions, plans, keys and tokens persist",
                );
                Arc::new(store)
            }
            None => {
                tracing::warn!("store: memory (no DATABASE_URL); plans, tokens and bookings do not survive a restart");
                notice("WARNING: in-memory store (no DATABASE_URL): nothing survives a restart");
                Arc::new(MemoryStore::new())
            }
        };
        let grid = match grid {
            Some(g) => g,
            None => store.load_grid().await?.with_context(|| {
                format!("--grid is required for --role {role_name}: the store has no grid saved by an earlier start")
            })?,
        };
        if let Role::Lis { site } = &config.role {
            if !grid.sites().iter().any(|s| &s.id == site) {
                bail!("site `{site}` is not in the grid");
            }
        }
        // A planner fronts the deployment: its participants are checked before it serves.
        let serving = match &config.role {
            Role::Lis { .. } => "1 site".to_owned(),
            Role::Planner(remote) => {
                let gateway = Gateway::new(participant_client(&config)?, remote.clone());
                let found = gateway.check(config.participant_credential()).await?;
                for w in &found.warnings {
                    tracing::warn!(participant = %w, "participant not ready");
                    notice(&format!("WARNING: {w}"));
                }
                let links = found.links.map_or("the NIS's links".to_owned(), |n| format!("{n} links"));
                format!("{} sites and {links} (through the GIS, the NIS and {} LIS)", found.sites, remote.lis.len())
            }
            _ => format!("{} sites and {} links", grid.sites().len(), grid.links().len()),
        };
        let listen = config.listen.clone();
        let app = Application::build(config, grid, store).await?;
        if let Some(t) = app.generated_admin_token() {
            hand_over_admin_token(t).context("handing over the generated admin token")?;
        }
        let addr = listen.rsplit_once(':').map_or(listen.clone(), |(host, _)| format!("{host}:{}", app.port()));
        let scheme = if app.state.config.tls.is_some() { "https" } else { "http" };
        notice(&format!(
            "coreserve ({role_name}) serving {serving} on {scheme}://{addr} (API at /v1, reference at /docs, OpenAPI document at /openapi.json)"
        ));
        Ok(app)
    }

    /// Builds the state over `grid` and `store`, registers the admin token (the configured one,
    /// or a generated one), saves the grid in the store, binds `config.listen`, recovers
    /// (calendars rebuilt from the journal, in-doubt transactions finished:
    /// [`AppState::recover`]), synchronises Slurm sites and the data plane a first time, and
    /// starts the background tasks ([`supervisor::start`]: the lease sweeper, the claim
    /// renewer, the recovery round and the others, each named, in `/metrics`, stopped with the
    /// server).
    ///
    /// # Errors
    /// The address cannot be bound, the store fails, recovery fails, or a Slurm site or the
    /// data plane cannot be synchronised.
    pub async fn build(config: ServeConfig, grid: Grid, store: Arc<dyn Store>) -> anyhow::Result<Self> {
        config.validate()?;
        crate::protocol::http::install_crypto_provider();
        let generated = register_tokens(&config, store.as_ref()).await?;
        if !matches!(config.role, Role::Planner(_)) {
            store.save_grid(&grid).await?;
        }
        let tls = server_tls(&config)?;
        let listener = bind(&config, tls.is_some())?;
        let (port, workers, role) = (listener.local_addr()?.port(), config.workers, config.role.clone());
        let state = web::Data::new(AppState::new(config, grid, store)?);
        let token_changes = state.watch_tokens().await?;
        let (restored, recovery) = state.recover().await?;
        first_synchronisations(&state).await?;
        if state.plans() {
            state.load_fair_share().await?;
        }
        if restored > 0 || recovery != Default::default() {
            tracing::info!(restored, committed = recovery.committed, compensated = recovery.compensated, "recovered");
            notice(&format!(
                "recovered: {restored} holds and reservations from the journal; in-doubt transactions: {} committed, {} compensated",
                recovery.committed, recovery.compensated
            ));
        }
        let server = http_server(state.clone(), role, listener, tls, workers)?;
        let tasks = supervisor::start(&state, token_changes);
        Ok(Application { port, server, state, tasks, generated_admin_token: generated })
    }

    /// The bound port (useful with port 0).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The admin token if it was generated (print it once; it is not stored anywhere else).
    pub fn generated_admin_token(&self) -> Option<&str> {
        self.generated_admin_token.as_deref()
    }

    /// The shared state (tests look at participants directly).
    pub fn state(&self) -> web::Data<AppState> {
        self.state.clone()
    }

    /// A handle that stops the server (as `SIGTERM` does: `stop(true)` lets the requests in
    /// flight finish), and with it [`Application::run_until_stopped`].
    pub fn handle(&self) -> ServerHandle {
        self.server.handle()
    }

    /// Serves until the server stops (`SIGTERM`, or `SIGINT` / `SIGQUIT` without waiting for
    /// the requests in flight, or [`Application::handle`]), then stops every background task
    /// (their rounds in progress end first, for up to [`supervisor::STOP_GRACE`]) and closes
    /// the store ([`crate::store::Store::close`]).
    ///
    /// # Errors
    /// The server's.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let served = self.server.await;
        self.tasks.stop(supervisor::STOP_GRACE).await;
        self.state.store.close().await;
        served
    }
}

/// Hands a generated admin token to the operator, never through the log stream (stderr, where
/// logs and notices go, often into a journal): on stdout when that is a terminal, else into a
/// new file only its owner may read, `$TMPDIR/coreserve-admin-token-PID` (mode 0600), which a
/// notice names.
///
/// # Errors
/// The file cannot be created or written.
fn hand_over_admin_token(token: &str) -> std::io::Result<()> {
    use std::io::{IsTerminal, Write};
    use std::os::unix::fs::OpenOptionsExt;
    if std::io::stdout().is_terminal() {
        println!("admin token (shown once, not stored in clear): {token}");
        return Ok(());
    }
    let path = std::env::temp_dir().join(format!("coreserve-admin-token-{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
    writeln!(file, "{token}")?;
    notice(&format!(
        "admin token generated (none configured): in {} (readable by its owner only), not in the log",
        path.display()
    ));
    Ok(())
}

/// Registers the admin token (`config.admin_token`, else a generated one) and the deployment's
/// service token (if configured): the generated admin token, to be handed over once.
///
/// # Errors
/// The store's.
async fn register_tokens(config: &ServeConfig, store: &dyn Store) -> anyhow::Result<Option<String>> {
    let (admin, generated) = match &config.admin_token {
        Some(t) if !t.trim().is_empty() => (t.trim().to_owned(), None),
        _ => {
            let t = generate_token();
            (t.clone(), Some(t))
        }
    };
    register_token(store, &admin, ADMIN_PRINCIPAL, true, true).await?;
    if let Some(t) = config.service_token.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        // The deployment's own bootstrap credential is a planner credential: its holds belong to
        // the planner principal, which every planner may drive (recovery).
        let roles = Roles { admin: false, service: true, planner: true };
        register_token_with(store, t, SERVICE_PRINCIPAL, roles, None).await?;
    }
    Ok(generated)
}

/// Binds `config.listen`, warning when a separated role listens in clear (no `tls`) beyond
/// loopback.
///
/// # Errors
/// The address cannot be bound.
fn bind(config: &ServeConfig, tls: bool) -> anyhow::Result<TcpListener> {
    let listener =
        TcpListener::bind(&config.listen).map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.listen))?;
    let (addr, role) = (listener.local_addr()?, &config.role);
    if !tls && *role != Role::All && !addr.ip().is_loopback() {
        tracing::warn!(%addr, "a separated role listens without TLS on a non-loopback address: tokens and bookings cross the network in clear (use --tls-cert and --tls-key)");
        notice(&format!(
            "warning: role {role:?} listens on {addr} without TLS; use --tls-cert and --tls-key across administrative domains"
        ));
    }
    Ok(listener)
}

/// Before the first request: each Slurm site checked (its partition must match the site) and
/// synchronised (Slurm's reservations read: sold capacity blocked, coreserve's own
/// reconciled), and the NIS's data plane reconciled with the hold book.
///
/// # Errors
/// A Slurm site's check or first synchronisation fails, or the data plane's first
/// reconciliation.
async fn first_synchronisations(state: &AppState) -> anyhow::Result<()> {
    for lis in state.slurm_sites() {
        let site = lis.site().id;
        lis.check_slurm().await.map_err(|e| anyhow::anyhow!("Slurm site `{site}`: {e}"))?;
        let report =
            state.sync_slurm(&lis).await.map_err(|e| anyhow::anyhow!("Slurm site `{site}`: first sync: {e}"))?;
        tracing::info!(site = %site, ?report, "Slurm site synchronised");
    }
    if state.participants.nis.dataplane().is_some() {
        let report =
            state.reconcile_dataplane().await.map_err(|e| anyhow::anyhow!("data plane: first reconciliation: {e}"))?;
        tracing::info!(?report, "data plane reconciled");
    }
    Ok(())
}

/// The HTTP server of `state` for `role` on `listener` (TLS with `tls`; `workers` threads, or
/// actix's default): every route, the request limits, and [`middleware::around`] every request.
///
/// # Errors
/// The listener cannot be used.
fn http_server(
    state: web::Data<AppState>,
    role: Role,
    listener: TcpListener,
    tls: Option<rustls::ServerConfig>,
    workers: Option<usize>,
) -> std::io::Result<Server> {
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .app_data(
                web::JsonConfig::default().limit(MAX_BODY_BYTES).error_handler(|e, _| middleware::json_error(e).into()),
            )
            .app_data(web::PayloadConfig::new(MAX_BODY_BYTES))
            .app_data(
                web::QueryConfig::default().error_handler(|e, _| ApiError::bad_request(format!("query: {e}")).into()),
            )
            .app_data(web::PathConfig::default().error_handler(|e, req| super::extract::path_error(&e, req).into()))
            .wrap_fn(middleware::around)
            .configure(super::openapi::configure)
            .configure(|c| routes::configure_role(c, &role))
            .default_service(web::to(super::openapi::not_found))
    })
    .on_connect(super::peer::remember_peer);
    let mut server = match tls {
        Some(tls) => server.listen_rustls_0_23(listener, tls)?,
        None => server.listen(listener)?,
    };
    if let Some(w) = workers {
        server = server.workers(w);
    }
    Ok(server.run())
}
