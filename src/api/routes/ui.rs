//! `/ui`: the reservation timeline, a page that draws the bookings of sites and links, and a
//! chosen plan as a Gantt chart and a path on the topology (d3, SVG; see the README).
//!
//! Its files (`ui/` in the repository, d3 vendored under `ui/vendor/`) are compiled into the
//! binary: the page needs nothing from outside at run time. It is served without a token (it
//! holds no data); the page asks for one and sends it as `Authorization: Bearer` on its calls
//! to `/v1`. The all-in-one serves it, and so does a planner process of a role-separated
//! deployment: it reads plans (the planner's own) and sites and links (which the planner
//! forwards to its participants, [`crate::api::gateway`]).

use std::sync::OnceLock;

use actix_web::http::header::{self, HeaderValue};
use actix_web::{web, HttpRequest, HttpResponse};
use sha2::{Digest, Sha256};

use crate::api::problem::ApiError;

/// One file of a page compiled into the binary (the timeline's here, the API reference's in
/// [`super::docs`]).
pub(super) struct Asset {
    /// The path under the page's prefix (the page itself: `index.html`).
    pub(super) path: &'static str,
    pub(super) content_type: &'static str,
    pub(super) body: &'static [u8],
}

/// The [`Asset`] at `$path` under the page's prefix, of type `$content_type`, whose body is
/// the repository's `ui/$file`, compiled in.
macro_rules! asset {
    ($path:literal, $content_type:literal, $file:literal) => {
        Asset { path: $path, content_type: $content_type, body: include_bytes!(concat!("../../../ui/", $file)) }
    };
}
pub(super) use asset;

const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8", "index.html"),
    asset!("app.js", "text/javascript; charset=utf-8", "app.js"),
    asset!("style.css", "text/css; charset=utf-8", "style.css"),
    asset!("vendor/d3.v7.min.js", "text/javascript; charset=utf-8", "vendor/d3.v7.min.js"),
    asset!("vendor/d3.LICENSE", "text/plain; charset=utf-8", "vendor/d3.LICENSE"),
];

/// The path templates the timeline answers `GET` and `HEAD` on (for `Allow` in a 405; see
/// [`crate::api::openapi::allowed_methods`]).
pub const PATHS: [&str; 3] = ["/ui", "/ui/{file}", "/ui/vendor/{file}"];

/// What the page may load and call: its own origin only (no inline script or style markup).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Registers `/ui` (the page), `/ui/` (the same) and `/ui/{file}` (its scripts and style).
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/ui", web::get().to(page))
        .route("/ui/{file:.+}", web::get().to(file))
        .route("/ui/", web::get().to(page));
}

/// The page (`index.html`).
pub async fn page(req: HttpRequest) -> HttpResponse {
    serve(&req, &ASSETS[0], etags()[0].as_str())
}

/// A file of the page by its path under `/ui/`; 404 (a problem) for any other.
pub async fn file(req: HttpRequest, path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let i = ASSETS
        .iter()
        .position(|a| a.path == path.as_str())
        .ok_or_else(|| ApiError::not_found(format!("no file `{path}` in the timeline")))?;
    Ok(serve(&req, &ASSETS[i], etags()[i].as_str()))
}

/// The strong `ETag` of every asset (quoted hex SHA-256, first 16 bytes), in [`ASSETS`] order.
fn etags() -> &'static [String] {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    TAGS.get_or_init(|| etags_of(ASSETS))
}

/// The strong `ETag` of each of `assets` (quoted hex SHA-256, first 16 bytes), in order.
pub(super) fn etags_of(assets: &[Asset]) -> Vec<String> {
    assets.iter().map(|a| format!("\"{}\"", hex::encode(&Sha256::digest(a.body)[..16]))).collect()
}

/// `200` with the asset, or `304` when `If-None-Match` names its tag, under the timeline's
/// [`CSP`].
fn serve(req: &HttpRequest, asset: &Asset, etag: &str) -> HttpResponse {
    serve_with(req, asset, etag, CSP)
}

/// `200` with the asset, or `304` when `If-None-Match` names its tag, under the
/// Content-Security-Policy `csp`. Clients revalidate on every use (`no-cache`), so a new
/// binary's files are picked up at once.
pub(super) fn serve_with(req: &HttpRequest, asset: &Asset, etag: &str, csp: &'static str) -> HttpResponse {
    let fresh = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut res = if fresh { HttpResponse::NotModified() } else { HttpResponse::Ok() };
    res.insert_header((header::ETAG, HeaderValue::from_str(etag).expect("a hex tag is a header value")))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((header::CONTENT_SECURITY_POLICY, csp));
    if fresh {
        return res.finish();
    }
    res.content_type(asset.content_type).body(asset.body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_there_and_the_page_names_them() {
        let page = std::str::from_utf8(ASSETS[0].body).unwrap();
        assert_eq!(ASSETS[0].path, "index.html");
        for a in &ASSETS[1..4] {
            assert!(page.contains(&format!("/ui/{}", a.path)), "index.html loads {}", a.path);
        }
        assert!(ASSETS.iter().all(|a| !a.body.is_empty()));
        let d3 = std::str::from_utf8(ASSETS[3].body).unwrap();
        assert!(d3.starts_with("// https://d3js.org v7."), "the vendored d3 is version 7");
        assert_eq!(etags().len(), ASSETS.len());
    }
}
