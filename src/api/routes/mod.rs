//! Route table: every endpoint of the service, registered in [`configure`] (all in one) or
//! [`configure_role`] (one role of a separated deployment).
//!
//! Reads under `/v1` need a token of any role; see each handler for stricter rules.

pub mod docs;
pub mod events;
mod gateway;
pub mod health;
pub mod holds;
pub mod modification;
pub mod network;
pub mod participant;
pub mod plans;
pub mod projects;
pub mod sites;
pub mod tokens;
pub mod ui;
pub mod webhooks;

use actix_web::web;

use super::config::Role;
use super::problem::ApiError;

/// Registers every route (role `all`).
pub fn configure(cfg: &mut web::ServiceConfig) {
    configure_role(cfg, &Role::All);
}

/// Registers the routes of one role: health, metrics, the OpenAPI document, its reference
/// page at `/docs` ([`docs`]) and `/v1/whoami` always; then what the role serves (see [`Role`]).
/// The all-in-one and a planner also serve the reservation timeline at `/ui` ([`ui`]); a
/// planner forwards the reads of sites and the network to its participants
/// ([`super::gateway`]).
pub fn configure_role(cfg: &mut web::ServiceConfig, role: &Role) {
    cfg.route("/healthz", web::get().to(health::healthz))
        .route("/readyz", web::get().to(health::readyz))
        .route("/metrics", web::get().to(health::metrics))
        .route("/openapi.json", web::get().to(health::openapi_json))
        .configure(docs::configure);
    if matches!(role, Role::All | Role::Planner(_)) {
        cfg.configure(ui::configure);
    }
    let role = role.clone();
    cfg.service(web::scope("/v1").route("/whoami", web::get().to(tokens::whoami)).configure(move |v| match &role {
        Role::All => {
            v.configure(all_v1)
                .configure(participant::configure_sites)
                .configure(participant::configure_network)
                .configure(participant::configure_gis);
        }
        // The deployment's entry point: its own routes, and the others' reads forwarded.
        Role::Planner(_) => {
            v.configure(plans_v1).configure(tokens_v1).configure(gateway::configure);
        }
        // A participant process serves mostly the participant protocol: its routes come first,
        // since actix matches routes in order and every pattern with a `{segment}` tried
        // before the right one costs a regex match (10 % of a LIS's CPU when they came last).
        Role::Lis { .. } => {
            v.configure(participant::configure_sites)
                .configure(sites_read_v1)
                .route("/sites/{id}/availability", web::get().to(sites::availability))
                .route("/sites/{id}/reservations", web::get().to(sites::reservations))
                .route("/sites/{id}/holds", web::post().to(sites::hold))
                .configure(holds_v1);
        }
        Role::Nis => {
            v.configure(participant::configure_network).configure(network_v1).configure(holds_v1);
        }
        Role::Gis => {
            v.configure(participant::configure_gis).configure(sites_read_v1);
        }
    }));
}

fn plans_v1(v: &mut web::ServiceConfig) {
    v.service(web::resource("/plans").route(web::post().to(plans::create)).route(web::get().to(plans::list)))
        .service(
            web::resource("/plans/{id}")
                .route(web::get().to(plans::get))
                .route(web::delete().to(plans::cancel))
                .route(web::patch().to(modification::modify)),
        )
        .route("/projects", web::get().to(projects::list))
        .service(
            web::resource("/projects/{id}").route(web::get().to(projects::get)).route(web::put().to(projects::put)),
        )
        .route("/projects/{id}/usage", web::get().to(projects::usage))
        .route("/events", web::get().to(events::stream))
        .service(
            web::resource("/webhooks").route(web::post().to(webhooks::create)).route(web::get().to(webhooks::list)),
        )
        .service(
            web::resource("/webhooks/{id}")
                .route(web::get().to(webhooks::get))
                .route(web::delete().to(webhooks::delete)),
        )
        .route("/webhooks/{id}/deliveries", web::get().to(webhooks::deliveries));
}

fn sites_read_v1(v: &mut web::ServiceConfig) {
    v.route("/sites", web::get().to(sites::list)).route("/sites/{id}", web::get().to(sites::get));
}

fn holds_v1(v: &mut web::ServiceConfig) {
    v.route("/holds/{id}/commit", web::post().to(holds::commit))
        .route("/holds/{id}/abort", web::post().to(holds::abort))
        .route("/holds/{id}/extend", web::post().to(holds::extend));
}

/// The `/v1` routes of the all-in-one service (as before role separation).
fn all_v1(cfg: &mut web::ServiceConfig) {
    cfg.configure(plans_v1)
        .route("/sites", web::get().to(sites::list))
        .service(web::resource("/sites/{id}").route(web::get().to(sites::get)).route(web::put().to(sites::put)))
        .route("/sites/{id}/availability", web::get().to(sites::availability))
        .route("/sites/{id}/reservations", web::get().to(sites::reservations))
        .route("/sites/{id}/holds", web::post().to(sites::hold))
        .configure(network_v1)
        .configure(holds_v1)
        .configure(tokens_v1);
}

fn tokens_v1(v: &mut web::ServiceConfig) {
    v.route("/tokens", web::post().to(tokens::create)).route("/tokens/{id}", web::delete().to(tokens::revoke));
}

/// The NIS's public routes (all-in-one and role `nis`).
fn network_v1(v: &mut web::ServiceConfig) {
    v.route("/network", web::get().to(network::topology))
        .route("/network/route", web::get().to(network::route))
        .route("/network/reservations", web::get().to(network::reservations))
        .route("/network/links/{id}/reservations", web::get().to(network::link_reservations))
        .route("/network/holds", web::post().to(network::hold));
}

/// Fallback for requests no route takes: `405` with `Allow` when the all-in-one serves the
/// path with other methods ([`allowed_methods`]), else `404`.
pub async fn not_found(req: actix_web::HttpRequest) -> actix_web::HttpResponse {
    use actix_web::http::{header, StatusCode};
    use actix_web::ResponseError;
    let all_in_one = req.app_data::<web::Data<super::AppState>>().is_some_and(|s| s.config.role == Role::All);
    if let Some(allow) = allowed_methods(req.path()).filter(|_| all_in_one) {
        let detail = format!("{} is not allowed on {}", req.method(), req.path());
        let mut res = ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed", "Method not allowed", detail)
            .error_response();
        res.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static(allow));
        return res;
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
        use utoipa::OpenApi;
        let doc = super::openapi::ApiDoc::openapi();
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
