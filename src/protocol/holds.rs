//! The hold book: the participant side of two-phase commit, shared by every LIS and the NIS.
//!
//! It records each hold's state and lease, and decides every transition; the owner keeps the
//! capacity (calendar spans) and frees the payload the book hands back.
//!
//! ```text
//!  prepare ──> Held ──commit──> Committed ──release──> Released
//!               │ └──abort──> Aborted
//!               └──lease expiry──> Expired
//! ```

use std::collections::{BTreeSet, HashMap};

use super::{Hold, HoldId, ParticipantError, TxnId};
use crate::model::Time;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Held { expires_at: Time },
    Committed,
    Aborted,
    Expired,
    Released,
}

/// The state of an active entry, as [`HoldBook::active`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldState {
    /// Capacity set aside until `expires_at`.
    Held { expires_at: Time },
    /// A reservation.
    Committed,
}

#[derive(Debug, Clone)]
struct Entry<P> {
    state: State,
    txn: TxnId,
    payload: P,
    /// The principal that prepared it (see [`HoldBook::owner`]).
    owner: Option<String>,
}

/// Holds and reservations of one participant, with payload `P` (what to free on release).
#[derive(Debug, Clone)]
pub struct HoldBook<P> {
    entries: HashMap<HoldId, Entry<P>>,
    expiry: BTreeSet<(Time, HoldId)>,
}

impl<P> Default for HoldBook<P> {
    fn default() -> Self {
        HoldBook { entries: HashMap::new(), expiry: BTreeSet::new() }
    }
}

impl<P: Clone> HoldBook<P> {
    /// Records a new hold that lives until `expires_at`.
    pub fn hold(&mut self, id: HoldId, txn: TxnId, payload: P, expires_at: Time) {
        self.entries.insert(id, Entry { state: State::Held { expires_at }, txn, payload, owner: None });
        self.expiry.insert((expires_at, id));
    }

    /// Records `owner` (a principal name: the `user` of the token that prepared the hold) as
    /// the owner of hold `id`; nothing happens for an unknown hold. Holds are made without an
    /// owner ([`HoldBook::hold`]); the participant sets it right after, under the same lock.
    pub fn set_owner(&mut self, id: HoldId, owner: Option<String>) {
        if let Some(e) = self.entries.get_mut(&id) {
            e.owner = owner;
        }
    }

    /// The owner of hold `id`: `None` when the hold is unknown (never made, or pruned),
    /// `Some(None)` when it has no recorded owner (made by the participant's own process, or
    /// journaled before owners were recorded), `Some(Some(principal))` otherwise.
    pub fn owner(&self, id: HoldId) -> Option<Option<&str>> {
        self.entries.get(&id).map(|e| e.owner.as_deref())
    }

    /// Expires every hold whose lease ended at or before `now`; returns their payloads, which
    /// the owner must free.
    pub fn expire(&mut self, now: Time) -> Vec<P> {
        let due: Vec<(Time, HoldId)> = self.expiry.range(..=(now, HoldId::max())).copied().collect();
        due.into_iter()
            .map(|key| {
                self.expiry.remove(&key);
                let e = self.entries.get_mut(&key.1).expect("expiry index points at an entry");
                e.state = State::Expired;
                e.payload.clone()
            })
            .collect()
    }

    /// Held -> Committed. Committing twice is fine.
    ///
    /// # Errors
    /// `UnknownHold`, `HoldExpired`, `Aborted`, or `AlreadyCommitted` after a release.
    pub fn commit(&mut self, id: HoldId) -> Result<(), ParticipantError> {
        let e = self.entries.get_mut(&id).ok_or(ParticipantError::UnknownHold(id))?;
        match e.state {
            State::Held { expires_at } => {
                self.expiry.remove(&(expires_at, id));
                e.state = State::Committed;
                Ok(())
            }
            State::Committed => Ok(()),
            State::Expired => Err(ParticipantError::HoldExpired(id)),
            State::Aborted => Err(ParticipantError::Aborted(id)),
            State::Released => Err(ParticipantError::NotCommitted(id)),
        }
    }

    /// Held -> Aborted; returns the payload to free when the hold was live. Aborting an
    /// aborted, expired or unknown hold changes nothing (a retried abort, or an abort for a
    /// prepare whose answer was lost).
    ///
    /// # Errors
    /// `AlreadyCommitted` when the hold was committed (use [`HoldBook::release`]).
    pub fn abort(&mut self, id: HoldId) -> Result<Option<P>, ParticipantError> {
        let Some(e) = self.entries.get_mut(&id) else { return Ok(None) };
        match e.state {
            State::Held { expires_at } => {
                self.expiry.remove(&(expires_at, id));
                e.state = State::Aborted;
                Ok(Some(e.payload.clone()))
            }
            State::Committed | State::Released => Err(ParticipantError::AlreadyCommitted(id)),
            State::Aborted | State::Expired => Ok(None),
        }
    }

    /// Committed -> Released; returns the payload to free. Releasing twice is fine.
    ///
    /// # Errors
    /// `UnknownHold`, or `NotCommitted` for a hold that never was.
    pub fn release(&mut self, id: HoldId) -> Result<Option<P>, ParticipantError> {
        let e = self.entries.get_mut(&id).ok_or(ParticipantError::UnknownHold(id))?;
        match e.state {
            State::Committed => {
                e.state = State::Released;
                Ok(Some(e.payload.clone()))
            }
            State::Released => Ok(None),
            _ => Err(ParticipantError::NotCommitted(id)),
        }
    }

    /// Drops every entry whose payload `pruned` says is gone (history the owner pruned);
    /// returns how many. A later message for such a hold gets `UnknownHold`.
    pub fn forget(&mut self, pruned: impl Fn(&P) -> bool) -> usize {
        let before = self.entries.len();
        let expiry = &mut self.expiry;
        self.entries.retain(|id, e| {
            let keep = !pruned(&e.payload);
            if !keep {
                if let State::Held { expires_at } = e.state {
                    expiry.remove(&(expires_at, *id));
                }
            }
            keep
        });
        before - self.entries.len()
    }

    /// Held -> Held with a new lease ending at `expires_at` (a coordinator that needs more time).
    /// Extending twice is fine; the new expiry replaces the old one, even if it is earlier.
    ///
    /// # Errors
    /// Like [`HoldBook::commit`]: `UnknownHold`, `HoldExpired`, `Aborted`; and
    /// `AlreadyCommitted` for a committed (or released) hold, which has no lease.
    pub fn extend(&mut self, id: HoldId, expires_at: Time) -> Result<(), ParticipantError> {
        let e = self.entries.get_mut(&id).ok_or(ParticipantError::UnknownHold(id))?;
        match e.state {
            State::Held { expires_at: old } => {
                self.expiry.remove(&(old, id));
                self.expiry.insert((expires_at, id));
                e.state = State::Held { expires_at };
                Ok(())
            }
            State::Committed | State::Released => Err(ParticipantError::AlreadyCommitted(id)),
            State::Expired => Err(ParticipantError::HoldExpired(id)),
            State::Aborted => Err(ParticipantError::Aborted(id)),
        }
    }

    /// Replaces the payload of hold `id` (a replacement hold's, at commit: its growth
    /// becomes the new reservation's spans); nothing happens for an unknown hold.
    pub fn set_payload(&mut self, id: HoldId, payload: P) {
        if let Some(e) = self.entries.get_mut(&id) {
            e.payload = payload;
        }
    }

    /// Re-records a hold read back from the participant journal at start, in `state`: a live
    /// hold with its journaled lease, or a reservation.
    pub fn restore(&mut self, id: HoldId, txn: TxnId, payload: P, state: HoldState) {
        match state {
            HoldState::Held { expires_at } => self.hold(id, txn, payload, expires_at),
            HoldState::Committed => {
                self.hold(id, txn, payload, Time::MAX);
                self.commit(id).expect("a hold just made commits");
            }
        }
    }

    /// [`HoldBook::extend`] with a lease of `lease_s` seconds from `now`: the participant's
    /// answer to an extend message.
    ///
    /// # Errors
    /// `Invalid` for `lease_s <= 0`, else those of [`HoldBook::extend`].
    pub fn extend_lease(&mut self, id: HoldId, now: Time, lease_s: i64) -> Result<Hold, ParticipantError> {
        if lease_s <= 0 {
            return Err(ParticipantError::Invalid(format!("lease_s must be > 0 (got {lease_s})")));
        }
        let expires_at = now.saturating_add(lease_s);
        self.extend(id, expires_at)?;
        Ok(Hold { id, expires_at })
    }

    /// Every live hold and committed reservation with its payload (call [`HoldBook::expire`]
    /// first so that no lapsed hold is listed). Order is unspecified.
    pub fn active(&self) -> impl Iterator<Item = (HoldId, HoldState, &P)> + '_ {
        self.entries.keys().filter_map(|id| self.get(*id).map(|(state, p)| (*id, state, p)))
    }

    /// One live hold or committed reservation with its payload (`None` for any other).
    pub fn get(&self, id: HoldId) -> Option<(HoldState, &P)> {
        let e = self.entries.get(&id)?;
        let state = match e.state {
            State::Held { expires_at } => HoldState::Held { expires_at },
            State::Committed => HoldState::Committed,
            _ => return None,
        };
        Some((state, &e.payload))
    }

    /// Number of live (uncommitted, unexpired) holds.
    pub fn outstanding(&self) -> usize {
        self.expiry.len()
    }

    /// Transaction of a hold, if known.
    pub fn txn(&self, id: HoldId) -> Option<TxnId> {
        self.entries.get(&id).map(|e| e.txn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_and_idempotence() {
        let mut b = HoldBook::default();
        let (h1, h2, h3, t) = (HoldId::new(), HoldId::new(), HoldId::new(), TxnId::new());
        b.hold(h1, t, 1, 100);
        b.hold(h2, t, 2, 50);
        b.hold(h3, t, 3, 200);
        assert_eq!(b.outstanding(), 3);
        assert_eq!(b.expire(50), vec![2]);
        assert_eq!(b.commit(h2), Err(ParticipantError::HoldExpired(h2)));
        assert_eq!(b.abort(h2), Ok(None), "aborting an expired hold frees nothing twice");
        b.commit(h1).unwrap();
        b.commit(h1).unwrap();
        assert_eq!(b.abort(h1), Err(ParticipantError::AlreadyCommitted(h1)));
        assert_eq!(b.abort(h3), Ok(Some(3)));
        assert_eq!(b.abort(h3), Ok(None));
        assert_eq!(b.commit(h3), Err(ParticipantError::Aborted(h3)));
        assert_eq!(b.expire(1_000), Vec::<i32>::new(), "committed and aborted holds never expire");
        assert_eq!(b.release(h1), Ok(Some(1)));
        assert_eq!(b.release(h1), Ok(None));
        assert_eq!(b.release(h3), Err(ParticipantError::NotCommitted(h3)));
        assert_eq!(b.outstanding(), 0);
        assert_eq!(b.commit(HoldId::nil()), Err(ParticipantError::UnknownHold(HoldId::nil())));
    }

    #[test]
    fn extend_moves_the_lease_and_fails_like_commit() {
        let mut b = HoldBook::default();
        let (h1, h2, h3, t) = (HoldId::new(), HoldId::new(), HoldId::new(), TxnId::new());
        b.hold(h1, t, 1, 100);
        b.hold(h2, t, 2, 100);
        b.hold(h3, t, 3, 100);
        b.extend(h1, 300).unwrap();
        b.extend(h1, 300).unwrap();
        b.abort(h3).unwrap();
        let mut expired = b.expire(100);
        expired.sort_unstable();
        assert_eq!(expired, vec![2], "the extended hold outlives its first lease");
        assert_eq!(b.extend(h2, 500), Err(ParticipantError::HoldExpired(h2)));
        assert_eq!(b.extend(h3, 500), Err(ParticipantError::Aborted(h3)));
        let active: Vec<_> = b.active().map(|(id, st, p)| (id, st, *p)).collect();
        assert_eq!(active, vec![(h1, HoldState::Held { expires_at: 300 }, 1)]);
        b.commit(h1).unwrap();
        assert_eq!(b.extend(h1, 500), Err(ParticipantError::AlreadyCommitted(h1)));
        assert_eq!(b.extend(HoldId::nil(), 5), Err(ParticipantError::UnknownHold(HoldId::nil())));
        assert_eq!(b.active().map(|(_, st, _)| st).collect::<Vec<_>>(), vec![HoldState::Committed]);
        assert_eq!(b.expire(1_000), Vec::<i32>::new());
    }

    #[test]
    fn owner_is_recorded_per_hold_and_outlives_commit() {
        let mut b = HoldBook::default();
        let (h1, h2, t) = (HoldId::new(), HoldId::new(), TxnId::new());
        b.hold(h1, t, 1, 100);
        b.hold(h2, t, 2, 100);
        b.set_owner(h1, Some("planner-a".into()));
        b.set_owner(HoldId::nil(), Some("nobody".into()));
        assert_eq!(b.owner(h1), Some(Some("planner-a")));
        assert_eq!(b.owner(h2), Some(None), "a hold made without an owner has none");
        assert_eq!(b.owner(HoldId::nil()), None, "unknown holds have no entry");
        b.commit(h1).unwrap();
        b.release(h1).unwrap();
        assert_eq!(b.owner(h1), Some(Some("planner-a")));
    }
}
