//! Webhooks: the events of a user's plans (an admin's: everyone's) POSTed to the URLs they
//! registered (`/v1/webhooks`), in the log's order, at least once, each signed.
//!
//! A delivery is `POST url` with the event as JSON ([`PlanEvent`], the `data:` of
//! `GET /v1/events`) and the headers
//!
//! - `Coreserve-Event-Id`: the event's id (a receiver de-duplicates by it: a delivery whose answer
//!   was lost is sent again);
//! - `Coreserve-Event-Type`: `plan.committed`, `plan.active`, ...;
//! - `Coreserve-Webhook-Id`: the webhook;
//! - `Coreserve-Signature: t=<unix seconds>,v1=<hex>`: HMAC-SHA256 with the webhook's secret
//!   of `<t>.<body>` (the convention of Stripe; GitHub signs the body alone). A receiver
//!   recomputes it ([`verify`]) and refuses an old `t` (replays).
//!
//! A 2xx answer acknowledges the event; anything else (or no answer in 10 s) is retried with
//! exponential backoff and jitter ([`backoff`]), and later events wait for it (order is kept).
//! A webhook failing for longer than [`Deliverer::disable_after`] is disabled; an event not
//! acknowledged after [`Deliverer::max_attempts_per_event`] attempts is given up (logged as
//! such) and the webhook goes on with the next. Each attempt is in the webhook's delivery log,
//! with the receiver's HTTP status; a connection that failed below HTTP (refused, timed out,
//! reset, a destination not allowed) is logged as [`NO_ANSWER`] alone, without why or how
//! long it took, so that the log is no probe of the service's network.
//!
//! **Destinations** ([`crate::api::destinations`]): every delivery resolves the URL's host
//! itself and connects only to an address the [`DestinationPolicy`] allows (public, or allowed
//! by an admin), whatever the name resolved to at registration; no proxy, no redirect. One process delivers a webhook at a time (a lease in the
//! store); the cursor moves only after a 2xx, so a crash at any point re-sends at most the
//! event in flight.
//!
//! **A bus instead of a URL.** A webhook whose URL is `nats://host:port/<subject>` publishes
//! each event to NATS JetStream instead, on the subject `<subject>.<type>` (e.g.
//! `coreserve.events.plan.committed`), with the same headers and `Nats-Msg-Id: <event id>` (the
//! stream drops a re-sent event within its duplicate window). A stream must capture the
//! subjects (e.g. `nats stream add COREEVENTS --subjects 'coreserve.events.>'`); the
//! stream's acknowledgement is the 2xx, and a publish no stream takes ("no responders") is a
//! failure, retried like an HTTP one. The signature is the same, so a consumer can check it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use rand::Rng;
use sha2::Sha256;

use crate::api::destinations::{DestinationPolicy, PolicyResolver};
use crate::store::{DeliveryRecord, PlanEvent, Store, StoreError, WebhookLease, WebhookRecord};

/// The delivery log's error for an attempt that got no HTTP answer (or, for a `nats://`
/// webhook, no answer of the NATS server), whatever the cause.
pub const NO_ANSWER: &str = "no answer from the destination";

/// The signature header.
pub const SIGNATURE_HEADER: &str = "Coreserve-Signature";
/// The event id header.
pub const EVENT_ID_HEADER: &str = "Coreserve-Event-Id";

/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// How long a receiver has to answer one delivery.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// `t=<t>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`.
pub fn sign(secret: &str, t: i64, body: &[u8]) -> String {
    format!("t={t},v1={}", hex::encode(mac(secret, t, body).finalize().into_bytes()))
}

fn mac(secret: &str, t: i64, body: &[u8]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    m.update(t.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    m
}

/// Does `header` (a [`SIGNATURE_HEADER`] value) sign `body` with `secret`, made at most
/// `tolerance_s` seconds from `now`? The comparison is constant-time.
pub fn verify(secret: &str, header: &str, body: &[u8], now: DateTime<Utc>, tolerance_s: i64) -> bool {
    let mut t = None;
    let mut v1 = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => v1.extend(hex::decode(v).ok()),
            _ => {}
        }
    }
    let Some(t) = t.filter(|t| (now.timestamp() - t).abs() <= tolerance_s) else { return false };
    v1.iter().any(|sig| mac(secret, t, body).verify_slice(sig).is_ok())
}

/// The wait after `failures` failed attempts in a row (≥ 1): `base * 2^(failures-1)`, at most
/// [`MAX_BACKOFF`], of which a random half ("equal jitter": receivers that failed together do
/// not come back together).
pub fn backoff(base: Duration, failures: i32, rng: &mut impl Rng) -> Duration {
    let exp = u32::try_from(failures.saturating_sub(1)).unwrap_or(0).min(30);
    let full = base.saturating_mul(1 << exp).min(MAX_BACKOFF);
    full / 2 + full.mul_f64(rng.gen_range(0.0..0.5))
}

/// A new webhook secret: `whsec_` and 32 random bytes in hex.
pub fn new_secret() -> String {
    format!("whsec_{}", hex::encode(rand::random::<[u8; 32]>()))
}

/// Delivers the events of due webhooks (one process's share: the webhooks it leases).
pub struct Deliverer {
    store: Arc<dyn Store>,
    http: reqwest::Client,
    /// JetStream contexts of the `nats://` webhooks, by server address (connected on first use).
    /// Each server's cell is made under the map's lock and connected outside it, so that a
    /// slow first connection to one server holds up no publish to another.
    buses: std::sync::Mutex<HashMap<String, Arc<tokio::sync::OnceCell<async_nats::jetstream::Context>>>>,
    /// This process's name in the webhooks' leases.
    owner: String,
    /// The first retry's wait (doubling from there).
    pub retry_base: Duration,
    /// A webhook failing for longer than this is disabled.
    pub disable_after: chrono::Duration,
    /// An event not acknowledged after this many attempts is given up (at least 1).
    pub max_attempts_per_event: i32,
    /// Where deliveries may go.
    policy: Arc<DestinationPolicy>,
}

/// The settings of a [`Deliverer`].
#[derive(Debug, Clone)]
pub struct DeliveryLimits {
    /// The first retry's wait (doubling from there).
    pub retry_base: Duration,
    /// A webhook failing for longer than this is disabled.
    pub disable_after: chrono::Duration,
    /// An event not acknowledged after this many attempts is given up.
    pub max_attempts_per_event: i32,
    /// Where deliveries may go.
    pub policy: Arc<DestinationPolicy>,
}

/// Events sent per webhook per round.
const BATCH: i64 = 64;
/// Webhooks leased per round.
const WEBHOOKS_PER_ROUND: i64 = 32;
/// How long a lease lasts (a process that dies mid-delivery holds it this long).
const LEASE_S: i64 = 30;

impl Deliverer {
    /// A deliverer over `store`, retrying after `limits.retry_base` (doubling), giving an event
    /// up after `limits.max_attempts_per_event` attempts, disabling a webhook that fails for
    /// longer than `limits.disable_after`, and connecting only where `limits.policy` allows.
    pub fn new(store: Arc<dyn Store>, limits: DeliveryLimits) -> Deliverer {
        crate::protocol::http::install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(DELIVERY_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            // A proxy would resolve and connect on its own, past the policy.
            .no_proxy()
            .dns_resolver(PolicyResolver(limits.policy.clone()))
            .build()
            .expect("an HTTP client");
        Deliverer {
            store,
            http,
            buses: Default::default(),
            owner: format!("webhooks-{}", uuid::Uuid::new_v4()),
            retry_base: limits.retry_base,
            disable_after: limits.disable_after,
            max_attempts_per_event: limits.max_attempts_per_event.max(1),
            policy: limits.policy,
        }
    }

    /// One round: leases the webhooks due with events to deliver, delivers each (in parallel,
    /// each in order), releases them; how many deliveries were acknowledged.
    ///
    /// # Errors
    /// The store failed to lease.
    pub async fn round(&self) -> Result<usize, StoreError> {
        let lease = WebhookLease { owner: &self.owner, now: Utc::now(), lease_s: LEASE_S, limit: WEBHOOKS_PER_ROUND };
        let due = self.store.lease_due_webhooks(lease).await?;
        let done = futures::future::join_all(due.into_iter().map(|w| self.deliver(w))).await;
        Ok(done.into_iter().sum())
    }

    /// Sends `w`'s next events in order until one fails, then records the attempts and where
    /// the webhook stands in one write (at least once: a crash before it re-sends them, and a
    /// receiver de-duplicates by the event id).
    async fn deliver(&self, mut w: WebhookRecord) -> usize {
        let id = w.id;
        let events = match self.store.events_after(w.cursor, (!w.admin).then_some(w.owner), BATCH).await {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(webhook = %id, error = %e, "webhook events not read");
                return 0;
            }
        };
        let mut deliveries = Vec::with_capacity(events.len());
        for event in events {
            let (status_code, error, took) = self.post(&w, &event).await;
            let now = Utc::now();
            let attempt = w.attempts + 1;
            let failed = error.is_some();
            match &error {
                None => {
                    w.cursor = event.id;
                    w.attempts = 0;
                    w.failing_since = None;
                    w.last_error = None;
                    w.next_attempt_at = now;
                }
                Some(e) if attempt >= self.max_attempts_per_event => {
                    // Given up: the next event is due at once (the webhook still counts as
                    // failing since the first failure, for disabling).
                    w.failing_since.get_or_insert(now);
                    w.cursor = event.id;
                    w.attempts = 0;
                    w.last_error = Some(format!("{e}; event {} given up after {attempt} attempts", event.id));
                    w.next_attempt_at = now;
                    tracing::info!(webhook = %id, event = event.id, attempts = attempt, "webhook event given up");
                }
                Some(e) => {
                    w.attempts = attempt;
                    let since = *w.failing_since.get_or_insert(now);
                    w.last_error = Some(e.clone());
                    let wait = backoff(self.retry_base, attempt, &mut rand::thread_rng());
                    w.next_attempt_at = now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX);
                    if now - since > self.disable_after {
                        w.enabled = false;
                        tracing::warn!(webhook = %id, url = %w.url, since = %since, "webhook disabled: failing too long");
                    }
                }
            }
            let given_up = failed && w.attempts == 0;
            deliveries.push(DeliveryRecord {
                webhook_id: id,
                event_id: event.id,
                at: now,
                attempt,
                status_code,
                error: w.last_error.clone().filter(|_| failed),
                duration_ms: took.map_or(0.0, |t| t.as_secs_f64() * 1e3),
            });
            if failed && !given_up {
                break;
            }
        }
        let acknowledged = deliveries.iter().filter(|d| d.error.is_none()).count();
        // None: nothing was due after all (another process delivered it).
        if !deliveries.is_empty() {
            if let Err(e) = self.store.record_deliveries(&self.owner, &w, &deliveries).await {
                // Lost the lease (or the webhook was deleted): whoever holds it goes on.
                tracing::warn!(webhook = %id, error = %e, "webhook deliveries not recorded");
                return 0;
            }
        }
        if let Err(e) = self.store.release_webhook(&self.owner, id).await {
            tracing::debug!(webhook = %id, error = %e, "webhook lease not released (it runs out)");
        }
        acknowledged
    }

    /// One POST (or publish, for a `nats://` webhook): the receiver's status, the failure (if
    /// not 2xx) and the time it took (`None` when there was no answer: [`NO_ANSWER`]).
    async fn post(&self, w: &WebhookRecord, event: &PlanEvent) -> (Option<i32>, Option<String>, Option<Duration>) {
        let body = serde_json::to_vec(event).expect("an event serialises");
        let signature = sign(&w.secret, Utc::now().timestamp(), &body);
        let started = Instant::now();
        if let Some((server, subject)) = bus_of(&w.url) {
            let published =
                tokio::time::timeout(DELIVERY_TIMEOUT, self.publish(server, subject, w, event, signature, body))
                    .await
                    .unwrap_or(Err(BusError::Timeout));
            let took = started.elapsed();
            return match published {
                Ok(()) => (None, None, Some(took)),
                Err(e @ (BusError::Publish(_) | BusError::NoStream(_))) => (None, Some(e.to_string()), Some(took)),
                Err(e) => {
                    tracing::debug!(webhook = %w.id, error = %e, "webhook: no answer from NATS");
                    (None, Some(NO_ANSWER.into()), None)
                }
            };
        }
        // A literal address is connected to as is (no resolver): checked here; a name is
        // checked address by address by the client's resolver (PolicyResolver).
        let literal = reqwest::Url::parse(&w.url).ok().and_then(|u| {
            u.host_str().and_then(|h| h.trim_start_matches('[').trim_end_matches(']').parse::<std::net::IpAddr>().ok())
        });
        if let Some(Err(e)) = literal.map(|ip| self.policy.check_ip(None, ip)) {
            tracing::debug!(webhook = %w.id, error = %e, "webhook destination refused");
            return (None, Some(NO_ANSWER.into()), None);
        }
        let answer = self
            .http
            .post(&w.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, signature)
            .header(EVENT_ID_HEADER, event.id.to_string())
            .header("Coreserve-Event-Type", &event.kind)
            .header("Coreserve-Webhook-Id", w.id.to_string())
            .body(body)
            .send()
            .await;
        let took = Some(started.elapsed());
        match answer {
            Ok(r) if r.status().is_success() => (Some(i32::from(r.status().as_u16())), None, took),
            Ok(r) => (Some(i32::from(r.status().as_u16())), Some(format!("answered {}", r.status())), took),
            Err(e) => {
                tracing::debug!(webhook = %w.id, error = %transport_error(&e), "webhook: no HTTP answer");
                (None, Some(NO_ANSWER.into()), None)
            }
        }
    }
}

impl Deliverer {
    /// Publishes `event` to JetStream at `server` on `<subject>.<type>` and waits for the
    /// stream's acknowledgement.
    ///
    /// # Errors
    /// [`BusError`]: no connection, the publish refused, or no stream acknowledged it.
    async fn publish(
        &self,
        server: &str,
        subject: &str,
        w: &WebhookRecord,
        event: &PlanEvent,
        signature: String,
        body: Vec<u8>,
    ) -> Result<(), BusError> {
        let cell = self.buses.lock().expect("bus map").entry(server.to_owned()).or_default().clone();
        let js = cell
            .get_or_try_init(|| async {
                // Connected to a checked address (and only to it: the servers a NATS server
                // advertises are ignored); its reconnections go to that address too.
                let (host, port) = match server.rsplit_once(':') {
                    Some((h, p)) => (h, p.parse::<u16>().map_err(|_| BusError::Destination)?),
                    None => (server, 4222),
                };
                let addrs = self.policy.resolve(host, port).await.map_err(|e| {
                    tracing::debug!(webhook = %w.id, error = %e, "webhook destination refused");
                    BusError::Destination
                })?;
                let client = async_nats::ConnectOptions::new()
                    .ignore_discovered_servers()
                    .connect(addrs[0].to_string())
                    .await
                    .map_err(|source| BusError::Connect { server: server.to_owned(), source })?;
                Ok::<_, BusError>(async_nats::jetstream::new(client))
            })
            .await?;
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", event.id.to_string().as_str());
        headers.insert(EVENT_ID_HEADER, event.id.to_string().as_str());
        headers.insert("Coreserve-Event-Type", event.kind.as_str());
        headers.insert("Coreserve-Webhook-Id", w.id.to_string().as_str());
        headers.insert(SIGNATURE_HEADER, signature.as_str());
        let ack = js
            .publish_with_headers(format!("{subject}.{}", event.kind), headers, body.into())
            .await
            .map_err(BusError::Publish)?;
        ack.await.map(|_| ()).map_err(BusError::NoStream)
    }
}

/// Why a `nats://` webhook's event was not acknowledged (recorded as the delivery's error).
#[derive(Debug, thiserror::Error)]
enum BusError {
    #[error("NATS at {server}: {source}")]
    Connect {
        server: String,
        #[source]
        source: async_nats::ConnectError,
    },
    #[error("publish: {0}")]
    Publish(#[source] async_nats::jetstream::context::PublishError),
    #[error("no stream took it: {0}")]
    NoStream(#[source] async_nats::jetstream::context::PublishError),
    #[error("no acknowledgement from the stream within 10 s")]
    Timeout,
    #[error("the destination is not allowed or does not resolve")]
    Destination,
}

/// `(server address, subject)` of a `nats://host:port/<subject>` webhook URL; `None` for any
/// other URL.
pub fn bus_of(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("nats://")?;
    let (server, subject) = rest.split_once('/')?;
    (!server.is_empty() && is_subject(subject)).then_some((server, subject))
}

/// A NATS subject to publish under: dot-separated tokens of letters, digits, `-` and `_`.
fn is_subject(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 200
        && s.split('.').all(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
}

/// A transport error in words, without the URL (it is the webhook's own).
fn transport_error(e: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    if e.is_timeout() {
        format!("no answer within {} s", DELIVERY_TIMEOUT.as_secs())
    } else if e.is_connect() {
        format!("cannot connect: {cause}")
    } else {
        format!("{cause}")
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn a_signature_verifies_with_its_secret_only_and_only_while_fresh() {
        let body = br#"{"id":1}"#;
        let now = Utc::now();
        let h = sign("s3cret", now.timestamp(), body);
        assert!(h.starts_with(&format!("t={},v1=", now.timestamp())), "{h}");
        assert!(verify("s3cret", &h, body, now, 300));
        assert!(!verify("wrong", &h, body, now, 300), "another secret");
        assert!(!verify("s3cret", &h, br#"{"id":2}"#, now, 300), "another body");
        assert!(!verify("s3cret", &h, body, now + chrono::Duration::seconds(301), 300), "too old");
        assert!(!verify("s3cret", "v1=00", body, now, 300), "no timestamp");
        // The known answer of HMAC-SHA256 (RFC 4231, test case 2: key "Jefe").
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(m.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn backoff_doubles_with_jitter_up_to_an_hour() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let base = Duration::from_secs(1);
        for failures in 1..=20 {
            let full = (base * (1u32 << (failures - 1))).min(MAX_BACKOFF);
            let d = backoff(base, failures, &mut rng);
            assert!(d >= full / 2 && d <= full, "{failures}: {d:?} of {full:?}");
        }
        let capped = backoff(base, 40, &mut rng);
        assert!(capped >= MAX_BACKOFF / 2 && capped <= MAX_BACKOFF, "{capped:?}");
        let draws: std::collections::HashSet<Duration> = (0..10).map(|_| backoff(base, 5, &mut rng)).collect();
        assert!(draws.len() > 5, "jittered: {draws:?}");
    }
}
