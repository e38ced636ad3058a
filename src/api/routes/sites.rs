//! `/v1/sites`: the GIS catalogue and each site's LIS (availability, reservations, holds).
//!
//! `PUT /v1/sites/{id}` (admin) updates an existing site's `price_per_cpu_hour` and `os` in the
//! GIS and its LIS (later offers and plans use them). Not supported at run time, refused with
//! 422: adding a site (it needs a LIS and a place in the NIS's topology: restart with it in
//! grid.json), changing `cpus` (the calendar's capacity) or `node` (the NIS's site-to-node map).

use actix_web::{web, HttpResponse};
use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::holds::HoldView;
use crate::api::auth::Caller;
use crate::api::extract::{Admin, Body, Guarded, Query, Service};
use crate::api::problem::ApiError;
use crate::api::state::AppState;
use crate::lis::{Booked, SiteUpdateError};
use crate::model::{from_time, GpuDemand, NodeId, PoolGpus, Site, SiteAttributes, SiteId};
use crate::planner::ParticipantRef;
use crate::protocol::{ComputeHoldRequest, ComputeQuery, HoldId, HoldState, Participant, TxnId};
use crate::store::PlanFilter;

/// `PUT /v1/sites/{id}` body (the site without its id, which is in the path). Unknown fields
/// are refused.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SiteBody {
    /// Must equal the current node.
    pub node: NodeId,
    /// Must equal the current CPU count.
    #[schema(minimum = 1, maximum = 1073741824)]
    pub cpus: u32,
    /// 1-128 characters, not blank, no control characters. Cannot change while holds or
    /// reservations of the site end in the future (409).
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = r"^[^\x00-\x1F\x7F-\x9F]*[^\s\x00-\x1F\x7F-\x9F][^\x00-\x1F\x7F-\x9F]*$"
    )]
    pub os: String,
    /// 0 ..= 1,000,000.
    #[schema(minimum = 0, maximum = 1000000)]
    pub price_per_cpu_hour: f64,
    /// The other attributes (all optional; `gpus` must equal the current pools). Cannot change
    /// while holds or reservations of the site end in the future (409), except
    /// `price_per_gpu_hour`.
    #[serde(flatten)]
    pub attributes: SiteAttributes,
    /// Whatever else the body holds: refused (serde's `deny_unknown_fields` does not work
    /// beside `flatten`; the attributes take their fields first).
    #[serde(flatten, skip_serializing)]
    #[schema(ignore)]
    pub unknown: std::collections::BTreeMap<String, serde_json::Value>,
}

/// `GET /v1/sites/{id}/availability` query: the LIS free-slot search.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AvailabilityQueryParams {
    /// Window start (RFC 3339).
    pub from: DateTime<Utc>,
    /// Window end: the job must end by then.
    pub to: DateTime<Utc>,
    /// CPUs wanted, 1 ..= 2^30.
    #[param(minimum = 1, maximum = 1073741824)]
    pub cpus: u32,
    /// Seconds wanted, 1 ..= 3,153,600,000.
    #[param(minimum = 1, maximum = 3153600000_i64)]
    pub duration_s: i64,
    /// GPUs wanted with the CPUs, of one pool (0 or absent: none).
    #[serde(default)]
    #[param(minimum = 0, maximum = 1073741824)]
    pub gpus: u32,
    /// Least compute capability of those GPUs.
    #[serde(default)]
    pub min_gpu_compute_capability: Option<f64>,
}

/// What the LIS offers.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AvailabilityView {
    pub site: String,
    /// Earliest start at which `cpus` CPUs are free for `duration_s` inside the window; absent
    /// when there is none.
    pub earliest_start: Option<DateTime<Utc>>,
    /// Mean booked fraction of the site's CPUs over the window.
    pub utilisation: f64,
    pub price_per_cpu_hour: f64,
    /// With `gpus`: the pool whose GPUs are free from `earliest_start`.
    pub gpu_model: Option<String>,
    pub price_per_gpu_hour: f64,
}

/// A time window query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WindowQuery {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

/// State of a hold or reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReservationState {
    Held,
    Committed,
}

impl ReservationState {
    /// The view of a hold's state: held (with its lease's end) or committed.
    pub(crate) fn of(state: HoldState) -> (Self, Option<DateTime<Utc>>) {
        match state {
            HoldState::Held { expires_at } => (ReservationState::Held, Some(from_time(expires_at))),
            HoldState::Committed => (ReservationState::Committed, None),
        }
    }
}

/// The hold id a booking listing shows `caller`: its own holds' (an admin: every one), so that
/// another principal's id cannot be used against its booking.
pub(crate) fn visible_hold(caller: &Caller, hold: HoldId, owner: Option<&str>) -> Option<HoldId> {
    (caller.admin || owner.is_some_and(|o| caller.owns_hold(o))).then_some(hold)
}

/// One hold or reservation of a site.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReservationView {
    /// The hold's id: shown only to the principal that prepared it and to admins (another
    /// principal's booking is listed without it, so that its id cannot be used against it).
    pub hold: Option<HoldId>,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub cpus: u64,
    /// GPUs booked with the CPUs.
    pub gpus: Option<PoolGpus>,
    pub state: ReservationState,
    /// Lease end of a hold.
    pub expires_at: Option<DateTime<Utc>>,
    /// At a Slurm site: the Slurm advance reservation's name (shown with the hold id).
    pub reservation_name: Option<String>,
    /// Why the site's scheduler no longer honours this reservation (absent: it does).
    pub broken: Option<String>,
}

/// `POST /v1/sites/{id}/holds` body: prepare (phase 1) a compute hold.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SiteHoldBody {
    /// Transaction id (default: fresh).
    #[serde(default)]
    pub txn: Option<TxnId>,
    /// CPUs, 1 ..= 2^30.
    #[schema(minimum = 1, maximum = 1073741824)]
    pub cpus: u32,
    /// Not in the past; before `end`.
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// GPUs of one pool held with the CPUs (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<PoolGpus>,
}

/// Every site, sorted by id.
#[utoipa::path(get, path = "/v1/sites", operation_id = "list_sites", tag = "sites",
    responses((status = 200, body = Vec<Site>)),
    security(("bearer" = [])))]
pub async fn list(state: web::Data<AppState>, _caller: Caller) -> web::Json<Vec<Site>> {
    web::Json(state.participants.gis.sites())
}

fn find(state: &AppState, id: &str) -> Result<Site, ApiError> {
    state
        .participants
        .gis
        .sites()
        .into_iter()
        .find(|s| s.id == id)
        .ok_or_else(|| ApiError::not_found(format!("unknown site `{id}`")))
}

/// One site.
#[utoipa::path(get, path = "/v1/sites/{id}", operation_id = "get_site", tag = "sites", params(("id" = String, Path)),
    responses((status = 200, body = Site)),
    security(("bearer" = [])))]
pub async fn get(
    state: web::Data<AppState>,
    _caller: Caller,
    id: web::Path<String>,
) -> Result<web::Json<Site>, ApiError> {
    Ok(web::Json(find(&state, &id)?))
}

/// Update a site's price and OS (admin).
#[utoipa::path(put, path = "/v1/sites/{id}", operation_id = "update_site", tag = "sites", params(("id" = String, Path)), request_body = SiteBody,
    responses(
        (status = 200, body = Site),
        (status = 403, description = "Not an admin"),
        (status = 422, description = "A new site, or a change of cpus or node: not supported at run time"),
        (status = 409, description = "An os change while holds or reservations of the site end in the future (the detail names the plans)"),
    ),
    security(("bearer" = [])))]
pub async fn put(
    state: web::Data<AppState>,
    g: Guarded<Admin, web::Path<String>, Body<SiteBody>>,
) -> Result<web::Json<Site>, ApiError> {
    let Guarded { path: id, body: Body(body), .. } = g;
    let id = SiteId::from(id.into_inner());
    let lis = state.participants.lis.get(&id).ok_or_else(|| {
        ApiError::invalid(format!(
            "site `{id}` does not exist; adding sites at run time is not supported (add it to grid.json and restart)"
        ))
    })?;
    let b = body;
    if let Some(field) = b.unknown.keys().next() {
        return Err(ApiError::invalid(format!("unknown field `{field}`")));
    }
    let site = Site {
        id,
        node: b.node,
        cpus: b.cpus,
        os: b.os,
        price_per_cpu_hour: b.price_per_cpu_hour,
        attributes: b.attributes,
    };
    // The LIS checks what may change; the GIS follows only if it accepted.
    match lis.update_site(site.clone()) {
        Ok(()) => {}
        Err(SiteUpdateError::OsInUse { site, holds }) => return Err(os_in_use(&state, &site, &holds).await?),
        Err(e) => return Err(ApiError::invalid(e)),
    }
    state.participants.gis.upsert(site.clone());
    state.store.save_site(&site).await?;
    tracing::info!(site = %site.id, os = %site.os, price = site.price_per_cpu_hour, "site updated");
    Ok(web::Json(site))
}

/// The 409 of an OS change under bookings that end in the future: names the committed plans
/// that hold them, and any other holds and reservations (made through the hold endpoints).
async fn os_in_use(state: &AppState, site: &str, holds: &[HoldId]) -> Result<ApiError, ApiError> {
    let filter = PlanFilter { owner: None, status: None, from: None, to: None };
    let wanted: HashSet<&HoldId> = holds.iter().collect();
    let mut covered: HashSet<HoldId> = HashSet::new();
    let mut plans = Vec::new();
    for p in state.store.list_plans(&filter).await?.into_iter().filter(|p| p.status.holds_reservations()) {
        let mine: Vec<HoldId> = p
            .bookings
            .iter()
            .filter(|b| b.participant == ParticipantRef::Site(site.into()) && wanted.contains(&b.hold))
            .map(|b| b.hold)
            .collect();
        if !mine.is_empty() {
            covered.extend(mine);
            plans.push(p.id.to_string());
        }
    }
    let others: Vec<String> = holds.iter().filter(|h| !covered.contains(h)).map(ToString::to_string).collect();
    let mut detail =
        format!("site `{site}`: os cannot change while bookings made for the current os end in the future");
    if !plans.is_empty() {
        detail.push_str(&format!("; committed plans: {}", plans.join(", ")));
    }
    if !others.is_empty() {
        detail.push_str(&format!("; other holds and reservations: {}", others.join(", ")));
    }
    detail.push_str(" (cancel them or wait until they end; price changes are always accepted)");
    Ok(ApiError::conflict("site-in-use", "The site has bookings that depend on it", detail))
}

/// The window `[from, to)` in seconds: both inside the horizon, `from` before `to` (else 422).
pub(crate) fn window(state: &AppState, from: &DateTime<Utc>, to: &DateTime<Utc>) -> Result<(i64, i64), ApiError> {
    let (f, t) = (state.check_horizon("from", from)?, state.check_horizon("to", to)?);
    if f >= t {
        return Err(ApiError::invalid("`from` must be before `to`"));
    }
    Ok((f, t))
}

/// 422 for a hold that would start before now (a hold books the future).
pub(crate) fn not_past(state: &AppState, start: i64) -> Result<(), ApiError> {
    let now = state.now();
    if start < now {
        return Err(ApiError::invalid(format!(
            "start {} is in the past (now is {}); a hold must start now or later",
            from_time(start).to_rfc3339(),
            from_time(now).to_rfc3339()
        )));
    }
    Ok(())
}

/// The LIS free-slot search: earliest start of `cpus` CPUs for `duration_s` in `[from, to]`,
/// never before now + the broker's W interval (no plan starts earlier); more CPUs than the
/// site has are 422.
#[utoipa::path(get, path = "/v1/sites/{id}/availability", operation_id = "site_availability", tag = "sites", params(("id" = String, Path), AvailabilityQueryParams),
    responses((status = 200, body = AvailabilityView),
        (status = 422, description = "More CPUs than the site has, or an invalid window")),
    security(("bearer" = [])))]
pub async fn availability(
    state: web::Data<AppState>,
    _caller: Caller,
    id: web::Path<String>,
    q: Query<AvailabilityQueryParams>,
) -> Result<web::Json<AvailabilityView>, ApiError> {
    let lis = state.lis(&id)?;
    let (from, to) = window(&state, &q.from, &q.to)?;
    if q.cpus == 0 || q.duration_s <= 0 {
        return Err(ApiError::invalid("cpus and duration_s must be > 0"));
    }
    let size = lis.site().cpus;
    if q.cpus > size {
        return Err(ApiError::invalid(format!(
            "site `{}` has {size} CPUs; {} CPUs can never fit there (ask for at most {size}, or another site: GET /v1/sites)",
            id.as_str(),
            q.cpus
        )));
    }
    // Nothing a broker plans starts before now + its W interval: that is the earliest start.
    let from = from.max(state.now() + state.config.w_interval_s);
    if q.min_gpu_compute_capability.is_some_and(|c| !c.is_finite() || c < 0.0) {
        return Err(ApiError::invalid("min_gpu_compute_capability must be a finite number >= 0"));
    }
    let gpus = (q.gpus > 0).then(|| GpuDemand {
        count: q.gpus,
        min_compute_capability: q.min_gpu_compute_capability,
        min_memory_gib: None,
        model: None,
    });
    let query = ComputeQuery {
        site: id.as_str().into(),
        cpus: q.cpus,
        duration_s: q.duration_s,
        window_start: from,
        deadline: to,
        gpus,
    };
    let o = lis.query(&query).await?;
    Ok(web::Json(AvailabilityView {
        site: o.site.into(),
        earliest_start: o.earliest_start.map(from_time),
        utilisation: o.utilisation,
        price_per_cpu_hour: o.price_per_cpu_hour,
        gpu_model: o.gpu_model,
        price_per_gpu_hour: o.price_per_gpu_hour,
    }))
}

/// Holds and reservations of the site overlapping `[from, to)`; hold ids only of the caller's
/// own holds (an admin sees every id).
#[utoipa::path(get, path = "/v1/sites/{id}/reservations", operation_id = "site_reservations", tag = "sites", params(("id" = String, Path), WindowQuery),
    responses((status = 200, body = Vec<ReservationView>),
        (status = 422, description = "A window outside the horizon, or `from` not before `to`")),
    security(("bearer" = [])))]
pub async fn reservations(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    q: Query<WindowQuery>,
) -> Result<web::Json<Vec<ReservationView>>, ApiError> {
    let lis = state.lis(&id)?;
    windowed(&state, &caller, &q, |from, to| Ok(lis.booked(from, to)))
}

/// A booking of a participant as the view a listing shows `caller` (its hold id only if
/// [`visible_hold`]).
pub(crate) trait ListingView<R> {
    /// The view of `r` for `caller`.
    fn view(r: R, caller: &Caller) -> Self;
}

impl ListingView<Booked> for ReservationView {
    fn view(r: Booked, caller: &Caller) -> Self {
        let (state, expires_at) = ReservationState::of(r.state);
        let hold = visible_hold(caller, r.hold, r.owner.as_deref());
        ReservationView {
            reservation_name: hold.and(r.local_reservation),
            hold,
            start: from_time(r.start),
            end: from_time(r.end),
            cpus: r.cpus,
            gpus: r.gpus,
            state,
            expires_at,
            broken: r.broken,
        }
    }
}

/// The bookings of a window listing (a site's, a link's, the network's): the query's window
/// checked ([`window`]: 422 outside the horizon or `from` not before `to`), then `list`'s
/// bookings overlapping `[from, to)` (seconds) in its order, each as `V` for `caller`.
///
/// # Errors
/// The window's 422, or `list`'s error.
pub(crate) fn windowed<R, V: ListingView<R>>(
    state: &AppState,
    caller: &Caller,
    q: &WindowQuery,
    list: impl FnOnce(i64, i64) -> Result<Vec<R>, ApiError>,
) -> Result<web::Json<Vec<V>>, ApiError> {
    let (from, to) = window(state, &q.from, &q.to)?;
    Ok(web::Json(list(from, to)?.into_iter().map(|r| V::view(r, caller)).collect()))
}

/// Prepare a compute hold at this site (service or admin token; the hold is owned by the
/// caller's principal).
#[utoipa::path(post, path = "/v1/sites/{id}/holds", operation_id = "prepare_site_hold", tag = "holds", params(("id" = String, Path)), request_body = SiteHoldBody,
    responses(
        (status = 201, body = HoldView),
        (status = 403, description = "A user token"),
        (status = 409, description = "Not enough CPUs"),
        (status = 503, description = "The store could not make the change durable (a refused prepare promised nothing); retry"),
    ),
    security(("bearer" = [])))]
pub async fn hold(
    state: web::Data<AppState>,
    g: Guarded<Service, web::Path<String>, Body<SiteHoldBody>>,
) -> Result<HttpResponse, ApiError> {
    let Guarded { caller, path: id, body: Body(body), .. } = g;
    state.lis(&id)?;
    let (start, end) = window(&state, &body.start, &body.end)?;
    not_past(&state, start)?;
    let hold_req = ComputeHoldRequest {
        replaces: None,
        reservation_name: None,
        txn: body.txn.unwrap_or_else(TxnId::new),
        site: id.as_str().into(),
        cpus: body.cpus,
        start,
        end,
        gpus: body.gpus,
        user: Some(caller.user.clone()),
    };
    let hold = state.journaled_site(&id, true, Some(&caller))?.prepare(&hold_req).await?;
    let who = ParticipantRef::Site(id.into_inner().into());
    state.holds.lock().expect("hold registry").insert(hold.id, who);
    Ok(HttpResponse::Created().json(HoldView::from(hold)))
}
