//! `/v1/webhooks`: a user's webhooks (where the events of their plans are POSTed; an admin's
//! get every user's), and each one's delivery log. Delivery itself is
//! [`crate::api::webhooks`].

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::api::auth::Caller;
use crate::api::extract::{Anyone, Body, Guarded};
use crate::api::problem::ApiError;
use crate::api::state::AppState;
use crate::api::webhooks::new_secret;
use crate::store::{DeliveryRecord, WebhookInsert, WebhookRecord};

/// A new webhook.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"url": "https://ci.example.org/hooks/coreserve"}))]
pub struct WebhookBody {
    /// Where to POST the events: an absolute `http` or `https` URL, at most 2048 characters;
    /// or `nats://host:port/<subject>` to publish them to NATS JetStream on
    /// `<subject>.<type>` (a stream must capture those subjects). Its host must be, and resolve
    /// to, public addresses only (no loopback, private, link-local, unique-local, multicast or
    /// unspecified address), unless the service's admin allowed it (`--webhook-allow`).
    #[schema(max_length = 2048)]
    pub url: String,
    /// The key of the deliveries' signatures (16-256 printable characters); absent: one is
    /// generated, and shown once in the answer.
    #[schema(min_length = 16, max_length = 256)]
    pub secret: Option<String>,
}

/// A webhook as its owner sees it (without its secret, shown only when it is made).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WebhookView {
    pub id: Uuid,
    pub user: String,
    /// Gets every user's events (made by an admin).
    pub all_users: bool,
    pub url: String,
    pub created_at: DateTime<Utc>,
    /// False once disabled (its deliveries failed for longer than the service allows).
    pub enabled: bool,
    /// The id of the last event the receiver acknowledged.
    pub delivered_through: i64,
    /// Failed attempts in a row at the next event (0 when all is well).
    pub failures: i32,
    /// The next attempt, while failing.
    pub retry_at: Option<DateTime<Utc>>,
    pub failing_since: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

impl From<&WebhookRecord> for WebhookView {
    fn from(w: &WebhookRecord) -> Self {
        WebhookView {
            id: w.id,
            user: w.user.clone(),
            all_users: w.admin,
            url: w.url.clone(),
            created_at: w.created_at,
            enabled: w.enabled,
            delivered_through: w.cursor,
            failures: w.attempts,
            retry_at: (w.attempts > 0).then_some(w.next_attempt_at),
            failing_since: w.failing_since,
            last_error: w.last_error.clone(),
        }
    }
}

/// A new webhook, with its secret (shown only here).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WebhookCreated {
    #[serde(flatten)]
    pub webhook: WebhookView,
    /// The HMAC-SHA256 key of the `Coreserve-Signature` header of every delivery.
    pub secret: String,
}

/// 422 `destination-not-allowed`: the URL's host is, or resolves to, an address webhooks may
/// not reach.
fn not_allowed(e: crate::api::destinations::DestinationError) -> ApiError {
    ApiError::new(
        actix_web::http::StatusCode::UNPROCESSABLE_ENTITY,
        "destination-not-allowed",
        "Webhooks may not reach this destination",
        e.to_string(),
    )
}

/// The URL's host and port (`nats://host:port/...`: its server's; default ports 80, 443 and
/// 4222).
fn host_port(url: &reqwest::Url) -> Option<(&str, u16)> {
    let port = url.port().unwrap_or(match url.scheme() {
        "https" => 443,
        "nats" => 4222,
        _ => 80,
    });
    url.host_str().filter(|h| !h.is_empty()).map(|h| (h, port))
}

fn check(b: &WebhookBody) -> Result<(), ApiError> {
    if b.url.len() > 2048 {
        return Err(ApiError::invalid("url: at most 2048 characters"));
    }
    let url = reqwest::Url::parse(&b.url).map_err(|e| ApiError::invalid(format!("url: not an absolute URL ({e})")))?;
    if url.scheme() == "nats" {
        if crate::api::webhooks::bus_of(&b.url).is_none() {
            return Err(ApiError::invalid(
                "url: a NATS webhook is nats://host:port/<subject>, the subject dot-separated letters, digits, - and _",
            ));
        }
    } else if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err(ApiError::invalid("url: must be an http or https URL with a host, or nats://host:port/<subject>"));
    }
    if let Some(s) = &b.secret {
        if !(16..=256).contains(&s.chars().count()) || s.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(ApiError::invalid("secret: 16-256 printable characters, no spaces"));
        }
    }
    Ok(())
}

/// Register a webhook: from now on, every event of the caller's plans (an admin's: everyone's)
/// is POSTed to `url`, signed with the secret (see the `Coreserve-Signature` header).
#[utoipa::path(post, path = "/v1/webhooks", operation_id = "create_webhook", tag = "plans", request_body = WebhookBody,
    responses(
        (status = 201, body = WebhookCreated),
        (status = 422, description = "Not a JSON object, control characters, unknown or missing fields, or invalid values (URL, secret); the destination is, or resolves to, an address webhooks may not reach (type .../destination-not-allowed: loopback, private, link-local, unique-local, multicast, unspecified, ...; an admin may allow networks and hosts with --webhook-allow); or the caller has --webhook-max-per-user webhooks already (type .../webhook-limit)"),
    ),
    security(("bearer" = [])))]
pub async fn create(
    state: web::Data<AppState>,
    g: Guarded<Anyone, (), Body<WebhookBody>>,
) -> Result<HttpResponse, ApiError> {
    let Guarded { caller, body: Body(b), .. } = g;
    check(&b)?;
    let url = reqwest::Url::parse(&b.url).map_err(ApiError::invalid)?;
    let (host, port) = host_port(&url).ok_or_else(|| ApiError::invalid("url: no host"))?;
    state.webhook_policy.check_registration(host, port).await.map_err(not_allowed)?;
    let now = Utc::now();
    let secret = b.secret.unwrap_or_else(new_secret);
    let w = WebhookRecord {
        id: Uuid::new_v4(),
        owner: caller.principal,
        user: caller.user.clone(),
        admin: caller.admin,
        url: b.url,
        secret: secret.clone(),
        created_at: now,
        enabled: true,
        // From the events written after this on.
        cursor: state.store.last_event_id().await?,
        attempts: 0,
        next_attempt_at: now,
        failing_since: None,
        last_error: None,
    };
    // The user's count and the insert are one step in the store, across processes.
    let limit = state.config.webhook_max_per_user;
    if let WebhookInsert::AtLimit { webhooks } =
        state.store.insert_webhook(w.clone(), (!caller.admin).then_some(limit)).await?
    {
        return Err(ApiError::new(
            actix_web::http::StatusCode::UNPROCESSABLE_ENTITY,
            "webhook-limit",
            "Too many webhooks",
            format!(
                "{} has {webhooks} webhooks, the most a user may have (--webhook-max-per-user {limit}); delete one first",
                caller.user
            ),
        ));
    }
    tracing::info!(target: "audit", user = %w.user, id = %w.id, url = %w.url, "webhook registered");
    Ok(HttpResponse::Created()
        .insert_header((actix_web::http::header::LOCATION, format!("/v1/webhooks/{}", w.id)))
        .json(WebhookCreated { webhook: WebhookView::from(&w), secret }))
}

/// The caller's webhooks (an admin's: everyone's), oldest first.
#[utoipa::path(get, path = "/v1/webhooks", operation_id = "list_webhooks", tag = "plans",
    responses((status = 200, body = Vec<WebhookView>)),
    security(("bearer" = [])))]
pub async fn list(state: web::Data<AppState>, caller: Caller) -> Result<web::Json<Vec<WebhookView>>, ApiError> {
    let owner = (!caller.admin).then_some(caller.principal);
    Ok(web::Json(state.store.webhooks(owner).await?.iter().map(WebhookView::from).collect()))
}

async fn owned(state: &AppState, caller: &Caller, id: &str) -> Result<WebhookRecord, ApiError> {
    let unknown = || ApiError::not_found(format!("no webhook `{id}`"));
    let id: Uuid = id.parse().map_err(|_| unknown())?;
    let w = state.store.webhook(id).await?.ok_or_else(unknown)?;
    if !caller.may_access(w.owner) {
        return Err(ApiError::forbidden(format!("webhook {id} belongs to another user")));
    }
    Ok(w)
}

/// One webhook: where its deliveries stand.
#[utoipa::path(get, path = "/v1/webhooks/{id}", operation_id = "get_webhook", tag = "plans",
    params(("id" = Uuid, Path, description = "webhook id")),
    responses(
        (status = 200, body = WebhookView),
        (status = 403),
    ),
    security(("bearer" = [])))]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<web::Json<WebhookView>, ApiError> {
    Ok(web::Json(WebhookView::from(&owned(&state, &caller, &id).await?)))
}

/// A webhook's delivery log: its newest 100 attempts, newest first.
#[utoipa::path(get, path = "/v1/webhooks/{id}/deliveries", operation_id = "webhook_deliveries", tag = "plans",
    params(("id" = Uuid, Path, description = "webhook id")),
    responses(
        (status = 200, body = Vec<DeliveryRecord>),
        (status = 403),
    ),
    security(("bearer" = [])))]
pub async fn deliveries(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<web::Json<Vec<DeliveryRecord>>, ApiError> {
    let w = owned(&state, &caller, &id).await?;
    Ok(web::Json(state.store.deliveries(w.id, 100).await?))
}

/// Delete a webhook (nothing more is sent to it) and its delivery log.
#[utoipa::path(delete, path = "/v1/webhooks/{id}", operation_id = "delete_webhook", tag = "plans",
    params(("id" = Uuid, Path, description = "webhook id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403),
    ),
    security(("bearer" = [])))]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let w = owned(&state, &caller, &id).await?;
    state.store.delete_webhook(w.id).await?;
    tracing::info!(target: "audit", by = %caller.user, user = %w.user, id = %w.id, "webhook deleted");
    Ok(HttpResponse::NoContent().finish())
}
