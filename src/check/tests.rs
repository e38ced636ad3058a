use chrono::{DateTime, Utc};

use super::capacity::overbooked;
use super::*;
use crate::model::{
    from_time, ComputeDemand, JobPlacement, NetworkDemand, Node, RawPlanRequest, Time, TransferPlacement,
};

/// 2026-01-01T00:00:00Z.
const T0: Time = 1_767_225_600;
const W: i64 = 1800;

fn t(s: i64) -> DateTime<Utc> {
    from_time(T0 + s)
}

/// n1 --l12-- n2 --l23-- n3 (l23 is stored as n3-n2, so paths cross it "backwards").
/// s1 (n1, 16 CPUs linux, 1.0), s1b (n1, 8 linux, 3.0), s2 (n2, 16 solaris, 2.0),
/// s3 (n3, 32 bsd, 0.5).
fn grid() -> Grid {
    let node = |id: &str| Node::new(id, "");
    let link = |id: &str, a: &str, b: &str, cap: u64, price: f64| Link {
        id: id.into(),
        a: a.into(),
        b: b.into(),
        capacity_mbps: cap,
        price_per_gbps_hour: price,
    };
    let site = |id: &str, n: &str, cpus: u32, os: &str, price: f64| Site::new(id, n, cpus, os, price);
    Grid::new(
        vec![node("n1"), node("n2"), node("n3")],
        vec![link("l12", "n1", "n2", 1500, 1.0), link("l23", "n3", "n2", 1000, 2.0)],
        vec![
            site("s1", "n1", 16, "linux", 1.0),
            site("s1b", "n1", 8, "linux", 3.0),
            site("s2", "n2", 16, "solaris", 2.0),
            site("s3", "n3", 32, "bsd", 0.5),
        ],
    )
    .unwrap()
}

fn job(name: &str, os: &str, cpus: u32, offset_s: i64, duration_s: i64) -> ComputeDemand {
    ComputeDemand::new(name, os, cpus, offset_s, duration_s)
}

fn demand(from: &str, to: &str, bw: u64, offset_s: i64, duration_s: i64) -> NetworkDemand {
    NetworkDemand::new(from, to, bw, offset_s, duration_s)
}

fn request(
    id: &str,
    submitted: i64,
    deadline: i64,
    jobs: Vec<ComputeDemand>,
    transfers: Vec<NetworkDemand>,
) -> RawPlanRequest {
    RawPlanRequest {
        id: id.into(),
        user: "u".into(),
        submitted_at: t(submitted),
        deadline: t(deadline),
        not_before: None,
        jobs,
        transfers,
        policy: None,
        method: None,
        dependency_gap_s: 0,
        slack_s: 0,
    }
}

/// r1: workflow A (linux 8 CPUs, [0, 3600)) -> B (bsd 8, [3000, 4200)), transfer 500 Mbit/s
/// [3000, 3600). r2: co-allocation X (linux 8), Y (solaris 4), Z (linux 4), all [0, 1800),
/// X->Y 600 Mbit/s and X->Z 200 Mbit/s. r3: one bsd job of 128 CPUs (rejected).
fn raw_requests() -> Vec<RawPlanRequest> {
    vec![
        request(
            "r1",
            0,
            20_000,
            vec![job("A", "linux", 8, 0, 3600), job("B", "bsd", 8, 3000, 1200)],
            vec![demand("A", "B", 500, 3000, 600)],
        ),
        request(
            "r2",
            3000,
            20_000,
            vec![job("X", "linux", 8, 0, 1800), job("Y", "solaris", 4, 0, 1800), job("Z", "linux", 4, 0, 1800)],
            vec![demand("X", "Y", 600, 0, 1800), demand("X", "Z", 200, 0, 1800)],
        ),
        request("r3", 100, 20_000, vec![job("Q", "bsd", 128, 0, 600)], vec![]),
    ]
}

fn requests() -> Vec<PlanRequest> {
    raw_requests().into_iter().map(|r| PlanRequest::new(r).unwrap()).collect()
}

fn jp(name: &str, site: &str, start: i64, end: i64, cpus: u32) -> JobPlacement {
    JobPlacement { name: name.into(), site: site.into(), start: t(start), end: t(end), cpus, ..Default::default() }
}

fn tp(from: &str, to: &str, path: &[&str], bw: u64, start: i64, end: i64) -> TransferPlacement {
    TransferPlacement {
        from: from.into(),
        to: to.into(),
        path: path.iter().map(|s| (*s).into()).collect(),
        bandwidth_mbps: bw,
        start: t(start),
        end: t(end),
        ..Default::default()
    }
}

fn committed(id: &str, start: i64, jobs: Vec<JobPlacement>, transfers: Vec<TransferPlacement>, cost: f64) -> Outcome {
    Outcome {
        request_id: id.into(),
        status: PlanStatus::Committed,
        reason: None,
        start: Some(t(start)),
        deadline: None,
        jobs,
        transfers,
        cost,
        planning_ms: 1.0,
        planner: "p1".into(),
        messages: 0,
        rounds: 0,
        holds_aborted: 0,
        footprint: None,
    }
}

/// Hand-computed costs.
/// r1: A 8 CPUs * 1 h * 1.0 = 8; B 8 * 1/3 h * 0.5 = 4/3; A->B 0.5 Gbit/s * 1/6 h * (1 + 2) = 0.25.
const COST_R1: f64 = 8.0 + 4.0 / 3.0 + 0.25;
/// r2: X 8 * 0.5 * 1 = 4; Y 4 * 0.5 * 2 = 4; Z 4 * 0.5 * 3 = 6; X->Y 0.6 * 0.5 * 1 = 0.3; X->Z 0.
const COST_R2: f64 = 14.3;

/// r1 starts at +1800 (its earliest); r2 at +4800 (its earliest). s1 then holds A and X
/// together over [4800, 5400): 16 of 16 CPUs; l12 carries 500 + 600 = 1100 of 1500 Mbit/s.
fn outcomes() -> Vec<Outcome> {
    vec![
        committed(
            "r1",
            1800,
            vec![jp("A", "s1", 1800, 5400, 8), jp("B", "s3", 4800, 6000, 8)],
            vec![tp("A", "B", &["l12", "l23"], 500, 4800, 5400)],
            COST_R1,
        ),
        committed(
            "r2",
            4800,
            vec![jp("X", "s1", 4800, 6600, 8), jp("Y", "s2", 4800, 6600, 4), jp("Z", "s1b", 4800, 6600, 4)],
            vec![tp("X", "Y", &["l12"], 600, 4800, 6600), tp("X", "Z", &[], 200, 4800, 6600)],
            COST_R2,
        ),
        Outcome::rejected("r3", "no bsd site with 128 free CPUs", "p1"),
    ]
}

fn check(grid: &Grid, reqs: &[PlanRequest], outs: &[Outcome]) -> Vec<Violation> {
    check_outcomes(grid, reqs, outs, W)
}

/// Runs the checker on the batch after `mutate`; with `fix_cost`, the outcomes' costs are first
/// set to the recomputed ones so that only the targeted rule can fire.
/// The parts of [`grid`] a test may change before the check.
struct GridParts {
    links: Vec<Link>,
    sites: Vec<Site>,
}

fn violations_after(
    fix_cost: bool,
    mutate: impl FnOnce(&mut GridParts, &mut Vec<RawPlanRequest>, &mut Vec<Outcome>),
) -> Vec<Violation> {
    let (nodes, links, sites) = grid().into_parts();
    let (mut parts, mut raws, mut outs) = (GridParts { links, sites }, raw_requests(), outcomes());
    mutate(&mut parts, &mut raws, &mut outs);
    let g = Grid::new(nodes, parts.links, parts.sites).unwrap();
    if fix_cost {
        for o in &mut outs {
            if let Some(c) = plan_cost(&g, o) {
                o.cost = c;
            }
        }
    }
    let reqs: Vec<PlanRequest> = raws.into_iter().map(|r| PlanRequest::new(r).unwrap()).collect();
    check(&g, &reqs, &outs)
}

fn outcome<'a>(outs: &'a mut [Outcome], id: &str) -> &'a mut Outcome {
    outs.iter_mut().find(|o| o.request_id == id).unwrap()
}

#[test]
fn valid_batch_has_no_violations() {
    assert_eq!(check(&grid(), &requests(), &outcomes()), vec![]);
    let outs = outcomes();
    assert!((plan_cost(&grid(), &outs[0]).unwrap() - COST_R1).abs() < 1e-12);
    assert!((plan_cost(&grid(), &outs[1]).unwrap() - COST_R2).abs() < 1e-12);
    assert_eq!(plan_cost(&grid(), &outs[2]), Some(0.0));
    // a request without outcome is not a violation, but is listed by missing_outcomes
    let mut reqs = requests();
    let mut extra = raw_requests()[2].clone();
    extra.id = "r4".into();
    reqs.push(PlanRequest::new(extra).unwrap());
    assert_eq!(check(&grid(), &reqs, &outs), vec![]);
    assert_eq!(missing_outcomes(&reqs, &outs), vec!["r4".to_owned()]);
}

#[test]
fn os_is_compared_case_insensitively() {
    assert_eq!(violations_after(false, |g, _, _| g.sites[0].os = "LINUX".into()), vec![]);
}

#[test]
fn overbooked_site_is_reported_with_its_interval_and_peak() {
    // each of A and X fits in 12 CPUs; together they need 16 over [4800, 5400)
    let v = violations_after(false, |g, _, _| g.sites[0].cpus = 12);
    assert_eq!(
        v,
        vec![Violation::SiteOverbooked { site: "s1".into(), from: t(4800), to: t(5400), peak: 16, capacity: 12 }]
    );
    assert!(v[0].to_string().contains("site `s1` is overbooked"));
    assert_eq!(v[0].request_id(), None);
}

#[test]
fn overbooked_link_is_reported() {
    let v = violations_after(false, |g, _, _| g.links[0].capacity_mbps = 1000);
    assert_eq!(
        v,
        vec![Violation::LinkOverbooked { link: "l12".into(), from: t(4800), to: t(5400), peak: 1100, capacity: 1000 }]
    );
}

#[test]
fn wrong_os_is_reported() {
    let v = violations_after(false, |g, _, _| g.sites[3].os = "linux".into());
    assert_eq!(
        v,
        vec![Violation::plan(
            "r1",
            PlanViolation::WrongOs {
                job: "B".into(),
                site: "s3".into(),
                job_os: "bsd".into(),
                site_os: "linux".into()
            }
        )]
    );
}

#[test]
fn wrong_job_offset_is_reported() {
    let v = violations_after(false, |_, _, o| {
        let b = &mut outcome(o, "r1").jobs[1];
        b.start = t(4860);
        b.end = t(6060);
    });
    // The layout's timing, and the rule the layout keeps (read from the request itself):
    // the concurrent transfer no longer lies inside B.
    let outside = |job: &str| PlanViolation::TransferOutOfPlace {
        from: "A".into(),
        to: "B".into(),
        detail: format!("not inside job `{job}`"),
    };
    assert_eq!(
        v,
        vec![
            Violation::plan(
                "r1",
                PlanViolation::JobTiming {
                    job: "B".into(),
                    start: t(4860),
                    end: t(6060),
                    expected_start: t(4800),
                    expected_end: t(6000)
                }
            ),
            Violation::plan("r1", outside("B")),
        ]
    );
}

#[test]
fn wrong_job_duration_is_reported() {
    let v = violations_after(true, |_, _, o| outcome(o, "r2").jobs[1].end = t(6000));
    assert!(
        matches!(&v[..], [
            Violation::Plan { kind: PlanViolation::JobTiming { job, .. }, .. },
            Violation::Plan { kind: PlanViolation::WrongLength { job: short, length_s: 1200, expected_s: 1800 }, .. },
            Violation::Plan { kind: PlanViolation::TransferOutOfPlace { .. }, .. },
        ] if job == "Y" && short == "Y"),
        "{v:?}"
    );
}

#[test]
fn wrong_cpus_is_reported() {
    let v = violations_after(true, |_, _, o| outcome(o, "r1").jobs[1].cpus = 16);
    assert_eq!(v, vec![Violation::plan("r1", PlanViolation::WrongCpus { job: "B".into(), placed: 16, requested: 8 })]);
    // without fixing the cost, the cost is wrong as well
    let v = violations_after(false, |_, _, o| outcome(o, "r1").jobs[1].cpus = 16);
    assert!(v.iter().any(|x| matches!(x, Violation::Plan { kind: PlanViolation::WrongCost { .. }, .. })), "{v:?}");
}

#[test]
fn past_deadline_is_reported() {
    // the deadline still admits the request (>= submitted + span), but this plan ends at +6000
    let v = violations_after(false, |_, r, _| r[0].deadline = t(5000));
    assert_eq!(
        v,
        vec![Violation::plan(
            "r1",
            PlanViolation::PastDeadline { what: "job `B`".into(), end: t(6000), deadline: t(5000) }
        )]
    );
}

#[test]
fn start_before_w_interval_is_reported() {
    let v = violations_after(false, |_, _, o| {
        let r1 = outcome(o, "r1");
        r1.start = Some(t(1000));
        for j in &mut r1.jobs {
            j.start -= chrono::Duration::seconds(800);
            j.end -= chrono::Duration::seconds(800);
        }
        for x in &mut r1.transfers {
            x.start -= chrono::Duration::seconds(800);
            x.end -= chrono::Duration::seconds(800);
        }
    });
    assert_eq!(v, vec![Violation::plan("r1", PlanViolation::StartTooEarly { start: t(1000), earliest: t(1800) })]);
}

#[test]
fn start_before_not_before_is_reported() {
    let v = violations_after(false, |_, r, _| r[0].not_before = Some(t(2000)));
    assert_eq!(v, vec![Violation::plan("r1", PlanViolation::StartTooEarly { start: t(1800), earliest: t(2000) })]);
}

#[test]
fn broken_paths_are_reported() {
    let cases: Vec<(&str, usize, Vec<&str>, &str)> = vec![
        ("r1", 0, vec!["l12"], "ends at node `n2`, not at `n3`"),
        ("r1", 0, vec!["l23", "l12"], "does not touch node `n1`"),
        ("r1", 0, vec!["l12", "l99"], "`l99` does not exist"),
        ("r1", 0, vec!["l12", "l23", "l23"], "used twice"),
        ("r1", 0, vec![], "empty path, but the sites are on different nodes"),
        ("r2", 1, vec!["l12"], "must be empty"),
    ];
    for (id, k, path, reason) in cases {
        let v = violations_after(true, |_, _, o| {
            outcome(o, id).transfers[k].path = path.iter().map(|s| (*s).into()).collect();
        });
        assert!(
            matches!(&v[..], [Violation::Plan { kind: PlanViolation::BrokenPath { reason: r, .. }, .. }] if r.contains(reason)),
            "path {path:?}: expected `{reason}`, got {v:?}"
        );
    }
    // the valid fixture's path [l12, l23] crosses l23 (stored n3-n2) from n2 to n3, against its
    // stored direction, and passes: links are undirected
    assert_eq!(violations_after(false, |_, _, _| {}), vec![]);
}

#[test]
fn wrong_cost_is_reported_beyond_the_tolerance() {
    let v = violations_after(false, |_, _, o| outcome(o, "r1").cost = COST_R1 * (1.0 + 1e-5));
    assert!(
        matches!(&v[..], [Violation::Plan { kind: PlanViolation::WrongCost { expected, .. }, .. }] if (expected - COST_R1).abs() < 1e-12),
        "{v:?}"
    );
    assert_eq!(violations_after(false, |_, _, o| outcome(o, "r1").cost = COST_R1 * (1.0 + 1e-7)), vec![]);
    let v = violations_after(false, |_, _, o| outcome(o, "r2").cost = f64::NAN);
    assert!(matches!(&v[..], [Violation::Plan { kind: PlanViolation::WrongCost { .. }, .. }]), "{v:?}");
}

#[test]
fn wrong_bandwidth_is_reported() {
    let v = violations_after(true, |_, _, o| outcome(o, "r2").transfers[0].bandwidth_mbps = 700);
    assert_eq!(
        v,
        vec![Violation::plan(
            "r2",
            PlanViolation::WrongBandwidth { from: "X".into(), to: "Y".into(), placed: 700, requested: 600 }
        )]
    );
}

#[test]
fn wrong_transfer_timing_is_reported() {
    let v = violations_after(false, |_, _, o| {
        let x = &mut outcome(o, "r1").transfers[0];
        x.start = t(4860);
        x.end = t(5460);
    });
    assert!(
        matches!(&v[..], [
            Violation::Plan { kind: PlanViolation::TransferTiming { expected_start, .. }, .. },
            Violation::Plan { kind: PlanViolation::TransferOutOfPlace { detail, .. }, .. },
        ] if *expected_start == t(4800) && detail == "not inside job `A`"),
        "{v:?}"
    );
}

#[test]
fn job_placement_count_errors_are_reported() {
    let v = violations_after(true, |_, _, o| {
        outcome(o, "r2").jobs.remove(2);
    });
    assert_eq!(v, vec![Violation::plan("r2", PlanViolation::JobNotPlaced { job: "Z".into() })]);

    let v = violations_after(true, |_, _, o| {
        let r1 = outcome(o, "r1");
        let a = r1.jobs[0].clone();
        r1.jobs.push(a);
    });
    assert!(v.contains(&Violation::plan("r1", PlanViolation::JobPlacedTwice { job: "A".into(), count: 2 })), "{v:?}");
    // ... and the extra copy is booked: s1 holds 8 + 8 + 8 over [4800, 5400)
    assert!(v.iter().any(|x| matches!(x, Violation::SiteOverbooked { peak: 24, .. })), "{v:?}");

    let v = violations_after(true, |_, _, o| outcome(o, "r1").jobs.push(jp("Q", "s3", 1800, 2400, 4)));
    assert_eq!(v, vec![Violation::plan("r1", PlanViolation::UnknownJob { job: "Q".into() })]);

    let v = violations_after(false, |_, _, o| outcome(o, "r1").jobs[1].site = "s9".into());
    assert_eq!(v, vec![Violation::plan("r1", PlanViolation::UnknownSite { job: "B".into(), site: "s9".into() })]);
}

#[test]
fn transfer_placement_count_errors_are_reported() {
    let v = violations_after(true, |_, _, o| outcome(o, "r1").transfers.clear());
    assert_eq!(
        v,
        vec![Violation::plan(
            "r1",
            PlanViolation::TransferCount { from: "A".into(), to: "B".into(), placed: 0, requested: 1 }
        )]
    );
    let v = violations_after(true, |_, _, o| {
        let r2 = outcome(o, "r2");
        let xz = r2.transfers[1].clone();
        r2.transfers.push(xz);
    });
    assert_eq!(
        v,
        vec![Violation::plan(
            "r2",
            PlanViolation::TransferCount { from: "X".into(), to: "Z".into(), placed: 2, requested: 1 }
        )]
    );
    // the direction is the request's: B->A does not stand for A->B
    let v = violations_after(true, |_, _, o| {
        let x = &mut outcome(o, "r1").transfers[0];
        std::mem::swap(&mut x.from, &mut x.to);
        x.path.reverse();
    });
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(v.iter().all(|x| matches!(x, Violation::Plan { kind: PlanViolation::TransferCount { .. }, .. })));
}

#[test]
fn outcome_bookkeeping_errors_are_reported() {
    let v = violations_after(false, |_, _, o| o.push(Outcome::rejected("r9", "x", "p1")));
    assert_eq!(v, vec![Violation::plan("r9", PlanViolation::UnknownRequest)]);
    let v = violations_after(false, |_, _, o| o.push(Outcome::rejected("r3", "again", "p2")));
    assert_eq!(v, vec![Violation::plan("r3", PlanViolation::DuplicateOutcome)]);
    let v = violations_after(false, |_, _, o| {
        let r3 = outcome(o, "r3");
        r3.start = Some(t(2000));
        r3.jobs.push(jp("Q", "s3", 2000, 2600, 128));
        r3.cost = 1.0;
    });
    assert!(
        matches!(&v[..], [Violation::Plan { kind: PlanViolation::RejectedNotEmpty { detail, .. }, .. }] if detail == "a start, 1 job placements, cost 1"),
        "{v:?}"
    );
    let v = violations_after(false, |_, _, o| outcome(o, "r1").start = None);
    assert_eq!(v, vec![Violation::plan("r1", PlanViolation::MissingStart)]);
}

#[test]
fn overbooked_sweep_uses_half_open_intervals() {
    // back-to-back at 10 -> no overlap
    assert_eq!(overbooked(vec![(0, 10, 5), (10, 20, 5)], 5), vec![]);
    // [5, 10) holds 10 and [10, 12) holds 8 (one span ends as another starts): one episode of
    // capacity 7 with peak 10; [12, 15) holds 5 and fits. Empty and inverted spans count nothing.
    assert_eq!(overbooked(vec![(0, 10, 5), (5, 15, 5), (10, 12, 3), (20, 20, 99), (30, 25, 99)], 7), vec![(5, 12, 10)]);
    // two separate episodes
    assert_eq!(overbooked(vec![(0, 2, 3), (1, 2, 3), (5, 7, 3), (6, 8, 3)], 5), vec![(1, 2, 6), (6, 7, 6)]);
    assert_eq!(overbooked(vec![], 0), vec![]);
}

/// Cross-check with the generator: a trivial placement of generated requests (every site on
/// one node, unbounded CPUs, each request started at its earliest start) passes.
#[test]
fn generated_requests_with_trivial_placements_pass() {
    use crate::workload::{generate, AppKind, WorkloadParams};
    let big = |id: &str, os: &str| Site::new(id, "n", 1 << 30, os, 0.25);
    let g =
        Grid::new(vec![Node::new("n", "")], vec![], vec![big("lx", "Linux"), big("so", "Solaris"), big("bs", "BSD")])
            .unwrap();
    for kind in AppKind::ALL {
        let reqs =
            generate(&[8, 16, 64, 256], 1000, &WorkloadParams { requests: 200, ..WorkloadParams::for_kind(*kind) })
                .unwrap();
        let outs: Vec<Outcome> = reqs
            .iter()
            .map(|r| {
                let st = r.submitted_at() + W;
                let site = |os: &str| g.sites().iter().find(|s| s.os.eq_ignore_ascii_case(os)).unwrap().id.clone();
                let jobs: Vec<JobPlacement> = r
                    .jobs()
                    .iter()
                    .enumerate()
                    .map(|(i, j)| JobPlacement {
                        name: j.name.clone(),
                        site: site(&j.os),
                        start: from_time(st + r.job_span(i).offset_s),
                        end: from_time(st + r.job_span(i).end_s()),
                        cpus: j.cpus,
                        gpus: None,
                        reservation_name: None,
                        broken: None,
                        state: None,
                        price_per_cpu_hour: 0.0,
                        price_per_gpu_hour: 0.0,
                        ..Default::default()
                    })
                    .collect();
                let transfers = r
                    .transfers()
                    .iter()
                    .enumerate()
                    .map(|(e, x)| TransferPlacement {
                        from: x.from.clone(),
                        to: x.to.clone(),
                        path: vec![],
                        bandwidth_mbps: x.bandwidth_mbps,
                        start: from_time(st + r.transfer_span(e).offset_s),
                        end: from_time(st + r.transfer_span(e).end_s()),
                        traffic: None,
                        broken: None,
                        state: None,
                        price_per_gbps_hour: 0.0,
                        ..Default::default()
                    })
                    .collect();
                let cost = r.cpu_seconds() / 3600.0 * 0.25;
                Outcome { start: Some(from_time(st)), jobs, transfers, cost, ..Outcome::rejected(r.id(), "", "p") }
            })
            .map(|mut o| {
                o.status = PlanStatus::Committed;
                o.reason = None;
                o
            })
            .collect();
        assert_eq!(check(&g, &reqs, &outs), vec![], "{kind}");
    }
}

/// The one-line text of every violation (the simulator and the CLI print it; it must not
/// change).
#[test]
fn violations_read_as_one_line_each() {
    use PlanViolation::*;
    let (s, e) = (t(0), t(60));
    let cases: Vec<(PlanViolation, &str)> = vec![
        (UnknownRequest, "outcome for unknown request `r`"),
        (NotAnAnswer(PlanStatus::Active), "outcome of request `r` is active: not a planner's answer"),
        (DuplicateOutcome, "request `r` has more than one outcome"),
        (RejectedNotEmpty { detail: "a start".into() }, "rejected request `r` is not empty: a start"),
        (MissingStart, "committed request `r` has no start"),
        (
            StartTooEarly { start: s, earliest: e },
            "request `r` starts at 2026-01-01 00:00:00 UTC, before its earliest start 2026-01-01 00:01:00 UTC",
        ),
        (
            PastDeadline { what: "job `B`".into(), end: e, deadline: s },
            "request `r`: job `B` ends at 2026-01-01 00:01:00 UTC, after the deadline 2026-01-01 00:00:00 UTC",
        ),
        (UnknownJob { job: "Q".into() }, "request `r`: placement for unknown job `Q`"),
        (JobNotPlaced { job: "Z".into() }, "request `r`: job `Z` is not placed"),
        (JobPlacedTwice { job: "A".into(), count: 2 }, "request `r`: job `A` is placed 2 times"),
        (UnknownSite { job: "B".into(), site: "s9".into() }, "request `r`: job `B` is placed on unknown site `s9`"),
        (
            WrongOs { job: "B".into(), site: "s3".into(), job_os: "bsd".into(), site_os: "linux".into() },
            "request `r`: job `B` needs OS `bsd` but site `s3` runs `linux`",
        ),
        (WrongCpus { job: "B".into(), placed: 16, requested: 8 }, "request `r`: job `B` holds 16 CPUs, requested 8"),
        (
            JobTiming { job: "B".into(), start: s, end: e, expected_start: e, expected_end: e },
            "request `r`: job `B` runs [2026-01-01 00:00:00 UTC, 2026-01-01 00:01:00 UTC), \
             expected [2026-01-01 00:01:00 UTC, 2026-01-01 00:01:00 UTC)",
        ),
        (
            TransferCount { from: "A".into(), to: "B".into(), placed: 0, requested: 1 },
            "request `r`: transfer A->B is placed 0 times, requested 1",
        ),
        (
            WrongBandwidth { from: "X".into(), to: "Y".into(), placed: 700, requested: 600 },
            "request `r`: transfer X->Y holds 700 Mbit/s, requested 600",
        ),
        (
            TransferTiming { from: "A".into(), to: "B".into(), start: s, end: e, expected_start: s, expected_end: s },
            "request `r`: transfer A->B runs [2026-01-01 00:00:00 UTC, 2026-01-01 00:01:00 UTC), \
             expected [2026-01-01 00:00:00 UTC, 2026-01-01 00:00:00 UTC)",
        ),
        (
            BrokenPath { from: "A".into(), to: "B".into(), reason: "link `l` is used twice".into() },
            "request `r`: transfer A->B has a broken path: link `l` is used twice",
        ),
        (WrongCost { reported: 1.5, expected: 2.0 }, "request `r`: cost 1.5 differs from the recomputed 2"),
    ];
    for (kind, text) in cases {
        let v = Violation::plan("r", kind);
        assert_eq!(v.request_id(), Some("r"));
        assert_eq!(v.to_string(), text);
    }
    let site = Violation::SiteOverbooked { site: "s1".into(), from: s, to: e, peak: 16, capacity: 12 };
    assert_eq!(
        site.to_string(),
        "site `s1` is overbooked over [2026-01-01 00:00:00 UTC, 2026-01-01 00:01:00 UTC): 16 CPUs of 12"
    );
    let link = Violation::LinkOverbooked { link: "l12".into(), from: s, to: e, peak: 1100, capacity: 1000 };
    assert_eq!(
        link.to_string(),
        "link `l12` is overbooked over [2026-01-01 00:00:00 UTC, 2026-01-01 00:01:00 UTC): 1100 Mbit/s of 1000"
    );
}

/// Fair share: a project's committed CPU-hours per period against its allocation; overdraft
/// exempts it; members count, other users do not; the text names the project and period.
#[test]
fn over_allocation_is_a_violation_unless_overdraft() {
    use crate::fairshare::{Allocation, Project};
    // Two 1-hour jobs of 4 CPUs each (8 CPU-hours), by user `alice` of project `lab`.
    let req = |id: &str, user: &str| {
        let raw: RawPlanRequest = serde_json::from_value(serde_json::json!({
            "id": id, "user": user, "submitted_at": t(0), "deadline": t(100_000),
            "jobs": [{"name": "A", "os": "linux", "cpus": 4, "offset_s": 0, "duration_s": 3600}],
        }))
        .unwrap();
        PlanRequest::new(raw).unwrap()
    };
    let committed = |id: &str| {
        let mut o = Outcome::rejected(id, "p", "x");
        o.status = PlanStatus::Committed;
        o.reason = None;
        o.start = Some(t(1800));
        o.jobs = vec![JobPlacement {
            name: "A".into(),
            site: "s1".into(),
            start: t(1800),
            end: t(5400),
            cpus: 4,
            gpus: None,
            reservation_name: None,
            broken: None,
            state: None,
            price_per_cpu_hour: 0.0,
            price_per_gpu_hour: 0.0,
            ..Default::default()
        }];
        o
    };
    let requests = vec![req("r1", "alice"), req("r2", "alice"), req("r3", "bob")];
    let outcomes = vec![committed("r1"), committed("r2"), committed("r3")];
    let mut lab = Project { id: "lab".into(), allocation: Allocation::cpu_hours(6.0), members: vec!["alice".into()] };
    let v = check_allocations(std::slice::from_ref(&lab), &requests, &outcomes);
    assert_eq!(v.len(), 1, "{v:?}");
    let text = v[0].to_string();
    assert!(
        text.starts_with("project `lab` is over its allocation in the period from")
            && text.ends_with("8.000 CPU-hours of 6.000"),
        "{text}"
    );
    lab.allocation.cpu_hours = 8.0;
    assert!(check_allocations(std::slice::from_ref(&lab), &requests, &outcomes).is_empty(), "exactly the allocation");
    lab.allocation.cpu_hours = 1.0;
    lab.allocation.overdraft = true;
    assert!(check_allocations(&[lab], &requests, &outcomes).is_empty(), "overdraft");
}

/// Issue 46, per-job placement: `P` (linux, no dependency) then `C` after it by a staged
/// 1,000 MB transfer at 100 Mbit/s (80 s over the network). `C` floats: placed later than its
/// laid-out offset it is valid; on `P`'s site the transfer may take no time; across the network
/// it lasts its 80 s, no less; and `C` still waits for it and for the gap.
#[test]
fn a_floating_job_is_bound_by_its_dependencies_not_by_its_offset() {
    let g = grid();
    let mut c = ComputeDemand::new("C", "linux", 4, 0, 600);
    c.offset_s = None;
    c.after = vec!["P".into()];
    let staged = NetworkDemand {
        offset_s: None,
        duration_s: None,
        mode: crate::model::TransferMode::Staged,
        size_mb: Some(1000.0),
        ..NetworkDemand::new("P", "C", 100, 0, 1)
    };
    let mut raw = request("wf", 0, 20_000, vec![job("P", "linux", 4, 0, 600), c], vec![staged]);
    raw.dependency_gap_s = 10;
    let r = PlanRequest::new(raw).unwrap();
    assert!(r.floats(1) && r.transfer_floats(0));
    assert_eq!(r.job_span(1).offset_s, 680, "laid out after the transfer");
    let plan = |c_site: &str, c_start: i64, path: &[&str], t: (i64, i64)| {
        let mut o = committed(
            "wf",
            W,
            vec![jp("P", "s1", W, W + 600, 4), jp("C", c_site, c_start, c_start + 600, 4)],
            vec![tp("P", "C", path, 100, t.0, t.1)],
            0.0,
        );
        o.cost = plan_cost(&g, &o).unwrap();
        check(&g, std::slice::from_ref(&r), &[o])
    };
    let (end, t80) = (W + 600, (W + 600, W + 680));
    // Later than laid out (+ 680), across the network: valid.
    assert_eq!(plan("s1b", end + 5000, &[], t80), vec![]);
    // On the producer's site, the transfer takes no time: C may start after the gap only.
    assert_eq!(plan("s1", end + 10, &[], (end, end)), vec![]);
    // Across the network (s2 is solaris: use s1b on the same node, then a path-less move is
    // fine; the length rule is what is checked): 70 s is short of its 80 s.
    let v = plan("s1b", end + 100, &[], (end, end + 70));
    let details: Vec<&str> = v
        .iter()
        .filter_map(|v| match v.plan_violation() {
            Some(PlanViolation::TransferOutOfPlace { detail, .. }) => Some(detail.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(details, ["70 s long, not its 80 s", "too short: 70 s for 1000 MB (needs 80 s)"], "{v:?}");
    // Before the gap after its producer: broken, whatever the layout said.
    // (Reported once per way `C` depends on `P`: its `after` and its staged transfer.)
    let v = plan("s1", end + 5, &[], (end, end));
    let broken = |v: &Violation| matches!(v.plan_violation(), Some(PlanViolation::DependencyBroken { gap_s: 10, .. }));
    assert!(!v.is_empty() && v.iter().all(broken), "{v:?}");
    // Before the transfer's end: out of place.
    let v = plan("s1b", end + 50, &[], t80);
    assert!(
        matches!(&v[..], [Violation::Plan { kind: PlanViolation::TransferOutOfPlace { detail, .. }, .. }]
            if detail.starts_with("not between")),
        "{v:?}"
    );
}
