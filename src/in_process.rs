//! All participants in this process: one [`Gis`], one [`Lis`] per site and one [`Nis`], built
//! from a [`Grid`], sharing one clock. Used by `coreserve plan`, the tests and the benchmarks;
//! the service and the simulator wrap the same objects in other transports.

use std::collections::HashMap;
use std::sync::Arc;

use crate::clock::Clock;
use crate::gis::Gis;
use crate::lis::Lis;
use crate::model::{Grid, SiteId};
use crate::nis::{Nis, Routing};
use crate::planner::Services;
use crate::protocol::{Compute, Participant};

/// Default hold lease in seconds (OpenNSA's 120 s hold timeout; see docs/protocol.md).
pub const DEFAULT_LEASE_S: i64 = 120;

/// The participants of a grid, in process.
pub struct InProcessGrid {
    pub gis: Arc<Gis>,
    pub lis: HashMap<SiteId, Arc<Lis>>,
    pub nis: Arc<Nis>,
    pub clock: Arc<dyn Clock>,
}

impl InProcessGrid {
    /// Empty calendars for every site and link of `grid`; holds live `lease_s` of `clock` time.
    pub fn new(grid: &Grid, clock: Arc<dyn Clock>, lease_s: i64, routing: Routing) -> Self {
        InProcessGrid {
            gis: Arc::new(Gis::new(grid.sites().to_vec())),
            lis: grid
                .sites()
                .iter()
                .map(|s| (s.id.clone(), Arc::new(Lis::new(s.clone(), clock.clone(), lease_s))))
                .collect(),
            nis: Arc::new(Nis::new(grid, clock.clone(), lease_s, routing)),
            clock,
        }
    }

    /// The planner's view of these participants (direct calls, no transport).
    pub fn services(&self) -> Services {
        Services {
            gis: self.gis.clone(),
            lis: self.lis.iter().map(|(id, l)| (id.clone(), l.clone() as Arc<dyn Participant<Compute>>)).collect(),
            nis: self.nis.clone(),
            clock: self.clock.clone(),
        }
    }

    /// Forgets history that ended at or before `horizon` in every calendar; returns the spans
    /// pruned.
    pub fn prune_before(&self, horizon: crate::model::Time) -> usize {
        self.lis.values().map(|l| l.prune_before(horizon)).sum::<usize>() + self.nis.prune_before(horizon)
    }

    /// Live holds over every participant (0 once every plan is committed or rejected).
    pub fn holds_outstanding(&self) -> usize {
        self.lis.values().map(|l| l.holds_outstanding()).sum::<usize>() + self.nis.holds_outstanding()
    }
}
