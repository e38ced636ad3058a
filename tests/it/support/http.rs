//! An HTTP client of one running service, with the readers the tests share.

use reqwest::{Client, Method, Response, StatusCode};
use serde_json::Value;

/// A client of the service at `base` (`http://127.0.0.1:PORT`): an application in process
/// ([`super::TestApp`] derefs to one) or a real `coreserve serve` process.
#[derive(Clone)]
pub struct ApiClient {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub client: Client,
}

impl ApiClient {
    /// A client of `base` with a default [`Client`].
    pub fn new(base: &str) -> ApiClient {
        coreserve::protocol::http::install_crypto_provider();
        ApiClient::with_client(base, Client::new())
    }

    /// A client of `base` through `client` (e.g. one that keeps no idle connections, for
    /// processes killed and restarted on the same port).
    pub fn with_client(base: &str, client: Client) -> ApiClient {
        ApiClient { base: base.to_owned(), client }
    }

    /// `method base+path`, with `token` as bearer and `body` as JSON when given.
    pub async fn call(&self, method: Method, path: &str, token: Option<&str>, body: Option<&Value>) -> Response {
        let mut r = self.client.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        if let Some(b) = body {
            r = r.json(b);
        }
        r.send().await.unwrap()
    }

    pub async fn get(&self, path: &str, token: &str) -> Response {
        self.call(Method::GET, path, Some(token), None).await
    }

    pub async fn post(&self, path: &str, token: &str, body: &Value) -> Response {
        self.call(Method::POST, path, Some(token), Some(body)).await
    }

    pub async fn delete(&self, path: &str, token: &str) -> Response {
        self.call(Method::DELETE, path, Some(token), None).await
    }

    /// POST without a body.
    pub async fn post_empty(&self, path: &str, token: &str) -> Response {
        self.call(Method::POST, path, Some(token), None).await
    }

    /// POSTs `raw` as is, with a JSON content type (malformed or oversized bodies, numbers
    /// beyond what `serde_json::Value` keeps exactly).
    pub async fn post_raw(&self, path: &str, token: &str, raw: impl Into<String>) -> Response {
        let r = self.client.post(format!("{}{path}", self.base)).bearer_auth(token);
        r.header("content-type", "application/json").body(raw.into()).send().await.unwrap()
    }

    /// `GET path` as `token`, asserting 200; its JSON body.
    pub async fn json(&self, path: &str, token: &str) -> Value {
        let r = self.get(path, token).await;
        assert_eq!(r.status(), StatusCode::OK, "GET {}{path}", self.base);
        r.json().await.unwrap()
    }

    /// `GET /v1/plans{query}` as `token`, asserting 200.
    pub async fn plans(&self, token: &str, query: &str) -> Vec<Value> {
        let r = self.get(&format!("/v1/plans{query}"), token).await;
        assert_eq!(r.status(), StatusCode::OK);
        r.json().await.unwrap()
    }

    /// Every hold and reservation of `site` between `from` and `to` (RFC 3339), as `token`
    /// sees them, asserting 200.
    pub async fn site_reservations(&self, site: &str, token: &str, from: &str, to: &str) -> Vec<Value> {
        let path = format!("/v1/sites/{site}/reservations?from={from}&to={to}");
        let r = self.get(&path, token).await;
        assert_eq!(r.status(), StatusCode::OK);
        r.json().await.unwrap()
    }

    /// The text of `GET /metrics` (no token).
    pub async fn metrics(&self) -> String {
        self.call(Method::GET, "/metrics", None, None).await.text().await.unwrap()
    }

    /// The value of the unlabelled gauge or counter `name` in [`ApiClient::metrics`].
    pub async fn gauge(&self, name: &str) -> u64 {
        let text = self.metrics().await;
        let prefix = format!("{name} ");
        let line = text.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("{name} is not exported"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    }
}

/// Asserts an RFC 9457 problem answer and returns its body.
pub async fn problem(r: Response, status: StatusCode) -> Value {
    assert_eq!(r.status(), status);
    let ct = r.headers()["content-type"].to_str().unwrap().to_owned();
    assert_eq!(ct, "application/problem+json");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["status"], status.as_u16());
    assert!(body["type"].as_str().unwrap().starts_with("urn:coreserve:problem:"), "{body}");
    assert!(!body["title"].as_str().unwrap().is_empty());
    assert!(!body["detail"].as_str().unwrap().is_empty());
    body
}
