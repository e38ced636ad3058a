//! Idempotency keys and the claims (leases) by which one caller at a time works on a key or an
//! in-doubt transaction.

use async_trait::async_trait;
use std::time::Instant;
use uuid::Uuid;

use crate::store::{Claim, KeyClaim, KeyStore, StoreError};

use super::inner::{lease, Inner, KeyRow};
use super::MemoryStore;

/// Binds `(owner, key)`, still held by `claim`, to `plan`.
pub(super) fn complete_key(
    g: &mut Inner,
    owner: Uuid,
    key: &str,
    print: &str,
    claim: &Claim,
    plan: Uuid,
) -> Result<(), StoreError> {
    match g.keys.get_mut(&(owner, key.to_owned())) {
        Some(row) if row.claim == claim.id && row.done.is_none() => {
            row.done = Some((plan, print.to_owned()));
            Ok(())
        }
        _ => Err(StoreError::Superseded),
    }
}

#[async_trait]
impl KeyStore for MemoryStore {
    async fn claim_key(&self, owner: Uuid, key: &str, claim: &Claim) -> Result<KeyClaim, StoreError> {
        let mut g = self.lock();
        let fresh = KeyRow { claim: claim.id, lease_until: lease(claim.lease_s), done: None };
        Ok(match g.keys.get_mut(&(owner, key.to_owned())) {
            None => {
                g.keys.insert((owner, key.to_owned()), fresh);
                KeyClaim::Claimed
            }
            Some(row) => match &row.done {
                Some((plan, fingerprint)) => KeyClaim::Done { plan: *plan, fingerprint: fingerprint.clone() },
                None if row.lease_until < Instant::now() => {
                    *row = fresh;
                    KeyClaim::Claimed
                }
                None => KeyClaim::InProgress,
            },
        })
    }

    async fn release_key(&self, owner: Uuid, key: &str, claim: &Claim) -> Result<(), StoreError> {
        let mut g = self.lock();
        let k = (owner, key.to_owned());
        if g.keys.get(&k).is_some_and(|r| r.done.is_none() && r.claim == claim.id) {
            g.keys.remove(&k);
        }
        Ok(())
    }

    async fn renew_claims(&self, claims: &[Uuid], lease_s: i64) -> Result<(), StoreError> {
        let mut g = self.lock();
        let until = lease(lease_s);
        for r in g.keys.values_mut().filter(|r| r.done.is_none() && claims.contains(&r.claim)) {
            r.lease_until = until;
        }
        for t in g.txns.values_mut().filter(|t| t.doubt.is_some() && claims.contains(&t.claim)) {
            t.lease_until = until;
        }
        Ok(())
    }

    async fn end_all_claims(&self) -> Result<u64, StoreError> {
        let mut g = self.lock();
        let now = Instant::now();
        for t in g.txns.values_mut().filter(|t| t.doubt.is_some()) {
            t.lease_until = now;
        }
        let before = g.keys.len();
        g.keys.retain(|_, r| r.done.is_some());
        Ok((before - g.keys.len()) as u64)
    }
}
