use proptest::prelude::*;

use super::*;

const DAY: Time = DAY_S;
/// 2026-01-01T00:00:00Z, a day boundary.
const T0: Time = 1_767_225_600;

fn job(start: Time, hours: i64, cpus: u32) -> Usage {
    Usage { start, end: start + hours * 3600, cpus, gpus: 0 }
}

fn project(id: &str, cpu_hours: f64, members: &[&str]) -> Project {
    Project {
        id: id.into(),
        allocation: Allocation { period_s: 30 * DAY, ..Allocation::cpu_hours(cpu_hours) },
        members: members.iter().map(|m| (*m).to_owned()).collect(),
    }
}

/// A project using exactly its entitled rate every day converges to u = 1 (the paper's
/// normalisation, eq. 12): after k days u = 1 - D^k, so it stays at priority 0.
#[test]
fn using_exactly_the_entitled_rate_converges_to_one() {
    // Two projects with equal allocations on a 100-CPU grid: R = 50 CPUs each.
    let ledger = Ledger::new(FairShareConfig::default(), 100);
    ledger.set_project(project("a", 36_000.0, &["alice"])).unwrap();
    ledger.set_project(project("b", 36_000.0, &["bob"])).unwrap();
    for day in 0..200 {
        // 50 CPUs for 24 h, starting at each day's start.
        ledger.record(&format!("p{day}"), "alice", vec![job(T0 + day * DAY, 24, 50)]);
    }
    let now = T0 + 199 * DAY + 3600;
    let r = ledger.report("a", now);
    assert!((r.entitled_cpus - 50.0).abs() < 1e-9);
    let d = paper_decay_per_day();
    let expected = 1.0 - d.powi(200);
    assert!((r.usage_index.unwrap() - expected).abs() < 1e-9, "{r:?}");
    assert_eq!(r.priority, Some(0.0));
    // bob used nothing: u = 0, priority 0.
    assert_eq!(ledger.report("b", now).usage_index, Some(0.0));
}

/// Twice the rate converges to u = 2 (priority -1); a job counts whole in the interval it
/// starts in, and only once it has started.
#[test]
fn usage_counts_at_the_start_and_not_before() {
    let ledger = Ledger::new(FairShareConfig::default(), 100);
    ledger.set_project(project("a", 72_000.0, &["alice"])).unwrap(); // R = 100 CPUs
                                                                     // One job of 100 CPUs x 48 h starting on day 3: 2 * R * dt CPU-seconds.
    ledger.record("p", "alice", vec![job(T0 + 3 * DAY, 48, 100)]);
    assert_eq!(ledger.report("a", T0 + 3 * DAY - 1).usage_index, Some(0.0), "booked, not started");
    let d = paper_decay_per_day();
    let u_start = ledger.report("a", T0 + 3 * DAY).usage_index.unwrap();
    assert!((u_start - 2.0 * (1.0 - d)).abs() < 1e-9, "{u_start}");
    // Five days later it has decayed by D^5.
    let u_later = ledger.report("a", T0 + 8 * DAY + 5).usage_index.unwrap();
    assert!((u_later - 2.0 * (1.0 - d) * d.powi(5)).abs() < 1e-9, "{u_later}");
}

/// No allocation anywhere: fair share is off, every user has priority 0 whatever they used.
#[test]
fn without_any_allocation_every_priority_is_zero() {
    let ledger = Ledger::new(FairShareConfig::default(), 100);
    ledger.record("p", "carol", vec![job(T0, 10, 100)]);
    assert_eq!(ledger.priority_of("carol", T0 + 3600), 0.0);
    ledger.set_project(project("a", 10.0, &["alice"])).unwrap();
    assert_eq!(ledger.priority_of("carol", T0 + 3600), f64::NEG_INFINITY, "on once a project has an allocation");
}

#[test]
fn priority_is_zero_up_to_the_planned_pace_then_one_minus_u() {
    assert_eq!(priority(0.0), 0.0);
    assert_eq!(priority(1.0), 0.0);
    assert!((priority(1.5) + 0.5).abs() < 1e-12);
    assert_eq!(priority(f64::INFINITY), f64::NEG_INFINITY);
}

/// A project without an allocation: entitled rate 0, priority 0 until it uses anything, then
/// the lowest; never limited.
#[test]
fn a_project_without_allocation_is_unlimited_but_last_once_it_used_anything() {
    let ledger = Ledger::new(FairShareConfig::default(), 100);
    ledger.set_project(project("a", 10.0, &["alice"])).unwrap();
    assert_eq!(ledger.priority_of("carol", T0), 0.0);
    ledger.charge("big", "carol", vec![job(T0, 1000, 100)]).unwrap();
    assert_eq!(ledger.priority_of("carol", T0 + 1), f64::NEG_INFINITY);
    let r = ledger.report("carol", T0 + 1);
    assert_eq!((r.usage_index, r.priority, r.allocation.is_none()), (None, None, true));
    // Without an allocation the report counts the 30-day period from the epoch holding now.
    let (_, period_end) = Allocation::cpu_hours(0.0).period_of(T0 + 1);
    let inside_h = (period_end - T0) as f64 / 3600.0;
    assert!((r.booked_cpu_hours - inside_h * 100.0).abs() < 1e-6, "{r:?}");
}

/// The allocation limit: the plan that would go over is refused and nothing is recorded;
/// another period has its own allocation; overdraft lifts the limit.
#[test]
fn charging_stops_at_the_allocation_per_period() {
    let ledger = Ledger::new(FairShareConfig::default(), 100);
    let mut p = project("a", 100.0, &["alice", "al"]);
    p.allocation.period_start = crate::model::from_time(T0);
    ledger.set_project(p.clone()).unwrap();
    ledger.charge("p1", "alice", vec![job(T0, 1, 60)]).unwrap();
    let e = ledger.charge("p2", "al", vec![job(T0 + DAY, 1, 50)]).unwrap_err();
    assert_eq!((e.project.as_str(), e.unit), ("a", "CPU-hours"));
    assert!((e.booked - 60.0).abs() < 1e-9 && (e.needed - 50.0).abs() < 1e-9, "{e}");
    assert!((ledger.report("a", T0 + 10).booked_cpu_hours - 60.0).abs() < 1e-9, "nothing recorded");
    // Exactly the rest fits.
    ledger.charge("p3", "al", vec![job(T0 + DAY, 1, 40)]).unwrap();
    // The next period has its own 100 CPU-hours; a job across the boundary counts in both.
    ledger.charge("p4", "alice", vec![job(T0 + 30 * DAY - 3600, 2, 50)]).unwrap_err();
    ledger.charge("p5", "alice", vec![job(T0 + 30 * DAY, 2, 50)]).unwrap();
    // Cancelling gives the hours back.
    ledger.forget("p3");
    ledger.charge("p6", "alice", vec![job(T0 + 2 * DAY, 1, 40)]).unwrap();
    // Overdraft: no limit.
    p.allocation.overdraft = true;
    ledger.set_project(p).unwrap();
    ledger.charge("p7", "alice", vec![job(T0 + 3 * DAY, 10, 100)]).unwrap();
}

#[test]
fn gpu_hours_are_limited_only_when_allocated() {
    let ledger = Ledger::new(FairShareConfig::default(), 100);
    let mut p = project("a", 1000.0, &["alice"]);
    ledger.set_project(p.clone()).unwrap();
    let gpu_job = Usage { gpus: 4, ..job(T0, 10, 1) };
    ledger.charge("g1", "alice", vec![gpu_job]).unwrap();
    p.allocation.gpu_hours = Some(50.0);
    ledger.set_project(p).unwrap();
    let e = ledger.charge("g2", "alice", vec![Usage { start: T0 + DAY, end: T0 + DAY + 3600, cpus: 1, gpus: 20 }]);
    assert_eq!(e.unwrap_err().unit, "GPU-hours");
    ledger.charge("g3", "alice", vec![Usage { gpus: 10, ..job(T0 + DAY, 1, 1) }]).unwrap();
}

#[test]
fn naming_a_member_moves_them_and_bad_allocations_are_refused() {
    let ledger = Ledger::new(FairShareConfig::default(), 10);
    ledger.set_project(project("a", 1.0, &["alice", "bob"])).unwrap();
    ledger.set_project(project("b", 1.0, &["bob"])).unwrap();
    assert_eq!(ledger.project_of("bob"), "b");
    assert_eq!(ledger.project("a").unwrap().members, vec!["alice".to_owned()]);
    assert_eq!(ledger.project_of("zed"), "zed");
    for bad in [
        project("c", -1.0, &[]),
        project("c", f64::NAN, &[]),
        Project { allocation: Allocation { period_s: 0, ..Allocation::cpu_hours(1.0) }, ..project("c", 1.0, &[]) },
        Project {
            allocation: Allocation { period_s: i64::MAX, ..Allocation::cpu_hours(1.0) },
            ..project("c", 1.0, &[])
        },
        project(" ", 1.0, &[]),
        project("c", 1.0, &["\u{7}"]),
    ] {
        assert!(ledger.set_project(bad.clone()).is_err(), "{bad:?}");
    }
    assert!(ledger.project("c").is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Whatever the plans and their order, every charged project stays within its allocation
    /// in every period (unless overdraft), and a refused charge changes nothing.
    #[test]
    fn charges_never_exceed_any_period(
        allocs in prop::collection::vec(0.0f64..400.0, 1..4),
        plans in prop::collection::vec((0usize..5, prop::collection::vec((0i64..90, 1i64..72, 1u32..40), 1..4)), 1..40),
    ) {
        let ledger = Ledger::new(FairShareConfig::default(), 64);
        for (i, a) in allocs.iter().enumerate() {
            let mut p = project(&format!("p{i}"), *a, &[&format!("u{i}")]);
            p.allocation.period_s = 7 * DAY;
            ledger.set_project(p).unwrap();
        }
        let mut accepted: Vec<(usize, Vec<Usage>)> = Vec::new();
        for (k, (user, jobs)) in plans.iter().enumerate() {
            let usage: Vec<Usage> = jobs.iter().map(|(day, h, c)| job(T0 + day * DAY / 3, *h, *c)).collect();
            let before = ledger.report(&format!("p{user}"), T0).booked_cpu_hours;
            match ledger.charge(&format!("k{k}"), &format!("u{user}"), usage.clone()) {
                Ok(()) => accepted.push((*user, usage)),
                Err(_) => prop_assert_eq!(ledger.report(&format!("p{user}"), T0).booked_cpu_hours, before),
            }
        }
        // Independent recount per project and week.
        for (i, a) in allocs.iter().enumerate() {
            for week in 0..20 {
                let (ws, we) = (T0 + week * 7 * DAY, T0 + (week + 1) * 7 * DAY);
                let origin_aligned = Allocation { period_s: 7 * DAY, ..Allocation::cpu_hours(*a) }.period_of(ws);
                let (ps, pe) = origin_aligned;
                let used: f64 = accepted.iter().filter(|(u, _)| *u == i).flat_map(|(_, us)| us.iter())
                    .map(|u| u.inside(ps, pe).0 / 3600.0).sum();
                prop_assert!(used <= a + 1e-6, "project p{} uses {} > {} in [{}, {})", i, used, a, ws, we);
            }
        }
    }

    /// The usage index is linear in usage, decays by D per interval, and is 1 at the entitled
    /// rate in the limit: u(c * s) = c * u(s); shifting every use one interval back multiplies by D.
    #[test]
    fn usage_index_is_linear_and_decays(s in prop::collection::vec(0.0f64..1e6, 1..30), c in 0.1f64..10.0, rate in 1.0f64..500.0) {
        let d = paper_decay_per_day();
        let u = usage_index(rate, DAY, d, &s);
        let scaled: Vec<f64> = s.iter().map(|x| x * c).collect();
        prop_assert!((usage_index(rate, DAY, d, &scaled) - c * u).abs() <= 1e-9 * (1.0 + c * u));
        let mut older = vec![0.0];
        older.extend_from_slice(&s);
        prop_assert!((usage_index(rate, DAY, d, &older) - d * u).abs() <= 1e-9 * (1.0 + u));
        prop_assert!(u >= 0.0);
    }
}

/// The decayed-usage priorities the paper compares with: a project that has used nothing is
/// first, ahead of one that used exactly its rate (which Planned-Use keeps at the top with it,
/// both at priority 0), and the linear index is 1 at the rate.
#[test]
fn decayed_usage_puts_a_newly_active_project_first() {
    for (priority, u_at_rate) in [
        (PriorityFunction::PlannedUse, None),
        (PriorityFunction::ExponentialDecay, None),
        (PriorityFunction::LinearDecay { window_days: 10.0 }, Some(1.0)),
    ] {
        let ledger = Ledger::new(FairShareConfig { priority, ..FairShareConfig::default() }, 100);
        ledger.set_project(project("steady", 36_000.0, &["alice"])).unwrap();
        ledger.set_project(project("new", 36_000.0, &["bob"])).unwrap();
        // steady: exactly its rate (50 CPUs) every day for 20 days; new: nothing.
        for day in 0..20 {
            ledger.record(&format!("p{day}"), "alice", vec![job(T0 + day * DAY, 24, 50)]);
        }
        let now = T0 + 19 * DAY + 60;
        let (steady, new) = (ledger.priority_of("alice", now), ledger.priority_of("bob", now));
        match priority {
            PriorityFunction::PlannedUse => assert_eq!((steady, new), (0.0, 0.0), "both at or under their pace"),
            _ => assert!(new == 0.0 && steady < -0.5, "{priority:?}: steady {steady}, new {new}"),
        }
        if let Some(u) = u_at_rate {
            let r = ledger.report("steady", now);
            assert!((r.usage_index.unwrap() - u).abs() < 1e-9, "{r:?}");
            assert!((r.priority.unwrap() + u).abs() < 1e-9);
        }
    }
}

#[test]
fn linear_decay_weighs_usage_by_its_age_and_forgets_it_after_the_window() {
    // Rate 1 CPU, one-day intervals, a 4-day window: weights 1, 0.75, 0.5, 0.25, 0 ...
    let d = DAY as f64;
    assert!((linear_usage_index(1.0, DAY, 4.0 * d, &[d, d, d, d]) - 1.0).abs() < 1e-12);
    // Only the day before yesterday's usage, twice the rate: 2 * 0.5 / 2.5.
    assert!((linear_usage_index(1.0, DAY, 4.0 * d, &[0.0, 0.0, 2.0 * d]) - 0.4).abs() < 1e-12);
    assert_eq!(linear_usage_index(1.0, DAY, 4.0 * d, &[0.0, 0.0, 0.0, 0.0, 5.0 * d]), 0.0, "older than the window");
    assert_eq!(linear_usage_index(0.0, DAY, 4.0 * d, &[d]), f64::INFINITY);
}
