//! The participant protocol over HTTP: [`HttpParticipant`] (a remote LIS or NIS) and
//! [`HttpCatalogue`] (a remote GIS), the client half of role-separated deployment
//! (`coreserve serve --role planner`). The server half is [`crate::api::routes::participant`].
//!
//! Endpoints (JSON bodies are the protocol's own serde types; every call sends the planner's
//! credential as `Authorization: Bearer`; the participant records its principal as the owner of
//! the holds it prepares and refuses phase 2 of them from any other principal but an admin):
//!
//! | call | endpoint | body -> answer |
//! |---|---|---|
//! | query | `POST {base}/query` | [`ComputeQuery`] -> [`ComputeOffer`] (LIS), [`NetworkQuery`] -> [`Route`] or `null` (NIS) |
//! | several queries | `POST {base}/queries` | [`QueryBatch`] -> [`AnswerBatch`] (answers in order; any refusal fails the call) |
//! | prepare | `POST {base}/prepare`, `?tentative=true` for a tentative hold | [`ComputeHoldRequest`] (LIS), [`NetworkHoldRequest`] (NIS) -> [`Hold`] |
//! | several prepares | `POST {base}/prepares`, `?tentative=true` as for one | [`PrepareBatch`] -> [`PrepareAnswers`] (each prepare's answer, in order) |
//! | snapshot | `POST {base}/snapshot` | [`SnapshotWindow`] -> [`ComputeSnapshot`] (LIS), [`NetworkSnapshot`] (NIS), or `null` (not given) |
//! | persist | `POST {base}/holds/persist` | [`HoldBatch`] -> 204 |
//! | commit / abort of several holds | `POST {base}/holds/commit` (`abort`) | [`HoldBatch`] -> [`BatchAnswer`] |
//! | commit / abort / release | `POST {base}/holds/{id}/commit` (`abort`, `release`) | - -> 204 |
//! | extend | `POST {base}/holds/{id}/extend` | [`Extend`] -> [`Hold`] |
//! | candidates | `POST {gis}/v1/participant/gis/candidates` | [`ComputeDemand`] -> [`Candidates`] |
//! | candidates of several demands | `POST {gis}/v1/participant/gis/candidates/batch` | [`QueryBatch`] of [`ComputeDemand`] -> [`AnswerBatch`] of [`Candidates`] |
//!
//! where `{base}` is `{server}/v1/participant/sites/{site}` for a LIS and
//! `{server}/v1/participant/network` for the NIS.
//!
//! Errors come back as RFC 9457 problem bodies carrying a `participant_error` field (the
//! [`ParticipantError`] itself, serialised); without it, the problem
//! `type` slug and status are used (409 hold conflicts, 409 capacity, 404 unknown hold).
//! Connection failures, timeouts and unexpected answers are [`ParticipantError::Transport`].
//!
//! `https://` participants are verified with rustls against the CA of [`ClientTls`] (or the
//! system's roots); a client certificate may be presented (mutual TLS).

use std::time::Duration;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use std::marker::PhantomData;

use super::SnapshotWindow;
use super::{
    Candidates, Catalogue, Compute, Hold, HoldId, HoldLifecycle, Network, Participant, ParticipantError, Role,
};
#[cfg(doc)]
use super::{
    ComputeHoldRequest, ComputeOffer, ComputeQuery, ComputeSnapshot, NetworkHoldRequest, NetworkQuery, NetworkSnapshot,
    Route,
};
use crate::model::ComputeDemand;

/// The most items (holds, queries, demands) a participant takes in one batch message; a batch
/// of prepares is split into messages of at most this many, sent at once.
pub const MAX_BATCH_ITEMS: usize = 1024;

/// Per-call timeout of the HTTP transport.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Makes rustls's `ring` implementation the process's default crypto provider (once; later
/// calls, and a provider installed by someone else first, change nothing). Every
/// `reqwest::Client` of this build needs one: call it before building a client of your own
/// (`coreserve` does for its participant clients and at start).
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// TLS settings of a planner's participant client: PEM contents, not paths.
#[derive(Debug, Clone, Default)]
pub struct ClientTls {
    /// CA certificate(s) to trust for `https://` participants, instead of the system's roots
    /// (`None`: the system's roots).
    pub ca_pem: Option<Vec<u8>>,
    /// Client certificate chain and private key, concatenated (mutual TLS), if the
    /// participants ask for one.
    pub identity_pem: Option<Vec<u8>>,
}

/// An HTTP client for the participant protocol: [`CALL_TIMEOUT`] per call, rustls for
/// `https://` URLs with the trust and identity of `tls`; plain `http://` URLs work too.
///
/// # Errors
/// [`ParticipantError::Invalid`] when a PEM holds no certificate, or a bad one or key.
pub fn client(tls: &ClientTls) -> Result<reqwest::Client, ParticipantError> {
    install_crypto_provider();
    let bad = |what: &str, e: reqwest::Error| ParticipantError::Invalid(format!("{what}: {e}"));
    let mut b = reqwest::Client::builder().timeout(CALL_TIMEOUT);
    if let Some(pem) = &tls.ca_pem {
        let certs = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| bad("CA certificates", e))?;
        if certs.is_empty() {
            return Err(ParticipantError::Invalid("the CA file holds no PEM certificate".into()));
        }
        b = b.tls_certs_only(certs);
    }
    if let Some(pem) = &tls.identity_pem {
        b = b.identity(reqwest::Identity::from_pem(pem).map_err(|e| bad("client certificate and key", e))?);
    }
    b.build().map_err(|e| bad("HTTP client", e))
}

/// The part of a problem body the client reads.
#[derive(Debug, Deserialize)]
struct ProblemBody {
    #[serde(rename = "type", default)]
    type_: String,
    #[serde(default)]
    detail: String,
    #[serde(default)]
    participant_error: Option<ParticipantError>,
}

/// Shared HTTP client state: connection pool, base URL, bearer token.
#[derive(Clone)]
struct Remote {
    client: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Remote {
    fn new(base: String, token: Option<String>) -> Self {
        let client = client(&ClientTls::default()).expect("an HTTP client with the system's roots builds");
        Remote { client, base: base.trim_end_matches('/').to_owned(), token }
    }

    /// POSTs `body` to `{base}{path}`; `hold` names the hold of a lifecycle call (for errors
    /// whose body carries no `participant_error`).
    async fn post<B: Serialize + ?Sized>(
        &self,
        path: &str,
        body: Option<&B>,
        hold: Option<HoldId>,
    ) -> Result<reqwest::Response, ParticipantError> {
        let url = format!("{}{path}", self.base);
        let mut r = self.client.post(&url);
        if let Some(t) = &self.token {
            r = r.bearer_auth(t);
        }
        if let Some(b) = body {
            r = r.json(b);
        }
        // A pooled connection to a participant that restarted fails on first use; every call
        // but prepare is idempotent, so it is retried once on a fresh connection.
        let again = if path.starts_with("/prepare") { None } else { r.try_clone() };
        let resp = match (r.send().await, again) {
            (Err(e), Some(again)) if e.is_request() || e.is_connect() => {
                tracing::debug!(error = %e, %url, "retrying on a fresh connection");
                again.send().await
            }
            (first, _) => first,
        }
        .map_err(|e| transport(format!("POST {url}: {e}")))?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        match decode_error(status.as_u16(), &text, hold, &url) {
            ParticipantError::Transport(d) => Err(transport(d)),
            e => Err(e),
        }
    }

    async fn call<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ParticipantError> {
        let resp = self.post(path, Some(body), None).await?;
        resp.json::<T>().await.map_err(|e| transport(format!("{}{path}: bad answer: {e}", self.base)))
    }

    /// `POST {base}{path}` of a batch of `n` items of `what`, answered in order: the answers
    /// (`answers` takes them out of the body), one per item, or an error.
    async fn call_batch<B: Serialize + ?Sized, T: DeserializeOwned, A>(
        &self,
        path: &str,
        body: &B,
        (n, what): (usize, &str),
        answers: impl FnOnce(T) -> Vec<A>,
    ) -> Result<Vec<A>, ParticipantError> {
        let answers = answers(self.call(path, body).await?);
        if answers.len() != n {
            return Err(transport(format!("{}{path}: {} answers for {n} {what}", self.base, answers.len())));
        }
        Ok(answers)
    }

    /// `POST {base}/holds/{verb}` of `holds` ([`HoldBatch`] -> [`BatchAnswer`]): the answer of
    /// each hold; a failed call is every hold's answer.
    async fn hold_batch(&self, verb: &str, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
        let body = HoldBatch { holds: holds.to_vec() };
        let path = format!("/holds/{verb}");
        match self.call_batch(&path, &body, (holds.len(), "holds"), |a: BatchAnswer| a.errors).await {
            Ok(errors) => errors.into_iter().map(|e| e.map_or(Ok(()), Err)).collect(),
            Err(e) => vec![Err(e); holds.len()],
        }
    }

    async fn lifecycle(&self, hold: HoldId, verb: &str) -> Result<(), ParticipantError> {
        self.post::<()>(&format!("/holds/{hold}/{verb}"), None, Some(hold)).await.map(|_| ())
    }
}

/// A transport failure, logged (a planner treats a failed query as a missing candidate, so
/// the log is where such failures show).
fn transport(detail: String) -> ParticipantError {
    tracing::warn!(%detail, "participant call failed");
    ParticipantError::Transport(detail)
}

/// Maps an error answer back to a [`ParticipantError`] (see the module docs).
fn decode_error(status: u16, body: &str, hold: Option<HoldId>, url: &str) -> ParticipantError {
    let p: Option<ProblemBody> = serde_json::from_str(body).ok();
    if let Some(ProblemBody { participant_error: Some(e), .. }) = p {
        return e;
    }
    let (slug, detail) = match &p {
        Some(p) => (p.type_.rsplit(':').next().unwrap_or_default().to_owned(), p.detail.clone()),
        None => (String::new(), body.chars().take(200).collect()),
    };
    if let Some(e) = hold.and_then(|h| ParticipantError::about_hold(status, &slug, h)) {
        return e;
    }
    match status {
        400 | 422 => ParticipantError::Invalid(detail),
        _ => ParticipantError::Transport(format!("POST {url}: {status} {slug}: {detail}")),
    }
}

/// A remote LIS (`HttpParticipant<Compute>`) or NIS (`HttpParticipant<Network>`) spoken to
/// over HTTP; implements [`Participant`] like the in-process ones, so the planner cannot tell
/// the difference.
pub struct HttpParticipant<R> {
    remote: Remote,
    role: PhantomData<fn() -> R>,
}

impl<R> Clone for HttpParticipant<R> {
    fn clone(&self) -> Self {
        HttpParticipant { remote: self.remote.clone(), role: PhantomData }
    }
}

impl HttpParticipant<Compute> {
    /// The LIS of `site` served at `server` (e.g. `http://127.0.0.1:8081`).
    pub fn site(server: &str, site: &str, token: Option<String>) -> Self {
        Self::at(format!("{}/v1/participant/sites/{site}", server.trim_end_matches('/')), token)
    }
}

impl HttpParticipant<Network> {
    /// The NIS served at `server`.
    pub fn network(server: &str, token: Option<String>) -> Self {
        Self::at(format!("{}/v1/participant/network", server.trim_end_matches('/')), token)
    }
}

impl<R> HttpParticipant<R> {
    fn at(base: String, token: Option<String>) -> Self {
        HttpParticipant { remote: Remote::new(base, token), role: PhantomData }
    }

    /// The endpoint prefix this participant talks to.
    pub fn base(&self) -> &str {
        &self.remote.base
    }

    /// The same participant spoken to through `client` (from [`client`]: TLS trust and
    /// identity).
    pub fn with_client(mut self, client: reqwest::Client) -> Self {
        self.remote.client = client;
        self
    }
}

#[async_trait]
impl<R: Role> Participant<R> for HttpParticipant<R> {
    async fn query(&self, q: &R::Query) -> Result<R::Answer, ParticipantError> {
        self.remote.call("/query", q).await
    }

    /// One `POST {base}/queries`; a failed call is every query's answer.
    async fn query_all(&self, qs: &[R::Query]) -> Vec<Result<R::Answer, ParticipantError>> {
        let body = QueryBatch { queries: qs.to_vec() };
        match self.remote.call_batch("/queries", &body, (qs.len(), "queries"), |a: AnswerBatch<_>| a.answers).await {
            Ok(answers) => answers.into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e); qs.len()],
        }
    }

    /// Asks for a tentative hold (`?tentative=true`): the coordinator persists its holds
    /// before logging a decision ([`HoldLifecycle::persist`]), and a commit journals a hold
    /// that was never persisted, so the participant need not write every hold of the search.
    async fn prepare(&self, req: &R::Prepare) -> Result<Hold, ParticipantError> {
        self.remote.call("/prepare?tentative=true", req).await
    }

    /// `POST {base}/prepares?tentative=true` (tentative holds, as [`Self::prepare`]): one
    /// request per [`MAX_BATCH_ITEMS`] holds, all sent at once; a failed call is the answer of
    /// each of its prepares.
    async fn prepare_all(&self, reqs: &[R::Prepare]) -> Vec<Result<Hold, ParticipantError>> {
        let path = "/prepares?tentative=true";
        let calls = reqs.chunks(MAX_BATCH_ITEMS).map(|chunk| async move {
            let body = PrepareBatch { holds: chunk.to_vec() };
            match self.remote.call_batch(path, &body, (chunk.len(), "prepares"), |a: PrepareAnswers| a.answers).await {
                Ok(answers) => answers.into_iter().map(Prepared::into_result).collect(),
                Err(e) => vec![Err(e); chunk.len()],
            }
        });
        futures::future::join_all(calls).await.into_iter().flatten().collect()
    }

    /// `POST {base}/snapshot`.
    async fn snapshot(&self, window: &SnapshotWindow) -> Result<Option<R::Snapshot>, ParticipantError> {
        self.remote.call("/snapshot", window).await
    }

    /// `POST {base}/drift`.
    async fn drift(&self) -> Result<Vec<super::Drift>, ParticipantError> {
        self.remote.call("/drift", &()).await
    }
}

#[async_trait]
impl<R: Role> HoldLifecycle for HttpParticipant<R> {
    async fn commit(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.remote.lifecycle(hold, "commit").await
    }

    async fn abort(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.remote.lifecycle(hold, "abort").await
    }

    async fn release(&self, hold: HoldId) -> Result<(), ParticipantError> {
        self.remote.lifecycle(hold, "release").await
    }

    async fn extend(&self, hold: HoldId, lease_s: i64) -> Result<Hold, ParticipantError> {
        let resp = self.remote.post(&format!("/holds/{hold}/extend"), Some(&Extend { lease_s }), Some(hold)).await?;
        resp.json::<Hold>()
            .await
            .map_err(|e| transport(format!("{}/holds/{hold}/extend: bad answer: {e}", self.remote.base)))
    }

    async fn persist(&self, holds: &[HoldId]) -> Result<(), ParticipantError> {
        self.remote.post("/holds/persist", Some(&HoldBatch { holds: holds.to_vec() }), None).await.map(|_| ())
    }

    /// One message for every hold; a failed call is every hold's answer.
    async fn commit_all(&self, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
        self.remote.hold_batch("commit", holds).await
    }

    /// One message for every hold; a failed call is every hold's answer.
    async fn abort_all(&self, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
        self.remote.hold_batch("abort", holds).await
    }
}

/// Body of `POST {base}/queries`: several availability queries of one participant.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryBatch<Q> {
    pub queries: Vec<Q>,
}

/// Body of `POST {base}/prepares`: several prepare messages of one participant.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrepareBatch<P> {
    /// The prepare messages ([`ComputeHoldRequest`] or [`NetworkHoldRequest`]), at most
    /// [`MAX_BATCH_ITEMS`].
    pub holds: Vec<P>,
}

/// One prepare's answer in [`PrepareAnswers`]: `{"held": Hold}` or `{"refused": ParticipantError}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Prepared {
    /// Granted: the hold and its lease.
    Held(Hold),
    /// Refused: nothing changed for this prepare.
    Refused(ParticipantError),
}

impl Prepared {
    /// The prepare's answer as [`Participant::prepare`] gives it.
    pub fn into_result(self) -> Result<Hold, ParticipantError> {
        match self {
            Prepared::Held(h) => Ok(h),
            Prepared::Refused(e) => Err(e),
        }
    }
}

impl From<Result<Hold, ParticipantError>> for Prepared {
    fn from(r: Result<Hold, ParticipantError>) -> Self {
        match r {
            Ok(h) => Prepared::Held(h),
            Err(e) => Prepared::Refused(e),
        }
    }
}

/// Answer of `POST {base}/prepares`: each prepare's answer, in the order of the batch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PrepareAnswers {
    /// One per prepare of the batch, in its order.
    pub answers: Vec<Prepared>,
}

/// Answer of `POST {base}/queries`: the answers, in the order of the queries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AnswerBatch<A> {
    pub answers: Vec<A>,
}

/// Body of the participant protocol's batches (`POST {base}/holds/persist`, `/holds/commit`):
/// the holds, all of one participant.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HoldBatch {
    pub holds: Vec<HoldId>,
}

/// Answer of `POST {base}/holds/commit`: per hold of the batch, in its order, `null` (committed)
/// or the participant's refusal.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatchAnswer {
    pub errors: Vec<Option<ParticipantError>>,
}

/// Body of the participant protocol's extend call.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Extend {
    /// New lease from now, seconds.
    pub lease_s: i64,
}

/// A remote GIS spoken to over HTTP.
#[derive(Clone)]
pub struct HttpCatalogue {
    remote: Remote,
}

impl HttpCatalogue {
    /// The GIS served at `server`.
    pub fn new(server: &str, token: Option<String>) -> Self {
        HttpCatalogue { remote: Remote::new(format!("{}/v1/participant/gis", server.trim_end_matches('/')), token) }
    }

    /// The same catalogue spoken to through `client` (see [`HttpParticipant::with_client`]).
    pub fn with_client(mut self, client: reqwest::Client) -> Self {
        self.remote.client = client;
        self
    }
}

#[async_trait]
impl Catalogue for HttpCatalogue {
    async fn candidates(&self, demand: &ComputeDemand) -> Result<Candidates, ParticipantError> {
        self.remote.call("/candidates", demand).await
    }

    /// One message for every demand.
    async fn candidates_all(&self, demands: &[ComputeDemand]) -> Result<Vec<Candidates>, ParticipantError> {
        let body = QueryBatch { queries: demands.to_vec() };
        self.remote
            .call_batch("/candidates/batch", &body, (demands.len(), "demands"), |a: AnswerBatch<_>| a.answers)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn participant_errors_round_trip_as_json() {
        let h = HoldId::new();
        for e in [
            ParticipantError::Capacity { start: 1, end: 2, requested: 3, free: 1 },
            ParticipantError::LinkCapacity { link: "l1".into(), start: 1, end: 2, requested: 3, free: 1 },
            ParticipantError::InvalidHold("empty interval [2, 2)".into()),
            ParticipantError::UnknownHold(h),
            ParticipantError::HoldExpired(h),
            ParticipantError::Aborted(h),
            ParticipantError::AlreadyCommitted(h),
            ParticipantError::NotCommitted(h),
            ParticipantError::NotOwner(h),
            ParticipantError::UnknownSite("s".into()),
            ParticipantError::UnknownLink("l".into()),
            ParticipantError::Invalid("x".into()),
            ParticipantError::Transport("t".into()),
            ParticipantError::Durability("d".into()),
        ] {
            let w = serde_json::to_string(&e).unwrap();
            assert_eq!(serde_json::from_str::<ParticipantError>(&w).unwrap(), e, "{w}");
            let body = format!(r#"{{"type":"urn:coreserve:problem:x","detail":"d","participant_error":{w}}}"#);
            assert_eq!(decode_error(409, &body, Some(h), "u"), e, "a problem body carries it exactly");
        }
        let j = serde_json::to_value(ParticipantError::HoldExpired(h)).unwrap();
        assert_eq!(j, serde_json::json!({"kind": "hold_expired", "about": h}));
    }

    #[test]
    fn slugs_map_without_participant_error() {
        let h = HoldId::new();
        let body = r#"{"type":"urn:coreserve:problem:hold-expired","title":"t","status":409,"detail":"d"}"#;
        assert_eq!(decode_error(409, body, Some(h), "u"), ParticipantError::HoldExpired(h));
        assert_eq!(decode_error(404, "{}", Some(h), "u"), ParticipantError::UnknownHold(h));
        assert!(matches!(decode_error(502, "oops", None, "u"), ParticipantError::Transport(_)));
        for status in [403, 409] {
            // 403 from a participant's owner check, 409 from the table (a planner's answer).
            let body = r#"{"type":"urn:coreserve:problem:hold-not-owned","title":"t","detail":"d"}"#;
            assert_eq!(decode_error(status, body, Some(h), "u"), ParticipantError::NotOwner(h));
        }
        for e in [
            ParticipantError::HoldExpired(h),
            ParticipantError::Aborted(h),
            ParticipantError::AlreadyCommitted(h),
            ParticipantError::NotCommitted(h),
        ] {
            // Encoded by the table, decoded by it.
            let k = e.problem_kind();
            let body = format!(r#"{{"type":"urn:coreserve:problem:{}","detail":"d"}}"#, k.slug);
            assert_eq!(decode_error(k.status, &body, Some(h), "u"), e);
        }
        let body = r#"{"type":"urn:coreserve:problem:forbidden","title":"t","status":403,"detail":"d"}"#;
        assert!(
            matches!(decode_error(403, body, Some(h), "u"), ParticipantError::Transport(_)),
            "a token without the role"
        );
    }
}

#[cfg(test)]
mod wire_tests {
    use super::super::*;

    #[test]
    fn protocol_messages_round_trip_as_json() {
        for a in [None, Some(Route { links: vec![], price_per_gbps_hour: 0.0, free_mbps: u64::MAX, marking: None })] {
            let j = serde_json::to_string(&a).unwrap();
            assert_eq!(serde_json::from_str::<Option<Route>>(&j).unwrap(), a, "{j}");
        }
        let offer = ComputeOffer {
            site: "s".into(),
            earliest_start: Some(5),
            utilisation: 0.5,
            price_per_cpu_hour: 1.0,
            gpu_model: None,
            price_per_gpu_hour: 0.0,
            reservation_prefix: None,
        };
        let j = serde_json::to_string(&offer).unwrap();
        assert_eq!(serde_json::from_str::<ComputeOffer>(&j).unwrap(), offer, "{j}");
        let hold = HoldRequest::Network(NetworkHoldRequest {
            replaces: None,
            port: None,
            txn: TxnId::nil(),
            links: vec!["l1".into()],
            bandwidth_mbps: 10,
            start: 0,
            end: 5,
            sites: None,
        });
        let j = serde_json::to_value(&hold).unwrap();
        assert_eq!(j["kind"], "network", "the journal's records keep their tag");
        assert_eq!(serde_json::from_value::<HoldRequest>(j).unwrap(), hold);
    }
}
