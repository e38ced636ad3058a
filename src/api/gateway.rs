//! The planner process as the one entry point of a role-separated deployment.
//!
//! A user of a separated deployment talks to the planner only. Besides plans, tokens, events
//! and webhooks (its own), the planner answers the read-only routes that other roles keep, by
//! forwarding them (the routes of `api/routes/gateway.rs`):
//!
//! | route (`GET`)                                   | forwarded to          |
//! |-------------------------------------------------|-----------------------|
//! | `/v1/sites`, `/v1/sites/{id}`                   | the GIS               |
//! | `/v1/sites/{id}/availability`, `.../reservations` | the LIS of site `id`  |
//! | `/v1/network`, `/v1/network/route`, `/v1/network/reservations`, `/v1/network/links/{id}/reservations` | the NIS |
//!
//! The planner checks the caller's token itself (a bad one gets its 401 from the planner),
//! then forwards the caller's own `Authorization`, so that the participant applies its own
//! rules to the caller (which hold ids it may see): the processes of a deployment share one
//! token store (one `DATABASE_URL`). The answer (status, `Content-Type`, body) is passed back
//! as it is; a participant that does not answer gives `502 participant-unreachable`, naming it.
//! The timeline (`/ui`) is served too, and works through these routes.
//!
//! At start ([`Gateway::check`]), the planner compares its `--lis` list with the sites the GIS
//! lists, and refuses to start when they differ or a LIS serves another site; a participant
//! that does not answer yet is reported loudly (it may be starting; plans that need it are
//! refused until it answers).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use anyhow::bail;
use serde::Deserialize;

use super::config::RemoteServices;
use super::problem::ApiError;

/// How long [`Gateway::check`] waits for the GIS to answer (it may be starting too).
pub const GIS_WAIT: Duration = Duration::from_secs(15);

/// What a planner forwards with, and where to.
pub struct Gateway {
    client: reqwest::Client,
    /// Where the GIS, the NIS and every LIS answer.
    pub(super) remote: RemoteServices,
}

/// What [`Gateway::check`] found: the deployment the planner fronts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deployment {
    /// The sites the GIS lists (each with a LIS in `--lis`).
    pub sites: usize,
    /// The links of the NIS's topology (`None`: the NIS did not answer).
    pub links: Option<usize>,
    /// One line per participant that did not answer or refused the planner's credential.
    pub warnings: Vec<String>,
}

#[derive(Deserialize)]
struct SiteId {
    id: String,
}

#[derive(Deserialize)]
struct Topology {
    links: Vec<serde_json::Value>,
}

impl Gateway {
    /// A gateway over `remote`, calling with `client` (the planner's participant client: its
    /// TLS trust and identity).
    pub fn new(client: reqwest::Client, remote: RemoteServices) -> Self {
        Gateway { client, remote }
    }

    /// Checks the planner's participants before it serves, with `credential` (the planner's
    /// participant token): the GIS must answer within [`GIS_WAIT`] and list exactly the sites
    /// of `--lis`; each LIS must serve its site. A LIS or NIS that does not answer, or refuses
    /// the credential, is a warning (returned, for the caller to say loudly).
    ///
    /// # Errors
    /// The GIS does not answer or refuses the credential; a site of the GIS has no `--lis`, or
    /// a `--lis` names a site the GIS does not list; a LIS answers 404 for its site (it serves
    /// another one).
    pub async fn check(&self, credential: Option<&str>) -> anyhow::Result<Deployment> {
        let gis = &self.remote.gis;
        let listed: Vec<SiteId> = {
            let deadline = Instant::now() + GIS_WAIT;
            loop {
                match self.get_json(&format!("{}/v1/sites", base(gis)), credential).await {
                    Ok(sites) => break sites,
                    Err(Failure::Status(s)) => bail!("the GIS at {gis} answers {s} to GET /v1/sites"),
                    Err(e) if Instant::now() >= deadline => {
                        bail!("the GIS at {gis} did not answer within {} s: {e}", GIS_WAIT.as_secs())
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
                }
            }
        };
        let listed: BTreeSet<&str> = listed.iter().map(|s| s.id.as_str()).collect();
        let given: BTreeSet<&str> = self.remote.lis.iter().map(|(s, _)| s.as_str()).collect();
        let missing: Vec<&str> = listed.difference(&given).copied().collect();
        if !missing.is_empty() {
            let example = missing.iter().map(|s| format!("--lis {s}=URL")).collect::<Vec<_>>().join(" ");
            bail!(
                "the GIS at {gis} lists site(s) {} that this planner has no LIS for: add {example}",
                missing.join(", ")
            );
        }
        let unknown: Vec<&str> = given.difference(&listed).copied().collect();
        if !unknown.is_empty() {
            bail!("--lis names site(s) {} that the GIS at {gis} does not list", unknown.join(", "));
        }
        let mut warnings = Vec::new();
        for (site, url) in &self.remote.lis {
            match self.get_json::<SiteId>(&format!("{}/v1/sites/{site}", base(url)), credential).await {
                Ok(s) if s.id == *site => {}
                Ok(s) => bail!("--lis {site}={url}: that LIS serves site `{}`", s.id),
                Err(Failure::Status(StatusCode::NOT_FOUND)) => {
                    bail!("--lis {site}={url}: that process does not serve site `{site}` (404)")
                }
                Err(e) => warnings.push(format!(
                    "the LIS of site `{site}` at {url}: {e}; plans that need `{site}` are refused until it answers"
                )),
            }
        }
        let nis = &self.remote.nis;
        let links = match self.get_json::<Topology>(&format!("{}/v1/network", base(nis)), credential).await {
            Ok(t) => Some(t.links.len()),
            Err(e) => {
                warnings.push(format!("the NIS at {nis}: {e}; plans with transfers are refused until it answers"));
                None
            }
        };
        Ok(Deployment { sites: listed.len(), links, warnings })
    }

    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        credential: Option<&str>,
    ) -> Result<T, Failure> {
        let mut call = self.client.get(url);
        if let Some(t) = credential {
            call = call.bearer_auth(t);
        }
        let answer = call.send().await.map_err(|e| Failure::Transport(e.without_url().to_string()))?;
        let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
        if !status.is_success() {
            return Err(Failure::Status(status));
        }
        answer.json().await.map_err(|e| Failure::Transport(format!("an unreadable answer: {e}")))
    }

    /// Forwards `req` (a `GET`) to `base` + the request's path and query, with the caller's
    /// `Authorization`; `who` names the participant in a 502.
    pub(super) async fn forward(&self, req: &HttpRequest, who: &str, base_url: &str) -> Result<HttpResponse, ApiError> {
        let path = req.uri().path_and_query().map_or_else(|| req.path(), |p| p.as_str());
        let mut call = self.client.get(format!("{}{path}", base(base_url)));
        for value in req.headers().get_all(header::AUTHORIZATION) {
            call = call.header(reqwest::header::AUTHORIZATION, value.as_bytes());
        }
        let unreachable = |e: reqwest::Error| {
            ApiError::new(
                StatusCode::BAD_GATEWAY,
                "participant-unreachable",
                "A participant did not answer",
                format!("{who} at {base_url} did not answer: {}", e.without_url()),
            )
        };
        let answer = call.send().await.map_err(unreachable)?;
        let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
        let content_type = answer.headers().get(reqwest::header::CONTENT_TYPE).cloned();
        let body = answer.bytes().await.map_err(unreachable)?;
        let mut res = HttpResponse::build(status);
        if let Some(v) = content_type.and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok()) {
            res.insert_header((header::CONTENT_TYPE, v));
        }
        Ok(res.body(body))
    }
}

/// Why a check's call failed.
#[derive(Debug)]
enum Failure {
    /// No answer (connection refused, timeout, TLS, unreadable body).
    Transport(String),
    /// An answer other than 2xx.
    Status(StatusCode),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Transport(e) => write!(f, "no answer ({e})"),
            Failure::Status(s) => write!(f, "answered {s}"),
        }
    }
}

fn base(url: &str) -> &str {
    url.trim_end_matches('/')
}
