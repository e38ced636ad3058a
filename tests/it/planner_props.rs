//! Property tests of the planner: on random small grids (some sites with a GPU pool), random
//! requests (some jobs with GPUs) planned by several competing planners (every method and
//! policy) never overbook a site's CPUs, a GPU pool or a link, place no job on a site that
//! fails its requirements, meet every deadline, and leave no hold behind.

use std::sync::Arc;

use coreserve::check::check_outcomes;
use coreserve::clock::ManualClock;
use coreserve::in_process::InProcessGrid;
use coreserve::model::{
    from_time, to_time, GpuPool, Grid, Link, Node, NodeId, Outcome, PlanRequest, PlanStatus, RawPlanRequest,
    ReservationMethod, SelectionPolicy, Site, SiteAttributes, TransferMode,
};
use coreserve::nis::Routing;
use coreserve::planner::{Planner, PlannerConfig};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

const T0: i64 = 1_767_225_600;

fn grid_strategy() -> impl Strategy<Value = Grid> {
    let site = (8u32..40, 0usize..2, 1u32..4, 0u32..6, prop::bool::ANY);
    (2usize..6, prop::collection::vec(site, 2..6), prop::collection::vec(100u64..2000, 6)).prop_map(
        |(nodes, sites, caps)| {
            let node_ids: Vec<NodeId> = (0..nodes).map(|i| format!("n{i}").into()).collect();
            // a ring, plus one chord when there are enough nodes
            let mut links: Vec<Link> = (0..nodes)
                .map(|i| Link {
                    id: format!("l{i}").into(),
                    a: node_ids[i].clone(),
                    b: node_ids[(i + 1) % nodes].clone(),
                    capacity_mbps: caps[i % caps.len()],
                    price_per_gbps_hour: 0.1,
                })
                .collect();
            if nodes == 2 {
                links.truncate(1);
            }
            let sites = sites
                .into_iter()
                .enumerate()
                .map(|(i, (cpus, os, price, gpus, new))| Site {
                    id: format!("s{i}").into(),
                    node: node_ids[i % nodes].clone(),
                    cpus,
                    os: ["linux", "bsd"][os].into(),
                    price_per_cpu_hour: f64::from(price),
                    attributes: SiteAttributes {
                        gpus: (gpus > 0)
                            .then(|| GpuPool {
                                model: if new { "a100" } else { "k80" }.into(),
                                count: gpus,
                                compute_capability: if new { 8.0 } else { 3.7 },
                                memory_gib: 16,
                            })
                            .into_iter()
                            .collect(),
                        price_per_gpu_hour: 2.0,
                        ..Default::default()
                    },
                })
                .collect();
            let nodes = node_ids.into_iter().map(|id| Node::new(id, "")).collect();
            Grid::new(nodes, links, sites).unwrap()
        },
    )
}

/// A request: 1-4 jobs, a chain of transfers between consecutive jobs, all co-allocated.
fn request_strategy(i: usize) -> impl Strategy<Value = PlanRequest> {
    let job = (1u32..24, 0usize..2, 0u32..4, prop::bool::ANY);
    (1usize..5, prop::collection::vec(job, 4), 1i64..5, 50u64..900, 0i64..4000, 1i64..6)
        .prop_map(move |(n, jobs, dur, bw, arrival, slack)| {
            let duration_s = dur * 300;
            let jobs: Vec<_> = jobs[..n]
                .iter()
                .enumerate()
                .map(|(j, (cpus, os, gpus, new))| {
                    let os = ["linux", "bsd"][*os];
                    let mut job = serde_json::json!({"name": format!("j{j}"), "os": os, "cpus": cpus, "offset_s": 0, "duration_s": duration_s});
                    if *gpus > 0 {
                        let min_cc = if *new { serde_json::json!(7.0) } else { serde_json::Value::Null };
                        job["requires"] = serde_json::json!({"gpus": {"count": gpus, "min_compute_capability": min_cc}});
                    }
                    job
                })
                .collect();
            let transfers: Vec<_> = (1..n)
                .map(|j| serde_json::json!({"from": format!("j{}", j - 1), "to": format!("j{j}"), "bandwidth_mbps": bw, "offset_s": 0, "duration_s": duration_s}))
                .collect();
            plan_request(i, T0 + arrival, 600 + duration_s * slack, jobs, transfers)
        })
}

/// Request `r{i}` submitted at `submitted`, due `window_s` later.
fn plan_request(
    i: usize,
    submitted: i64,
    window_s: i64,
    jobs: Vec<serde_json::Value>,
    transfers: Vec<serde_json::Value>,
) -> PlanRequest {
    let raw: RawPlanRequest = serde_json::from_value(serde_json::json!({
        "id": format!("r{i}"), "submitted_at": from_time(submitted),
        "deadline": from_time(submitted + window_s),
        "jobs": jobs, "transfers": transfers,
    }))
    .unwrap();
    PlanRequest::new(raw).unwrap()
}

/// A request of 1-4 jobs that start at different offsets (0-3 x 300 s), with a transfer
/// between consecutive jobs whose runs overlap (over their common interval), and between the
/// last and the first when `ring` closes the chain.
fn staggered_request(i: usize) -> impl Strategy<Value = PlanRequest> {
    let job = (1u32..24, 0i64..4, 1i64..4);
    (1usize..5, prop::collection::vec(job, 4), 50u64..900, 0i64..4000, 1i64..6, prop::bool::ANY).prop_map(
        move |(n, jobs, bw, arrival, slack, ring)| {
            let span = |(_, offset, dur): &(u32, i64, i64)| (offset * 300, (offset + dur) * 300);
            let json_jobs: Vec<_> = jobs[..n]
                .iter()
                .enumerate()
                .map(|(j, (cpus, offset, dur))| serde_json::json!({"name": format!("j{j}"), "os": "linux", "cpus": cpus, "offset_s": offset * 300, "duration_s": dur * 300}))
                .collect();
            // A chain, closed into a ring of 3 or 4 when `ring` (a job then has two neighbours).
            let closing = (ring && n >= 3).then_some((n - 1, 0));
            let transfers: Vec<_> = (1..n)
                .map(|j| (j - 1, j))
                .chain(closing)
                .filter_map(|(a, b)| {
                    let ((a0, a1), (b0, b1)) = (span(&jobs[a]), span(&jobs[b]));
                    let (s, e) = (a0.max(b0), a1.min(b1));
                    (s < e).then(|| serde_json::json!({"from": format!("j{a}"), "to": format!("j{b}"), "bandwidth_mbps": bw, "offset_s": s, "duration_s": e - s}))
                })
                .collect();
            let length = jobs[..n].iter().map(|j| span(j).1).max().unwrap_or(0);
            plan_request(i, T0 + arrival, 600 + length * slack, json_jobs, transfers)
        },
    )
}

/// A workflow of 2-6 jobs: job `j` is `after` a random set of earlier jobs, each dependency
/// carrying a staged transfer (by size or by duration) or none; a job with no dependency may
/// have an explicit offset, and two such jobs whose runs overlap may be joined by a concurrent
/// transfer; a dependency gap, a request-wide slack and some jobs' own slack. Due 600 s plus
/// 1-5 times its laid-out span after it arrives.
fn workflow_strategy(i: usize) -> impl Strategy<Value = PlanRequest> {
    let job = (1u32..20, 1i64..5, prop::option::of(0i64..4), prop::option::of(0i64..300), 0u32..64, 0u32..64);
    (
        2usize..7,
        prop::collection::vec(job, 6),
        0i64..120,
        0i64..300,
        50u64..900,
        0i64..4000,
        1i64..6,
        prop::bool::ANY,
    )
        .prop_map(move |(n, jobs, gap, slack, bw, arrival, factor, coupled)| {
            let mut json_jobs = Vec::new();
            let mut transfers = Vec::new();
            for (j, &(cpus, dur, offset, own_slack, after_mask, staged_mask)) in jobs[..n].iter().enumerate() {
                let mut job = serde_json::json!({"name": format!("j{j}"), "os": "linux", "cpus": cpus, "duration_s": dur * 300});
                let after: Vec<usize> = (0..j).filter(|&p| after_mask & (1 << p) != 0).collect();
                for &p in &after {
                    match (staged_mask >> p) & 3 {
                        0 => {}
                        1 => transfers.push(serde_json::json!({"from": format!("j{p}"), "to": format!("j{j}"), "bandwidth_mbps": bw, "mode": "staged", "size_mb": bw * 10})),
                        _ => transfers.push(serde_json::json!({"from": format!("j{p}"), "to": format!("j{j}"), "bandwidth_mbps": bw, "mode": "staged", "duration_s": 120})),
                    }
                }
                if after.is_empty() {
                    if let Some(o) = offset {
                        job["offset_s"] = serde_json::json!(o * 300);
                    }
                } else {
                    job["after"] = serde_json::json!(after.iter().map(|p| format!("j{p}")).collect::<Vec<_>>());
                }
                if let Some(s) = own_slack {
                    job["slack_s"] = serde_json::json!(s);
                }
                json_jobs.push(job);
            }
            // Two independent jobs at explicit offsets, both running over [1200, 1500): coupled.
            if coupled {
                for name in ["c0", "c1"] {
                    json_jobs.push(serde_json::json!({"name": name, "os": "linux", "cpus": 2, "offset_s": 900, "duration_s": 900}));
                }
                transfers.push(serde_json::json!({"from": "c0", "to": "c1", "bandwidth_mbps": bw, "offset_s": 1200, "duration_s": 300}));
            }
            let raw = |deadline: i64| -> RawPlanRequest {
                serde_json::from_value(serde_json::json!({
                    "id": format!("r{i}"), "submitted_at": from_time(T0 + arrival), "deadline": from_time(deadline),
                    "dependency_gap_s": gap, "slack_s": slack, "jobs": json_jobs, "transfers": transfers,
                }))
                .unwrap()
            };
            let span = PlanRequest::new(raw(T0 + 100 * 86_400)).unwrap().span_s();
            PlanRequest::new(raw(T0 + arrival + 600 + span * factor)).unwrap()
        })
}

/// A layered workflow of 3-12 jobs (per-job placement, issue 46): a root, then levels of 1-3
/// jobs, each `after` a random non-empty set of the previous level's jobs, each dependency
/// carrying a staged transfer (by size or by duration) or none; some jobs need `bsd` (so a
/// consumer may sit at its producer's site or not); a gap and slack. Every job but the root
/// floats. Due 600 s plus 1-6 times its laid-out span after it arrives.
fn layered_workflow(i: usize) -> impl Strategy<Value = PlanRequest> {
    let level = prop::collection::vec((1u32..12, 1i64..5, 1u32..8, 0u32..8, prop::bool::ANY), 1..4);
    (prop::collection::vec(level, 1..4), 0i64..90, 0i64..120, 50u64..900, 0i64..4000, 1i64..7).prop_map(
        move |(levels, gap, slack, bw, arrival, factor)| {
            let mut jobs = vec![serde_json::json!({"name": "root", "os": "linux", "cpus": 2, "duration_s": 300})];
            let mut transfers = Vec::new();
            let mut previous = vec!["root".to_owned()];
            for (l, level) in levels.iter().enumerate() {
                let mut names = Vec::new();
                for (k, &(cpus, dur, after_mask, staged_mask, bsd)) in level.iter().enumerate() {
                    let name = format!("l{l}_{k}");
                    let mut after: Vec<&String> =
                        previous.iter().enumerate().filter(|(p, _)| after_mask & (1 << p) != 0).map(|(_, n)| n).collect();
                    if after.is_empty() {
                        after.push(&previous[0]);
                    }
                    for (p, from) in after.iter().enumerate() {
                        match (staged_mask >> (2 * p)) & 3 {
                            0 => {}
                            1 => transfers.push(serde_json::json!({"from": from, "to": name, "bandwidth_mbps": bw, "mode": "staged", "size_mb": bw * 20})),
                            _ => transfers.push(serde_json::json!({"from": from, "to": name, "bandwidth_mbps": bw, "mode": "staged", "duration_s": 90})),
                        }
                    }
                    let os = if bsd { "bsd" } else { "linux" };
                    jobs.push(serde_json::json!({"name": name, "os": os, "cpus": cpus, "duration_s": dur * 300, "after": after}));
                    names.push(name);
                }
                previous = names;
            }
            let raw = |deadline: i64| -> RawPlanRequest {
                serde_json::from_value(serde_json::json!({
                    "id": format!("w{i}"), "submitted_at": from_time(T0 + arrival), "deadline": from_time(deadline),
                    "dependency_gap_s": gap, "slack_s": slack, "jobs": jobs, "transfers": transfers,
                }))
                .unwrap()
            };
            let span = PlanRequest::new(raw(T0 + 100 * 86_400)).unwrap().span_s();
            PlanRequest::new(raw(T0 + arrival + 600 + span * factor)).unwrap()
        },
    )
}

/// The earliest start the placed predecessors of job `j` of `r` allow in `o`: each one's end
/// plus the gap, and each staged transfer's end when the producer is at another site (on its
/// site the transfer needs no network and no time).
fn earliest_allowed(r: &PlanRequest, o: &Outcome, j: usize) -> i64 {
    let at = |name: &str| o.jobs.iter().find(|p| p.name == name).unwrap();
    let job = &r.jobs()[j];
    let mut ready = i64::MIN;
    for p in &job.after {
        ready = ready.max(to_time(&at(p).end) + r.dependency_gap_s());
    }
    for (e, t) in r.transfers().iter().enumerate() {
        if t.to == job.name && t.mode == TransferMode::Staged {
            let (from, to) = (at(&t.from), at(&t.to));
            let d = if from.site == to.site { 0 } else { r.transfer_span(e).duration_s };
            ready = ready.max(to_time(&from.end) + d);
        }
    }
    ready
}

/// Three planners (`method` and `policy`: indices into every variant) race on all of `reqs` at
/// once over one in-process grid: the outcomes, in request order, and the holds left after.
fn race(grid: &Grid, reqs: &[PlanRequest], method: usize, policy: usize) -> (Vec<Outcome>, usize) {
    race_with(grid, reqs, method, policy, false)
}

/// [`race`], the planners batching their queries, aborts and checks (`batched`) or not.
fn race_with(grid: &Grid, reqs: &[PlanRequest], method: usize, policy: usize, batched: bool) -> (Vec<Outcome>, usize) {
    let (method, policy) = (ReservationMethod::ALL[method], SelectionPolicy::ALL[policy]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    rt.block_on(async {
        let local = InProcessGrid::new(grid, Arc::new(ManualClock::new(T0)), 3600, Routing::Shortest);
        let planners: Vec<Arc<Planner>> = (0..3)
            .map(|p| {
                let cfg = PlannerConfig {
                    name: format!("p{p}"),
                    w_interval_s: 600,
                    policy,
                    method,
                    seed: p,
                    batch_queries: batched,
                    batch_aborts: batched,
                    check_before_hold: batched,
                    hold_with_transfers: batched,
                    ..Default::default()
                };
                Arc::new(Planner::new(cfg, local.services()))
            })
            .collect();
        let tasks: Vec<_> = reqs
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, r)| {
                let p = planners[i % 3].clone();
                tokio::spawn(async move { p.plan(&r).await })
            })
            .collect();
        let mut outcomes = Vec::new();
        for t in tasks {
            outcomes.push(t.await.unwrap());
        }
        (outcomes, local.holds_outstanding())
    })
}

fn batch() -> impl Strategy<Value = Vec<PlanRequest>> {
    (4usize..14).prop_flat_map(|n| (0..n).map(request_strategy).collect::<Vec<_>>())
}

proptest! {
    // Regressions live beside this file (`planner_props.proptest-regressions`), as they did when
    // it was a test crate of its own: the default would put them under tests/proptest-regressions/.
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn competing_planners_never_overbook(grid in grid_strategy(), reqs in batch(), method in 0usize..3, policy in 0usize..4) {
        let (outcomes, outstanding) = race(&grid, &reqs, method, policy);
        let violations = check_outcomes(&grid, &reqs, &outcomes, 600);
        prop_assert!(violations.is_empty(), "{:?}", violations);
        prop_assert_eq!(outstanding, 0, "no hold outlives its plan");
        for o in &outcomes {
            prop_assert_eq!(o.status == PlanStatus::Committed, o.reason.is_none());
        }
    }

    /// Issue 46: random workflows (dependencies, staged and concurrent transfers, gaps and
    /// slack) planned by three racing planners: every committed plan keeps every rule the
    /// checker knows (the workflow's included, read from the request as given), nothing is
    /// overbooked and no hold is left.
    #[test]
    fn racing_planners_book_workflows_by_their_rules(
        grid in grid_strategy(),
        reqs in (4usize..12).prop_flat_map(|n| (0..n).map(workflow_strategy).collect::<Vec<_>>()),
        method in 0usize..3,
        policy in 0usize..4,
    ) {
        let (outcomes, outstanding) = race(&grid, &reqs, method, policy);
        let violations = check_outcomes(&grid, &reqs, &outcomes, 600);
        prop_assert!(violations.is_empty(), "{:?}", violations);
        prop_assert_eq!(outstanding, 0, "no hold outlives its plan");
        for o in outcomes.iter().filter(|o| o.status == PlanStatus::Committed) {
            let f = o.footprint.expect("a committed plan has a footprint");
            prop_assert!(f.slack_cpu_s <= f.booked_cpu_s && f.critical_path_s <= f.makespan_s, "{:?}", f);
        }
    }

    /// Issue 46, per-job placement: layered workflows whose jobs float, among co-allocations,
    /// raced by three planners (every method and policy, batched or not): every committed plan
    /// keeps every rule of the checker, nothing is overbooked, no hold is left.
    #[test]
    fn racing_planners_place_floating_jobs_by_the_rules(
        grid in grid_strategy(),
        flows in (2usize..8).prop_flat_map(|n| (0..n).map(layered_workflow).collect::<Vec<_>>()),
        others in (0usize..6).prop_flat_map(|n| (100..100 + n).map(request_strategy).collect::<Vec<_>>()),
        method in 0usize..3,
        policy in 0usize..4,
        batched in prop::bool::ANY,
    ) {
        let reqs: Vec<PlanRequest> = flows.into_iter().chain(others).collect();
        let (outcomes, outstanding) = race_with(&grid, &reqs, method, policy, batched);
        let violations = check_outcomes(&grid, &reqs, &outcomes, 600);
        prop_assert!(violations.is_empty(), "{:?}", violations);
        prop_assert_eq!(outstanding, 0, "no hold outlives its plan");
        for o in &outcomes {
            prop_assert_eq!(o.status == PlanStatus::Committed, o.reason.is_none());
        }
    }

    /// Issue 46, per-job placement: alone on a grid with room for the whole workflow at every
    /// site and on every link, each floating job starts exactly when its placed predecessors
    /// allow (their ends plus the gap, a staged transfer's end from another site), whatever
    /// the method, policy and batching.
    #[test]
    fn alone_a_floating_job_starts_as_early_as_its_predecessors_allow(
        flow in layered_workflow(0),
        method in 0usize..3,
        policy in 0usize..4,
        batched in prop::bool::ANY,
    ) {
        let big = |id: &str, node: &str, os: &str| Site::new(id, node, 1000, os, 1.0);
        let nodes = vec![Node::new("n0", ""), Node::new("n1", "")];
        let link = Link { id: "l01".into(), a: "n0".into(), b: "n1".into(), capacity_mbps: 100_000, price_per_gbps_hour: 0.1 };
        let sites = vec![big("a", "n0", "linux"), big("b", "n1", "linux"), big("c", "n0", "bsd"), big("d", "n1", "bsd")];
        let grid = Grid::new(nodes, vec![link], sites).unwrap();
        let (outcomes, outstanding) = race_with(&grid, std::slice::from_ref(&flow), method, policy, batched);
        let o = &outcomes[0];
        prop_assert_eq!(o.status, PlanStatus::Committed, "{:?}", o);
        prop_assert!(check_outcomes(&grid, std::slice::from_ref(&flow), &outcomes, 600).is_empty());
        prop_assert_eq!(outstanding, 0);
        for j in (0..flow.jobs().len()).filter(|&j| flow.floats(j)) {
            let start = to_time(&o.jobs[j].start);
            prop_assert_eq!(start, earliest_allowed(&flow, o, j), "job {}", flow.jobs()[j].name);
        }
    }

    /// Issue 13: batched queries and aborts (`PlannerConfig::batch_queries`, with the answers a
    /// hold or an abort cannot change kept; `batch_aborts`) and network checks before holds
    /// (`check_before_hold`) plan exactly what one query per job and site, one abort per hold
    /// and checks after holds plan, with no more messages and no more rounds: one planner,
    /// requests one after another, every method and policy. Issue 53: layered workflows among
    /// them, whose floating jobs are asked about ahead of their turn, with their siblings.
    #[test]
    fn batched_queries_plan_as_unbatched_ones(
        grid in grid_strategy(),
        reqs in (4usize..14).prop_flat_map(|n| {
            (0..n).map(|i| prop_oneof![staggered_request(i), layered_workflow(i)]).collect::<Vec<_>>()
        }),
        method in 0usize..3,
        policy in 0usize..4,
    ) {
        let (method, policy) = (ReservationMethod::ALL[method], SelectionPolicy::ALL[policy]);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let [plain, batched] = [false, true].map(|batch_queries| rt.block_on(async {
            let local = InProcessGrid::new(&grid, Arc::new(ManualClock::new(T0)), 3600, Routing::Shortest);
            let (batch_aborts, check_before_hold, hold_with_transfers) = (batch_queries, batch_queries, batch_queries);
            let cfg = PlannerConfig { w_interval_s: 600, policy, method, batch_queries, batch_aborts, check_before_hold, hold_with_transfers, ..Default::default() };
            let planner = Planner::new(cfg, local.services());
            let mut outcomes = Vec::new();
            for r in &reqs { outcomes.push(planner.plan(r).await); }
            outcomes
        }));
        for (p, b) in plain.iter().zip(&batched) {
            prop_assert_eq!((p.status, p.start, &p.jobs, &p.transfers), (b.status, b.start, &b.jobs, &b.transfers));
            prop_assert!(b.messages <= p.messages, "batched {} > {}", b.messages, p.messages);
            prop_assert!(b.rounds <= p.rounds, "batched {} rounds > {}", b.rounds, p.rounds);
        }
    }

    /// Issue 53: planned from snapshots (`PlannerConfig::plan_from_snapshots`: the search on
    /// local replicas of the participants' calendars, the holds in one round at the end), BIR
    /// plans exactly what the service's planner that asks as it searches plans, in no more
    /// sequential rounds, every hold committed: one planner, requests one after another, every
    /// policy, co-allocations and layered workflows.
    #[test]
    fn snapshot_plans_are_the_plans_of_the_search_that_asks(
        grid in grid_strategy(),
        reqs in (4usize..14).prop_flat_map(|n| {
            (0..n).map(|i| prop_oneof![staggered_request(i), layered_workflow(i)]).collect::<Vec<_>>()
        }),
        policy in 0usize..4,
    ) {
        let policy = SelectionPolicy::ALL[policy];
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let [asking, snapped] = [false, true].map(|plan_from_snapshots| rt.block_on(async {
            let local = InProcessGrid::new(&grid, Arc::new(ManualClock::new(T0)), 3600, Routing::Shortest);
            let cfg = PlannerConfig {
                w_interval_s: 600, policy, method: ReservationMethod::Bir, batch_queries: true, batch_aborts: true,
                check_before_hold: true, hold_with_transfers: true, static_check: true, plan_from_snapshots,
                ..Default::default()
            };
            let planner = Planner::new(cfg, local.services());
            let mut outcomes = Vec::new();
            for r in &reqs { outcomes.push(planner.plan(r).await); }
            (outcomes, local.holds_outstanding())
        }));
        prop_assert_eq!(snapped.1, 0, "nothing left held");
        for (a, s) in asking.0.iter().zip(&snapped.0) {
            prop_assert_eq!((a.status, a.start, &a.jobs, &a.transfers), (s.status, s.start, &s.jobs, &s.transfers));
            prop_assert_eq!(&a.reason, &s.reason);
            prop_assert!(s.rounds <= a.rounds, "from snapshots {} rounds > {}: {:?}", s.rounds, a.rounds, s);
            prop_assert_eq!(s.holds_aborted, 0);
        }
        prop_assert!(check_outcomes(&grid, &reqs, &snapped.0, 600).is_empty());
    }

    /// Alone on the grid, a BBR-overlay plan never fails its batch prepare: it cannot conflict
    /// with itself (plain BBR can).
    #[test]
    fn overlay_plans_never_self_conflict(grid in grid_strategy(), reqs in batch(), policy in 0usize..4) {
        let policy = SelectionPolicy::ALL[policy];
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let outcomes = rt.block_on(async {
            let local = InProcessGrid::new(&grid, Arc::new(ManualClock::new(T0)), 3600, Routing::Shortest);
            let cfg = PlannerConfig { w_interval_s: 600, policy, method: ReservationMethod::BbrOverlay, ..Default::default() };
            let planner = Planner::new(cfg, local.services());
            let mut outcomes = Vec::new();
            for r in &reqs { outcomes.push(planner.plan(r).await); }
            outcomes
        });
        for o in &outcomes {
            prop_assert!(!o.reason.as_deref().unwrap_or("").starts_with("batch prepare failed"), "{:?}", o);
        }
        prop_assert!(check_outcomes(&grid, &reqs, &outcomes, 600).is_empty());
    }
}
