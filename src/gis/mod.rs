//! GIS — Global Information Service: the site catalogue (Ando & Aida, section 2.3; docs/algorithm.md).
//!
//! Answers "which sites could ever run this compute demand?" so the planner knows which LIS to
//! ask. Matching is a hard filter applied before any selection policy (as in Saito & Hirotsu's
//! heterogeneous multi-cluster scheduler; docs/README.md): a site whose
//! OS differs, that has fewer CPUs than the demand, or that fails any of its `requires`
//! (architecture, extensions, GPUs, software with its dependencies, labels) is never a
//! candidate. The paper assumes
//! the GIS is never stale; here it is built from the grid and updated by [`Gis::upsert`].

use std::sync::RwLock;

use async_trait::async_trait;

use crate::model::{unmet, ComputeDemand, Site};
use crate::protocol::{Candidates, Catalogue, ParticipantError};

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

    /// The sites of `sites` that can run `demand` ([`unmet`] finds nothing), and otherwise the
    /// nearest miss: the site that failed latest in the order requirements are checked (ties:
    /// the first by id).
    pub fn select(sites: &[Site], demand: &ComputeDemand) -> Candidates {
        let mut out = Candidates::default();
        for s in sites {
            match unmet(s, demand) {
                None => {
                    out.sites.push(s.id.clone());
                    out.cpus.push(s.cpus);
                }
                Some(u) if out.sites.is_empty() => {
                    if out.nearest_miss.as_ref().is_none_or(|(_, best)| u.rank() > best.rank()) {
                        out.nearest_miss = Some((s.id.clone(), u));
                    }
                }
                Some(_) => {}
            }
        }
        if !out.sites.is_empty() {
            out.nearest_miss = None;
        }
        out
    }
}

#[async_trait]
impl Catalogue for Gis {
    async fn candidates(&self, demand: &ComputeDemand) -> Result<Candidates, ParticipantError> {
        Ok(Gis::select(&self.sites.read().expect("GIS lock"), demand))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::{Requirements, SiteAttributes, SiteId, Unmet};

    fn site(id: &str, os: &str, cpus: u32) -> Site {
        Site::new(id, "n", cpus, os, 1.0)
    }

    fn ids(c: &Candidates) -> Vec<SiteId> {
        c.sites.clone()
    }

    #[tokio::test]
    async fn filters_by_os_and_size() {
        let gis = Gis::new(vec![site("b", "Linux", 64), site("a", "linux", 128), site("c", "bsd", 512)]);
        let d = ComputeDemand::new("j", "LINUX", 100, 0, 60);
        assert_eq!(ids(&gis.candidates(&d).await.unwrap()), vec![SiteId::from("a")]);
        gis.upsert(site("b", "linux", 256));
        assert_eq!(ids(&gis.candidates(&d).await.unwrap()), vec![SiteId::from("a"), SiteId::from("b")]);
    }

    /// The filter is applied before any policy, and an unsatisfiable job names the nearest
    /// site's first unmet requirement.
    #[tokio::test]
    async fn requirements_filter_and_the_nearest_miss_is_named() {
        let avx = SiteAttributes { extensions: vec!["avx2".into()], ..Default::default() };
        let gis = Gis::new(vec![
            site("a", "bsd", 64),
            Site { attributes: avx.clone(), ..site("b", "linux", 64) },
            site("c", "linux", 64),
        ]);
        let mut d = ComputeDemand::new("j", "linux", 8, 0, 60);
        d.requires = Requirements { extensions: vec!["avx2".into()], ..Default::default() };
        let c = gis.candidates(&d).await.unwrap();
        assert_eq!((ids(&c), c.nearest_miss), (vec![SiteId::from("b")], None));
        d.requires.labels = vec!["ssd".into()];
        let c = gis.candidates(&d).await.unwrap();
        assert!(c.sites.is_empty());
        assert_eq!(c.nearest_miss, Some((SiteId::from("b"), Unmet::Label("ssd".into()))));
        assert!(Gis::new(vec![]).candidates(&d).await.unwrap().nearest_miss.is_none());
    }
}
