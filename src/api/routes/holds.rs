//! `/v1/holds/{id}`: phase 2 of two-phase commit for holds made through the API, and lease
//! extension. Every call is idempotent (commit twice, abort twice, extend again), is durable
//! in the store before it answers, and needs the token of the principal that prepared the hold
//! (or an admin's: logged as an audit line); another principal gets 403, before the body is
//! read. Holds made by the broker's own planners are not listed here: they
//! are committed or aborted by the planner within the request.

use std::sync::Arc;

use actix_web::{web, HttpRequest};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::auth::Caller;
use crate::api::body::parse;
use crate::api::extract::{Guarded, Service};
use crate::api::problem::ApiError;
use crate::api::state::AppState;
use crate::model::from_time;
use crate::protocol::{Hold, HoldId, HoldLifecycle};

/// A hold: its id and lease end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HoldView {
    pub id: HoldId,
    pub expires_at: DateTime<Utc>,
}

impl From<Hold> for HoldView {
    fn from(h: Hold) -> Self {
        HoldView { id: h.id, expires_at: from_time(h.expires_at) }
    }
}

/// What became of a hold after commit or abort.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HoldResult {
    pub id: HoldId,
    /// `committed` or `aborted`.
    pub state: String,
}

/// `POST /v1/holds/{id}/extend` body.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtendBody {
    /// New lease from now, seconds (1 ..= the horizon, `--horizon-days` x 86400).
    #[schema(minimum = 1)]
    pub lease_s: i64,
}

/// The (journaled) participant of a hold made through the API, once `caller` is found to be
/// allowed to `verb` it ([`AppState::authorize_hold`]: its owner, or an admin); 404 for an
/// unknown hold, 403 for another principal's.
fn owner(state: &AppState, caller: &Caller, id: HoldId, verb: &str) -> Result<Arc<dyn HoldLifecycle>, ApiError> {
    let r = state.holds.lock().expect("hold registry").get(&id).cloned();
    let r = r.ok_or_else(|| ApiError::not_found(format!("unknown hold {id}")))?;
    state.authorize_hold(caller, &r, id, verb)?;
    state.journaled_holds(&r, true, Some(caller))
}

/// Commit a hold (idempotent).
#[utoipa::path(post, path = "/v1/holds/{id}/commit", operation_id = "commit_hold", tag = "holds", params(("id" = HoldId, Path)),
    responses(
        (status = 200, body = HoldResult),
        (status = 403, description = "Not a service or admin token, or the hold of another principal"),
        (status = 409, description = "Expired or aborted"),
        (status = 503, description = "The store could not make the change durable (a refused prepare promised nothing); retry"),
    ),
    security(("bearer" = [])))]
pub async fn commit(
    state: web::Data<AppState>,
    g: Guarded<Service, web::Path<HoldId>>,
) -> Result<web::Json<HoldResult>, ApiError> {
    let id = g.path;
    owner(&state, &g.caller, *id, "commit")?.commit(*id).await?;
    Ok(web::Json(HoldResult { id: *id, state: "committed".into() }))
}

/// Abort a hold (idempotent; aborting an expired hold is fine).
#[utoipa::path(post, path = "/v1/holds/{id}/abort", operation_id = "abort_hold", tag = "holds", params(("id" = HoldId, Path)),
    responses(
        (status = 200, body = HoldResult),
        (status = 403, description = "Not a service or admin token, or the hold of another principal"),
        (status = 409, description = "Already committed"),
        (status = 503, description = "The store could not make the change durable (a refused prepare promised nothing); retry"),
    ),
    security(("bearer" = [])))]
pub async fn abort(
    state: web::Data<AppState>,
    g: Guarded<Service, web::Path<HoldId>>,
) -> Result<web::Json<HoldResult>, ApiError> {
    let id = g.path;
    owner(&state, &g.caller, *id, "abort")?.abort(*id).await?;
    state.metrics.aborted();
    Ok(web::Json(HoldResult { id: *id, state: "aborted".into() }))
}

/// Give a live hold a new lease of `lease_s` seconds from now.
#[utoipa::path(post, path = "/v1/holds/{id}/extend", operation_id = "extend_hold", tag = "holds", params(("id" = HoldId, Path)), request_body = ExtendBody,
    responses(
        (status = 200, body = HoldView),
        (status = 403, description = "Not a service or admin token, or the hold of another principal"),
        (status = 409, description = "Expired, aborted or committed"),
        (status = 503, description = "The store could not make the change durable (a refused prepare promised nothing); retry"),
        (status = 422, description = "lease_s out of range"),
    ),
    security(("bearer" = [])))]
pub async fn extend(
    state: web::Data<AppState>,
    g: Guarded<Service, web::Path<HoldId>, web::Bytes>,
    req: HttpRequest,
) -> Result<web::Json<HoldView>, ApiError> {
    let id = g.path;
    // The hold's owner is checked before its body is read.
    let p = owner(&state, &g.caller, *id, "extend")?;
    let body: ExtendBody = parse(&req, &g.body)?;
    if body.lease_s <= 0 || body.lease_s > state.config.horizon_s() {
        return Err(ApiError::invalid(format!(
            "lease_s must be in 1..={} (got {})",
            state.config.horizon_s(),
            body.lease_s
        )));
    }
    let hold = p.extend(*id, body.lease_s).await?;
    Ok(web::Json(HoldView::from(hold)))
}
