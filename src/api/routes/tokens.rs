//! `POST /v1/tokens` (admin): issue an API token. The token is shown once; only its hash is kept.
//! `GET /v1/whoami` (any token): whom the token acts as.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::auth::{generate_token, register_token, Caller};
use crate::api::body::parse;
use crate::api::problem::{ApiError, Problem};
use crate::api::state::AppState;
use crate::model::check_text;

/// Who the new token is for.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenBody {
    /// The user the token acts as: 1-128 characters, not blank, no control characters
    /// (surrounding whitespace is dropped).
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = r"^[^\x00-\x1F\x7F-\x9F]*[^\s\x00-\x1F\x7F-\x9F][^\x00-\x1F\x7F-\x9F]*$"
    )]
    pub user: String,
    #[serde(default)]
    pub admin: bool,
    /// May drive holds directly.
    #[serde(default)]
    pub service: bool,
}

/// A new token (shown only in this answer).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TokenView {
    pub token: String,
    pub user: String,
    pub admin: bool,
    pub service: bool,
}

/// Issue a token (admin).
#[utoipa::path(post, path = "/v1/tokens", operation_id = "create_token", tag = "tokens", request_body = TokenBody,
    responses(
        (status = 201, body = TokenView),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    caller.require_admin()?;
    let b: TokenBody = parse(&req, &body)?;
    let user = b.user.trim();
    check_text(user).map_err(|e| ApiError::invalid(format!("user: {e}")))?;
    let token = generate_token();
    register_token(state.store.as_ref(), &token, user, b.admin, b.service).await?;
    tracing::info!(user, admin = b.admin, service = b.service, "token issued");
    Ok(HttpResponse::Created().json(TokenView { token, user: user.to_owned(), admin: b.admin, service: b.service }))
}

/// Whom a token acts as, and its roles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WhoAmI {
    pub user: String,
    /// May do everything (everyone's plans, grid changes, tokens).
    pub admin: bool,
    /// May drive holds directly.
    pub service: bool,
}

/// The caller's user and roles (any token; e.g. for a client to show what it may see).
#[utoipa::path(get, path = "/v1/whoami", operation_id = "whoami", tag = "tokens",
    responses((status = 200, body = WhoAmI), (status = 401, body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn whoami(caller: Caller) -> web::Json<WhoAmI> {
    web::Json(WhoAmI { user: caller.user, admin: caller.admin, service: caller.service })
}
