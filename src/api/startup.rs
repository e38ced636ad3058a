//! Startup: build the state, bind the listener, run the server.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::{Server, Service};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::{web, App, HttpServer, ResponseError};
use futures::FutureExt;

use super::auth::{generate_token, register_token};
use super::config::{ServeConfig, MAX_BODY_BYTES};
use super::problem::{json_error, ApiError};
use super::routes;
use super::state::AppState;
use crate::model::Grid;
use crate::store::Store;

/// A bound, not yet running server.
pub struct Application {
    port: u16,
    server: Server,
    state: web::Data<AppState>,
    generated_admin_token: Option<String>,
}

impl Application {
    /// Builds the state over `grid` and `store`, registers the admin token (the configured one,
    /// or a generated one), saves the grid in the store, binds `config.listen`, recovers
    /// (calendars rebuilt from the journal, in-doubt transactions finished:
    /// [`AppState::recover`]) and starts the lease sweeper (every `min(lease_s, 10)` s; hourly it
    /// also prunes history beyond the horizon: [`AppState::prune_history`]).
    ///
    /// # Errors
    /// The address cannot be bound, the store fails, or recovery fails.
    pub async fn build(config: ServeConfig, grid: Grid, store: Arc<dyn Store>) -> anyhow::Result<Self> {
        let (admin, generated) = match &config.admin_token {
            Some(t) if !t.trim().is_empty() => (t.trim().to_owned(), None),
            _ => {
                let t = generate_token();
                (t.clone(), Some(t))
            }
        };
        register_token(store.as_ref(), &admin, "admin", true, true).await?;
        if let Some(t) = config.service_token.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            register_token(store.as_ref(), t, "service", false, true).await?;
        }
        let role = config.role.clone();
        if !matches!(role, super::Role::Planner(_)) {
            store.save_grid(&grid).await?;
        }
        let listener = TcpListener::bind(&config.listen)
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.listen))?;
        let port = listener.local_addr()?.port();
        let workers = config.workers;
        let sweep_every = std::time::Duration::from_secs(config.lease_s.clamp(1, 10) as u64);
        let state = web::Data::new(AppState::new(config, grid, store));
        let (restored, recovery) = state.recover().await?;
        if restored > 0 || recovery != Default::default() {
            tracing::info!(restored, committed = recovery.committed, compensated = recovery.compensated, "recovered");
            eprintln!(
                "recovered: {restored} holds and reservations from the journal; in-doubt transactions: {} committed, {} compensated",
                recovery.committed, recovery.compensated
            );
        }
        let sweeper = state.clone();
        tokio::spawn(async move {
            let mut pruned_at = std::time::Instant::now();
            loop {
                tokio::time::sleep(sweep_every).await;
                if let Err(e) = sweeper.sweep().await {
                    tracing::warn!(error = %e, "lease sweep failed");
                }
                if pruned_at.elapsed() >= std::time::Duration::from_secs(3600) {
                    pruned_at = std::time::Instant::now();
                    let n = sweeper.prune_history();
                    tracing::info!(spans = n, "pruned history beyond the horizon");
                }
            }
        });
        let data = state.clone();
        let mut server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .app_data(web::JsonConfig::default().limit(MAX_BODY_BYTES).error_handler(|e, _| json_error(e).into()))
                .app_data(web::PayloadConfig::new(MAX_BODY_BYTES))
                .app_data(
                    web::QueryConfig::default()
                        .error_handler(|e, _| ApiError::bad_request(format!("query: {e}")).into()),
                )
                .app_data(
                    web::PathConfig::default().error_handler(|e, _| ApiError::not_found(format!("path: {e}")).into()),
                )
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
                        let res = match std::panic::AssertUnwindSafe(fut).catch_unwind().await {
                            Ok(res) => res?,
                            Err(panic) => {
                                // The panic text is internal: log it, answer a bare 500.
                                tracing::error!(%method, %path, panic = panic_text(&panic), "handler panicked");
                                if let Some(state) = &state {
                                    state.metrics.panicked();
                                }
                                // An error is rendered by its `error_response`: a bare 500 problem.
                                return Err(ApiError::panicked().into());
                            }
                        };
                        tracing::debug!(%method, %path, status = res.status().as_u16(),
                            ms = started.elapsed().as_secs_f64() * 1e3, "request");
                        // actix answers a known path with the wrong method by an empty 405.
                        if res.status() == StatusCode::METHOD_NOT_ALLOWED {
                            let detail = format!("{method} is not allowed on {path}");
                            let problem = ApiError::new(
                                StatusCode::METHOD_NOT_ALLOWED,
                                "method-not-allowed",
                                "Method not allowed",
                                detail,
                            );
                            let mut answer = problem.error_response();
                            if let Some(allow) = routes::allowed_methods(&path) {
                                answer.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
                            }
                            return Ok(res.into_response(answer).map_into_right_body());
                        }
                        Ok(res.map_into_left_body())
                    }
                })
                .configure(|c| routes::configure_role(c, &role))
                .default_service(web::to(routes::not_found))
        })
        .listen(listener)?;
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

/// The message of a caught panic, for the log.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)")
}
