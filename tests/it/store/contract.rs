//! The store contract: what every [`Store`] keeps, written once as async functions over the
//! trait. `super` runs each against the memory store and PostgreSQL.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use coreserve::model::{JobPlacement, Outcome, PartState, PlanStatus, TransferPlacement};
use coreserve::protocol::decision::{replaced_bookings, Booking, Decision, Ending, PartHold};
use coreserve::protocol::{ComputeHoldRequest, HoldId, HoldRequest, ParticipantRef, TxnId};
use coreserve::store::{
    Claim, DecisionRecord, KeyClaim, ModificationRecord, PlanEvent, PlanFilter, PlanRecord, RejectionRecord, Store,
    StoreError, TokenRecord,
};
use uuid::Uuid;

fn at(h: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, 1, h, 0, 0).unwrap()
}

/// A principal id standing for `user` (the same for the same name).
fn owner(user: &str) -> Uuid {
    Uuid::from_u128(user.bytes().fold(1u128, |h, b| h.wrapping_mul(131).wrapping_add(u128::from(b))))
}

fn record(user: &str, request_id: &str, start: Option<DateTime<Utc>>) -> PlanRecord {
    let mut outcome = Outcome::rejected(request_id, "no site", "p0");
    let mut bookings = vec![];
    let mut status = PlanStatus::Rejected;
    if let Some(st) = start {
        outcome.status = PlanStatus::Committed;
        outcome.reason = None;
        outcome.start = Some(st);
        outcome.cost = 12.375;
        outcome.planning_ms = 0.1 + 0.2;
        bookings = vec![
            Booking { participant: ParticipantRef::Site("s1".into()), hold: HoldId::new() },
            Booking { participant: ParticipantRef::Network, hold: HoldId::new() },
        ];
        status = PlanStatus::Committed;
    }
    PlanRecord {
        id: Uuid::new_v4(),
        user: user.into(),
        owner: owner(user),
        status,
        outcome,
        bookings,
        created_at: at(0),
        cancelled_at: None,
    }
}

/// Plans: stored and read back whole, listed oldest first, filtered by user, status and start
/// (`to` exclusive; no start never matches a bound), cancelled once (the first time is kept).
pub async fn plans_are_stored_listed_in_order_filtered_and_cancelled_once(s: &dyn Store) {
    s.ping().await.unwrap();
    let a = record("alice", "wf-1", Some(at(10)));
    let b = record("bob", "wf-2", None);
    let c = record("alice", "wf-3", Some(at(12)));
    for p in [&a, &b, &c] {
        s.insert_plan(p.clone()).await.unwrap();
    }
    assert_eq!(s.plan(a.id).await.unwrap().as_ref(), Some(&a), "round trip, outcome and bookings included");
    assert_eq!(s.plan(b.id).await.unwrap().as_ref(), Some(&b));
    assert_eq!(s.plan(Uuid::new_v4()).await.unwrap(), None);

    let ids = |v: Vec<PlanRecord>| v.into_iter().map(|p| p.id).collect::<Vec<_>>();
    let list = |f: PlanFilter| async move { ids(s.list_plans(&f).await.unwrap()) };
    assert_eq!(list(PlanFilter::default()).await, vec![a.id, b.id, c.id], "oldest first");
    assert_eq!(list(PlanFilter { owner: Some(owner("alice")), ..Default::default() }).await, vec![a.id, c.id]);
    assert_eq!(list(PlanFilter { status: Some(PlanStatus::Rejected), ..Default::default() }).await, vec![b.id]);
    assert_eq!(list(PlanFilter { from: Some(at(11)), ..Default::default() }).await, vec![c.id], "no start: no match");
    assert_eq!(list(PlanFilter { to: Some(at(12)), ..Default::default() }).await, vec![a.id], "to is exclusive");
    assert_eq!(list(PlanFilter { from: Some(at(10)), to: Some(at(13)), ..Default::default() }).await, vec![a.id, c.id]);

    let first = s.mark_cancelled(a.id, at(20)).await.unwrap().unwrap();
    assert_eq!((first.status, first.cancelled_at), (PlanStatus::Cancelled, Some(at(20))));
    let again = s.mark_cancelled(a.id, at(21)).await.unwrap().unwrap();
    assert_eq!(again.cancelled_at, Some(at(20)), "the first cancel time is kept");
    assert_eq!(s.plan(a.id).await.unwrap(), Some(again));
    assert_eq!(s.mark_cancelled(Uuid::new_v4(), at(20)).await.unwrap(), None);
    assert_eq!(list(PlanFilter { status: Some(PlanStatus::Cancelled), ..Default::default() }).await, vec![a.id]);
}

/// Tokens: stored by hash; a hash maps to its latest record (which keeps the first id); a
/// revoked token is not found again, even if registered again.
pub async fn tokens_are_stored_by_hash_and_replaced(s: &dyn Store) {
    let t = TokenRecord::new("h1", "alice", false, true);
    s.insert_token(t.clone()).await.unwrap();
    let alice = s.token("h1").await.unwrap().unwrap();
    assert_ne!(alice.principal, Uuid::nil(), "the store gives the token its principal");
    assert_eq!(alice, TokenRecord { principal: alice.principal, ..t.clone() });
    // Another token of the same name acts for the same principal; another name, another.
    s.insert_token(TokenRecord::new("h3", "alice", false, false)).await.unwrap();
    assert_eq!(s.token("h3").await.unwrap().unwrap().principal, alice.principal);
    s.insert_token(TokenRecord::new("h4", "bob", false, false)).await.unwrap();
    assert_ne!(s.token("h4").await.unwrap().unwrap().principal, alice.principal);
    assert_eq!(s.token("h2").await.unwrap(), None);
    let mut t2 = TokenRecord::new("h1", "root", true, false);
    t2.planner = true;
    t2.expires_at = Some(at(23));
    s.insert_token(t2.clone()).await.unwrap();
    let got = s.token("h1").await.unwrap().unwrap();
    assert_eq!(
        got,
        TokenRecord { id: t.id, principal: got.principal, ..t2 },
        "a hash maps to its latest record, under its first id"
    );
    assert_ne!(got.principal, alice.principal, "and acts for the principal of its new name");
    assert_eq!(s.revoke_token(Uuid::new_v4()).await.unwrap(), None, "no such token");
    assert_eq!(s.revoke_token(t.id).await.unwrap().map(|r| r.user), Some("root".into()));
    assert_eq!(s.token("h1").await.unwrap(), None, "revoked");
    assert_eq!(s.revoke_token(t.id).await.unwrap(), None, "already revoked");
    s.insert_token(TokenRecord::new("h1", "root", true, false)).await.unwrap();
    assert_eq!(s.token("h1").await.unwrap(), None, "registering it again does not bring it back");
}

/// Past a lease of 1 s, measured by the store's own clock.
async fn lapse() {
    tokio::time::sleep(Duration::from_millis(1300)).await;
}

fn decided_plan(user: &str) -> (PlanRecord, Vec<PartHold>, TxnId) {
    let mut plan = record(user, "wf", Some(at(10)));
    plan.status = PlanStatus::Pending;
    let txn = TxnId::new();
    let parts = vec![PartHold {
        participant: ParticipantRef::Site("s1".into()),
        hold: plan.bookings[0].hold,
        request: HoldRequest::from(ComputeHoldRequest {
            replaces: None,
            reservation_name: None,
            txn,
            site: "s1".into(),
            cpus: 4,
            start: 0,
            end: 3600,
            gpus: None,
            user: None,
        }),
    }];
    (plan, parts, txn)
}

async fn decide(
    s: &dyn Store,
    plan: &PlanRecord,
    parts: &[PartHold],
    txn: TxnId,
    key: Option<(&str, &str)>,
    claim: &Claim,
) -> Result<(), StoreError> {
    let d = Decision { txn, parts, outcome: &plan.outcome };
    s.record_decision(&DecisionRecord { decision: d, plan, reservations: false, key, claim }).await
}

/// Keys: one claim at a time, per user; only the holder releases; a lapsed claim is taken
/// over, and the old claim can then write nothing (one key never yields two plans).
pub async fn a_key_is_claimed_by_one_request_at_a_time(s: &dyn Store) {
    let (a, b) = (Claim::new("a", 1), Claim::new("b", 1));
    assert_eq!(s.claim_key(owner("u"), "k", &a).await.unwrap(), KeyClaim::Claimed);
    assert_eq!(s.claim_key(owner("u"), "k", &b).await.unwrap(), KeyClaim::InProgress);
    assert_eq!(s.claim_key(owner("v"), "k", &b).await.unwrap(), KeyClaim::Claimed, "keys are per user");
    s.release_key(owner("u"), "k", &b).await.unwrap();
    assert_eq!(s.claim_key(owner("u"), "k", &b).await.unwrap(), KeyClaim::InProgress, "only the holder releases");
    s.release_key(owner("u"), "k", &a).await.unwrap();
    assert_eq!(s.claim_key(owner("u"), "k", &b).await.unwrap(), KeyClaim::Claimed, "released: free at once");

    // b stops renewing (its process stalled); a takes the key over after the lease.
    lapse().await;
    assert_eq!(s.claim_key(owner("u"), "k", &a).await.unwrap(), KeyClaim::Claimed, "a lapsed claim is taken over");
    let stale = record("u", "wf-b", None);
    let r = s.record_rejection(&RejectionRecord { plan: &stale, key: Some(("k", "fb")), claim: &b }).await;
    assert!(matches!(r, Err(StoreError::Superseded)), "{r:?}");
    let (plan, parts, txn) = decided_plan("u");
    let r = decide(s, &plan, &parts, txn, Some(("k", "fb")), &b).await;
    assert!(matches!(r, Err(StoreError::Superseded)), "{r:?}");
    let mine = record("u", "wf-a", None);
    s.record_rejection(&RejectionRecord { plan: &mine, key: Some(("k", "fa")), claim: &a }).await.unwrap();
    assert_eq!(
        s.claim_key(owner("u"), "k", &b).await.unwrap(),
        KeyClaim::Done { plan: mine.id, fingerprint: "fa".into() }
    );
    let plans = s.list_plans(&PlanFilter::default()).await.unwrap();
    assert_eq!(plans.iter().map(|p| p.id).collect::<Vec<_>>(), vec![mine.id], "one key, one plan");
    assert_eq!(s.plan(plan.id).await.unwrap(), None, "nothing of b's decision was written");

    // Renewal keeps a claim alive past its first lease.
    let c = Claim::new("c", 1);
    assert_eq!(s.claim_key(owner("u"), "k2", &c).await.unwrap(), KeyClaim::Claimed);
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        s.renew_claims(&[c.id], 1).await.unwrap();
    }
    assert_eq!(s.claim_key(owner("u"), "k2", &a).await.unwrap(), KeyClaim::InProgress, "renewed, not taken over");
    // All-in-one start: every claim of the previous life ends at once.
    assert_eq!(s.end_all_claims().await.unwrap(), 2, "u/k2 and v/k");
    assert_eq!(s.claim_key(owner("u"), "k2", &a).await.unwrap(), KeyClaim::Claimed);
}

/// A decided transaction is worked on by one claim at a time: taken over only once its lease
/// lapsed, settled only by its current claim; its key stays bound to its (pending) plan.
pub async fn a_decided_transaction_is_settled_by_one_claim_at_a_time(s: &dyn Store) {
    let (a, b) = (Claim::new("a", 1), Claim::new("b", 1));
    assert_eq!(s.claim_key(owner("u"), "k", &a).await.unwrap(), KeyClaim::Claimed);
    let (plan, parts, txn) = decided_plan("u");
    decide(s, &plan, &parts, txn, Some(("k", "f")), &a).await.unwrap();
    assert_eq!(s.plan(plan.id).await.unwrap().unwrap().status, PlanStatus::Pending, "not committed before its end");
    assert!(s.take_in_doubt(&b, 10).await.unwrap().is_empty(), "a's lease runs");
    assert!(matches!(s.finish_txn(txn, &b, Ending::Committed).await, Err(StoreError::Superseded)));
    assert!(matches!(s.mark_compensating(txn, &b).await, Err(StoreError::Superseded)));

    // a stalls; b takes over; a can no longer settle it.
    lapse().await;
    assert_eq!(
        s.claim_key(owner("u"), "k", &b).await.unwrap(),
        KeyClaim::Done { plan: plan.id, fingerprint: "f".into() },
        "a decided key is bound to its plan: never planned twice"
    );
    let taken = s.take_in_doubt(&b, 10).await.unwrap();
    assert_eq!(taken.iter().map(|t| (t.txn, t.compensating)).collect::<Vec<_>>(), vec![(txn, false)]);
    assert!(s.take_in_doubt(&a, 10).await.unwrap().is_empty(), "b holds it now");
    assert!(matches!(s.finish_txn(txn, &a, Ending::Committed).await, Err(StoreError::Superseded)));
    s.mark_compensating(txn, &b).await.unwrap();
    // b dies too: the next taker sees that compensation was decided.
    lapse().await;
    let c = Claim::new("c", 1);
    let taken = s.take_in_doubt(&c, 10).await.unwrap();
    assert_eq!(taken.iter().map(|t| (t.txn, t.compensating)).collect::<Vec<_>>(), vec![(txn, true)]);
    let rejected = Outcome::rejected("wf", "a part refused its commit", "p0");
    s.finish_txn(txn, &c, Ending::Compensated(&rejected)).await.unwrap();
    let rec = s.plan(plan.id).await.unwrap().unwrap();
    assert_eq!((rec.status, rec.bookings.len()), (PlanStatus::Rejected, 0));
    assert!(matches!(s.finish_txn(txn, &c, Ending::Committed).await, Err(StoreError::Superseded)), "finished once");
    lapse().await;
    assert!(s.take_in_doubt(&c, 10).await.unwrap().is_empty());

    // The normal end: a pending plan becomes committed when its end is logged.
    let (plan, parts, txn) = decided_plan("u");
    decide(s, &plan, &parts, txn, None, &a).await.unwrap();
    s.finish_txn(txn, &a, Ending::Committed).await.unwrap();
    assert_eq!(s.plan(plan.id).await.unwrap().unwrap().status, PlanStatus::Committed);
}

/// Issue 25: a decided modification a part of which could not commit ends broken
/// ([`Ending::Broken`]): one write makes the plan as modified and broken, its parts marked as
/// the coordinator found them (`plan.modified`, then `plan.broken`); nothing of it is left in
/// doubt. Before, the end rewrote the plan as modified and someone else had to mark it broken:
/// recovery never did, so a part that held no reservation stood as booked.
pub async fn a_modification_that_ends_broken_leaves_its_plan_broken_in_one_write(s: &dyn Store) {
    let plan = booked("alice", "wf-mod", 10, 12);
    s.insert_plan(plan.clone()).await.unwrap();
    let before = last_event(s).await;
    let claim = Claim::new("a", 60);
    let txn = TxnId::new();
    let hold = HoldId::new();
    let parts = vec![PartHold {
        participant: ParticipantRef::Site("s1".into()),
        hold,
        request: HoldRequest::from(ComputeHoldRequest {
            replaces: Some(plan.bookings[0].hold),
            reservation_name: None,
            txn,
            site: "s1".into(),
            cpus: 8,
            start: 0,
            end: 3600,
            gpus: None,
            user: None,
        }),
    }];
    let mut modified = plan.outcome.clone();
    modified.jobs[0].cpus = 8;
    let bookings = replaced_bookings(&plan.bookings, &parts);
    let record = ModificationRecord {
        decision: Decision { txn, parts: &parts, outcome: &modified },
        plan: plan.id,
        replaced: &plan.bookings,
        bookings: &bookings,
        reservations: false,
        key: None,
        owner: plan.owner,
        claim: &claim,
    };
    s.record_modification(&record).await.unwrap();
    // The coordinator's outcome: the job's commit was refused.
    let mut found = modified.clone();
    found.jobs[0].broken = Some("its modification was decided but could not be committed".into());
    s.finish_txn(txn, &claim, Ending::Broken(&found)).await.unwrap();

    let rec = s.plan(plan.id).await.unwrap().unwrap();
    assert_eq!(rec.status, PlanStatus::Broken);
    assert_eq!(rec.outcome.jobs[0].cpus, 8, "as modified");
    assert_eq!(rec.outcome.jobs[0].broken, found.jobs[0].broken);
    assert_eq!(rec.bookings[0].hold, hold);
    let kinds: Vec<String> = events_after(s, before, None, 10).await.into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["plan.modified", "plan.broken"]);
    lapse().await;
    assert!(s.take_in_doubt(&Claim::new("b", 60), 10).await.unwrap().is_empty(), "ended");
    assert!(matches!(s.finish_txn(txn, &claim, Ending::Committed).await, Err(StoreError::Superseded)));
}

/// A committed plan of `user` with one job from hour `from` to hour `to` of [`at`].
fn booked(user: &str, request_id: &str, from: u32, to: u32) -> PlanRecord {
    let mut p = record(user, request_id, Some(at(from)));
    p.outcome.jobs = vec![JobPlacement {
        name: "A".into(),
        site: "s1".into(),
        start: at(from),
        end: at(to),
        cpus: 4,
        gpus: None,
        reservation_name: None,
        broken: None,
        state: None,
        price_per_cpu_hour: 0.0,
        price_per_gpu_hour: 0.0,
        ..Default::default()
    }];
    p
}

/// Plan states through time: committed -> active at the first job's start -> completed at the
/// last job's end (or straight to completed when the clock jumped past it), each change made
/// once however often the clock runs; every status change, and every new broken part, is one
/// event, its id larger than every earlier one's; nothing else is (no change, no event: a second
/// cancel, a broken mark of a cancelled plan); a user's events are theirs only; the signal fires.
pub async fn plan_states_follow_the_clock_and_each_change_is_one_event(s: &dyn Store) {
    let mut signal = s.event_signal();
    // PostgreSQL's listener says once that it is connected; only what comes after counts.
    let _ = tokio::time::timeout(Duration::from_millis(1500), signal.changed()).await;
    signal.borrow_and_update();
    assert_eq!(last_event(s).await, 0);

    let a = booked("alice", "wf-1", 10, 12);
    let b = record("bob", "wf-2", None);
    s.insert_plan(a.clone()).await.unwrap();
    s.insert_plan(b.clone()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), signal.changed()).await.expect("the signal fires").unwrap();
    let kinds = |v: &[PlanEvent]| v.iter().map(|e| (e.id, e.plan_id, e.kind.clone())).collect::<Vec<_>>();
    let all = events_after(s, 0, None, 100).await;
    let (first, second) = (all[0].id, all[1].id);
    assert!(0 < first && first < second, "ids grow: {first}, {second}");
    assert_eq!(kinds(&all), vec![(first, a.id, "plan.committed".into()), (second, b.id, "plan.rejected".into())]);
    assert_eq!(
        (all[0].user.as_str(), all[0].request_id.as_str(), all[0].status),
        ("alice", "wf-1", PlanStatus::Committed)
    );
    let mut scheduled = a.outcome.jobs.clone();
    scheduled[0].state = Some(PartState::Scheduled);
    assert_eq!(all[0].jobs, scheduled, "the jobs, each with its state at the event");
    assert_eq!(
        kinds(&events_after(s, 0, Some(owner("alice")), 100).await),
        vec![(first, a.id, "plan.committed".into())]
    );
    assert_eq!(kinds(&events_after(s, first, None, 100).await), vec![(second, b.id, "plan.rejected".into())]);
    assert_eq!(events_after(s, 0, None, 1).await.len(), 1, "limit");
    assert_eq!(last_event(s).await, second);

    // The clock: nothing before the start; active at it, once; completed at the end.
    assert_eq!(s.advance_plans(at(9)).await.unwrap(), 0);
    assert_eq!(s.advance_plans(at(10)).await.unwrap(), 1);
    assert_eq!(s.advance_plans(at(11)).await.unwrap(), 0, "already active");
    assert_eq!(s.plan(a.id).await.unwrap().unwrap().status, PlanStatus::Active);
    assert_eq!(s.advance_plans(at(12)).await.unwrap(), 1);
    assert_eq!(s.plan(a.id).await.unwrap().unwrap().status, PlanStatus::Completed);
    // A plan whose whole window passed while nobody looked: straight to completed.
    let c = booked("alice", "wf-3", 13, 14);
    s.insert_plan(c.clone()).await.unwrap();
    assert_eq!(s.advance_plans(at(15)).await.unwrap(), 1);
    assert_eq!(s.plan(b.id).await.unwrap().unwrap().status, PlanStatus::Rejected, "a rejected plan stays");

    // Broken: an event per new broken part, none for the same again; cancelled: one event; a
    // cancelled plan is never marked broken.
    let d = booked("alice", "wf-4", 20, 21);
    s.insert_plan(d.clone()).await.unwrap();
    let mut broken = d.outcome.clone();
    broken.jobs[0].broken = Some("reservation cs-1 deleted".into());
    assert!(s.mark_broken(d.id, &broken).await.unwrap().is_some());
    assert!(s.mark_broken(d.id, &broken).await.unwrap().is_some(), "the same again: no change");
    assert!(s.mark_cancelled(d.id, at(19)).await.unwrap().is_some());
    assert!(s.mark_cancelled(d.id, at(19)).await.unwrap().is_some(), "again: no change");
    assert_eq!(s.mark_broken(d.id, &broken).await.unwrap(), None);
    assert_eq!(s.advance_plans(at(22)).await.unwrap(), 0, "a cancelled plan does not complete");

    let mine = events_after(s, second, Some(owner("alice")), 100).await;
    assert_eq!(
        mine.iter().map(|e| (e.plan_id, e.kind.as_str())).collect::<Vec<_>>(),
        vec![
            (a.id, "plan.active"),
            (a.id, "job.running"),
            (a.id, "job.ended"),
            (a.id, "plan.completed"),
            (c.id, "plan.committed"),
            (c.id, "job.running"),
            (c.id, "job.ended"),
            (c.id, "plan.completed"),
            (d.id, "plan.committed"),
            (d.id, "plan.broken"),
            (d.id, "plan.cancelled"),
        ]
    );
    assert_eq!(mine[1].part.as_deref(), Some("A"), "a part's event names it");
    assert_eq!(mine[0].part, None, "a plan's event names no part");
    assert_eq!(mine[9].jobs[0].broken.as_deref(), Some("reservation cs-1 deleted"));
    assert_eq!(mine[9].jobs[0].state, Some(PartState::Broken));
    assert_eq!(mine[10].jobs[0].state, Some(PartState::Cancelled));
    assert!(mine.windows(2).all(|w| w[0].id < w[1].id), "ids grow in the log's order");
    assert_eq!(last_event(s).await, mine[10].id, "the newest event is alice's cancel");
}

/// Each job and transfer changes state at its start and its end, and each change is one event
/// (`job.running`, `transfer.ended`, ...) naming the part, once however often the clock runs, in
/// time order (ends before starts at one instant; `plan.active` first, `plan.completed` last);
/// a modified part's new start is announced; a broken part has no more events while the rest
/// of its (broken) plan goes on.
pub async fn each_job_and_transfer_start_and_end_is_one_event(s: &dyn Store) {
    // A at 10-11, the transfer A->B at 11-12, B at 12-14 and C at 12-13.
    let mut p = booked("alice", "wf-parts", 10, 11);
    let mut b = p.outcome.jobs[0].clone();
    (b.name, b.start, b.end) = ("B".into(), at(12), at(14));
    let mut c = b.clone();
    (c.name, c.end) = ("C".into(), at(13));
    p.outcome.jobs.extend([b, c]);
    p.outcome.transfers = vec![TransferPlacement {
        from: "A".into(),
        to: "B".into(),
        path: vec![],
        bandwidth_mbps: 100,
        start: at(11),
        end: at(12),
        traffic: None,
        broken: None,
        state: None,
        price_per_gbps_hour: 0.0,
        ..Default::default()
    }];
    s.insert_plan(p.clone()).await.unwrap();
    let from = last_event(s).await;
    let seen = |v: Vec<PlanEvent>| {
        v.into_iter()
            .map(|e| format!("{} {}", e.kind, e.part.unwrap_or_default()).trim().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(s.advance_plans(at(10)).await.unwrap(), 1);
    assert_eq!(s.advance_plans(at(10)).await.unwrap(), 0, "once");
    assert_eq!(seen(events_after(s, from, None, 100).await), ["plan.active", "job.running A"]);
    let mid = last_event(s).await;
    assert_eq!(s.advance_plans(at(12)).await.unwrap(), 1, "the plan's status stays; its parts move");
    assert_eq!(s.plan(p.id).await.unwrap().unwrap().status, PlanStatus::Active);
    let events = events_after(s, mid, None, 100).await;
    assert_eq!(
        seen(events.clone()),
        ["job.ended A", "transfer.running A->B", "transfer.ended A->B", "job.running B", "job.running C"]
    );
    assert!(events.iter().all(|e| e.status == PlanStatus::Active));
    let mid = last_event(s).await;

    // C breaks: its end is never announced; B's is, and the broken plan stays broken.
    let mut broken = s.plan(p.id).await.unwrap().unwrap().outcome;
    broken.jobs[2].broken = Some("node down".into());
    assert!(s.mark_broken(p.id, &broken).await.unwrap().is_some());
    assert_eq!(s.advance_plans(at(13)).await.unwrap(), 0, "nothing but C's end was due");
    assert_eq!(s.advance_plans(at(15)).await.unwrap(), 1);
    assert_eq!(s.plan(p.id).await.unwrap().unwrap().status, PlanStatus::Broken);
    assert_eq!(seen(events_after(s, mid, None, 100).await), ["plan.broken", "job.ended B"]);

    // Straight past a whole plan: every part's events, then plan.completed.
    let q = booked("alice", "wf-late", 20, 21);
    s.insert_plan(q.clone()).await.unwrap();
    let mid = last_event(s).await;
    assert_eq!(s.advance_plans(at(22)).await.unwrap(), 1);
    let events = events_after(s, mid, None, 100).await;
    assert_eq!(seen(events.clone()), ["job.running A", "job.ended A", "plan.completed"]);
    assert_eq!(
        events.iter().map(|e| e.status).collect::<Vec<_>>(),
        [PlanStatus::Committed, PlanStatus::Committed, PlanStatus::Completed],
        "each event carries the status once it happened: only plan.completed says completed"
    );
}

/// Retention ([`Store::prune_finished`]): a rejected plan goes once it was made before the
/// horizon, a cancelled one once it was cancelled before it, a completed one once its last job
/// ended before it; a committed or broken plan never, however old.
pub async fn finished_plans_are_pruned_after_the_horizon_and_booked_ones_never(s: &dyn Store) {
    let rejected = record("alice", "rejected", None);
    let completed = booked("alice", "completed", 10, 12);
    let cancelled = booked("alice", "cancelled", 13, 14);
    let committed = booked("alice", "committed", 22, 23);
    let broken = booked("alice", "broken", 1, 2);
    for p in [&rejected, &completed, &cancelled, &committed, &broken] {
        s.insert_plan(p.clone()).await.unwrap();
    }
    assert!(s.mark_cancelled(cancelled.id, at(11)).await.unwrap().is_some());
    let mut outcome = broken.outcome.clone();
    outcome.jobs[0].broken = Some("reservation deleted".into());
    assert!(s.mark_broken(broken.id, &outcome).await.unwrap().is_some());
    assert_eq!(s.advance_plans(at(12)).await.unwrap(), 1, "completed at its end");
    let sorted = |mut v: Vec<Uuid>| {
        v.sort();
        v
    };
    // Before every plan was made: nothing.
    assert_eq!(s.prune_finished(at(0)).await.unwrap().plans, 0);
    // After the rejected plan was made (at 0): it goes.
    assert_eq!(s.prune_finished(at(1)).await.unwrap().plans, 1);
    assert_eq!(s.plan(rejected.id).await.unwrap(), None);
    // After the cancellation (11) but before the completed plan's end (12).
    assert_eq!(s.prune_finished(at(12)).await.unwrap().plans, 1);
    assert_eq!(plan_ids(s).await, sorted(vec![completed.id, committed.id, broken.id]));
    // Long after everything: the completed plan goes, the booked ones stay.
    assert_eq!(s.prune_finished(at(23) + chrono::Duration::days(3650)).await.unwrap().plans, 1);
    assert_eq!(plan_ids(s).await, sorted(vec![committed.id, broken.id]));
    assert_eq!(s.plan(broken.id).await.unwrap().unwrap().status, PlanStatus::Broken);
}

/// The ids of every stored plan, sorted.
async fn plan_ids(s: &dyn Store) -> Vec<Uuid> {
    let mut ids: Vec<Uuid> = s.list_plans(&PlanFilter::default()).await.unwrap().iter().map(|p| p.id).collect();
    ids.sort();
    ids
}

/// The store's [`EventStore::last_event_id`] once the events written so far are readable
/// ([`EventStore::settle_events`]: in PostgreSQL they wait for every older writing transaction of
/// the cluster, other tests' too).
async fn last_event(s: &dyn Store) -> i64 {
    s.settle_events().await.unwrap();
    s.last_event_id().await.unwrap()
}

/// [`EventStore::events_after`] once the events written so far are readable.
async fn events_after(s: &dyn Store, after: i64, owner: Option<Uuid>, limit: i64) -> Vec<PlanEvent> {
    s.settle_events().await.unwrap();
    s.events_after(after, owner, limit).await.unwrap()
}

/// A journal entry moves a hold's row only from the states it may follow (both stores judge by
/// `JournalEntry::transition`): a retried entry changes nothing, an entry for a hold never
/// journaled is counted, and one that contradicts the row (a commit of an aborted hold, an
/// abort of a reservation) is refused and writes nothing.
pub async fn a_journal_entry_is_legal_only_from_the_states_it_may_follow(s: &dyn Store) {
    use coreserve::protocol::{unmatched_entries, JournalEntry, JournalError, JournalState};
    let (_, parts, _) = decided_plan("alice");
    let held = |hold: HoldId, expires_at: i64| JournalEntry::Held {
        participant: parts[0].participant.clone(),
        hold,
        request: parts[0].request.clone(),
        expires_at,
        via_api: false,
        owner: None,
    };
    let illegal = |r: Result<(), JournalError>, hold: HoldId, state: JournalState| match r {
        Err(JournalError::Illegal { hold: h, state: st, .. }) => assert_eq!((h, st), (hold, state)),
        other => panic!("expected the entry refused as illegal from {state}, got {other:?}"),
    };

    // Committed, then committed again (a retry): one reservation.
    let (a, b, c) = (HoldId::new(), HoldId::new(), HoldId::new());
    s.append(&held(a, 1_000)).await.unwrap();
    s.append(&JournalEntry::Committed { hold: a }).await.unwrap();
    s.append(&JournalEntry::Committed { hold: a }).await.unwrap();
    // Illegal from committed: an abort, an extension.
    illegal(s.append(&JournalEntry::Aborted { hold: a }).await, a, JournalState::Committed);
    illegal(s.append(&JournalEntry::Extended { hold: a, expires_at: 2_000 }).await, a, JournalState::Committed);
    assert_eq!(live(s).await, vec![(a, true)], "the reservation stands");

    // Aborted, then a commit of it: refused, and nothing is booked again.
    s.append(&held(b, 1_000)).await.unwrap();
    s.append(&JournalEntry::Aborted { hold: b }).await.unwrap();
    s.append(&JournalEntry::Aborted { hold: b }).await.unwrap();
    illegal(s.append(&JournalEntry::Committed { hold: b }).await, b, JournalState::Aborted);
    illegal(s.append(&JournalEntry::Released { hold: b }).await, b, JournalState::Aborted);
    // In one write with a legal entry: all refused (all or none).
    let both = [held(c, 1_000), JournalEntry::Committed { hold: b }];
    illegal(s.append_all(&both).await, b, JournalState::Aborted);
    assert_eq!(live(s).await, vec![(a, true)], "neither the aborted hold nor the refused write's hold");

    // Released twice: the second is a retry.
    s.append(&JournalEntry::Released { hold: a }).await.unwrap();
    s.append(&JournalEntry::Released { hold: a }).await.unwrap();
    illegal(s.append(&JournalEntry::Committed { hold: a }).await, a, JournalState::Released);
    assert!(live(s).await.is_empty());

    // Expired by the sweeper: a commit the participant accepted before still wins; an abort
    // leaves it expired.
    let (d, e) = (HoldId::new(), HoldId::new());
    s.append_all(&[held(d, 50), held(e, 50)]).await.unwrap();
    assert_eq!(s.expire_holds(60).await.unwrap(), 2);
    s.append(&JournalEntry::Committed { hold: d }).await.unwrap();
    s.append(&JournalEntry::Aborted { hold: e }).await.unwrap();
    assert_eq!(live(s).await, vec![(d, true)]);

    // A hold never journaled: ignored, counted.
    let before = unmatched_entries();
    s.append(&JournalEntry::Committed { hold: HoldId::new() }).await.unwrap();
    s.append(&JournalEntry::Released { hold: HoldId::new() }).await.unwrap();
    assert!(unmatched_entries() >= before + 2, "each counted");
    assert_eq!(live(s).await, vec![(d, true)]);
}

/// The live holds at t = 100, each with whether it is committed, sorted.
async fn live(s: &dyn Store) -> Vec<(HoldId, bool)> {
    let mut holds: Vec<(HoldId, bool)> = s
        .live_holds(100)
        .await
        .unwrap()
        .into_iter()
        .map(|h| (h.part.hold, h.state == coreserve::protocol::HoldState::Committed))
        .collect();
    holds.sort();
    holds
}
