//! `/docs`: the API reference, Redoc rendering this service's OpenAPI document
//! (`/openapi.json`).
//!
//! Its files (`ui/docs/` in the repository, Redoc vendored under `ui/vendor/`, see
//! `ui/vendor/README.md`) are compiled into the binary like the timeline's ([`super::ui`]): the
//! page loads nothing from outside at run time. It holds no data and needs no token, and every
//! role serves it (each serves `/openapi.json`, the document of the whole API).

use std::sync::OnceLock;

use actix_web::{web, HttpRequest, HttpResponse};

use super::ui::{asset, etags_of, serve_with, Asset};
use crate::api::problem::ApiError;

const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8", "docs/index.html"),
    asset!("init.js", "text/javascript; charset=utf-8", "docs/init.js"),
    asset!("vendor/redoc.standalone.js", "text/javascript; charset=utf-8", "vendor/redoc.standalone.js"),
    asset!("vendor/redoc.LICENSE", "text/plain; charset=utf-8", "vendor/redoc.LICENSE"),
    asset!(
        "vendor/redoc.standalone.js.LICENSE.txt",
        "text/plain; charset=utf-8",
        "vendor/redoc.standalone.js.LICENSE.txt"
    ),
];

/// The path templates the reference answers `GET` and `HEAD` on (for `Allow` in a 405; see
/// [`crate::api::openapi::allowed_methods`]).
pub const PATHS: [&str; 3] = ["/docs", "/docs/{file}", "/docs/vendor/{file}"];

/// What the page may load and call: scripts of its own origin only, the document from its own
/// origin. Redoc (its styled-components) writes `<style>` elements, hence `'unsafe-inline'`
/// for styles only; its search index runs in a worker made from a `blob:`.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
                   img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; \
                   base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Registers `/docs` (the page), `/docs/` (the same) and `/docs/{file}` (its scripts and
/// licences).
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/docs", web::get().to(page))
        .route("/docs/", web::get().to(page))
        .route("/docs/{file:.+}", web::get().to(file));
}

/// The page (`index.html`).
pub async fn page(req: HttpRequest) -> HttpResponse {
    serve_with(&req, &ASSETS[0], etags()[0].as_str(), CSP)
}

/// A file of the page by its path under `/docs/`; 404 (a problem) for any other.
pub async fn file(req: HttpRequest, path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let i = ASSETS
        .iter()
        .position(|a| a.path == path.as_str())
        .ok_or_else(|| ApiError::not_found(format!("no file `{path}` in the API reference")))?;
    Ok(serve_with(&req, &ASSETS[i], etags()[i].as_str(), CSP))
}

/// The strong `ETag` of every asset, in [`ASSETS`] order.
fn etags() -> &'static [String] {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    TAGS.get_or_init(|| etags_of(ASSETS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_its_scripts_and_redoc_is_version_2() {
        let page = std::str::from_utf8(ASSETS[0].body).unwrap();
        for a in &ASSETS[1..3] {
            assert!(page.contains(&format!("/docs/{}", a.path)), "index.html loads {}", a.path);
        }
        let init = std::str::from_utf8(ASSETS[1].body).unwrap();
        assert!(init.contains("Redoc.init(") && init.contains("\"/openapi.json\""));
        let redoc = std::str::from_utf8(&ASSETS[2].body[..200]).unwrap();
        assert!(redoc.contains("redoc.standalone.js.LICENSE.txt"), "the vendored Redoc bundle: {redoc}");
        let third = std::str::from_utf8(ASSETS[4].body).unwrap();
        assert!(third.contains("Version: \"2."), "Redoc 2.x");
        assert_eq!(etags().len(), ASSETS.len());
    }
}
