//! Route table: every endpoint of the service, registered in [`configure`].
//!
//! Reads under `/v1` need a token of any role; see each handler for stricter rules.

pub mod health;
pub mod holds;
pub mod network;
pub mod plans;
pub mod sites;
pub mod tokens;

use actix_web::web;

use super::problem::ApiError;

/// Registers every route.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(health::healthz))
        .route("/readyz", web::get().to(health::readyz))
        .route("/metrics", web::get().to(health::metrics))
        .route("/openapi.json", web::get().to(health::openapi_json))
        .service(
            web::scope("/v1")
                .service(web::resource("/plans").route(web::post().to(plans::create)).route(web::get().to(plans::list)))
                .service(
                    web::resource("/plans/{id}").route(web::get().to(plans::get)).route(web::delete().to(plans::cancel)),
                )
                .route("/sites", web::get().to(sites::list))
                .service(web::resource("/sites/{id}").route(web::get().to(sites::get)).route(web::put().to(sites::put)))
                .route("/sites/{id}/availability", web::get().to(sites::availability))
                .route("/sites/{id}/reservations", web::get().to(sites::reservations))
                .route("/sites/{id}/holds", web::post().to(sites::hold))
                .route("/network", web::get().to(network::topology))
                .route("/network/route", web::get().to(network::route))
                .route("/network/holds", web::post().to(network::hold))
                .route("/holds/{id}/commit", web::post().to(holds::commit))
                .route("/holds/{id}/abort", web::post().to(holds::abort))
                .route("/holds/{id}/extend", web::post().to(holds::extend))
                .route("/tokens", web::post().to(tokens::create)),
        );
}

/// Fallback for unknown paths.
pub async fn not_found(req: actix_web::HttpRequest) -> actix_web::HttpResponse {
    use actix_web::ResponseError;
    ApiError::not_found(format!("no route for {} {}", req.method(), req.path())).error_response()
}
