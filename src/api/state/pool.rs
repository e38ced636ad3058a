//! The service's planners: N planners over one set of participants, each request lent to the
//! least busy one.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::api::config::{Role, ServeConfig};
use crate::planner::{Planner, PlannerConfig, Services};

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
    pub(super) fn new(config: &ServeConfig, services: Services) -> Self {
        let template = PlannerConfig {
            w_interval_s: config.w_interval_s,
            policy: config.policy,
            method: config.method,
            // Remote participants: a message costs far more than an answer (see planner::queries).
            batch_queries: matches!(config.role, Role::Planner(_)),
            batch_aborts: matches!(config.role, Role::Planner(_)),
            check_before_hold: true,
            hold_with_transfers: true,
            // Remote participants: BIR searches replicas of their calendars, a plan in a handful
            // of rounds (issue 53; docs/algorithm.md, "Plans from snapshots"). In process a round
            // costs nothing, and a snapshot would only add the copying.
            plan_from_snapshots: matches!(config.role, Role::Planner(_)),
            // A rejection says when the plan would fit, within the service's horizon.
            earliest_fit_horizon_s: Some(config.horizon_s()),
            // A request that can never fit on the grid is told apart before the search.
            static_check: true,
            ..PlannerConfig::default()
        };
        let planners = Planner::pool(
            config.planners.max(1),
            &template,
            &services,
            Planner::seeds_from(config.planner_seed.unwrap_or_else(rand::random)),
        )
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

    /// Planners in the pool.
    pub fn len(&self) -> usize {
        self.planners.len()
    }

    /// Never true: a pool has at least one planner.
    pub fn is_empty(&self) -> bool {
        self.planners.is_empty()
    }
}
