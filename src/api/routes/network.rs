//! `/v1/network`: the NIS (topology, routes, bookings, bandwidth holds).

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::holds::HoldView;
use super::sites::{visible_hold, windowed, ListingView, ReservationState, WindowQuery};
use crate::api::auth::Caller;
use crate::api::extract::{Body, Guarded, Query, Service};
use crate::api::problem::ApiError;
use crate::api::state::AppState;
use crate::model::{from_time, Link, LinkId, Node};
use crate::nis::LinkBooked;
use crate::planner::ParticipantRef;
use crate::protocol::{HoldId, NetworkHoldRequest, NetworkQuery, Participant, TxnId};

/// The topology: nodes and links with their capacities.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NetworkView {
    pub nodes: Vec<Node>,
    pub links: Vec<Link>,
}

/// `GET /v1/network/route` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RouteQuery {
    pub from_site: String,
    pub to_site: String,
    /// Mbit/s, 1 ..= 2^30.
    #[param(minimum = 1, maximum = 1073741824)]
    pub bandwidth_mbps: u64,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// A path the NIS could reserve now.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RouteView {
    /// Link ids from the first site's node to the second's; empty when both share a node.
    pub links: Vec<LinkId>,
    pub price_per_gbps_hour: f64,
    /// Bottleneck free bandwidth over the interval (Mbit/s); absent for an empty path.
    pub free_mbps: Option<u64>,
}

/// The NIS's answer: a route, or none (no path with enough free bandwidth).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RouteAnswer {
    pub route: Option<RouteView>,
}

/// One link's share of a hold or reservation of bandwidth (a hold on a path of N links is
/// listed once per link, with the same `hold`).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LinkReservationView {
    /// The link.
    pub link: LinkId,
    /// The hold's id: shown only to the principal that prepared it and to admins (another
    /// principal's booking is listed without it, so that its id cannot be used against it).
    pub hold: Option<HoldId>,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Booked bandwidth (Mbit/s).
    pub bandwidth_mbps: u64,
    pub state: ReservationState,
    /// Lease end of a hold.
    pub expires_at: Option<DateTime<Utc>>,
}

impl ListingView<LinkBooked> for LinkReservationView {
    /// The view of `r` for `caller`: the hold id only for an admin or the hold's owner.
    fn view(r: LinkBooked, caller: &Caller) -> Self {
        let (state, expires_at) = ReservationState::of(r.state);
        LinkReservationView {
            hold: visible_hold(caller, r.hold, r.owner.as_deref()),
            link: r.link,
            start: from_time(r.start),
            end: from_time(r.end),
            bandwidth_mbps: r.bandwidth_mbps,
            state,
            expires_at,
        }
    }
}

/// `POST /v1/network/holds` body: prepare (phase 1) bandwidth on every link of a path.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkHoldBody {
    #[serde(default)]
    pub txn: Option<TxnId>,
    /// The path (e.g. from `GET /v1/network/route`); all links are held or none.
    #[schema(min_items = 1)]
    pub links: Vec<LinkId>,
    /// Mbit/s, 1 ..= 2^30.
    #[schema(minimum = 1, maximum = 1073741824)]
    pub bandwidth_mbps: u64,
    /// Not in the past; before `end`.
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// Nodes and links.
#[utoipa::path(get, path = "/v1/network", operation_id = "get_network", tag = "network",
    responses((status = 200, body = NetworkView)),
    security(("bearer" = [])))]
pub async fn topology(state: web::Data<AppState>, _caller: Caller) -> web::Json<NetworkView> {
    web::Json(NetworkView { nodes: state.grid.nodes().to_vec(), links: state.grid.links().to_vec() })
}

fn interval(state: &AppState, start: &DateTime<Utc>, end: &DateTime<Utc>) -> Result<(i64, i64), ApiError> {
    let (s, e) = (state.check_horizon("start", start)?, state.check_horizon("end", end)?);
    if s >= e {
        return Err(ApiError::invalid("`start` must be before `end`"));
    }
    Ok((s, e))
}

/// The route the NIS would take for this bandwidth over `[start, end)`.
#[utoipa::path(get, path = "/v1/network/route", operation_id = "get_route", tag = "network", params(RouteQuery),
    responses((status = 200, body = RouteAnswer), (status = 404, description = "Unknown site"),
        (status = 422, description = "Bandwidth out of range, or `start` not before `end`")),
    security(("bearer" = [])))]
pub async fn route(
    state: web::Data<AppState>,
    _caller: Caller,
    q: Query<RouteQuery>,
) -> Result<web::Json<RouteAnswer>, ApiError> {
    let (start, end) = interval(&state, &q.start, &q.end)?;
    if q.bandwidth_mbps == 0 {
        return Err(ApiError::invalid("bandwidth_mbps must be > 0"));
    }
    let query = NetworkQuery {
        from_site: q.from_site.as_str().into(),
        to_site: q.to_site.as_str().into(),
        bandwidth_mbps: q.bandwidth_mbps,
        start,
        end,
    };
    let route = state.participants.nis.query(&query).await?;
    Ok(web::Json(RouteAnswer {
        route: route.map(|r| RouteView {
            links: r.links,
            price_per_gbps_hour: r.price_per_gbps_hour,
            free_mbps: (r.free_mbps != u64::MAX).then_some(r.free_mbps),
        }),
    }))
}

/// The NIS's bookings overlapping the window, on `link` or (`None`) every link.
fn bookings(
    state: &AppState,
    caller: &Caller,
    link: Option<&str>,
    q: &WindowQuery,
) -> Result<web::Json<Vec<LinkReservationView>>, ApiError> {
    windowed(state, caller, q, |from, to| Ok(state.participants.nis.booked(link, from, to)?))
}

/// Bandwidth holds and reservations of one link overlapping `[from, to)`, sorted by start;
/// hold ids only of the caller's own holds (an admin sees every id).
#[utoipa::path(get, path = "/v1/network/links/{id}/reservations", operation_id = "link_reservations", tag = "network",
    params(("id" = String, Path, description = "link id"), WindowQuery),
    responses((status = 200, body = Vec<LinkReservationView>),
        (status = 404, description = "Unknown link"),
        (status = 422, description = "A window outside the horizon, or `from` not before `to`")),
    security(("bearer" = [])))]
pub async fn link_reservations(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    q: Query<WindowQuery>,
) -> Result<web::Json<Vec<LinkReservationView>>, ApiError> {
    bookings(&state, &caller, Some(&id), &q)
}

/// Bandwidth holds and reservations of every link overlapping `[from, to)` (one entry per
/// link of each booked path), sorted by link (in topology order) then start; hold ids only of
/// the caller's own holds (an admin sees every id).
#[utoipa::path(get, path = "/v1/network/reservations", operation_id = "network_reservations", tag = "network", params(WindowQuery),
    responses((status = 200, body = Vec<LinkReservationView>),
        (status = 422, description = "A window outside the horizon, or `from` not before `to`")),
    security(("bearer" = [])))]
pub async fn reservations(
    state: web::Data<AppState>,
    caller: Caller,
    q: Query<WindowQuery>,
) -> Result<web::Json<Vec<LinkReservationView>>, ApiError> {
    bookings(&state, &caller, None, &q)
}

/// Prepare a bandwidth hold (service or admin token; the hold is owned by the caller's principal).
#[utoipa::path(post, path = "/v1/network/holds", operation_id = "prepare_network_hold", tag = "holds", request_body = NetworkHoldBody,
    responses(
        (status = 201, body = HoldView),
        (status = 403),
        (status = 404, description = "Unknown link"),
        (status = 409, description = "Not enough bandwidth"),
        (status = 503, description = "The store could not make the change durable (a refused prepare promised nothing); retry"),
    ),
    security(("bearer" = [])))]
pub async fn hold(
    state: web::Data<AppState>,
    g: Guarded<Service, (), Body<NetworkHoldBody>>,
) -> Result<HttpResponse, ApiError> {
    let Guarded { caller, body: Body(body), .. } = g;
    let (start, end) = interval(&state, &body.start, &body.end)?;
    super::sites::not_past(&state, start)?;
    if body.links.is_empty() {
        return Err(ApiError::invalid("a network hold needs at least one link"));
    }
    let b = body;
    let hold_req = NetworkHoldRequest {
        replaces: None,
        port: None,
        txn: b.txn.unwrap_or_else(TxnId::new),
        links: b.links,
        bandwidth_mbps: b.bandwidth_mbps,
        start,
        end,
        sites: None,
    };
    let hold = state.journaled_network(true, Some(&caller))?.prepare(&hold_req).await?;
    state.holds.lock().expect("hold registry").insert(hold.id, ParticipantRef::Network);
    Ok(HttpResponse::Created().json(HoldView::from(hold)))
}
