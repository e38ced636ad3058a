//! Bearer API tokens.
//!
//! A token is `cs_` + 64 hex digits (256 random bits); the store keeps only its SHA-256, so a
//! leaked store leaks no usable token. Roles: a **user** sees and cancels only their own plans;
//! a **service** token (a planner or another broker) may also drive holds directly; an
//! **admin** may do everything (grid changes, everyone's plans, new tokens).

use actix_web::{dev::Payload, web, FromRequest, HttpRequest};
use futures::future::LocalBoxFuture;
use rand::RngCore;
use sha2::{Digest, Sha256};

use super::problem::ApiError;
use super::state::AppState;
use crate::store::{Store, StoreError, TokenRecord};

/// A fresh random token.
pub fn generate_token() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("cs_{}", hex::encode(bytes))
}

/// Hex SHA-256 of a token: the only form the store keeps.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Stores a token for `user` with the given roles.
pub async fn register_token(
    store: &dyn Store,
    token: &str,
    user: &str,
    admin: bool,
    service: bool,
) -> Result<(), StoreError> {
    store.insert_token(TokenRecord { hash: hash_token(token), user: user.to_owned(), admin, service }).await
}

/// Generates a token for `user`, stores its hash and returns the token (the only time it is
/// seen in clear). Behind `coreserve token create`.
pub async fn create_token(store: &dyn Store, user: &str, admin: bool, service: bool) -> Result<String, StoreError> {
    let token = generate_token();
    register_token(store, &token, user, admin, service).await?;
    Ok(token)
}

/// The token of an `Authorization` header value `Bearer <token>`: the scheme name is
/// case-insensitive (RFC 9110 section 11.1), surrounding whitespace is ignored; `None` for
/// another scheme or an empty token.
pub fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The authenticated caller of a request: extract it in a handler to require a valid token
/// (401 without one).
#[derive(Debug, Clone)]
pub struct Caller {
    pub user: String,
    pub admin: bool,
    pub service: bool,
}

impl Caller {
    /// 403 unless admin.
    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.admin {
            Ok(())
        } else {
            Err(ApiError::forbidden("this operation needs an admin token"))
        }
    }

    /// 403 unless service or admin.
    pub fn require_service(&self) -> Result<(), ApiError> {
        if self.admin || self.service {
            Ok(())
        } else {
            Err(ApiError::forbidden("hold operations need a service or admin token"))
        }
    }

    /// May this caller see and cancel a plan of `owner`?
    pub fn may_access(&self, owner: &str) -> bool {
        self.admin || self.user == owner
    }
}

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = req.app_data::<web::Data<AppState>>().cloned();
        let header = req.headers().get(actix_web::http::header::AUTHORIZATION).map(|v| v.to_str().map(str::to_owned));
        Box::pin(async move {
            let state = state.ok_or_else(|| ApiError::internal("application state missing"))?;
            let value = match header {
                None => return Err(ApiError::unauthorized("missing Authorization: Bearer <token> header")),
                Some(Err(_)) => return Err(ApiError::unauthorized("Authorization header is not ASCII")),
                Some(Ok(v)) => v,
            };
            let token =
                bearer_token(&value).ok_or_else(|| ApiError::unauthorized("expected Authorization: Bearer <token>"))?;
            let rec = state.token(&hash_token(token)).await?;
            let rec = rec.ok_or_else(|| ApiError::unauthorized("unknown token"))?;
            Ok(Caller { user: rec.user, admin: rec.admin, service: rec.service })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("BEARER  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearer"), None);
    }
}
