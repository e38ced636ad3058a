//! The planner: builds a reservation plan for a plan request by backtracking search over the
//! request graph and books it with two-phase commit (Ando & Aida, section 3, Figs. 2-3; see
//! docs/algorithm.md).
//!
//! 1. The GIS gives the candidate sites of every job (compute demand).
//! 2. `st := max(arrival + w_interval, not_before)`; the root is the job with the fewest
//!    candidates.
//! 3. `search(root, st)` returns SUCCESS, NOTFOUND or a delay `dt > 0`; on a delay
//!    `st += dt` and the search starts again; NOTFOUND rejects the request.
//! 4. `search(rm)` asks the candidates' LISes for the earliest start in `[st + offset(rm),
//!    deadline]`, orders the answers by the [`SelectionPolicy`], and for each candidate `c`:
//!    if it starts later than `t_bgn` it returns the delay; otherwise it fixes `rm := c` and
//!    satisfies `rm`'s network demands — first those whose other end is fixed (random order:
//!    check the NIS, fail the candidate if the bandwidth is not there), then those whose other
//!    end is free (fewest candidates first: recurse). A failed candidate undoes its fixes and
//!    the next is tried — unless the failure is explained by jobs fixed before `rm` only:
//!    then, by default, `rm`'s other on-time candidates are skipped (conflict-directed
//!    backjumping, [`Backtrack`]; docs/algorithm.md).
//!
//! Reservation methods ([`ReservationMethod`], Ando & Aida, section 3.2): **BIR** holds every
//! tentative fix at once (prepare), aborts holds on backtrack and on every `st` shift, and
//! commits them all at the end; **BBR** fixes locally and, once the plan is complete, prepares
//! everything in one batch — any refused prepare aborts the batch and rejects the request.
//! **BBR-overlay** is BBR plus a local overlay of the plan's own tentative fixes: every query
//! asks for the demand plus the plan's own peak usage already placed there (per site; for
//! bandwidth, the peak on any link the plan uses), so a complete plan never conflicts with
//! itself, and nothing is held remotely until the batch.
//!
//! Time limits: the search stops when the planner's clock passes arrival + `w_interval` (the
//! planner's own deadline for building a plan), or after `max_fixes` tentative fixes.
//! Commit is all-or-nothing: if a participant refuses a commit (its lease ran out), every other
//! hold is aborted and every committed part released before the request is rejected. With a
//! decision log, a plan whose phase 2 cannot be finished now is left in doubt, never reported
//! committed ([`Settlement::InDoubt`]; see [`crate::protocol::decision`]).
//!
//! The planner only sees participants through [`crate::protocol`], so the same code runs
//! in-process, over HTTP and in the simulator.
//!
//! Files: `search` (the search, Figs. 2-3: which job goes where, in what order, and why a
//! branch failed; it sends no message itself), `fixes` (what the search fixes, and the
//! `TentativeBook` it asks and fixes through), `book` (the attempt's tentative holds: every
//! query, hold and abort the search asks for, the trail that undoes them, BBR-overlay's
//! overlay, batched queries and aborts, and phase 1 of the finished plan), `queries` (the
//! book's cache of batched answers), `snapshots` (BIR planned from snapshots of the
//! participants' calendars: the search on local replicas, the holds in one round),
//! `coordinator` (the decision and phase 2 over held
//! parts, shared by planning, `modify` and `recover`), `commit` (phase 2's messages: commit
//! or compensate every part), `modify` (a committed plan changed with replacement holds),
//! `recover` (settling in-doubt transactions).

mod book;
mod commit;
mod coordinator;
mod fixes;
mod modify;
mod queries;
mod recover;
mod search;
mod sent;
mod snapshots;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::clock::Clock;
use crate::model::{Outcome, PlanRequest, PlanStatus, ReservationMethod, SelectionPolicy, SiteId};
use crate::protocol::decision;
pub use crate::protocol::decision::{Booking, InDoubt};
pub use crate::protocol::ParticipantRef;
use crate::protocol::{Catalogue, Compute, Network, Participant, ParticipantError};
pub use commit::{PartName, TwoPhaseError, Unsettled};
use fixes::TentativeBook;
pub use modify::ModifyOptions;
pub use recover::Recovery;
pub use snapshots::SNAPSHOT_REPLANS;

/// Planner settings.
#[derive(Debug, Clone)]
pub struct PlannerConfig {
    /// Name reported in outcomes (`planner` field).
    pub name: String,
    /// `w_interval`: the time the planner allows itself to build a plan (30 min in Ando & Aida).
    /// The application starts no earlier than arrival + this, and a plan not decided by then
    /// (by the services' clock) is rejected.
    pub w_interval_s: i64,
    /// Policy for requests that do not name one.
    pub policy: SelectionPolicy,
    /// Method for requests that do not name one.
    pub method: ReservationMethod,
    /// Seed of the planner's random stream (policy `random`, neighbour order).
    pub seed: u64,
    /// Safety bound on `st` shifts for one request (each shift is at least one second).
    pub max_shifts: u32,
    /// Search budget: tentative fixes (candidates tried, over all shifts) for one request.
    /// The backtracking search is exponential in the worst case (every candidate of every
    /// vertex against every other); past this many fixes the request is rejected.
    pub max_fixes: u32,
    /// How the search asks a job's candidate sites for their earliest start (Ando & Aida do
    /// not say): all at once, one wait per search step (the default), or one after the other.
    pub query_fanout: QueryFanout,
    /// BBR and BBR-overlay: how many times a request whose batch prepare was refused is
    /// planned again, with a fresh search, before it is rejected. Ando & Aida reject it at
    /// once: the default is 0. Each new search still ends at arrival + `w_interval`.
    pub bbr_replans: u32,
    /// Ask each LIS once per search step about every job the step may still need from it
    /// (one message instead of one per job; see `queries`). Off by default (the simulator's
    /// message counts are those of Ando & Aida); the service turns it on for remote participants.
    pub batch_queries: bool,
    /// Abort the holds a backtrack or a shift of `st` gives up with one message per
    /// participant, all participants at once (`HoldLifecycle::abort_all`), instead of one
    /// message per hold, one after the other. Off by default (the simulator's message counts
    /// are those of Ando & Aida); the service turns it on for remote participants.
    pub batch_aborts: bool,
    /// BIR with backjumping: ask the NIS about a candidate's transfers to already fixed jobs
    /// before holding the candidate, not after (the same checks, the same answers: they do not
    /// depend on its CPUs), so a candidate the network rules out costs no prepare and no
    /// abort. Off by default (the simulator's message counts are those of Ando & Aida); the
    /// service turns it on.
    pub check_before_hold: bool,
    /// With `check_before_hold`: a candidate's prepare and the holds of its checked transfers
    /// go out together, one round instead of one per part (issue 53; docs/algorithm.md,
    /// "Fewer rounds"). The same answers, in another order: concurrent
    /// messages take the longest one's time, not their sum, and a hold refused by another
    /// planner is asked again after the others, not before. Off by default (the simulator's
    /// committed results were planned without it); the service turns it on.
    pub hold_with_transfers: bool,
    /// BIR: plan from snapshots (issue 53; docs/algorithm.md, "Plans from snapshots"). One
    /// round asks every candidate LIS and the NIS for its calendars over the request's window
    /// ([`crate::protocol::Participant::snapshot`]); the search runs on local replicas of them
    /// (the participants' own query code, no message), and the plan's holds go out in one
    /// round ([`crate::protocol::Participant::prepare_all`]), checked again by every
    /// participant. A refused prepare (the capacity was taken since the snapshot) is given
    /// back and the request searched again from fresh snapshots, at most [`SNAPSHOT_REPLANS`]
    /// times, then as without this setting. Alone on the grid the plans are those of the search
    /// that asks as it goes, in fewer rounds. A participant that gives no snapshot (a NIS with
    /// a data plane, a transport without the message) is planned with as before. Off by default
    /// (the simulator's committed results were planned without it); the service turns it on
    /// for remote participants.
    pub plan_from_snapshots: bool,
    /// How the search backtracks when every candidate below a fix failed (docs/algorithm.md,
    /// "Backjumping"). Default [`Backtrack::ConflictDirected`]; [`Backtrack::Chronological`] is
    /// Fig. 3 to the letter (coreserve before issue 13), kept as the benchmarks' baseline.
    pub backtrack: Backtrack,
    /// When a request finds no plan before its deadline, search once more (BBR-overlay, dry
    /// run: nothing is held) with the deadline moved to `submitted_at + this` and say in the
    /// rejection when the whole plan would fit, or that it fits nowhere before then, within a
    /// budget of [`EARLIEST_FIT_SHIFTS`] start times. `None` (the default, as in Ando & Aida):
    /// no second search. The service sets its horizon (`--horizon-days`).
    pub earliest_fit_horizon_s: Option<i64>,
    /// Before the search, tell a request that can never fit on this grid from one that does
    /// not fit now (issue 46): jobs that must run together (at fixed offsets) needing more
    /// CPUs than all the sites that can run them have, or a transfer between jobs with no
    /// candidate site in common needing more bandwidth than the widest path between their
    /// sites carries (one NIS message, [`crate::protocol::Participant::ceilings`], asked only
    /// for such transfers). Such a request is rejected as unsatisfiable
    /// ([`Settlement::Unsatisfiable`]), `can never fit on this grid: ...`. Off by default (the
    /// simulator's message counts are those of Ando & Aida); the service turns it on.
    pub static_check: bool,
}

/// The most start-time shifts the earliest-fit search of a rejection tries (see
/// [`PlannerConfig::earliest_fit_horizon_s`]): past it the rejection says nothing of when.
pub const EARLIEST_FIT_SHIFTS: u32 = 500;

/// How the search backtracks after a failure (see [`PlannerConfig::backtrack`]). Spelled
/// `chronological` / `conflict-directed` in the simulator's TOML and on the command line
/// (`plan`, `compare`, `demo --backtrack`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Backtrack {
    /// Ando & Aida, Fig. 3 as written: a failed candidate is undone and the next candidate of
    /// the same job is tried, whatever made it fail; network checks and holds alternate.
    Chronological,
    /// Conflict-directed backjumping (Prosser, 1993) over Fig. 3: every failure carries the set
    /// of jobs whose fixes explain it; a job whose own choice is not in the explanation of the
    /// failure below it skips its remaining on-time candidates (they would fail the same way)
    /// and returns what the loop would have returned after them: the delay of its next late
    /// candidate, or NOTFOUND with the same explanation. A network check proven infeasible is
    /// not asked again while the holds that may have caused it stay, and a job's checks
    /// against its fixed neighbours are all asked before any of them is held.
    #[default]
    ConflictDirected,
}

/// How the search sends a step's free-slot queries to the candidate sites of a job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueryFanout {
    /// Every candidate at once, the answers awaited together: one service time per step.
    #[default]
    Parallel,
    /// One candidate after the other: a step costs the sum of its queries' service times.
    Sequential,
}

impl Default for PlannerConfig {
    fn default() -> Self {
        PlannerConfig {
            name: "planner-0".into(),
            w_interval_s: 1800,
            policy: SelectionPolicy::Time,
            method: ReservationMethod::Bir,
            seed: 0,
            max_shifts: 10_000,
            max_fixes: 20_000,
            query_fanout: QueryFanout::Parallel,
            bbr_replans: 0,
            batch_queries: false,
            batch_aborts: false,
            check_before_hold: false,
            hold_with_transfers: false,
            plan_from_snapshots: false,
            backtrack: Backtrack::ConflictDirected,
            earliest_fit_horizon_s: None,
            static_check: false,
        }
    }
}

/// The planner's environment: where it finds the GIS, every LIS and the NIS, and its clock
/// (wall, replayed or virtual; see [`crate::clock`]).
#[derive(Clone)]
pub struct Services {
    pub gis: Arc<dyn Catalogue>,
    pub lis: HashMap<SiteId, Arc<dyn Participant<Compute>>>,
    pub nis: Arc<dyn Participant<Network>>,
    pub clock: Arc<dyn Clock>,
}

/// What [`Planner::plan_with`] returns: the outcome and, for a committed plan, its bookings.
#[derive(Debug, Clone)]
pub struct PlanResult {
    /// Committed, rejected or (dry run) planned. Only final when `settlement` is
    /// [`Settlement::Final`].
    pub outcome: Outcome,
    /// The committed parts (empty unless committed).
    pub bookings: Vec<Booking>,
    /// Whether `outcome` may be reported (always [`Settlement::Final`] without a log).
    pub settlement: Settlement,
}

impl PlanResult {
    /// The plan's status as its caller must report it: the outcome's (committed, rejected or
    /// planned) once final; `pending` in doubt (decided, phase 2 unconfirmed); `rejected` when
    /// the request can never be planned or its decision was not recorded (nothing is booked).
    pub fn status(&self) -> PlanStatus {
        match self.settlement {
            Settlement::Final => self.outcome.status,
            Settlement::InDoubt(_) => PlanStatus::Pending,
            Settlement::Unsatisfiable | Settlement::Undecided(_) => PlanStatus::Rejected,
        }
    }
}

/// How a plan attempt ended for its caller beyond its status ([`PlanResult::status`]): whether
/// and how it may be reported (see [`crate::protocol::decision`]).
#[derive(Debug, Clone)]
pub enum Settlement {
    /// The outcome is final and, with a log, recorded: committed (every part durable at its
    /// participant and the end logged) or rejected (nothing booked).
    Final,
    /// The request can never be planned on this grid: a job that no site of the catalogue can
    /// run (OS, CPUs or a requirement; the outcome's reason names the nearest miss). Nothing
    /// was booked nor logged; the outcome is a final rejection that the REST API answers as
    /// invalid input (422) instead of recording it.
    Unsatisfiable,
    /// The log refused the decision: nothing is booked and nothing recorded; the outcome is
    /// a rejection naming the log's error. [`decision::LogError::Superseded`]: the request's
    /// idempotency key passed to another request, which answers for it.
    Undecided(decision::LogError),
    /// A commit decision is logged but its end is not (a participant or the log did not
    /// answer, or another coordinator took the transaction over): the plan is neither booked
    /// for sure nor rejected. Its outcome must not be reported; the recovery loop settles it.
    /// The error says why.
    InDoubt(Box<Unsettled>),
}

/// How many times [`Planner::plan_with`] plans a request again after phase 1 failed at its
/// end at one site (its local scheduler refused or did not answer). Each time, the failing
/// site is left out (unavailable) or its LIS has blocked the refused window until its next
/// sync, so each new search has one candidate fewer; this bounds the extra messages to this
/// many searches per request.
pub const SITE_REPLANS: u32 = 3;

/// Whether a planning attempt may be tried again (see [`Planner::plan_with`]).
enum Again {
    No,
    /// BBR's batch prepare was refused.
    Batch,
    /// Phase 1's end failed at `site`: its scheduler did not answer (`down`) or refused.
    Site {
        site: SiteId,
        reason: String,
        down: bool,
    },
    /// A plan searched from snapshots had a prepare refused: search again from fresh ones
    /// (at most [`SNAPSHOT_REPLANS`] times).
    Snapshot,
}

/// Per-call options of [`Planner::plan_with`].
#[derive(Clone, Copy, Default)]
pub struct PlanOptions<'a> {
    /// The user the plan is booked for: prepare messages carry it, so that a LIS in front of a
    /// batch scheduler books for that user's local account. `None`: the sites' defaults.
    pub user: Option<&'a str>,
    /// Build the plan, then release every hold and book nothing: the outcome's status is
    /// `planned`.
    pub dry_run: bool,
    /// Where the coordinator logs its decision (durable two-phase commit; see
    /// [`crate::protocol::decision`]).
    /// `None`: nothing is logged (replay, the CLI, the simulator).
    pub log: Option<&'a dyn decision::DecisionLog>,
    /// Fair share's allocation limit: the plan is charged to its user's project before the
    /// decision and rejected (`allocation exceeded: ...`) if it does not fit (see
    /// [`crate::fairshare`]). `None`: no limit.
    pub charge: Option<Charge<'a>>,
}

/// Where and under which key [`Planner::plan_with`] charges a plan (see [`PlanOptions::charge`]).
#[derive(Clone, Copy)]
pub struct Charge<'a> {
    pub ledger: &'a crate::fairshare::Ledger,
    /// Unique per plan: what [`crate::fairshare::Ledger::forget`] takes when it is cancelled.
    pub key: &'a str,
}

/// One planner instance. Several may share the same [`Services`] and compete.
pub struct Planner {
    cfg: PlannerConfig,
    services: Services,
    rng: Mutex<ChaCha8Rng>,
}

impl Planner {
    /// The participants this planner speaks to.
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// A planner over `services`; "now" comes from `services.clock`.
    pub fn new(cfg: PlannerConfig, services: Services) -> Self {
        let rng = Mutex::new(ChaCha8Rng::seed_from_u64(cfg.seed));
        Planner { cfg, services, rng }
    }

    /// `n` planners over the same services, named `planner-0` .. `planner-{n-1}`, each with
    /// `template`'s settings and its own seed `seed_of(index)`.
    pub fn pool(
        n: usize,
        template: &PlannerConfig,
        services: &Services,
        seed_of: impl Fn(usize) -> u64,
    ) -> Vec<Planner> {
        (0..n)
            .map(|i| {
                let cfg = PlannerConfig { name: format!("planner-{i}"), seed: seed_of(i), ..template.clone() };
                Planner::new(cfg, services.clone())
            })
            .collect()
    }

    /// The seeds of a [`Planner::pool`] derived from one `base` seed (`base * 31 + index`,
    /// wrapping): the simulator's planners, and the service's with `serve --planner-seed`, so
    /// that the simulator's validation runs both with the same planners.
    pub fn seeds_from(base: u64) -> impl Fn(usize) -> u64 {
        move |index| base.wrapping_mul(31).wrapping_add(index as u64)
    }

    /// The planner's settings.
    pub fn config(&self) -> &PlannerConfig {
        &self.cfg
    }

    /// Plans and books `req`. Never panics on participant failures: every failure ends in a
    /// rejected [`Outcome`] with a reason and nothing left booked (see the module docs).
    pub async fn plan(&self, req: &PlanRequest) -> Outcome {
        self.plan_with(req, PlanOptions::default()).await.outcome
    }

    /// [`Planner::plan`] with options, also returning the bookings of a committed plan (what
    /// [`Planner::cancel`] needs).
    ///
    /// A plan whose phase 1 failed at its end at one site is planned again, up to
    /// [`SITE_REPLANS`] times, with a fresh search (docs/protocol.md, "A LIS in front of
    /// Slurm"): a site whose local scheduler did not answer
    /// ([`ParticipantError::SchedulerUnavailable`]) is left out of this plan's candidates, and a
    /// site whose local scheduler refused what its calendar allowed
    /// ([`ParticipantError::LocalScheduler`]: Slurm places cores, the calendar counts CPUs) is
    /// asked again, its LIS having blocked that window. A rejection names the sites left out.
    pub async fn plan_with(&self, req: &PlanRequest, opts: PlanOptions<'_>) -> PlanResult {
        let policy = req.policy().unwrap_or(self.cfg.policy);
        let method = req.method().unwrap_or(self.cfg.method);
        let started = tokio::time::Instant::now();
        let replans = if method == ReservationMethod::Bir { 0 } else { self.cfg.bbr_replans };
        let (mut sent, mut holds_aborted) = (sent::Sent::default(), 0);
        let (mut attempt, mut site_replans) = (0, 0);
        let mut unavailable: Vec<(SiteId, String)> = Vec::new();
        // BIR plans from snapshots while its participants give them and its prepares are
        // granted (at most SNAPSHOT_REPLANS refusals), then as before.
        let (mut from_snapshots, mut snapshot_replans) =
            (self.cfg.plan_from_snapshots && method == ReservationMethod::Bir, 0);
        loop {
            let seed = self.rng.lock().expect("planner rng").gen::<u64>();
            let excluded: Vec<SiteId> = unavailable.iter().map(|(s, _)| s.clone()).collect();
            let mut planned = None;
            if from_snapshots {
                let a = snapshots::SnapshotAttempt { policy, method, seed, started, excluded: excluded.clone(), opts };
                match self.attempt_from_snapshots(req, a).await {
                    Ok(p) => planned = Some(p),
                    Err(spent) => {
                        // A participant gave no snapshot: plan as before.
                        sent.then(spent);
                        from_snapshots = false;
                    }
                }
            }
            let (mut result, again) = match planned {
                Some(planned) => planned,
                None => {
                    let mut book = book::Book::new(self, req, policy, method, started);
                    book.user = opts.user.map(str::to_owned);
                    book.excluded = excluded;
                    let search = search::Attempt::new(&self.cfg, req, policy, method, seed, book);
                    Self::attempt(search, opts).await
                }
            };
            let batch = matches!(again, Again::Batch);
            let retry = match again {
                Again::No => false,
                Again::Snapshot => {
                    snapshot_replans += 1;
                    from_snapshots = snapshot_replans <= SNAPSHOT_REPLANS;
                    sent.then(sent::Sent::of(&result.outcome));
                    holds_aborted += result.outcome.holds_aborted;
                    continue;
                }
                Again::Batch => attempt < replans,
                Again::Site { site, reason, down } => {
                    if down && !unavailable.iter().any(|(s, _)| *s == site) {
                        unavailable.push((site, reason));
                    }
                    site_replans < SITE_REPLANS
                }
            };
            if retry {
                if batch {
                    attempt += 1;
                } else {
                    site_replans += 1;
                }
                sent.then(sent::Sent::of(&result.outcome));
                holds_aborted += result.outcome.holds_aborted;
                continue;
            }
            sent.then(sent::Sent::of(&result.outcome));
            result.outcome.holds_aborted += holds_aborted;
            let not_now = ["no feasible plan before the deadline", "deadline cannot be met"];
            let reason = result.outcome.reason.as_deref().unwrap_or_default();
            if let (Some(horizon_s), true) =
                (self.cfg.earliest_fit_horizon_s, not_now.iter().any(|p| reason.starts_with(p)))
            {
                let (when, asked) = self.earliest_fit(req, horizon_s).await;
                sent.then(asked);
                if let Some(when) = when {
                    result.outcome.reason = Some(format!("{reason}; {when}"));
                }
            }
            sent.write_to(&mut result.outcome);
            if result.outcome.status == PlanStatus::Rejected && !unavailable.is_empty() {
                let down: Vec<String> = unavailable.iter().map(|(s, why)| format!("site `{s}` ({why})")).collect();
                let reason = result.outcome.reason.take().unwrap_or_default();
                result.outcome.reason = Some(format!("{reason}; unavailable, left out: {}", down.join(", ")));
            }
            return result;
        }
    }

    /// The `st` loop (Ando & Aida, Fig. 2), then booking (or, for a dry run, releasing).
    /// Says whether the plan may be planned again: its batch prepare was refused (BBR, see
    /// `PlannerConfig::bbr_replans`), or phase 1's end failed at a site ([`Again::Site`]).
    async fn attempt(mut search: search::Attempt<'_, book::Book<'_>>, opts: PlanOptions<'_>) -> (PlanResult, Again) {
        let req = search.req;
        let rejected = |outcome: Outcome| PlanResult { outcome, bookings: vec![], settlement: Settlement::Final };
        match search.search_plan().await {
            Err(outcome) if search.unsatisfiable => {
                (PlanResult { outcome, bookings: vec![], settlement: Settlement::Unsatisfiable }, Again::No)
            }
            Err(outcome) => (rejected(outcome), Again::No),
            Ok(()) if opts.dry_run => {
                let mut outcome = search.book.outcome();
                outcome.status = PlanStatus::Planned;
                search.book.undo_to(0).await;
                search.book.sent.write_to(&mut outcome);
                outcome.holds_aborted = search.book.holds_aborted;
                (rejected(outcome), Again::No)
            }
            Ok(()) => match search.book.prepare_all().await {
                Ok(parts) => Self::book_parts(search.book.into_coordinator(parts), req, opts).await,
                Err(cause) => {
                    // Only BBR reaches here with holds of its own not yet aborted: BIR's are parts.
                    search.book.undo_to(0).await;
                    (search.book.rejected(cause.to_string()), Again::Batch)
                }
            },
        }
    }

    /// The decision and phase 2 of a plan whose every part is held (by `coordinator`), under
    /// `opts`' charge and log. Says whether the plan may be planned again: phase 1's end failed
    /// at a site ([`Again::Site`]).
    async fn book_parts(
        coordinator: coordinator::Coordinator,
        req: &PlanRequest,
        opts: PlanOptions<'_>,
    ) -> (PlanResult, Again) {
        let failure = coordinator.failure_cell();
        let result = coordinator.book_charged(req.user(), opts.charge, opts.log).await;
        let final_rejection =
            matches!(result.settlement, Settlement::Final) && result.outcome.status == PlanStatus::Rejected;
        let cause = failure.lock().expect("failure cell").take();
        let again = match cause {
            Some(ParticipantError::SchedulerUnavailable { site, reason }) if final_rejection => {
                Again::Site { site, reason, down: true }
            }
            Some(ParticipantError::LocalScheduler { site, reason }) if final_rejection => {
                Again::Site { site, reason, down: false }
            }
            _ => Again::No,
        };
        (result, again)
    }

    /// When `req`, rejected for now, would fit: a second search (BBR-overlay, dry run: it holds
    /// nothing) with the deadline moved to `submitted_at + horizon_s`. "the whole plan would
    /// fit from T" (the earliest application start it found), "it fits nowhere before T (the
    /// horizon)", or `None` when that search was cut short (more than
    /// [`EARLIEST_FIT_SHIFTS`] start times, or the fixes' budget) or the horizon is no later
    /// than the deadline. Also returns the messages it took.
    async fn earliest_fit(&self, req: &PlanRequest, horizon_s: i64) -> (Option<String>, sent::Sent) {
        let until = req.submitted_at().saturating_add(horizon_s);
        let mut raw = req.raw().clone();
        let Some(deadline) = chrono::TimeZone::timestamp_opt(&chrono::Utc, until, 0).single() else {
            return (None, sent::Sent::default());
        };
        if until <= req.deadline() {
            return (None, sent::Sent::default());
        }
        raw.deadline = deadline;
        let Ok(wider) = PlanRequest::new(raw) else { return (None, sent::Sent::default()) };
        let (policy, method) = (SelectionPolicy::Time, ReservationMethod::BbrOverlay);
        let cfg = PlannerConfig { max_shifts: EARLIEST_FIT_SHIFTS, ..self.cfg.clone() };
        let book = book::Book::new(self, &wider, policy, method, tokio::time::Instant::now());
        let mut search = search::Attempt::new(&cfg, &wider, policy, method, self.cfg.seed, book);
        let found = search.search_plan().await;
        let asked = search.book.sent;
        let when = match found {
            Ok(()) => {
                let st = search.book.fixes().st;
                search.book.undo_to(0).await;
                Some(format!("the whole plan would fit from {}", crate::model::rfc3339(&st)))
            }
            Err(o) if o.reason.as_deref().is_some_and(|r| r.starts_with("no feasible plan")) => {
                Some(format!("it fits nowhere before {} (the horizon)", crate::model::rfc3339(&until)))
            }
            Err(_) => None,
        };
        (when, asked)
    }

    /// Releases every booking of a committed plan (plan cancellation). Tries them all, even
    /// after a failure; releasing is idempotent, so a retry finishes the job.
    ///
    /// # Errors
    /// The first participant error met; the other bookings were still released.
    pub async fn cancel(&self, bookings: &[Booking]) -> Result<(), ParticipantError> {
        let mut first = Ok(());
        for b in bookings {
            let r = match self.participant(&b.participant) {
                Ok(p) => p.release(b.hold).await,
                Err(e) => Err(e),
            };
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}
