//! The participant protocol: availability queries and two-phase commit (prepare = hold,
//! commit, abort) spoken by the planner to every LIS and to the NIS.
//!
//! [`Participant<R>`] is implemented by the in-process participants ([`crate::lis`] is a
//! `Participant<Compute>`, [`crate::nis`] a `Participant<Network>`); the [`Role`] fixes the
//! types of the availability query and of the prepare message, so nobody matches on a message
//! kind. Phase 2 ([`HoldLifecycle`]: commit, abort, release, extend) is common to both, and is
//! all the coordinator needs for a hold it knows by id. A transport (HTTP client, simulated
//! latency, the participant journal) wraps any participant and forwards the same messages, so
//! the planner never knows which one it talks to.
//!
//! Hold lifecycle (after OGF NSI CS v2 / OpenNSA; see docs/protocol.md): `prepare` answers with a
//! [`Hold`] whose lease expires at `expires_at`; until then capacity stays set aside.
//! `commit` turns it into a reservation (idempotent); `abort` releases it (idempotent); a hold
//! not committed by its expiry is released by the participant itself. A committed reservation
//! is given back with `release` (plan cancellation, or the coordinator's compensation).

pub(crate) mod bookkeeping;
pub mod decision;
mod error;
mod holds;
pub mod http;
mod journal;
mod service_times;
mod snapshot;
mod timed;
mod yielding;

pub use error::{ParticipantError, ProblemKind};
pub use holds::{HoldBook, HoldState};
pub use journal::{
    unmatched_entries, BackendError, Backlog, Journal, JournalEntry, JournalError, JournalState, Journaled, Tentative,
    Transition,
};
pub use service_times::{BadServiceTime, ServiceTimes};
pub use snapshot::{book_steps, usage_steps, ComputeSnapshot, NetworkSnapshot, SnapshotWindow, UsageStep};
pub use timed::{CallObserver, Message, Timed};
pub use yielding::Yielding;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::model::{ComputeDemand, GpuDemand, LinkId, PoolGpus, SiteId, Time, UnknownValue, Unmet};

crate::model::uuid_id! {
    /// Identifier of a hold (and, after commit, of the reservation it became).
    HoldId
}

crate::model::uuid_id! {
    /// Identifier of one planning transaction (all holds of one plan attempt share it).
    TxnId
}

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
    type Err = UnknownValue;
    /// `site:ID` or `network`.
    fn from_str(s: &str) -> Result<Self, UnknownValue> {
        match s.split_once(':') {
            None if s == "network" => Ok(ParticipantRef::Network),
            Some(("site", id)) if !id.is_empty() => Ok(ParticipantRef::Site(id.into())),
            _ => Err(UnknownValue::new("participant", s, "site:ID or network")),
        }
    }
}

/// LIS free-slot search: the earliest start `>= window_start` at which `cpus` CPUs of `site`
/// (and, with `gpus`, that many GPUs of one pool meeting its bounds) are free for `duration_s`
/// seconds, ending by `deadline` (Ando & Aida, Fig. 3, "candidates of rm"). Answered by a
/// [`ComputeOffer`]. Times are [`Time`] seconds.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputeQuery {
    pub site: SiteId,
    pub cpus: u32,
    pub duration_s: i64,
    pub window_start: Time,
    pub deadline: Time,
    /// GPUs to find with the CPUs (absent: none).
    pub gpus: Option<GpuDemand>,
}

/// NIS availability check: can `bandwidth_mbps` be reserved between the nodes of two sites
/// over `[start, end)`? Answered by `Some(`[`Route`]`)` or `None` (no path has room).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NetworkQuery {
    pub from_site: SiteId,
    pub to_site: SiteId,
    pub bandwidth_mbps: u64,
    pub start: Time,
    pub end: Time,
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
    /// For a query with GPUs: the pool whose GPUs are free from `earliest_start` (the earliest
    /// of the pools that meet the bounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_model: Option<String>,
    /// The site's price of one GPU-hour.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub price_per_gpu_hour: f64,
    /// At a site whose LIS fronts a batch scheduler (Slurm): the prefix of its reservation
    /// names, which end in the hold id's 32 hex digits (see [`crate::lis::slurm`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_prefix: Option<String>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl ComputeOffer {
    /// The price of one hour of a job's `cpus` CPUs and `gpus` GPUs here (policy `cost`).
    pub fn price_per_hour(&self, cpus: u32, gpus: u32) -> f64 {
        f64::from(cpus) * self.price_per_cpu_hour + f64::from(gpus) * self.price_per_gpu_hour
    }
}

/// The name of hold `hold`'s reservation in a site's batch scheduler whose names start with
/// `prefix` ([`ComputeOffer::reservation_prefix`]): the prefix and the hold id's 32 hex digits.
/// The LIS names what it creates this way and the planner names it in the plan's answer.
pub fn local_reservation_name(prefix: &str, hold: HoldId) -> String {
    format!("{prefix}{}", hold.as_uuid().simple())
}

/// A network path the NIS can reserve.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Route {
    /// Link ids from the first site's node to the second's; empty when both share a node.
    pub links: Vec<LinkId>,
    /// Sum of the links' `price_per_gbps_hour`.
    pub price_per_gbps_hour: f64,
    /// Bottleneck free bandwidth of the path over the interval (Mbit/s); `u64::MAX` when empty.
    pub free_mbps: u64,
    /// How the NIS's data plane will recognise the transfer's traffic (a NIS with a data
    /// plane, both sites with endpoint addresses); absent otherwise.
    pub marking: Option<TrafficMarking>,
}

/// How a NIS's data plane recognises the traffic of a transfer between two sites (see
/// docs/protocol.md, "The NIS's data plane"): TCP from `from_addr` to `to_addr` with destination
/// port [`TrafficMarking::port`] of the transfer's hold, in `port_base .. port_base + port_span`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrafficMarking {
    /// The sending site's endpoint address.
    pub from_addr: String,
    /// The receiving site's endpoint address.
    pub to_addr: String,
    pub port_base: u16,
    pub port_span: u16,
}

impl TrafficMarking {
    /// The destination port of hold `hold`'s traffic: derived from the hold id, so that the
    /// planner (which names it in the plan answer) and the NIS (which installs the filter) agree
    /// without another message.
    pub fn port(&self, hold: HoldId) -> u16 {
        port_of(hold, self.port_base, self.port_span)
    }
}

/// See [`TrafficMarking::port`].
pub fn port_of(hold: HoldId, base: u16, span: u16) -> u16 {
    let span = u128::from(span.max(1));
    base.saturating_add((hold.as_uuid().as_u128() % span) as u16)
}

/// A prepare message to a LIS: set `cpus` CPUs of `site` (and `gpus`, if any) aside over
/// `[start, end)` for transaction `txn`, all or none.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputeHoldRequest {
    pub txn: TxnId,
    pub site: SiteId,
    pub cpus: u32,
    pub start: Time,
    pub end: Time,
    /// GPUs of one pool held with the CPUs (absent: none; journals written before GPUs read so).
    pub gpus: Option<PoolGpus>,
    /// The user the job is booked for (the plan's owner): a LIS in front of a batch scheduler
    /// books the reservation for that user's local account. Absent: the site's default.
    pub user: Option<String>,
    /// A **replacement hold** (plan modification): the committed reservation this hold takes
    /// the place of at commit. The capacity check counts that reservation as free; until the
    /// decision both are kept (the calendar holds their maximum at every instant, see
    /// [`crate::calendar::CapacityCalendar::add_growth`]); commit swaps them at once; abort or
    /// lease expiry leaves the reservation as it was.
    pub replaces: Option<HoldId>,
    /// A replacement hold at a site in front of a batch scheduler: the name of the local
    /// (Slurm) reservation it changes, which it keeps (the planner sends the plan's
    /// `reservation_name`, so that a LIS restarted from its journal still knows it). Absent:
    /// the replaced reservation's, as the LIS knows it; a hold that replaces nothing may not
    /// name one (its name is derived from its id).
    pub reservation_name: Option<String>,
}

/// A prepare message to the NIS: hold `bandwidth_mbps` on every link of `links` over
/// `[start, end)`, all or none, for transaction `txn`.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkHoldRequest {
    pub txn: TxnId,
    pub links: Vec<LinkId>,
    pub bandwidth_mbps: u64,
    pub start: Time,
    pub end: Time,
    /// The sending and receiving sites (the planners send them; a NIS with a data plane
    /// recognises the transfer's traffic by their endpoint addresses). Absent in REST holds and
    /// journal entries written before they were sent: such holds are booked in the calendars
    /// only.
    pub sites: Option<(SiteId, SiteId)>,
    /// A replacement hold (plan modification), as [`ComputeHoldRequest::replaces`]; it must
    /// keep the reservation's links.
    pub replaces: Option<HoldId>,
    /// The destination port of the transfer's traffic on a data plane, when it keeps one given
    /// before: a replacement keeps its reservation's, so that the application sends to the
    /// same port after a modification. `None`: derived from the hold id
    /// ([`TrafficMarking::port`]).
    pub port: Option<u16>,
}

/// A prepare message of either kind, as the participant journal records it.
///
/// JSON: the request's fields plus `"kind": "compute" | "network"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum HoldRequest {
    Compute(ComputeHoldRequest),
    Network(NetworkHoldRequest),
}

impl HoldRequest {
    /// The transaction the hold belongs to.
    pub fn txn(&self) -> TxnId {
        match self {
            HoldRequest::Compute(r) => r.txn,
            HoldRequest::Network(r) => r.txn,
        }
    }

    /// The reservation a replacement hold takes the place of (see
    /// [`ComputeHoldRequest::replaces`]).
    pub fn replaces(&self) -> Option<HoldId> {
        match self {
            HoldRequest::Compute(r) => r.replaces,
            HoldRequest::Network(r) => r.replaces,
        }
    }

    /// The held interval `[start, end)`.
    pub fn interval(&self) -> (Time, Time) {
        match self {
            HoldRequest::Compute(r) => (r.start, r.end),
            HoldRequest::Network(r) => (r.start, r.end),
        }
    }
}

impl From<ComputeHoldRequest> for HoldRequest {
    fn from(r: ComputeHoldRequest) -> Self {
        HoldRequest::Compute(r)
    }
}

impl From<NetworkHoldRequest> for HoldRequest {
    fn from(r: NetworkHoldRequest) -> Self {
        HoldRequest::Network(r)
    }
}

/// A prepare-OK: the participant promises the capacity until `expires_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub id: HoldId,
    pub expires_at: Time,
}

/// The kind of a participant, which fixes its messages: a LIS ([`Compute`]) or the NIS
/// ([`Network`]). Only these two implement it.
pub trait Role: Send + Sync + 'static {
    /// `compute` or `network` (logs, the simulator's service times).
    const KIND: ParticipantKind;
    /// The availability query ([`ComputeQuery`], [`NetworkQuery`]).
    type Query: Serialize + DeserializeOwned + Clone + std::fmt::Debug + Send + Sync;
    /// Its answer ([`ComputeOffer`], `Option<`[`Route`]`>`).
    type Answer: Serialize + DeserializeOwned + Clone + std::fmt::Debug + Send + Sync;
    /// The prepare message ([`ComputeHoldRequest`], [`NetworkHoldRequest`]).
    type Prepare: Serialize + DeserializeOwned + Clone + std::fmt::Debug + Send + Sync + Into<HoldRequest>;
    /// A snapshot of the participant's calendars ([`ComputeSnapshot`], [`NetworkSnapshot`]).
    type Snapshot: Serialize + DeserializeOwned + Clone + std::fmt::Debug + Send + Sync;
}

/// The two kinds of participants, as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParticipantKind {
    Compute,
    Network,
}

/// The LIS role (see [`Role`]).
pub enum Compute {}
/// The NIS role (see [`Role`]).
pub enum Network {}

impl Role for Compute {
    const KIND: ParticipantKind = ParticipantKind::Compute;
    type Query = ComputeQuery;
    type Answer = ComputeOffer;
    type Prepare = ComputeHoldRequest;
    type Snapshot = ComputeSnapshot;
}

impl Role for Network {
    const KIND: ParticipantKind = ParticipantKind::Network;
    type Query = NetworkQuery;
    type Answer = Option<Route>;
    type Prepare = NetworkHoldRequest;
    type Snapshot = NetworkSnapshot;
}

/// Phase 2 and the rest of a hold's life, the same at every participant: what the coordinator
/// needs for a hold it only knows by id.
#[async_trait]
pub trait HoldLifecycle: Send + Sync {
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
    /// Phase 1's votes made durable: every hold of `holds` that this participant granted as a
    /// *tentative* hold (kept in memory only, see [`Journaled`]) is written to its journal, so
    /// that it survives the participant's crash until its lease ends. Holds already durable,
    /// and holds that are gone, need nothing (a gone hold's commit says so). A coordinator with
    /// a decision log calls it before logging a commit decision. Participants without a
    /// journal answer `Ok` at once.
    ///
    /// # Errors
    /// [`ParticipantError::Durability`] (nothing promised: abort and give up the plan) or a
    /// transport error.
    async fn persist(&self, holds: &[HoldId]) -> Result<(), ParticipantError>;
    /// Phase 2 for several holds of this participant in one message: the answer of each hold,
    /// in the order of `holds` (see [`HoldLifecycle::commit`]). [`commit_each`] is the plain
    /// implementation, one commit after the other.
    async fn commit_all(&self, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>>;
    /// Phase 2 (abort) for several holds of this participant in one message: the answer of
    /// each hold, in the order of `holds` (see [`HoldLifecycle::abort`]). The default aborts
    /// them one after the other; the HTTP transport sends one request, and wrappers pass it on
    /// as one message.
    async fn abort_all(&self, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
        let mut answers = Vec::with_capacity(holds.len());
        for &h in holds {
            answers.push(self.abort(h).await);
        }
        answers
    }
    /// The reservation that live hold `hold` replaces ([`ComputeHoldRequest::replaces`]),
    /// which its commit releases: what a journal records released with the commit. `None`
    /// for any other hold, and for participants that keep no replacement holds here.
    fn replaced_by(&self, _hold: HoldId) -> Option<HoldId> {
        None
    }
}

/// Test doubles: `HoldLifecycle` for a wrapper around a real participant (its field `.0`)
/// whose phase 2 passes through unchanged.
#[cfg(test)]
macro_rules! lifecycle_passes_through {
    ($wrapper:ty) => {
        #[async_trait::async_trait]
        impl $crate::protocol::HoldLifecycle for $wrapper {
            async fn commit(&self, hold: $crate::protocol::HoldId) -> Result<(), $crate::protocol::ParticipantError> {
                self.0.commit(hold).await
            }
            async fn abort(&self, hold: $crate::protocol::HoldId) -> Result<(), $crate::protocol::ParticipantError> {
                self.0.abort(hold).await
            }
            async fn release(&self, hold: $crate::protocol::HoldId) -> Result<(), $crate::protocol::ParticipantError> {
                self.0.release(hold).await
            }
            async fn extend(
                &self,
                hold: $crate::protocol::HoldId,
                lease_s: i64,
            ) -> Result<$crate::protocol::Hold, $crate::protocol::ParticipantError> {
                self.0.extend(hold, lease_s).await
            }
            async fn persist(
                &self,
                holds: &[$crate::protocol::HoldId],
            ) -> Result<(), $crate::protocol::ParticipantError> {
                self.0.persist(holds).await
            }
            async fn commit_all(
                &self,
                holds: &[$crate::protocol::HoldId],
            ) -> Vec<Result<(), $crate::protocol::ParticipantError>> {
                $crate::protocol::commit_each(self, holds).await
            }
        }
    };
}
#[cfg(test)]
pub(crate) use lifecycle_passes_through;

/// [`HoldLifecycle::commit_all`] as one [`HoldLifecycle::commit`] per hold, in order.
pub async fn commit_each<P: HoldLifecycle + ?Sized>(p: &P, holds: &[HoldId]) -> Vec<Result<(), ParticipantError>> {
    let mut answers = Vec::with_capacity(holds.len());
    for &h in holds {
        answers.push(p.commit(h).await);
    }
    answers
}

/// A resource manager taking part in planning and two-phase commit: a LIS
/// (`Participant<Compute>`) or the NIS (`Participant<Network>`).
#[async_trait]
pub trait Participant<R: Role>: HoldLifecycle {
    /// Answers an availability query; changes nothing.
    async fn query(&self, q: &R::Query) -> Result<R::Answer, ParticipantError>;
    /// Answers several availability queries in one message, in order (the planner's batched
    /// queries: every job a search step may still ask this participant about). The default
    /// asks them one by one; the HTTP transport sends one request.
    async fn query_all(&self, qs: &[R::Query]) -> Vec<Result<R::Answer, ParticipantError>> {
        let mut answers = Vec::with_capacity(qs.len());
        for q in qs {
            answers.push(self.query(q).await);
        }
        answers
    }
    /// Phase 1: check and set aside capacity atomically, with a lease.
    async fn prepare(&self, req: &R::Prepare) -> Result<Hold, ParticipantError>;
    /// Phase 1 for several holds of this participant in one message: the answer of each
    /// prepare, in the order of `reqs`, each as [`Participant::prepare`] answers it (checked
    /// and booked atomically on its own, under the participant's lock, in that order; a
    /// refusal leaves the other holds of the batch as they are). The default prepares them one
    /// after the other; the HTTP transport sends one request (`POST {base}/prepares`), and
    /// wrappers pass it on as one message.
    async fn prepare_all(&self, reqs: &[R::Prepare]) -> Vec<Result<Hold, ParticipantError>> {
        let mut answers = Vec::with_capacity(reqs.len());
        for r in reqs {
            answers.push(self.prepare(r).await);
        }
        answers
    }
    /// What this participant has booked over `window`, as its own availability queries see it
    /// (docs/algorithm.md, "Plans from snapshots"): a planner answers its queries from a local
    /// replica of it, and asks the participant again only to prepare. Advice, never a
    /// promise: nothing is set aside. `None`: this participant does not give snapshots (the
    /// default; a NIS with a data plane, whose markings and routed paths a replica cannot
    /// know), and the planner asks it as before.
    ///
    /// # Errors
    /// A transport's errors (the participant itself never refuses).
    async fn snapshot(&self, window: &SnapshotWindow) -> Result<Option<R::Snapshot>, ParticipantError> {
        let _ = window;
        Ok(None)
    }
    /// Phase 1 on behalf of the principal `owner` (the `user` of the token that asked): like
    /// [`Participant::prepare`], and the participant records `owner` with the hold, so that
    /// its HTTP endpoints can refuse phase 2 from anyone else. The default implementation (for
    /// transports and test doubles, which record nothing) is `prepare`.
    async fn prepare_for(&self, req: &R::Prepare, owner: &str) -> Result<Hold, ParticipantError> {
        let _ = owner;
        self.prepare(req).await
    }
    /// The committed reservations this participant can no longer honour: the resource
    /// behind it (a site's batch scheduler, later a data plane) lost or changed them. A
    /// planning process asks every participant now and then and marks the plans broken. The
    /// default (participants with nothing behind them) is none.
    async fn drift(&self) -> Result<Vec<Drift>, ParticipantError> {
        Ok(vec![])
    }
    /// The most each of `qs` could ever be granted by this participant's static capacity,
    /// whatever is booked, in order, in one message: for the NIS the bottleneck of the widest
    /// path between the two sites in Mbit/s (`u64::MAX` on one node, 0 when no path joins
    /// them). `None`: this participant does not say (the default, and the HTTP transport).
    /// What the planner's static check reads (a request that can never fit, issue 46).
    async fn ceilings(&self, qs: &[R::Query]) -> Option<Vec<u64>> {
        let _ = qs;
        None
    }
    /// The first of `qs`, in order, that this participant grants now, with its index and
    /// answer, in one message: `Some(None)` when it grants none of them. Answers as
    /// [`Self::query`] would, one query after the other, stopping at the first granted (for
    /// the NIS: a path). `None`: this participant does not say (the default, and the HTTP
    /// transport), and the planner asks them one by one. What a staged transfer that does not
    /// fit at its producer's end asks at the later starts it may slide to (issue 46).
    async fn first_granted(&self, qs: &[R::Query]) -> Option<Option<(usize, R::Answer)>> {
        let _ = qs;
        None
    }
}

/// A committed reservation that its participant can no longer honour (see
/// [`Participant::drift`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Drift {
    pub hold: HoldId,
    /// The reservation's name in the resource behind the participant (e.g. Slurm's).
    pub reservation: String,
    /// What happened, in an operator's words.
    pub reason: String,
}

/// The GIS's answer to "which sites can ever run this job?".
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Candidates {
    /// The sites that meet every requirement of the job, sorted by id.
    pub sites: Vec<SiteId>,
    /// When `sites` is empty: the site that came nearest, and the first requirement it fails
    /// (the one a rejection names). `None` when the catalogue has no site at all.
    pub nearest_miss: Option<(SiteId, Unmet)>,
    /// The CPUs of each site of `sites`, in order (what the planner's static check reads: a
    /// request whose jobs that must run together need more CPUs than their sites have can
    /// never fit). Empty when the catalogue does not say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<u32>,
}

/// The site catalogue (GIS) as the planner sees it.
#[async_trait]
pub trait Catalogue: Send + Sync {
    /// Candidate sites for a compute demand: the sites that can ever run it (OS, CPUs and
    /// every requirement of `demand.requires`, a hard filter before any policy).
    async fn candidates(&self, demand: &ComputeDemand) -> Result<Candidates, ParticipantError>;
    /// The candidates of several demands (a request's jobs), in order, in one message. The
    /// default asks them one by one; the HTTP transport sends one request.
    ///
    /// # Errors
    /// The first error of a demand, or the transport's.
    async fn candidates_all(&self, demands: &[ComputeDemand]) -> Result<Vec<Candidates>, ParticipantError> {
        let mut all = Vec::with_capacity(demands.len());
        for d in demands {
            all.push(self.candidates(d).await?);
        }
        Ok(all)
    }
}
