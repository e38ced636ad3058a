//! `/v1/participant/...`: the participant protocol (query, prepare, commit, abort, release)
//! and the GIS candidate lookup, spoken by remote planners ([`crate::protocol::http`]).
//! Bodies and answers are the protocol's own serde types; every call needs a service or admin
//! token, checked before the body is read. A prepare records the caller's principal (the
//! token's `user`) as the hold's owner; commit, abort, release and extend by another
//! principal are 403 unless it is an admin (logged as an audit line):
//! [`AppState::authorize_hold`]. Errors are problem bodies with a `participant_error` field
//! carrying the exact error.
//! Every change is journaled in the store before it is answered ([`crate::protocol::Journaled`]):
//! a prepare-OK survives this process's crash until its lease ends.
//!
//! - `POST /v1/participant/sites/{site}/query`, `/queries`, `/prepare`, `/prepares` (several
//!   holds in one message) and `/snapshot` (its calendars over a window, docs/algorithm.md
//!   "Plans from snapshots"), and
//!   `POST /v1/participant/sites/{site}/holds/{id}/{commit|abort|release|extend}` (a LIS);
//! - the same under `/v1/participant/network` (the NIS);
//! - `POST /v1/participant/gis/candidates` (the GIS; body: a compute demand), and
//!   `/candidates/batch` (`{"queries": [demand, ...]}`, answered `{"answers": [...]}` in order).

use std::sync::Arc;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::{from_fn, Next};
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;

use crate::api::auth::Caller;
use crate::api::body::{parse, parse_optional};
use crate::api::extract::{Body, Guarded, Query, Service};
use crate::api::problem::ApiError;
use crate::api::state::AppState;
use crate::model::ComputeDemand;
use crate::protocol::http::{
    AnswerBatch, BatchAnswer, Extend, HoldBatch, PrepareAnswers, PrepareBatch, Prepared, QueryBatch,
};
use crate::protocol::{
    Candidates, Catalogue, ComputeHoldRequest, ComputeOffer, ComputeQuery, ComputeSnapshot, Hold, HoldId,
    NetworkHoldRequest, NetworkQuery, NetworkSnapshot, Participant, ParticipantRef, Route, SnapshotWindow,
};
use crate::protocol::{Compute, Message, Network, Role, ServiceTimes};

/// Registers the LIS endpoints (every site of this process).
///
/// In one scope per participant, so that a request matches its participant's prefix once and
/// then mostly static paths: the router tries a path with `{...}` segments by running a regex,
/// and with every route spelled out in full a hold's commit ran five of them (10 % of a LIS
/// process's CPU under load; docs/capacity.md).
pub fn configure_sites(cfg: &mut web::ServiceConfig) {
    let [query, queries, prepare, batch, lifecycle, drift, prepares, snapshot] = HOLDER_PATHS;
    cfg.service(
        web::scope(SITES_SCOPE)
            .wrap(from_fn(service_time::<Compute>))
            .route(drift, web::post().to(site_drift))
            .route(prepares, web::post().to(site_prepares))
            .route(snapshot, web::post().to(site_snapshot))
            .route(query, web::post().to(site_query))
            .route(queries, web::post().to(site_queries))
            .route(prepare, web::post().to(site_prepare))
            .route(batch, web::post().to(site_batch))
            .route(lifecycle, web::post().to(site_lifecycle)),
    );
}

/// Registers the NIS endpoints (one scope, as [`configure_sites`]).
pub fn configure_network(cfg: &mut web::ServiceConfig) {
    let [query, queries, prepare, batch, lifecycle, drift, prepares, snapshot] = HOLDER_PATHS;
    cfg.service(
        web::scope(NETWORK_SCOPE)
            .wrap(from_fn(service_time::<Network>))
            .route(drift, web::post().to(net_drift))
            .route(prepares, web::post().to(net_prepares))
            .route(snapshot, web::post().to(net_snapshot))
            .route(query, web::post().to(net_query))
            .route(queries, web::post().to(net_queries))
            .route(prepare, web::post().to(net_prepare))
            .route(batch, web::post().to(net_batch))
            .route(lifecycle, web::post().to(net_lifecycle)),
    );
}

/// With `--service-times` ([`crate::api::ServeConfig::service_times`]): a message of the
/// participant protocol waits its service time, drawn for the message its path names, before
/// it is handled (and before its caller is checked: the wait stands for the network and the
/// middleware of Ando & Aida's Table 2). Drift reports and lease extensions do not wait.
async fn service_time<R: Role>(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let state = req.app_data::<web::Data<AppState>>();
    let times = state.and_then(|s| s.config.service_times.as_ref());
    if let Some(range) = times.and_then(|t| t.of(R::KIND, message_of(req.path())?)) {
        let wait = ServiceTimes::draw(&mut rand::thread_rng(), range);
        tokio::time::sleep(wait).await;
    }
    next.call(req).await
}

/// The protocol message a participant path carries (its last segment); `None`: drift, or not
/// a message.
fn message_of(path: &str) -> Option<Message> {
    Some(match path.rsplit('/').next()? {
        "query" | "queries" | "snapshot" => Message::Query,
        "prepare" | "prepares" => Message::Prepare,
        "commit" => Message::Commit,
        "abort" => Message::Abort,
        "release" => Message::Release,
        "extend" => Message::Extend,
        _ => return None,
    })
}

/// The scope of the LIS endpoints, under `/v1`.
const SITES_SCOPE: &str = "/participant/sites/{site}";
/// The scope of the NIS endpoints, under `/v1`.
const NETWORK_SCOPE: &str = "/participant/network";
/// A holder's endpoints (LIS and NIS alike) in its scope, in the order [`configure_sites`] and
/// [`configure_network`] destructure them: query, query batch, prepare, lifecycle batch
/// (`holds/{commit|abort|release}`), one hold's lifecycle, the reservations it can no longer
/// honour ([`Participant::drift`]), a prepare batch ([`Participant::prepare_all`]), a snapshot
/// of its calendars ([`Participant::snapshot`]).
const HOLDER_PATHS: [&str; 8] =
    ["/query", "/queries", "/prepare", "/holds/{verb}", "/holds/{id}/{verb}", "/drift", "/prepares", "/snapshot"];
/// The GIS endpoints, under `/v1`: one demand's candidates, and a batch.
const GIS_PATHS: [&str; 2] = ["/participant/gis/candidates", "/participant/gis/candidates/batch"];

/// Every participant-protocol path under `/v1` (e.g. `/participant/sites/{site}/query`), all
/// `POST`: the paths `configure_*` register, for the 405 table ([`crate::api::openapi::allowed_methods`]).
pub fn paths() -> impl Iterator<Item = String> {
    [SITES_SCOPE, NETWORK_SCOPE]
        .into_iter()
        .flat_map(|scope| HOLDER_PATHS.map(|p| format!("{scope}{p}")))
        .chain(GIS_PATHS.map(str::to_owned))
}

/// The query string of a prepare: `?tentative=true` asks for a tentative hold (answered before
/// it is journaled; see [`crate::protocol::Tentative`]).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrepareParams {
    #[serde(default)]
    tentative: bool,
}

/// Registers the GIS endpoint.
pub fn configure_gis(cfg: &mut web::ServiceConfig) {
    let [one, batch] = GIS_PATHS;
    cfg.route(one, web::post().to(candidates)).route(batch, web::post().to(candidates_batch));
}

/// The journaled LIS of `id` acting for `caller`, granting tentative holds if asked, or 404.
fn site(
    state: &AppState,
    id: &str,
    caller: &Caller,
    tentative: bool,
) -> Result<Arc<dyn Participant<Compute>>, ApiError> {
    match tentative {
        true => state.tentative_site(id, caller),
        false => state.journaled_site(id, false, Some(caller)),
    }
}

/// The journaled NIS acting for `caller`, granting tentative holds if asked, or 404.
fn network(state: &AppState, caller: &Caller, tentative: bool) -> Result<Arc<dyn Participant<Network>>, ApiError> {
    match tentative {
        true => state.tentative_network(caller),
        false => state.journaled_network(false, Some(caller)),
    }
}

/// `persist`, `commit` or `abort` of several holds of participant `who` (the protocol's
/// batches), for a caller of role service: every hold must be the caller's (or the caller an admin), as for one hold.
/// `commit` and `abort` answer [`BatchAnswer`], `persist` 204.
async fn batch(
    state: &AppState,
    req: &HttpRequest,
    caller: &Caller,
    who: ParticipantRef,
    verb: &str,
    body: &[u8],
) -> Result<HttpResponse, ApiError> {
    if !matches!(verb, "commit" | "abort" | "persist") {
        return Err(ApiError::not_found(format!("unknown batch operation `{verb}`")));
    }
    let p = state.journaled_holds(&who, false, Some(caller))?;
    let b: HoldBatch = parse(req, body)?;
    within_batch(b.holds.len(), "holds")?;
    for &id in &b.holds {
        state.authorize_hold(caller, &who, id, verb)?;
    }
    if verb == "persist" {
        p.persist(&b.holds).await?;
        return Ok(HttpResponse::NoContent().finish());
    }
    let answers = if verb == "commit" { p.commit_all(&b.holds).await } else { p.abort_all(&b.holds).await };
    let errors = answers.into_iter().map(Result::err).collect();
    Ok(HttpResponse::Ok().json(BatchAnswer { errors }))
}

/// Most items (holds, queries, demands) one batch may name.
const MAX_BATCH: usize = crate::protocol::http::MAX_BATCH_ITEMS;

/// A batch of `n` items of `what` is refused (422) beyond [`MAX_BATCH`].
fn within_batch(n: usize, what: &str) -> Result<(), ApiError> {
    if n > MAX_BATCH {
        return Err(ApiError::invalid(format!("at most {MAX_BATCH} {what} per batch")));
    }
    Ok(())
}

/// Commit / abort / release / extend of hold `id` at participant `who`, for a caller of role
/// service: its right to this hold ([`AppState::authorize_hold`]), then the body.
async fn lifecycle(
    state: &AppState,
    req: &HttpRequest,
    caller: &Caller,
    who: ParticipantRef,
    id: HoldId,
    verb: &str,
    body: &[u8],
) -> Result<HttpResponse, ApiError> {
    if !matches!(verb, "commit" | "abort" | "release" | "extend") {
        return Err(ApiError::not_found(format!("unknown hold operation `{verb}`")));
    }
    let p = state.journaled_holds(&who, false, Some(caller))?;
    state.authorize_hold(caller, &who, id, verb)?;
    match verb {
        "extend" => {
            let b: Extend =
                parse_optional(req, body)?.ok_or_else(|| ApiError::invalid("extend needs a body {\"lease_s\": N}"))?;
            return Ok(HttpResponse::Ok().json(p.extend(id, b.lease_s).await?));
        }
        "commit" => p.commit(id).await?,
        "abort" => p.abort(id).await?,
        _ => p.release(id).await?,
    }
    Ok(HttpResponse::NoContent().finish())
}

/// The committed reservations a LIS can no longer honour (its Slurm lost or changed them).
pub async fn site_drift(
    state: web::Data<AppState>,
    g: Guarded<Service, web::Path<String>>,
) -> Result<web::Json<Vec<crate::protocol::Drift>>, ApiError> {
    let id = g.path;
    Ok(web::Json(state.lis(&id)?.drift()))
}

/// The committed reservations the NIS can no longer honour (none yet: it has no data plane).
pub async fn net_drift(
    state: web::Data<AppState>,
    g: Guarded<Service>,
) -> Result<web::Json<Vec<crate::protocol::Drift>>, ApiError> {
    Ok(web::Json(network(&state, &g.caller, false)?.drift().await?))
}

/// LIS query.
pub async fn site_query(
    state: web::Data<AppState>,
    g: Guarded<Service, web::Path<String>, Body<ComputeQuery>>,
) -> Result<web::Json<ComputeOffer>, ApiError> {
    let Guarded { caller, path: id, body: Body(q), .. } = g;
    Ok(web::Json(site(&state, &id, &caller, false)?.query(&q).await?))
}

/// Answers a batch of queries of participant `p` in order; the first refusal fails the batch.
async fn queries<R: Role>(
    p: Arc<dyn Participant<R>>,
    req: &HttpRequest,
    body: &[u8],
) -> Result<HttpResponse, ApiError> {
    let b: QueryBatch<R::Query> = parse(req, body)?;
    within_batch(b.queries.len(), "queries")?;
    let mut answers = Vec::with_capacity(b.queries.len());
    for a in p.query_all(&b.queries).await {
        answers.push(a?);
    }
    Ok(HttpResponse::Ok().json(AnswerBatch { answers }))
}

/// LIS: several queries at once.
pub async fn site_queries(
    state: web::Data<AppState>,
    g: Guarded<Service, web::Path<String>, web::Bytes>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let Guarded { caller, path: id, body, .. } = g;
    queries(site(&state, &id, &caller, false)?, &req, &body).await
}

/// NIS: several queries at once.
pub async fn net_queries(
    state: web::Data<AppState>,
    g: Guarded<Service, (), web::Bytes>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let Guarded { caller, body, .. } = g;
    queries(network(&state, &caller, false)?, &req, &body).await
}

/// LIS prepare: the hold is owned by the caller's principal.
pub async fn site_prepare(
    state: web::Data<AppState>,
    g: Guarded<Service, (web::Path<String>, Query<PrepareParams>), Body<ComputeHoldRequest>>,
) -> Result<web::Json<Hold>, ApiError> {
    let Guarded { caller, path: (id, params), body: Body(hold), .. } = g;
    Ok(web::Json(site(&state, &id, &caller, params.tentative)?.prepare(&hold).await?))
}

/// Prepares a batch of holds at participant `p` in order ([`Participant::prepare_all`]): each
/// prepare's own answer, held or refused.
async fn prepares<R: Role>(
    p: Arc<dyn Participant<R>>,
    req: &HttpRequest,
    body: &[u8],
) -> Result<HttpResponse, ApiError> {
    let b: PrepareBatch<R::Prepare> = parse(req, body)?;
    within_batch(b.holds.len(), "prepares")?;
    let answers = p.prepare_all(&b.holds).await.into_iter().map(Prepared::from).collect();
    Ok(HttpResponse::Ok().json(PrepareAnswers { answers }))
}

/// LIS: several prepares at once, owned by the caller's principal.
pub async fn site_prepares(
    state: web::Data<AppState>,
    g: Guarded<Service, (web::Path<String>, Query<PrepareParams>), web::Bytes>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let Guarded { caller, path: (id, params), body, .. } = g;
    prepares(site(&state, &id, &caller, params.tentative)?, &req, &body).await
}

/// NIS: several prepares at once, owned by the caller's principal.
pub async fn net_prepares(
    state: web::Data<AppState>,
    g: Guarded<Service, Query<PrepareParams>, web::Bytes>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let Guarded { caller, path: params, body, .. } = g;
    prepares(network(&state, &caller, params.tentative)?, &req, &body).await
}

/// LIS: its calendars over a window (`null`: it gives none).
pub async fn site_snapshot(
    state: web::Data<AppState>,
    g: Guarded<Service, web::Path<String>, Body<SnapshotWindow>>,
) -> Result<web::Json<Option<ComputeSnapshot>>, ApiError> {
    let Guarded { caller, path: id, body: Body(w), .. } = g;
    Ok(web::Json(site(&state, &id, &caller, false)?.snapshot(&w).await?))
}

/// NIS: its topology and link calendars over a window (`null`: it gives none).
pub async fn net_snapshot(
    state: web::Data<AppState>,
    g: Guarded<Service, (), Body<SnapshotWindow>>,
) -> Result<web::Json<Option<NetworkSnapshot>>, ApiError> {
    let Guarded { caller, body: Body(w), .. } = g;
    Ok(web::Json(network(&state, &caller, false)?.snapshot(&w).await?))
}

/// LIS batches: `persist` and `commit` of several holds.
pub async fn site_batch(
    state: web::Data<AppState>,
    g: Guarded<Service, web::Path<(String, String)>, web::Bytes>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let (s, verb) = g.path.into_inner();
    batch(&state, &req, &g.caller, ParticipantRef::Site(s.into()), &verb, &g.body).await
}

/// LIS commit / abort / release / extend (the hold's owner, or an admin).
pub async fn site_lifecycle(
    state: web::Data<AppState>,
    g: Guarded<Service, web::Path<(String, HoldId, String)>, web::Bytes>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let (s, id, verb) = g.path.into_inner();
    lifecycle(&state, &req, &g.caller, ParticipantRef::Site(s.into()), id, &verb, &g.body).await
}

/// NIS query.
pub async fn net_query(
    state: web::Data<AppState>,
    g: Guarded<Service, (), Body<NetworkQuery>>,
) -> Result<web::Json<Option<Route>>, ApiError> {
    let Guarded { caller, body: Body(q), .. } = g;
    Ok(web::Json(network(&state, &caller, false)?.query(&q).await?))
}

/// NIS prepare: the hold is owned by the caller's principal.
pub async fn net_prepare(
    state: web::Data<AppState>,
    g: Guarded<Service, Query<PrepareParams>, Body<NetworkHoldRequest>>,
) -> Result<web::Json<Hold>, ApiError> {
    let Guarded { caller, path: params, body: Body(hold), .. } = g;
    Ok(web::Json(network(&state, &caller, params.tentative)?.prepare(&hold).await?))
}

/// NIS batches: `persist` and `commit` of several holds.
pub async fn net_batch(
    state: web::Data<AppState>,
    g: Guarded<Service, web::Path<String>, web::Bytes>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    batch(&state, &req, &g.caller, ParticipantRef::Network, &g.path, &g.body).await
}

/// NIS commit / abort / release / extend (the hold's owner, or an admin).
pub async fn net_lifecycle(
    state: web::Data<AppState>,
    g: Guarded<Service, web::Path<(HoldId, String)>, web::Bytes>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let (id, verb) = g.path.into_inner();
    lifecycle(&state, &req, &g.caller, ParticipantRef::Network, id, &verb, &g.body).await
}

/// GIS: candidate sites of a compute demand, sorted by id.
pub async fn candidates(
    state: web::Data<AppState>,
    g: Guarded<Service, (), Body<ComputeDemand>>,
) -> Result<web::Json<Candidates>, ApiError> {
    let Body(demand) = g.body;
    Ok(web::Json(state.participants.gis.candidates(&demand).await?))
}

/// GIS: the candidate sites of several compute demands (a request's jobs), in order.
pub async fn candidates_batch(
    state: web::Data<AppState>,
    g: Guarded<Service, (), Body<QueryBatch<ComputeDemand>>>,
) -> Result<web::Json<AnswerBatch<Candidates>>, ApiError> {
    let Body(b) = g.body;
    within_batch(b.queries.len(), "demands")?;
    Ok(web::Json(AnswerBatch { answers: state.participants.gis.candidates_all(&b.queries).await? }))
}
