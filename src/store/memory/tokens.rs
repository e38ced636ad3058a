//! API tokens and their principals.

use async_trait::async_trait;
use uuid::Uuid;

use crate::store::{StoreError, TokenRecord, TokenStore};

use super::MemoryStore;

#[async_trait]
impl TokenStore for MemoryStore {
    async fn insert_token(&self, mut token: TokenRecord) -> Result<(), StoreError> {
        let mut g = self.lock();
        if let Some(old) = g.tokens.get(&token.hash) {
            token.id = old.id;
        }
        if g.revoked.contains(&token.id) {
            return Ok(()); // stays revoked
        }
        token.principal = *g.principals.entry(token.user.clone()).or_insert_with(Uuid::new_v4);
        g.tokens.insert(token.hash.clone(), token);
        Ok(())
    }

    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        let g = self.lock();
        Ok(g.tokens.get(hash).filter(|t| !g.revoked.contains(&t.id)).cloned())
    }

    async fn revoke_token(&self, id: Uuid) -> Result<Option<TokenRecord>, StoreError> {
        let mut g = self.lock();
        let Some(t) = g.tokens.values().find(|t| t.id == id).cloned() else { return Ok(None) };
        Ok(g.revoked.insert(id).then_some(t))
    }
}
