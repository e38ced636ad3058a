//! The application state shared by every worker: participants, planners, store, holds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

use super::config::{Role, ServeConfig};
use super::metrics::Metrics;
use super::problem::ApiError;
use crate::clock::{Clock, SystemClock};
use crate::lis::Lis;
use crate::local::LocalGrid;
use crate::model::{from_time, to_time, Grid, Time};
use crate::planner::{ParticipantRef, Planner, PlannerConfig, Services};
use crate::protocol::http::{HttpCatalogue, HttpParticipant};
use crate::protocol::{HoldId, Participant};
use crate::store::Store;

/// Everything a handler may need (behind `web::Data`, i.e. an `Arc`).
pub struct AppState {
    pub config: ServeConfig,
    /// The topology as loaded (nodes and links do not change at run time).
    pub grid: Grid,
    /// GIS, every LIS, the NIS (a LIS process: its site only; a planner process: none used).
    pub participants: LocalGrid,
    pub planners: PlannerPool,
    pub store: Arc<dyn Store>,
    /// Holds made through the API (`POST /v1/sites/{id}/holds`, `POST /v1/network/holds`):
    /// hold id -> the participant that keeps it, for commit / abort / extend.
    pub holds: Mutex<HashMap<HoldId, ParticipantRef>>,
    pub metrics: Metrics,
}

impl AppState {
    /// Participants over `grid` on the wall clock, `config.planners` planners, `store`.
    ///
    /// By role: a LIS process keeps only its site's LIS (the grid is cut down to that site);
    /// a planner process's planners talk to the remote participants of
    /// [`Role::Planner`] over HTTP ([`crate::protocol::http`]) and its local participants
    /// are unused.
    pub fn new(config: ServeConfig, mut grid: Grid, store: Arc<dyn Store>) -> Self {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        if let Role::Lis { site } = &config.role {
            grid.sites.retain(|s| &s.id == site);
        }
        let participants = LocalGrid::new(&grid, clock.clone(), config.lease_s, config.routing);
        let services = match &config.role {
            Role::Planner(remote) => {
                let token = config.service_token.clone();
                Services {
                    gis: Arc::new(HttpCatalogue::new(&remote.gis, token.clone())),
                    lis: remote
                        .lis
                        .iter()
                        .map(|(site, url)| {
                            (
                                site.clone(),
                                Arc::new(HttpParticipant::site(url, site, token.clone())) as Arc<dyn Participant>,
                            )
                        })
                        .collect(),
                    nis: Arc::new(HttpParticipant::network(&remote.nis, token)),
                    clock,
                }
            }
            _ => participants.services(),
        };
        let planners = PlannerPool::new(&config, services);
        AppState {
            config,
            grid,
            participants,
            planners,
            store,
            holds: Mutex::new(HashMap::new()),
            metrics: Metrics::default(),
        }
    }

    /// Now, by the participants' clock.
    pub fn now(&self) -> Time {
        self.participants.clock.now()
    }

    /// Now as a timestamp.
    pub fn now_utc(&self) -> DateTime<Utc> {
        from_time(self.now())
    }

    /// 422 unless `t` lies within the configured horizon of now (either way).
    pub fn check_horizon(&self, what: &str, t: &DateTime<Utc>) -> Result<Time, ApiError> {
        let (t, now, h) = (to_time(t), self.now(), self.config.horizon_s());
        if (t - now).abs() > h {
            return Err(ApiError::invalid(format!(
                "{what} {} is more than {} days from now (--horizon-days)",
                from_time(t).to_rfc3339(),
                self.config.horizon_days
            )));
        }
        Ok(t)
    }

    /// The LIS of `site`, or 404.
    pub fn lis(&self, site: &str) -> Result<&Arc<Lis>, ApiError> {
        self.participants.lis.get(site).ok_or_else(|| ApiError::not_found(format!("unknown site `{site}`")))
    }
}

/// N planners over one set of participants; each request goes to the least busy one.
pub struct PlannerPool {
    planners: Vec<(Planner, AtomicUsize)>,
}

/// A planner lent to one request (its in-flight count drops when this does).
pub struct Lent<'a> {
    pool: &'a PlannerPool,
    i: usize,
}

impl std::ops::Deref for Lent<'_> {
    type Target = Planner;
    fn deref(&self) -> &Planner {
        &self.pool.planners[self.i].0
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        self.pool.planners[self.i].1.fetch_sub(1, Ordering::SeqCst);
    }
}

impl PlannerPool {
    fn new(config: &ServeConfig, services: Services) -> Self {
        let template = PlannerConfig {
            w_interval_s: config.w_interval_s,
            policy: config.policy,
            method: config.mode,
            ..PlannerConfig::default()
        };
        let planners = Planner::pool(config.planners.max(1), &template, &services, |_| rand::random())
            .into_iter()
            .map(|p| (p, AtomicUsize::new(0)))
            .collect();
        PlannerPool { planners }
    }

    /// The planner with the fewest requests in flight (ties: the first).
    pub fn lend(&self) -> Lent<'_> {
        let i = (0..self.planners.len())
            .min_by_key(|&i| self.planners[i].1.load(Ordering::SeqCst))
            .expect("the pool is never empty");
        self.planners[i].1.fetch_add(1, Ordering::SeqCst);
        Lent { pool: self, i }
    }

    pub fn len(&self) -> usize {
        self.planners.len()
    }

    pub fn is_empty(&self) -> bool {
        self.planners.is_empty()
    }
}
