//! Several resources on one timeline, queried and booked together: a site's CPUs and its GPU
//! pools. In the spirit of Flux Fluxion's `planner_multi`, which keeps one planner per named
//! resource type behind one earliest-time query: here one [`CapacityCalendar`] per resource,
//! and a demand names the resources it needs by a typed key ([`ResourceKey`]).

use std::marker::PhantomData;

use super::{CalendarError, CapacityCalendar, Span, SpanId};
use crate::model::Time;

/// The name of one resource of a [`MultiCalendar`]: a typed key per resource kind (the LIS's
/// CPUs or one GPU pool, `lis::SiteResource`; the NIS's links, by their index in the grid).
/// The key alone says where its calendar is: callers never count positions.
pub trait ResourceKey: Copy + Eq + std::fmt::Debug {
    /// Where this resource's calendar is among the others: `0..n` for `n` resources, each key
    /// its own.
    fn position(self) -> usize;
}

/// Resources known by their index alone (the NIS's links, in the grid's order).
impl ResourceKey for usize {
    fn position(self) -> usize {
        self
    }
}

/// What a booking needs of each resource it touches: `(resource, amount)`. Resources it does
/// not name it does not need.
pub type Demand<K> = [(K, u64)];

/// One calendar per resource, named by its key `K`. Every operation is all or nothing: on an
/// error no calendar changed.
#[derive(Debug, Clone)]
pub struct MultiCalendar<K> {
    calendars: Vec<CapacityCalendar>,
    key: PhantomData<K>,
}

impl<K: ResourceKey> MultiCalendar<K> {
    /// Empty calendars for these resources and capacities (units each: CPUs, GPUs, Mbit/s).
    ///
    /// # Panics
    /// If the keys' positions are not `0, 1, 2, ...` in order (each resource named once), and
    /// as [`CapacityCalendar::new`] for a capacity over [`crate::model::MAX_AMOUNT`].
    pub fn new(resources: impl IntoIterator<Item = (K, u64)>) -> Self {
        let calendars = resources
            .into_iter()
            .enumerate()
            .map(|(i, (key, capacity))| {
                assert_eq!(key.position(), i, "resource {key:?} named out of order");
                CapacityCalendar::new(capacity)
            })
            .collect();
        MultiCalendar { calendars, key: PhantomData }
    }

    /// Forgets every span, of every resource, that ended at or before `horizon`
    /// ([`CapacityCalendar::prune_before`]): the ids pruned, per resource.
    pub fn prune_before(&mut self, horizon: Time) -> Vec<Vec<SpanId>> {
        self.calendars.iter_mut().map(|c| c.prune_before(horizon)).collect()
    }

    /// The calendar of resource `r`.
    ///
    /// # Panics
    /// If this calendar has no resource `r`.
    pub fn get(&self, r: K) -> &CapacityCalendar {
        &self.calendars[r.position()]
    }

    /// The calendar of resource `r`, to change on its own (a span that concerns it alone).
    ///
    /// # Panics
    /// If this calendar has no resource `r`.
    pub fn get_mut(&mut self, r: K) -> &mut CapacityCalendar {
        &mut self.calendars[r.position()]
    }

    /// The earliest `t >= after` at which every resource of `demand` has its amount free over
    /// `[t, t + duration)`, with `t + duration <= latest_end`; `None` if there is none. Each
    /// resource's earliest start from the latest so far, until they all agree: every round moves
    /// `t` later or ends, so it ends (at most one round per busy period skipped, over all
    /// resources). An empty demand is free at once. O(k log n) per round for k resources.
    pub fn earliest_start(&self, after: Time, duration: i64, demand: &Demand<K>, latest_end: Time) -> Option<Time> {
        let mut t = after;
        loop {
            let mut agreed = true;
            for &(r, amount) in demand {
                let e = self.get(r).earliest_start(t, duration, amount, latest_end)?;
                if e != t {
                    agreed = false;
                    t = e;
                }
            }
            if agreed {
                return t.checked_add(duration).is_some_and(|e| e <= latest_end).then_some(t);
            }
        }
    }

    /// Books `[start, end)` for every resource of `demand`: the span ids in the order of
    /// `demand`.
    ///
    /// # Errors
    /// The index in `demand` of the first resource that refused, and its error
    /// ([`CapacityCalendar::add`]); what was booked before it is given back.
    pub fn add(&mut self, start: Time, end: Time, demand: &Demand<K>) -> Result<Vec<SpanId>, (usize, CalendarError)> {
        self.each(demand, |cal, amount| cal.add(start, end, amount).map(|id| vec![id]))
            .map(|ids| ids.into_iter().flatten().collect())
    }

    /// Grows booked spans to a new shape `[start, end)`, one `(resource, old span, new amount)`
    /// at a time ([`CapacityCalendar::add_growth`]): the growth spans of each, in the order of
    /// `grow`.
    ///
    /// # Errors
    /// As [`MultiCalendar::add`].
    pub fn add_growth(
        &mut self,
        start: Time,
        end: Time,
        grow: &[(K, SpanId, u64)],
    ) -> Result<Vec<Vec<SpanId>>, (usize, CalendarError)> {
        let demand: Vec<(K, u64)> = grow.iter().map(|&(r, _, amount)| (r, amount)).collect();
        let mut olds = grow.iter().map(|&(_, old, _)| old);
        self.each(&demand, |cal, amount| {
            let old = olds.next().expect("one old span per resource");
            cal.add_growth(old, Span { start, end, amount })
        })
    }

    /// Runs `book` on the calendar of every resource of `demand` in order; on the first error
    /// removes what the earlier ones booked.
    fn each(
        &mut self,
        demand: &Demand<K>,
        mut book: impl FnMut(&mut CapacityCalendar, u64) -> Result<Vec<SpanId>, CalendarError>,
    ) -> Result<Vec<Vec<SpanId>>, (usize, CalendarError)> {
        let mut booked: Vec<Vec<SpanId>> = Vec::with_capacity(demand.len());
        for (i, &(r, amount)) in demand.iter().enumerate() {
            match book(self.get_mut(r), amount) {
                Ok(ids) => booked.push(ids),
                Err(e) => {
                    for (&(r, _), ids) in demand.iter().zip(booked) {
                        for id in ids {
                            self.get_mut(r).remove(id).expect("just booked");
                        }
                    }
                    return Err((i, e));
                }
            }
        }
        Ok(booked)
    }
}
