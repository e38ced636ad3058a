//! `/v1/participant/...`: the participant protocol (query, prepare, commit, abort, release)
//! and the GIS candidate lookup, spoken by remote planners ([`crate::protocol::http`]).
//! Bodies and answers are the protocol's own serde types; every call needs a service or admin
//! token. Errors are problem bodies with a `participant_error` field carrying the exact error.
//! Every change is journaled in the store before it is answered ([`crate::protocol::Journaled`]):
//! a prepare-OK survives this process's crash until its lease ends.
//!
//! - `POST /v1/participant/sites/{site}/query` and `/prepare`, and
//!   `POST /v1/participant/sites/{site}/holds/{id}/{commit|abort|release|extend}` (a LIS);
//! - the same under `/v1/participant/network` (the NIS);
//! - `POST /v1/participant/gis/candidates` (the GIS; body: a compute demand).

use std::sync::Arc;

use actix_web::{web, HttpResponse};
use uuid::Uuid;

use crate::api::auth::Caller;
use crate::api::problem::ApiError;
use crate::api::state::AppState;
use crate::model::{ComputeDemand, SiteId};
use crate::protocol::http::Extend;
use crate::protocol::{Availability, AvailabilityQuery, Catalogue, Hold, HoldRequest, Participant, ParticipantRef};

/// Registers the LIS endpoints (every site of this process).
pub fn configure_sites(cfg: &mut web::ServiceConfig) {
    cfg.route("/participant/sites/{site}/query", web::post().to(site_query))
        .route("/participant/sites/{site}/prepare", web::post().to(site_prepare))
        .route("/participant/sites/{site}/holds/{id}/{verb}", web::post().to(site_lifecycle));
}

/// Registers the NIS endpoints.
pub fn configure_network(cfg: &mut web::ServiceConfig) {
    cfg.route("/participant/network/query", web::post().to(net_query))
        .route("/participant/network/prepare", web::post().to(net_prepare))
        .route("/participant/network/holds/{id}/{verb}", web::post().to(net_lifecycle));
}

/// Registers the GIS endpoint.
pub fn configure_gis(cfg: &mut web::ServiceConfig) {
    cfg.route("/participant/gis/candidates", web::post().to(candidates));
}

/// The journaled LIS of `id`, or 404.
fn site(state: &AppState, id: &str) -> Result<Arc<dyn Participant>, ApiError> {
    state.journaled(&ParticipantRef::Site(id.to_owned()), false)
}

/// The journaled NIS, or 404.
fn network(state: &AppState) -> Result<Arc<dyn Participant>, ApiError> {
    state.journaled(&ParticipantRef::Network, false)
}

async fn lifecycle(
    p: Arc<dyn Participant>,
    id: Uuid,
    verb: &str,
    body: Option<web::Json<Extend>>,
) -> Result<HttpResponse, ApiError> {
    match (verb, body) {
        ("extend", Some(b)) => return Ok(HttpResponse::Ok().json(p.extend(id, b.lease_s).await?)),
        ("extend", None) => return Err(ApiError::invalid("extend needs a body {\"lease_s\": N}")),
        ("commit", _) => p.commit(id).await?,
        ("abort", _) => p.abort(id).await?,
        ("release", _) => p.release(id).await?,
        _ => return Err(ApiError::not_found(format!("unknown hold operation `{verb}`"))),
    }
    Ok(HttpResponse::NoContent().finish())
}

/// LIS query.
pub async fn site_query(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    q: web::Json<AvailabilityQuery>,
) -> Result<web::Json<Availability>, ApiError> {
    caller.require_service()?;
    Ok(web::Json(site(&state, &id)?.query(&q).await?))
}

/// LIS prepare.
pub async fn site_prepare(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    req: web::Json<HoldRequest>,
) -> Result<web::Json<Hold>, ApiError> {
    caller.require_service()?;
    Ok(web::Json(site(&state, &id)?.prepare(&req).await?))
}

/// LIS commit / abort / release / extend.
pub async fn site_lifecycle(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, Uuid, String)>,
    body: Option<web::Json<Extend>>,
) -> Result<HttpResponse, ApiError> {
    caller.require_service()?;
    let (s, id, verb) = path.into_inner();
    lifecycle(site(&state, &s)?, id, &verb, body).await
}

/// NIS query.
pub async fn net_query(
    state: web::Data<AppState>,
    caller: Caller,
    q: web::Json<AvailabilityQuery>,
) -> Result<web::Json<Availability>, ApiError> {
    caller.require_service()?;
    Ok(web::Json(network(&state)?.query(&q).await?))
}

/// NIS prepare.
pub async fn net_prepare(
    state: web::Data<AppState>,
    caller: Caller,
    req: web::Json<HoldRequest>,
) -> Result<web::Json<Hold>, ApiError> {
    caller.require_service()?;
    Ok(web::Json(network(&state)?.prepare(&req).await?))
}

/// NIS commit / abort / release / extend.
pub async fn net_lifecycle(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(Uuid, String)>,
    body: Option<web::Json<Extend>>,
) -> Result<HttpResponse, ApiError> {
    caller.require_service()?;
    let (id, verb) = path.into_inner();
    lifecycle(network(&state)?, id, &verb, body).await
}

/// GIS: candidate sites of a compute demand, sorted by id.
pub async fn candidates(
    state: web::Data<AppState>,
    caller: Caller,
    demand: web::Json<ComputeDemand>,
) -> Result<web::Json<Vec<SiteId>>, ApiError> {
    caller.require_service()?;
    Ok(web::Json(state.participants.gis.candidates(&demand).await?))
}
