//! JSON bodies parsed only after the caller is authorised.
//!
//! actix polls a handler's extractors concurrently, so a `web::Json<T>` next to the
//! [`Caller`](super::auth::Caller) may fail (and answer a schema hint) before the caller's role
//! is checked. Handlers with a role check therefore take the raw body and parse it with
//! [`parse`] once the role is checked, which answers exactly as the JSON extractor would: most
//! do so through [`super::extract::Guarded`] (role, path and `Body<T>` in one extractor), the
//! few whose checks come between (idempotency keys, admission) by hand.

use actix_web::http::StatusCode;
use actix_web::mime;
use actix_web::HttpRequest;
use serde::de::DeserializeOwned;

use super::problem::ApiError;

/// Parses `body` as the JSON of a `T`.
///
/// # Errors
/// 415 when the request's `Content-Type` is not JSON (`application/json` or `+json`), 400 for
/// malformed JSON (an empty body included), 422 for well-formed JSON of the wrong shape
/// (not an object, missing or unknown fields, wrong types) or with a control character in a
/// string (the rules of [`super::extract::JsonBody`]).
pub fn parse<T: DeserializeOwned>(req: &HttpRequest, body: &[u8]) -> Result<T, ApiError> {
    let json = req
        .headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<mime::Mime>().ok())
        .is_some_and(|m| m.subtype() == mime::JSON || m.suffix() == Some(mime::JSON));
    if !json {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "Expected application/json",
            "the body must be JSON with Content-Type: application/json",
        ));
    }
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
    super::extract::from_value(value)
}

/// Like [`parse`], but an empty body is `None` (an optional body, such as that of the
/// participant protocol's commit / abort / release, which only `extend` needs).
///
/// # Errors
/// As [`parse`] for a non-empty body.
pub fn parse_optional<T: DeserializeOwned>(req: &HttpRequest, body: &[u8]) -> Result<Option<T>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    parse(req, body).map(Some)
}
