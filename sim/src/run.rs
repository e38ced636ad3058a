//! One simulated run: one topology x kind x algorithm x offered load x seed.
//!
//! Discrete-event simulation on tokio's paused clock (a current-thread runtime that jumps to
//! the next timer whenever every task waits): requests arrive at their `submitted_at`, each to a
//! seeded random planner; every planner is the production [`Planner`] working through its queue,
//! up to `planner_concurrency` requests at once (the scenario's setting); every participant
//! message takes a simulated service time ([`SimParticipant`]). The production LIS / NIS / GIS hold the state. Every committed plan
//! must pass the production outcome checker.

use std::collections::BTreeSet;
use std::sync::Arc;

use anyhow::{bail, Result};
use coreserve::check::check_outcomes;
use coreserve::clock::Clock;
use coreserve::fairshare::Ledger;
use coreserve::in_process::InProcessGrid;
use coreserve::model::{Grid, Outcome, PlanRequest, PlanStatus, SiteId};
use coreserve::planner::{Planner, PlannerConfig, Services};
use coreserve::protocol::{Compute, Network, Participant, Role};
use coreserve::replay::{dispatch, Dispatch, FairDispatch, Summary};
use indicatif::ProgressBar;

use crate::algorithm::Algorithm;
use crate::report::{network_load, Rejections, RunRow};
use crate::scenario::Scenario;
use crate::transport::{SimParticipant, VirtualClock};

/// Stream salts: every random component of a run has its own stream (docs/simulator.md).
const LATENCY_SEED: u64 = 0x6c61_7465_6e63_7900;
const DISPATCH_SEED: u64 = 0x6469_7370_6174_6368;
const PLANNER_SEED: u64 = 0x706c_616e_6e65_7200;

/// The base seed of a run's planners ([`Planner::seeds_from`] derives each planner's own): what
/// the validation passes the service as `serve --planner-seed`.
pub fn planner_seed(run_seed: u64) -> u64 {
    run_seed ^ PLANNER_SEED
}

/// The identity of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunKey {
    pub topology: String,
    pub kind: String,
    pub algorithm: Algorithm,
    pub load: f64,
    pub seed: u64,
}

/// Simulates `requests` (sorted by arrival) on `grid` with `algorithm`; returns the run's row
/// and its outcomes (in arrival order).
///
/// # Errors
/// When the outcome checker finds a violation (a bug: the run is not reported).
pub fn simulate(s: &Scenario, key: &RunKey, grid: &Grid, requests: &[PlanRequest]) -> Result<(RunRow, Vec<Outcome>)> {
    simulate_with(s, key, grid, requests, None)
}

/// Planned-Use fair share in a run (`crate::fairshare`): the ledger every plan is charged to
/// and the admission window of the dispatch (`coreserve::replay::FairDispatch`).
#[derive(Clone)]
pub struct FairShare {
    pub ledger: Arc<Ledger>,
    pub window_s: i64,
}

/// [`simulate`], with `fair` share (`None`: first come, first served).
///
/// # Errors
/// As [`simulate`].
pub fn simulate_with(
    s: &Scenario,
    key: &RunKey,
    grid: &Grid,
    requests: &[PlanRequest],
    fair: Option<&FairShare>,
) -> Result<(RunRow, Vec<Outcome>)> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build()?;
    let outcomes = rt.block_on(run(s, key, grid, requests, fair))?;
    let violations = check_outcomes(grid, requests, &outcomes, s.w_interval_s);
    if !violations.is_empty() {
        bail!("{key:?}: the outcome checker found {} violations, first: {}", violations.len(), violations[0]);
    }
    Ok((RunRow::of(key, grid, requests, &outcomes, s.warmup_requests), outcomes))
}

impl RunRow {
    /// The row of run `key`: `requests` on `grid` and their `outcomes` (both in arrival
    /// order). The first `warmup` outcomes are simulated but not counted (a warm-up, the
    /// scenario's `warmup_requests`); the network offered load is that of all the requests.
    pub fn of(key: &RunKey, grid: &Grid, requests: &[PlanRequest], outcomes: &[Outcome], warmup: usize) -> RunRow {
        let outcomes = &outcomes[warmup.min(outcomes.len())..];
        let sum = Summary::of(outcomes);
        let quarter = outcomes.len().div_ceil(4);
        let success = |part: &[Outcome]| Summary::of(part).success_rate;
        RunRow {
            topology: key.topology.clone(),
            kind: key.kind.clone(),
            algorithm: key.algorithm,
            load: key.load,
            seed: key.seed,
            requests: sum.requests as u64,
            committed: sum.committed as u64,
            success_rate: sum.success_rate,
            mean_cost: sum.average_cost_per_cpu_hour,
            messages: sum.messages,
            holds_aborted: sum.holds_aborted,
            planning_s_mean: outcomes.iter().map(|o| o.planning_ms / 1000.0).sum::<f64>()
                / outcomes.len().max(1) as f64,
            network_load: network_load(grid, requests),
            rejected: Rejections::of(outcomes),
            success_first_quarter: success(&outcomes[..quarter]),
            success_last_quarter: success(&outcomes[outcomes.len() - quarter..]),
            sites_per_plan: sites_per_plan(outcomes),
            local_transfer_share: local_transfer_share(outcomes),
            rounds: outcomes.iter().map(|o| o.rounds).sum(),
        }
    }
}

/// The committed plans among `outcomes`.
fn committed(outcomes: &[Outcome]) -> impl Iterator<Item = &Outcome> {
    outcomes.iter().filter(|o| o.status == PlanStatus::Committed)
}

/// Mean number of distinct sites a committed plan's jobs run on; 0 when none committed.
fn sites_per_plan(outcomes: &[Outcome]) -> f64 {
    let sites: Vec<usize> =
        committed(outcomes).map(|o| o.jobs.iter().map(|j| &j.site).collect::<BTreeSet<_>>().len()).collect();
    sites.iter().sum::<usize>() as f64 / sites.len().max(1) as f64
}

/// Share of the committed plans' transfers that use no link (both jobs on one site or node);
/// 0 when no committed plan has a transfer.
fn local_transfer_share(outcomes: &[Outcome]) -> f64 {
    let (local, all) = committed(outcomes)
        .flat_map(|o| &o.transfers)
        .fold((0usize, 0usize), |(l, a), t| (l + usize::from(t.path.is_empty()), a + 1));
    local as f64 / all.max(1) as f64
}

async fn run(
    s: &Scenario,
    key: &RunKey,
    grid: &Grid,
    requests: &[PlanRequest],
    fair: Option<&FairShare>,
) -> Result<Vec<Outcome>> {
    let Some(first) = requests.first() else { return Ok(vec![]) };
    let clock = Arc::new(VirtualClock::new(first.submitted_at()));
    let local = InProcessGrid::new(grid, clock.clone(), s.lease_s(), s.routing()?);
    // Sites in id order, so each participant's latency stream does not depend on hashing.
    let mut site_ids: Vec<&SiteId> = local.lis.keys().collect();
    site_ids.sort();
    let latency_seed = key.seed ^ LATENCY_SEED;
    // Each participant has its own latency stream: sites by index, then the NIS.
    let (t, b) = (&s.service_times, s.batch_messages);
    let services = Services {
        gis: local.gis.clone(),
        lis: site_ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let lis =
                    SimParticipant::new(local.lis[*id].clone(), Compute::KIND, t.clone(), b, latency_seed, i as u64);
                ((*id).clone(), Arc::new(lis) as Arc<dyn Participant<Compute>>)
            })
            .collect(),
        nis: Arc::new(SimParticipant::new(
            local.nis.clone(),
            Network::KIND,
            t.clone(),
            b,
            latency_seed,
            site_ids.len() as u64,
        )),
        clock: clock.clone(),
    };
    let template = PlannerConfig {
        w_interval_s: s.w_interval_s,
        policy: key.algorithm.policy,
        method: key.algorithm.method,
        query_fanout: s.query_fanout,
        bbr_replans: s.bbr_replans,
        backtrack: s.backtrack,
        batch_queries: s.batch_messages,
        batch_aborts: s.batch_messages,
        check_before_hold: s.check_before_hold,
        hold_with_transfers: s.hold_with_transfers,
        plan_from_snapshots: s.plan_from_snapshots,
        ..Default::default()
    };
    let planners = Planner::pool(s.planners, &template, &services, Planner::seeds_from(planner_seed(key.seed)));
    // Requests queue at their planner (no back-pressure on arrivals).
    let fair_share = fair.map(|f| FairDispatch {
        ledger: f.ledger.clone(),
        window_s: f.window_s,
        clock: clock.clone() as Arc<dyn Clock>,
    });
    let d = Dispatch {
        rule: s.dispatch,
        seed: key.seed ^ DISPATCH_SEED,
        concurrency: s.planner_concurrency,
        queue_capacity: requests.len(),
        fair_share,
    };
    let outcomes = dispatch(planners, Arc::new(requests.to_vec()), &d, ProgressBar::hidden(), |_, r| {
        tokio::time::sleep_until(clock.instant_of(r.submitted_at()))
    })
    .await;
    if local.holds_outstanding() != 0 {
        bail!("{key:?}: {} holds outstanding after every plan ended", local.holds_outstanding());
    }
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    use coreserve::model::{from_time, Link, Node, RawPlanRequest, ReservationMethod, SelectionPolicy, Site};
    use coreserve::replay::DispatchRule;

    use super::*;

    const T0: i64 = 1_767_225_600;

    fn scenario(planners: usize) -> Scenario {
        let mut s: Scenario = toml::from_str(&format!(
            "name = 't'\ntrace = 'unused'\nloads = [1.0]\nseeds = 1\nrequests = 1\nplanners = {planners}"
        ))
        .unwrap();
        s.dir = ".".into();
        s
    }

    /// One 8-CPU linux site at 1.0 per CPU-hour and one 16-CPU bsd site at 2.0, one link.
    fn grid() -> Grid {
        let node = |id: &str| Node::new(id, "");
        let site = |id: &str, n: &str, cpus, os: &str, price| Site::new(id, n, cpus, os, price);
        Grid::new(
            vec![node("a"), node("b")],
            vec![Link { id: "ab".into(), a: "a".into(), b: "b".into(), capacity_mbps: 1000, price_per_gbps_hour: 0.5 }],
            vec![site("lx", "a", 8, "linux", 1.0), site("bs", "b", 16, "bsd", 2.0)],
        )
        .unwrap()
    }

    fn request(
        id: &str,
        at: i64,
        jobs: serde_json::Value,
        transfers: serde_json::Value,
        deadline_after: i64,
    ) -> PlanRequest {
        let raw: RawPlanRequest = serde_json::from_value(serde_json::json!({
            "id": id, "submitted_at": from_time(at), "deadline": from_time(at + deadline_after),
            "jobs": jobs, "transfers": transfers,
        }))
        .unwrap();
        PlanRequest::new(raw).unwrap()
    }

    fn key(method: ReservationMethod) -> RunKey {
        RunKey {
            topology: "t".into(),
            kind: "workflow".into(),
            algorithm: Algorithm { method, policy: SelectionPolicy::Time },
            load: 1.0,
            seed: 1,
        }
    }

    /// Three single-job requests for the whole 8-CPU site over the same hour, the deadline
    /// leaving no room to shift: the first arrival is booked, the others cannot be. Success
    /// 1/3, average cost = the site's price, and the virtual planning time is the sum of the
    /// Table 2 service times of the messages (search 2-3 s, hold 1-2 s, commit 1-2 s).
    #[test]
    fn accounting_matches_a_hand_computed_run() {
        let job = serde_json::json!([{"name": "A", "os": "linux", "cpus": 8, "offset_s": 0, "duration_s": 3600}]);
        let reqs: Vec<PlanRequest> = (0..3)
            .map(|i| request(&format!("r{i}"), T0 + i, job.clone(), serde_json::json!([]), 1800 + 3600 + 10))
            .collect();
        let (row, outcomes) = simulate(&scenario(1), &key(ReservationMethod::Bir), &grid(), &reqs).unwrap();
        assert_eq!((row.requests, row.committed), (3, 1));
        assert!((row.success_rate - 1.0 / 3.0).abs() < 1e-12);
        assert!((row.mean_cost - 1.0).abs() < 1e-12, "8 CPU-hours at 1.0 cost 8.0: 1.0 per CPU-hour");
        assert!((outcomes[0].cost - 8.0).abs() < 1e-12);
        // r0: one search (2-3 s), one hold (1-2 s), one commit (1-2 s); 3 messages.
        assert_eq!(outcomes[0].messages, 3);
        assert!((4.0..=7.0).contains(&(outcomes[0].planning_ms / 1000.0)), "{}", outcomes[0].planning_ms);
        assert!(outcomes[1..].iter().all(|o| o.reason.is_some()));
    }

    /// The same three requests with the first as a warm-up: it is still simulated (it takes
    /// the site, so the others fail as before) but only the two others are counted.
    #[test]
    fn warm_up_requests_are_simulated_but_not_counted() {
        let job = serde_json::json!([{"name": "A", "os": "linux", "cpus": 8, "offset_s": 0, "duration_s": 3600}]);
        let reqs: Vec<PlanRequest> = (0..3)
            .map(|i| request(&format!("r{i}"), T0 + i, job.clone(), serde_json::json!([]), 1800 + 3600 + 10))
            .collect();
        let mut s = scenario(1);
        s.warmup_requests = 1;
        let (row, outcomes) = simulate(&s, &key(ReservationMethod::Bir), &grid(), &reqs).unwrap();
        assert_eq!(outcomes.len(), 3, "every request is simulated");
        assert_eq!((row.requests, row.committed, row.success_rate), (2, 0, 0.0));
        let r = row.rejected;
        let counted =
            r.rejected_time_limit + r.rejected_batch + r.rejected_no_plan + r.rejected_budget + r.rejected_other;
        assert_eq!(counted, 2, "{r:?}");
        assert_eq!((row.success_first_quarter, row.success_last_quarter), (0.0, 0.0));
    }

    /// Three requests at the same instant, three planners that plan one at a time: the
    /// service's rule (`least-busy`) gives each planner one; the seeded draw (`random`, seed 1)
    /// gives one planner two of them.
    #[test]
    fn least_busy_dispatch_gives_each_idle_planner_a_request() {
        let job = serde_json::json!([{"name": "A", "os": "linux", "cpus": 1, "offset_s": 0, "duration_s": 600}]);
        let reqs: Vec<PlanRequest> =
            (0..3).map(|i| request(&format!("r{i}"), T0, job.clone(), serde_json::json!([]), 20_000)).collect();
        let planners_used = |rule| {
            let s = Scenario { dispatch: rule, ..scenario(3) };
            let (_, outcomes) = simulate(&s, &key(ReservationMethod::Bir), &grid(), &reqs).unwrap();
            outcomes.iter().map(|o| o.planner.clone()).collect::<BTreeSet<_>>().len()
        };
        assert_eq!(planners_used(DispatchRule::LeastBusy), 3);
        assert!(planners_used(DispatchRule::Random) < 3);
    }

    /// A co-allocation of a linux and a bsd job with a 600 Mbps transfer: compute cost
    /// 8 x 1 h x 1.0 + 8 x 1 h x 2.0 = 24, network 0.6 Gbps x 1 h x 0.5 = 0.3; average cost =
    /// 24.3 / 16 CPU-hours.
    #[test]
    fn network_cost_enters_the_average_cost() {
        let jobs = serde_json::json!([
            {"name": "A", "os": "linux", "cpus": 8, "offset_s": 0, "duration_s": 3600},
            {"name": "B", "os": "bsd", "cpus": 8, "offset_s": 0, "duration_s": 3600}]);
        let transfers =
            serde_json::json!([{"from": "A", "to": "B", "bandwidth_mbps": 600, "offset_s": 0, "duration_s": 3600}]);
        for method in [ReservationMethod::Bbr, ReservationMethod::Bir, ReservationMethod::BbrOverlay] {
            let reqs = vec![request("r", T0, jobs.clone(), transfers.clone(), 20_000)];
            let (row, outcomes) = simulate(&scenario(3), &key(method), &grid(), &reqs).unwrap();
            assert_eq!(row.committed, 1, "{method}: {outcomes:?}");
            assert!((row.mean_cost - 24.3 / 16.0).abs() < 1e-12, "{method}: {}", row.mean_cost);
            assert_eq!(row.holds_aborted, 0);
        }
    }
}
