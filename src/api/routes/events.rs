//! `GET /v1/events`: the plans' state changes as Server-Sent Events, read from the durable
//! event log ([`crate::store::PlanEvent`]).
//!
//! Each event is one SSE message: `id:` the event's id, `event:` its type (`plan.committed`,
//! `plan.active`, ...), `data:` the event as JSON. A client that reconnects with
//! `Last-Event-ID: N` (or `?after=N`) gets every event after N, in order, once, even across a
//! restart of the service (the log is the store's). A user sees their own plans' events, an
//! admin everyone's. A comment line every [`HEARTBEAT`] keeps idle connections (and proxies)
//! open.

use std::collections::VecDeque;
use std::time::Duration;

use actix_web::http::header;
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde::Deserialize;
use utoipa::IntoParams;
use uuid::Uuid;

use crate::api::auth::Caller;
use crate::api::problem::ApiError;
use crate::api::state::AppState;
use crate::store::PlanEvent;

/// Between two messages of an idle stream: a comment (`: heartbeat`).
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// Events read from the store at a time.
const BATCH: i64 = 256;

/// `GET /v1/events` query.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Start after this event id (0: from the first); `Last-Event-ID` takes precedence.
    #[param(minimum = 0)]
    pub after: Option<i64>,
    /// Only this plan's events.
    pub plan_id: Option<Uuid>,
}

/// The plans' events as a stream (`text/event-stream`): every event after `Last-Event-ID` (or
/// `after`; with neither, only events from now on), the caller's plans' only unless admin.
#[utoipa::path(
    get, path = "/v1/events", operation_id = "stream_events", tag = "plans", params(EventsQuery,
        ("Last-Event-ID" = Option<i64>, Header, description = "Resume after this event id (what the stream's last `id:` said)")),
    responses(
        (status = 200, description = "Server-Sent Events: `id:` the event id, `event:` its type, `data:` a PlanEvent as JSON; `: heartbeat` comments while idle", body = PlanEvent, content_type = "text/event-stream"),
        (status = 400, description = "Last-Event-ID or after is not an event id"),
    ),
    security(("bearer" = []))
)]
pub async fn stream(
    state: web::Data<AppState>,
    caller: Caller,
    req: HttpRequest,
    query: crate::api::extract::Query<EventsQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.0;
    let resume = match req.headers().get("Last-Event-ID") {
        Some(v) => {
            Some(v.to_str().ok().and_then(|v| v.trim().parse::<i64>().ok()).filter(|n| *n >= 0).ok_or_else(|| {
                ApiError::bad_request("Last-Event-ID must be an event id (a non-negative integer)".to_owned())
            })?)
        }
        None => query.after,
    };
    if resume.is_some_and(|n| n < 0) {
        return Err(ApiError::bad_request("after must be an event id (a non-negative integer)".to_owned()));
    }
    let owner = (!caller.admin).then_some(caller.principal);
    let mut signal = state.store.event_signal();
    signal.borrow_and_update();
    // Without a position: from the newest event on (the log's end now).
    let after = match resume {
        Some(n) => n,
        None => state.store.last_event_id().await?,
    };
    let feed = Feed { state, owner, plan: query.plan_id, after, signal, ready: VecDeque::new(), started: false };
    let body = futures::stream::unfold(feed, |mut feed| async move {
        let chunk = feed.next().await?;
        Some((Ok::<_, std::convert::Infallible>(chunk), feed))
    });
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(body))
}

/// One stream's position and what it has read but not sent.
struct Feed {
    state: web::Data<AppState>,
    owner: Option<Uuid>,
    plan: Option<Uuid>,
    after: i64,
    signal: tokio::sync::watch::Receiver<u64>,
    ready: VecDeque<PlanEvent>,
    started: bool,
}

impl Feed {
    /// The next chunk of the body; `None` ends the stream (the store failed: the client
    /// reconnects with its Last-Event-ID).
    async fn next(&mut self) -> Option<Bytes> {
        if !self.started {
            self.started = true;
            // The client's reconnection delay, and a first byte so that it knows it is heard.
            return Some(Bytes::from_static(b"retry: 2000\n: connected\n\n"));
        }
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(message(&e));
            }
            // Seen before the read: a change after it wakes the wait below.
            self.signal.borrow_and_update();
            let page = match self.state.store.events_after(self.after, self.owner, BATCH).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(error = %e, "event stream: the store failed; ending the stream");
                    return None;
                }
            };
            if let Some(last) = page.last() {
                self.after = last.id;
                self.ready.extend(page.into_iter().filter(|e| self.plan.is_none_or(|p| p == e.plan_id)));
                continue;
            }
            tokio::select! {
                changed = self.signal.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                () = tokio::time::sleep(HEARTBEAT) => return Some(Bytes::from_static(b": heartbeat\n\n")),
            }
        }
    }
}

/// One event as an SSE message.
fn message(e: &PlanEvent) -> Bytes {
    let data = serde_json::to_string(e).expect("an event serialises");
    Bytes::from(format!("id: {}\nevent: {}\ndata: {data}\n\n", e.id, e.kind))
}
