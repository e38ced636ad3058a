//! Tests of the fair-share experiment: the arms' decisions, the workload, the settings and the CSV headers.

use coreserve::fairshare::{Usage, DAY_S};
use coreserve::model::{
    from_time, Grid, Link, Node, PlanRequest, PlanStatus, RawPlanRequest, ReservationMethod, SelectionPolicy, Site,
};
use coreserve::workload::AppKind;
use serde::Serialize;

use super::projects::{FLOOD, STEADY};
use super::workload::Phase;
use super::*;
use crate::algorithm::Algorithm;
use crate::scenario::fairshare::FairShareParams;

const T0: i64 = 1_767_225_600;

/// One planner working on one request at a time (the scenario's set-up).
fn scenario(extra: &str) -> Scenario {
    let mut s: Scenario = toml::from_str(&format!(
        "name = 't'\ntrace = 'unused'\nloads = [1.0]\nseeds = 1\nrequests = 1\nplanners = 1\n\
         experiment = 'fairshare'\n{extra}"
    ))
    .unwrap();
    s.dir = ".".into();
    s.validate().unwrap();
    s
}

/// One 8-CPU linux site, one link.
fn grid() -> Grid {
    Grid::new(
        vec![Node::new("a", ""), Node::new("b", "")],
        vec![Link { id: "ab".into(), a: "a".into(), b: "b".into(), capacity_mbps: 1000, price_per_gbps_hour: 0.5 }],
        vec![Site::new("lx", "a", 8, "linux", 1.0)],
    )
    .unwrap()
}

/// `user`'s request at `T0 + at` for the whole site over one hour, its deadline leaving no
/// room to shift past another such hour.
fn request(user: &str, at: i64) -> PlanRequest {
    let raw: RawPlanRequest = serde_json::from_value(serde_json::json!({
        "id": format!("{user}-{at}"), "user": user,
        "submitted_at": from_time(T0 + at), "deadline": from_time(T0 + at + 1800 + 3600 + 10),
        "jobs": [{"name": "A", "os": "linux", "cpus": 8, "offset_s": 0, "duration_s": 3600}],
    }))
    .unwrap();
    PlanRequest::new(raw).unwrap()
}

fn key() -> RunKey {
    RunKey {
        topology: "t".into(),
        kind: "workflow".into(),
        algorithm: Algorithm { method: ReservationMethod::Bir, policy: SelectionPolicy::Time },
        load: 1.0,
        seed: 1,
    }
}

/// Who got the site: the users of the committed requests.
fn winners(requests: &[PlanRequest], outcomes: &[Outcome]) -> Vec<String> {
    requests
        .iter()
        .zip(outcomes)
        .filter(|(_, o)| o.status == PlanStatus::Committed)
        .map(|(r, _)| r.user().to_owned())
        .collect()
}

/// A flood request and then a steady one, in the same 600-s admission window, both for the
/// only site's same hour. First come, first served: the flood's (it arrived first). With
/// Planned-Use fair share and the flood over its pace (`u_i` > 1 from yesterday's usage,
/// `p_i` < 0 = steady's): the steady request is planned first and gets the site. With
/// both projects within their pace (`p_i` = 0 for both), ties go by arrival: the flood's
/// again, so it is the priority that decides, not the window.
#[test]
fn planned_use_gives_the_window_to_the_project_within_its_pace() {
    let s = scenario("");
    let reqs = vec![request(FLOOD, 10), request(STEADY, 20)];
    let (_, fcfs) = simulate_with(&s, &key(), &grid(), &reqs, None).unwrap();
    assert_eq!(winners(&reqs, &fcfs), vec![FLOOD]);

    let p = FairShareParams::default();
    let over = ledger(&p, 8, T0 - 10 * DAY_S, Arm::PlannedUseNoLimit);
    // Yesterday the flood ran 64 CPUs all day: u = (1 - D) / (4 CPUs x 1 day) x D x 64 CPU-days.
    over.record("past", FLOOD, vec![Usage { start: T0 - DAY_S, end: T0, cpus: 64, gpus: 0 }]);
    assert!(over.priority_of(FLOOD, T0) < -0.5, "{}", over.priority_of(FLOOD, T0));
    assert_eq!(over.priority_of(STEADY, T0), 0.0);
    let fair = FairShare { ledger: over.clone(), window_s: 600 };
    let (_, planned) = simulate_with(&s, &key(), &grid(), &reqs, Some(&fair)).unwrap();
    assert_eq!(winners(&reqs, &planned), vec![STEADY], "{planned:?}");
    // The committed plan is charged to its project.
    assert_eq!(over.report(STEADY, T0 + 86_400).booked_cpu_hours, 8.0);

    let within = FairShare { ledger: ledger(&p, 8, T0 - 10 * DAY_S, Arm::PlannedUse), window_s: 600 };
    let (_, tie) = simulate_with(&s, &key(), &grid(), &reqs, Some(&within)).unwrap();
    assert_eq!(winners(&reqs, &tie), vec![FLOOD]);
}

/// The paper's baselines: a steady request and then one of the newly active flood, in the same
/// admission window for the only site's same hour. Steady has used its pace every day; the
/// flood nothing. Planned-Use ties them (both at `p_i` = 0) and goes by arrival: steady's.
/// The decay arms put the project that used least first: the flood's, although it came later.
#[test]
fn decayed_usage_gives_the_window_to_the_newly_active_project() {
    let s = scenario("");
    let reqs = vec![request(STEADY, 10), request(FLOOD, 20)];
    let p = FairShareParams::default();
    for (arm, winner) in [(Arm::PlannedUse, STEADY), (Arm::DecayExponential, FLOOD), (Arm::DecayLinear, FLOOD)] {
        let l = ledger(&p, 8, T0 - 10 * DAY_S, arm);
        // Ten days at steady's entitled rate (4 of the grid's 8 CPUs).
        for day in 1..=10 {
            let start = T0 - day * DAY_S;
            l.record(&format!("d{day}"), STEADY, vec![Usage { start, end: start + DAY_S, cpus: 4, gpus: 0 }]);
        }
        let fair = FairShare { ledger: l, window_s: 600 };
        let (_, o) = simulate_with(&s, &key(), &grid(), &reqs, Some(&fair)).unwrap();
        assert_eq!(winners(&reqs, &o), vec![winner], "{arm}");
    }
}

/// A plan that would take the flood past its allocation is rejected by the limit, and the
/// site stays free for steady's request of the same hour (arriving later).
#[test]
fn the_allocation_limit_refuses_the_flood_past_its_allocation() {
    let s = scenario("");
    let reqs = vec![request(FLOOD, 10), request(STEADY, 20)];
    // 80 CPU-hours per day each (steady_load 1/3 x 8 CPUs x 24 h x (1 + 0.25)); the flood
    // has 73 booked today (elsewhere), so the site's hour (8 more) would take it past.
    let p = FairShareParams { steady_load: 1.0 / 3.0, margin: 0.25, ..Default::default() };
    let ledger = ledger(&p, 8, T0, Arm::PlannedUseDaily);
    assert!((ledger.project(FLOOD).unwrap().allocation.cpu_hours - 80.0).abs() < 1e-9);
    let booked = vec![
        Usage { start: T0 + 10 * 3600, end: T0 + 19 * 3600, cpus: 8, gpus: 0 },
        Usage { start: T0 + 20 * 3600, end: T0 + 21 * 3600, cpus: 1, gpus: 0 },
    ];
    ledger.record("earlier", FLOOD, booked);
    let fair = FairShare { ledger: ledger.clone(), window_s: 0 };
    let (_, o) = simulate_with(&s, &key(), &grid(), &reqs, Some(&fair)).unwrap();
    assert_eq!(winners(&reqs, &o), vec![STEADY]);
    assert!(o[0].reason.as_deref().unwrap_or("").starts_with("allocation exceeded"), "{:?}", o[0].reason);
    assert!(check_allocations(&ledger.projects(), &reqs, &o).is_empty());
}

/// Steady's arrivals span the run, the flood's start at `flood_from_day`; users and ids
/// are the projects'; arrivals in order; the offered loads are about the set ones.
#[test]
fn the_workload_has_a_steady_project_and_a_late_flood() {
    let mut s = scenario("[fairshare]\ndays = 4\nflood_from_day = 2\nsteady_load = 0.4");
    s.workload.durations_s = vec![(3600, 1)];
    s.workload.shape = Some(coreserve::workload::Shape::Chain(1));
    let cpus = [8, 16, 32];
    let w = workload(&s, &cpus, 512, AppKind::Workflow, 2.0, 7).unwrap();
    assert_eq!((w.start, w.flood_start, w.end), (T0, T0 + 2 * DAY_S, T0 + 4 * DAY_S));
    assert!(w.requests.windows(2).all(|p| p[0].submitted_at() <= p[1].submitted_at()));
    let of = |u: &str| w.requests.iter().filter(move |r| r.user() == u).collect::<Vec<_>>();
    let (steady, flood) = (of(STEADY), of(FLOOD));
    assert_eq!(steady.len() + flood.len(), w.requests.len());
    assert!(steady.iter().all(|r| r.id().starts_with("steady-") && r.submitted_at() < w.end));
    assert!(flood.iter().all(|r| r.id().starts_with("flood-") && r.submitted_at() >= w.flood_start));
    assert!(steady[0].submitted_at() < T0 + 3600 && steady.last().unwrap().submitted_at() > w.end - 3 * 3600);
    let load = |rs: &[&PlanRequest], span: i64| rs.iter().map(|r| r.cpu_seconds()).sum::<f64>() / (512.0 * span as f64);
    let (ls, lf) = (load(&steady, 4 * DAY_S), load(&flood, 2 * DAY_S));
    assert!((0.3..0.5).contains(&ls), "{ls}");
    assert!((1.7..2.3).contains(&lf), "{lf}");
    assert_eq!(w.phase(T0 + DAY_S), Phase::Before);
    assert_eq!(w.phase(w.flood_start), Phase::Flood);
    // Deterministic.
    let again = workload(&s, &cpus, 512, AppKind::Workflow, 2.0, 7).unwrap();
    assert_eq!(again.requests, w.requests);
}

#[test]
fn bad_settings_are_refused() {
    let bad = |extra: &str| {
        let s: Scenario = toml::from_str(&format!(
            "name = 't'\ntrace = 'unused'\nloads = [1.0]\nexperiment = 'fairshare'\n[fairshare]\n{extra}"
        ))
        .unwrap();
        s.validate().unwrap_err().to_string()
    };
    assert!(bad("flood_from_day = 25\ndays = 20").contains("fairshare"));
    assert!(bad("steady_load = 0").contains("fairshare"));
    assert!(bad("arms = []").contains("fairshare"));
    let s: Result<Scenario, _> = toml::from_str("name = 't'\ntrace = 'u'\nloads = [1.0]\n[fairshare]\nwindow = 1");
    assert!(s.is_err(), "unknown fields are refused");
}

/// The CSV headers are the rows' serde field names, in order.
#[test]
fn csv_headers_match_the_rows() {
    fn names<T: Serialize>(row: &T) -> Vec<String> {
        let mut w = csv::WriterBuilder::new().has_headers(true).from_writer(vec![]);
        w.serialize(row).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        text.lines().next().unwrap().split(',').map(str::to_owned).collect()
    }
    let row = FairRow {
        topology: "t".into(),
        kind: "workflow".into(),
        algorithm: key().algorithm,
        flood_load: 2.0,
        arm: Arm::PlannedUse,
        seed: 1,
        project: STEADY.into(),
        phase: Phase::Flood,
        requests: 1,
        committed: 1,
        success_rate: 1.0,
        start_delay_s: 1.0,
        offered_load: 0.4,
        used_share: 0.4,
        rejected_allocation: 0,
        rejected_time_limit: 0,
        rejected_other: 0,
        idle_days: 0,
        usage_index_end: 0.5,
        priority_end: 0.0,
    };
    assert_eq!(names(&row), RUNS_HEADER);
    let summary = summarise(&[row]);
    assert_eq!(names(&summary[0]), SUMMARY_HEADER);
    let day = DayRow {
        topology: "t".into(),
        kind: "workflow".into(),
        algorithm: key().algorithm,
        flood_load: 2.0,
        arm: Arm::Fcfs,
        seed: 1,
        project: FLOOD.into(),
        day: 3,
        requests: 2,
        committed: 1,
        used_share: 0.1,
        usage_index: 1.2,
        priority: -0.2,
    };
    let days = summarise_days(&[day]);
    assert_eq!(names(&days[0]), DAILY_HEADER);
    assert_eq!(days[0].success_rate, 0.5);
}
