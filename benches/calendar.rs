//! Capacity calendar at 10^6 spans: earliest-start query, add and remove, each against a
//! naive span-list baseline in the same run. Writes its section of BENCHMARKS.md.

mod report;

use std::time::{Duration, Instant};

use coreserve::calendar::CapacityCalendar;
use criterion::{black_box, Criterion};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SPANS: usize = 1_000_000;
const CAPACITY: u64 = 1024;
const STEP_S: i64 = 36;
const HORIZON: i64 = SPANS as i64 * STEP_S;

/// The obvious implementation: a list of spans, every query a scan.
struct Naive {
    spans: Vec<(u64, i64, i64, u64)>,
    next: u64,
}

impl Naive {
    fn peak(&self, t0: i64, t1: i64) -> u64 {
        let mut ev: Vec<(i64, i64)> = Vec::new();
        let mut base = 0i64;
        for &(_, s, e, a) in &self.spans {
            if s < t1 && e > t0 {
                if s <= t0 {
                    base += a as i64
                } else {
                    ev.push((s, a as i64))
                }
                if e < t1 {
                    ev.push((e, -(a as i64)))
                }
            }
        }
        ev.sort_unstable();
        let (mut cur, mut peak) = (base, base);
        for (_, d) in ev {
            cur += d;
            peak = peak.max(cur);
        }
        peak as u64
    }
    fn add(&mut self, s: i64, e: i64, a: u64) -> Option<u64> {
        (self.peak(s, e) + a <= CAPACITY).then(|| {
            self.next += 1;
            self.spans.push((self.next, s, e, a));
            self.next
        })
    }
    fn remove(&mut self, id: u64) {
        let i = self.spans.iter().position(|x| x.0 == id).expect("booked");
        self.spans.swap_remove(i);
    }
    /// Sweep over the change points after `after`.
    fn earliest_start(&self, after: i64, d: i64, a: u64, latest_end: i64) -> Option<i64> {
        let mut ev: Vec<(i64, i64)> = Vec::new();
        let mut base = 0i64;
        for &(_, s, e, amt) in &self.spans {
            if s < latest_end && e > after {
                if s <= after {
                    base += amt as i64
                } else {
                    ev.push((s, amt as i64))
                }
                ev.push((e, -(amt as i64)));
            }
        }
        ev.sort_unstable();
        let limit = (CAPACITY - a) as i64;
        let (mut cur, mut cand) = (base, if base <= limit { Some(after) } else { None });
        for (t, delta) in ev {
            if let Some(c) = cand {
                if t >= c + d {
                    return (c + d <= latest_end).then_some(c);
                }
            }
            cur += delta;
            if cur > limit {
                cand = None
            } else if cand.is_none() {
                cand = Some(t)
            }
        }
        cand.filter(|c| c + d <= latest_end)
    }
}

fn populate() -> (CapacityCalendar, Naive) {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut cal = CapacityCalendar::new(CAPACITY);
    let mut naive = Naive { spans: Vec::with_capacity(SPANS), next: 0 };
    for i in 0..SPANS as i64 {
        let s = i * STEP_S + rng.gen_range(0..STEP_S);
        let e = s + rng.gen_range(600..7200);
        let a = rng.gen_range(1..=12);
        if cal.add(s, e, a).is_ok() {
            naive.next += 1;
            naive.spans.push((naive.next, s, e, a));
        }
    }
    (cal, naive)
}

fn main() {
    let (mut cal, mut naive) = populate();
    println!("calendar holds {} spans", cal.len());
    let mut c = Criterion::default().configure_from_args().warm_up_time(Duration::from_millis(500));
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut queries: Vec<i64> = (0..4096).map(|_| rng.gen_range(0..HORIZON - 10 * 86_400)).collect();
    let mut qi = 0usize;
    {
        let mut g = c.benchmark_group("calendar_1e6");
        g.measurement_time(Duration::from_secs(3));
        // 900 of 1024 CPUs for an hour: most windows are busy, so the query must skip peaks.
        g.bench_function("earliest_start/indexed", |b| {
            b.iter(|| {
                qi = (qi + 1) % queries.len();
                black_box(cal.earliest_start(queries[qi], 3600, 900, queries[qi] + 10 * 86_400))
            })
        });
        g.bench_function("add/indexed", |b| {
            b.iter_custom(|iters| {
                let spans: Vec<(i64, i64)> = (0..iters)
                    .map(|_| {
                        let s = rng.gen_range(0..HORIZON);
                        (s, s + 1800)
                    })
                    .collect();
                let t = Instant::now();
                let ids: Vec<_> = spans.iter().map(|&(s, e)| cal.add(s, e, 1)).collect();
                let el = t.elapsed();
                for id in ids.into_iter().flatten() {
                    cal.remove(id).unwrap();
                }
                el
            })
        });
        g.bench_function("remove/indexed", |b| {
            b.iter_custom(|iters| {
                let ids: Vec<_> = (0..iters)
                    .filter_map(|_| {
                        let s = rng.gen_range(0..HORIZON);
                        cal.add(s, s + 1800, 1).ok()
                    })
                    .collect();
                let t = Instant::now();
                for id in ids {
                    cal.remove(id).unwrap();
                }
                t.elapsed()
            })
        });
        g.finish();
    }
    {
        let mut g = c.benchmark_group("calendar_1e6");
        g.sample_size(10).measurement_time(Duration::from_secs(5));
        queries.truncate(64);
        g.bench_function("earliest_start/naive", |b| {
            b.iter(|| {
                qi = (qi + 1) % queries.len();
                black_box(naive.earliest_start(queries[qi], 3600, 900, queries[qi] + 10 * 86_400))
            })
        });
        g.bench_function("add/naive", |b| {
            b.iter_custom(|iters| {
                let mut el = Duration::ZERO;
                for _ in 0..iters {
                    let s = rng.gen_range(0..HORIZON);
                    let t = Instant::now();
                    let id = naive.add(s, s + 1800, 1);
                    el += t.elapsed();
                    if let Some(id) = id {
                        naive.remove(id)
                    }
                }
                el
            })
        });
        g.bench_function("remove/naive", |b| {
            b.iter_custom(|iters| {
                let mut el = Duration::ZERO;
                for _ in 0..iters {
                    let s = rng.gen_range(0..HORIZON);
                    if let Some(id) = naive.add(s, s + 1800, 1) {
                        let t = Instant::now();
                        naive.remove(id);
                        el += t.elapsed();
                    }
                }
                el
            })
        });
        g.finish();
    }
    // Sanity: the indexed answer equals the naive one on the benchmark's own data.
    for &q in queries.iter().take(16) {
        assert_eq!(
            cal.earliest_start(q, 3600, 900, q + 10 * 86_400),
            naive.earliest_start(q, 3600, 900, q + 10 * 86_400)
        );
    }
    c.final_summary();
    use report::{Fig, Row};
    report::write_section(
        "calendar",
        "Capacity calendar, 10^6 spans",
        "cargo bench --bench calendar",
        "A 1024-CPU calendar holding ~10^6 spans (one every 36 s over ~1.1 years, 600-7200 s, 1-12 CPUs). \
         `earliest_start` asks for 900 CPUs for one hour within a 10-day window (most windows are busy). \
         The naive baseline keeps a span list and scans it; its add checks the peak by a scan.",
        &[
            Row {
                name: "calendar_1e6/earliest_start/indexed",
                what: "earliest start, treap index",
                median: Fig::Criterion("calendar_1e6/earliest_start/indexed"),
                baseline: Some(Fig::Criterion("calendar_1e6/earliest_start/naive")),
                target_ns: Some(20_000.0),
            },
            Row {
                name: "calendar_1e6/add/indexed",
                what: "add a span (capacity-checked)",
                median: Fig::Criterion("calendar_1e6/add/indexed"),
                baseline: Some(Fig::Criterion("calendar_1e6/add/naive")),
                target_ns: Some(5_000.0),
            },
            Row {
                name: "calendar_1e6/remove/indexed",
                what: "remove a span",
                median: Fig::Criterion("calendar_1e6/remove/indexed"),
                baseline: Some(Fig::Criterion("calendar_1e6/remove/naive")),
                target_ns: Some(5_000.0),
            },
            Row {
                name: "calendar_1e6/earliest_start/naive",
                what: "earliest start, span-list sweep",
                median: Fig::Criterion("calendar_1e6/earliest_start/naive"),
                baseline: None,
                target_ns: None,
            },
            Row {
                name: "calendar_1e6/add/naive",
                what: "add, span-list scan",
                median: Fig::Criterion("calendar_1e6/add/naive"),
                baseline: None,
                target_ns: None,
            },
            Row {
                name: "calendar_1e6/remove/naive",
                what: "remove, span-list scan",
                median: Fig::Criterion("calendar_1e6/remove/naive"),
                baseline: None,
                target_ns: None,
            },
        ],
    );
}
