//! The participants' journal: the [`Journal`] of every hold's transitions, and the live holds
//! a participant's calendar is rebuilt from.

use std::collections::HashMap;

use async_trait::async_trait;

use crate::model::Time;
use crate::protocol::decision::PartHold;
use crate::protocol::{HoldId, HoldState, Journal, JournalEntry, JournalError, JournalState};
use crate::store::{HoldStore, StoreError, StoredHold};

use super::inner::{Inner, Life, Row};
use super::MemoryStore;

#[async_trait]
impl Journal for MemoryStore {
    async fn append(&self, entry: &JournalEntry) -> Result<(), JournalError> {
        self.append_all(std::slice::from_ref(entry)).await
    }

    /// All or none, as PostgreSQL's transaction: each entry is judged by
    /// [`JournalEntry::apply_to`] against its row as the earlier entries leave it, and written
    /// only if every one is legal.
    async fn append_all(&self, entries: &[JournalEntry]) -> Result<(), JournalError> {
        let mut g = self.lock();
        let mut states: HashMap<HoldId, Option<JournalState>> = HashMap::new();
        let mut writes = Vec::new();
        for e in entries {
            let prior = *states.entry(e.hold()).or_insert_with(|| g.holds.get(&e.hold()).map(Row::journal_state));
            if let Some(to) = e.apply_to(prior)? {
                states.insert(e.hold(), Some(to));
                writes.push((e, to));
            }
        }
        for (e, to) in writes {
            write(&mut g, e, to);
        }
        Ok(())
    }
}

/// Moves `entry`'s row to `to` (a legal transition: the row exists unless `entry` is `Held`).
fn write(g: &mut Inner, entry: &JournalEntry, to: JournalState) {
    if let JournalEntry::Held { participant, hold, request, expires_at, via_api, owner } = entry {
        if let Some(o) = owner {
            g.owners.entry(*hold).or_insert_with(|| o.clone());
        }
        let stored = StoredHold {
            part: PartHold { participant: participant.clone(), hold: *hold, request: request.clone() },
            state: HoldState::Held { expires_at: *expires_at },
            via_api: *via_api,
        };
        g.holds.insert(*hold, Row { hold: stored, life: Life::Live, plan: None });
        return;
    }
    let r = g.holds.get_mut(&entry.hold()).expect("a legal transition's row");
    match (entry, to) {
        (JournalEntry::Extended { expires_at, .. }, _) => {
            r.hold.state = HoldState::Held { expires_at: *expires_at };
            r.life = Life::Live;
        }
        (_, JournalState::Committed) => {
            r.hold.state = HoldState::Committed;
            r.life = Life::Live;
        }
        // Aborted or released: final.
        _ => r.life = Life::Ended,
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
        Ok(live.into_iter().filter_map(|h| g.owners.get(&h.part.hold).map(|o| (h.part.hold, o.clone()))).collect())
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
