use std::sync::Arc;

use super::*;
use crate::clock::ManualClock;
use crate::protocol::HoldLifecycle;
use crate::protocol::TxnId;

fn site(cpus: u32) -> Site {
    Site::new("s1", "n1", cpus, "linux", 2.0)
}

fn hold_req(cpus: u32, start: Time, end: Time) -> ComputeHoldRequest {
    ComputeHoldRequest {
        replaces: None,
        reservation_name: None,
        txn: TxnId::new(),
        site: "s1".into(),
        cpus,
        start,
        end,
        gpus: None,
        user: None,
    }
}

#[tokio::test]
async fn holds_are_visible_to_queries_and_abort_frees_them() {
    let clock = Arc::new(ManualClock::new(0));
    let lis = Lis::new(site(16), clock.clone(), 120);
    let q = ComputeQuery { site: "s1".into(), cpus: 16, duration_s: 100, window_start: 0, deadline: 1000, gpus: None };
    assert_eq!(lis.query(&q).await.unwrap().earliest_start, Some(0));
    let h = lis.prepare(&hold_req(10, 0, 100)).await.unwrap();
    assert_eq!(h.expires_at, 120);
    let o = lis.query(&q).await.unwrap();
    assert_eq!(o.earliest_start, Some(100), "a hold blocks like a reservation");
    assert!((o.utilisation - 10.0 * 100.0 / (16.0 * 1000.0)).abs() < 1e-12);
    lis.abort(h.id).await.unwrap();
    lis.abort(h.id).await.unwrap();
    assert_eq!(lis.usage_at(50), 0);
    assert_eq!(lis.commit(h.id).await, Err(ParticipantError::Aborted(h.id)));
}

#[tokio::test]
async fn prepare_refuses_overbooking_and_changes_nothing() {
    let lis = Lis::new(site(8), Arc::new(ManualClock::new(0)), 120);
    let h = lis.prepare(&hold_req(6, 0, 100)).await.unwrap();
    let err = lis.prepare(&hold_req(3, 50, 150)).await.unwrap_err();
    assert!(matches!(err, ParticipantError::Capacity { requested: 3, free: 2, .. }), "{err}");
    assert_eq!(lis.booked_spans(), 1);
    lis.commit(h.id).await.unwrap();
    assert_eq!(lis.abort(h.id).await, Err(ParticipantError::AlreadyCommitted(h.id)));
    assert_eq!(lis.usage_at(0), 6);
    lis.release(h.id).await.unwrap();
    assert_eq!(lis.usage_at(0), 0);
}

#[tokio::test]
async fn uncommitted_hold_expires_at_its_lease() {
    let clock = Arc::new(ManualClock::new(1_000));
    let lis = Lis::new(site(8), clock.clone(), 120);
    let h = lis.prepare(&hold_req(8, 5_000, 6_000)).await.unwrap();
    clock.advance_to(1_119);
    assert_eq!(lis.usage_at(5_500), 8, "still held one second before expiry");
    clock.advance_to(1_120);
    assert_eq!(lis.usage_at(5_500), 0, "released at the lease");
    assert_eq!(lis.holds_outstanding(), 0);
    assert_eq!(lis.commit(h.id).await, Err(ParticipantError::HoldExpired(h.id)));
}

#[tokio::test]
async fn wrong_messages_are_refused() {
    let lis = Lis::new(site(8), Arc::new(ManualClock::new(0)), 120);
    // A network message cannot be sent to a LIS: the types forbid it (Participant<Compute>).
    let other = ComputeHoldRequest {
        replaces: None,
        reservation_name: None,
        txn: TxnId::new(),
        site: "s2".into(),
        cpus: 1,
        start: 0,
        end: 1,
        gpus: None,
        user: None,
    };
    assert_eq!(lis.prepare(&other).await, Err(ParticipantError::UnknownSite("s2".into())));
    assert!(matches!(lis.prepare(&hold_req(1, 10, 10)).await, Err(ParticipantError::InvalidHold(_))), "empty interval");
}

/// Many planners race for the same CPUs from several threads: the sum of what they were
/// granted never exceeds the site at any instant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_prepares_never_overbook() {
    let lis = Arc::new(Lis::new(site(64), Arc::new(ManualClock::new(0)), 120));
    let mut tasks = Vec::new();
    for i in 0..32i64 {
        let lis = lis.clone();
        tasks.push(tokio::spawn(async move {
            let start = (i % 4) * 10;
            lis.prepare(&hold_req(8, start, start + 25)).await.ok().map(|h| (h, start))
        }));
    }
    let mut granted = Vec::new();
    for t in tasks {
        if let Some(g) = t.await.unwrap() {
            granted.push(g);
        }
    }
    for t in 0..60 {
        let used: u64 = granted.iter().filter(|(_, s)| *s <= t && t < s + 25).map(|_| 8).sum();
        assert!(used <= 64, "overbooked at {t}: {used}");
        assert_eq!(used, lis.usage_at(t));
    }
    assert!(granted.len() >= 8, "the first 8 holds always fit");
}

#[tokio::test]
async fn pruned_history_is_forgotten_and_a_late_release_is_refused_cleanly() {
    let clock = Arc::new(ManualClock::new(0));
    let lis = Lis::new(site(8), clock.clone(), 120);
    let old = lis.prepare(&hold_req(8, 0, 100)).await.unwrap();
    lis.commit(old.id).await.unwrap();
    let new = lis.prepare(&hold_req(8, 200, 300)).await.unwrap();
    lis.commit(new.id).await.unwrap();
    assert_eq!(lis.prune_before(150), 1);
    assert_eq!(lis.booked_spans(), 1);
    assert_eq!(lis.release(old.id).await, Err(ParticipantError::UnknownHold(old.id)));
    lis.release(new.id).await.unwrap();
    assert_eq!(lis.usage_at(250), 0);
}

#[tokio::test]
async fn extend_keeps_a_hold_past_its_first_lease_and_reservations_list_it() {
    let clock = Arc::new(ManualClock::new(0));
    let lis = Lis::new(site(16), clock.clone(), 120);
    let h = lis.prepare(&hold_req(10, 0, 100)).await.unwrap();
    let h2 = lis.prepare(&hold_req(2, 50, 500)).await.unwrap();
    assert_eq!(lis.extend(h.id, 300).await.unwrap().expires_at, 300);
    assert!(matches!(lis.extend(h.id, 0).await, Err(ParticipantError::Invalid(_))));
    clock.advance_to(200);
    assert_eq!(lis.usage_at(60), 10, "h2 expired, the extended hold did not");
    assert_eq!(lis.extend(h2.id, 10).await, Err(ParticipantError::HoldExpired(h2.id)));
    let r = lis.booked(0, 1000);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].hold, r[0].start, r[0].end, r[0].cpus), (h.id, 0, 100, 10));
    assert_eq!(r[0].state, HoldState::Held { expires_at: 300 });
    lis.commit(h.id).await.unwrap();
    assert_eq!(lis.booked(0, 1000)[0].state, HoldState::Committed);
    assert!(lis.booked(100, 1000).is_empty(), "[0, 100) does not overlap [100, 1000)");
    assert_eq!(lis.extend(h.id, 10).await, Err(ParticipantError::AlreadyCommitted(h.id)));
}

#[tokio::test]
async fn price_and_os_change_but_not_size() {
    let lis = Lis::new(site(16), Arc::new(ManualClock::new(0)), 120);
    lis.update_site(Site { price_per_cpu_hour: 3.5, os: "bsd".into(), ..site(16) }).unwrap();
    let q = ComputeQuery { site: "s1".into(), cpus: 1, duration_s: 10, window_start: 0, deadline: 100, gpus: None };
    assert_eq!(lis.query(&q).await.unwrap().price_per_cpu_hour, 3.5);
    assert!(lis.update_site(site(32)).is_err());
    assert!(lis.update_site(Site { price_per_cpu_hour: f64::NAN, ..site(16) }).is_err());
    assert!(lis.update_site(Site { price_per_cpu_hour: 1e308, ..site(16) }).is_err());
    assert!(lis.update_site(Site { os: "a\0".into(), ..site(16) }).is_err());
    assert_eq!(lis.site().os, "bsd");
}

#[tokio::test]
async fn os_cannot_change_under_future_bookings() {
    let clock = Arc::new(ManualClock::new(0));
    let lis = Lis::new(site(16), clock.clone(), 120);
    let h = lis.prepare(&hold_req(4, 100, 200)).await.unwrap();
    lis.commit(h.id).await.unwrap();
    let err = lis.update_site(Site { os: "bsd".into(), ..site(16) }).unwrap_err();
    assert_eq!(err, SiteUpdateError::OsInUse { site: "s1".into(), holds: vec![h.id] });
    lis.update_site(Site { price_per_cpu_hour: 9.0, ..site(16) }).unwrap();
    clock.advance_to(200);
    lis.update_site(Site { os: "bsd".into(), ..site(16) }).unwrap();
    assert_eq!(lis.site().os, "bsd");
}

fn gpu_site() -> Site {
    let pool = |model: &str, count, cc| crate::model::GpuPool {
        model: model.into(),
        count,
        compute_capability: cc,
        memory_gib: 16,
    };
    Site {
        attributes: SiteAttributes {
            gpus: vec![pool("k80", 4, 3.7), pool("v100", 2, 7.0)],
            price_per_gpu_hour: 3.0,
            ..Default::default()
        },
        ..site(16)
    }
}

fn gpu_hold(cpus: u32, model: &str, count: u32, start: Time, end: Time) -> ComputeHoldRequest {
    ComputeHoldRequest {
        replaces: None,
        gpus: Some(PoolGpus { model: model.into(), count }),
        ..hold_req(cpus, start, end)
    }
}

fn gpu_query(cpus: u32, count: u32, min_cc: Option<f64>) -> ComputeQuery {
    let gpus = GpuDemand { count, min_compute_capability: min_cc, min_memory_gib: None, model: None };
    ComputeQuery { site: "s1".into(), cpus, duration_s: 100, window_start: 0, deadline: 10_000, gpus: Some(gpus) }
}

/// The earliest start needs the CPUs and the GPUs of one suitable pool free together: each
/// calendar alone would answer earlier.
#[tokio::test]
async fn a_gpu_query_finds_the_first_instant_cpus_and_gpus_are_free_together() {
    let lis = Lis::new(gpu_site(), Arc::new(ManualClock::new(0)), 1_000);
    lis.prepare(&hold_req(16, 0, 100)).await.unwrap(); // CPUs busy [0, 100)
    lis.prepare(&gpu_hold(1, "v100", 2, 150, 300)).await.unwrap(); // v100s busy [150, 300)
    lis.prepare(&hold_req(16, 350, 420)).await.unwrap(); // CPUs busy [350, 420)
    let o = lis.query(&gpu_query(8, 1, Some(7.0))).await.unwrap();
    // [100, 200) collides with the v100 hold, [300, 400) with the CPUs: 420.
    assert_eq!((o.earliest_start, o.gpu_model.as_deref()), (Some(420), Some("v100")));
    assert_eq!(o.price_per_gpu_hour, 3.0);
    // Any capability: the k80s are free from 100.
    let o = lis.query(&gpu_query(8, 4, None)).await.unwrap();
    assert_eq!((o.earliest_start, o.gpu_model.as_deref()), (Some(100), Some("k80")));
    // More GPUs than any pool: no slot.
    assert_eq!(lis.query(&gpu_query(1, 5, None)).await.unwrap().earliest_start, None);
}

/// A hold books its CPUs and GPUs together or not at all, and frees both.
#[tokio::test]
async fn gpus_are_held_with_the_cpus_all_or_none_and_never_overbooked() {
    let lis = Lis::new(gpu_site(), Arc::new(ManualClock::new(0)), 1_000);
    let a = lis.prepare(&gpu_hold(4, "V100", 2, 0, 100)).await.unwrap();
    assert_eq!(lis.gpu_usage_at(50), vec![0, 2]);
    let err = lis.prepare(&gpu_hold(4, "v100", 1, 50, 150)).await.unwrap_err();
    assert!(
        matches!(&err, ParticipantError::GpuCapacity { model, requested: 1, free: 0, .. } if model == "v100"),
        "{err}"
    );
    assert_eq!((lis.usage_at(50), lis.booked_spans()), (4, 1), "the refused hold's CPUs were given back");
    let err = lis.prepare(&gpu_hold(1, "a100", 1, 0, 10)).await.unwrap_err();
    assert!(matches!(err, ParticipantError::InvalidHold(_)), "{err}");
    let listed = lis.booked(0, 1_000);
    assert_eq!(listed[0].gpus, Some(PoolGpus { model: "v100".into(), count: 2 }));
    lis.commit(a.id).await.unwrap();
    lis.release(a.id).await.unwrap();
    assert_eq!((lis.usage_at(50), lis.gpu_usage_at(50)), (0, vec![0, 0]));
    // Expiry frees the GPUs too.
    let clock = Arc::new(ManualClock::new(0));
    let lis = Lis::new(gpu_site(), clock.clone(), 10);
    lis.prepare(&gpu_hold(1, "k80", 4, 100, 200)).await.unwrap();
    clock.advance_to(10);
    assert_eq!(lis.gpu_usage_at(150), vec![0, 0]);
}

#[tokio::test]
async fn gpu_pools_are_fixed_and_requirable_attributes_wait_for_bookings_to_end() {
    let clock = Arc::new(ManualClock::new(0));
    let lis = Lis::new(gpu_site(), clock.clone(), 1_000);
    let mut fewer = gpu_site();
    fewer.attributes.gpus.pop();
    assert!(matches!(lis.update_site(fewer), Err(SiteUpdateError::Fixed(_))));
    let h = lis.prepare(&hold_req(1, 0, 100)).await.unwrap();
    lis.commit(h.id).await.unwrap();
    let mut labelled = gpu_site();
    labelled.attributes.labels = vec!["ssd".into()];
    assert!(matches!(lis.update_site(labelled.clone()), Err(SiteUpdateError::OsInUse { .. })));
    let mut dearer = gpu_site();
    dearer.attributes.price_per_gpu_hour = 9.0;
    lis.update_site(dearer).unwrap();
    clock.advance_to(100);
    lis.update_site(labelled).unwrap();
}

/// Plan modification: a replacement hold on a full site fits where the reservation it
/// replaces was (extend into free time, shrink, move), holds `max(old, new)` until the
/// decision, swaps at commit, and leaves the reservation as it was on abort or lease expiry.
#[tokio::test]
async fn a_replacement_hold_swaps_at_commit_and_leaves_the_reservation_on_abort() {
    let clock = Arc::new(ManualClock::new(0));
    let lis = Lis::new(site(8), clock.clone(), 120);
    let old = lis.prepare(&hold_req(8, 100, 200)).await.unwrap().id;
    lis.commit(old).await.unwrap();
    let replace = |cpus, start, end| ComputeHoldRequest { replaces: Some(old), ..hold_req(cpus, start, end) };

    // The site is full over [100, 200): extending to 300 only needs [200, 300).
    let h = lis.prepare(&replace(8, 100, 300)).await.unwrap();
    assert_eq!((lis.usage_at(150), lis.usage_at(250)), (8, 8), "old and its growth");
    let other = lis.prepare(&hold_req(1, 250, 260)).await.unwrap_err();
    assert!(matches!(other, ParticipantError::Capacity { .. }), "the growth is held: {other}");
    lis.abort(h.id).await.unwrap();
    assert_eq!((lis.usage_at(150), lis.usage_at(250)), (8, 0), "abort leaves the reservation");

    // Shrinking keeps max(old, new) until commit, then frees the difference.
    let h = lis.prepare(&replace(4, 100, 150)).await.unwrap();
    assert_eq!(lis.usage_at(170), 8, "the old shape stays booked until the decision");
    assert!(lis.prepare(&hold_req(1, 170, 180)).await.is_err());
    lis.commit(h.id).await.unwrap();
    lis.commit(h.id).await.unwrap();
    assert_eq!((lis.usage_at(120), lis.usage_at(170)), (4, 0), "swapped at commit");
    lis.release(old).await.unwrap();
    assert_eq!(lis.usage_at(120), 4, "the old one is gone: releasing it again frees nothing");
    let r = lis.booked(0, 1000);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].hold, r[0].start, r[0].end, r[0].cpus), (h.id, 100, 150, 4));

    // A replacement that does not fit even without the old reservation changes nothing.
    let again = ComputeHoldRequest { replaces: Some(h.id), ..hold_req(9, 100, 150) };
    assert!(matches!(lis.prepare(&again).await.unwrap_err(), ParticipantError::Capacity { .. }));
    let moved = ComputeHoldRequest { replaces: Some(h.id), ..hold_req(4, 500, 600) };
    let m = lis.prepare(&moved).await.unwrap();
    assert_eq!((lis.usage_at(120), lis.usage_at(550)), (4, 4));
    clock.advance_to(120);
    assert_eq!((lis.usage_at(120), lis.usage_at(550)), (4, 0), "an expired replacement leaves the reservation");
    assert_eq!(lis.commit(m.id).await, Err(ParticipantError::HoldExpired(m.id)));

    // Only a committed reservation of this site can be replaced.
    let held = lis.prepare(&hold_req(1, 700, 800)).await.unwrap().id;
    let of_held = ComputeHoldRequest { replaces: Some(held), ..hold_req(1, 700, 900) };
    assert_eq!(lis.prepare(&of_held).await.unwrap_err(), ParticipantError::NotCommitted(held));
    let unknown = HoldId::new();
    let of_unknown = ComputeHoldRequest { replaces: Some(unknown), ..hold_req(1, 700, 900) };
    assert_eq!(lis.prepare(&of_unknown).await.unwrap_err(), ParticipantError::UnknownHold(unknown));
}

/// A replacement read back from a journal: committed, it takes the reservation's place.
#[tokio::test]
async fn a_committed_replacement_is_restored_in_place_of_its_reservation() {
    let lis = Lis::new(site(8), Arc::new(ManualClock::new(0)), 120);
    let (old, new) = (HoldId::new(), HoldId::new());
    lis.restore(old, &hold_req(8, 100, 200), HoldState::Committed).unwrap();
    let replacement = ComputeHoldRequest { replaces: Some(old), ..hold_req(8, 100, 300) };
    lis.restore(new, &replacement, HoldState::Committed).unwrap();
    assert_eq!((lis.usage_at(150), lis.usage_at(250)), (8, 8));
    let r = lis.booked(0, 1000);
    assert_eq!(r.iter().map(|r| r.hold).collect::<Vec<_>>(), vec![new]);
}

/// A pending replacement whose growth was pruned as history: aborting it frees nothing twice
/// (before, `remove_growth` expected every growth span to be booked and the LIS panicked).
#[tokio::test]
async fn a_replacement_whose_growth_was_pruned_aborts_cleanly() {
    let lis = Lis::new(site(8), Arc::new(ManualClock::new(0)), 120);
    let old = lis.prepare(&hold_req(4, 100, 200)).await.unwrap().id;
    lis.commit(old).await.unwrap();
    let h = lis.prepare(&ComputeHoldRequest { replaces: Some(old), ..hold_req(4, 10, 200) }).await.unwrap();
    assert_eq!(lis.usage_at(50), 4, "the growth before the reservation");
    lis.prune_before(100);
    lis.abort(h.id).await.unwrap();
    assert_eq!((lis.usage_at(50), lis.usage_at(150)), (0, 4));
}

/// Two replacements of one reservation (two changes of one plan at once, or a change racing
/// its plan's cancellation): once the reservation is gone, the other replacement's commit is
/// refused and frees its growth. Before, it booked its new shape afresh, leaving two
/// reservations for one job.
#[tokio::test]
async fn a_replacement_of_a_reservation_released_meanwhile_is_refused_at_commit() {
    let lis = Lis::new(site(8), Arc::new(ManualClock::new(0)), 120);
    let old = lis.prepare(&hold_req(4, 100, 200)).await.unwrap().id;
    lis.commit(old).await.unwrap();
    let a = lis.prepare(&ComputeHoldRequest { replaces: Some(old), ..hold_req(4, 100, 300) }).await.unwrap().id;
    let b = lis.prepare(&ComputeHoldRequest { replaces: Some(old), ..hold_req(2, 100, 400) }).await.unwrap().id;
    lis.commit(a).await.unwrap();
    assert_eq!(lis.commit(b).await, Err(ParticipantError::NotCommitted(old)));
    assert_eq!((lis.usage_at(150), lis.usage_at(250), lis.usage_at(350)), (4, 4, 0), "only `a` is booked");
    let r = lis.booked(0, 1000);
    assert_eq!(r.iter().map(|r| r.hold).collect::<Vec<_>>(), vec![a]);
    // Cancelled meanwhile: nothing is booked afterwards.
    let c = lis.prepare(&ComputeHoldRequest { replaces: Some(a), ..hold_req(4, 100, 500) }).await.unwrap().id;
    lis.release(a).await.unwrap();
    assert_eq!(lis.commit(c).await, Err(ParticipantError::NotCommitted(a)));
    assert_eq!((lis.usage_at(150), lis.usage_at(450)), (0, 0));
}

/// At a site without Slurm, replacements (a plan modified again and again, committed or
/// aborted) leave no record behind. Before, each one's "replaces" record stayed for the life
/// of the process: only the Slurm binding, which a calendar-only site has not, took them back.
#[tokio::test]
async fn replacements_at_a_site_without_slurm_leave_no_record() {
    let lis = Lis::new(site(8), Arc::new(ManualClock::new(0)), 120);
    let mut current = lis.prepare(&hold_req(4, 100, 200)).await.unwrap().id;
    lis.commit(current).await.unwrap();
    for i in 0..20 {
        let next = ComputeHoldRequest { replaces: Some(current), ..hold_req(4, 100, 300 + i) };
        let h = lis.prepare(&next).await.unwrap().id;
        if i % 2 == 0 {
            lis.abort(h).await.unwrap();
        } else {
            lis.commit(h).await.unwrap();
            current = h;
        }
    }
    assert_eq!(lis.booked(0, 1000).iter().map(|r| r.hold).collect::<Vec<_>>(), vec![current]);
    let st = lis.state();
    assert!(st.local.replacing.is_empty(), "{} replacement records left", st.local.replacing.len());
}
