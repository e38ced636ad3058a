//! Startup: build the state, bind the listener, run the server.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::{Server, Service};
use actix_web::{web, App, HttpServer};

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
    /// or a generated one) and binds `config.listen`.
    ///
    /// # Errors
    /// The address cannot be bound, or the store refuses the admin token.
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
        let listener = TcpListener::bind(&config.listen)
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.listen))?;
        let port = listener.local_addr()?.port();
        let workers = config.workers;
        let state = web::Data::new(AppState::new(config, grid, store));
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
                .wrap_fn(|req, srv| {
                    let (method, path) = (req.method().clone(), req.path().to_owned());
                    let started = std::time::Instant::now();
                    let fut = srv.call(req);
                    async move {
                        let res = fut.await?;
                        tracing::debug!(%method, %path, status = res.status().as_u16(),
                            ms = started.elapsed().as_secs_f64() * 1e3, "request");
                        Ok(res)
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
