//! What the service's background loops call: recovery at start and of in-doubt plans, the
//! Slurm and data-plane reconciliation, drift of reservations, claim renewal, the sweep of
//! expired holds and the pruning of history.

use std::sync::Arc;

use uuid::Uuid;

use super::AppState;
use crate::lis::Lis;
use crate::model::SiteId;
use crate::planner::{ParticipantRef, Recovery};
use crate::protocol::{HoldId, HoldRequest, Journal, Network, Participant, ParticipantError};
use crate::store::{StoreError, StoredHold};

/// Why start-up recovery ([`AppState::recover`]) refuses to let the process serve: the store
/// failed, or the journal does not fit this process's grid.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    /// The store did not answer or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A journaled hold names a site this process's grid does not have.
    #[error("the journal has hold {hold} at site `{site}`, which is not in the grid")]
    UnknownSite { hold: HoldId, site: SiteId },
    /// A journaled hold's request is of the other participant's kind.
    #[error("the journal has hold {hold} of {participant} with a request of the other kind")]
    WrongKind { hold: HoldId, participant: ParticipantRef },
    /// The participant refuses the journaled hold (it no longer fits its calendar, say).
    #[error("journaled hold {hold} of {participant} cannot be restored")]
    Unrestorable { hold: HoldId, participant: ParticipantRef, source: ParticipantError },
}

impl AppState {
    /// Start-up recovery, before the first request:
    /// 1. the participants of this process rebuild their calendars from the journal
    ///    (committed reservations, and holds whose lease still runs, with that lease);
    ///    holds whose lease ended while the process was down are marked expired;
    /// 2. the only planning process of its store (all-in-one) ends the claims of its previous
    ///    life at once (keys without a plan are freed, unfinished transactions become free);
    /// 3. a planning process runs a first recovery round ([`AppState::recover_in_doubt`]).
    ///
    /// # Errors
    /// The store fails, or the journal does not fit the grid (a reservation over capacity, an
    /// unknown link): the process must not serve on a calendar it cannot trust.
    pub async fn recover(&self) -> Result<(usize, Recovery), RecoveryError> {
        let now = self.now();
        self.store.expire_holds(now).await?;
        let mut restored = 0;
        for StoredHold { part: h, state, via_api } in self.store.live_holds(now).await? {
            if !self.keeps(&h.participant) {
                continue;
            }
            let r = match (&h.participant, &h.request) {
                (ParticipantRef::Site(s), HoldRequest::Compute(req)) => match self.participants.lis.get(s) {
                    Some(lis) => lis.restore(h.hold, req, state),
                    None => return Err(RecoveryError::UnknownSite { hold: h.hold, site: s.clone() }),
                },
                (ParticipantRef::Network, HoldRequest::Network(req)) => {
                    self.participants.nis.restore(h.hold, req, state)
                }
                (who, _) => return Err(RecoveryError::WrongKind { hold: h.hold, participant: who.clone() }),
            };
            r.map_err(|source| RecoveryError::Unrestorable {
                hold: h.hold,
                participant: h.participant.clone(),
                source,
            })?;
            if via_api {
                self.holds.lock().expect("hold registry").insert(h.hold, h.participant.clone());
            }
            restored += 1;
        }
        for (hold, owner) in self.store.live_hold_owners(now).await? {
            match self.participants.lis.values().find(|l| l.owner(hold).is_some()) {
                Some(lis) => lis.set_owner(hold, Some(owner)),
                None if self.keeps(&ParticipantRef::Network) => self.participants.nis.set_owner(hold, Some(owner)),
                None => {}
            }
        }
        if self.shares_fate() {
            self.store.end_all_claims().await?;
        }
        let report = if self.plans() { self.recover_in_doubt().await? } else { Recovery::default() };
        Ok((restored, report))
    }

    /// The LIS of this process that front Slurm.
    pub fn slurm_sites(&self) -> Vec<Arc<Lis>> {
        let mut v: Vec<Arc<Lis>> = self.participants.lis.values().filter(|l| l.slurm().is_some()).cloned().collect();
        v.sort_by_key(|l| l.site().id);
        v
    }

    /// One synchronisation of Slurm site `lis` ([`Lis::sync`]), counted in `/metrics` and
    /// logged when it fails.
    ///
    /// # Errors
    /// Slurm unreachable or unreadable.
    pub async fn sync_slurm(&self, lis: &Lis) -> Result<crate::lis::SyncReport, crate::lis::slurm::SlurmError> {
        let site = lis.site().id;
        let r = lis.sync().await;
        match &r {
            Ok(report) => self.metrics.slurm_synced(site.as_str(), Some(report), lis.drift().len()),
            Err(e) => {
                tracing::warn!(site = %site, error = %e, "synchronisation with Slurm failed");
                self.metrics.slurm_synced(site.as_str(), None, lis.drift().len());
            }
        }
        r
    }

    /// Marks broken the plans whose reservations a site can no longer honour: asks every LIS
    /// of this process's planners for its drift ([`Participant::drift`]) and writes, for each
    /// reservation newly reported, its job's reason into the plan and the plan `broken`.
    /// A LIS that does not answer is skipped until the next round. Returns the plans marked.
    ///
    /// # Errors
    /// The store fails.
    pub async fn watch_drift(&self) -> Result<usize, StoreError> {
        let planner = self.planners.lend();
        let mut marked = self.watch_network_drift(planner.services().nis.as_ref()).await?;
        for (site, lis) in &planner.services().lis {
            let drift = match lis.drift().await {
                Ok(d) => d,
                Err(e) => {
                    tracing::debug!(site = %site, error = %e, "drift not read");
                    continue;
                }
            };
            for d in drift {
                let Some(rec) = self.store.plan_of_hold(d.hold).await? else { continue };
                // A plan's bookings list its jobs first, in order.
                let Some(i) = rec.bookings.iter().position(|b| b.hold == d.hold) else { continue };
                let mut outcome = rec.outcome.clone();
                let Some(job) = outcome.jobs.get_mut(i).filter(|j| j.site == *site) else { continue };
                let reason = format!("reservation {}: {}", d.reservation, d.reason);
                if job.broken.as_deref() == Some(reason.as_str()) {
                    continue;
                }
                tracing::warn!(plan = %rec.id, user = %rec.user, job = %job.name, site = %site, %reason, "plan broken");
                job.broken = Some(reason);
                if self.store.mark_broken(rec.id, &outcome).await?.is_some() {
                    marked += 1;
                }
            }
        }
        Ok(marked)
    }

    /// [`AppState::watch_drift`] for the NIS: a transfer whose data-plane rules vanished marks
    /// its plan broken (the transfer's `broken`).
    async fn watch_network_drift(&self, nis: &dyn Participant<Network>) -> Result<usize, StoreError> {
        let drift = match nis.drift().await {
            Ok(d) => d,
            Err(e) => {
                tracing::debug!(error = %e, "network drift not read");
                return Ok(0);
            }
        };
        let mut marked = 0;
        for d in drift {
            let Some(rec) = self.store.plan_of_hold(d.hold).await? else { continue };
            // A plan's bookings list its jobs first, then its transfers, in order.
            let Some(i) = rec.bookings.iter().position(|b| b.hold == d.hold) else { continue };
            let mut outcome = rec.outcome.clone();
            let Some(t) = i.checked_sub(outcome.jobs.len()).and_then(|t| outcome.transfers.get_mut(t)) else {
                continue;
            };
            let reason = format!("{}: {}", d.reservation, d.reason);
            if t.broken.as_deref() == Some(reason.as_str()) {
                continue;
            }
            tracing::warn!(plan = %rec.id, user = %rec.user, %reason, "plan broken (network)");
            t.broken = Some(reason);
            if self.store.mark_broken(rec.id, &outcome).await?.is_some() {
                marked += 1;
            }
        }
        Ok(marked)
    }

    /// One reconciliation of the NIS's data plane, logged when it fails; see
    /// [`crate::nis::Nis::reconcile_dataplane`].
    ///
    /// # Errors
    /// An interface could not be read.
    pub async fn reconcile_dataplane(
        &self,
    ) -> Result<crate::nis::dataplane::ReconcileReport, crate::nis::dataplane::DataplaneError> {
        self.participants.nis.reconcile_dataplane().await
    }

    /// Renews every claim this process works on (the background loop calls it every quarter
    /// of [`crate::api::config::ServeConfig::claim_lease_s`]).
    pub async fn renew_claims(&self) -> Result<(), StoreError> {
        let claims: Vec<Uuid> = self.claims.lock().expect("claim registry").iter().copied().collect();
        if claims.is_empty() {
            return Ok(());
        }
        self.store.renew_claims(&claims, self.config.claim_lease_s).await
    }

    /// One recovery round: takes over the decided, unfinished transactions whose claim lapsed
    /// (their coordinator crashed, stalled, or gave up answering 503) and settles them
    /// ([`crate::planner::Planner::recover`]); what cannot be settled now lapses again for a
    /// later round.
    pub async fn recover_in_doubt(&self) -> Result<Recovery, StoreError> {
        let guard = self.claim();
        let in_doubt = self.store.take_in_doubt(&guard.claim, 64).await?;
        if in_doubt.is_empty() {
            return Ok(Recovery::default());
        }
        let log = crate::api::decision_log::StoreDecisionLog::new(
            self.store.as_ref(),
            self.shares_fate(),
            &guard.claim,
            None,
        );
        let report = self.planners.lend().recover(&in_doubt, &log).await;
        self.metrics.recovered(report.committed, report.compensated);
        Ok(report)
    }

    /// Lease expiry in the background: releases lapsed holds in memory and marks them
    /// expired in the store. Returns the holds marked.
    pub async fn sweep(&self) -> Result<u64, StoreError> {
        // First the journal entries a store outage made it miss (see protocol::Backlog).
        let journal: Arc<dyn Journal> = self.store.clone();
        match self.backlog.flush(journal.as_ref()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(entries = n, "journal backlog written"),
            Err(e) => tracing::warn!(error = %e, "journal backlog still waits"),
        }
        self.participants.holds_outstanding(); // expires in memory as a side effect
        self.tentative.prune(self.now());
        self.store.expire_holds(self.now()).await
    }

    /// Forgets, in memory, reservations that ended more than the horizon ago: no request can
    /// reach them (timestamps are refused beyond `--horizon-days`). The journal keeps them.
    /// Returns the spans pruned. O(spans): the sweeper calls it hourly.
    pub fn prune_history(&self) -> usize {
        self.participants.prune_before(self.now() - self.config.horizon_s())
    }
}
