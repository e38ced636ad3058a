//! The search driven by tables of answers: a [`TentativeBook`] whose sites and paths are a
//! table, with no participant and no clock, and a log of what the search asked and fixed.

use std::collections::HashMap;

use super::{Attempt, Backtrack, PlannerConfig};
use crate::model::{from_time, Outcome, PlanRequest, PlanStatus, RawPlanRequest, ReservationMethod};
use crate::model::{SelectionPolicy, SiteId, Time};
use crate::planner::fixes::{Fix, Fixes, JobFix, TentativeBook, TransferFix};
use crate::protocol::{Candidates, ComputeOffer, NetworkQuery, ParticipantError, Route};

const T0: Time = 1_767_225_600; // 2026-01-01T00:00:00Z

/// What the participants answer.
#[derive(Default)]
struct Table {
    /// The candidate sites of each job, in job order.
    candidates: Vec<Vec<&'static str>>,
    /// Per site: its price per CPU-hour and the first instant its CPUs are free (it offers
    /// `max(t_bgn, free_from)`, if the job then ends by the deadline).
    sites: HashMap<&'static str, (f64, Time)>,
    /// Site pairs no path joins (either direction).
    no_path: Vec<(&'static str, &'static str)>,
}

/// A book whose answers come from a [`Table`]: fixes are local, nothing is held.
struct TableBook<'t> {
    table: &'t Table,
    req: &'t PlanRequest,
    fixes: Fixes,
    messages: u64,
    /// What the search did, in order: `fix JOB@SITE`, `route A->B`, `undo N`.
    log: Vec<String>,
}

impl<'t> TableBook<'t> {
    fn new(table: &'t Table, req: &'t PlanRequest) -> Self {
        TableBook { table, req, fixes: Fixes::new(req), messages: 0, log: Vec::new() }
    }

    fn answer(&mut self, q: &NetworkQuery) -> Result<Option<Route>, ParticipantError> {
        self.messages += 1;
        let (a, b) = (q.from_site.as_str(), q.to_site.as_str());
        self.log.push(format!("route {a}->{b}"));
        let blocked = self.table.no_path.iter().any(|&(x, y)| (x, y) == (a, b) || (y, x) == (a, b));
        let route =
            Route { links: vec![format!("{a}-{b}").into()], price_per_gbps_hour: 0.0, free_mbps: 1000, marking: None };
        Ok((!blocked).then_some(route))
    }

    /// The sites job `name` was fixed at, in order.
    fn fixes_of(&self, name: &str) -> Vec<String> {
        let prefix = format!("fix {name}@");
        self.log.iter().filter_map(|l| l.strip_prefix(&prefix)).map(str::to_owned).collect()
    }
}

impl TentativeBook for TableBook<'_> {
    fn fixes(&self) -> &Fixes {
        &self.fixes
    }

    fn fixes_mut(&mut self) -> &mut Fixes {
        &mut self.fixes
    }

    fn messages(&self) -> u64 {
        self.messages
    }

    fn now(&self) -> Time {
        T0
    }

    fn reject(&self, reason: impl Into<String>) -> Outcome {
        Outcome::rejected(self.req.id(), reason, "table")
    }

    fn own_peak_on_links(&self, _start: Time, _end: Time) -> u64 {
        0
    }

    async fn candidates(&mut self) -> Result<Vec<Candidates>, ParticipantError> {
        self.messages += 1;
        let sites = |c: &Vec<&str>| c.iter().map(|&s| SiteId::from(s)).collect();
        Ok(self.table.candidates.iter().map(|c| Candidates { sites: sites(c), ..Default::default() }).collect())
    }

    async fn offers(
        &mut self,
        v: usize,
        candidates: &[Vec<SiteId>],
        windows: &[Time],
    ) -> Vec<Result<ComputeOffer, ParticipantError>> {
        self.messages += candidates[v].len() as u64;
        candidates[v]
            .iter()
            .zip(windows)
            .map(|(site, &t_bgn)| {
                let (price, free_from) = self.table.sites[site.as_str()];
                let start = t_bgn.max(free_from);
                Ok(ComputeOffer {
                    site: site.clone(),
                    earliest_start: (start + self.req.job_span(v).duration_s <= self.req.deadline()).then_some(start),
                    utilisation: 0.0,
                    price_per_cpu_hour: price,
                    gpu_model: None,
                    price_per_gpu_hour: 0.0,
                    reservation_prefix: None,
                })
            })
            .collect()
    }

    async fn fix_job(&mut self, v: usize, offer: &ComputeOffer, start: Time) -> bool {
        self.log.push(format!("fix {}@{}", self.req.jobs()[v].name, offer.site));
        self.fixes.jobs[v] = Some(JobFix::on(offer, start));
        self.fixes.trail.push(Fix::Job(v));
        true
    }

    async fn hold_transfer(&mut self, e: usize, route: Route) -> bool {
        let interval = self.fixes.transfer_interval(self.req, e);
        self.fixes.transfers[e] = Some(TransferFix { route, hold: None, overlay: Vec::new(), interval });
        self.fixes.trail.push(Fix::Transfer(e));
        true
    }

    async fn undo_to(&mut self, mark: usize) {
        if self.fixes.trail.len() > mark {
            self.log.push(format!("undo {}", self.fixes.trail.len() - mark));
        }
        for fix in self.fixes.trail.split_off(mark) {
            match fix {
                Fix::Job(v) => self.fixes.jobs[v] = None,
                Fix::Transfer(e) => {
                    self.fixes.unfix_transfer(e);
                }
            }
        }
    }

    async fn prefetch(&mut self, _questions: Vec<NetworkQuery>) {
        unreachable!("batch_queries is off in these tests")
    }

    fn forget_prefetched(&mut self) {}

    async fn route(&mut self, q: &NetworkQuery) -> Result<Option<Route>, ParticipantError> {
        self.answer(q)
    }

    async fn ask_nis(&mut self, q: &NetworkQuery) -> Result<Option<Route>, ParticipantError> {
        self.answer(q)
    }
}

/// A request of 600 s jobs (all at offset 0) joined by 10 Mbit/s transfers, due an hour
/// after T0.
fn request(jobs: &[&str], transfers: &[(&str, &str)]) -> PlanRequest {
    let jobs: Vec<_> = jobs
        .iter()
        .map(|n| serde_json::json!({"name": n, "os": "linux", "cpus": 1, "offset_s": 0, "duration_s": 600}))
        .collect();
    let transfers: Vec<_> = transfers
        .iter()
        .map(|(a, b)| serde_json::json!({"from": a, "to": b, "bandwidth_mbps": 10, "offset_s": 0, "duration_s": 600}))
        .collect();
    let raw: RawPlanRequest = serde_json::from_value(serde_json::json!({
        "id": "r1", "user": "u", "submitted_at": from_time(T0), "deadline": from_time(T0 + 3600),
        "jobs": jobs, "transfers": transfers,
    }))
    .unwrap();
    PlanRequest::new(raw).unwrap()
}

/// Runs the search of `req` over `table` (plain BBR: nothing held, answers see no fix of the
/// plan), returning its result and the book.
async fn search<'t>(
    table: &'t Table,
    req: &'t PlanRequest,
    policy: SelectionPolicy,
    backtrack: Backtrack,
) -> (Result<(), Outcome>, TableBook<'t>) {
    let cfg = PlannerConfig { w_interval_s: 0, backtrack, ..Default::default() };
    let mut attempt = Attempt::new(&cfg, req, policy, ReservationMethod::Bbr, 7, TableBook::new(table, req));
    let result = attempt.search_plan().await;
    (result, attempt.book)
}

/// Ando & Aida, Fig. 3 against conflict-directed backjumping. Root `r` has one site, `m` two,
/// `d` three; every path from `r`'s site to `d`'s sites is missing. Fig. 3 tries `m`'s second
/// site in vain, and `d`'s three again under it; backjumping sees that `d`'s failures are
/// explained by `r` alone, so `m`'s other site cannot help, and skips it. Both reject.
#[tokio::test]
async fn backjumping_skips_the_candidates_a_failure_does_not_depend_on() {
    let req = request(&["r", "m", "d"], &[("r", "m"), ("m", "d"), ("r", "d")]);
    let table = Table {
        candidates: vec![vec!["s1"], vec!["s2", "s3"], vec!["s4", "s5", "s6"]],
        sites: [("s1", 1.0), ("s2", 1.0), ("s3", 2.0), ("s4", 1.0), ("s5", 2.0), ("s6", 3.0)]
            .into_iter()
            .map(|(s, price)| (s, (price, T0)))
            .collect(),
        no_path: vec![("s1", "s4"), ("s1", "s5"), ("s1", "s6")],
    };

    let (chronological, book) = search(&table, &req, SelectionPolicy::Cost, Backtrack::Chronological).await;
    assert!(chronological.is_err(), "no plan exists");
    assert_eq!(book.fixes_of("r"), ["s1"]);
    assert_eq!(book.fixes_of("m"), ["s2", "s3"], "Fig. 3 tries every site of m");
    assert_eq!(book.fixes_of("d"), ["s4", "s5", "s6", "s4", "s5", "s6"], "and d's under each");

    let (backjumping, book) = search(&table, &req, SelectionPolicy::Cost, Backtrack::ConflictDirected).await;
    let reason = backjumping.expect_err("no plan exists").reason.unwrap_or_default();
    assert!(reason.starts_with("no feasible plan before the deadline"), "{reason}");
    assert_eq!(book.fixes_of("m"), ["s2"], "m's other site cannot help: skipped");
    assert_eq!(book.fixes_of("d"), ["s4", "s5", "s6"]);
    assert!(
        book.fixes.jobs.iter().all(Option::is_none) && book.fixes.trail.is_empty(),
        "a rejection leaves nothing fixed"
    );
}

/// Fig. 2's `st` loop: a candidate that starts `dt` after `t_bgn` delays the whole
/// application by `dt`; the search undoes every fix and starts again at `st + dt`, where
/// both jobs fit.
#[tokio::test]
async fn a_late_offer_shifts_the_start_of_the_whole_application() {
    let req = request(&["a", "b"], &[("a", "b")]);
    let table = Table {
        candidates: vec![vec!["s1"], vec!["s2"]],
        sites: HashMap::from([("s1", (1.0, T0)), ("s2", (1.0, T0 + 500))]),
        no_path: vec![],
    };
    let (result, book) = search(&table, &req, SelectionPolicy::Time, Backtrack::ConflictDirected).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(book.fixes.st, T0 + 500, "st moved by b's delay");
    assert_eq!(book.log, ["fix a@s1", "undo 1", "fix a@s1", "fix b@s2", "route s1->s2"]);
    assert_eq!(book.fixes.trail.len(), 3, "both jobs and the transfer fixed");
}

/// The selection policies order a job's candidates (Ando & Aida, section 3.1): `cost` by the
/// price of the job there, `time` by the earliest start; the first that fits is fixed. An
/// offer that cannot end by the deadline is no candidate, and with none left the request is
/// rejected.
#[tokio::test]
async fn policies_order_the_candidates_and_a_late_site_is_none() {
    let req = request(&["a"], &[]);
    let table = Table {
        candidates: vec![vec!["s1", "s2", "s3"]],
        sites: HashMap::from([("s1", (3.0, T0)), ("s2", (1.0, T0 + 300)), ("s3", (2.0, T0 + 3500))]),
        no_path: vec![],
    };
    let (result, book) = search(&table, &req, SelectionPolicy::Cost, Backtrack::ConflictDirected).await;
    assert!(result.is_ok());
    assert_eq!(book.fixes_of("a"), ["s2"], "the cheapest site that fits (s3 ends after the deadline)");
    assert_eq!(book.fixes.st, T0 + 300, "s2 is free from T0 + 300: the application starts then");

    let (result, book) = search(&table, &req, SelectionPolicy::Time, Backtrack::ConflictDirected).await;
    assert!(result.is_ok());
    assert_eq!((book.fixes_of("a"), book.fixes.st), (vec!["s1".to_owned()], T0), "the earliest start");

    let late =
        Table { sites: HashMap::from([("s1", (1.0, T0 + 3500))]), candidates: vec![vec!["s1"]], ..Table::default() };
    let (result, book) = search(&late, &req, SelectionPolicy::Time, Backtrack::ConflictDirected).await;
    let outcome = result.expect_err("no site can end by the deadline");
    assert_eq!(outcome.status, PlanStatus::Rejected);
    assert!(book.log.is_empty(), "nothing was fixed: {:?}", book.log);
}
