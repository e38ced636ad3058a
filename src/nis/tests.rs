use std::sync::Arc;

use super::*;
use crate::clock::ManualClock;
use crate::model::{Node, Site};
use crate::protocol::HoldLifecycle;
use crate::protocol::TxnId;

/// ```text
///  a --1000-- b --1000-- c
///  |                     |
///  +--500-- d ---500-----+      plus a parallel a-b link of 200
/// ```
fn grid() -> Grid {
    let node = |id: &str| Node::new(id, id);
    let link = |id: &str, a: &str, b: &str, cap: u64| Link {
        id: id.into(),
        a: a.into(),
        b: b.into(),
        capacity_mbps: cap,
        price_per_gbps_hour: 1.0,
    };
    let site = |id: &str, n: &str| Site::new(id, n, 8, "linux", 1.0);
    Grid::new(
        vec![node("a"), node("b"), node("c"), node("d")],
        vec![
            link("ab", "a", "b", 1000),
            link("bc", "b", "c", 1000),
            link("ad", "a", "d", 500),
            link("dc", "d", "c", 500),
            link("ab2", "a", "b", 200),
        ],
        vec![site("sa", "a"), site("sc", "c"), site("sa2", "a")],
    )
    .unwrap()
}

fn nis(routing: Routing) -> (Nis, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(0));
    (Nis::new(&grid(), clock.clone(), 120, routing), clock)
}

async fn route(n: &Nis, bw: u64) -> Option<Route> {
    let q = NetworkQuery { from_site: "sa".into(), to_site: "sc".into(), bandwidth_mbps: bw, start: 0, end: 100 };
    n.query(&q).await.unwrap()
}

fn hold(links: &[&str], bw: u64) -> NetworkHoldRequest {
    NetworkHoldRequest {
        replaces: None,
        port: None,
        txn: TxnId::new(),
        links: links.iter().map(|s| (*s).into()).collect(),
        bandwidth_mbps: bw,
        start: 0,
        end: 100,
        sites: None,
    }
}

#[tokio::test]
async fn shortest_route_avoids_links_without_free_bandwidth() {
    let (n, _) = nis(Routing::Shortest);
    let r = route(&n, 800).await.unwrap();
    assert_eq!(r.links.len(), 2);
    assert_eq!(r.free_mbps, 1000);
    assert_eq!(r.price_per_gbps_hour, 2.0);
    assert!(route(&n, 1001).await.is_none(), "above every path's capacity");
    n.prepare(&hold(&["ab", "bc"], 600)).await.unwrap();
    // 600 of 1000 booked on a-b-c; 500 is free on a-d-c as well, 800 nowhere.
    assert!(route(&n, 800).await.is_none());
    let r = route(&n, 350).await.unwrap();
    assert!(r.links.len() == 2 && r.free_mbps >= 350, "either two-hop path fits 350: {r:?}");
    let r = route(&n, 450).await.unwrap();
    assert_eq!(r.links, vec!["ad".to_string(), "dc".to_string()], "450 only fits around");
    let r = route(&n, 450 + 60).await;
    assert!(r.is_none(), "510 fits neither path");
}

#[tokio::test]
async fn widest_route_picks_the_path_with_most_free_bandwidth() {
    let (n, _) = nis(Routing::Widest { k: 3 });
    n.prepare(&hold(&["ab", "bc"], 700)).await.unwrap();
    let r = route(&n, 100).await.unwrap();
    assert_eq!(r.links, vec!["ad".to_string(), "dc".to_string()], "500 free beats 300 free");
    assert_eq!(r.free_mbps, 500);
}

#[tokio::test]
async fn prepare_is_all_or_nothing_over_the_path() {
    let (n, _) = nis(Routing::Shortest);
    n.prepare(&hold(&["dc"], 400)).await.unwrap();
    let err = n.prepare(&hold(&["ad", "dc"], 200)).await.unwrap_err();
    assert!(matches!(err, ParticipantError::LinkCapacity { ref link, .. } if link == "dc"), "{err}");
    assert_eq!(n.usage_at("ad", 50), Some(0), "the first link of a refused hold is rolled back");
    assert_eq!(n.prepare(&hold(&["zz"], 1)).await, Err(ParticipantError::UnknownLink("zz".into())));
}

#[tokio::test]
async fn same_node_needs_no_links_and_holds_expire() {
    let (n, clock) = nis(Routing::Shortest);
    let q = NetworkQuery { from_site: "sa".into(), to_site: "sa2".into(), bandwidth_mbps: 99_999, start: 0, end: 10 };
    let Some(r) = n.query(&q).await.unwrap() else { panic!("same node is always reachable") };
    assert!(r.links.is_empty());
    let h = n.prepare(&hold(&["ab", "bc"], 1000)).await.unwrap();
    assert_eq!(n.holds_outstanding(), 1);
    clock.advance_to(120);
    assert_eq!(n.usage_at("ab", 50), Some(0));
    assert_eq!(n.commit(h.id).await, Err(ParticipantError::HoldExpired(h.id)));
}

#[tokio::test]
async fn reservations_list_each_link_of_a_path_with_its_owner() {
    let (n, clock) = nis(Routing::Shortest);
    let mine = n.prepare_for(&hold(&["bc", "ab"], 300), "alice").await.unwrap();
    let theirs = n.prepare(&hold(&["ad"], 100)).await.unwrap();
    n.commit(theirs.id).await.unwrap();
    let all = n.booked(None, 0, 100).unwrap();
    let got: Vec<(&str, HoldId, u64)> = all.iter().map(|r| (r.link.as_str(), r.hold, r.bandwidth_mbps)).collect();
    assert_eq!(got, [("ab", mine.id, 300), ("bc", mine.id, 300), ("ad", theirs.id, 100)], "topology order");
    assert_eq!(all[0].state, HoldState::Held { expires_at: 120 });
    assert_eq!((all[0].start, all[0].end, all[0].owner.as_deref()), (0, 100, Some("alice")));
    assert_eq!((all[2].state, all[2].owner.as_deref()), (HoldState::Committed, None));
    let ab = n.booked(Some("ab"), 0, 100).unwrap();
    assert_eq!(ab.len(), 1);
    assert_eq!(ab[0].link, "ab");
    assert!(n.booked(Some("dc"), 0, 100).unwrap().is_empty());
    assert!(n.booked(None, 100, 200).unwrap().is_empty(), "the window is half-open");
    assert_eq!(n.booked(Some("zz"), 0, 100), Err(ParticipantError::UnknownLink("zz".into())));
    clock.advance_to(120);
    let left: Vec<HoldId> = n.booked(None, 0, 100).unwrap().iter().map(|r| r.hold).collect();
    assert_eq!(left, [theirs.id], "an expired hold is gone");
}

#[test]
fn yen_lists_loopless_paths_shortest_first() {
    let n = nis(Routing::Shortest).0;
    let (a, c) = (n.site_node["sa"], n.site_node["sc"]);
    let paths = route::yen(&n.graph, a, c, 10);
    let named: Vec<Vec<&str>> = paths.iter().map(|p| p.iter().map(|&l| n.links[l].id.as_str()).collect()).collect();
    assert_eq!(named.len(), 3, "{named:?}");
    assert!(
        named.contains(&vec!["ab", "bc"]) && named.contains(&vec!["ab2", "bc"]) && named.contains(&vec!["ad", "dc"])
    );
    assert!(paths.windows(2).all(|w| w[0].len() <= w[1].len()));
}

#[test]
fn routing_parses() {
    assert_eq!("widest:3".parse::<Routing>(), Ok(Routing::Widest { k: 3 }));
    assert_eq!("shortest".parse::<Routing>(), Ok(Routing::Shortest));
    assert!("widest:0".parse::<Routing>().is_err());
}

use dataplane::{DataplaneConfig, Interface, MapLink, MapSite, TcPlane, WanMap};

/// A data plane map of [`grid`]: every link end with an interface and a routing table; the
/// network's own routes from a to c over a - d - c (not the NIS's fewest-hop a - b - c).
fn map_of_grid() -> WanMap {
    let end = |ns: &str| Interface { netns: ns.into(), dev: "v0".into() };
    WanMap {
        scale: 0.1,
        links: ["ab", "bc", "ad", "dc", "ab2"]
            .iter()
            .map(|l| {
                let (x, y) = (&l[..1], &l[1..2]);
                (
                    (*l).to_owned(),
                    MapLink {
                        capacity_kbit: 100_000,
                        ends: [(x.to_owned(), end(x)), (y.to_owned(), end(y))].into_iter().collect(),
                        tables: [(x.to_owned(), 1000), (y.to_owned(), 1000)].into_iter().collect(),
                    },
                )
            })
            .collect(),
        sites: [("sa", "a", [10, 224, 0, 1]), ("sc", "c", [10, 224, 0, 2])]
            .iter()
            .map(|(s, n, a)| ((*s).to_owned(), MapSite { node: (*n).to_owned(), addr: (*a).into() }))
            .collect(),
        routes: [("a", [("c", "ad"), ("d", "ad"), ("b", "ab")]), ("d", [("c", "dc"), ("a", "ad"), ("b", "ad")])]
            .iter()
            .map(|(n, r)| ((*n).to_owned(), r.iter().map(|(d, l)| ((*d).to_owned(), (*l).to_owned())).collect()))
            .collect(),
    }
}

/// Issue 48: a data plane that cannot steer (rate-only) books only the path the network
/// routes, whatever the NIS's policy would choose, and no path when that one is full; with
/// steering the NIS's own choice stands.
#[tokio::test]
async fn a_data_plane_that_cannot_steer_books_only_the_routed_path() {
    let rate_only = DataplaneConfig { steering: false, ..DataplaneConfig::new("unused.json") };
    let clock = Arc::new(ManualClock::new(0));
    let n = Nis::new(&grid(), clock.clone(), 120, Routing::Shortest)
        .with_dataplane(TcPlane::with_map(rate_only, map_of_grid()));
    assert!(!n.dataplane().unwrap().steers());
    let r = route(&n, 100).await.unwrap();
    assert_eq!(r.links, vec![LinkId::from("ad"), LinkId::from("dc")], "the routed path, not a - b - c");
    assert_eq!(r.free_mbps, 500);
    // More than the routed path carries: no route, though a - b - c could.
    assert!(route(&n, 600).await.is_none());
    // Steering: the NIS's fewest-hop path.
    let steer = DataplaneConfig::new("unused.json");
    let n = Nis::new(&grid(), clock, 120, Routing::Shortest).with_dataplane(TcPlane::with_map(steer, map_of_grid()));
    assert_eq!(route(&n, 600).await.unwrap().links.len(), 2);
    assert_ne!(route(&n, 100).await.unwrap().links, vec![LinkId::from("ad"), LinkId::from("dc")]);
    // A map without tables cannot steer either (and says so at start).
    let mut no_tables = map_of_grid();
    for l in no_tables.links.values_mut() {
        l.tables.clear();
    }
    let n = Nis::new(&grid(), Arc::new(ManualClock::new(0)), 120, Routing::Shortest)
        .with_dataplane(TcPlane::with_map(DataplaneConfig::new("unused.json"), no_tables));
    assert!(!n.dataplane().unwrap().steers());
    assert_eq!(route(&n, 100).await.unwrap().links, vec![LinkId::from("ad"), LinkId::from("dc")]);
}

/// A NIS with a data plane (a map; `tc` missing): route answers between sites of the map carry
/// the marking, with the hold's port in the range; a data plane that cannot be asked refuses
/// commit and persist (before any decision); a hold without sites is booked in the calendars
/// only.
#[tokio::test]
async fn a_data_plane_marks_routes_and_refuses_when_it_cannot_check() {
    let map = map_of_grid();
    let config = DataplaneConfig { tc: "/nonexistent/tc".into(), ..DataplaneConfig::new("unused.json") };
    let clock = Arc::new(ManualClock::new(0));
    let n = Nis::new(&grid(), clock, 120, Routing::Shortest).with_dataplane(TcPlane::with_map(config, map));
    assert!(n.dataplane().unwrap().steers(), "every link end has a routing table");
    let r = route(&n, 100).await.unwrap();
    let m = r.marking.clone().expect("a marking");
    assert_eq!((m.from_addr.as_str(), m.to_addr.as_str()), ("10.224.0.1", "10.224.0.2"));
    let h = HoldId::new();
    let p = m.port(h);
    assert!((m.port_base..m.port_base + m.port_span).contains(&p) && p == m.port(h));
    // A site without an address: no marking.
    let q = NetworkQuery { from_site: "sa2".into(), to_site: "sc".into(), bandwidth_mbps: 1, start: 0, end: 100 };
    assert!(n.query(&q).await.unwrap().unwrap().marking.is_none());
    // tc cannot be run: the commit is refused before the decision, and the hold stays held.
    let req = NetworkHoldRequest {
        replaces: None,
        port: None,
        sites: Some(("sa".into(), "sc".into())),
        ..hold(&r.links.iter().map(|l| l.as_str()).collect::<Vec<_>>(), 100)
    };
    let held = n.prepare(&req).await.unwrap();
    assert!(matches!(n.commit(held.id).await, Err(ParticipantError::DataPlane(_))));
    assert!(matches!(n.persist(&[held.id]).await, Err(ParticipantError::DataPlane(_))));
    n.abort(held.id).await.unwrap();
    // A hold without sites (REST) is the calendars' only.
    let plain = n.prepare(&hold(&["ab", "bc"], 100)).await.unwrap();
    n.commit(plain.id).await.unwrap();
}

/// Plan modification at the NIS: a replacement hold keeps the path, fits where the
/// reservation it replaces was, and swaps at commit; abort leaves the reservation.
#[tokio::test]
async fn a_replacement_transfer_hold_swaps_at_commit() {
    let (n, _) = nis(Routing::Shortest);
    let old = n.prepare(&hold(&["ab", "bc"], 1000)).await.unwrap().id;
    n.commit(old).await.unwrap();
    let replace = |links: &[&str], bw, end| NetworkHoldRequest { replaces: Some(old), end, ..hold(links, bw) };
    let wrong_path = n.prepare(&replace(&["ad", "dc"], 1000, 100)).await.unwrap_err();
    assert!(matches!(wrong_path, ParticipantError::InvalidHold(_)), "{wrong_path}");
    let h = n.prepare(&replace(&["ab", "bc"], 1000, 200)).await.unwrap();
    assert_eq!((n.usage_at("ab", 50), n.usage_at("ab", 150)), (Some(1000), Some(1000)));
    n.abort(h.id).await.unwrap();
    assert_eq!((n.usage_at("ab", 50), n.usage_at("ab", 150)), (Some(1000), Some(0)));
    let h = n.prepare(&replace(&["ab", "bc"], 400, 200)).await.unwrap();
    n.commit(h.id).await.unwrap();
    assert_eq!((n.usage_at("bc", 50), n.usage_at("bc", 150)), (Some(400), Some(400)));
    let r = n.booked(None, 0, 1000).unwrap();
    assert!(r.iter().all(|r| r.hold == h.id && r.bandwidth_mbps == 400 && r.end == 200), "{r:?}");
    assert_eq!(r.len(), 2);
}

/// The NIS's twin of the LIS's: a pending replacement's pruned growth aborts cleanly.
#[tokio::test]
async fn a_replacement_transfer_whose_growth_was_pruned_aborts_cleanly() {
    let (n, _) = nis(Routing::Shortest);
    let old = n.prepare(&NetworkHoldRequest { start: 50, ..hold(&["ab"], 100) }).await.unwrap().id;
    n.commit(old).await.unwrap();
    let h = n.prepare(&NetworkHoldRequest { replaces: Some(old), start: 10, ..hold(&["ab"], 100) }).await.unwrap();
    assert_eq!(n.usage_at("ab", 20), Some(100));
    n.prune_before(50);
    n.abort(h.id).await.unwrap();
    assert_eq!((n.usage_at("ab", 20), n.usage_at("ab", 60)), (Some(0), Some(100)));
}

/// The NIS's twin of the LIS's: a replacement whose reservation was released meanwhile is
/// refused at commit and books nothing (before, it booked its bandwidth afresh).
#[tokio::test]
async fn a_replacement_transfer_of_a_released_reservation_is_refused_at_commit() {
    let (n, _) = nis(Routing::Shortest);
    let old = n.prepare(&hold(&["ab"], 100)).await.unwrap().id;
    n.commit(old).await.unwrap();
    let h = n.prepare(&NetworkHoldRequest { replaces: Some(old), ..hold(&["ab"], 300) }).await.unwrap().id;
    n.release(old).await.unwrap();
    assert_eq!(n.commit(h).await, Err(ParticipantError::NotCommitted(old)));
    assert_eq!(n.usage_at("ab", 50), Some(0));
}

/// Issue 46: `first_granted` answers as the questions asked one by one, stopping at the first
/// with a path; none with a path is `Some(None)`; an unknown site is left to `query`.
#[tokio::test]
async fn first_granted_is_the_first_question_with_a_path() {
    let (n, _) = nis(Routing::Shortest);
    // 800 of 1000 booked on a-b-c over [0, 100): 600 fits nowhere then, anywhere from 100 on.
    n.prepare(&hold(&["ab", "bc"], 800)).await.unwrap();
    let at = |start: Time, bw: u64| NetworkQuery {
        from_site: "sa".into(),
        to_site: "sc".into(),
        bandwidth_mbps: bw,
        start,
        end: start + 50,
    };
    let qs = [at(0, 600), at(50, 600), at(100, 600), at(150, 600)];
    let one_by_one = n.query(&qs[2]).await.unwrap();
    assert!(n.query(&qs[1]).await.unwrap().is_none());
    assert_eq!(n.first_granted(&qs).await, Some(Some((2, one_by_one))));
    assert_eq!(n.first_granted(&qs[..2]).await, Some(None), "none has a path");
    assert_eq!(n.first_granted(&[]).await, Some(None));
    let unknown = NetworkQuery { to_site: "nowhere".into(), ..at(100, 600) };
    assert_eq!(n.first_granted(&[qs[0].clone(), unknown]).await, None, "query's error to give");
}
