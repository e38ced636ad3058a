//! The grid (topology and sites), projects, and the charges of plans to their allocations.

use async_trait::async_trait;
use uuid::Uuid;

use crate::fairshare::{Project, Usage};
use crate::model::{Grid, Site, Time};
use crate::store::{GridStore, ProjectStore, StoreError};

use super::MemoryStore;

#[async_trait]
impl GridStore for MemoryStore {
    async fn save_grid(&self, grid: &Grid) -> Result<(), StoreError> {
        self.lock().grid = Some(grid.clone());
        Ok(())
    }

    async fn load_grid(&self) -> Result<Option<Grid>, StoreError> {
        Ok(self.lock().grid.clone())
    }

    async fn save_site(&self, site: &Site) -> Result<(), StoreError> {
        let mut inner = self.lock();
        if let Some(g) = inner.grid.as_ref() {
            // The caller checked the site against the grid; a site the grid lacks is ignored,
            // like the PostgreSQL store's UPDATE of no row.
            if let Ok(updated) = g.with_site(site.clone()) {
                inner.grid = Some(updated);
            }
        }
        Ok(())
    }
}

#[async_trait]
impl ProjectStore for MemoryStore {
    async fn save_project(&self, project: &Project) -> Result<(), StoreError> {
        self.lock().projects.insert(project.id.clone(), project.clone());
        Ok(())
    }

    async fn projects(&self) -> Result<Vec<Project>, StoreError> {
        Ok(self.lock().projects.values().cloned().collect())
    }

    async fn live_charges(&self, since: Time) -> Result<Vec<(Uuid, String, Vec<Usage>)>, StoreError> {
        let g = self.lock();
        let live = g.charges.iter().filter(|(_, (_, u))| u.iter().any(|u| u.end > since));
        Ok(live.map(|(id, (p, u))| (*id, p.clone(), u.clone())).collect())
    }

    async fn charged(&self, project: &str, from: Time, to: Time) -> Result<Vec<Usage>, StoreError> {
        let g = self.lock();
        let live = g.charges.values().filter(|(p, _)| p == project).flat_map(|(_, u)| u.iter().copied());
        Ok(live.filter(|u| u.start < to && u.end > from).collect())
    }
}
