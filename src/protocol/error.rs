//! [`ParticipantError`]: why a participant refused a message, and [`ProblemKind`], how each
//! refusal is answered over HTTP (one table for both ends of the wire).

use serde::{Deserialize, Serialize};

use super::HoldId;
use crate::calendar::CalendarError;
use crate::model::{rfc3339, LinkId, SiteId, Time};

/// Why a participant refused a message. Nothing changed when one is returned.
///
/// It is its own wire format: problem bodies of the participant endpoints carry it as
/// `participant_error`, `{"kind": "<variant in snake_case>", "about": <the variant's data>}`
/// (e.g. `{"kind": "hold_expired", "about": "<hold id>"}`), and remote planners decode it
/// back into the same value.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", content = "about", rename_all = "snake_case")]
pub enum ParticipantError {
    /// A site has fewer free CPUs than `requested` at some instant of `[start, end)`; `free` is
    /// the least free there.
    #[error("not enough capacity: over capacity: {requested} requested over [{}, {}) but only {free} free", rfc3339(.start), rfc3339(.end))]
    Capacity { start: Time, end: Time, requested: u64, free: u64 },
    /// Like `Capacity`, for the GPUs of pool `model` at a site.
    #[error("not enough GPUs of model `{model}`: over capacity: {requested} requested over [{}, {}) but only {free} free", rfc3339(.start), rfc3339(.end))]
    GpuCapacity { model: String, start: Time, end: Time, requested: u64, free: u64 },
    /// Like `Capacity`, for link `link` of a network hold (in Mbit/s).
    #[error(
        "link `{link}` cannot carry the hold: over capacity: {requested} requested over [{}, {}) but only {free} free",
        rfc3339(.start),
        rfc3339(.end)
    )]
    LinkCapacity { link: LinkId, start: Time, end: Time, requested: u64, free: u64 },
    /// A hold that can never be set aside: an empty interval or a zero amount.
    #[error("invalid hold: {0}")]
    InvalidHold(String),
    #[error("unknown hold {0}")]
    UnknownHold(HoldId),
    #[error("hold {0} expired before commit")]
    HoldExpired(HoldId),
    #[error("hold {0} was aborted")]
    Aborted(HoldId),
    #[error("hold {0} is committed; release it instead")]
    AlreadyCommitted(HoldId),
    #[error("hold {0} is not committed")]
    NotCommitted(HoldId),
    /// The hold was prepared by another principal (another planner's credential): only it or
    /// an admin may commit, abort, release or extend it. Nothing changed; the caller cannot
    /// tell whether the hold is still live.
    #[error("hold {0} belongs to another principal")]
    NotOwner(HoldId),
    #[error("unknown site `{0}`")]
    UnknownSite(SiteId),
    #[error("unknown link `{0}`")]
    UnknownLink(LinkId),
    #[error("invalid message: {0}")]
    Invalid(String),
    #[error("transport: {0}")]
    Transport(String),
    /// The site books through a batch scheduler in which `user` has no account (no mapping in
    /// the LIS's configuration). Nothing changed.
    #[error("user `{user}` has no account at site `{site}` (its LIS maps no local user to it)")]
    NoLocalAccount { site: SiteId, user: String },
    /// The site's own scheduler (Slurm) refused the reservation, e.g. its cores were sold
    /// there since the LIS last looked. Definite: the hold is not made or committed.
    #[error("site `{site}`: the local scheduler refused: {reason}")]
    LocalScheduler { site: SiteId, reason: String },
    /// The site's own scheduler did not answer (slurmctld stopped or unreachable); whether a
    /// reservation was made is unknown. Retrying is safe.
    #[error("site `{site}`: the local scheduler is unavailable: {reason}")]
    SchedulerUnavailable { site: SiteId, reason: String },
    /// The participant could not make the change durable (its store failed); nothing was
    /// promised. Retrying is safe.
    #[error("durable store: {0}")]
    Durability(String),
    /// The NIS's data plane refused or could not install a transfer's guaranteed rate (a
    /// device of the path is missing or unshaped, `tc` failed). Definite: the hold is not made
    /// durable or committed.
    #[error("the network's data plane refused: {0}")]
    DataPlane(String),
}

impl ParticipantError {
    /// A calendar's refusal as a participant's: `OverCapacity` becomes [`Self::Capacity`] (or
    /// [`Self::LinkCapacity`] for `link`), the others [`Self::InvalidHold`].
    pub fn from_calendar(e: CalendarError, link: Option<&LinkId>) -> Self {
        match (e, link) {
            (CalendarError::OverCapacity { start, end, requested, free }, None) => {
                ParticipantError::Capacity { start, end, requested, free }
            }
            (CalendarError::OverCapacity { start, end, requested, free }, Some(link)) => {
                ParticipantError::LinkCapacity { link: link.clone(), start, end, requested, free }
            }
            (e, _) => ParticipantError::InvalidHold(e.to_string()),
        }
    }
}

/// How a [`ParticipantError`] is answered over HTTP: status, RFC 9457 problem type slug
/// (`urn:coreserve:problem:<slug>`) and title. The one table for both ends: the API encodes
/// with it, and [`super::http`] decodes a problem body that carries no `participant_error` by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProblemKind {
    pub status: u16,
    pub slug: &'static str,
    pub title: &'static str,
}

impl ParticipantError {
    /// This error's status, slug and title (see [`ProblemKind`]).
    pub fn problem_kind(&self) -> ProblemKind {
        use ParticipantError as P;
        let (status, slug, title) = match self {
            P::Capacity { .. } | P::GpuCapacity { .. } | P::LinkCapacity { .. } => {
                (409, "capacity", "Not enough capacity")
            }
            P::InvalidHold(_) => (422, "invalid-request", "The request is not valid"),
            P::UnknownHold(_) | P::UnknownSite(_) | P::UnknownLink(_) => (404, "not-found", "No such resource"),
            P::HoldExpired(_) => (409, "hold-expired", "The hold expired"),
            P::Aborted(_) => (409, "hold-aborted", "The hold was aborted"),
            P::AlreadyCommitted(_) => (409, "hold-committed", "The hold is committed"),
            P::NotCommitted(_) => (409, "hold-not-committed", "The hold is not committed"),
            P::NotOwner(_) => (409, "hold-not-owned", "A part is held by another principal"),
            P::Invalid(_) => (400, "bad-request", "Malformed request"),
            P::Transport(_) => (502, "transport", "A participant did not answer"),
            P::Durability(_) => (503, "store-unavailable", "The participant could not make the change durable"),
            P::NoLocalAccount { .. } => (403, "no-local-account", "No account at the site"),
            P::LocalScheduler { .. } => (409, "scheduler-refused", "The site's scheduler refused"),
            P::DataPlane(_) => (409, "data-plane-refused", "The network's data plane refused"),
            P::SchedulerUnavailable { .. } => (503, "scheduler-unavailable", "The site's scheduler is unavailable"),
        };
        ProblemKind { status, slug, title }
    }

    /// The error about hold `hold` that a problem with `status` and `slug` means, if one does
    /// (see [`ProblemKind`]): what a problem body without `participant_error` decodes to. The
    /// hold slugs are matched by name (a participant's own owner check answers
    /// `hold-not-owned` with 403), any 404 is an unknown hold.
    pub fn about_hold(status: u16, slug: &str, hold: HoldId) -> Option<Self> {
        use ParticipantError as P;
        if status == 404 {
            return Some(P::UnknownHold(hold));
        }
        [P::HoldExpired(hold), P::Aborted(hold), P::AlreadyCommitted(hold), P::NotCommitted(hold), P::NotOwner(hold)]
            .into_iter()
            .find(|e| e.problem_kind().slug == slug)
    }
}

impl ParticipantError {
    /// A GPU calendar's refusal: `OverCapacity` becomes [`Self::GpuCapacity`] for pool `model`,
    /// the others [`Self::InvalidHold`].
    pub fn from_gpu_calendar(e: CalendarError, model: &str) -> Self {
        match e {
            CalendarError::OverCapacity { start, end, requested, free } => {
                ParticipantError::GpuCapacity { model: model.to_owned(), start, end, requested, free }
            }
            e => ParticipantError::InvalidHold(e.to_string()),
        }
    }
}
