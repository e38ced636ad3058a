//! The participants this process keeps, as the planners and the participant endpoints reach
//! them: journaled (every change durable in the store first) or tentative, and who may touch a
//! hold.

use std::sync::Arc;

use super::AppState;
use crate::api::auth::Caller;
use crate::api::config::Role;
use crate::api::problem::ApiError;
use crate::planner::ParticipantRef;
use crate::protocol::{Compute, HoldId, HoldLifecycle, Journal, Journaled, Network, Participant};

impl AppState {
    /// True in the all-in-one deployment: the planners' participants live in this process and
    /// share its fate (see [`crate::protocol::decision`]).
    pub fn shares_fate(&self) -> bool {
        self.config.role == Role::All
    }

    /// Does this process keep participant `who`?
    pub(super) fn keeps(&self, who: &ParticipantRef) -> bool {
        match (&self.config.role, who) {
            (Role::All, _) | (Role::Nis, ParticipantRef::Network) => true,
            (Role::Lis { site }, ParticipantRef::Site(s)) => site == s,
            _ => false,
        }
    }

    /// `inner` (the local participant `who`), journaled: every change it acknowledges is
    /// durable in the store first ([`Journaled`]). `via_api`: for the REST hold endpoints.
    /// With a `caller`, the holds it prepares are recorded and journaled as owned by
    /// `caller`'s hold principal ([`Caller::hold_principal`]: the deployment's planner
    /// principal for a planner credential, else its user; [`Journaled::owned_by`]).
    fn journal<T: ?Sized>(
        &self,
        inner: Arc<T>,
        who: ParticipantRef,
        via_api: bool,
        caller: Option<&Caller>,
    ) -> Journaled<T> {
        let journal: Arc<dyn Journal> = self.store.clone();
        let j = Journaled::new(inner, who, journal, via_api)
            .with_backlog(self.backlog.clone())
            .with_tentative(self.tentative.clone());
        match caller {
            Some(c) => j.owned_by(c.hold_principal()),
            None => j,
        }
    }

    /// The LIS of `site`, journaled (see `AppState::journal`); 404 if this process does not
    /// keep it.
    pub fn journaled_site(
        &self,
        site: &str,
        via_api: bool,
        caller: Option<&Caller>,
    ) -> Result<Arc<dyn Participant<Compute>>, ApiError> {
        let lis = self.lis(site)?.clone();
        Ok(Arc::new(self.journal(lis, ParticipantRef::Site(site.into()), via_api, caller)))
    }

    /// The LIS of `site` granting tentative holds ([`Journaled::tentative_prepares`]): the
    /// participant protocol's prepare for a coordinator that persists its holds before its
    /// decision. 404 if this process does not keep it.
    pub fn tentative_site(&self, site: &str, caller: &Caller) -> Result<Arc<dyn Participant<Compute>>, ApiError> {
        let lis = self.lis(site)?.clone();
        Ok(Arc::new(self.journal(lis, ParticipantRef::Site(site.into()), false, Some(caller)).tentative_prepares()))
    }

    /// The NIS of this process, or 404.
    fn nis(&self) -> Result<Arc<crate::nis::Nis>, ApiError> {
        if !self.keeps(&ParticipantRef::Network) {
            return Err(ApiError::not_found("this process does not serve the network"));
        }
        Ok(self.participants.nis.clone())
    }

    /// The NIS granting tentative holds (see [`AppState::tentative_site`]).
    pub fn tentative_network(&self, caller: &Caller) -> Result<Arc<dyn Participant<Network>>, ApiError> {
        let nis = self.nis()?;
        Ok(Arc::new(self.journal(nis, ParticipantRef::Network, false, Some(caller)).tentative_prepares()))
    }

    /// The NIS, journaled (see `AppState::journal`); 404 if this process does not keep it.
    pub fn journaled_network(
        &self,
        via_api: bool,
        caller: Option<&Caller>,
    ) -> Result<Arc<dyn Participant<Network>>, ApiError> {
        let nis = self.nis()?;
        Ok(Arc::new(self.journal(nis, ParticipantRef::Network, via_api, caller)))
    }

    /// Participant `who`'s phase 2 (commit, abort, release, extend), journaled; 404 if this
    /// process does not keep it.
    pub fn journaled_holds(
        &self,
        who: &ParticipantRef,
        via_api: bool,
        caller: Option<&Caller>,
    ) -> Result<Arc<dyn HoldLifecycle>, ApiError> {
        Ok(match who {
            ParticipantRef::Site(s) => self.journaled_site(s, via_api, caller)?,
            ParticipantRef::Network => self.journaled_network(via_api, caller)?,
        })
    }

    /// May `caller` `verb` (commit, abort, release, extend) hold `hold` of the local
    /// participant `who`? Checked before anything changes.
    ///
    /// - the principal that prepared the hold may; a hold prepared by a planner credential
    ///   belongs to the deployment's planner principal ([`crate::api::auth::PLANNERS`]) and every
    ///   planner credential may drive it (audited at `info`, target `audit`);
    /// - an admin may, and the override is logged (`tracing::warn!`, target `audit`);
    /// - a hold without a recorded owner was made by this process's own planners (all-in-one)
    ///   and only an admin may touch it from outside; in a participant-only process such a
    ///   hold was journaled before owners were recorded (migration 0004) and any service
    ///   principal may, as before;
    /// - an unknown hold is left to the participant, which answers for it (nothing changes).
    ///
    /// # Errors
    /// 403 for anyone else; 404 if this process does not keep `who`.
    pub fn authorize_hold(
        &self,
        caller: &Caller,
        who: &ParticipantRef,
        hold: HoldId,
        verb: &str,
    ) -> Result<(), ApiError> {
        let owner = match who {
            ParticipantRef::Site(s) => self.lis(s)?.owner(hold),
            ParticipantRef::Network if self.keeps(who) => self.participants.nis.owner(hold),
            ParticipantRef::Network => return Err(ApiError::not_found("this process does not serve the network")),
        };
        let Some(owner) = owner else { return Ok(()) };
        if let Some(o) = owner.as_deref().filter(|o| caller.owns_hold(o)) {
            if o != caller.user {
                // A planner drives a hold another planner prepared (recovery, compensation,
                // cancellation through another planner process): allowed, and audited.
                tracing::info!(target: "audit", principal = %caller.user, owner = o, %hold, participant = %who, verb,
                    "planner acts on a hold of the deployment's planners");
            }
            return Ok(());
        }
        let owner_name = owner.as_deref().unwrap_or("this broker's planners");
        if caller.admin {
            tracing::warn!(target: "audit", principal = %caller.user, owner = owner_name, %hold, participant = %who, verb,
                "admin acts on a hold of another principal");
            return Ok(());
        }
        if owner.is_none() && !self.shares_fate() {
            return Ok(()); // journaled before owners were recorded
        }
        tracing::warn!(target: "audit", principal = %caller.user, owner = owner_name, %hold, participant = %who, verb,
            "refused: hold of another principal");
        Err(ApiError::new(
            actix_web::http::StatusCode::FORBIDDEN,
            "hold-not-owned",
            "The hold belongs to another principal",
            format!("hold {hold} belongs to another principal; only it or an admin may {verb} it"),
        ))
    }
}
