//! The OpenAPI 3.1 document, generated from the handlers' `#[utoipa::path]` annotations and
//! the types' `ToSchema` derives. Committed as `openapi/coreserve.yaml` (a test checks it is
//! current; regenerate with `cargo run -- openapi > openapi/coreserve.yaml`) and served at
//! `/openapi.json` ([`configure`]). The 405 table ([`allowed_methods`]) is read from it.

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse, ResponseError};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::config::Role;
use super::problem::ApiError;
use super::routes::{
    docs, events, health, holds, modification, network, participant, plans, projects, sites, tokens, ui, webhooks,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "coreserve",
        description = "Advance co-reservation broker: books CPUs at sites and bandwidth on network links together, in advance. Errors are RFC 9457 problem details (application/problem+json).",
        license(name = "MIT OR Apache-2.0")
    ),
    paths(
        plans::create, plans::list, plans::get, plans::cancel, modification::modify, events::stream,
        webhooks::create, webhooks::list, webhooks::get, webhooks::deliveries, webhooks::delete,
        projects::put, projects::list, projects::get, projects::usage,
        sites::list, sites::get, sites::put, sites::availability, sites::reservations, sites::hold,
        network::topology, network::route, network::reservations, network::link_reservations, network::hold,
        holds::commit, holds::abort, holds::extend,
        tokens::create, tokens::revoke, tokens::whoami,
        health::healthz, health::readyz, health::metrics, openapi_json,
    ),
    // `PlanStatus` is referenced by `GET /v1/plans?status=` but inlined in the plans it shows
    // (a generic outcome's status); `Problem` is the body `CommonAnswers` gives every error
    // answer. Both are listed here to be components.
    components(schemas(crate::model::PlanStatus, super::problem::Problem)),
    servers((url = "/", description = "This server (the document is served at /openapi.json)")),
    modifiers(&BearerAuth, &CommonAnswers, &HoldLinks),
    tags(
        (name = "plans", description = "Plan and book multi-job requests; read and cancel plans"),
        (name = "projects", description = "Planned-Use fair share: allocations per project (admin), usage and priority"),
        (name = "sites", description = "GIS catalogue and each site's LIS"),
        (name = "network", description = "The NIS: topology, routes and bandwidth bookings"),
        (name = "holds", description = "Two-phase commit for service clients"),
        (name = "tokens", description = "API tokens: issue them (admin), say whom one acts as"),
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

/// Gives every error answer (`4xx`, `5xx`) that a route declares with a description only the
/// problem body (`application/problem+json`, schema `Problem`): what [`ApiError`] answers.
/// Then declares on every operation the answers the HTTP layer gives before or around its
/// handler, each as a problem body, unless the operation already describes them:
/// - with a security requirement: `401` (no, malformed or unknown token) and `503` (the token
///   is looked up in the store);
/// - with a request body: `400` (malformed JSON), `413` (over 4 MiB), `415` (not
///   `application/json`), `422` (not an object, control characters, wrong shape, validation);
/// - with query or header parameters: `400` (unparsable value);
/// - with path parameters: `404` (unparsable or unknown id).
///
/// It also constrains the `Idempotency-Key` header (1-255 visible ASCII characters, no
/// surrounding space).
struct CommonAnswers;

impl Modify for CommonAnswers {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::{Operation, ParameterIn};
        use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};

        let body = || ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build();
        let problem = |what: &str| {
            RefOr::T(ResponseBuilder::new().description(what).content(super::problem::PROBLEM_JSON, body()).build())
        };
        let add = |op: &mut Operation, status: &str, what: &str| {
            op.responses.responses.entry(status.to_owned()).or_insert_with(|| problem(what));
        };
        for item in api.paths.paths.values_mut() {
            let ops = [&mut item.get, &mut item.post, &mut item.put, &mut item.delete, &mut item.patch];
            for op in ops.into_iter().flatten() {
                for (status, answer) in op.responses.responses.iter_mut() {
                    if let RefOr::T(declared) = answer {
                        if status.starts_with(['4', '5']) && declared.content.is_empty() {
                            declared.content.insert(super::problem::PROBLEM_JSON.to_owned(), body());
                        }
                    }
                }
                if op.security.as_ref().is_some_and(|s| !s.is_empty()) {
                    add(op, "401", "No, malformed or unknown bearer token");
                    add(op, "503", "The store is unavailable; retry");
                }
                if op.request_body.is_some() {
                    add(op, "400", "Malformed JSON");
                    add(op, "413", "Body over 4 MiB");
                    add(op, "415", "Content-Type is not application/json");
                    add(
                        op,
                        "422",
                        "Not a JSON object, control characters, unknown or missing fields, or invalid values",
                    );
                }
                let params = op.parameters.as_deref().unwrap_or_default();
                let has = |f: fn(&ParameterIn) -> bool| params.iter().any(|p| f(&p.parameter_in));
                let (query, path) = (
                    has(|i| matches!(i, ParameterIn::Query | ParameterIn::Header)),
                    has(|i| matches!(i, ParameterIn::Path)),
                );
                if query {
                    add(op, "400", "A query or header parameter cannot be parsed");
                }
                if path {
                    add(op, "404", "Unknown id (or one that cannot be parsed)");
                }
                for p in op.parameters.iter_mut().flatten() {
                    if p.name == "Idempotency-Key" {
                        p.schema = Some(RefOr::T(
                            utoipa::openapi::ObjectBuilder::new()
                                .schema_type(utoipa::openapi::schema::Type::String)
                                .min_length(Some(1))
                                .max_length(Some(255))
                                .pattern(Some(r"^[\x21-\x7E]([\x20-\x7E]*[\x21-\x7E])?$"))
                                .into(),
                        ));
                    }
                }
            }
        }
    }
}

/// Response links from a prepared hold (`201` of `prepare_site_hold` and
/// `prepare_network_hold`) to the operations on it: `commit`, `abort` and `extend`, each with
/// `id = $response.body#/id`. A client generator or a stateful fuzzer follows them from the
/// prepare to the 2PC verbs. (utoipa 5.5 writes `Link::operation_id` as `operation_id`, which
/// OpenAPI readers do not know, so the `operationId` field is written as a raw field.)
struct HoldLinks;

impl Modify for HoldLinks {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::extensions::Extensions;
        use utoipa::openapi::link::LinkBuilder;
        use utoipa::openapi::RefOr;

        let link = |operation_id: &str| {
            LinkBuilder::new()
                .parameter("id", "$response.body#/id")
                .extensions(Some(Extensions::from_iter([("operationId", operation_id)])))
                .build()
        };
        for item in api.paths.paths.values_mut() {
            let Some(op) = item.post.as_mut() else { continue };
            if !matches!(op.operation_id.as_deref(), Some("prepare_site_hold" | "prepare_network_hold")) {
                continue;
            }
            if let Some(RefOr::T(created)) = op.responses.responses.get_mut("201") {
                for (name, operation_id) in
                    [("commit", "commit_hold"), ("abort", "abort_hold"), ("extend", "extend_hold")]
                {
                    created.links.insert(name.to_owned(), RefOr::T(link(operation_id)));
                }
            }
        }
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

/// `405 Method Not Allowed` as problem+json for `method` on `path`, with `Allow` from
/// [`allowed_methods`] when the path is one the all-in-one serves.
pub fn method_not_allowed(method: &actix_web::http::Method, path: &str) -> HttpResponse {
    let detail = format!("{method} is not allowed on {path}");
    let mut res = ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed", "Method not allowed", detail)
        .error_response();
    if let Some(allow) = allowed_methods(path) {
        res.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static(allow));
    }
    res
}

/// Registers `GET /openapi.json` (every role).
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/openapi.json", web::get().to(openapi_json));
}

/// This API's OpenAPI 3.1 document.
#[utoipa::path(get, path = "/openapi.json", tag = "ops", responses((status = 200, description = "OpenAPI 3.1", content_type = "application/json")))]
pub async fn openapi_json() -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(json())
}

/// Fallback for requests no route takes: `405` with `Allow` when the all-in-one serves the
/// path with other methods ([`allowed_methods`]), else `404`.
pub async fn not_found(req: HttpRequest) -> HttpResponse {
    let all_in_one = req.app_data::<web::Data<super::AppState>>().is_some_and(|s| s.config.role == Role::All);
    if all_in_one && allowed_methods(req.path()).is_some() {
        return method_not_allowed(req.method(), req.path());
    }
    ApiError::not_found(format!("no route for {} {}", req.method(), req.path())).error_response()
}

/// The methods the all-in-one serves on `path` (e.g. `/v1/plans/42`), for `Allow`: those the
/// OpenAPI document lists for the first path template that matches it (`{param}` matches one
/// segment), plus `HEAD` wherever `GET` is served; `POST` on the participant protocol's routes
/// (which the document does not describe; [`participant::paths`], the list their registration
/// reads); `GET, HEAD` on the timeline's pages (`/ui`) and the API reference's (`/docs`), not
/// in the document either. `None` for a path no route serves.
pub fn allowed_methods(path: &str) -> Option<&'static str> {
    use std::sync::OnceLock;
    static TABLE: OnceLock<Vec<(Vec<String>, &'static str)>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let doc = ApiDoc::openapi();
        let mut table: Vec<(Vec<String>, &'static str)> = doc
            .paths
            .paths
            .iter()
            .map(|(path, item)| {
                let mut methods = Vec::new();
                for (name, op) in [
                    ("GET", &item.get),
                    ("HEAD", &item.get),
                    ("POST", &item.post),
                    ("PUT", &item.put),
                    ("PATCH", &item.patch),
                    ("DELETE", &item.delete),
                ] {
                    if op.is_some() {
                        methods.push(name);
                    }
                }
                (segments(path), &*Box::leak(methods.join(", ").into_boxed_str()))
            })
            .collect();
        for p in participant::paths() {
            table.push((segments(&format!("/v1{p}")), "POST"));
        }
        for p in ui::PATHS.iter().chain(&docs::PATHS) {
            table.push((segments(p), "GET, HEAD"));
        }
        // Literal segments first: `/v1/network/route` before a `{param}` template.
        table.sort_by_key(|(t, _)| t.iter().filter(|s| s.starts_with('{')).count());
        table
    });
    let want = segments(path);
    table
        .iter()
        .find(|(t, _)| t.len() == want.len() && t.iter().zip(&want).all(|(a, b)| a.starts_with('{') || a == b))
        .map(|(_, m)| *m)
}

fn segments(path: &str) -> Vec<String> {
    path.split('/').map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    /// Every response link names an operation of the document by `operationId` (the field
    /// OpenAPI defines; utoipa's own `operation_id` spelling must not leak out), and each
    /// prepared hold links to its commit, abort and extend with the hold's id.
    #[test]
    fn hold_links_name_existing_operations_by_operation_id() {
        let doc: Value = serde_json::from_str(&super::json()).unwrap();
        let ops: Vec<&Value> =
            doc["paths"].as_object().unwrap().values().flat_map(|p| p.as_object().unwrap().values()).collect();
        let ids: Vec<&str> = ops.iter().filter_map(|op| op["operationId"].as_str()).collect();
        let mut linked = Vec::new();
        for op in &ops {
            for (status, response) in op["responses"].as_object().into_iter().flatten() {
                for (name, link) in response["links"].as_object().into_iter().flatten() {
                    assert!(link.get("operation_id").is_none(), "{status} link {name} spells operation_id: {link}");
                    let target = link["operationId"].as_str().expect("a link names its operation by operationId");
                    assert!(ids.contains(&target), "link {name} names no operation: {target}");
                    assert_eq!(link["parameters"]["id"], "$response.body#/id");
                    linked.push((op["operationId"].as_str().unwrap().to_owned(), status.clone(), target.to_owned()));
                }
            }
        }
        linked.sort();
        let expected: Vec<(String, String, String)> = ["prepare_network_hold", "prepare_site_hold"]
            .iter()
            .flat_map(|from| {
                ["abort_hold", "commit_hold", "extend_hold"]
                    .map(|to| (from.to_string(), "201".to_string(), to.to_string()))
            })
            .collect();
        assert_eq!(linked, expected);
    }
}
