//! `PATCH /v1/plans/{id}`: modify a committed plan atomically (docs/protocol.md,
//! "Modification").
//!
//! The body ([`PlanModification`]) is checked against the plan as booked (deadline, now,
//! started parts, transfers inside their jobs: 422 with the reason, nothing changed); the
//! planner then books every changed part with a replacement hold and one two-phase commit. A
//! part that does not fit: 409 naming it (and, for a job, when it could start), nothing changed.
//! Committed: 200 with the plan as modified and one `plan.modified` event.
//!
//! One change at a time per plan: a modification (or a cancellation) holds the plan's lock, a
//! claim on the key `coreserve:plan:{id}` of the store's idempotency keys (taken over if its
//! process dies), so two changes never replace the same reservation at once. With an
//! `Idempotency-Key`, a retry of a committed modification answers the plan as it is now.
//!
//! **In doubt.** A modification decided (its decision durable) but not finished, because its
//! planner stopped mid-way, is settled by another planner's recovery within seconds. Until then
//! the participants may hold the new shape while the plan record shows the old one, so: a
//! retry of that `PATCH` (same key) answers `503 plan-in-doubt` with `Retry-After`, never the
//! old shape as if modified; `GET` shows the plan with `modification_pending: true`; and
//! another change or a cancellation of the plan is `409 plan-pending` (Retry-After).

use actix_web::{web, HttpRequest, HttpResponse};
use uuid::Uuid;

use super::plans::{
    fingerprint, idempotency_key, in_progress, owned, plan_in_doubt, plan_pending, task_failed, unrecorded, PlanView,
};
use crate::api::auth::Caller;
use crate::api::decision_log::{ModificationMeta, StoreDecisionLog};
use crate::api::problem::ApiError;
use crate::api::state::AppState;
use crate::fairshare::Usage;
use crate::model::{OutcomeStatus, PlanModification};
use crate::planner::{ModifyOptions, Settlement};
use crate::protocol::decision::LogError;
use crate::store::{Claim, KeyClaim, PlanRecord, PlanStatus, Store};

/// The plan's lock: a claim on its own key of the store's idempotency keys (see the module
/// docs), freed on [`PlanLock::free`] or, if its process dies, when the claim's lease runs out.
pub(super) struct PlanLock {
    owner: Uuid,
    key: String,
}

impl PlanLock {
    /// Takes plan `rec`'s lock for `claim`.
    ///
    /// # Errors
    /// 409 `plan-busy` (Retry-After) while another change of the plan is under way.
    pub(super) async fn take(state: &AppState, rec: &PlanRecord, claim: &Claim) -> Result<PlanLock, ApiError> {
        let lock = PlanLock { owner: rec.owner, key: format!("coreserve:plan:{}", rec.id) };
        match state.store.claim_key(lock.owner, &lock.key, claim).await? {
            KeyClaim::Claimed => Ok(lock),
            KeyClaim::InProgress | KeyClaim::Done { .. } => Err(ApiError::conflict(
                "plan-busy",
                "Another change of this plan is under way",
                format!("plan {} is being modified or cancelled; retry in a few seconds", rec.id),
            )
            .retry_after(2)),
        }
    }

    /// Frees the lock.
    pub(super) async fn free(self, store: &dyn Store, claim: &Claim) {
        if let Err(e) = store.release_key(self.owner, &self.key, claim).await {
            tracing::warn!(error = %e, key = %self.key, "a plan lock was not freed; its claim's lease ends it");
        }
    }
}

/// Modify a committed or active plan: move its start, change a job's interval or CPUs, a
/// transfer's interval or bandwidth; all of it or nothing.
#[utoipa::path(
    patch, path = "/v1/plans/{id}", operation_id = "modify_plan", tag = "plans",
    params(
        ("id" = Uuid, Path, description = "plan id"),
        ("Idempotency-Key" = Option<String>, Header, description = "Retries with the same key and body answer the plan as modified, without modifying it again; 1-255 visible ASCII characters"),
    ),
    request_body = PlanModification,
    responses(
        (status = 200, description = "Every change is booked: the plan as modified", body = PlanView),
        (status = 400, description = "Malformed JSON or Idempotency-Key"),
        (status = 403, description = "Another user's plan"),
        (status = 422, description = "The change is invalid: unknown fields, jobs or transfers, out of bounds, into the past, past the deadline, a started part's start or size, a transfer outside its jobs, nothing to change; nothing changed"),
        (status = 409, description = "The plan is not committed or active (pending, cancelled, completed, rejected, broken), another change of it is under way or not confirmed yet (plan-pending, Retry-After), or a changed part does not fit (type .../modification-refused: which part, and when it could start); nothing changed"),
        (status = 503, description = "The store did not record the modification (nothing changed), or its commit is not confirmed yet (plan-in-doubt, Retry-After; also the answer to a retry with the same Idempotency-Key while it is so: GET shows modification_pending). Retry with the same Idempotency-Key"),
    ),
    security(("bearer" = []))
)]
pub async fn modify(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<Uuid>,
    req: HttpRequest,
    raw: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let key = idempotency_key(&req)?;
    let body: PlanModification = crate::api::body::parse(&req, &raw)?;
    let rec = owned(&state, &caller, *id).await?;
    let print = fingerprint(&body);
    let guard = state.claim();
    if let Some(key) = &key {
        match state.store.claim_key(caller.principal, key, &guard.claim).await? {
            KeyClaim::Claimed => {}
            KeyClaim::InProgress => return Err(in_progress(&state, key)),
            KeyClaim::Done { plan, fingerprint } => {
                if plan != rec.id || fingerprint != print {
                    return Err(ApiError::invalid(format!("Idempotency-Key `{key}` was used for a different request")));
                }
                // The key is done once the modification is decided: its end may not be recorded
                // yet (its planner stopped). Then the plan read above may be the shape before
                // it, which the participants may no longer hold: in doubt, not 200.
                if !state.store.modifications_in_doubt(Some(&[rec.id])).await?.is_empty() {
                    return Err(modification_in_doubt(&state, rec.id, "its planner stopped before recording its end"));
                }
                // Read after the check: once the modification is finished, the plan as it made it.
                let rec = owned(&state, &caller, rec.id).await?;
                return Ok(HttpResponse::Ok().json(PlanView::from(&rec)));
            }
        }
    }
    let lock = match PlanLock::take(&state, &rec, &guard.claim).await {
        Ok(l) => l,
        Err(e) => {
            free_key(&state, caller.principal, key.as_deref(), &guard.claim).await;
            return Err(e);
        }
    };
    // Read again under the lock: the plan as the modification finds it.
    let rec = match modifiable(&state, rec.id).await {
        Ok(rec) => rec,
        Err(e) => {
            lock.free(state.store.as_ref(), &guard.claim).await;
            free_key(&state, caller.principal, key.as_deref(), &guard.claim).await;
            return Err(e);
        }
    };
    let st = state.clone();
    let principal = caller.principal;
    let task = actix_web::rt::spawn(async move {
        let claim = &guard.claim;
        let result = match body.apply(&rec.outcome, st.now_utc()) {
            Err(e) => Err(ApiError::invalid(e)),
            Ok(new) => {
                let meta = ModificationMeta { plan: &rec, key: key.as_deref().map(|k| (k, print.as_str())) };
                let log = StoreDecisionLog::modifying(st.store.as_ref(), st.shares_fate(), claim, meta);
                // Booked for the plan's owner (a Slurm site's local account), also when an admin
                // makes the change.
                let opts = ModifyOptions { user: Some(&rec.user), log: Some(&log) };
                let result = st.planners.lend().modify(&rec.outcome, &rec.bookings, &new, opts).await;
                answer(&st, &rec, result, log, claim).await
            }
        };
        lock.free(st.store.as_ref(), claim).await;
        if result.is_err() {
            free_key(&st, principal, key.as_deref(), claim).await;
        }
        result
    });
    let rec = task.await.map_err(|e| task_failed(&state, e))??;
    Ok(HttpResponse::Ok().json(PlanView::from(&rec)))
}

/// Frees the caller's `Idempotency-Key` of a modification that changed nothing, so that a
/// retry tries again.
async fn free_key(state: &AppState, principal: Uuid, key: Option<&str>, claim: &Claim) {
    if let Some(key) = key {
        if let Err(e) = state.store.release_key(principal, key, claim).await {
            tracing::warn!(error = %e, "an idempotency key was not freed; its claim's lease ends it");
        }
    }
}

/// The plan `id` if it may be modified now.
///
/// # Errors
/// 409 for a plan that is not committed or active (with Retry-After while pending).
async fn modifiable(state: &AppState, id: Uuid) -> Result<PlanRecord, ApiError> {
    let rec = state.store.plan(id).await?.ok_or_else(|| ApiError::not_found(format!("unknown plan {id}")))?;
    match rec.status {
        PlanStatus::Committed | PlanStatus::Active => {
            // Another modification decided and not finished: its replacements may be committed
            // at the participants, the record not rewritten yet.
            if !state.store.modifications_in_doubt(Some(&[id])).await?.is_empty() {
                return Err(plan_pending(state, id, "being modified (another modification is not confirmed yet)"));
            }
            Ok(rec)
        }
        PlanStatus::Pending => Err(plan_pending(state, id, "pending (committed or rejected soon)")),
        status => Err(ApiError::conflict(
            "plan-not-modifiable",
            "Only a committed or active plan can be modified",
            format!("plan {id} is {status}: nothing of it can be changed"),
        )),
    }
}

/// The answer to a modification the planner ended with `result`.
async fn answer(
    st: &AppState,
    rec: &PlanRecord,
    result: crate::planner::PlanResult,
    log: StoreDecisionLog<'_>,
    claim: &Claim,
) -> Result<PlanRecord, ApiError> {
    let o = result.outcome;
    let committed = matches!(result.settlement, Settlement::Final) && o.status == OutcomeStatus::Committed;
    if committed || matches!(result.settlement, Settlement::Final | Settlement::Undecided(LogError::Refused(_))) {
        st.metrics.modified(committed);
    }
    match result.settlement {
        Settlement::Final if o.status == OutcomeStatus::Committed => {
            let mut modified =
                log.decided().ok_or_else(|| ApiError::internal("a committed modification is unrecorded"))?;
            // A part whose commit failed after the decision is broken (see
            // `Coordinator::break_failed`): so is the plan, with an event.
            // Remote participants: the end recorded has marked it already (`Ending::Broken`).
            if o.has_broken_part() && modified.status != PlanStatus::Broken {
                let mut outcome = modified.outcome.clone();
                outcome.take_broken_from(&o);
                if let Some(broken) = st.store.mark_broken(rec.id, &outcome).await? {
                    modified = broken;
                }
            }
            st.ledger.record(&rec.id.to_string(), &rec.user, Usage::of_outcome(&modified.outcome));
            tracing::info!(plan = %rec.id, ms = o.planning_ms, "modified");
            Ok(modified)
        }
        Settlement::Final | Settlement::Unsatisfiable => Err(ApiError::conflict(
            "modification-refused",
            "The modification does not fit; nothing changed",
            o.reason.unwrap_or_default(),
        )),
        Settlement::Undecided(LogError::Superseded) => Err(ApiError::conflict(
            "plan-busy",
            "The plan changed meanwhile; nothing changed",
            format!("plan {} was changed or cancelled while this modification was booked; read it and retry", rec.id),
        )),
        Settlement::Undecided(LogError::Refused(reason)) => {
            Err(ApiError::conflict("decision-refused", "The decision was refused; nothing changed", reason))
        }
        Settlement::Undecided(LogError::Unavailable(e)) => Err(unrecorded(st, rec.owner, None, claim, e).await),
        Settlement::InDoubt(reason) => Err(modification_in_doubt(st, rec.id, &reason.to_string())),
    }
}

/// 503 `plan-in-doubt`: the modification of plan `id` is decided but not confirmed (`why`).
fn modification_in_doubt(st: &AppState, id: Uuid, why: &str) -> ApiError {
    plan_in_doubt(
        st,
        "The modification's commit is not confirmed yet",
        format!(
            "the modification of plan {id} is decided but not confirmed: {why}. It is settled within seconds of the \
             participants and the store answering; retry with the same Idempotency-Key, or read GET /v1/plans/{id} \
             (modification_pending while it is so)."
        ),
    )
}
