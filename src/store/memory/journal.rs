//! The participants' journal: the [`Journal`] of every hold's transitions, and the live holds
//! a participant's calendar is rebuilt from.

use async_trait::async_trait;

use crate::model::Time;
use crate::protocol::{HoldId, HoldState, Journal, JournalEntry, JournalError};
use crate::store::{HoldStore, StoreError, StoredHold};

use super::inner::{Life, Row};
use super::MemoryStore;

#[async_trait]
impl Journal for MemoryStore {
    async fn append(&self, entry: &JournalEntry) -> Result<(), JournalError> {
        let mut g = self.lock();
        match entry {
            JournalEntry::Held { participant, hold, request, expires_at, via_api, owner } => {
                if let Some(o) = owner {
                    g.owners.entry(*hold).or_insert_with(|| o.clone());
                }
                let stored = StoredHold {
                    participant: participant.clone(),
                    hold: *hold,
                    request: request.clone(),
                    state: HoldState::Held { expires_at: *expires_at },
                    via_api: *via_api,
                };
                g.holds.entry(*hold).or_insert(Row { hold: stored, life: Life::Live, plan: None });
            }
            JournalEntry::Committed { hold } => {
                if let Some(r) = g.holds.get_mut(hold).filter(|r| r.life != Life::Ended) {
                    r.hold.state = HoldState::Committed;
                    r.life = Life::Live;
                }
            }
            JournalEntry::Aborted { hold } | JournalEntry::Released { hold } => {
                if let Some(r) = g.holds.get_mut(hold) {
                    r.life = Life::Ended;
                }
            }
            JournalEntry::Extended { hold, expires_at } => {
                // As in PostgreSQL: the participant accepted it before the lease ended, so it
                // wins over the sweeper's expiry.
                if let Some(r) = g.holds.get_mut(hold).filter(|r| r.life != Life::Ended) {
                    if let HoldState::Held { .. } = r.hold.state {
                        r.hold.state = HoldState::Held { expires_at: *expires_at };
                        r.life = Life::Live;
                    }
                }
            }
        }
        Ok(())
    }
}

#[async_trait]
impl HoldStore for MemoryStore {
    async fn live_holds(&self, now: Time) -> Result<Vec<StoredHold>, StoreError> {
        let g = self.lock();
        Ok(g.holds
            .values()
            .filter(|r| {
                r.life == Life::Live
                    && match r.hold.state {
                        HoldState::Committed => true,
                        HoldState::Held { expires_at } => expires_at > now,
                    }
            })
            .map(|r| r.hold.clone())
            .collect())
    }

    async fn live_hold_owners(&self, now: Time) -> Result<Vec<(HoldId, String)>, StoreError> {
        let live = self.live_holds(now).await?;
        let g = self.lock();
        Ok(live.into_iter().filter_map(|h| g.owners.get(&h.hold).map(|o| (h.hold, o.clone()))).collect())
    }

    async fn expire_holds(&self, now: Time) -> Result<u64, StoreError> {
        let mut g = self.lock();
        let mut n = 0;
        for r in g.holds.values_mut() {
            if r.life == Life::Live && matches!(r.hold.state, HoldState::Held { expires_at } if expires_at <= now) {
                r.life = Life::Expired;
                n += 1;
            }
        }
        Ok(n)
    }
}
