//! Errors as RFC 9457 problem details (`application/problem+json`).
//!
//! Every handler returns `Result<_, ApiError>`; an [`ApiError`] renders as
//! `{"type","title","status","detail"}`. `type` is a URN per kind of problem
//! (`urn:coreserve:problem:<slug>`), stable for clients to match on; `title` is the short
//! human summary of that kind and `detail` this occurrence's explanation.
//!
//! The library's typed errors map here, in one place ([`From`] impls):
//! request and grid validation -> 422; unknown hold / site / link -> 404; hold lifecycle
//! conflicts (expired, aborted, already committed, not committed) and capacity -> 409;
//! malformed messages -> 400.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::model::{GridError, RequestError};
use crate::protocol::ParticipantError;
use crate::store::StoreError;

/// The media type of problem bodies.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// An RFC 9457 problem details body.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Problem {
    /// URI of the problem kind: `urn:coreserve:problem:<slug>`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Short summary of the problem kind.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong this time.
    pub detail: String,
    /// Errors of the participant protocol: the exact error as an object tagged by `kind`, its
    /// data in `about` (e.g. `{"kind": "hold_expired", "about": "<id>"}`), read by remote
    /// planners; absent otherwise.
    #[schema(value_type = Option<Object>)]
    pub participant_error: Option<ParticipantError>,
}

/// An error answer of the API.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub slug: &'static str,
    pub title: &'static str,
    pub detail: String,
    /// The participant error this answer reports, if any (rendered as `participant_error`).
    pub participant_error: Option<Box<ParticipantError>>,
    /// Seconds after which a retry may succeed (the `Retry-After` header), if any.
    pub retry_after_s: Option<u64>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status.as_u16(), self.slug, self.detail)
    }
}

impl ApiError {
    pub fn new(status: StatusCode, slug: &'static str, title: &'static str, detail: impl Into<String>) -> Self {
        ApiError { status, slug, title, detail: detail.into(), participant_error: None, retry_after_s: None }
    }
    /// The same answer with a `Retry-After: seconds` header.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after_s = Some(seconds);
        self
    }
    /// 400 with `detail` (a message or an error) as the problem's detail.
    pub fn bad_request(detail: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad-request", "Malformed request", detail.to_string())
    }
    /// 422 with `detail` (a message or an error) as the problem's detail.
    pub fn invalid(detail: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid-request", "The request is not valid", detail.to_string())
    }
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", "No such resource", detail)
    }
    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", "Authentication required", detail)
    }
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", "Not allowed", detail)
    }
    pub fn conflict(slug: &'static str, title: &'static str, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, slug, title, detail)
    }
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "Internal error", detail)
    }
    /// 500 for a handler (or a task it awaited) that panicked: no internal text in the body
    /// (the panic message goes to the log); counted as `coreserve_handler_panics_total`.
    pub fn panicked() -> Self {
        Self::internal("the server failed while handling this request; it was logged")
    }

    /// The body.
    pub fn problem(&self) -> Problem {
        Problem {
            type_: format!("urn:coreserve:problem:{}", self.slug),
            title: self.title.to_owned(),
            status: self.status.as_u16(),
            detail: self.detail.clone(),
            participant_error: self.participant_error.as_deref().cloned(),
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut r = HttpResponse::build(self.status);
        r.insert_header((header::CONTENT_TYPE, PROBLEM_JSON));
        if self.status == StatusCode::UNAUTHORIZED {
            r.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
        }
        if let Some(s) = self.retry_after_s {
            r.insert_header((header::RETRY_AFTER, s.to_string()));
        }
        r.body(serde_json::to_string(&self.problem()).expect("a problem serialises"))
    }
}

impl From<RequestError> for ApiError {
    fn from(e: RequestError) -> Self {
        ApiError::invalid(e)
    }
}

impl From<GridError> for ApiError {
    fn from(e: GridError) -> Self {
        ApiError::invalid(e)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        // The store's own text (SQL errors) is logged, not sent: it is internal.
        tracing::error!(error = %e, "store failure");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store-unavailable",
            "The store is unavailable",
            "the store could not complete the operation; retry later (the server log has the cause)",
        )
    }
}

impl From<ParticipantError> for ApiError {
    /// Status, slug and title from the protocol's one table ([`ParticipantError::problem_kind`]).
    fn from(e: ParticipantError) -> Self {
        let kind = e.problem_kind();
        let status = StatusCode::from_u16(kind.status).expect("a valid status in the table");
        let mut detail = e.to_string();
        if let ParticipantError::NotOwner(_) = e {
            detail
                .push_str(": the plan was booked through another planner's credential; cancel it through that planner");
        }
        let mut err = ApiError::new(status, kind.slug, kind.title, detail);
        if let ParticipantError::SchedulerUnavailable { .. } = e {
            err = err.retry_after(5);
        }
        err.participant_error = Some(Box::new(e));
        err
    }
}
