//! Property test of the participants' journal: after any sequence of prepare, commit, abort,
//! release, lease extension and passing time on a journaled LIS, a LIS rebuilt from the store
//! (what a restart does: [`Store::live_holds`] then [`Lis::restore`]) has exactly the live
//! one's calendar and book: the same holds and reservations, with the same leases, and the
//! same usage at every instant. Checked against both stores: the memory store and PostgreSQL
//! (one fresh database, [`TestDb`]), whose SQL transitions must agree.

use std::sync::Arc;

use coreserve::clock::{Clock, ManualClock};
use coreserve::lis::Lis;
use coreserve::model::Site;
use coreserve::protocol::{
    ComputeHoldRequest, HoldId, HoldLifecycle, HoldRequest, Journal, Journaled, Participant, ParticipantRef, TxnId,
};
use coreserve::store::{MemoryStore, PgStore, Store, StoredHold};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

use crate::support::TestDb;

const CPUS: u32 = 16;
const LEASE_S: i64 = 120;

#[derive(Debug, Clone)]
enum Op {
    Prepare {
        cpus: u32,
        start: i64,
        len: i64,
    },
    Commit(usize),
    Abort(usize),
    Release(usize),
    Extend(usize, i64),
    /// Time passes (leases may end); the sweeper may run.
    Advance(i64, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u32..=10, 0i64..20, 1i64..10).prop_map(|(cpus, s, l)| Op::Prepare { cpus, start: s * 100, len: l * 100 }),
        2 => any::<usize>().prop_map(Op::Commit),
        1 => any::<usize>().prop_map(Op::Abort),
        1 => any::<usize>().prop_map(Op::Release),
        1 => (any::<usize>(), 1i64..300).prop_map(|(i, l)| Op::Extend(i, l)),
        2 => (0i64..150, any::<bool>()).prop_map(|(dt, sweep)| Op::Advance(dt, sweep)),
    ]
}

fn site() -> Site {
    Site::new("s1", "n1", CPUS, "linux", 1.0)
}

/// Runs `ops` on a journaled LIS over `store` (emptied first), then compares it with a LIS
/// rebuilt from `store`.
async fn run(store: Arc<dyn Store>, ops: &[Op]) -> Result<(), TestCaseError> {
    let clock = Arc::new(ManualClock::new(0));
    let live = Arc::new(Lis::new(site(), clock.clone(), LEASE_S));
    let journal: Arc<dyn Journal> = store.clone();
    let p = Journaled::new(live.clone(), ParticipantRef::Site("s1".into()), journal, false);
    let mut holds: Vec<HoldId> = Vec::new();
    let pick = |holds: &[HoldId], i: usize| (!holds.is_empty()).then(|| holds[i % holds.len()]);
    for op in ops {
        // Refusals (capacity, expired, aborted, ...) are part of the game: only what was
        // acknowledged must be durable.
        match *op {
            Op::Prepare { cpus, start, len } => {
                let txn = TxnId::new();
                let req = ComputeHoldRequest {
                    replaces: None,
                    reservation_name: None,
                    txn,
                    site: "s1".into(),
                    cpus,
                    start,
                    end: start + len,
                    gpus: None,
                    user: None,
                };
                if let Ok(h) = p.prepare(&req).await {
                    holds.push(h.id);
                }
            }
            Op::Commit(i) => {
                if let Some(h) = pick(&holds, i) {
                    let _ = p.commit(h).await;
                }
            }
            Op::Abort(i) => {
                if let Some(h) = pick(&holds, i) {
                    let _ = p.abort(h).await;
                }
            }
            Op::Release(i) => {
                if let Some(h) = pick(&holds, i) {
                    let _ = p.release(h).await;
                }
            }
            Op::Extend(i, lease_s) => {
                if let Some(h) = pick(&holds, i) {
                    let _ = p.extend(h, lease_s).await;
                }
            }
            Op::Advance(dt, sweep) => {
                clock.advance_to(clock.now() + dt);
                if sweep {
                    store.expire_holds(clock.now()).await.unwrap();
                }
            }
        }
    }
    // A restart now: rebuild from the store.
    let now = clock.now();
    store.expire_holds(now).await.unwrap();
    let rebuilt = Lis::new(site(), clock.clone(), LEASE_S);
    for StoredHold { part: h, state, .. } in store.live_holds(now).await.unwrap() {
        prop_assert_eq!(&h.participant, &ParticipantRef::Site("s1".into()));
        let HoldRequest::Compute(req) = &h.request else { panic!("a LIS journals compute holds") };
        rebuilt.restore(h.hold, req, state).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
    prop_assert_eq!(rebuilt.booked(0, 10_000), live.booked(0, 10_000));
    for t in (0..3000).step_by(50) {
        prop_assert_eq!(rebuilt.usage_at(t), live.usage_at(t), "usage at {}", t);
    }
    prop_assert_eq!(rebuilt.holds_outstanding(), live.holds_outstanding());
    Ok(())
}

/// Runs `cases` random op sequences through `case`.
fn check(cases: u32, case: impl Fn(&[Op]) -> Result<(), TestCaseError>) {
    let mut runner = TestRunner::new(ProptestConfig { cases, ..ProptestConfig::default() });
    runner.run(&prop::collection::vec(op(), 1..60), |ops| case(&ops)).unwrap();
}

#[test]
fn the_memory_store_rebuilds_the_live_calendar() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    check(256, |ops| rt.block_on(run(Arc::new(MemoryStore::new()), ops)));
}

#[test]
fn postgresql_rebuilds_the_live_calendar() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let db = TestDb::new().await;
        let store = Arc::new(PgStore::connect(&db.url).await.unwrap());
        let handle = tokio::runtime::Handle::current();
        // proptest drives the cases synchronously, on a blocking thread of this runtime; each
        // case empties the journal first.
        tokio::task::spawn_blocking(move || {
            check(64, |ops| {
                handle.block_on(async {
                    sqlx::query("TRUNCATE reservations").execute(store.pool()).await.unwrap();
                    run(store.clone(), ops).await
                })
            })
        })
        .await
        .unwrap();
    });
}
