//! Planning a 4-job workflow diamond (BIR, policy `time`) on a 100-site GridG-style grid that
//! already holds 10^5 reservations, against the same requests on the empty grid in the same
//! run. Writes its section of BENCHMARKS.md.

mod report;

use std::sync::Arc;
use std::time::{Duration, Instant};

use coreserve::clock::ManualClock;
use coreserve::grid::{gridg, GridgParams, GridgVariant};
use coreserve::in_process::InProcessGrid;
use coreserve::model::{Grid, PlanRequest};
use coreserve::nis::Routing;
use coreserve::planner::{Planner, PlannerConfig};
use coreserve::protocol::{ComputeHoldRequest, HoldLifecycle, NetworkHoldRequest, Participant, TxnId};
use coreserve::replay::Summary;
use coreserve::workload::{generate, AppKind, WorkloadParams, DEFAULT_START};
use criterion::Criterion;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const RESERVATIONS: usize = 100_000;
const HORIZON_S: i64 = 60 * 86_400;

fn grid() -> Grid {
    let params = GridgParams { wan_nodes: 5, man_per_wan: 2, lan_per_man: 2, hosts_per_lan: 5, ..Default::default() };
    gridg(GridgVariant::Wide, 1, &params)
}

/// Books `RESERVATIONS` committed reservations at random sites, times and sizes (80 % compute,
/// 20 % bandwidth on single links), spread over 60 days.
async fn fill(g: &Grid, local: &InProcessGrid) {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut booked = 0;
    while booked < RESERVATIONS {
        let start = DEFAULT_START + rng.gen_range(0..HORIZON_S);
        let end = start + [600, 1200, 1800, 3600, 5400, 7200][rng.gen_range(0..6)];
        let booked_now = if rng.gen_bool(0.8) {
            let s = &g.sites()[rng.gen_range(0..g.sites().len())];
            let req = ComputeHoldRequest {
                txn: TxnId::nil(),
                site: s.id.clone(),
                cpus: rng.gen_range(8..=64),
                start,
                end,
                gpus: None,
            };
            let lis = &local.lis[&s.id];
            match lis.prepare(&req).await {
                Ok(h) => lis.commit(h.id).await.map(|_| true),
                Err(_) => Ok(false),
            }
        } else {
            let l = &g.links()[rng.gen_range(0..g.links().len())];
            let req =
                NetworkHoldRequest { txn: TxnId::nil(), links: vec![l.id.clone()], bandwidth_mbps: 500, start, end };
            match local.nis.prepare(&req).await {
                Ok(h) => local.nis.commit(h.id).await.map(|_| true),
                Err(_) => Ok(false),
            }
        };
        if booked_now.unwrap() {
            booked += 1;
        }
    }
}

fn requests(g: &Grid) -> Vec<PlanRequest> {
    // 4-CPU-trace values keep the jobs typical (8-128 CPUs after clamping); arrivals spread over
    // the filled horizon by a low offered load.
    let trace: Vec<u32> = vec![8, 8, 16, 16, 32, 64, 128];
    let params = WorkloadParams { requests: 512, load: 0.05, seed: 2, ..WorkloadParams::for_kind(AppKind::Workflow) };
    let reqs = generate(&trace, g.total_cpus(), &params).unwrap();
    assert!(reqs.last().unwrap().submitted_at() < DEFAULT_START + HORIZON_S);
    reqs
}

/// Plans every request once on `local`, timing each plan alone: (median ns, p99 ns, summary).
fn per_plan(
    rt: &tokio::runtime::Runtime,
    local: &InProcessGrid,
    cfg: &PlannerConfig,
    reqs: &[PlanRequest],
) -> (f64, f64, Summary) {
    let planner = Planner::new(cfg.clone(), local.services());
    let mut ns = Vec::new();
    let mut outcomes = Vec::new();
    for r in reqs {
        let t = Instant::now();
        outcomes.push(rt.block_on(planner.plan(r)));
        ns.push(t.elapsed().as_nanos() as f64);
    }
    ns.sort_by(f64::total_cmp);
    (ns[ns.len() / 2], ns[ns.len() * 99 / 100], Summary::of(&outcomes))
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let g = grid();
    assert_eq!(g.sites().len(), 100);
    let clock = Arc::new(ManualClock::new(DEFAULT_START));
    let fresh = |fill_it: bool| {
        let local = InProcessGrid::new(&g, clock.clone(), 120, Routing::Shortest);
        if fill_it {
            rt.block_on(fill(&g, &local));
        }
        local
    };
    let reqs = requests(&g);
    let cfg = PlannerConfig::default(); // BIR, time, w_interval 30 min
                                        // 1. Each plan timed alone, on fresh grids: the per-plan distribution.
    let (loaded_med, loaded_p99, loaded_sum) = per_plan(&rt, &fresh(true), &cfg, &reqs);
    let (empty_med, empty_p99, empty_sum) = per_plan(&rt, &fresh(false), &cfg, &reqs);
    println!("per plan, 1e5 reservations: median {loaded_med:.0} ns, p99 {loaded_p99:.0} ns, {loaded_sum:?}");
    println!("per plan, empty grid:       median {empty_med:.0} ns, p99 {empty_p99:.0} ns, {empty_sum:?}");
    // 2. criterion over the same requests, cycling (what it calls the median is the median of
    //    sample means, so the search's heavy tail is inside it).
    let (loaded, empty) = (fresh(true), fresh(false));
    let mut c = Criterion::default().configure_from_args().warm_up_time(Duration::from_millis(500));
    let mut group = c.benchmark_group("planner");
    group.measurement_time(Duration::from_secs(5));
    for (name, local) in [("diamond_bir_time/1e5_reservations", &loaded), ("diamond_bir_time/empty_grid", &empty)] {
        let planner = Planner::new(cfg.clone(), local.services());
        let mut i = 0usize;
        group.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) % reqs.len();
                rt.block_on(planner.plan(&reqs[i]))
            })
        });
    }
    group.finish();
    c.final_summary();
    use report::{Fig, Row};
    let notes = format!(
        "One planner (BIR, policy `time`, w_interval 30 min, search budget {} fixes) plans and commits 4-job \
         diamond workflows (the workload rules of Ando & Aida, see docs/simulator.md) on a 100-site gridg-w grid (20 LANs x 5 sites) whose \
         calendars already hold 10^5 committed reservations (80 % compute, 20 % single-link bandwidth) over 60 \
         days. 512 requests spread over that horizon; each is timed alone (rows `per_plan`), then criterion \
         cycles through them (rows `criterion`: median of sample means, so the heavy tail of the backtracking \
         search, p99 above, weighs in). Baseline: the same requests on the empty grid, same run. \
         Success rate {:.3} with 10^5 reservations ({} messages/plan on average), {:.3} on the empty grid.",
        cfg.max_fixes,
        loaded_sum.success_rate,
        loaded_sum.messages / loaded_sum.requests as u64,
        empty_sum.success_rate,
    );
    report::write_section(
        "planner",
        "Planner, in process",
        "cargo bench --bench planner",
        &notes,
        &[
            Row {
                name: "planner/per_plan_median/1e5_reservations",
                what: "plan + commit one diamond: median over 512 plans",
                median: Fig::Measured(loaded_med),
                baseline: Some(Fig::Measured(empty_med)),
                target_ns: Some(1_000_000.0),
            },
            Row {
                name: "planner/per_plan_p99/1e5_reservations",
                what: "same, 99th percentile",
                median: Fig::Measured(loaded_p99),
                baseline: Some(Fig::Measured(empty_p99)),
                target_ns: None,
            },
            Row {
                name: "planner/criterion/1e5_reservations",
                what: "criterion, cycling the 512 requests",
                median: Fig::Criterion("planner/diamond_bir_time/1e5_reservations"),
                baseline: Some(Fig::Criterion("planner/diamond_bir_time/empty_grid")),
                target_ns: None,
            },
        ],
    );
}
