//! What every request goes through before and after its handler ([`around`], wrapped around the
//! whole app by [`crate::api::startup`]): HEAD routed as GET, a panicking handler answered by a
//! bare 500 problem (and counted), the HTTP histogram of `/metrics` and the access log, and two
//! of actix's own answers rewritten as problems (a raw body over the limit: 413; a known path
//! with another method: 405).

use std::future::Future;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{Service, ServiceRequest, ServiceResponse};
use actix_web::http::{header, Method, StatusCode};
use actix_web::{web, ResponseError};
use futures::FutureExt;

use super::config::MAX_BODY_BYTES;
use super::problem::ApiError;
use super::state::AppState;

/// Runs `req` through `srv` (the app) and answers as the module docs say.
///
/// # Errors
/// The app's errors, as they were (observed in the HTTP histogram with no route); a panic of
/// the handler as a 500 problem ([`ApiError::panicked`]).
pub fn around<S, B>(
    mut req: ServiceRequest,
    srv: &S,
) -> impl Future<Output = Result<ServiceResponse<EitherBody<B>>, actix_web::Error>>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error>,
    S::Future: 'static,
    B: MessageBody + 'static,
{
    let method = req.method().clone();
    // HEAD is GET without the body: route it as GET; actix-http's encoder knows the request was
    // HEAD and sends the headers only.
    if method == Method::HEAD {
        req.head_mut().method = Method::GET;
    }
    let path = req.path().to_owned();
    // (The request itself cannot be cloned before routing: actix needs it unique.)
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let started = std::time::Instant::now();
    let fut = srv.call(req);
    async move {
        // Every request in the HTTP histogram, by route pattern (never the raw path) and
        // status; the rewrites below keep the status.
        let observe = |route: Option<&str>, status: StatusCode| {
            if let Some(state) = &state {
                let seconds = started.elapsed().as_secs_f64();
                state.metrics.http_request(method.as_str(), route, status.as_u16(), seconds);
            }
        };
        let res = match std::panic::AssertUnwindSafe(fut).catch_unwind().await {
            Ok(Ok(res)) => res,
            Ok(Err(e)) => {
                observe(None, e.as_response_error().status_code());
                return Err(e);
            }
            Err(panic) => {
                // The panic text is internal: log it, answer a bare 500.
                tracing::error!(%method, %path, panic = panic_text(&*panic), "handler panicked");
                if let Some(state) = &state {
                    state.metrics.panicked();
                }
                observe(None, StatusCode::INTERNAL_SERVER_ERROR);
                // An error is rendered by its `error_response`: a bare 500 problem.
                return Err(ApiError::panicked().into());
            }
        };
        observe(res.request().match_pattern().as_deref(), res.status());
        // The access log: one info line per request.
        tracing::info!(%method, %path, status = res.status().as_u16(),
            ms = started.elapsed().as_secs_f64() * 1e3, "request");
        // The raw body extractor (`web::Bytes`, behind every handler that checks a role before
        // its body) answers a body over the limit with its own text/plain 413: answer a problem
        // like every other error.
        let is_problem = res
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"));
        if res.status() == StatusCode::PAYLOAD_TOO_LARGE && !is_problem {
            let detail = format!("the request body is over the limit of {MAX_BODY_BYTES} bytes");
            let problem =
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "body-too-large", "Request body too large", detail);
            return Ok(res.into_response(problem.error_response()).map_into_right_body());
        }
        // actix answers a known path with the wrong method by an empty 405.
        if res.status() == StatusCode::METHOD_NOT_ALLOWED {
            let answer = super::openapi::method_not_allowed(&method, &path);
            return Ok(res.into_response(answer).map_into_right_body());
        }
        Ok(res.map_into_left_body())
    }
}

/// The message of a caught panic, for the log.
pub fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)")
}

/// Maps the JSON body extractor's errors: syntax -> 400, well-formed JSON of the wrong shape
/// (missing or unknown fields, wrong types) -> 422, too large -> 413, wrong media type -> 415.
pub fn json_error(err: actix_web::error::JsonPayloadError) -> ApiError {
    use actix_web::error::JsonPayloadError as J;
    match &err {
        J::OverflowKnownLength { .. } | J::Overflow { .. } => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body-too-large",
            "Request body too large",
            format!("{err} (limit {} bytes)", MAX_BODY_BYTES),
        ),
        J::ContentType => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "Expected application/json",
            "the body must be JSON with Content-Type: application/json",
        ),
        J::Deserialize(e) if e.is_data() => ApiError::invalid(format!("body: {e}")),
        J::Deserialize(e) => ApiError::bad_request(format!("malformed JSON: {e}")),
        _ => ApiError::bad_request(err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caught_panic_is_read_through_its_box() {
        // `&panic` (a `&Box<dyn Any>`) would be the box itself as `dyn Any`, never a string.
        let boom = std::panic::catch_unwind(|| panic!("boom")).unwrap_err();
        assert_eq!(panic_text(&*boom), "boom");
        let formatted = std::panic::catch_unwind(|| panic!("{} {}", "formatted", 42)).unwrap_err();
        assert_eq!(panic_text(&*formatted), "formatted 42");
    }
}
