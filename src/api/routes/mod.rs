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

/// Registers every route (role `all`).
pub fn configure(cfg: &mut web::ServiceConfig) {
    configure_role(cfg, &Role::All);
}

/// Registers the routes of one role: health, metrics, the reference page of the OpenAPI
/// document at `/docs` ([`docs`]; the document itself is [`super::openapi::configure`]'s)
/// and `/v1/whoami` always; then what the role serves (see [`Role`]).
/// The all-in-one and a planner also serve the reservation timeline at `/ui` ([`ui`]); a
/// planner forwards the reads of sites and the network to its participants
/// ([`super::gateway`]).
pub fn configure_role(cfg: &mut web::ServiceConfig, role: &Role) {
    cfg.route("/healthz", web::get().to(health::healthz))
        .route("/readyz", web::get().to(health::readyz))
        .route("/metrics", web::get().to(health::metrics))
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
