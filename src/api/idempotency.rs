//! Idempotency keys, in one place: the `Idempotency-Key` of `POST /v1/plans` (create) and
//! `PATCH /v1/plans/{id}` (modify), and the plans' locks, which are keys of the same store.
//! `DELETE /v1/plans/{id}` (cancel) takes no key: cancelling twice answers the cancelled plan.
//!
//! A keyed request first [claims](try_processing) its key, which says what to do next
//! ([`NextAction`]):
//!
//! | the store's [`KeyClaim`] | the answer |
//! |---|---|
//! | `Claimed`: the key is new, or its last claim lapsed without making a plan | [`NextAction::Start`]: do the work under the [`ClaimedKey`] |
//! | `InProgress`: another request holds a live claim on it | `409 idempotency-in-progress` (Retry-After) |
//! | `Done`, another body (or, modify, another plan) | `422 invalid-request` |
//! | `Done`, the plan still `pending` | `409 idempotency-in-progress` (Retry-After) |
//! | `Done`, same body (and plan) | [`NextAction::Replay`]: the plan as it is now |
//!
//! The work records its plan with the key in one write (the decision or the rejection, see
//! [`crate::api::decision_log`]), or fails; [`release_on_error`] then frees the key, so that a
//! retry starts afresh. That is the one place a request's key is released, and [`PlanLock::free`]
//! the one place a lock is; both go through `release`, which logs a failure instead of answering
//! it (the claim's lease ends the key anyway). A release is conditional on the key making no
//! plan yet and on the request's claim still holding it, so releasing after a decision (a plan
//! in doubt) or after another process took the key over changes nothing.
//!
//! Modelled on zero-to-production's `idempotency` module (a key newtype, one
//! claim-then-next-action function), with the claims' leases of `docs/protocol.md`,
//! "Idempotency keys, claims and leases".

use std::future::Future;

use actix_web::HttpRequest;
use serde::Serialize;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::api::problem::ApiError;
use crate::api::state::AppState;
use crate::model::PlanStatus;
use crate::store::{Claim, KeyClaim, PlanRecord, Store};

/// The name of the idempotency header.
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

/// The longest key, in characters (bytes: they are ASCII).
pub const MAX_KEY_LEN: usize = 255;

/// The prefix of the service's own keys in a user's key space (the plans' locks,
/// [`PlanLock`]): a client key may not start with it, or it could take a plan's lock.
pub const RESERVED_PREFIX: &str = "coreserve:";

/// A client's `Idempotency-Key`: 1 to [`MAX_KEY_LEN`] visible ASCII characters (space and tab
/// allowed), as the header carries it, not starting with [`RESERVED_PREFIX`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// The request's `Idempotency-Key`, if it sent one.
    ///
    /// # Errors
    /// 400 when it is not 1-255 visible ASCII characters, or starts with [`RESERVED_PREFIX`].
    pub fn from_request(req: &HttpRequest) -> Result<Option<Self>, ApiError> {
        let Some(value) = req.headers().get(IDEMPOTENCY_KEY) else { return Ok(None) };
        let text = value.to_str().map_err(|_| bad_key())?;
        Self::try_from(text.to_owned()).map(Some)
    }

    /// The key's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for IdempotencyKey {
    type Error = ApiError;

    /// # Errors
    /// 400 when `s` is empty, longer than [`MAX_KEY_LEN`], has a character outside visible
    /// ASCII, space and tab, or starts with [`RESERVED_PREFIX`].
    fn try_from(s: String) -> Result<Self, ApiError> {
        let visible = |b: u8| (b' '..=b'~').contains(&b) || b == b'\t';
        if s.is_empty() || s.len() > MAX_KEY_LEN || !s.bytes().all(visible) {
            return Err(bad_key());
        }
        if s.starts_with(RESERVED_PREFIX) {
            return Err(ApiError::bad_request(format!(
                "Idempotency-Key must not start with `{RESERVED_PREFIX}`: the service keeps those keys for its own locks"
            )));
        }
        Ok(IdempotencyKey(s))
    }
}

impl AsRef<str> for IdempotencyKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn bad_key() -> ApiError {
    ApiError::bad_request("Idempotency-Key must be 1-255 visible ASCII characters")
}

/// The SHA-256 of `body`'s JSON, hex: what tells a retry under an `Idempotency-Key` from a
/// reuse of the key with another body.
pub fn fingerprint(body: &impl Serialize) -> String {
    hex::encode(Sha256::digest(serde_json::to_vec(body).expect("a body serialises")))
}

/// What a keyed request does: what a replay of its key must match besides the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// `POST /v1/plans`: a new plan.
    Create,
    /// `PATCH /v1/plans/{id}`: a change of this plan (a replay must name the same one).
    Modify(Uuid),
}

/// What a request does after claiming its key ([`try_processing`]).
#[derive(Debug)]
pub enum NextAction {
    /// Do the work: the key, claimed for the request (`None`: it sent none). Record the plan
    /// with [`ClaimedKey::record`], or give the key back through [`release_on_error`].
    Start(Option<ClaimedKey>),
    /// An earlier request with this key and body made this plan (read now, not `pending`):
    /// answer it again, doing nothing.
    Replay(Box<PlanRecord>),
}

/// A key claimed by a request, with its owner and the request's body fingerprint.
#[derive(Debug, Clone)]
pub struct ClaimedKey {
    principal: Uuid,
    key: IdempotencyKey,
    fingerprint: String,
}

impl ClaimedKey {
    /// The key's text.
    pub fn key(&self) -> &str {
        self.key.as_str()
    }

    /// `(key, body fingerprint)`: what the plan's write stores with it (`PlanMeta::key`,
    /// `ModificationMeta::key`, `RejectionRecord::key`).
    pub fn record(&self) -> (&str, &str) {
        (self.key.as_str(), &self.fingerprint)
    }
}

/// Claims `key` (of `principal`, the caller) for a request with `body` doing `op`, under
/// `claim`, and says what to do next (see the module docs). Without a key: start.
///
/// # Errors
/// 409 `idempotency-in-progress` (Retry-After) while another request holds the key or its plan
/// is pending; 422 when the key made another request (another body, or another plan); 500 when
/// the key's plan is missing; the store's error (503) when it fails.
pub async fn try_processing(
    state: &AppState,
    principal: Uuid,
    key: Option<IdempotencyKey>,
    body: &impl Serialize,
    op: Operation,
    claim: &Claim,
) -> Result<NextAction, ApiError> {
    let Some(key) = key else { return Ok(NextAction::Start(None)) };
    let print = fingerprint(body);
    match state.store.claim_key(principal, key.as_str(), claim).await? {
        KeyClaim::Claimed => Ok(NextAction::Start(Some(ClaimedKey { principal, key, fingerprint: print }))),
        KeyClaim::InProgress => Err(in_progress(state, key.as_str())),
        KeyClaim::Done { plan, fingerprint } => {
            let same_plan = match op {
                Operation::Create => true,
                Operation::Modify(id) => plan == id,
            };
            if fingerprint != print || !same_plan {
                return Err(reused(&key));
            }
            let rec = state.store.plan(plan).await?.ok_or_else(|| ApiError::internal("keyed plan is missing"))?;
            if rec.status == PlanStatus::Pending {
                return Err(in_progress(state, key.as_str()));
            }
            Ok(NextAction::Replay(Box::new(rec)))
        }
    }
}

/// Awaits `work` and, if it fails, releases `key` (if any) so that a retry starts afresh: the
/// one place a request's key is released. Its answer is `work`'s.
pub async fn release_on_error<T>(
    store: &dyn Store,
    key: Option<&ClaimedKey>,
    claim: &Claim,
    work: impl Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    let result = work.await;
    if let (Err(_), Some(key)) = (&result, key) {
        release(store, key.principal, key.key.as_str(), claim, "an idempotency key").await;
    }
    result
}

/// Frees `key` of `principal` if `claim` still holds it and it made no plan; a failure is
/// logged, not answered: the claim's lease ends the key.
async fn release(store: &dyn Store, principal: Uuid, key: &str, claim: &Claim, what: &str) {
    if let Err(e) = store.release_key(principal, key, claim).await {
        tracing::warn!(error = %e, key, "{what} was not freed; its claim's lease ends it");
    }
}

/// 409 `idempotency-in-progress` (Retry-After): another request with `key` is being planned
/// or committed, or its plan is pending.
pub fn in_progress(state: &AppState, key: &str) -> ApiError {
    ApiError::conflict(
        "idempotency-in-progress",
        "A request with this key is in progress",
        format!("a request with Idempotency-Key `{key}` is still being planned or committed; retry later"),
    )
    .retry_after(state.config.claim_lease_s.clamp(1, 10) as u64 / 2 + 1)
}

/// 422: `key` made another request (another body, or a change of another plan).
fn reused(key: &IdempotencyKey) -> ApiError {
    ApiError::invalid(format!(
        "Idempotency-Key `{key}` was used for another request (another body, or another plan); use a new key"
    ))
}

/// A plan's lock: a claim on the plan's own key (`coreserve:plan:{id}`) among its owner's keys,
/// held by a modification or a cancellation, so that two changes never replace the same
/// reservation at once. Freed by [`PlanLock::free`] or, if its process dies, when the claim's
/// lease runs out.
pub struct PlanLock {
    owner: Uuid,
    key: String,
}

impl PlanLock {
    /// Takes plan `rec`'s lock for `claim`.
    ///
    /// # Errors
    /// 409 `plan-busy` (Retry-After) while another change of the plan is under way; the
    /// store's error.
    pub async fn take(state: &AppState, rec: &PlanRecord, claim: &Claim) -> Result<PlanLock, ApiError> {
        let lock = PlanLock { owner: rec.owner, key: format!("{RESERVED_PREFIX}plan:{}", rec.id) };
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

    /// Frees the lock (a failure is logged; the claim's lease ends it).
    pub async fn free(self, store: &dyn Store, claim: &Claim) {
        release(store, self.owner, &self.key, claim, "a plan lock").await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_1_to_255_visible_ascii_characters() {
        for ok in ["k", "a key\twith tab", &"x".repeat(255), "~!\"#"] {
            assert_eq!(IdempotencyKey::try_from(ok.to_owned()).unwrap().as_str(), ok);
        }
        for bad in ["", &"x".repeat(256), "é", "a\nb", "\u{7f}"] {
            let e = IdempotencyKey::try_from(bad.to_owned()).unwrap_err();
            assert_eq!(e.status.as_u16(), 400, "{bad:?}");
        }
    }

    #[test]
    fn the_fingerprint_tells_bodies_apart() {
        let a = fingerprint(&serde_json::json!({"a": 1}));
        assert_eq!(a, fingerprint(&serde_json::json!({"a": 1})));
        assert_ne!(a, fingerprint(&serde_json::json!({"a": 2})));
        assert_eq!(a.len(), 64);
    }
}
