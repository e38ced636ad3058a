//! `PATCH /v1/plans/{id}`: modify a committed plan atomically (docs/protocol.md,
//! "Modification").
//!
//! The body ([`PlanModification`]) is checked against the plan as booked (deadline, now,
//! started parts, transfers inside their jobs: 422 with the reason, nothing changed); the
//! planner then books every changed part with a replacement hold and one two-phase commit. A
//! part that does not fit: 409 naming it (and, for a job, when it could start), nothing changed.
//! Committed: 200 with the plan as modified and one `plan.modified` event.
//!
//! One change at a time per plan: a modification (or a cancellation) holds the plan's lock
//! ([`PlanLock`]: a claim on the key `coreserve:plan:{id}` of the store's idempotency keys,
//! taken over if its process dies), so two changes never replace the same reservation at once.
//! With an `Idempotency-Key`, a retry of a committed modification answers the plan as it is now
//! (the rules are [`crate::api::idempotency`]'s, shared with creation).
//!
//! **In doubt.** A modification decided (its decision durable) but not finished, because its
//! planner stopped mid-way, is settled by another planner's recovery within seconds. Until then
//! the participants may hold the new shape while the plan record shows the old one, so: a
//! retry of that `PATCH` (same key) answers `503 plan-in-doubt` with `Retry-After`, never the
//! old shape as if modified; `GET` shows the plan with `modification_pending: true`; and
//! another change or a cancellation of the plan is `409 plan-pending` (Retry-After).

use actix_web::{web, HttpRequest, HttpResponse};
use uuid::Uuid;

use super::plans::{owned, plan_in_doubt, plan_pending, task_failed, unrecorded, PlanView};
use crate::api::auth::Caller;
use crate::api::decision_log::{ModificationMeta, StoreDecisionLog};
use crate::api::idempotency::{self, IdempotencyKey, NextAction, Operation, PlanLock};
use crate::api::problem::ApiError;
use crate::api::state::AppState;
use crate::fairshare::Usage;
use crate::model::{PlanModification, PlanStatus};
use crate::planner::{ModifyOptions, Settlement};
use crate::protocol::decision::LogError;
use crate::store::{Claim, PlanRecord};

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
    let key = IdempotencyKey::from_request(&req)?;
    let body: PlanModification = crate::api::body::parse(&req, &raw)?;
    let rec = owned(&state, &caller, *id).await?;
    let guard = state.claim();
    let op = Operation::Modify(rec.id);
    let key = match idempotency::try_processing(&state, caller.principal, key, &body, op, &guard.claim).await? {
        NextAction::Start(key) => key,
        NextAction::Replay(_) => {
            // The key is done once the modification is decided: its end may not be recorded
            // yet (its planner stopped). Then the plan may still have the shape before it,
            // which the participants may no longer hold: in doubt, not 200.
            if !state.store.modifications_in_doubt(Some(&[rec.id])).await?.is_empty() {
                return Err(modification_in_doubt(&state, rec.id, "its planner stopped before recording its end"));
            }
            // Read after the check: once the modification is finished, the plan as it made it.
            let rec = owned(&state, &caller, rec.id).await?;
            return Ok(HttpResponse::Ok().json(PlanView::from(&rec)));
        }
    };
    // Under the plan's lock, in a task of its own (it finishes even if the client goes away);
    // a failure gives the key back.
    let st = state.clone();
    let task = actix_web::rt::spawn(async move {
        let claim = &guard.claim;
        let modified = async {
            let lock = PlanLock::take(&st, &rec, claim).await?;
            let result = modify_locked(&st, rec.id, body, key.as_ref(), claim).await;
            lock.free(st.store.as_ref(), claim).await;
            result
        };
        idempotency::release_on_error(st.store.as_ref(), key.as_ref(), claim, modified).await
    });
    let rec = task.await.map_err(|e| task_failed(&state, e))??;
    Ok(HttpResponse::Ok().json(PlanView::from(&rec)))
}

/// Modifies plan `id` as `body` says, under its lock (and `key`, if the request sent one).
///
/// # Errors
/// 409 when the plan may not be modified now ([`modifiable`]); 422 when `body` does not apply
/// to it; the errors of [`answer`].
async fn modify_locked(
    st: &AppState,
    id: Uuid,
    body: PlanModification,
    key: Option<&idempotency::ClaimedKey>,
    claim: &Claim,
) -> Result<PlanRecord, ApiError> {
    // Read again under the lock: the plan as the modification finds it.
    let rec = modifiable(st, id).await?;
    let new = body.apply(&rec.outcome, st.now_utc()).map_err(ApiError::invalid)?;
    let meta = ModificationMeta { plan: &rec, key: key.map(|k| k.record()) };
    let log = StoreDecisionLog::modifying(st.store.as_ref(), st.shares_fate(), claim, meta);
    // Booked for the plan's owner (a Slurm site's local account), also when an admin makes the
    // change.
    let opts = ModifyOptions { user: Some(&rec.user), log: Some(&log) };
    let result = st.planners.lend().modify(&rec.outcome, &rec.bookings, &new, opts).await;
    answer(st, &rec, result, log).await
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
) -> Result<PlanRecord, ApiError> {
    let status = result.status();
    // Counted once decided either way (not in doubt, not superseded nor unrecorded).
    if matches!(result.settlement, Settlement::Final | Settlement::Undecided(LogError::Refused(_))) {
        st.metrics.modified(status == PlanStatus::Committed);
    }
    let o = result.outcome;
    match result.settlement {
        Settlement::Final if status == PlanStatus::Committed => {
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
        Settlement::Undecided(LogError::Unavailable(e)) => Err(unrecorded(e)),
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
