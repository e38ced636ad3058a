//! Route table: every endpoint of the service, registered in [`configure`] (all in one) or
//! [`configure_role`] (one role of a separated deployment).
//!
//! Reads under `/v1` need a token of any role; see each handler for stricter rules.

pub mod health;
pub mod holds;
pub mod network;
pub mod participant;
pub mod plans;
pub mod sites;
pub mod tokens;

use actix_web::web;

use super::config::Role;
use super::problem::ApiError;

/// Registers every route (role `all`).
pub fn configure(cfg: &mut web::ServiceConfig) {
    configure_role(cfg, &Role::All);
}

/// Registers the routes of one role: health, metrics and the OpenAPI document always; then
/// what the role serves (see [`Role`]).
pub fn configure_role(cfg: &mut web::ServiceConfig, role: &Role) {
    cfg.route("/healthz", web::get().to(health::healthz))
        .route("/readyz", web::get().to(health::readyz))
        .route("/metrics", web::get().to(health::metrics))
        .route("/openapi.json", web::get().to(health::openapi_json));
    let role = role.clone();
    cfg.service(web::scope("/v1").configure(move |v| match &role {
        Role::All => {
            v.configure(all_v1)
                .configure(participant::configure_sites)
                .configure(participant::configure_network)
                .configure(participant::configure_gis);
        }
        Role::Planner(_) => {
            v.configure(plans_v1).route("/tokens", web::post().to(tokens::create));
        }
        Role::Lis { .. } => {
            v.configure(sites_read_v1)
                .route("/sites/{id}/availability", web::get().to(sites::availability))
                .route("/sites/{id}/reservations", web::get().to(sites::reservations))
                .route("/sites/{id}/holds", web::post().to(sites::hold))
                .configure(holds_v1)
                .configure(participant::configure_sites);
        }
        Role::Nis => {
            v.route("/network", web::get().to(network::topology))
                .route("/network/route", web::get().to(network::route))
                .route("/network/holds", web::post().to(network::hold))
                .configure(holds_v1)
                .configure(participant::configure_network);
        }
        Role::Gis => {
            v.configure(sites_read_v1).configure(participant::configure_gis);
        }
    }));
}

fn plans_v1(v: &mut web::ServiceConfig) {
    v.service(web::resource("/plans").route(web::post().to(plans::create)).route(web::get().to(plans::list)))
        .service(web::resource("/plans/{id}").route(web::get().to(plans::get)).route(web::delete().to(plans::cancel)));
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
        .route("/network", web::get().to(network::topology))
        .route("/network/route", web::get().to(network::route))
        .route("/network/holds", web::post().to(network::hold))
        .configure(holds_v1)
        .route("/tokens", web::post().to(tokens::create));
}

/// Fallback for unknown paths.
pub async fn not_found(req: actix_web::HttpRequest) -> actix_web::HttpResponse {
    use actix_web::ResponseError;
    ApiError::not_found(format!("no route for {} {}", req.method(), req.path())).error_response()
}
