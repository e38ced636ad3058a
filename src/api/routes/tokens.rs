//! `POST /v1/tokens` (admin): issue an API token. The token is shown once; only its hash is kept.
//! `DELETE /v1/tokens/{id}` (admin): revoke a token, at once on every process.
//! `GET /v1/whoami` (any token): whom the token acts as.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::api::auth::{check_principal_name, generate_token, register_token_with, Caller, Roles};
use crate::api::extract::{Admin, Body, Guarded};
use crate::api::problem::ApiError;
use crate::api::state::AppState;

/// Who the new token is for.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenBody {
    /// The user (principal) the token acts as: 1-128 characters, no control characters, no
    /// leading or trailing whitespace (refused, not trimmed), not a reserved name (`admin`,
    /// `service`, `root`, `system`, any case, or anything starting with `@`).
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = r"^[^\s\x00-\x1F\x7F-\x9F@]([^\x00-\x1F\x7F-\x9F]*[^\s\x00-\x1F\x7F-\x9F])?$"
    )]
    pub user: String,
    #[serde(default)]
    pub admin: bool,
    /// May drive holds directly.
    #[serde(default)]
    pub service: bool,
    /// A planner of this deployment (implies `service`): its holds belong to the deployment's
    /// planner principal `@planners`, which every planner credential may drive, so that any
    /// planner finishes another's in-doubt transactions.
    #[serde(default)]
    pub planner: bool,
    /// Refused from this instant on (absent: never expires). Must be in the future.
    pub expires_at: Option<DateTime<Utc>>,
}

/// A new token (shown only in this answer).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TokenView {
    /// The token's id: what `DELETE /v1/tokens/{id}` names.
    pub id: Uuid,
    pub token: String,
    pub user: String,
    pub admin: bool,
    pub service: bool,
    pub planner: bool,
    pub expires_at: Option<DateTime<Utc>>,
}

/// Issue a token (admin).
#[utoipa::path(post, path = "/v1/tokens", operation_id = "create_token", tag = "tokens", request_body = TokenBody,
    responses(
        (status = 201, body = TokenView),
        (status = 403),
    ),
    security(("bearer" = [])))]
pub async fn create(
    state: web::Data<AppState>,
    g: Guarded<Admin, (), Body<TokenBody>>,
) -> Result<HttpResponse, ApiError> {
    let Guarded { caller, body: Body(b), .. } = g;
    check_principal_name(&b.user).map_err(ApiError::invalid)?;
    if b.expires_at.is_some_and(|t| t <= Utc::now()) {
        return Err(ApiError::invalid("expires_at must be in the future"));
    }
    let token = generate_token();
    let roles = Roles { admin: b.admin, service: b.service, planner: b.planner };
    let rec = register_token_with(state.store.as_ref(), &token, &b.user, roles, b.expires_at).await?;
    tracing::info!(target: "audit", by = %caller.user, user = %b.user, id = %rec.id, admin = rec.admin,
        service = rec.service, planner = rec.planner, expires_at = ?rec.expires_at, "token issued");
    Ok(HttpResponse::Created().json(TokenView {
        id: rec.id,
        token,
        user: rec.user,
        admin: rec.admin,
        service: rec.service,
        planner: rec.planner,
        expires_at: rec.expires_at,
    }))
}

/// Revoke a token (admin): refused from now on by every process of the deployment (each
/// process's token cache is dropped through the database's notification; docs/deploy.md).
#[utoipa::path(delete, path = "/v1/tokens/{id}", operation_id = "revoke_token", tag = "tokens",
    params(("id" = Uuid, Path, description = "The token's id (from its creation, or GET /v1/whoami)")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 403),
        (status = 404, description = "No such token, or already revoked"),
    ),
    security(("bearer" = [])))]
pub async fn revoke(
    state: web::Data<AppState>,
    g: Guarded<Admin, web::Path<String>>,
) -> Result<HttpResponse, ApiError> {
    let Guarded { caller, path: id, .. } = g;
    let id: Uuid = id.parse().map_err(|_| ApiError::not_found(format!("no token `{id}`")))?;
    let rec = state.store.revoke_token(id).await?;
    // This process at once; the others through the store's notification.
    state.invalidate_tokens();
    let rec = rec.ok_or_else(|| ApiError::not_found(format!("no live token `{id}`")))?;
    tracing::warn!(target: "audit", by = %caller.user, user = %rec.user, %id, "token revoked");
    Ok(HttpResponse::NoContent().finish())
}

/// Whom a token acts as, and its roles.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WhoAmI {
    pub user: String,
    /// May do everything (everyone's plans, grid changes, tokens).
    pub admin: bool,
    /// May drive holds directly.
    pub service: bool,
    /// A planner of this deployment.
    #[serde(default)]
    pub planner: bool,
    /// The id of the token used (what `DELETE /v1/tokens/{id}` names).
    pub token_id: Option<Uuid>,
}

/// The caller's user and roles (any token; e.g. for a client to show what it may see).
#[utoipa::path(get, path = "/v1/whoami", operation_id = "whoami", tag = "tokens",
    responses((status = 200, body = WhoAmI)),
    security(("bearer" = [])))]
pub async fn whoami(caller: Caller) -> web::Json<WhoAmI> {
    web::Json(WhoAmI {
        user: caller.user,
        admin: caller.admin,
        service: caller.service,
        planner: caller.planner,
        token_id: caller.token_id,
    })
}
