use std::sync::Mutex;

use super::*;
use crate::clock::ManualClock;
use crate::lis::Lis;
use crate::model::Site;
use crate::protocol::{ComputeHoldRequest, TxnId};

#[derive(Default)]
struct Recorder {
    entries: Mutex<Vec<JournalEntry>>,
    fail: bool,
    down: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl Journal for Recorder {
    async fn append(&self, entry: &JournalEntry) -> Result<(), JournalError> {
        if self.fail || self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(JournalError::unavailable("connection lost"));
        }
        self.entries.lock().unwrap().push(entry.clone());
        Ok(())
    }
}

fn lis() -> Arc<Lis> {
    let site = Site::new("s1", "n1", 8, "linux", 1.0);
    Arc::new(Lis::new(site, Arc::new(ManualClock::new(0)), 120))
}

fn req(cpus: u32) -> ComputeHoldRequest {
    ComputeHoldRequest {
        replaces: None,
        reservation_name: None,
        txn: TxnId::nil(),
        site: "s1".into(),
        cpus,
        start: 0,
        end: 100,
        gpus: None,
        user: None,
    }
}

#[tokio::test]
async fn every_acknowledged_change_is_journaled_in_order() {
    let (inner, journal) = (lis(), Arc::new(Recorder::default()));
    let who = ParticipantRef::Site("s1".into());
    let p = Journaled::new(inner.clone(), who.clone(), journal.clone(), true).owned_by("planner-a");
    let h = p.prepare(&req(8)).await.unwrap();
    assert_eq!(inner.owner(h.id), Some(Some("planner-a".into())), "the LIS records the owner too");
    assert!(p.prepare(&req(1)).await.unwrap_err().to_string().contains("capacity"));
    p.extend(h.id, 300).await.unwrap();
    p.commit(h.id).await.unwrap();
    p.release(h.id).await.unwrap();
    let h2 = p.prepare(&req(2)).await.unwrap();
    p.abort(h2.id).await.unwrap();
    let e = journal.entries.lock().unwrap().clone();
    assert_eq!(
        e,
        vec![
            JournalEntry::Held {
                participant: who.clone(),
                hold: h.id,
                request: req(8).into(),
                expires_at: 120,
                via_api: true,
                owner: Some("planner-a".into()),
            },
            JournalEntry::Extended { hold: h.id, expires_at: 300 },
            JournalEntry::Committed { hold: h.id },
            JournalEntry::Released { hold: h.id },
            JournalEntry::Held {
                participant: who,
                hold: h2.id,
                request: req(2).into(),
                expires_at: 120,
                via_api: true,
                owner: Some("planner-a".into()),
            },
            JournalEntry::Aborted { hold: h2.id },
        ],
        "a refused prepare writes nothing"
    );
}

#[tokio::test]
async fn a_prepare_that_cannot_be_journaled_is_not_promised() {
    let inner = lis();
    let journal = Arc::new(Recorder { fail: true, ..Default::default() });
    let p = Journaled::new(inner.clone(), ParticipantRef::Site("s1".into()), journal, false);
    let e = p.prepare(&req(8)).await.unwrap_err();
    assert!(matches!(e, ParticipantError::Durability(_)), "{e}");
    assert_eq!(inner.usage_at(50), 0, "the in-memory hold was given back");
    assert_eq!(inner.holds_outstanding(), 0);
}

/// Fault campaign: an abort the journal missed during a store outage came back at the next
/// start as a live hold. It now waits in the backlog and is written once the store answers.
#[tokio::test]
async fn a_change_the_journal_missed_is_written_once_the_store_answers() {
    let (inner, journal) = (lis(), Arc::new(Recorder::default()));
    let backlog = Backlog::default();
    let p = Journaled::new(inner.clone(), ParticipantRef::Site("s1".into()), journal.clone(), false)
        .with_backlog(backlog.clone());
    let h = p.prepare(&req(8)).await.unwrap();
    journal.down.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(matches!(p.abort(h.id).await, Err(ParticipantError::Durability(_))));
    assert_eq!(inner.usage_at(50), 0, "the calendar gave the CPUs back");
    assert_eq!(backlog.len().await, 1);
    journal.down.store(false, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(backlog.flush(journal.as_ref()).await.unwrap(), 1, "the sweeper writes it");
    let last = journal.entries.lock().unwrap().last().cloned();
    assert_eq!(last, Some(JournalEntry::Aborted { hold: h.id }));
    assert!(backlog.is_empty().await);
}

/// Tentative holds: nothing is written until persist or commit, and an abort or a lease end
/// writes nothing at all; persist and commit go through any `Journaled` sharing the set.
#[tokio::test]
async fn tentative_holds_are_written_only_by_persist_or_commit() {
    let (inner, journal) = (lis(), Arc::new(Recorder::default()));
    let who = ParticipantRef::Site("s1".into());
    let tentative = Tentative::default();
    let make = || Journaled::new(inner.clone(), who.clone(), journal.clone(), false).with_tentative(tentative.clone());
    let p = make().tentative_prepares().owned_by("planner-a");
    let (a, b, c) =
        (p.prepare(&req(2)).await.unwrap(), p.prepare(&req(2)).await.unwrap(), p.prepare(&req(2)).await.unwrap());
    assert_eq!(inner.usage_at(50), 6, "held in memory at once");
    assert!(journal.entries.lock().unwrap().is_empty(), "nothing written yet");
    assert_eq!(tentative.len(), 3);
    make().abort(a.id).await.unwrap();
    assert!(journal.entries.lock().unwrap().is_empty(), "an abort of a tentative hold writes nothing");
    let later = make().extend(b.id, 500).await.unwrap();
    make().persist(&[b.id]).await.unwrap();
    make().persist(&[b.id]).await.unwrap(); // idempotent: nothing more to write
    make().commit(c.id).await.unwrap();
    let held = |hold: HoldId, expires_at: Time| JournalEntry::Held {
        participant: who.clone(),
        hold,
        request: req(2).into(),
        expires_at,
        via_api: false,
        owner: Some("planner-a".into()),
    };
    assert_eq!(
        *journal.entries.lock().unwrap(),
        vec![held(b.id, later.expires_at), held(c.id, 120), JournalEntry::Committed { hold: c.id }],
        "persist writes the hold with its extended lease; a commit writes the hold first"
    );
    assert!(tentative.is_empty());
    p.prepare(&req(2)).await.unwrap();
    assert_eq!(tentative.prune(119), 0);
    assert_eq!(tentative.prune(120), 1, "the sweeper forgets a hold whose lease ended");
}
