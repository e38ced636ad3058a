//! API tokens (`tokens`) and their principals (`principals`), and the listener of their
//! changes (`coreserve_tokens`) that keeps every process's token cache fresh.

use async_trait::async_trait;
use uuid::Uuid;

use crate::store::{StoreError, TokenRecord, TokenStore};

use super::PgStore;

#[async_trait]
impl TokenStore for PgStore {
    async fn insert_token(&self, token: TokenRecord) -> Result<(), StoreError> {
        sqlx::query!(
            // The principal of that name, made if new (DO UPDATE, not DO NOTHING: it returns
            // the row also when another statement has just made it).
            r#"WITH p AS (
                   INSERT INTO principals (name) VALUES ($3) ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
                   RETURNING id)
               INSERT INTO tokens (id, hash, "user", admin, service, planner, expires_at, principal)
               SELECT $1, $2, $3, $4, $5, $6, $7, p.id FROM p
               ON CONFLICT (hash) DO UPDATE SET "user" = EXCLUDED."user", admin = EXCLUDED.admin,
                   service = EXCLUDED.service, planner = EXCLUDED.planner, expires_at = EXCLUDED.expires_at,
                   principal = EXCLUDED.principal"#,
            token.id,
            token.hash,
            token.user,
            token.admin,
            token.service,
            token.planner,
            token.expires_at,
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        let token = sqlx::query_as!(
            TokenRecord,
            r#"SELECT id, hash, "user", principal, admin, service, planner, expires_at FROM tokens
               WHERE hash = $1 AND revoked_at IS NULL"#,
            hash
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(token)
    }

    async fn revoke_token(&self, id: Uuid) -> Result<Option<TokenRecord>, StoreError> {
        // The row's trigger (migrations/0007_principals.sql) notifies every process's cache.
        let token = sqlx::query_as!(
            TokenRecord,
            r#"UPDATE tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL
               RETURNING id, hash, "user", principal, admin, service, planner, expires_at"#,
            id
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(token)
    }

    async fn token_changes(&self) -> Result<Option<crate::store::TokenWatch>, StoreError> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let pool = self.pool.clone();
        let connect = move || {
            let pool = pool.clone();
            async move {
                let mut l = sqlx::postgres::PgListener::connect_with(&pool).await?;
                l.listen("coreserve_tokens").await?;
                Ok::<_, sqlx::Error>(l)
            }
        };
        let mut listener = connect().await?;
        let (tx, changed) = tokio::sync::mpsc::channel(1);
        let watching = std::sync::Arc::new(AtomicBool::new(true));
        let up = watching.clone();
        tokio::spawn(async move {
            loop {
                let got = tokio::select! {
                    // Nobody watches any more: end, and close the connection.
                    () = tx.closed() => return,
                    got = listener.try_recv() => got,
                };
                if let Ok(Some(_)) = got {
                    if let Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) = tx.try_send(()) {
                        return;
                    }
                    continue;
                }
                // The connection was lost: changes made meanwhile are missed. Cache nothing
                // until a fresh listener is up, then drop whatever was cached.
                up.store(false, Ordering::SeqCst);
                if let Err(e) = got {
                    tracing::warn!(error = %e, "token change listener failed");
                }
                listener = loop {
                    if tx.is_closed() {
                        return;
                    }
                    match connect().await {
                        Ok(l) => break l,
                        Err(e) => {
                            tracing::warn!(error = %e, "token change listener: cannot reconnect; retrying in 1 s");
                            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                        }
                    }
                };
                up.store(true, Ordering::SeqCst);
                if let Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) = tx.try_send(()) {
                    return;
                }
            }
        });
        Ok(Some(crate::store::TokenWatch { changed, watching }))
    }
}
