//! GIS — Global Information Service: the site catalogue (Ando & Aida, section 2.3; docs/algorithm.md).
//!
//! Answers "which sites could ever run this compute demand?" so the planner knows which LIS to
//! ask. Matching is a hard filter applied before any selection policy (as in Saito & Hirotsu's
//! heterogeneous multi-cluster scheduler; docs/README.md): a site whose
//! OS differs or that has fewer CPUs than the demand is never a candidate. The paper assumes
//! the GIS is never stale; here it is built from the grid and updated by [`Gis::upsert`].

use std::sync::RwLock;

use async_trait::async_trait;

use crate::model::{ComputeDemand, Site, SiteId};
use crate::protocol::{Catalogue, ParticipantError};

/// The in-process catalogue.
#[derive(Debug, Default)]
pub struct Gis {
    sites: RwLock<Vec<Site>>,
}

impl Gis {
    /// A catalogue of `sites` (kept sorted by id, so candidate lists are deterministic).
    pub fn new(mut sites: Vec<Site>) -> Self {
        sites.sort_by(|a, b| a.id.cmp(&b.id));
        Gis { sites: RwLock::new(sites) }
    }

    /// Adds or replaces a site (a LIS refreshing its entry).
    pub fn upsert(&self, site: Site) {
        let mut sites = self.sites.write().expect("GIS lock");
        match sites.binary_search_by(|s| s.id.cmp(&site.id)) {
            Ok(i) => sites[i] = site,
            Err(i) => sites.insert(i, site),
        }
    }

    /// A copy of every site, sorted by id.
    pub fn sites(&self) -> Vec<Site> {
        self.sites.read().expect("GIS lock").clone()
    }

    /// True when `site` can ever run `demand`: same OS (case-insensitive), enough CPUs.
    pub fn matches(site: &Site, demand: &ComputeDemand) -> bool {
        site.os.eq_ignore_ascii_case(&demand.os) && site.cpus >= demand.cpus
    }
}

#[async_trait]
impl Catalogue for Gis {
    async fn candidates(&self, demand: &ComputeDemand) -> Result<Vec<SiteId>, ParticipantError> {
        let sites = self.sites.read().expect("GIS lock");
        Ok(sites.iter().filter(|s| Gis::matches(s, demand)).map(|s| s.id.clone()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(id: &str, os: &str, cpus: u32) -> Site {
        Site { id: id.into(), node: "n".into(), cpus, os: os.into(), price_per_cpu_hour: 1.0 }
    }

    #[tokio::test]
    async fn filters_by_os_and_size() {
        let gis = Gis::new(vec![site("b", "Linux", 64), site("a", "linux", 128), site("c", "bsd", 512)]);
        let d = ComputeDemand { name: "j".into(), os: "LINUX".into(), cpus: 100, offset_s: 0, duration_s: 60 };
        assert_eq!(gis.candidates(&d).await.unwrap(), vec!["a".to_string()]);
        gis.upsert(site("b", "linux", 256));
        assert_eq!(gis.candidates(&d).await.unwrap(), vec!["a".to_string(), "b".to_string()]);
    }
}
