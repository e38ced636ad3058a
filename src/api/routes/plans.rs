//! `/v1/plans`: plan and book a request, read plans, cancel them.
//!
//! `POST` answers `201 Created` with `Location: /v1/plans/{id}` whether the plan was committed
//! or rejected (a rejection is a stored result too, with its `reason`). With `?dry_run=true` it
//! answers `200 OK` with the plan it would make (`status: planned`), books and stores nothing
//! (the `id` is fresh and not retrievable), and ignores `Idempotency-Key`.
//!
//! Planning and storing run in a task of their own, so a client that disconnects mid-request
//! can never leave a plan half-booked or booked but unrecorded; its retry with the same
//! `Idempotency-Key` finds the plan. All-in-one, the task of a user who has another request in
//! flight runs in the background lane, on its threads and within its slots
//! ([`crate::api::lanes`]).

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::api::auth::Caller;
use crate::api::decision_log::{PlanMeta, StoreDecisionLog};
use crate::api::idempotency::{self, in_progress, IdempotencyKey, NextAction, Operation, PlanLock};
use crate::api::problem::ApiError;
use crate::api::state::AppState;
use crate::fairshare::Usage;
use crate::model::{
    ComputeDemand, NetworkDemand, Outcome, PlanRequest, PlanStatus, RawPlanRequest, ReservationMethod, SelectionPolicy,
};
use crate::planner::{PlanOptions, Settlement};
use crate::protocol::decision::LogError;
use crate::store::{stamp_part_states, PlanFilter, PlanRecord, RejectionRecord, StoreError};

/// `POST /v1/plans` body: a plan request in the model's format, without `user` (the token's)
/// and `submitted_at` (the time the server received it). Unknown fields are refused.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "id": "wf-1", "deadline": "2030-01-01T12:00:00Z",
    "jobs": [{"name": "A", "os": "linux", "cpus": 16, "offset_s": 0, "duration_s": 3600},
             {"name": "B", "os": "linux", "cpus": 16, "offset_s": 0, "duration_s": 3600}],
    "transfers": [{"from": "A", "to": "B", "bandwidth_mbps": 500, "offset_s": 0, "duration_s": 600}]
}))]
pub struct PlanBody {
    /// The client's reference, echoed as `request_id` (default: a fresh UUID); 1-128
    /// characters, not blank, no control characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = r"^[^\x00-\x1F\x7F-\x9F]*[^\s\x00-\x1F\x7F-\x9F][^\x00-\x1F\x7F-\x9F]*$"
    )]
    pub id: Option<String>,
    /// Every reservation must end by then.
    pub deadline: DateTime<Utc>,
    /// Earliest application start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<DateTime<Utc>>,
    /// 1 to 1,000 jobs (`MAX_JOBS`).
    #[schema(min_items = 1, max_items = 1000)]
    pub jobs: Vec<ComputeDemand>,
    /// At most 4,000 transfers (`MAX_TRANSFERS`).
    #[serde(default)]
    #[schema(max_items = 4000)]
    pub transfers: Vec<NetworkDemand>,
    /// Seconds kept at least between a job's end and the start of a job `after` it (what a
    /// workflow engine needs to notice the end and submit the next job), in `0 ..=
    /// 3153600000`. Default 0.
    #[serde(default, skip_serializing_if = "crate::model::is_zero_s")]
    #[schema(minimum = 0, maximum = 3153600000_i64)]
    pub dependency_gap_s: i64,
    /// Every job's `slack_s` unless it gives its own, in `0 ..= 3153600000`. Default 0.
    #[serde(default, skip_serializing_if = "crate::model::is_zero_s")]
    #[schema(minimum = 0, maximum = 3153600000_i64)]
    pub slack_s: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<SelectionPolicy>,
    /// The reservation method (default: the server's); `mode`, its round-1 name, is accepted
    /// as an alias.
    #[serde(default, alias = "mode", skip_serializing_if = "Option::is_none")]
    pub method: Option<ReservationMethod>,
}

/// A plan: the API's record (`id`, owner, times) and, flattened beside it, the planner's
/// outcome with the plan's status (pending, committed, rejected, cancelled or planned).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PlanView {
    /// The plan's own id.
    pub id: Uuid,
    pub user: String,
    pub created_at: DateTime<Utc>,
    pub cancelled_at: Option<DateTime<Utc>>,
    /// `true` while a modification of the plan is decided but its end not yet recorded (its
    /// planner stopped mid-way; another planner finishes it within seconds): the participants
    /// may already hold the modified shape while the plan still shows the one before. The plan
    /// cannot be modified or cancelled meanwhile (409, Retry-After), and a retry of that
    /// `PATCH` answers `503 plan-in-doubt`. Always present (`false` when nothing is pending),
    /// so that a client reads a bool, never an absent field (issue 49).
    #[serde(default)]
    #[schema(required = true)]
    pub modification_pending: bool,
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl PlanView {
    fn new(id: Uuid, user: &str, status: PlanStatus, o: &Outcome, created_at: DateTime<Utc>) -> Self {
        PlanView {
            id,
            user: user.to_owned(),
            created_at,
            cancelled_at: None,
            modification_pending: false,
            outcome: Outcome { status, ..o.clone() },
        }
        .with_part_states(Utc::now())
    }

    /// Each job's and transfer's `state` at `now` (booked plans only).
    fn with_part_states(mut self, now: DateTime<Utc>) -> Self {
        let o = &mut self.outcome;
        stamp_part_states(o.status, &mut o.jobs, &mut o.transfers, now);
        self
    }
}

impl From<&PlanRecord> for PlanView {
    fn from(r: &PlanRecord) -> Self {
        PlanView { cancelled_at: r.cancelled_at, ..PlanView::new(r.id, &r.user, r.status, &r.outcome, r.created_at) }
    }
}

impl From<PlanRecord> for PlanView {
    /// The record's view without copying its outcome.
    fn from(r: PlanRecord) -> Self {
        PlanView {
            id: r.id,
            user: r.user,
            created_at: r.created_at,
            cancelled_at: r.cancelled_at,
            modification_pending: false,
            outcome: Outcome { status: r.status, ..r.outcome },
        }
        .with_part_states(Utc::now())
    }
}

impl PlanView {
    /// The view marked [`PlanView::modification_pending`] when `pending` has its id.
    pub fn pending_in(mut self, pending: &std::collections::HashSet<Uuid>) -> Self {
        self.modification_pending = pending.contains(&self.id);
        self
    }
}

/// 503 `plan-in-doubt` (Retry-After: the claim lease): a commit (of a plan or of a
/// modification) is decided and not confirmed; `detail` says which and where to look.
pub(super) fn plan_in_doubt(state: &AppState, title: &'static str, detail: String) -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "plan-in-doubt", title, detail)
        .retry_after(state.config.claim_lease_s.max(1) as u64)
}

/// 409 `plan-pending` (Retry-After): plan `id` cannot change now, its commit or the commit of a
/// modification of it being not confirmed yet.
pub(super) fn plan_pending(state: &AppState, id: Uuid, what: &str) -> ApiError {
    ApiError::conflict(
        "plan-pending",
        "The plan's commit is not confirmed yet",
        format!("plan {id} is {what}; it is settled within seconds: retry then"),
    )
    .retry_after(state.config.claim_lease_s.max(1) as u64)
}

/// `POST /v1/plans` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CreateQuery {
    /// Plan only: book and store nothing (answer 200, status `planned`).
    #[serde(default)]
    pub dry_run: bool,
}

/// `GET /v1/plans` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// `committed`, `rejected` or `cancelled` (`planned` is only a dry run's and matches
    /// nothing).
    #[param(value_type = Option<PlanStatus>)]
    pub status: Option<String>,
    /// Plans starting at or after this instant (RFC 3339).
    pub from: Option<DateTime<Utc>>,
    /// Plans starting before this instant (RFC 3339).
    pub to: Option<DateTime<Utc>>,
    /// Only the plans of this request id (the body's `id`, echoed as `request_id`).
    pub request_id: Option<String>,
}

/// Validates the body into a plan request (nothing changes on error).
fn to_request(state: &AppState, caller: &Caller, body: &PlanBody) -> Result<PlanRequest, ApiError> {
    state.check_horizon("deadline", &body.deadline)?;
    if let Some(nb) = &body.not_before {
        state.check_horizon("not_before", nb)?;
    }
    let raw = RawPlanRequest {
        id: body.id.clone().unwrap_or_else(|| Uuid::new_v4().to_string()),
        user: caller.user.clone(),
        submitted_at: state.now_utc(),
        deadline: body.deadline,
        not_before: body.not_before,
        jobs: body.jobs.clone(),
        transfers: body.transfers.clone(),
        policy: body.policy,
        method: body.method,
        dependency_gap_s: body.dependency_gap_s,
        slack_s: body.slack_s,
    };
    Ok(PlanRequest::new(raw)?)
}

/// How long a plan request past its user's in-flight limit waits before its 429.
pub const REFUSAL_PAUSE: std::time::Duration = std::time::Duration::from_millis(250);

fn created(view: &PlanView) -> HttpResponse {
    HttpResponse::Created().insert_header((header::LOCATION, format!("/v1/plans/{}", view.id))).json(view)
}

/// Plan and book a request.
#[utoipa::path(
    post, path = "/v1/plans", operation_id = "create_plan", tag = "plans",
    params(CreateQuery, ("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key (same user) returns the first plan and books nothing")),
    request_body = PlanBody,
    responses(
        (status = 201, description = "Planned and committed, or rejected (see status)", body = PlanView,
            headers(("Location" = String, description = "/v1/plans/{id}"))),
        (status = 200, description = "Dry run: the plan it would make; nothing booked or stored", body = PlanView),
        (status = 401, description = "No or unknown token"),
        (status = 409, description = "A request with this Idempotency-Key is in progress, or its plan is pending (Retry-After)"),
        (status = 422, description = "Invalid request (unknown fields, model validation, limits, horizon, key reused with another body), or a job no site of the grid can ever run (type .../unsatisfiable, naming the nearest site's unmet requirement; nothing is stored)"),
        (status = 429, description = "The caller already has --max-in-flight-per-user plan requests in flight (Retry-After)"),
        (status = 503, description = "The plan could not be recorded (nothing booked), or its commit is not confirmed yet (plan-in-doubt: pending, settled within seconds). Retry with the same Idempotency-Key (Retry-After)"),
    ),
    security(("bearer" = []))
)]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    query: crate::api::extract::Query<CreateQuery>,
    req: HttpRequest,
    raw: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let key = IdempotencyKey::from_request(&req)?;
    // Fair admission: a limit per user, then a planning permit in turn (see api::fair).
    let admission = match state.fair.admit(&caller.user) {
        Ok(a) => a,
        Err(e) => {
            // Refused, but answered only after a pause that costs no CPU: a client that ignores
            // 429 and sends again at once then sends a few requests a second per connection,
            // not thousands, and the other users' requests are not stuck behind the storm in
            // the HTTP workers (issue 28, point 3; `cargo bench --bench fairness`).
            tokio::time::sleep(REFUSAL_PAUSE).await;
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too-many-requests",
                "Too many plan requests in flight",
                e.to_string(),
            )
            .retry_after(1));
        }
    };
    // The body is parsed only once admitted: a user who keeps sending past the limit (and
    // ignores the 429s) costs a token lookup per request, not a JSON parse and validation of a
    // plan (issue 28, point 3). The rules are those of api::extract::JsonBody.
    let body: PlanBody = crate::api::body::parse(&req, &raw)?;
    // A user with another request in flight plans in the background lane (see api::lanes).
    let background = state.background.as_ref().filter(|_| admission.background());
    let in_lane = background.is_some();
    if query.dry_run {
        let plan = to_request(&state, &caller, &body)?;
        let (st, user) = (state.clone(), caller.user.clone());
        let run = async move {
            let _permit = admission.into_permit().await;
            let _slot = lane_slot(&st, in_lane).await;
            let opts = PlanOptions { dry_run: true, user: Some(&user), ..Default::default() };
            st.planners.lend().plan_with(&plan, opts).await
        };
        let result = match background {
            Some(lane) => lane.spawn(run).await.map_err(|e| task_failed(&state, e))?,
            None => run.await,
        };
        let o = &result.outcome;
        if matches!(result.settlement, Settlement::Unsatisfiable) {
            return Err(unsatisfiable(o));
        }
        let status = o.status;
        state.metrics.plan_done(status, o.planning_ms / 1000.0, o);
        return Ok(HttpResponse::Ok().json(PlanView::new(Uuid::new_v4(), &caller.user, status, o, state.now_utc())));
    }
    // The request's claim on its key and, once decided, on its transaction: renewed while this
    // request works, taken over by another process if this one stops (see store::Claim).
    let guard = state.claim();
    let key = match idempotency::try_processing(&state, caller.principal, key, &body, Operation::Create, &guard.claim)
        .await?
    {
        NextAction::Start(key) => key,
        NextAction::Replay(rec) => return Ok(created(&PlanView::from(*rec))),
    };
    // Validated now (the request's time is its arrival's), answered in the task: an invalid
    // body gives its key back there, like every other failure.
    let plan = to_request(&state, &caller, &body);
    // Plan, book and record in a task of its own: it finishes even if the client goes away.
    let st = state.clone();
    let (user, owner) = (caller.user.clone(), caller.principal);
    let work = async move {
        let claim = &guard.claim;
        let planned = plan_and_record(&st, plan, admission, in_lane, &user, owner, key.as_ref(), claim);
        idempotency::release_on_error(st.store.as_ref(), key.as_ref(), claim, planned).await
    };
    let task = match background {
        Some(lane) => lane.spawn(work),
        None => actix_web::rt::spawn(work),
    };
    let rec = task.await.map_err(|e| task_failed(&state, e))??;
    Ok(created(&PlanView::from(rec)))
}

/// The planning of one request once its key is claimed (`key`, if it sent one) under `claim`:
/// waits for its planning permit (and, `in_lane`, a slot of the background lane), plans, books
/// and records the plan, the decision and the key in one write. The plan as recorded: committed
/// or rejected.
///
/// # Errors
/// `plan`'s validation error (422); 422 `unsatisfiable`; 409 `decision-refused`; 409
/// `idempotency-in-progress` when another request took the key over; 503 `store-unavailable`
/// (nothing booked); 503 `plan-in-doubt` (decided, commit not confirmed).
#[allow(clippy::too_many_arguments)]
async fn plan_and_record(
    st: &AppState,
    plan: Result<PlanRequest, ApiError>,
    admission: crate::api::fair::Admission,
    in_lane: bool,
    user: &str,
    owner: Uuid,
    key: Option<&idempotency::ClaimedKey>,
    claim: &crate::store::Claim,
) -> Result<PlanRecord, ApiError> {
    let plan = plan?;
    let _permit = admission.into_permit().await;
    // In the lane: one of its slots from the search to the last write.
    let _slot = lane_slot(st, in_lane).await;
    let meta = PlanMeta { id: Uuid::new_v4(), user, owner, created_at: st.now_utc(), key: key.map(|k| k.record()) };
    let (id, created_at) = (meta.id, meta.created_at);
    let key_text = key.map_or("", |k| k.key());
    // The decision, this plan and its key are one durable write (see api::decision_log).
    let log = StoreDecisionLog::new(st.store.as_ref(), st.shares_fate(), claim, Some(meta));
    // The allocation limit is checked and the plan charged by the store, with the decision
    // (exact across planner processes; DecisionStore::record_decision); the in-memory ledger is
    // a cache of the charges for the priorities, updated below.
    let result = st
        .planners
        .lend()
        .plan_with(&plan, PlanOptions { log: Some(&log), user: Some(user), ..Default::default() })
        .await;
    let o = result.outcome;
    let seconds = o.planning_ms / 1000.0;
    let rec = match result.settlement {
        Settlement::Final => match log.decided() {
            Some(rec) => rec,
            None => {
                // Rejected before any decision: nothing is booked; the rejection and its key
                // are one write.
                let rec = PlanRecord {
                    id,
                    user: user.to_owned(),
                    owner,
                    status: PlanStatus::Rejected,
                    outcome: o,
                    bookings: vec![],
                    created_at,
                    cancelled_at: None,
                };
                let rejection = RejectionRecord { plan: &rec, key: key.map(|k| k.record()), claim };
                match st.store.record_rejection(&rejection).await {
                    Ok(()) => rec,
                    Err(StoreError::Superseded) => return Err(in_progress(st, key_text)),
                    Err(e) => return Err(unrecorded(e)),
                }
            }
        },
        // Invalid input: nothing is booked nor recorded, and the key is free again.
        Settlement::Unsatisfiable => return Err(unsatisfiable(&o)),
        Settlement::Undecided(LogError::Superseded) => return Err(in_progress(st, key_text)),
        Settlement::Undecided(LogError::Unavailable(e)) => return Err(unrecorded(e)),
        Settlement::Undecided(LogError::Refused(reason)) => {
            // The planner turns a refused decision into a rejection; never left undecided.
            return Err(ApiError::conflict("decision-refused", "The decision was refused", reason));
        }
        Settlement::InDoubt(reason) => {
            // Charged with its decision: the cache counts it until it is settled.
            st.ledger.record(&id.to_string(), user, Usage::of_outcome(&o));
            st.metrics.plan_done(PlanStatus::Pending, seconds, &o);
            tracing::warn!(request = %o.request_id, plan = %id, %reason, "plan in doubt: answered 503");
            return Err(plan_in_doubt(
                st,
                "The plan's commit is not confirmed yet",
                format!(
                    "plan {id} is pending: {reason}. It is neither booked for sure nor rejected; it is settled \
                     within seconds of the participants and the store answering. Retry with the same \
                     Idempotency-Key, or read GET /v1/plans/{id}."
                ),
            ));
        }
    };
    if rec.status == PlanStatus::Committed {
        st.ledger.record(&rec.id.to_string(), user, Usage::of_outcome(&rec.outcome));
    }
    st.metrics.plan_done(rec.status, seconds, &rec.outcome);
    tracing::info!(request = %rec.outcome.request_id, user = %user, status = ?rec.status, ms = rec.outcome.planning_ms, "planned");
    Ok(rec)
}

/// One of the background lane's slots for a request that plans there (`in_lane`), after its
/// planning permit (see [`crate::api::lanes`]); `None` in the foreground.
async fn lane_slot(state: &AppState, in_lane: bool) -> Option<tokio::sync::OwnedSemaphorePermit> {
    match state.background.as_ref().filter(|_| in_lane) {
        Some(lane) => Some(lane.slot().await),
        None => None,
    }
}

/// A request with a job that no site can ever run (422): the outcome's reason names the job
/// and the nearest site's first unmet requirement.
fn unsatisfiable(o: &Outcome) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unsatisfiable",
        "No site of the grid can run a job of the request",
        o.reason.clone().unwrap_or_default(),
    )
}

/// A planning or cancel task that panicked: a bare 500 (the panic text is logged, not sent),
/// counted like a handler panic.
pub(super) fn task_failed(state: &AppState, e: tokio::task::JoinError) -> ApiError {
    tracing::error!(error = %e, "plan task failed");
    state.metrics.panicked();
    ApiError::panicked()
}

/// 503 `store-unavailable`: the store refused to record the plan (`e`, logged); nothing is
/// booked. The request's key is freed (see [`idempotency::release_on_error`]), so that a retry
/// plans again.
pub(super) fn unrecorded(e: impl std::fmt::Display) -> ApiError {
    tracing::error!(error = %e, "a plan could not be recorded; nothing is booked");
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "store-unavailable",
        "The store is unavailable",
        "the plan could not be recorded, so nothing was booked; retry (with the same Idempotency-Key)",
    )
    .retry_after(1)
}

/// The caller's plans (an admin: everyone's), oldest first.
#[utoipa::path(
    get, path = "/v1/plans", operation_id = "list_plans", tag = "plans", params(ListQuery),
    responses(
        (status = 200, body = Vec<PlanView>),
        (status = 400, description = "Bad status or time"),
    ),
    security(("bearer" = []))
)]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    query: crate::api::extract::Query<ListQuery>,
) -> Result<web::Json<Vec<PlanView>>, ApiError> {
    let status = query.status.as_deref().map(str::parse::<PlanStatus>).transpose().map_err(ApiError::bad_request)?;
    let filter =
        PlanFilter { owner: (!caller.admin).then_some(caller.principal), status, from: query.from, to: query.to };
    // Read before the plans: a modification finished in between shows as pending with its
    // new shape, never the old shape as if settled.
    let pending = state.store.modifications_in_doubt(None).await?;
    let plans = state.store.list_plans(&filter).await?;
    let wanted = |p: &&PlanRecord| query.request_id.as_ref().is_none_or(|r| &p.outcome.request_id == r);
    Ok(web::Json(plans.iter().filter(wanted).map(|p| PlanView::from(p).pending_in(&pending)).collect()))
}

pub(super) async fn owned(state: &AppState, caller: &Caller, id: Uuid) -> Result<PlanRecord, ApiError> {
    let rec = state.store.plan(id).await?.ok_or_else(|| ApiError::not_found(format!("unknown plan {id}")))?;
    if !caller.may_access(rec.owner) {
        return Err(ApiError::forbidden(format!("plan {id} belongs to another user")));
    }
    Ok(rec)
}

/// One plan (the owner's or, for an admin, anyone's).
#[utoipa::path(
    get, path = "/v1/plans/{id}", operation_id = "get_plan", tag = "plans", params(("id" = Uuid, Path, description = "plan id")),
    responses(
        (status = 200, body = PlanView),
        (status = 403, description = "Another user's plan"),
    ),
    security(("bearer" = []))
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<Uuid>,
) -> Result<web::Json<PlanView>, ApiError> {
    // Read before the plan (see `list`).
    let pending = state.store.modifications_in_doubt(Some(&[*id])).await?;
    let rec = owned(&state, &caller, *id).await?;
    Ok(web::Json(PlanView::from(&rec).pending_in(&pending)))
}

/// Cancel a committed, active or broken plan: release every reservation (idempotent).
#[utoipa::path(
    delete, path = "/v1/plans/{id}", operation_id = "cancel_plan", tag = "plans", params(("id" = Uuid, Path, description = "plan id")),
    responses(
        (status = 200, description = "Cancelled (also when it already was)", body = PlanView),
        (status = 403),
        (status = 409, description = "A rejected or completed plan has nothing to cancel; a pending plan, or a plan whose modification is not confirmed yet (modification_pending), is not settled yet (Retry-After)"),
    ),
    security(("bearer" = []))
)]
pub async fn cancel(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<Uuid>,
) -> Result<web::Json<PlanView>, ApiError> {
    let rec = owned(&state, &caller, *id).await?;
    match rec.status {
        PlanStatus::Cancelled => return Ok(web::Json(PlanView::from(&rec))),
        PlanStatus::Rejected | PlanStatus::Planned => {
            return Err(ApiError::conflict(
                "plan-not-committed",
                "Only a committed plan can be cancelled",
                format!("plan {} was rejected; nothing is booked", rec.id),
            ))
        }
        PlanStatus::Pending => return Err(plan_pending(&state, rec.id, "pending (committed or rejected soon)")),
        PlanStatus::Completed => {
            return Err(ApiError::conflict(
                "plan-completed",
                "A completed plan cannot be cancelled",
                format!("plan {} has ended: nothing of it is booked any more", rec.id),
            ))
        }
        PlanStatus::Committed | PlanStatus::Active | PlanStatus::Broken => {}
    }
    // Under the plan's lock (no modification replaces its reservations meanwhile), release
    // and record in a task of its own (see the module docs).
    let guard = state.claim();
    let lock = PlanLock::take(&state, &rec, &guard.claim).await?;
    let st = state.clone();
    let task = actix_web::rt::spawn(async move {
        let cancelled = async {
            // Read again under the lock: a modification may have replaced its bookings, or be
            // decided and not finished (its planner stopped): then its replacements may be
            // committed at the participants, and releasing the bookings of the record would
            // leave them booked.
            let rec = st.store.plan(rec.id).await?.ok_or_else(|| ApiError::internal("plan vanished"))?;
            if !st.store.modifications_in_doubt(Some(&[rec.id])).await?.is_empty() {
                return Err(plan_pending(&st, rec.id, "being modified (the modification is not confirmed yet)"));
            }
            if rec.status.holds_reservations() {
                st.planners.lend().cancel(&rec.bookings).await?;
            }
            let rec = st
                .store
                .mark_cancelled(rec.id, st.now_utc())
                .await?
                .ok_or_else(|| ApiError::internal("plan vanished"))?;
            st.ledger.forget(&rec.id.to_string());
            st.metrics.cancelled();
            tracing::info!(plan = %rec.id, "cancelled");
            Ok::<_, ApiError>(rec)
        }
        .await;
        lock.free(st.store.as_ref(), &guard.claim).await;
        cancelled
    });
    let rec = task.await.map_err(|e| task_failed(&state, e))??;
    Ok(web::Json(PlanView::from(&rec)))
}
