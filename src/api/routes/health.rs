//! Probes and metrics (no token needed).

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::problem::ApiError;
use crate::api::state::AppState;

/// A probe's answer.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Health {
    pub status: String,
    /// The store kind (`memory`), on `/readyz`.
    pub store: Option<String>,
}

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "ops", responses((status = 200, body = Health)))]
pub async fn healthz() -> web::Json<Health> {
    web::Json(Health { status: "ok".into(), store: None })
}

/// How long readiness waits for the store: below the probe timeouts of load balancers (a
/// PostgreSQL that is down otherwise holds the answer for the pool's 10 s).
pub const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Readiness: the store answers (within 1 s, else 503).
#[utoipa::path(get, path = "/readyz", tag = "ops",
    responses((status = 200, body = Health), (status = 503)))]
pub async fn readyz(state: web::Data<AppState>) -> Result<web::Json<Health>, ApiError> {
    match tokio::time::timeout(READY_TIMEOUT, state.store.ping()).await {
        Ok(answer) => answer?,
        Err(_) => {
            tracing::warn!("readiness: the store did not answer within 1 s");
            return Err(ApiError::new(
                actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
                "store-unavailable",
                "The store is unavailable",
                "the store did not answer within 1 s; retry later",
            )
            .retry_after(1));
        }
    }
    Ok(web::Json(Health { status: "ready".into(), store: Some(state.store.kind().into()) }))
}

/// Prometheus text exposition.
#[utoipa::path(get, path = "/metrics", tag = "ops", responses((status = 200, description = "Prometheus text format 0.0.4", body = String, content_type = "text/plain")))]
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    let mut text = state.metrics.render(state.participants.holds_outstanding());
    text.push_str(&state.participants.nis.dataplane_metrics());
    crate::api::metrics::render_pool(&mut text, state.store.pool_state());
    crate::api::metrics::render_sites(&mut text, &site_loads(&state));
    HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(text)
}

/// The CPUs booked now at each site this process keeps: every site all-in-one, its own in a
/// `lis` process, none in the other roles (their calendars are elsewhere).
fn site_loads(state: &AppState) -> Vec<crate::api::metrics::SiteLoad> {
    use crate::api::config::Role;
    let now = state.now();
    let mut loads: Vec<_> = state
        .participants
        .lis
        .iter()
        .filter(|(id, _)| match &state.config.role {
            Role::All => true,
            Role::Lis { site } => site == id.as_str(),
            _ => false,
        })
        .map(|(id, lis)| crate::api::metrics::SiteLoad {
            site: id.to_string(),
            cpus: u64::from(lis.site().cpus),
            booked: lis.usage_at(now),
        })
        .collect();
    loads.sort_by(|a, b| a.site.cmp(&b.site));
    loads
}
