//! Unit and property tests of the calendar against a naive span list.

use proptest::prelude::*;

use super::*;

/// The obvious model: a list of spans, every query a scan.
#[derive(Default, Clone)]
struct Naive {
    capacity: u64,
    spans: Vec<(SpanId, Span)>,
}

impl Naive {
    fn usage_at(&self, t: Time) -> u64 {
        self.spans.iter().filter(|(_, s)| s.start <= t && t < s.end).map(|(_, s)| s.amount).sum()
    }
    fn peak(&self, t0: Time, t1: Time) -> u64 {
        (t0..t1).map(|t| self.usage_at(t)).max().unwrap_or(0)
    }
    fn earliest(&self, after: Time, d: i64, amount: u64, latest_end: Time) -> Option<Time> {
        (after..=latest_end - d).find(|&t| self.peak(t, t + d) + amount <= self.capacity)
    }
    fn integral(&self, t0: Time, t1: Time) -> u64 {
        (t0..t1).map(|t| self.usage_at(t)).sum()
    }
}

#[test]
fn peak_not_sum_decides_free_capacity() {
    let mut c = CapacityCalendar::new(10);
    c.add(0, 10, 6).unwrap();
    c.add(10, 20, 6).unwrap();
    // Two disjoint bookings of 6: the peak over [0, 20) is 6, so 4 are free, not -2.
    assert_eq!(c.free_over(0, 20), 4);
    assert!(c.add(5, 15, 4).is_ok());
    assert_eq!(c.add(5, 15, 1), Err(CalendarError::OverCapacity { start: 5, end: 15, requested: 1, free: 0 }));
    assert_eq!(c.len(), 3, "a refused add changes nothing");
}

#[test]
fn earliest_start_skips_busy_periods_and_respects_latest_end() {
    let mut c = CapacityCalendar::new(8);
    c.add(10, 20, 8).unwrap();
    c.add(25, 30, 5).unwrap();
    assert_eq!(c.earliest_start(0, 10, 8, 100), Some(0));
    assert_eq!(c.earliest_start(5, 10, 8, 100), Some(30));
    assert_eq!(c.earliest_start(5, 10, 3, 100), Some(20));
    assert_eq!(c.earliest_start(5, 10, 3, 29), None);
    assert_eq!(c.earliest_start(0, 1, 9, 100), None, "more than capacity never fits");
}

#[test]
fn remove_restores_and_prune_forgets_history() {
    let mut c = CapacityCalendar::new(4);
    let a = c.add(0, 10, 4).unwrap();
    let b = c.add(20, 30, 4).unwrap();
    assert_eq!(c.free_over(0, 30), 0);
    assert_eq!(c.remove(a).unwrap().amount, 4);
    assert_eq!(c.remove(a), Err(CalendarError::UnknownSpan(a)));
    assert_eq!(c.free_over(0, 15), 4);
    let a2 = c.add(0, 5, 1).unwrap();
    assert_ne!(a2, a, "a reused slot gets a new id");
    assert_eq!(c.remove(a), Err(CalendarError::UnknownSpan(a)), "the old id never names the new span");
    assert_eq!(c.prune_before(30), vec![a2, b]);
    assert!(c.span(b).is_none());
    assert_eq!(c.tree.len(), 0, "change points of pruned spans are gone");
}

#[test]
fn utilisation_is_the_mean_booked_fraction() {
    let mut c = CapacityCalendar::new(10);
    c.add(0, 50, 5).unwrap();
    assert!((c.utilisation(0, 100) - 0.25).abs() < 1e-12);
    assert!((c.utilisation(0, 50) - 0.5).abs() < 1e-12);
    assert_eq!(c.utilisation(60, 100), 0.0);
}

#[test]
fn invalid_adds_are_refused() {
    let mut c = CapacityCalendar::new(4);
    assert_eq!(c.add(5, 5, 1), Err(CalendarError::EmptyInterval { start: 5, end: 5 }));
    assert_eq!(c.add(0, 5, 0), Err(CalendarError::ZeroAmount));
    assert!(c.is_empty());
}

#[derive(Debug, Clone)]
enum Op {
    Add(Time, i64, u64),
    Remove(usize),
    Prune(Time),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0i64..80, 1i64..30, 1u64..12).prop_map(|(s, d, a)| Op::Add(s, d, a)),
        3 => (0usize..64).prop_map(Op::Remove),
        1 => (0i64..60).prop_map(Op::Prune),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every query agrees with the naive scan after any sequence of adds, removes and prunes,
    /// and no instant is ever over capacity.
    #[test]
    fn matches_naive_model(ops in prop::collection::vec(op(), 1..60),
                           queries in prop::collection::vec((0i64..110, 1i64..40, 1u64..14), 1..12)) {
        let capacity = 12;
        let mut cal = CapacityCalendar::new(capacity);
        let mut naive = Naive { capacity, ..Default::default() };
        for op in ops {
            match op {
                Op::Add(s, d, a) => {
                    let fits = naive.peak(s, s + d) + a <= capacity;
                    let r = cal.add(s, s + d, a);
                    prop_assert_eq!(r.is_ok(), fits);
                    if let Ok(id) = r { naive.spans.push((id, Span { start: s, end: s + d, amount: a })); }
                }
                Op::Remove(k) => if !naive.spans.is_empty() {
                    let (id, span) = naive.spans.remove(k % naive.spans.len());
                    prop_assert_eq!(cal.remove(id), Ok(span));
                }
                Op::Prune(h) => {
                    let before = naive.spans.len();
                    naive.spans.retain(|(_, s)| s.end > h);
                    prop_assert_eq!(cal.prune_before(h).len(), before - naive.spans.len());
                }
            }
            for t in 0..120 {
                prop_assert!(naive.usage_at(t) <= capacity);
                prop_assert_eq!(cal.usage_at(t), naive.usage_at(t));
            }
        }
        for (t, d, a) in queries {
            prop_assert_eq!(cal.peak_usage(t, t + d), naive.peak(t, t + d));
            prop_assert_eq!(cal.free_over(t, t + d), capacity - naive.peak(t, t + d));
            prop_assert_eq!(cal.earliest_start(t, d, a, 130), naive.earliest(t, d, a, 130));
            let u = cal.utilisation(t, t + d);
            let expect = naive.integral(t, t + d) as f64 / (capacity * d as u64) as f64;
            prop_assert!((u - expect).abs() < 1e-9, "utilisation {} vs {}", u, expect);
        }
        prop_assert_eq!(cal.len(), naive.spans.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `add_up_to` (capacity sold elsewhere, e.g. a Slurm site's own reservations) books, at
    /// every instant of its interval, exactly `min(amount, free there)` and nothing outside it;
    /// removing what it booked restores the calendar.
    #[test]
    fn add_up_to_books_what_is_free_at_each_instant(
        spans in prop::collection::vec((0i64..100, 1i64..40, 1u64..=16), 0..20),
        (start, len, amount) in (0i64..100, 1i64..60, 1u64..=20),
    ) {
        let capacity = 16;
        let mut cal = CapacityCalendar::new(capacity);
        for (s, d, a) in spans {
            let _ = cal.add(s, s + d, a);
        }
        let before: Vec<u64> = (0..170).map(|t| cal.usage_at(t)).collect();
        let ids = cal.add_up_to(start, start + len, amount);
        for t in 0..170i64 {
            let was = before[t as usize];
            let want = if t >= start && t < start + len { was + amount.min(capacity - was) } else { was };
            prop_assert_eq!(cal.usage_at(t), want, "at {}", t);
        }
        for id in ids {
            cal.remove(id).unwrap();
        }
        for t in 0..170i64 {
            prop_assert_eq!(cal.usage_at(t), before[t as usize]);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// `add_growth` (a reservation modified in place): it fits exactly when the new span would
    /// fit without the old one; while both are booked every instant holds the old usage plus
    /// `max(0, new - old)`, so never more than the capacity; abort (remove the growth) restores
    /// the calendar; commit (remove old and growth, add new) always fits.
    #[test]
    fn a_span_grows_in_place_exactly_when_the_new_one_fits_without_it(
        spans in prop::collection::vec((0i64..100, 1i64..40, 1u64..=16), 0..20),
        (os, ol, oa) in (0i64..100, 1i64..40, 1u64..=16),
        (ns, nl, na) in (0i64..100, 1i64..60, 1u64..=16),
    ) {
        let capacity = 16;
        let mut cal = CapacityCalendar::new(capacity);
        for (s, d, a) in spans {
            let _ = cal.add(s, s + d, a);
        }
        let Ok(old) = cal.add(os, os + ol, oa) else { return Ok(()) };
        let new = Span { start: ns, end: ns + nl, amount: na };
        let before: Vec<u64> = (0..170).map(|t| cal.usage_at(t)).collect();
        let fits_alone = {
            let mut c = cal.clone();
            c.remove(old).unwrap();
            c.add(new.start, new.end, new.amount).is_ok()
        };
        match cal.add_growth(old, new) {
            Err(_) => {
                prop_assert!(!fits_alone, "refused although the new span fits without the old");
                for t in 0..170i64 {
                    prop_assert_eq!(cal.usage_at(t), before[t as usize], "a refusal changes nothing");
                }
            }
            Ok(grown) => {
                prop_assert!(fits_alone, "granted although the new span does not fit without the old");
                let amount = |s: &Span, t: i64| if s.start <= t && t < s.end { s.amount } else { 0 };
                let old_span = Span { start: os, end: os + ol, amount: oa };
                for t in 0..170i64 {
                    let extra = amount(&new, t).saturating_sub(amount(&old_span, t));
                    prop_assert_eq!(cal.usage_at(t), before[t as usize] + extra, "at {}", t);
                    prop_assert!(cal.usage_at(t) <= capacity);
                }
                let mut committed = cal.clone();
                committed.remove(old).unwrap();
                for id in &grown {
                    committed.remove(*id).unwrap();
                }
                prop_assert!(committed.add(new.start, new.end, new.amount).is_ok(), "commit always fits");
                for id in grown {
                    cal.remove(id).unwrap();
                }
                for t in 0..170i64 {
                    prop_assert_eq!(cal.usage_at(t), before[t as usize], "abort restores");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A multi-resource calendar (CPUs and a GPU pool): its earliest start is the first instant
    /// at which every resource of the demand fits (a scan of the naive models), a booking is
    /// made in every calendar or in none, and no resource is ever over capacity.
    #[test]
    fn multi_calendar_matches_the_naive_scan_and_books_all_or_nothing(
        books in prop::collection::vec((0i64..100, 1i64..30, 0u64..10, 0u64..6), 1..40),
        queries in prop::collection::vec((0i64..110, 1i64..40, 0u64..10, 0u64..6), 1..12),
    ) {
        let capacities = [8u64, 4];
        let mut multi = MultiCalendar::new(capacities.into_iter().enumerate());
        let mut naive: Vec<Naive> = capacities.iter().map(|&capacity| Naive { capacity, ..Default::default() }).collect();
        for (s, d, cpus, gpus) in books {
            let demand: Vec<(usize, u64)> = [(0, cpus), (1, gpus)].into_iter().filter(|&(_, a)| a > 0).collect();
            let fits = demand.iter().all(|&(r, a)| naive[r].peak(s, s + d) + a <= capacities[r]);
            match multi.add(s, s + d, &demand) {
                Ok(ids) => {
                    prop_assert!(fits);
                    for (&(r, a), id) in demand.iter().zip(ids) {
                        naive[r].spans.push((id, Span { start: s, end: s + d, amount: a }));
                    }
                }
                Err((i, e)) => {
                    prop_assert!(!fits, "refused ({e}) although every resource fits");
                    let (r, a) = demand[i];
                    prop_assert!(naive[r].peak(s, s + d) + a > capacities[r], "the resource named did not refuse");
                }
            }
            for (r, n) in naive.iter().enumerate() {
                prop_assert_eq!(multi.get(r).len(), n.spans.len(), "resource {} changed on a refusal", r);
                for t in 0..130 {
                    prop_assert!(multi.get(r).usage_at(t) <= capacities[r]);
                }
            }
        }
        for (t, d, cpus, gpus) in queries {
            let demand = [(0, cpus), (1, gpus)];
            let scan = (t..=130 - d).find(|&s| demand.iter().all(|&(r, a)| naive[r].peak(s, s + d) + a <= capacities[r]));
            prop_assert_eq!(multi.earliest_start(t, d, &demand, 130), scan);
        }
    }
}
