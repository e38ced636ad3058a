//! Calendar snapshots (issue 53, docs/algorithm.md "Plans from snapshots"): what a LIS or the
//! NIS has booked over a window, as its own availability queries see it, so that a planner can
//! answer those queries itself from a local replica ([`crate::lis::Lis::replica`],
//! [`crate::nis::Nis::replica`]) and ask the participant again only to prepare.
//!
//! A snapshot is advice, never a promise: nothing is set aside by taking one, and every hold a
//! planner asks for afterwards is checked again by the participant under its lock, as any
//! prepare is. A snapshot names no hold and no owner: only how much is booked when.

use serde::{Deserialize, Serialize};

use crate::calendar::CapacityCalendar;
use crate::model::{Link, LinkId, NodeId, Site, SiteId, Time};

/// The window a snapshot covers, `[from, to)` in seconds since the epoch: the planner asks for
/// its request's first possible start up to its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotWindow {
    /// First instant covered (seconds since the epoch).
    pub from: Time,
    /// First instant after the window (seconds since the epoch).
    pub to: Time,
}

impl SnapshotWindow {
    /// Whether `[start, end)` lies inside the window: a query over it reads nothing of the
    /// calendar outside (see [`UsageStep`]).
    pub fn covers(&self, start: Time, end: Time) -> bool {
        self.from <= start && end <= self.to
    }
}

/// One step of a resource's usage function: `booked` units (CPUs, GPUs, Mbit/s) over
/// `[start, end)`. A resource's steps are sorted, do not overlap, and name every instant of the
/// window where something is booked; elsewhere in the window nothing is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageStep {
    /// Start, inclusive (seconds since the epoch).
    pub start: Time,
    /// End, exclusive (seconds since the epoch).
    pub end: Time,
    /// Units booked throughout (CPUs, GPUs or Mbit/s), > 0.
    pub booked: u64,
}

/// The usage of `calendar` over `window`, as maximal steps of constant, non-zero usage (holds
/// and reservations alike, clipped to the window; [`CapacityCalendar::usage_steps`]). Booked
/// again into an empty calendar of the same capacity, they give the same answer to every query
/// inside the window: the usage at every instant of it is the same (see
/// [`SnapshotWindow::covers`]).
pub fn usage_steps(calendar: &CapacityCalendar, window: SnapshotWindow) -> Vec<UsageStep> {
    calendar
        .usage_steps(window.from, window.to)
        .into_iter()
        .map(|s| UsageStep { start: s.start, end: s.end, booked: s.amount })
        .collect()
}

/// Books `steps` ([`usage_steps`]) into `calendar` (empty over their window).
///
/// # Errors
/// A step the calendar refuses (more than its capacity: the snapshot is not of a resource of
/// this size).
pub fn book_steps(calendar: &mut CapacityCalendar, steps: &[UsageStep]) -> Result<(), crate::calendar::CalendarError> {
    for s in steps {
        calendar.add(s.start, s.end, s.booked)?;
    }
    Ok(())
}

/// A LIS's calendars over a window ([`crate::protocol::Participant::snapshot`] of a
/// `Participant<Compute>`): what its free-slot search reads. At a site in front of Slurm this
/// includes what it blocked for Slurm's own reservations.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputeSnapshot {
    /// The site as its LIS has it now (prices, OS, GPU pools).
    pub site: Site,
    /// The window covered.
    pub window: SnapshotWindow,
    /// The site's CPUs booked (holds and reservations).
    pub cpus: Vec<UsageStep>,
    /// The GPUs booked of each pool, in the order of `site.attributes.gpus`.
    #[serde(default)]
    pub gpu_pools: Vec<Vec<UsageStep>>,
    /// What its offers carry as [`crate::protocol::ComputeOffer::reservation_prefix`] (a site in
    /// front of Slurm).
    pub reservation_prefix: Option<String>,
}

/// The NIS's topology and link calendars over a window ([`crate::protocol::Participant::snapshot`]
/// of a `Participant<Network>`): what its routing reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkSnapshot {
    /// The window covered.
    pub window: SnapshotWindow,
    /// Its routing, as `--routing` spells it (`shortest`, `widest:K`).
    pub routing: String,
    /// The topology's node ids, in the NIS's order (paths are searched in it).
    pub nodes: Vec<NodeId>,
    /// The links, in the NIS's order.
    pub links: Vec<Link>,
    /// Each site's node.
    pub site_nodes: Vec<(SiteId, NodeId)>,
    /// Mbit/s booked on each link with anything booked in the window (holds and reservations).
    pub links_booked: Vec<(LinkId, Vec<UsageStep>)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Booked again from its steps, a calendar answers every query inside the window as the
        /// original does.
        #[test]
        fn steps_rebuild_the_usage_inside_the_window(
            spans in proptest::collection::vec((0i64..200, 1i64..60, 1u64..5), 0..30),
            from in 0i64..150,
            len in 1i64..150,
        ) {
            let mut cal = CapacityCalendar::new(20);
            for (s, d, a) in spans {
                let _ = cal.add(s, s + d, a);
            }
            let window = SnapshotWindow { from, to: from + len };
            let steps = usage_steps(&cal, window);
            for w in steps.windows(2) {
                prop_assert!(w[0].end <= w[1].start, "sorted, apart: {steps:?}");
                prop_assert!(w[0].end < w[1].start || w[0].booked != w[1].booked, "maximal: {steps:?}");
            }
            let mut copy = CapacityCalendar::new(20);
            book_steps(&mut copy, &steps).unwrap();
            for t in window.from..window.to {
                prop_assert_eq!(copy.usage_at(t), cal.usage_at(t), "at {}", t);
                for d in 1..=(window.to - t).min(8) {
                    for n in [1, 5, 20] {
                        prop_assert_eq!(
                            copy.earliest_start(t, d, n, window.to),
                            cal.earliest_start(t, d, n, window.to)
                        );
                    }
                }
                prop_assert_eq!(copy.utilisation(t, window.to), cal.utilisation(t, window.to));
            }
        }
    }
}
