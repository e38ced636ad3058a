//! A planner process's forwarded reads: the GIS's, the NIS's and every LIS's read endpoints,
//! answered by the process that keeps them, through the planner's [`Gateway`].

use actix_web::{web, HttpRequest, HttpResponse};

use crate::api::auth::Caller;
use crate::api::gateway::Gateway;
use crate::api::problem::ApiError;
use crate::api::state::AppState;

/// Registers the forwarded routes under `/v1` (a planner process; see the table in [`crate::api::gateway`]).
pub fn configure(v: &mut web::ServiceConfig) {
    v.route("/sites", web::get().to(to_gis))
        .route("/sites/{id}", web::get().to(to_gis))
        .route("/sites/{id}/availability", web::get().to(to_lis))
        .route("/sites/{id}/reservations", web::get().to(to_lis))
        .route("/network", web::get().to(to_nis))
        .route("/network/route", web::get().to(to_nis))
        .route("/network/reservations", web::get().to(to_nis))
        .route("/network/links/{id}/reservations", web::get().to(to_nis));
}

/// The planner's gateway (registered only in a planner process, which always has one).
fn of(state: &AppState) -> Result<&Gateway, ApiError> {
    state.gateway.as_ref().ok_or_else(|| ApiError::internal("no gateway outside a planner process"))
}

async fn to_gis(req: HttpRequest, state: web::Data<AppState>, _caller: Caller) -> Result<HttpResponse, ApiError> {
    let gateway = of(&state)?;
    gateway.forward(&req, "the GIS", &gateway.remote.gis).await
}

async fn to_nis(req: HttpRequest, state: web::Data<AppState>, _caller: Caller) -> Result<HttpResponse, ApiError> {
    let gateway = of(&state)?;
    gateway.forward(&req, "the NIS", &gateway.remote.nis).await
}

async fn to_lis(
    req: HttpRequest,
    state: web::Data<AppState>,
    _caller: Caller,
    site: web::Path<(String,)>,
) -> Result<HttpResponse, ApiError> {
    let gateway = of(&state)?;
    let site = site.into_inner().0;
    let Some((_, url)) = gateway.remote.lis.iter().find(|(s, _)| *s == site) else {
        return Err(ApiError::not_found(format!("no site `{site}`")));
    };
    gateway.forward(&req, &format!("the LIS of site `{site}`"), url).await
}
