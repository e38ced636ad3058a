//! The participant protocol: availability queries and two-phase commit (prepare = hold,
//! commit, abort) spoken by the planner to every LIS and to the NIS.
//!
//! One async trait, [`Participant`], is implemented by the in-process services ([`crate::lis`],
//! [`crate::nis`]); a transport (HTTP client, simulated latency) wraps any participant and
//! forwards the same messages, so the planner never knows which one it talks to.
//!
//! Hold lifecycle (after OGF NSI CS v2 / OpenNSA; see docs/protocol.md): `prepare` answers with a
//! [`Hold`] whose lease expires at `expires_at`; until then capacity stays set aside.
//! `commit` turns it into a reservation (idempotent); `abort` releases it (idempotent); a hold
//! not committed by its expiry is released by the participant itself. A committed reservation
//! is given back with `release` (plan cancellation, or the coordinator's compensation).

pub mod decision;
mod holds;
pub mod http;
mod journal;
mod yielding;

pub use holds::{HoldBook, HoldState};
pub use journal::{BackendError, Backlog, Journal, JournalEntry, JournalError, Journaled};
pub use yielding::Yielding;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::calendar::CalendarError;
use crate::model::{ComputeDemand, LinkId, SiteId, Time};

/// Identifier of a hold (and, after commit, of the reservation it became).
pub type HoldId = Uuid;
/// Identifier of one planning transaction (all holds of one plan attempt share it).
pub type TxnId = Uuid;

/// Which participant keeps a hold: the LIS of a site, or the NIS.
///
/// JSON: `{"participant": "site", "site": "ID"}` or `{"participant": "network"}`; as text
/// (the `participant` column of the store, logs): `site:ID` or `network`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "participant", content = "site", rename_all = "lowercase")]
pub enum ParticipantRef {
    /// The LIS of a site.
    Site(SiteId),
    /// The NIS.
    Network,
}

impl std::fmt::Display for ParticipantRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParticipantRef::Site(s) => write!(f, "site:{s}"),
            ParticipantRef::Network => f.write_str("network"),
        }
    }
}

impl std::str::FromStr for ParticipantRef {
    type Err = String;
    /// `site:ID` or `network`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            None if s == "network" => Ok(ParticipantRef::Network),
            Some(("site", id)) if !id.is_empty() => Ok(ParticipantRef::Site(id.to_owned())),
            _ => Err(format!("bad participant `{s}`; expected site:ID or network")),
        }
    }
}

/// A question to a participant; answered by [`Participant::query`] with an [`Availability`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum AvailabilityQuery {
    /// LIS free-slot search: earliest start `>= window_start` at which `cpus` CPUs are free for
    /// `duration_s` seconds, ending by `deadline` (Ando & Aida, Fig. 3, "candidates of rm").
    Compute { site: SiteId, cpus: u32, duration_s: i64, window_start: Time, deadline: Time },
    /// NIS availability check: can `bandwidth_mbps` be reserved between the nodes of two sites
    /// over `[start, end)`?
    Network { from_site: SiteId, to_site: SiteId, bandwidth_mbps: u64, start: Time, end: Time },
}

/// A compute reservation candidate from one LIS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputeOffer {
    pub site: SiteId,
    /// Earliest feasible start in the window, `None` when the job cannot fit before the deadline.
    pub earliest_start: Option<Time>,
    /// Mean booked fraction of the site's CPUs over `[window_start, deadline)` (policy `load`).
    pub utilisation: f64,
    /// The site's price (policy `cost`).
    pub price_per_cpu_hour: f64,
}

/// A network path the NIS can reserve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Route {
    /// Link ids from the first site's node to the second's; empty when both share a node.
    pub links: Vec<LinkId>,
    /// Sum of the links' `price_per_gbps_hour`.
    pub price_per_gbps_hour: f64,
    /// Bottleneck free bandwidth of the path over the interval (Mbit/s); `u64::MAX` when empty.
    pub free_mbps: u64,
}

/// An answer to an [`AvailabilityQuery`].
///
/// JSON: `{"kind": "compute", "answer": {..offer..}}` or `{"kind": "network", "answer":
/// {..route..} | null}` (adjacently tagged: an internally tagged `Option` cannot be written).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "answer", rename_all = "lowercase")]
pub enum Availability {
    Compute(ComputeOffer),
    /// `None`: no path with enough free bandwidth.
    Network(Option<Route>),
}

/// A prepare message: set capacity aside for transaction `txn`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum HoldRequest {
    Compute {
        txn: TxnId,
        site: SiteId,
        cpus: u32,
        start: Time,
        end: Time,
    },
    /// Holds `bandwidth_mbps` on every link of `links`, all or none.
    Network {
        txn: TxnId,
        links: Vec<LinkId>,
        bandwidth_mbps: u64,
        start: Time,
        end: Time,
    },
}

/// A prepare-OK: the participant promises the capacity until `expires_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub id: HoldId,
    pub expires_at: Time,
}

/// Why a participant refused a message. Nothing changed when one is returned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParticipantError {
    #[error("not enough capacity: {0}")]
    Capacity(#[from] CalendarError),
    #[error("link `{link}` cannot carry the hold: {source}")]
    LinkCapacity { link: LinkId, source: CalendarError },
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
    #[error("this participant does not answer {0} messages")]
    WrongParticipant(&'static str),
    #[error("invalid message: {0}")]
    Invalid(String),
    #[error("transport: {0}")]
    Transport(String),
    /// The participant could not make the change durable (its store failed); nothing was
    /// promised. Retrying is safe.
    #[error("durable store: {0}")]
    Durability(String),
}

/// A resource manager taking part in planning and two-phase commit: a LIS or the NIS.
#[async_trait]
pub trait Participant: Send + Sync {
    /// Answers an availability query; changes nothing.
    async fn query(&self, q: &AvailabilityQuery) -> Result<Availability, ParticipantError>;
    /// Phase 1: check and set aside capacity atomically, with a lease.
    async fn prepare(&self, req: &HoldRequest) -> Result<Hold, ParticipantError>;
    /// Phase 1 on behalf of the principal `owner` (the `user` of the token that asked): like
    /// [`Participant::prepare`], and the participant records `owner` with the hold, so that
    /// its HTTP endpoints can refuse phase 2 from anyone else. The default implementation (for
    /// transports and test doubles, which record nothing) is `prepare`.
    async fn prepare_for(&self, req: &HoldRequest, owner: &str) -> Result<Hold, ParticipantError> {
        let _ = owner;
        self.prepare(req).await
    }
    /// Phase 2 (commit): makes a live hold a reservation. Idempotent.
    ///
    /// # Errors
    /// [`ParticipantError::HoldExpired`], [`ParticipantError::Aborted`] or
    /// [`ParticipantError::UnknownHold`]: the hold is gone and nothing was booked.
    async fn commit(&self, hold: HoldId) -> Result<(), ParticipantError>;
    /// Phase 2 (abort): releases a hold. Idempotent; aborting an expired hold is fine.
    ///
    /// # Errors
    /// [`ParticipantError::AlreadyCommitted`] if the hold was committed.
    async fn abort(&self, hold: HoldId) -> Result<(), ParticipantError>;
    /// Gives back a committed reservation. Idempotent.
    async fn release(&self, hold: HoldId) -> Result<(), ParticipantError>;
    /// Gives a live hold a new lease of `lease_s` seconds from now (a coordinator that needs
    /// more time). Extending twice is fine.
    ///
    /// # Errors
    /// `Invalid` for `lease_s <= 0`; `HoldExpired`, `Aborted`, `UnknownHold`, or
    /// `AlreadyCommitted` for a committed hold (it has no lease).
    async fn extend(&self, hold: HoldId, lease_s: i64) -> Result<Hold, ParticipantError>;
}

/// The site catalogue (GIS) as the planner sees it.
#[async_trait]
pub trait Catalogue: Send + Sync {
    /// Candidate sites for a compute demand, sorted by id: the sites that can ever run it.
    async fn candidates(&self, demand: &ComputeDemand) -> Result<Vec<SiteId>, ParticipantError>;
}
