//! Projects (`projects`) and the charges of plans to their allocations (`allocation_charges`).

use async_trait::async_trait;
use sqlx::types::Json;
use uuid::Uuid;

use crate::fairshare::{Project, Usage};
use crate::model::{from_time, Time};
use crate::store::{ProjectStore, StoreError};

use super::PgStore;

#[async_trait]
impl ProjectStore for PgStore {
    async fn save_project(&self, project: &Project) -> Result<(), StoreError> {
        sqlx::query!(
            "INSERT INTO projects (id, project) VALUES ($1, $2)
             ON CONFLICT (id) DO UPDATE SET project = EXCLUDED.project, updated_at = now()",
            project.id.as_str(),
            Json(project) as _,
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn projects(&self) -> Result<Vec<Project>, StoreError> {
        let rows: Vec<serde_json::Value> =
            sqlx::query_scalar!("SELECT project FROM projects ORDER BY id").fetch_all(&self.pool).await?;
        rows.into_iter()
            .map(|v| serde_json::from_value(v).map_err(|e| StoreError::Corrupt(sqlx::Error::Decode(Box::new(e)))))
            .collect()
    }

    async fn live_charges(&self, since: Time) -> Result<Vec<(Uuid, String, Vec<Usage>)>, StoreError> {
        let rows = sqlx::query!(
            r#"SELECT plan_id, project, usage AS "usage!: Json<Vec<Usage>>" FROM allocation_charges
               WHERE released_at IS NULL AND last_end > $1"#,
            from_time(since),
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|r| (r.plan_id, r.project, r.usage.0)).collect())
    }

    async fn charged(&self, project: &str, from: Time, to: Time) -> Result<Vec<Usage>, StoreError> {
        let rows = sqlx::query_scalar!(
            r#"SELECT usage AS "usage!: Json<Vec<Usage>>" FROM allocation_charges
               WHERE project = $1 AND released_at IS NULL AND last_end > $2 AND first_start < $3"#,
            project,
            from_time(from),
            from_time(to),
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().flat_map(|j| j.0).filter(|u| u.start < to && u.end > from).collect())
    }
}
