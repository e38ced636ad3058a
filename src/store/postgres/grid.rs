//! The grid: its topology (`topology`) and sites (`sites`), so a restart needs no `--grid`.

use async_trait::async_trait;
use sqlx::types::Json;

use crate::model::{Grid, Site};
use crate::store::{GridStore, StoreError};

use super::PgStore;

#[async_trait]
impl GridStore for PgStore {
    async fn save_grid(&self, grid: &Grid) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query!(
            "INSERT INTO topology (id, nodes, links) VALUES (1, $1, $2)
             ON CONFLICT (id) DO UPDATE SET nodes = EXCLUDED.nodes, links = EXCLUDED.links, updated_at = now()",
            Json(grid.nodes()) as _,
            Json(grid.links()) as _,
        )
        .execute(&mut *tx)
        .await?;
        sqlx::query!("DELETE FROM sites").execute(&mut *tx).await?;
        for site in grid.sites() {
            sqlx::query!("INSERT INTO sites (id, site) VALUES ($1, $2)", site.id.as_str(), Json(site) as _)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn load_grid(&self) -> Result<Option<Grid>, StoreError> {
        let Some(topology) =
            sqlx::query!("SELECT nodes, links FROM topology WHERE id = 1").fetch_optional(&self.pool).await?
        else {
            return Ok(None);
        };
        let sites: Vec<serde_json::Value> =
            sqlx::query_scalar!("SELECT site FROM sites ORDER BY seq").fetch_all(&self.pool).await?;
        // Through the grid's own validation, like a grid file.
        let grid = serde_json::from_value(
            serde_json::json!({ "nodes": topology.nodes, "links": topology.links, "sites": sites }),
        )
        .map_err(StoreError::InvalidGrid)?;
        Ok(Some(grid))
    }

    async fn save_site(&self, site: &Site) -> Result<(), StoreError> {
        sqlx::query!(
            "INSERT INTO sites (id, site) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET site = EXCLUDED.site, updated_at = now()",
            site.id.as_str(),
            Json(site) as _,
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
