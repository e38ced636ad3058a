//! Capacity calendars: how much of one resource (CPUs of a site, Mbit/s of a link) is booked
//! at every instant, and the queries the planner needs over that step function.
//!
//! The index is in the spirit of Flux Fluxion's `planner` (docs/algorithm.md): instead of a list of
//! spans, a balanced search tree (a treap, module `tree`) keyed by the *change points* of the usage
//! step function. Each tree node holds the usage change at its instant; subtrees are augmented
//! with the sum of changes and the maximum / minimum running sum (prefix), so that
//! "usage at t", "peak usage over [t0, t1)", "first instant after t where usage rises above /
//! falls to a threshold" and "integral of usage" are all O(log n) descents. The earliest-start
//! query hops from blocking peak to the next point where enough is free, so its cost is
//! O(log n) per busy period skipped, not per span.
//!
//! [`MultiCalendar`] keeps several resources (a site's CPUs and GPU pools) behind one
//! earliest-start query and all-or-nothing bookings.

mod multi;
mod tree;

use crate::model::{rfc3339, Time, MAX_AMOUNT};
use tree::ChangeTree;

pub use multi::{Demand, MultiCalendar, ResourceKey};

/// Identifier of a booked span inside one calendar: entry index in the low 32 bits, the entry's
/// generation in the high 32 bits (so a removed span's id never names a later span).
pub type SpanId = u64;

/// One place of the calendar's span table: its span while booked, and how often it was reused.
#[derive(Debug, Clone)]
struct SpanEntry {
    generation: u32,
    span: Option<Span>,
}

/// A booked interval `[start, end)` holding `amount` units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: Time,
    pub end: Time,
    pub amount: u64,
}

/// Why a calendar refused an operation. Nothing changed when one of these is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalendarError {
    #[error("empty interval [{}, {})", rfc3339(.start), rfc3339(.end))]
    EmptyInterval { start: Time, end: Time },
    #[error("amount must be > 0")]
    ZeroAmount,
    #[error("over capacity: {requested} requested over [{}, {}) but only {free} free", rfc3339(.start), rfc3339(.end))]
    OverCapacity { start: Time, end: Time, requested: u64, free: u64 },
    #[error("unknown span {0}")]
    UnknownSpan(SpanId),
}

/// The booked capacity of one resource over time (see docs/model.md).
///
/// Invariant (checked by every [`add`](Self::add)): at every instant the sum of the amounts of
/// the spans covering it is <= `capacity`. Units are whatever the owner uses: CPUs for a site,
/// Mbit/s for a link.
#[derive(Debug, Clone)]
pub struct CapacityCalendar {
    capacity: u64,
    tree: ChangeTree,
    entries: Vec<SpanEntry>,
    free_entries: Vec<u32>,
    live: usize,
}

impl CapacityCalendar {
    /// An empty calendar for a resource of `capacity` units.
    ///
    /// # Panics
    /// If `capacity` exceeds [`MAX_AMOUNT`] (2^30 units: 1 Pbit/s in Mbit/s); [`crate::model::Grid`]
    /// refuses such resources before they get here.
    pub fn new(capacity: u64) -> Self {
        assert!(capacity <= MAX_AMOUNT, "capacity {capacity} above {MAX_AMOUNT}");
        CapacityCalendar {
            capacity,
            tree: ChangeTree::new(capacity ^ 0x9e37_79b9_7f4a_7c15),
            entries: Vec::new(),
            free_entries: Vec::new(),
            live: 0,
        }
    }

    fn entry(&self, id: SpanId) -> Option<&SpanEntry> {
        self.entries.get((id & 0xffff_ffff) as usize).filter(|s| u64::from(s.generation) == id >> 32)
    }

    /// Total units of the resource.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Number of spans currently booked.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when nothing is booked.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The span with this id, if booked.
    pub fn span(&self, id: SpanId) -> Option<Span> {
        self.entry(id).and_then(|s| s.span)
    }

    /// Booked units at instant `t`. O(log n).
    pub fn usage_at(&self, t: Time) -> u64 {
        self.tree.prefix(t) as u64
    }

    /// Peak booked units over `[t0, t1)`; 0 for an empty interval. O(log n).
    pub fn peak_usage(&self, t0: Time, t1: Time) -> u64 {
        if t1 <= t0 {
            return 0;
        }
        let inside = self.tree.range_max_prefix(t0 + 1, t1 - 1).unwrap_or(0);
        self.tree.prefix(t0).max(inside) as u64
    }

    /// Minimum free units over `[t0, t1)` (capacity minus the peak, not minus the sum).
    pub fn free_over(&self, t0: Time, t1: Time) -> u64 {
        self.capacity - self.peak_usage(t0, t1)
    }

    /// Earliest `t >= after` such that `amount` units are free over all of `[t, t + duration)`
    /// and `t + duration <= latest_end`; `None` when there is no such start.
    /// O(log n) per busy period skipped.
    pub fn earliest_start(&self, after: Time, duration: i64, amount: u64, latest_end: Time) -> Option<Time> {
        if amount > self.capacity || duration <= 0 {
            return None;
        }
        let threshold = (self.capacity - amount) as i64;
        let mut t = after;
        loop {
            if t.checked_add(duration)? > latest_end {
                return None;
            }
            if self.tree.prefix(t) > threshold {
                t = self.tree.first_at_most(t + 1, threshold)?;
                continue;
            }
            match self.tree.first_above(t + 1, threshold) {
                Some(p) if p < t + duration => t = self.tree.first_at_most(p + 1, threshold)?,
                _ => return Some(t),
            }
        }
    }

    /// The usage over `[t0, t1)` as maximal steps of constant, non-zero usage, in time order
    /// (each a [`Span`] whose `amount` is the usage there); nothing is booked at the instants
    /// of the interval they leave out. O(log n + k) for the k change points inside.
    pub fn usage_steps(&self, t0: Time, t1: Time) -> Vec<Span> {
        let mut steps: Vec<Span> = Vec::new();
        if t1 <= t0 {
            return steps;
        }
        let step = |steps: &mut Vec<Span>, start: Time, end: Time, usage: i64| {
            let amount = u64::try_from(usage).expect("usage is never negative");
            if amount == 0 || start >= end {
                return;
            }
            match steps.last_mut() {
                Some(last) if last.end == start && last.amount == amount => last.end = end,
                _ => steps.push(Span { start, end, amount }),
            }
        };
        let (mut at, mut usage) = (t0, self.tree.prefix(t0));
        for (t, delta) in self.tree.changes_between(t0, t1) {
            step(&mut steps, at, t, usage);
            (at, usage) = (t, usage + delta);
        }
        step(&mut steps, at, t1, usage);
        steps
    }

    /// Mean fraction of capacity booked over `[t0, t1)`, in `[0, 1]`. O(log n).
    pub fn utilisation(&self, t0: Time, t1: Time) -> f64 {
        if t1 <= t0 || self.capacity == 0 {
            return 0.0;
        }
        let integral = self.tree.integral_to(t1) - self.tree.integral_to(t0);
        integral as f64 / (self.capacity as f64 * (t1 - t0) as f64)
    }

    /// Books `amount` over `[start, end)` if it fits at every instant. O(log n).
    ///
    /// # Errors
    /// [`CalendarError::EmptyInterval`], [`CalendarError::ZeroAmount`], or
    /// [`CalendarError::OverCapacity`] with the free amount; the calendar is then unchanged.
    pub fn add(&mut self, start: Time, end: Time, amount: u64) -> Result<SpanId, CalendarError> {
        if end <= start {
            return Err(CalendarError::EmptyInterval { start, end });
        }
        if amount == 0 {
            return Err(CalendarError::ZeroAmount);
        }
        let free = self.free_over(start, end);
        if amount > free {
            return Err(CalendarError::OverCapacity { start, end, requested: amount, free });
        }
        self.tree.update(start, amount as i64);
        self.tree.update(end, -(amount as i64));
        let span = Some(Span { start, end, amount });
        let index = match self.free_entries.pop() {
            Some(i) => {
                self.entries[i as usize].span = span;
                i
            }
            None => {
                self.entries.push(SpanEntry { generation: 0, span });
                u32::try_from(self.entries.len() - 1).expect("fewer than 2^32 spans")
            }
        };
        self.live += 1;
        Ok(u64::from(self.entries[index as usize].generation) << 32 | u64::from(index))
    }

    /// Books up to `amount` over `[start, end)`: at every instant what is free there, at most
    /// `amount` (capacity already sold elsewhere, e.g. a site scheduler's own reservation, that
    /// may overlap what this calendar has booked). Returns the spans booked, one per stretch
    /// of equal amount; none where nothing is free. O(n) (it walks the spans overlapping).
    pub fn add_up_to(&mut self, start: Time, end: Time, amount: u64) -> Vec<SpanId> {
        if end <= start || amount == 0 {
            return vec![];
        }
        let mut points: Vec<Time> = self
            .spans()
            .flat_map(|(_, s)| [s.start, s.end])
            .filter(|&t| t > start && t < end)
            .chain([start, end])
            .collect();
        points.sort_unstable();
        points.dedup();
        // Stretches of equal bookable amount, merged.
        let mut stretches: Vec<(Time, Time, u64)> = Vec::new();
        for w in points.windows(2) {
            let n = amount.min(self.capacity.saturating_sub(self.usage_at(w[0])));
            match stretches.last_mut() {
                Some(last) if last.2 == n && last.1 == w[0] => last.1 = w[1],
                _ => stretches.push((w[0], w[1], n)),
            }
        }
        stretches
            .into_iter()
            .filter(|s| s.2 > 0)
            .map(|(a, b, n)| self.add(a, b, n).expect("what is free fits"))
            .collect()
    }

    /// Books what span `old` must grow by to become `new` (a reservation modified in place):
    /// at every instant, `max(0, new(t) - old(t))`, as the spans of [`growth`], all or none.
    /// It fits exactly when `new` would fit were `old` not booked, and while both are booked
    /// the calendar holds `max(old, new)` at every instant, so either can stay: removing the
    /// growth keeps `old` (abort); removing `old` and the growth, then adding `new`, always
    /// fits (commit). O(log n) per span.
    ///
    /// # Errors
    /// [`CalendarError::UnknownSpan`] if `old` is not booked; [`CalendarError::EmptyInterval`]
    /// or [`CalendarError::ZeroAmount`] for an invalid `new`; [`CalendarError::OverCapacity`]
    /// for the first growth span that does not fit. The calendar is then unchanged.
    pub fn add_growth(&mut self, old: SpanId, new: Span) -> Result<Vec<SpanId>, CalendarError> {
        let old = self.span(old).ok_or(CalendarError::UnknownSpan(old))?;
        if new.end <= new.start {
            return Err(CalendarError::EmptyInterval { start: new.start, end: new.end });
        }
        if new.amount == 0 {
            return Err(CalendarError::ZeroAmount);
        }
        let mut booked = Vec::new();
        for g in growth(old, new) {
            match self.add(g.start, g.end, g.amount) {
                Ok(id) => booked.push(id),
                Err(e) => {
                    for id in booked {
                        self.remove(id).expect("just booked");
                    }
                    return Err(e);
                }
            }
        }
        Ok(booked)
    }

    /// Releases a span. O(log n).
    ///
    /// # Errors
    /// [`CalendarError::UnknownSpan`] if `id` is not booked (already removed or pruned).
    pub fn remove(&mut self, id: SpanId) -> Result<Span, CalendarError> {
        let span = self.span(id).ok_or(CalendarError::UnknownSpan(id))?;
        let index = (id & 0xffff_ffff) as u32;
        let entry = &mut self.entries[index as usize];
        entry.span = None;
        entry.generation = entry.generation.wrapping_add(1);
        self.free_entries.push(index);
        self.live -= 1;
        self.tree.update(span.start, -(span.amount as i64));
        self.tree.update(span.end, span.amount as i64);
        Ok(span)
    }

    /// Forgets every span that ended at or before `horizon` (history no query can reach).
    /// Returns the ids pruned. O(n): run it now and then, not per request.
    pub fn prune_before(&mut self, horizon: Time) -> Vec<SpanId> {
        let done: Vec<SpanId> = self.spans().filter(|(_, s)| s.end <= horizon).map(|(id, _)| id).collect();
        for id in &done {
            self.remove(*id).expect("listed span is booked");
        }
        done
    }

    /// Every booked span with its id, in entry order. O(n): for listings and pruning.
    pub fn spans(&self) -> impl Iterator<Item = (SpanId, Span)> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, entry)| entry.span.map(|s| (u64::from(entry.generation) << 32 | i as u64, s)))
    }
}

/// What `new` needs beyond `old` at every instant, `max(0, new(t) - old(t))`, as at most
/// three spans: the parts of `new` before and after `old`, and the overlap's extra amount.
pub fn growth(old: Span, new: Span) -> Vec<Span> {
    let (lo, hi) = (old.start.max(new.start), old.end.min(new.end));
    let mut out = Vec::with_capacity(3);
    if new.start < old.start {
        out.push(Span { start: new.start, end: new.end.min(old.start), amount: new.amount });
    }
    if lo < hi && new.amount > old.amount {
        out.push(Span { start: lo, end: hi, amount: new.amount - old.amount });
    }
    if new.end > old.end {
        out.push(Span { start: new.start.max(old.end), end: new.end, amount: new.amount });
    }
    out
}

#[cfg(test)]
mod tests;
