//! The OpenAPI 3.1 document, generated from the handlers' `#[utoipa::path]` annotations and
//! the types' `ToSchema` derives. Committed as `openapi/coreserve.yaml` (a test checks it is
//! current; regenerate with `cargo run -- openapi > openapi/coreserve.yaml`) and served at
//! `/openapi.json`.

use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::routes::{health, holds, network, plans, sites, tokens};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "coreserve",
        description = "Advance co-reservation broker: books CPUs at sites and bandwidth on network links together, in advance. Errors are RFC 9457 problem details (application/problem+json).",
        license(name = "MIT OR Apache-2.0")
    ),
    paths(
        plans::create, plans::list, plans::get, plans::cancel,
        sites::list, sites::get, sites::put, sites::availability, sites::reservations, sites::hold,
        network::topology, network::route, network::hold,
        holds::commit, holds::abort, holds::extend,
        tokens::create,
        health::healthz, health::readyz, health::metrics, health::openapi_json,
    ),
    modifiers(&BearerAuth),
    tags(
        (name = "plans", description = "Plan and book multi-job requests; read and cancel plans"),
        (name = "sites", description = "GIS catalogue and each site's LIS"),
        (name = "network", description = "The NIS: topology and routes"),
        (name = "holds", description = "Two-phase commit for service clients"),
        (name = "tokens", description = "API tokens (admin)"),
        (name = "ops", description = "Probes, metrics, this document"),
    )
)]
pub struct ApiDoc;

/// Declares the `bearer` security scheme the paths refer to.
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let components = api.components.get_or_insert_with(Default::default);
        components.add_security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    }
}

/// The document as YAML (what `openapi/coreserve.yaml` holds).
pub fn yaml() -> String {
    ApiDoc::openapi().to_yaml().expect("the OpenAPI document serialises")
}

/// The document as pretty JSON (what `/openapi.json` serves).
pub fn json() -> String {
    ApiDoc::openapi().to_pretty_json().expect("the OpenAPI document serialises")
}
