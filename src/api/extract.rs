//! [`JsonBody`]: the JSON body extractor of every REST endpoint that takes a body.
//!
//! `web::Json<T>` lets serde read a struct from a JSON *array* (fields in order) and passes
//! strings with control characters on to the handler. `JsonBody<T>` reads the body with the
//! app's `JsonConfig` (size limit 413, media type 415, syntax 400: `json_error` in `super::startup`),
//! then refuses with 422, before `T` is built:
//! - a body that is not a JSON object;
//! - any string or key containing a control character (U+0000-U+001F, U+007F-U+009F; NUL
//!   cannot be stored by PostgreSQL, and no field of the API has a use for the others);
//!
//! and finally deserialises `T` (wrong shape, missing or unknown fields: 422 naming them).
//!
//! [`Query<T>`] does the same for query strings (400), and [`path_error`] for path segments
//! (404): every deserialisation failure is told in the user's words by [`describe`]: which
//! field (`jobs[0].cpus`, `from`), what was expected, an example, and for a timestamp without
//! a timezone that it is one and how to write it; never the framework's wording ("Query
//! deserialize error: ...", "UUID parsing failed").
//!
//! [`Guarded`] is the prologue of a handler with a role check: the [`Caller`] (401), its
//! [`Role`] (403), the path or query, then the body ([`Body`], by [`super::body::parse`]).

use std::marker::PhantomData;

use actix_web::{dev, web, FromRequest, HttpRequest};
use futures::future::{ready, LocalBoxFuture, Ready};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::auth::{bearer_token, hash_token, Caller};
use super::body::{describe, from_value};
use super::problem::ApiError;
use super::state::AppState;

/// A JSON object body deserialised into `T` (see the module docs for what is refused).
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T> JsonBody<T> {
    /// The body.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::ops::Deref for JsonBody<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Parses a query string into `T`, failures told by [`describe`] (400).
///
/// # Errors
/// 400 [`ApiError::bad_request`] naming the parameter.
pub fn from_query<T: DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        let value = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| *k == field).map(|(_, v)| v.into_owned());
        ApiError::bad_request(format!("query: {}", describe(&field, &e.inner().to_string(), value.as_deref())))
    })
}

/// A query string deserialised into `T`; a failure is a 400 naming the parameter, what it
/// takes and an example ([`describe`]).
#[derive(Debug)]
pub struct Query<T>(pub T);

impl<T> std::ops::Deref for Query<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: DeserializeOwned + 'static> FromRequest for Query<T> {
    type Error = actix_web::Error;
    type Future = Ready<Result<Self, actix_web::Error>>;

    fn from_request(req: &HttpRequest, _: &mut dev::Payload) -> Self::Future {
        ready(from_query(req.query_string()).map(Query).map_err(Into::into))
    }
}

/// The 404 of a path segment that does not parse (a plan or hold id that is not a UUID): the
/// segment, what it should be and an example ([`describe`]).
pub fn path_error(err: &actix_web::error::PathError, req: &HttpRequest) -> ApiError {
    let msg = match err {
        actix_web::error::PathError::Deserialize(e) => e.to_string(),
        other => other.to_string(),
    };
    let uuid_like = |v: &str| uuid::Uuid::parse_str(v).is_ok();
    // The segment at fault: for a UUID failure the first that is not one, else the only one.
    let segs: Vec<(String, String)> = req.match_info().iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
    let bad = if msg.contains("UUID") {
        segs.iter()
            .rev()
            .find(|(k, v)| k.contains("id") && !uuid_like(v))
            .or_else(|| segs.iter().find(|(_, v)| !uuid_like(v)))
    } else {
        segs.last()
    };
    let path = req.path();
    let what = if path.starts_with("/v1/plans") {
        "a plan id"
    } else if path.contains("/holds") {
        "a hold id"
    } else {
        "an id"
    };
    match bad {
        Some((_, v)) if msg.contains("UUID") => {
            let tail = if what == "a plan id" {
                format!("; to find plans by their request id: GET /v1/plans?request_id={v}")
            } else {
                String::new()
            };
            ApiError::not_found(format!(
                "path: `{v}` is not {what}: {what} is a UUID such as 1b4e28ba-2fa1-11d2-883f-0016d3cca427{tail}"
            ))
        }
        Some((k, v)) => ApiError::not_found(format!("path: {}", describe(k, &msg, Some(v)))),
        None => ApiError::not_found(format!("path: {}", describe("", &msg, None))),
    }
}

impl<T: DeserializeOwned + 'static> FromRequest for JsonBody<T> {
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Self, actix_web::Error>>;

    fn from_request(req: &HttpRequest, payload: &mut dev::Payload) -> Self::Future {
        let json = web::Json::<Value>::from_request(req, payload);
        Box::pin(async move {
            let value = json.await?.into_inner();
            Ok(JsonBody(from_value(value)?))
        })
    }
}

/// A role a [`Guarded`] request's caller must have, checked once the caller is known and
/// before the body is parsed.
pub trait Role {
    /// `Ok` if `caller` has the role.
    ///
    /// # Errors
    /// 403 [`ApiError::forbidden`] (the texts of [`Caller::require_admin`] and
    /// [`Caller::require_service`]).
    fn check(caller: &Caller) -> Result<(), ApiError>;
}

/// Any authenticated caller (a valid token or client certificate).
#[derive(Debug)]
pub struct Anyone;

/// An admin ([`Caller::require_admin`]).
#[derive(Debug)]
pub struct Admin;

/// A service, planner or admin ([`Caller::require_service`]).
#[derive(Debug)]
pub struct Service;

impl Role for Anyone {
    fn check(_: &Caller) -> Result<(), ApiError> {
        Ok(())
    }
}

impl Role for Admin {
    fn check(caller: &Caller) -> Result<(), ApiError> {
        caller.require_admin()
    }
}

impl Role for Service {
    fn check(caller: &Caller) -> Result<(), ApiError> {
        caller.require_service()
    }
}

/// What a [`Guarded`] request carries besides its caller and path: read with the caller, made
/// into `Self` only after the role check.
pub trait Content: Sized {
    /// What is extracted from the request (`()`: nothing; [`web::Bytes`]: the body).
    type Raw: FromRequest + 'static;

    /// `Self` from what was extracted.
    ///
    /// # Errors
    /// As [`super::body::parse`] for a JSON body.
    fn parse(req: &HttpRequest, raw: Self::Raw) -> Result<Self, ApiError>;
}

/// No body: the body is not read.
impl Content for () {
    type Raw = ();
    fn parse(_: &HttpRequest, (): ()) -> Result<Self, ApiError> {
        Ok(())
    }
}

/// The raw body, for a handler that parses it itself after checks of its own.
impl Content for web::Bytes {
    type Raw = web::Bytes;
    fn parse(_: &HttpRequest, raw: web::Bytes) -> Result<Self, ApiError> {
        Ok(raw)
    }
}

/// A JSON body parsed into `T` by [`super::body::parse`] (415 not JSON, 400 malformed, 422
/// wrong shape).
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<T: DeserializeOwned> Content for Body<T> {
    type Raw = web::Bytes;
    fn parse(req: &HttpRequest, raw: web::Bytes) -> Result<Self, ApiError> {
        super::body::parse(req, &raw).map(Body)
    }
}

/// The prologue of a handler with a role check: the authenticated [`Caller`] (401), having
/// role `R` (403), the path (or any other extractor, e.g. `(web::Path<String>, Query<Q>)`;
/// `()`: none) and the payload `B` (`()`: no body; [`Body<T>`]: a JSON body, parsed only once
/// the role is checked).
///
/// The caller, `P` and the body are extracted concurrently, as the handler's own arguments
/// would be (so a failure of `P`, a 404 for a path segment or a 400 for a query, comes as it
/// did before the role check); then the role is checked, then the body parsed.
#[derive(Debug)]
pub struct Guarded<R, P = (), B = ()> {
    /// The authenticated caller, of role `R`.
    pub caller: Caller,
    /// What `P` extracted.
    pub path: P,
    /// The payload.
    pub body: B,
    role: PhantomData<R>,
}

impl<R: Role, P: FromRequest + 'static, B: Content + 'static> FromRequest for Guarded<R, P, B> {
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Self, actix_web::Error>>;

    fn from_request(req: &HttpRequest, payload: &mut dev::Payload) -> Self::Future {
        let parts = <(Caller, P, B::Raw)>::from_request(req, payload);
        let req = req.clone();
        Box::pin(async move {
            let (caller, path, raw) = parts.await?;
            R::check(&caller)?;
            let body = B::parse(&req, raw)?;
            Ok(Guarded { caller, path, body, role: PhantomData })
        })
    }
}

/// The caller of a request: its bearer token's principal, else (on a listener that trusts
/// them) the planner principal of a verified client certificate; 401 otherwise.
impl FromRequest for Caller {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut dev::Payload) -> Self::Future {
        let state = req.app_data::<web::Data<AppState>>().cloned();
        // A verified client certificate, if the listener trusts them as planner principals.
        let peer = req.conn_data::<super::peer::PeerName>().cloned().filter(|_| {
            state.as_ref().is_some_and(|s| s.config.trust_client_certificates && s.config.tls_client_ca.is_some())
        });
        let mut headers = req.headers().get_all(actix_web::http::header::AUTHORIZATION);
        let header = headers.next().map(|v| v.to_str().map(str::to_owned));
        let several = headers.next().is_some();
        Box::pin(async move {
            let state = state.ok_or_else(|| ApiError::internal("application state missing"))?;
            if several {
                // Which one would be meant? Neither is guessed (the first used to win).
                return Err(ApiError::bad_request("more than one Authorization header"));
            }
            let by_certificate = |why: ApiError| match &peer {
                Some(p) => Ok(Caller::certified(&p.0)),
                None => Err(why),
            };
            let value = match header {
                None => return by_certificate(ApiError::unauthorized("missing Authorization: Bearer <token> header")),
                Some(Err(_)) => return Err(ApiError::unauthorized("Authorization header is not ASCII")),
                Some(Ok(v)) => v,
            };
            let token =
                bearer_token(&value).ok_or_else(|| ApiError::unauthorized("expected Authorization: Bearer <token>"))?;
            let rec = state.token(&hash_token(token)).await?;
            let Some(rec) = rec else { return by_certificate(ApiError::unauthorized("unknown or revoked token")) };
            if rec.expired(chrono::Utc::now()) {
                return Err(ApiError::unauthorized("the token has expired"));
            }
            Ok(Caller {
                user: rec.user,
                principal: rec.principal,
                certified: false,
                admin: rec.admin,
                service: rec.service,
                planner: rec.planner,
                token_id: Some(rec.id),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Two {
        a: String,
        b: Vec<String>,
    }

    #[test]
    fn objects_only_and_no_control_characters() {
        let ok: Two = from_value(serde_json::json!({"a": "x", "b": ["y"]})).unwrap();
        assert_eq!(ok.b, ["y"]);
        let e = from_value::<Two>(serde_json::json!(["x", ["y"]])).unwrap_err();
        assert!(e.detail.contains("expected a JSON object"), "{e}");
        let e = from_value::<Two>(serde_json::json!({"a": "x", "b": ["y", "z\u{0}"]})).unwrap_err();
        assert!(e.detail.contains("$.b[1] contains a control character"), "{e}");
        let e = from_value::<Two>(serde_json::json!({"a\u{7f}": "x"})).unwrap_err();
        assert!(e.detail.contains("control character"), "{e}");
        let e = from_value::<Two>(serde_json::json!({"a": "x"})).unwrap_err();
        assert!(e.detail.contains("`b` is missing; it is required"), "{e}");
        assert_eq!(e.status.as_u16(), 422);
    }

    #[test]
    fn failures_are_described_in_the_users_words() {
        let d = describe("deadline", "premature end of input", Some("2026-11-27T00:00:00"));
        assert!(d.contains("is a naive timestamp") && d.contains("`2026-11-27T00:00:00Z`"), "{d}");
        let d = describe("from", "input contains invalid characters", Some("yesterday"));
        assert!(d.contains("`from` = `yesterday` is not a timestamp") && d.contains("2030-01-01T12:00:00Z"), "{d}");
        let d = describe(".", "missing field `from`", None);
        assert_eq!(
            d,
            "`from` is missing; it is required: an RFC 3339 timestamp with a timezone, e.g. 2030-01-01T12:00:00Z"
        );
        let d = describe("jobs[0]", "missing field `cpus`", None);
        assert!(d.starts_with("`jobs[0].cpus` is missing"), "{d}");
        let d = describe("jobs[2].cpus", "invalid type: string \"x\", expected u32", Some("x"));
        assert_eq!(d, "`jobs[2].cpus`: expected a whole number of CPUs, e.g. 16, got string \"x\"");
        let d = describe("weight", "invalid value: integer `-1`, expected u32", Some("-1"));
        assert_eq!(d, "`weight`: expected a whole number >= 0, got integer `-1`");
        let d = describe("cpus", "invalid digit found in string", Some("many"));
        assert_eq!(d, "`cpus` = `many`: expected a whole number of CPUs, e.g. 16");
        let d = describe("dry_run", "provided string was not `true` or `false`", Some("yes"));
        assert_eq!(d, "`dry_run` = `yes`: expected true or false");
        let d = describe("policy", "unknown variant `fast`, expected one of `time`, `cost`", Some("fast"));
        assert_eq!(d, "`policy` = `fast` is not valid: expected one of `time`, `cost`");
        let d = describe(".", "unknown field `user`, expected one of `id`, `deadline`", None);
        assert_eq!(d, "unknown field `user`; the fields here are `id`, `deadline`");
    }

    #[test]
    fn queries_name_the_parameter() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Q {
            from: chrono::DateTime<chrono::Utc>,
            cpus: u32,
        }
        let e = from_query::<Q>("cpus=4").unwrap_err();
        assert!(e.detail.starts_with("query: `from` is missing"), "{e}");
        assert_eq!(e.status.as_u16(), 400);
        let e = from_query::<Q>("from=2026-11-27T00:00:00&cpus=4").unwrap_err();
        assert!(e.detail.contains("naive timestamp"), "{e}");
        let e = from_query::<Q>("from=2026-11-27T00:00:00Z&cpus=-4").unwrap_err();
        assert!(e.detail.contains("`cpus` = `-4`"), "{e}");
        assert_eq!(from_query::<Q>("from=2026-11-27T00:00:00%2B01:00&cpus=4").unwrap().cpus, 4);
    }
}
