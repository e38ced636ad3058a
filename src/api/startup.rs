//! Startup: from the [`Settings`] of a process to a running server. [`Application::start`]
//! opens the store (PostgreSQL or in memory), takes the grid (given, or the one the store saved
//! at an earlier start) and calls [`Application::build`], which builds the state, recovers,
//! starts the background tasks and binds the listener; [`Application::run_until_stopped`]
//! serves. `coreserve serve` fills the settings from its flags; tests build either directly.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::{Server, Service};
use actix_web::http::header;
use actix_web::http::{Method, StatusCode};
use actix_web::{web, App, HttpServer, ResponseError};
use anyhow::{bail, Context};
use futures::FutureExt;

use super::auth::{generate_token, register_token, register_token_with, Roles, ADMIN_PRINCIPAL, SERVICE_PRINCIPAL};
use super::config::{Role, ServeConfig, MAX_BODY_BYTES};
use super::gateway::Gateway;
use super::problem::ApiError;
use super::routes;
use super::state::{participant_client, AppState};
use super::telemetry::notice;
use crate::model::Grid;
use crate::store::{MemoryStore, PgStore, Store};

/// How often a planning process moves plans along the clock (committed -> active ->
/// completed; [`crate::store::PlanStore::advance_plans`]): a state change is seen within this.
pub const PLAN_CLOCK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
/// How often a planning process asks its sites for reservations they can no longer honour
/// ([`AppState::watch_drift`]).
pub const DRIFT_WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(3);
/// How often a planning process reads every planner's fair-share charges
/// ([`AppState::refresh_charges`]).
const CHARGES_READ_EVERY: std::time::Duration = std::time::Duration::from_secs(15);

/// Runs `task` every `period` (the first time after one period) for the life of the process,
/// logging a failure as `what`.
fn spawn_every<F, Fut, T, E>(period: std::time::Duration, what: &'static str, mut task: F)
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T, E>> + Send,
    E: std::fmt::Display,
{
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(period).await;
            if let Err(e) = task().await {
                tracing::warn!(error = %e, "{what}");
            }
        }
    });
}

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
    /// [`AppState::recover`]) and starts the lease sweeper (every `min(lease_s, 10)` s; hourly it
    /// also prunes history beyond the horizon: [`AppState::prune_history`]), the claim renewer
    /// and, in a planning process, the recovery loop (both every `claim_lease_s / 4`).
    ///
    /// # Errors
    /// The address cannot be bound, the store fails, or recovery fails.
    pub async fn build(config: ServeConfig, grid: Grid, store: Arc<dyn Store>) -> anyhow::Result<Self> {
        config.validate()?;
        crate::protocol::http::install_crypto_provider();
        let (admin, generated) = match &config.admin_token {
            Some(t) if !t.trim().is_empty() => (t.trim().to_owned(), None),
            _ => {
                let t = generate_token();
                (t.clone(), Some(t))
            }
        };
        register_token(store.as_ref(), &admin, ADMIN_PRINCIPAL, true, true).await?;
        if let Some(t) = config.service_token.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            // The deployment's own bootstrap credential is a planner credential: its holds
            // belong to the planner principal, which every planner may drive (recovery).
            let roles = Roles { admin: false, service: true, planner: true };
            register_token_with(store.as_ref(), t, SERVICE_PRINCIPAL, roles, None).await?;
        }
        let role = config.role.clone();
        if !matches!(role, Role::Planner(_)) {
            store.save_grid(&grid).await?;
        }
        let tls = server_tls(&config)?;
        let listener = TcpListener::bind(&config.listen)
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.listen))?;
        let port = listener.local_addr()?.port();
        let addr = listener.local_addr()?;
        if tls.is_none() && role != Role::All && !addr.ip().is_loopback() {
            tracing::warn!(%addr, "a separated role listens without TLS on a non-loopback address: tokens and bookings cross the network in clear (use --tls-cert and --tls-key)");
            notice(&format!(
                "warning: role {role:?} listens on {addr} without TLS; use --tls-cert and --tls-key across administrative domains"
            ));
        }
        let workers = config.workers;
        let sweep_every = std::time::Duration::from_secs(config.lease_s.clamp(1, 10) as u64);
        let claim_every = std::time::Duration::from_millis((config.claim_lease_s.max(1) * 250) as u64);
        let state = web::Data::new(AppState::new(config, grid, store)?);
        state.watch_tokens().await?;
        let (restored, recovery) = state.recover().await?;
        // Slurm sites: the partition must match the site, and Slurm's reservations are read
        // (sold capacity blocked, coreserve's own reconciled) before the first request.
        for lis in state.slurm_sites() {
            let site = lis.site().id;
            lis.check_slurm().await.map_err(|e| anyhow::anyhow!("Slurm site `{site}`: {e}"))?;
            let report =
                state.sync_slurm(&lis).await.map_err(|e| anyhow::anyhow!("Slurm site `{site}`: first sync: {e}"))?;
            tracing::info!(site = %site, ?report, "Slurm site synchronised");
            let (syncer, every) =
                (state.clone(), std::time::Duration::from_secs(lis.slurm().expect("bound").config().sync_s));
            // sync_slurm logs and counts its own failures.
            spawn_every(every, "Slurm synchronisation failed", move || {
                let (syncer, lis) = (syncer.clone(), lis.clone());
                async move {
                    let _ = syncer.sync_slurm(&lis).await;
                    Ok::<(), std::convert::Infallible>(())
                }
            });
        }
        // The NIS's data plane: reconciled with the hold book before the first request, then
        // at every window boundary and every sync period (see crate::nis::dataplane).
        if let Some(dp) = state.participants.nis.dataplane().map(|p| p.config().clone()) {
            let report = state
                .reconcile_dataplane()
                .await
                .map_err(|e| anyhow::anyhow!("data plane: first reconciliation: {e}"))?;
            tracing::info!(?report, "data plane reconciled");
            let timer = state.clone();
            tokio::spawn(async move {
                let every = std::time::Duration::from_millis(dp.sync_ms);
                loop {
                    // Wake at the next window boundary (whole seconds) or after the period.
                    let now = chrono::Utc::now();
                    let wait = timer
                        .participants
                        .nis
                        .next_dataplane_boundary(now.timestamp())
                        .map(|t| std::time::Duration::from_millis(((t * 1000) - now.timestamp_millis()).max(0) as u64))
                        .map_or(every, |w| w.min(every));
                    tokio::time::sleep(wait).await;
                    let _ = timer.reconcile_dataplane().await;
                }
            });
        }
        if matches!(state.config.role, Role::All | Role::Planner(_)) {
            state.load_fair_share().await?;
        }
        if restored > 0 || recovery != Default::default() {
            tracing::info!(restored, committed = recovery.committed, compensated = recovery.compensated, "recovered");
            notice(&format!(
                "recovered: {restored} holds and reservations from the journal; in-doubt transactions: {} committed, {} compensated",
                recovery.committed, recovery.compensated
            ));
        }
        let (sweeper, mut pruned_at) = (state.clone(), std::time::Instant::now());
        spawn_every(sweep_every, "lease sweep failed", move || {
            if pruned_at.elapsed() >= std::time::Duration::from_secs(3600) {
                pruned_at = std::time::Instant::now();
                let n = sweeper.prune_history();
                tracing::info!(spans = n, "pruned history beyond the horizon");
            }
            let sweeper = sweeper.clone();
            async move { sweeper.sweep().await }
        });
        // Retention (off unless --retention-days): finished plans, past journal rows and
        // decisions, delivered events; every process that shares the database may run it.
        if state.config.retention_days > 0 {
            let pruner = state.clone();
            let every = std::time::Duration::from_secs(state.config.retention_every_s.max(1));
            tokio::spawn(async move {
                tokio::time::sleep(every.min(RETENTION_FIRST_AFTER)).await;
                loop {
                    let _ = prune_store(&pruner).await;
                    tokio::time::sleep(every).await;
                }
            });
        }
        // Claims: renewed while this process works on them; a planning process also takes over
        // and settles the in-doubt transactions whose claim lapsed (a separate task, so that a
        // slow recovery never delays a renewal).
        let renewer = state.clone();
        spawn_every(claim_every, "claim renewal failed", move || {
            let renewer = renewer.clone();
            async move { renewer.renew_claims().await }
        });
        // Plans whose reservations a site no longer honours are marked broken (a planner
        // process asks its LIS; an all-in-one process only if it has Slurm sites).
        if matches!(state.config.role, Role::Planner(_))
            || (state.plans() && (!state.slurm_sites().is_empty() || state.participants.nis.dataplane().is_some()))
        {
            let watcher = state.clone();
            spawn_every(DRIFT_WATCH_EVERY, "drift watch failed", move || {
                let watcher = watcher.clone();
                async move { watcher.watch_drift().await }
            });
        }
        if state.plans() {
            // Plans along the clock: committed -> active -> completed, each change an event.
            let clock = state.clone();
            spawn_every(PLAN_CLOCK_EVERY, "plan states not advanced", move || {
                let clock = clock.clone();
                async move { clock.store.advance_plans(clock.now_utc()).await }
            });
            // Webhooks: a round whenever an event is written (any process), and every second
            // (or retry base, if shorter) for retries that came due.
            let deliverer = super::webhooks::Deliverer::new(
                state.store.clone(),
                super::webhooks::DeliveryLimits {
                    retry_base: std::time::Duration::from_millis(state.config.webhook_retry_base_ms),
                    disable_after: chrono::Duration::seconds(state.config.webhook_disable_after_s),
                    max_attempts_per_event: state.config.webhook_max_attempts_per_event,
                    policy: state.webhook_policy.clone(),
                },
            );
            let mut events = state.store.event_signal();
            let tick = deliverer.retry_base.min(std::time::Duration::from_secs(1));
            tokio::spawn(async move {
                loop {
                    if let Err(e) = deliverer.round().await {
                        tracing::warn!(error = %e, "webhook deliveries not leased");
                    }
                    tokio::select! {
                        changed = events.changed() => {
                            if changed.is_err() {
                                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                            }
                        }
                        () = tokio::time::sleep(tick) => {}
                    }
                }
            });
            let recoverer = state.clone();
            spawn_every(claim_every, "recovery round failed", move || {
                let recoverer = recoverer.clone();
                async move {
                    let recovered = recoverer.recover_in_doubt().await;
                    // Projects set through another planner process reach this one's ledger
                    // (a cache for the priorities; the limit is the store's).
                    let _ = super::routes::projects::fresh_projects(&recoverer).await;
                    recovered
                }
            });
            // And every planner's fair-share charges.
            let reader = state.clone();
            spawn_every(CHARGES_READ_EVERY, "fair-share charges not refreshed", move || {
                let reader = reader.clone();
                async move { reader.refresh_charges().await }
            });
        }
        let data = state.clone();
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .app_data(web::JsonConfig::default().limit(MAX_BODY_BYTES).error_handler(|e, _| json_error(e).into()))
                .app_data(web::PayloadConfig::new(MAX_BODY_BYTES))
                .app_data(
                    web::QueryConfig::default()
                        .error_handler(|e, _| ApiError::bad_request(format!("query: {e}")).into()),
                )
                .app_data(web::PathConfig::default().error_handler(|e, req| super::extract::path_error(&e, req).into()))
                .wrap_fn(|mut req, srv| {
                    let method = req.method().clone();
                    // HEAD is GET without the body: route it as GET; actix-http's encoder knows
                    // the request was HEAD and sends the headers only.
                    if method == Method::HEAD {
                        req.head_mut().method = Method::GET;
                    }
                    let path = req.path().to_owned();
                    // (The request itself cannot be cloned before routing: actix needs it unique.)
                    let state = req.app_data::<web::Data<AppState>>().cloned();
                    let started = std::time::Instant::now();
                    let fut = srv.call(req);
                    async move {
                        // Every request in the HTTP histogram, by route pattern (never the
                        // raw path) and status; the rewrites below keep the status.
                        let observe = |route: Option<&str>, status: StatusCode| {
                            if let Some(state) = &state {
                                let seconds = started.elapsed().as_secs_f64();
                                state.metrics.http_request(method.as_str(), route, status.as_u16(), seconds);
                            }
                        };
                        let res = match std::panic::AssertUnwindSafe(fut).catch_unwind().await {
                            Ok(Ok(res)) => res,
                            Ok(Err(e)) => {
                                observe(None, e.as_response_error().status_code());
                                return Err(e);
                            }
                            Err(panic) => {
                                // The panic text is internal: log it, answer a bare 500.
                                tracing::error!(%method, %path, panic = panic_text(&panic), "handler panicked");
                                if let Some(state) = &state {
                                    state.metrics.panicked();
                                }
                                observe(None, StatusCode::INTERNAL_SERVER_ERROR);
                                // An error is rendered by its `error_response`: a bare 500 problem.
                                return Err(ApiError::panicked().into());
                            }
                        };
                        observe(res.request().match_pattern().as_deref(), res.status());
                        // The access log: one info line per request.
                        tracing::info!(%method, %path, status = res.status().as_u16(),
                            ms = started.elapsed().as_secs_f64() * 1e3, "request");
                        // The raw body extractor (`web::Bytes`, behind every handler that
                        // checks a role before its body) answers a body over the limit with
                        // its own text/plain 413: answer a problem like every other error.
                        let is_problem = res
                            .headers()
                            .get(header::CONTENT_TYPE)
                            .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"));
                        if res.status() == StatusCode::PAYLOAD_TOO_LARGE && !is_problem {
                            let detail = format!("the request body is over the limit of {MAX_BODY_BYTES} bytes");
                            let problem = ApiError::new(
                                StatusCode::PAYLOAD_TOO_LARGE,
                                "body-too-large",
                                "Request body too large",
                                detail,
                            );
                            return Ok(res.into_response(problem.error_response()).map_into_right_body());
                        }
                        // actix answers a known path with the wrong method by an empty 405.
                        if res.status() == StatusCode::METHOD_NOT_ALLOWED {
                            let answer = super::openapi::method_not_allowed(&method, &path);
                            return Ok(res.into_response(answer).map_into_right_body());
                        }
                        Ok(res.map_into_left_body())
                    }
                })
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
        Ok(Application { port, server: server.run(), state, generated_admin_token: generated })
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

    /// Serves until the server stops (Ctrl-C / SIGTERM).
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.server.await
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

/// The first pruning of retention runs this long after start (or after one period, if
/// shorter): not in the rush of a restart's recovery.
const RETENTION_FIRST_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// One round of retention: deletes what finished before [`ServeConfig::retention_horizon`]
/// (nothing when retention is off), logs and counts it.
///
/// # Errors
/// The store's (logged as a warning; the next round tries again).
pub async fn prune_store(state: &AppState) -> Result<crate::store::Pruned, crate::store::StoreError> {
    let Some(horizon) = state.config.retention_horizon(state.now_utc()) else {
        return Ok(Default::default());
    };
    match state.store.prune_finished(horizon).await {
        Ok(pruned) => {
            state.metrics.pruned(&pruned);
            tracing::info!(%horizon, plans = pruned.plans, idempotency_keys = pruned.idempotency_keys,
                journal = pruned.journal, decisions = pruned.decisions, events = pruned.events,
                deliveries = pruned.deliveries, charges = pruned.charges, "retention: pruned what finished before the horizon");
            Ok(pruned)
        }
        Err(e) => {
            tracing::warn!(error = %e, "retention: pruning failed; next round in one period");
            Err(e)
        }
    }
}

/// The message of a caught panic, for the log.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)")
}

/// Maps the JSON body extractor's errors: syntax -> 400, well-formed JSON of the wrong shape
/// (missing or unknown fields, wrong types) -> 422, too large -> 413, wrong media type -> 415.
fn json_error(err: actix_web::error::JsonPayloadError) -> ApiError {
    use actix_web::error::JsonPayloadError as J;
    match &err {
        J::OverflowKnownLength { .. } | J::Overflow { .. } => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body-too-large",
            "Request body too large",
            format!("{err} (limit {} bytes)", MAX_BODY_BYTES),
        ),
        J::ContentType => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "Expected application/json",
            "the body must be JSON with Content-Type: application/json",
        ),
        J::Deserialize(e) if e.is_data() => ApiError::invalid(format!("body: {e}")),
        J::Deserialize(e) => ApiError::bad_request(format!("malformed JSON: {e}")),
        _ => ApiError::bad_request(err.to_string()),
    }
}
