//! The NIS's data plane on an emulated network (`scripts/emulated-wan`: network namespaces, one
//! per node, veth links shaped with HTB; traffic never leaves them): bandwidth booked through
//! the service is bandwidth delivered, measured with iperf3 (docs/protocol.md, "The NIS's data
//! plane"). The grid: a line n1 - n2 - n3 of 1 Gbit/s links (shaped to 100 Mbit/s, scale 0.1),
//! one site per node; transfers s1 -> s3 (both links) and s2 -> s3 (the shared link n2 - n3).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use coreserve::model::Grid;
use coreserve::nis::dataplane::DataplaneConfig;
use serde_json::{json, Value};

use crate::support::{in_hours, machine, TestApp, ADMIN};

const SCALE: f64 = 0.1;

fn grid_json() -> Value {
    json!({
        "nodes": [{"id": "n1"}, {"id": "n2"}, {"id": "n3"}],
        "links": [
            {"id": "l12", "a": "n1", "b": "n2", "capacity_mbps": 1000, "price_per_gbps_hour": 0.1},
            {"id": "l23", "a": "n2", "b": "n3", "capacity_mbps": 1000, "price_per_gbps_hour": 0.1}
        ],
        "sites": [
            {"id": "s1", "node": "n1", "cpus": 16, "os": "one", "price_per_cpu_hour": 1.0},
            {"id": "s2", "node": "n2", "cpus": 16, "os": "two", "price_per_cpu_hour": 1.0},
            {"id": "s3", "node": "n3", "cpus": 16, "os": "three", "price_per_cpu_hour": 1.0}
        ]
    })
}

/// The emulated network of one test, torn down on drop.
struct Wan {
    name: String,
    map: PathBuf,
    dir: tempfile::TempDir,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/emulated-wan")
}

impl Wan {
    fn start(tag: &str) -> Wan {
        Wan::start_with(tag, &grid_json(), SCALE)
    }

    fn start_with(tag: &str, grid_json: &Value, scale: f64) -> Wan {
        let dir = tempfile::tempdir().unwrap();
        let grid = dir.path().join("grid.json");
        std::fs::write(&grid, grid_json.to_string()).unwrap();
        let map = dir.path().join("map.json");
        let name = format!("{tag}{}", std::process::id());
        let out = Command::new(script())
            .args(["start", &name, grid.to_str().unwrap(), &scale.to_string(), map.to_str().unwrap()])
            .output()
            .expect("scripts/emulated-wan (needs root, iproute2, python3)");
        assert!(out.status.success(), "emulated-wan start: {}", String::from_utf8_lossy(&out.stderr));
        Wan { name, map, dir }
    }

    /// The namespace of node `n` (1-based, as the grid's ids).
    fn ns(&self, node: usize) -> String {
        format!("cswan-{}-{}", self.name, node - 1)
    }

    /// The namespace of site `s` (1-based: s1, s2, s3)'s host.
    fn host(&self, site: usize) -> String {
        format!("cswan-{}-s{}", self.name, site - 1)
    }

    fn sh(&self, site: usize, args: &[&str]) -> std::process::Output {
        Command::new("ip").args(["netns", "exec", &self.host(site)]).args(args).output().unwrap()
    }

    fn tc(&self, node: usize, args: &[&str]) -> String {
        let out = Command::new("tc").args(["-n", &self.ns(node)]).args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The NIS's classes on node `node`'s `dev` (minor, rate as printed, bytes sent).
    fn classes(&self, node: usize, dev: &str) -> Vec<(String, String, u64)> {
        let text = self.tc(node, &["-s", "class", "show", "dev", dev]);
        let mut out = Vec::new();
        let mut cur: Option<(String, String)> = None;
        for line in text.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            if w.first() == Some(&"class") {
                cur = None;
                let handle = w[2].to_owned();
                if handle != "1:1" && handle != "1:ffff" {
                    let rate = w.iter().position(|x| *x == "rate").map(|i| w[i + 1].to_owned()).unwrap_or_default();
                    cur = Some((handle, rate));
                }
            } else if w.first() == Some(&"Sent") {
                if let Some((h, r)) = cur.take() {
                    out.push((h, r, w[1].parse().unwrap()));
                }
            }
        }
        out
    }

    /// Bytes sent by the unreserved class 1:ffff of node `node`'s `dev`.
    fn default_bytes(&self, node: usize, dev: &str) -> u64 {
        let text = self.tc(node, &["-s", "class", "show", "dev", dev, "classid", "1:ffff"]);
        let w: Vec<&str> = text.split_whitespace().collect();
        let i = w.iter().position(|x| *x == "Sent").expect("1:ffff's counters");
        w[i + 1].parse().unwrap()
    }

    /// The handle of the u32 filter sending to class `classid` on node `node`'s `dev`.
    fn filter_to(&self, node: usize, dev: &str, classid: &str) -> String {
        let v: Vec<Value> = serde_json::from_str(&self.tc(node, &["-j", "filter", "show", "dev", dev, "parent", "1:"]))
            .unwrap_or_default();
        v.iter()
            .filter_map(|f| f.get("options"))
            .find(|o| o["flowid"].as_str() == Some(classid))
            .and_then(|o| o["fh"].as_str())
            .unwrap_or_else(|| panic!("no filter to {classid} on {node}/{dev}: {v:?}"))
            .to_owned()
    }

    /// The NIS's routing rules (preference 10000) in node `node`'s namespace.
    fn rules(&self, node: usize) -> Vec<Value> {
        let out =
            Command::new("ip").args(["-j", "-n", &self.ns(node), "rule", "show", "pref", "10000"]).output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    }

    /// Node `node`'s IPv4 forwarding state: its routing rules and every route of every table
    /// (`ip -4 rule show`, `ip -4 route show table all`), as text. (IPv6 is left out: the
    /// kernel adds link-local addresses to the interfaces by itself a while after they are up.)
    fn forwarding(&self, node: usize) -> String {
        let mut out = String::new();
        for args in [&["rule", "show"][..], &["route", "show", "table", "all"][..]] {
            let o = Command::new("ip").args(["-4", "-n", &self.ns(node)]).args(args).output().unwrap();
            assert!(o.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&o.stderr));
            out.push_str(&String::from_utf8_lossy(&o.stdout));
        }
        out
    }

    /// Bytes sent by class `classid` of node `node`'s `dev` (0 if there is no such class).
    fn class_bytes(&self, node: usize, dev: &str, classid: &str) -> u64 {
        self.classes(node, dev).into_iter().find(|c| c.0 == classid).map_or(0, |c| c.2)
    }

    /// Filters at preferences other than none on node `node`'s `dev`.
    fn filters(&self, node: usize, dev: &str) -> usize {
        let v: Vec<Value> = serde_json::from_str(&self.tc(node, &["-j", "filter", "show", "dev", dev, "parent", "1:"]))
            .unwrap_or_default();
        v.iter().filter(|f| f.get("options").is_some_and(|o| o.get("flowid").is_some())).count()
    }

    fn addr(site: usize) -> String {
        format!("10.224.0.{site}")
    }

    fn iperf_server(&self, site: usize, port: u16) {
        let out = self.sh(site, &["iperf3", "-s", "-D", "-p", &port.to_string(), "-B", &Self::addr(site)]);
        assert!(out.status.success(), "iperf3 -s: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// An iperf3 client from site `from` to site `to` on `port`, `streams` TCP flows for
    /// `secs` s, in the background.
    fn iperf_client(&self, from: usize, to: usize, port: u16, secs: u32, streams: u32) -> std::process::Child {
        Command::new("ip")
            .args(["netns", "exec", &self.host(from), "iperf3", "-J", "-c", &Self::addr(to), "-B", &Self::addr(from)])
            .args(["-p", &port.to_string(), "-t", &secs.to_string(), "-i", "1", "-P", &streams.to_string()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }
}

impl Drop for Wan {
    fn drop(&mut self) {
        let _ = Command::new(script()).args(["stop", &self.name]).output();
        let _ = &self.dir;
    }
}

/// Mbit/s of each 1 s interval after the first (iperf3 -J of the sender).
fn intervals(child: std::process::Child) -> Vec<f64> {
    let out = child.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("iperf3 -J: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    let iv = v["intervals"].as_array().unwrap_or_else(|| panic!("iperf3: {v}"));
    iv.iter()
        .filter(|i| i["sum"]["start"].as_f64().unwrap() >= 0.99 && i["sum"]["seconds"].as_f64().unwrap() > 0.5)
        .map(|i| i["sum"]["bits_per_second"].as_f64().unwrap() / 1e6)
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

async fn app(wan: &Wan) -> TestApp {
    app_on(wan, grid_json()).await
}

async fn app_on(wan: &Wan, grid_json: Value) -> TestApp {
    app_with(wan, grid_json, true).await
}

/// The service on `grid_json` with the data plane of `wan`, steering (`--dataplane tc`) or
/// rate-only (`--dataplane tc-rate-only`, `steering` false).
async fn app_with(wan: &Wan, grid_json: Value, steering: bool) -> TestApp {
    let grid: Grid = serde_json::from_value(grid_json).unwrap();
    let map = wan.map.clone();
    TestApp::memory(grid, |c| {
        c.dataplane = Some(DataplaneConfig { sync_ms: 250, steering, ..DataplaneConfig::new(map) });
        c.w_interval_s = 3;
    })
    .await
}

/// Three jobs pinned to s1, s2, s3 (by os) and two transfers into s3: s1 -> s3 `bw13`, s2 ->
/// s3 `bw23` Mbit/s (booked; the data plane gets a tenth), over `secs` s.
fn plan(id: &str, bw13: u64, bw23: u64, secs: i64) -> Value {
    json!({
        "id": id,
        "deadline": in_hours(2),
        "jobs": [
            {"name": "A", "os": "one", "cpus": 1, "offset_s": 0, "duration_s": secs},
            {"name": "B", "os": "two", "cpus": 1, "offset_s": 0, "duration_s": secs},
            {"name": "C", "os": "three", "cpus": 1, "offset_s": 0, "duration_s": secs}
        ],
        "transfers": [
            {"from": "A", "to": "C", "bandwidth_mbps": bw13, "offset_s": 0, "duration_s": secs},
            {"from": "B", "to": "C", "bandwidth_mbps": bw23, "offset_s": 0, "duration_s": secs}
        ]
    })
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str().unwrap().parse().unwrap()
}

async fn until(t: DateTime<Utc>) {
    let d = (t - Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(d).await;
}

/// Background: 20 unreserved TCP flows into s3 over link n2 - n3, 16 from s2 (ports 5201 and
/// 5202) and 4 from s1 (5203). Many flows: the emulated links' unreserved class is a drop-tail
/// FIFO (the test machine's kernel has no fq_codel), under which a few TCP flows share very
/// unevenly; with many, any one flow's share is small.
const BACKGROUND: u16 = 5201;

fn background(wan: &Wan, secs: u32) -> Vec<std::process::Child> {
    vec![
        wan.iperf_client(2, 3, BACKGROUND, secs, 8),
        wan.iperf_client(2, 3, BACKGROUND + 1, secs, 8),
        wan.iperf_client(1, 3, BACKGROUND + 2, secs, 4),
    ]
}

/// Items 1 to 4 of issue 24: booked transfers get their rate against saturating background
/// traffic, the same flows unbooked get visibly less, nothing is left after the window, and
/// each transfer's packets cross exactly its path's links.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn booked_bandwidth_is_delivered_on_the_emulated_network() {
    let _machine = machine::reserve("dataplane").await;
    let wan = Wan::start("m");
    let app = app(&wan).await;
    const SECS: u32 = 7;
    for p in [BACKGROUND, BACKGROUND + 1, BACKGROUND + 2, 5301, 5302] {
        wan.iperf_server(3, p);
    }

    // Control arm: the same two flows without bookings (ports outside the reserved range),
    // against the background. It shows something only on a saturated link: on a 2-core machine
    // shared with other tests the background's senders may be starved of CPU, and an unsaturated
    // link gives every flow what it asks. So the shared link's load is measured from its tc
    // counters (n2's end of l23, 100 Mbit/s), and the arm is run again (up to 5 times) until
    // the background filled it to 85 %; never full, the test fails (it would compare nothing).
    let (mut control, mut best_load) = (None, 0.0_f64);
    for attempt in 1..=5 {
        let before = wan.default_bytes(2, "v1");
        let begun = Instant::now();
        let bg = background(&wan, SECS + 1);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let c13 = wan.iperf_client(1, 3, 5301, SECS, 1);
        let c23 = wan.iperf_client(2, 3, 5302, SECS, 1);
        let (c13, c23) = (intervals(c13), intervals(c23));
        let bgc: f64 = bg.into_iter().map(|b| mean(&intervals(b))).sum();
        let load = (wan.default_bytes(2, "v1") - before) as f64 * 8.0 / 1e6 / begun.elapsed().as_secs_f64();
        eprintln!(
            "control {attempt}: s1->s3 {:.1} (min {:.1}), s2->s3 {:.1} (min {:.1}), background {bgc:.1}, link l23 {load:.1} Mbit/s",
            mean(&c13),
            min(&c13),
            mean(&c23),
            min(&c23)
        );
        best_load = best_load.max(load);
        if load >= 85.0 {
            control = Some((c13, c23));
            break;
        }
    }

    // Booked arm: 600 and 300 of 1000 Mbit/s, i.e. 60 and 30 of 100 on the emulated links.
    let r = app.post("/v1/plans", ADMIN, &plan("dp-1", 600, 300, 24)).await;
    assert_eq!(r.status(), 201);
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["status"], "committed", "{p}");
    let t = p["transfers"].as_array().unwrap();
    let t13 = t.iter().find(|x| x["from"] == "A").unwrap();
    let t23 = t.iter().find(|x| x["from"] == "B").unwrap();
    assert_eq!(t13["path"], json!(["l12", "l23"]), "{p}");
    assert_eq!(t23["path"], json!(["l23"]), "{p}");
    for (x, from) in [(t13, 1), (t23, 2)] {
        assert_eq!(x["traffic"]["protocol"], "tcp", "{p}");
        assert_eq!(x["traffic"]["from_addr"], Wan::addr(from), "{p}");
        assert_eq!(x["traffic"]["to_addr"], Wan::addr(3), "{p}");
    }
    let port = |x: &Value| x["traffic"]["port"].as_u64().unwrap() as u16;
    let (p13, p23) = (port(t13), port(t23));
    wan.iperf_server(3, p13);
    wan.iperf_server(3, p23);
    let (start, end) = (time(&t13["start"]), time(&t13["end"]));
    // Nothing is installed before the window.
    assert!(wan.classes(2, "v1").is_empty(), "before the window: {:?}", wan.classes(2, "v1"));
    // The timer installs them at the window's start: measured from the start to the rules
    // being on the shared link.
    until(start).await;
    let opened = Instant::now();
    while wan.classes(2, "v1").len() < 2 && opened.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let open_lag = opened.elapsed();
    eprintln!("window start to installed: {open_lag:?}");
    assert!(open_lag < Duration::from_millis(1500), "installed {open_lag:?} after the window's start");
    let installed_at = Instant::now();
    let bg = background(&wan, SECS + 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let b13 = wan.iperf_client(1, 3, p13, SECS, 1);
    let b23 = wan.iperf_client(2, 3, p23, SECS, 1);
    let (b13, b23) = (intervals(b13), intervals(b23));
    let bgi: f64 = bg.into_iter().map(|b| mean(&intervals(b))).sum();
    eprintln!(
        "booked: s1->s3 {:.1} (min {:.1}) of 60, s2->s3 {:.1} (min {:.1}) of 30, background {:.1} Mbit/s",
        mean(&b13),
        min(&b13),
        mean(&b23),
        min(&b23),
        bgi
    );
    // 4: each transfer's class exists on exactly the links of its path, in its direction, and
    // counts its bytes: s1 -> s3 on n1's end of l12 and n2's end of l23; s2 -> s3 on n2's end
    // of l23 only; nothing on the reverse ends.
    assert!(Utc::now() < end, "the measurement overran the window (ended {} after it)", Utc::now() - end);
    let on_l12 = wan.classes(1, "v0");
    let on_l23 = wan.classes(2, "v1");
    eprintln!("classes: n1/v0 {on_l12:?}, n2/v1 {on_l23:?}");
    assert_eq!(on_l12.len(), 1, "{on_l12:?}");
    assert_eq!(on_l23.len(), 2, "{on_l23:?}");
    assert!(wan.classes(2, "v0").is_empty() && wan.classes(3, "v1").is_empty(), "reverse direction");
    assert_eq!(wan.filters(1, "v0"), 1);
    assert_eq!(wan.filters(2, "v1"), 2);
    let c60 = on_l23.iter().find(|c| c.1 == "60Mbit").expect("the 60 Mbit/s class on l23");
    let c30 = on_l23.iter().find(|c| c.1 == "30Mbit").expect("the 30 Mbit/s class on l23");
    assert_eq!(on_l12[0].1, "60Mbit");
    // s1 -> s3's bytes crossed both of its links (the same bytes, within what was in flight).
    let (a, b) = (on_l12[0].2 as f64, c60.2 as f64);
    assert!(a > 20e6 && (a - b).abs() / a < 0.05, "s1->s3 bytes on l12 {a} and on l23 {b}");
    assert!(c30.2 > 10_000_000, "s2->s3 bytes on l23: {}", c30.2);

    // 1: each booked transfer gets at least 90 % of its reservation in every 1 s interval
    // after the first.
    assert!(b13.len() >= SECS as usize - 2 && min(&b13) >= 0.9 * 60.0, "s1->s3 booked 60 Mbit/s, got {b13:?}");
    assert!(b23.len() >= SECS as usize - 2 && min(&b23) >= 0.9 * 30.0, "s2->s3 booked 30 Mbit/s, got {b23:?}");
    // 2: without the bookings, on the same saturated link, visibly less: the two flows do not
    // both keep 90 % of their rate in every interval (the guarantee the booking gives), and
    // together they get less than booked. (A single unreserved flow's share under drop-tail is a
    // lottery: tighter bounds on it measure the lottery.)
    let Some((c13, c23)) = &control else {
        panic!("control: the background never filled l23 to 85 % in 5 tries (best {best_load:.1} Mbit/s): no contention to compare with")
    };
    assert!(min(c13) < 0.9 * 60.0 || min(c23) < 0.9 * 30.0, "control: s1->s3 {c13:?}, s2->s3 {c23:?}");
    assert!(mean(c13) + mean(c23) < mean(&b13) + mean(&b23), "control: s1->s3 {c13:?}, s2->s3 {c23:?}");

    // 3: after the window, nothing of them is installed, and the background gets the link.
    until(end).await;
    let closed = Instant::now();
    // Every interface of the path: the NIS removes the rules one namespace after the other, so
    // one interface being clean does not mean the others are (CI saw n1/v0 still listed).
    let path = [(1, "v0"), (2, "v1"), (2, "v0"), (3, "v1")];
    while path.iter().any(|&(n, dev)| !wan.classes(n, dev).is_empty() || wan.filters(n, dev) > 0)
        && closed.elapsed() < Duration::from_secs(3)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let close_lag = closed.elapsed();
    eprintln!("window end to removed: {close_lag:?}");
    assert!(close_lag < Duration::from_millis(1500), "removed {close_lag:?} after the window's end");
    let removed_after = installed_at.elapsed();
    for (n, dev) in path {
        let classes = wan.classes(n, dev);
        assert!(classes.is_empty(), "after the window: {n}/{dev} {classes:?}");
        assert_eq!(wan.filters(n, dev), 0, "after the window: filters on {n}/{dev}");
    }
    // Measured on the link itself (the unreserved class's byte counter on n2's end of l23, over
    // the last 2 s of a 3 s run): iperf3's sender-side figures over so short a run count the
    // bytes its 20 flows' socket buffers took in.
    let bg = background(&wan, 3);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (b0, t0) = (wan.default_bytes(2, "v1"), Instant::now());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let alone = (wan.default_bytes(2, "v1") - b0) as f64 * 8.0 / t0.elapsed().as_secs_f64() / 1e6;
    for b in bg {
        intervals(b);
    }
    eprintln!("background alone after the window: {alone:.1} Mbit/s on l23 ({removed_after:?} after the start)");
    // As much as the unbooked link carried before the bookings (85 of 100 Mbit/s, unless the
    // machine could not send that much then either).
    assert!(alone >= 85.0_f64.min(0.9 * best_load), "background alone {alone}, before the bookings {best_load}");
    // Every window opened and closed once, as the metrics count them (polled: the count follows
    // the removal it counts).
    let counted = |m: &str| {
        m.contains("coreserve_dataplane_reconciled_total{action=\"opened\"} 2")
            && m.contains("coreserve_dataplane_reconciled_total{action=\"closed\"} 2")
    };
    let asked = Instant::now();
    let mut metrics = app.metrics().await;
    while !counted(&metrics) && asked.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        metrics = app.metrics().await;
    }
    let dataplane: Vec<&str> = metrics.lines().filter(|l| l.starts_with("coreserve_dataplane_")).collect();
    eprintln!("{}", dataplane.join("\n"));
    assert!(counted(&metrics), "{dataplane:#?}");
}

/// Faults: a data plane that refuses at commit (an interface of the path lost its shaping)
/// leaves the plan uncommitted and nothing booked; a rule removed behind the NIS's back is
/// installed again and its plan marked broken; cancel removes the rules at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_data_plane_commits_nothing_and_drift_breaks_the_plan() {
    let wan = Wan::start("f");
    let app = app(&wan).await;
    // n2's end of l23 unshaped: both transfers cross it.
    let out = Command::new("tc").args(["-n", &wan.ns(2), "qdisc", "del", "dev", "v1", "root"]).output().unwrap();
    assert!(out.status.success());
    let r = app.post("/v1/plans", ADMIN, &plan("dp-refused", 100, 100, 30)).await;
    let p: Value = r.json().await.unwrap();
    assert_ne!(p["status"], "committed", "{p}");
    assert!(p.to_string().contains("data plane") || p.to_string().contains("data-plane"), "{p}");
    assert_eq!(app.state.participants.nis.usage_at("l23", Utc::now().timestamp() + 10), Some(0), "nothing booked");
    // Shaping back: the same plan commits.
    for cmd in [
        "qdisc add dev v1 root handle 1: htb default ffff",
        "class add dev v1 parent 1: classid 1:1 htb rate 100000kbit ceil 100000kbit quantum 15140",
        "class add dev v1 parent 1:1 classid 1:ffff htb rate 1000kbit ceil 100000kbit quantum 15140",
    ] {
        let out = Command::new("tc").args(["-n", &wan.ns(2)]).args(cmd.split(' ')).output().unwrap();
        assert!(out.status.success(), "{cmd}");
    }
    let r = app.post("/v1/plans", ADMIN, &plan("dp-ok", 100, 100, 30)).await;
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["status"], "committed", "{p}");
    let id = p["id"].as_str().unwrap().to_owned();
    until(time(&p["transfers"][0]["start"]) + chrono::Duration::milliseconds(500)).await;
    // Installed at the window's start (a busy machine may take longer than the 500 ms).
    let opened = Instant::now();
    while wan.classes(2, "v1").len() < 2 && opened.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cls = wan.classes(2, "v1");
    assert_eq!(cls.len(), 2, "{cls:?}");
    // Behind the NIS's back: one class and its filter removed.
    let minor = cls[0].0.trim_start_matches("1:").to_owned();
    let handle = wan.filter_to(2, "v1", &format!("1:{minor}"));
    let out = Command::new("tc")
        .args(["-n", &wan.ns(2), "filter", "del", "dev", "v1", "parent", "1:", "prio", "1", "handle", &handle, "u32"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Command::new("tc").args(["-n", &wan.ns(2), "class", "del", "dev", "v1", "classid", &cls[0].0]).output().unwrap();
    assert_eq!(wan.classes(2, "v1").len(), 1);
    // Installed again within a reconciliation, and the plan is broken within a drift watch.
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut broken = Value::Null;
    while Instant::now() < deadline {
        let v: Value = app.get(&format!("/v1/plans/{id}"), ADMIN).await.json().await.unwrap();
        if v["status"] == "broken" && wan.classes(2, "v1").len() == 2 {
            broken = v;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(broken["status"], "broken", "not broken / not re-installed: {:?}", wan.classes(2, "v1"));
    assert!(
        broken["transfers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["broken"].as_str().is_some_and(|b| b.contains("installed again"))),
        "{broken}"
    );
    assert!(app.metrics().await.contains("coreserve_dataplane_reconciled_total{action=\"reinstalled\"} 1"));
    // Cancel: the rules go at once.
    let r = app.call(reqwest::Method::DELETE, &format!("/v1/plans/{id}"), Some(ADMIN), None).await;
    assert!(r.status().is_success(), "{:?}", r.text().await);
    assert!(wan.classes(2, "v1").is_empty() && wan.classes(1, "v0").is_empty());
    assert_eq!(wan.filters(2, "v1"), 0);
}

/// Issue 25: the data plane follows a modification. The modified transfer keeps the port its
/// plan named (the application changes nothing) and gets its new rate: installed when its
/// window opens (modified before), or at once (modified while it runs); the old rules go and
/// the interface carries one class per transfer throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modified_transfer_keeps_its_port_at_the_new_rate() {
    let _machine = machine::reserve("dataplane").await;
    let wan = Wan::start("u");
    let app = app(&wan).await;
    let mut body = plan("dp-modify", 100, 100, 60);
    for t in body["transfers"].as_array_mut().unwrap() {
        t["offset_s"] = json!(8);
        t["duration_s"] = json!(30);
    }
    let p: Value = app.post("/v1/plans", ADMIN, &body).await.json().await.unwrap();
    assert_eq!(p["status"], "committed", "{p}");
    let id = p["id"].as_str().unwrap().to_owned();
    let port = p["transfers"][0]["traffic"]["port"].as_u64().expect("a marked transfer");
    // The one reservation of link l12 (transfer A -> C crosses it, B -> C does not): its hold.
    let hold_on_l12 = || async {
        let (from, to) = (in_hours(-1), in_hours(2));
        let path = format!("/v1/network/links/l12/reservations?from={from}&to={to}");
        let list: Vec<Value> = app.get(&path, ADMIN).await.json().await.unwrap();
        assert_eq!(list.len(), 1, "{list:?}");
        list[0]["hold"].as_str().unwrap().parse::<coreserve::protocol::HoldId>().unwrap()
    };
    let rules_of = |hold| app.state.participants.nis.dataplane_rules(hold);
    let first = hold_on_l12().await;

    // 1. Before its window: 300 Mbit/s instead of 100.
    let change = json!({"transfers": [{"from": "A", "to": "C", "bandwidth_mbps": 300}]});
    let r = app.call(reqwest::Method::PATCH, &format!("/v1/plans/{id}"), Some(ADMIN), Some(&change)).await;
    let m: Value = r.json().await.unwrap();
    assert_eq!(m["transfers"][0]["bandwidth_mbps"], 300, "{m}");
    assert_eq!(m["transfers"][0]["traffic"]["port"].as_u64(), Some(port), "the plan keeps its port: {m}");
    let second = hold_on_l12().await;
    assert_ne!(second, first);
    assert!(rules_of(second).is_empty(), "its window is not open yet");
    until(time(&m["transfers"][0]["start"]) + chrono::Duration::milliseconds(800)).await;
    let rules = rules_of(second);
    assert_eq!(rules.len(), 2, "both links of the path: {rules:?}");
    for r in &rules {
        assert_eq!((u64::from(r.port), r.rate_kbit), (port, (300.0 * SCALE * 1000.0) as u64), "{r:?}");
    }
    assert!(rules_of(first).is_empty());
    let rates: Vec<String> = wan.classes(2, "v1").into_iter().map(|c| c.1).collect();
    assert_eq!(rates.len(), 2, "one class per transfer on the shared link: {rates:?}");
    assert!(rates.contains(&"30Mbit".to_owned()), "{rates:?}");

    // 2. While it runs: 10 s longer. The new rules are in when the answer comes.
    let change = json!({"transfers": [{"from": "A", "to": "C", "duration_s": 40}]});
    let r = app.call(reqwest::Method::PATCH, &format!("/v1/plans/{id}"), Some(ADMIN), Some(&change)).await;
    let m: Value = r.json().await.unwrap();
    assert_eq!(m["transfers"][0]["traffic"]["port"].as_u64(), Some(port), "{m}");
    let third = hold_on_l12().await;
    let rules = rules_of(third);
    assert_eq!(rules.len(), 2, "installed at the commit: {rules:?}");
    assert!(rules.iter().all(|r| u64::from(r.port) == port && r.rate_kbit == 30_000), "{rules:?}");
    assert!(rules_of(second).is_empty(), "the replaced rules are gone");
    assert_eq!(wan.classes(2, "v1").len(), 2);
    assert_eq!(wan.filters(2, "v1"), 2);
}

/// How many transfers one NIS keeps installed, and what a reconciliation of them costs: `N`
/// (default 2000, `CORESERVE_DATAPLANE_N`; issue 48 measured 10,000, past the 2,047 that one
/// u32 preference per transfer allowed) committed transfers restored as after a restart, half
/// s1 -> s3 (two links), half s2 -> s3, each on a port of its own, all open now; one
/// reconciliation installs them all (N classes and filters on the shared link's interface, and
/// per hop a routing rule and one for the return traffic), the next finds them intact, and a NIS
/// that has none of them (a restart with an empty journal) removes them as strays.
/// A measurement for BENCHMARKS.md: `cargo test --release --test it dataplane::reconcile --
/// --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored"]
async fn reconcile_a_full_interface() {
    use coreserve::nis::dataplane::TcPlane;
    use coreserve::nis::{Nis, Routing};
    use coreserve::protocol::{HoldId, HoldState, NetworkHoldRequest, TxnId};
    let _machine = machine::reserve("dataplane").await;
    let n: usize = std::env::var("CORESERVE_DATAPLANE_N").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    let mut g = grid_json();
    for l in g["links"].as_array_mut().unwrap() {
        l["capacity_mbps"] = json!(100_000);
    }
    let wan = Wan::start_with("k", &g, 0.001);
    let grid: Grid = serde_json::from_value(g).unwrap();
    let clock: std::sync::Arc<dyn coreserve::clock::Clock> = std::sync::Arc::new(coreserve::clock::SystemClock);
    let open = || TcPlane::open(DataplaneConfig::new(&wan.map)).unwrap();
    let nis = Nis::new(&grid, clock.clone(), 120, Routing::Shortest).with_dataplane(open());
    let now = Utc::now().timestamp();
    for i in 0..n {
        let (links, from): (Vec<&str>, &str) =
            if i % 2 == 0 { (vec!["l12", "l23"], "s1") } else { (vec!["l23"], "s2") };
        let req = NetworkHoldRequest {
            replaces: None,
            port: Some(10_000 + i as u16),
            txn: TxnId::new(),
            links: links.into_iter().map(Into::into).collect(),
            bandwidth_mbps: 5,
            start: now - 1,
            end: now + 3600,
            sites: Some((from.into(), "s3".into())),
        };
        nis.restore(HoldId::new(), &req, HoldState::Committed).unwrap();
    }
    let t = Instant::now();
    let first = nis.reconcile_dataplane().await.unwrap();
    let install = t.elapsed();
    assert_eq!(first.opened, n, "{first:?}");
    let t = Instant::now();
    let second = nis.reconcile_dataplane().await.unwrap();
    let steady = t.elapsed();
    assert_eq!((second.active, second.opened, second.reinstalled), (n, 0, 0), "{second:?}");
    assert_eq!(wan.classes(2, "v1").len(), n);
    assert_eq!(wan.filters(2, "v1"), n);
    // At n2 a routing rule per transfer, and the return rule of each s1 -> s3 (l12's far end).
    assert_eq!(wan.rules(2).len(), n + n.div_ceil(2), "routing rules at n2");
    assert_eq!(wan.rules(3).len(), n, "a return rule per transfer at n3");
    let empty = Nis::new(&grid, clock, 120, Routing::Shortest).with_dataplane(open());
    let t = Instant::now();
    let third = empty.reconcile_dataplane().await.unwrap();
    let strays = t.elapsed();
    // Per hop a class with its filter, a routing rule and a return rule.
    let hops = n + n.div_ceil(2);
    assert_eq!(third.strays_removed, 3 * hops, "{third:?}");
    assert!(wan.classes(2, "v1").is_empty() && wan.classes(1, "v0").is_empty());
    assert_eq!(wan.filters(2, "v1"), 0);
    assert!((1..=3).all(|node| wan.rules(node).is_empty()));
    eprintln!(
        "{n} transfers ({hops} hops: classes, filters, routing rules, return rules): install all {install:?}, reconcile intact {steady:?}, remove all as strays {strays:?}"
    );
}

/// Issue 48's topology: a ring n1 - n2 - n3 - n4 - n1 of 1 Gbit/s links (l0 = n1 - n2, l1 = n2 -
/// n3, l2 = n3 - n4, l3 = n4 - n1; shaped to 100 Mbit/s), one site per node (s1 .. s4, os one ..
/// four). Opposite nodes have two fewest-hop paths, and the network's routes (fewest hops, the
/// first link in grid order) and the NIS's choice differ for some of them.
fn ring_json() -> Value {
    let link = |id: &str, a: &str, b: &str| json!({"id": id, "a": a, "b": b, "capacity_mbps": 1000, "price_per_gbps_hour": 0.1});
    let site = |i: usize, os: &str| json!({"id": format!("s{i}"), "node": format!("n{i}"), "cpus": 16, "os": os, "price_per_cpu_hour": 1.0});
    json!({
        "nodes": [{"id": "n1"}, {"id": "n2"}, {"id": "n3"}, {"id": "n4"}],
        "links": [link("l0", "n1", "n2"), link("l1", "n2", "n3"), link("l2", "n3", "n4"), link("l3", "n4", "n1")],
        "sites": [site(1, "one"), site(2, "two"), site(3, "three"), site(4, "four")]
    })
}

const RING_OS: [&str; 4] = ["one", "two", "three", "four"];

/// The egress hops (node number, device) of `path` (link ids of the ring) from node `from`:
/// where the transfer's class and routing rule must be, and where its bytes must be counted.
fn ring_hops(from: usize, path: &Value) -> Vec<(usize, String)> {
    let ends = |l: usize| (l + 1, (l + 1) % 4 + 1); // l0 = n1 - n2, ..., l3 = n4 - n1
    let mut node = from;
    let mut out = Vec::new();
    for l in path.as_array().unwrap() {
        let i: usize = l.as_str().unwrap().trim_start_matches('l').parse().unwrap();
        let (a, b) = ends(i);
        assert!(node == a || node == b, "{path} does not continue at n{node}");
        out.push((node, format!("v{i}")));
        node = if node == a { b } else { a };
    }
    out
}

/// A plan of one job per ring site (jobs J1 .. J4) and `transfers` (from site, to site, Mbit/s),
/// all over `secs` s.
fn ring_plan(id: &str, transfers: &[(usize, usize, u64)], secs: i64) -> Value {
    json!({
        "id": id,
        "deadline": in_hours(2),
        "jobs": (1..=4).map(|i| json!({"name": format!("J{i}"), "os": RING_OS[i - 1], "cpus": 1, "offset_s": 0, "duration_s": secs})).collect::<Vec<_>>(),
        "transfers": transfers.iter().map(|(a, b, bw)| json!({"from": format!("J{a}"), "to": format!("J{b}"), "bandwidth_mbps": bw, "offset_s": 0, "duration_s": secs})).collect::<Vec<_>>()
    })
}

/// The transfer of `plan` from site `from` to site `to`.
fn transfer_of(plan: &Value, from: usize, to: usize) -> Value {
    plan["transfers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["from"] == format!("J{from}") && t["to"] == format!("J{to}"))
        .unwrap_or_else(|| panic!("no transfer J{from} -> J{to} in {plan}"))
        .clone()
}

/// The class of `transfer` on hop `(node, dev)`: the NIS's rules for it, found by its port.
fn class_on(app: &TestApp, wan: &Wan, transfer: &Value, node: usize, dev: &str) -> Option<String> {
    let port = transfer["traffic"]["port"].as_u64().unwrap();
    let nis = &app.state.participants.nis;
    let ns = wan.ns(node);
    nis.booked(None, 0, i64::MAX)
        .unwrap()
        .into_iter()
        .flat_map(|r| nis.dataplane_rules(r.hold))
        .find(|r| u64::from(r.port) == port && r.iface.netns == ns && r.iface.dev == dev)
        .map(|r| format!("1:{:x}", r.minor))
}

/// Waits until the data plane has installed `transfer` on every hop of `hops` (its reconcile
/// installs it at the window's start, a little later on a busy machine), at most 10 s; the
/// caller's assertions then name what is missing.
async fn installed(app: &TestApp, wan: &Wan, transfer: &Value, hops: &[(usize, String)]) {
    let t0 = Instant::now();
    while hops.iter().any(|(n, dev)| class_on(app, wan, transfer, *n, dev).is_none())
        && t0.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every ring node's forwarding state (see [`Wan::forwarding`]), nodes n1 .. n4.
fn ring_forwarding(wan: &Wan) -> Vec<String> {
    (1..=4).map(|node| wan.forwarding(node)).collect()
}

/// Nothing of the NIS's is left on any node of the ring: no class but the link's and the
/// unreserved one, no filter to a class, and the routing rules and routes (every table) exactly
/// as they were before anything was booked (`before`, from [`ring_forwarding`]).
fn ring_is_clean(wan: &Wan, before: &[String]) -> Result<(), String> {
    for node in 1..=4 {
        for dev in ["v0", "v1", "v2", "v3"] {
            let c = wan.classes(node, dev);
            if !c.is_empty() || wan.filters(node, dev) > 0 {
                return Err(format!("n{node}/{dev}: classes {c:?}, {} filters", wan.filters(node, dev)));
            }
        }
        let now = wan.forwarding(node);
        if now != before[node - 1] {
            return Err(format!("n{node}: rules and routes\n{now}\nwere before\n{}", before[node - 1]));
        }
    }
    Ok(())
}

/// Issue 48, tests 1 and 4: with 850 of l1's 1000 Mbit/s booked, a transfer of 300 between l1's
/// two sites (s2 -> s3) is booked on the detour l0, l3, l2; its packets take the detour (its
/// class counts the same bytes on the three hops), it gets at least 90 % of its booking in
/// every 1 s interval while l1 is saturated by unreserved flows between the same sites, and
/// after the window nothing of either transfer is left on any node (classes, filters, routing
/// rules, routes). Before steering its packets went over l1 as the kernel routes them, and it
/// got about nothing. Its return traffic (ACKs, s3 -> s2) takes the detour in reverse (l2, l3,
/// l0): a return routing rule on each of those hops, and the ACKs' bytes counted on their
/// egress interfaces, where nothing else passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_booked_on_a_detour_takes_the_detour() {
    let _machine = machine::reserve("dataplane").await;
    let wan = Wan::start_with("d", &ring_json(), SCALE);
    let app = app_on(&wan, ring_json()).await;
    assert!(app.state.participants.nis.dataplane().is_some_and(|p| {
        use coreserve::nis::dataplane::PathSteering;
        p.steers()
    }));
    let forwarding = ring_forwarding(&wan);
    const SECS: u32 = 5;
    let r = app.post("/v1/plans", ADMIN, &ring_plan("dp-fill", &[(2, 3, 850)], 16)).await;
    let fill: Value = r.json().await.unwrap();
    assert_eq!(fill["status"], "committed", "{fill}");
    assert_eq!(transfer_of(&fill, 2, 3)["path"], json!(["l1"]), "{fill}");
    let r = app.post("/v1/plans", ADMIN, &ring_plan("dp-detour", &[(2, 3, 300)], 16)).await;
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["status"], "committed", "{p}");
    let t = transfer_of(&p, 2, 3);
    assert_eq!(t["path"], json!(["l0", "l3", "l2"]), "the detour: {p}");
    let hops = ring_hops(2, &t["path"]);
    assert_eq!(hops, [(2, "v0".to_owned()), (1, "v3".to_owned()), (4, "v2".to_owned())]);
    let port = t["traffic"]["port"].as_u64().unwrap() as u16;
    for q in [BACKGROUND, BACKGROUND + 1, port] {
        wan.iperf_server(3, q);
    }
    let (start, end) = (time(&t["start"]), time(&t["end"]));
    until(start + chrono::Duration::milliseconds(600)).await;
    installed(&app, &wan, &t, &hops).await;
    // Its rules: a class on every hop's egress, a routing rule in every hop's namespace (none
    // at n3, whose main table delivers to s3).
    let classes: Vec<String> = hops
        .iter()
        .map(|(n, dev)| class_on(&app, &wan, &t, *n, dev).unwrap_or_else(|| panic!("no class on n{n}/{dev}")))
        .collect();
    for (n, table) in [(2, "1000"), (1, "1003"), (4, "1002")] {
        let rules = wan.rules(n);
        assert!(
            rules.iter().any(|r| r["dport"] == json!(port) && r["table"] == table && r["dst"] == Wan::addr(3)),
            "n{n}: {rules:?}"
        );
    }
    assert!(wan.rules(3).iter().all(|r| r["dport"].is_null()), "{:?}", wan.rules(3));
    // Its return traffic (from s3 to s2, source port `port`): a rule on every hop of the detour
    // in reverse, at the far end of each link (n3 onto l2, n4 onto l3, n1 onto l0), none at
    // n2, whose main table delivers to s2. The fill's transfer (on l1, the routed path) has
    // its own, the same way the main table would send it.
    let back = [(3, "v2", "1002"), (4, "v3", "1003"), (1, "v0", "1000")];
    for (n, _, table) in back {
        let rules = wan.rules(n);
        assert!(
            rules.iter().any(|r| r["sport"] == json!(port)
                && r["table"] == table
                && r["src"] == Wan::addr(3)
                && r["dst"] == Wan::addr(2)),
            "n{n}: no return rule for port {port}: {rules:?}"
        );
    }
    assert!(wan.rules(2).iter().all(|r| r["sport"] != json!(port)), "{:?}", wan.rules(2));
    // l1 saturated by 16 unreserved flows s2 -> s3 (the kernel's route), then the booked one.
    let bg = vec![wan.iperf_client(2, 3, BACKGROUND, SECS + 1, 8), wan.iperf_client(2, 3, BACKGROUND + 1, SECS + 1, 8)];
    tokio::time::sleep(Duration::from_millis(300)).await;
    let l1_before = wan.default_bytes(2, "v1");
    // The reverse detour's egress interfaces carry nothing but this transfer's return traffic
    // (unreserved: their class 1:ffff); the background's ACKs go back over l1.
    let back_before: Vec<u64> = back.iter().map(|(n, dev, _)| wan.default_bytes(*n, dev)).collect();
    let l1_t = Instant::now();
    let booked = intervals(wan.iperf_client(2, 3, port, SECS, 1));
    let l1_load = (wan.default_bytes(2, "v1") - l1_before) as f64 * 8.0 / 1e6 / l1_t.elapsed().as_secs_f64();
    let acks: Vec<u64> =
        back.iter().zip(&back_before).map(|((n, dev, _), b0)| wan.default_bytes(*n, dev) - b0).collect();
    for b in bg {
        intervals(b);
    }
    let bytes: Vec<u64> = hops.iter().zip(&classes).map(|((n, dev), c)| wan.class_bytes(*n, dev, c)).collect();
    eprintln!(
        "detour: {:.1} (min {:.1}) of 30 Mbit/s; class bytes on l0, l3, l2: {bytes:?}; return bytes on l2, l3, l0: {acks:?}; l1 unreserved {l1_load:.1} Mbit/s",
        mean(&booked),
        min(&booked)
    );
    assert!(Utc::now() < end, "the measurement overran the window");
    // Its packets crossed the three booked links: the same bytes on each hop.
    assert!(bytes[0] > 10_000_000, "{bytes:?}");
    for b in &bytes[1..] {
        assert!((bytes[0] as f64 - *b as f64).abs() / (bytes[0] as f64) < 0.05, "{bytes:?}");
    }
    // Its ACKs crossed the three links back, the same bytes on each hop: at least 300 ACKs of
    // 66 bytes (a receiver acks every segment or two of wire size; where the veths keep their
    // segmentation offload, which scripts/emulated-wan turns off only if ethtool is installed,
    // segments are up to 64 kB and ACKs far fewer: 2,017 for 62.7 MB in one run).
    // Unsteered, they took l1 and these interfaces carried nothing but neighbour discovery, a
    // few hundred bytes (336 in 3 s of iperf3 on the bare ring).
    assert!(acks[0] >= 300 * 66, "return bytes {acks:?} for {bytes:?} sent");
    for a in &acks[1..] {
        assert!((acks[0] as f64 - *a as f64).abs() / (acks[0] as f64) < 0.05, "{acks:?}");
    }
    assert!(booked.len() >= SECS as usize - 2 && min(&booked) >= 0.9 * 30.0, "booked 30 Mbit/s, got {booked:?}");
    // Test 4: after the window, nothing of either transfer on any node.
    until(end).await;
    let closed = Instant::now();
    while ring_is_clean(&wan, &forwarding).is_err() && closed.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("window end to clean: {:?}", closed.elapsed());
    ring_is_clean(&wan, &forwarding).unwrap();
}

/// The links the network's own routing takes from ring site `a` to ring site `b` (the map's
/// `routes`, which `scripts/emulated-wan` installs).
fn routed_path(map: &Value, a: usize, b: usize) -> Vec<String> {
    let mut routed = Vec::new();
    let mut node = format!("n{a}");
    while node != format!("n{b}") {
        let l = map["routes"][&node][format!("n{b}")].as_str().unwrap().to_owned();
        let ends = map["links"][&l]["ends"].as_object().unwrap();
        node = ends.keys().find(|n| **n != node).unwrap().clone();
        routed.push(l);
    }
    routed
}

/// Every ordered pair of the ring's sites at `mbps` each.
fn ring_pairs(mbps: u64) -> Vec<(usize, usize, u64)> {
    (1..=4).flat_map(|a| (1..=4).filter(move |b| *b != a).map(move |b| (a, b, mbps))).collect()
}

/// For each transfer (from site, to site, its placement) in turn, 1 MB sent with iperf3 on its
/// port (a server listens there already): every byte the receiver got crossed every hop of the
/// booked path, counted by the transfer's class on each hop's egress, the same packets on each.
/// Returns how many of the transfers were booked off the network's own route.
fn bytes_cross_booked_hops(app: &TestApp, wan: &Wan, map: &Value, transfers: &[(usize, usize, Value)]) -> usize {
    let mut off_route = 0;
    for (a, b, t) in transfers {
        let hops = ring_hops(*a, &t["path"]);
        let routed = routed_path(map, *a, *b);
        if json!(routed) != t["path"] {
            off_route += 1;
        }
        let classes: Vec<String> = hops
            .iter()
            .map(|(n, dev)| {
                class_on(app, wan, t, *n, dev).unwrap_or_else(|| panic!("s{a} -> s{b}: no class on n{n}/{dev}"))
            })
            .collect();
        let before: Vec<u64> = hops.iter().zip(&classes).map(|((n, dev), c)| wan.class_bytes(*n, dev, c)).collect();
        let port = t["traffic"]["port"].as_u64().unwrap().to_string();
        let out = Command::new("ip")
            .args(["netns", "exec", &wan.host(*a), "iperf3", "-c", &Wan::addr(*b), "-B", &Wan::addr(*a), "-p", &port])
            .args(["-n", "1M", "-J"])
            .output()
            .unwrap();
        assert!(out.status.success(), "iperf3 s{a} -> s{b}: {}", String::from_utf8_lossy(&out.stderr));
        // What the receiver got (iperf3 -n may stop before its last buffered bytes are sent).
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let received = report["end"]["sum_received"]["bytes"].as_u64().unwrap();
        let sent: Vec<u64> = hops
            .iter()
            .zip(&classes)
            .zip(&before)
            .map(|(((n, dev), c), b0)| wan.class_bytes(*n, dev, c) - b0)
            .collect();
        eprintln!(
            "s{a} -> s{b}: booked {} (routed {routed:?}), received {received} B, bytes per hop {sent:?}",
            t["path"]
        );
        // Every byte the receiver got (payload; the class counts headers too) crossed every hop
        // of the booked path, the same packets on each.
        assert!(received > 100_000, "s{a} -> s{b}: received {received}");
        for s in &sent {
            assert!(
                *s >= received && (*s as f64 - sent[0] as f64).abs() / (sent[0] as f64) < 0.05,
                "s{a} -> s{b}: received {received}, {sent:?}"
            );
        }
    }
    off_route
}

/// The `ip rule del` arguments of a routing rule as `ip -j rule show` prints it.
fn rule_del_args(rule: &Value) -> Vec<String> {
    let (port_key, port) = if rule["dport"].is_null() { ("sport", &rule["sport"]) } else { ("dport", &rule["dport"]) };
    format!(
        "pref 10000 from {} to {} ipproto tcp {port_key} {port} table {}",
        rule["src"].as_str().unwrap(),
        rule["dst"].as_str().unwrap(),
        rule["table"].as_str().unwrap()
    )
    .split(' ')
    .map(str::to_owned)
    .collect()
}

/// Issue 48, tests 2, 3 and 4: every ordered pair of the ring's sites, booked together (12
/// transfers): each transfer's packets cross exactly its booked path (its class, on each hop's
/// egress, counts what it sent; the NIS's fewest-hop choice between opposite nodes is not
/// always the network's route). Then one hop's routing rule and, on another router, one return
/// routing rule are deleted behind the NIS: both are installed again within a reconciliation
/// period and the plan is broken within the drift period; cancel leaves nothing (classes,
/// filters, routing rules, routes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_site_pair_takes_its_booked_path() {
    let _machine = machine::reserve("dataplane").await;
    let wan = Wan::start_with("p", &ring_json(), SCALE);
    let app = app_on(&wan, ring_json()).await;
    let forwarding = ring_forwarding(&wan);
    let map: Value = serde_json::from_str(&std::fs::read_to_string(&wan.map).unwrap()).unwrap();
    let pairs = ring_pairs(20);
    let r = app.post("/v1/plans", ADMIN, &ring_plan("dp-pairs", &pairs, 40)).await;
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["status"], "committed", "{p}");
    let id = p["id"].as_str().unwrap().to_owned();
    let transfers: Vec<(usize, usize, Value)> =
        pairs.iter().map(|(a, b, _)| (*a, *b, transfer_of(&p, *a, *b))).collect();
    for (_, b, t) in &transfers {
        wan.iperf_server(*b, t["traffic"]["port"].as_u64().unwrap() as u16);
    }
    let last_start = transfers.iter().map(|(_, _, t)| time(&t["start"])).max().unwrap();
    until(last_start + chrono::Duration::milliseconds(600)).await;
    for (a, _, t) in &transfers {
        installed(&app, &wan, t, &ring_hops(*a, &t["path"])).await;
    }
    let off_route = bytes_cross_booked_hops(&app, &wan, &map, &transfers);
    eprintln!("{off_route} of {} transfers booked off the network's own route", transfers.len());
    assert!(off_route > 0, "the test would show nothing: every booked path is the routed one");

    // Test 3: behind the NIS's back, the routing rule of the first hop of the first transfer
    // with more than one hop, and the return traffic's rule of its last hop (at the receiving
    // site's router) are deleted.
    let (a, b, t) = transfers.iter().find(|(_, _, t)| t["path"].as_array().unwrap().len() > 1).unwrap();
    let (a, b) = (*a, *b);
    let port = t["traffic"]["port"].as_u64().unwrap();
    let forward = |w: &Wan| {
        w.rules(a)
            .into_iter()
            .find(|r| r["dport"] == json!(port) && r["src"] == Wan::addr(a) && r["dst"] == Wan::addr(b))
    };
    let back = |w: &Wan| {
        w.rules(b)
            .into_iter()
            .find(|r| r["sport"] == json!(port) && r["src"] == Wan::addr(b) && r["dst"] == Wan::addr(a))
    };
    for (node, rule) in [
        (a, forward(&wan).expect("its routing rule on its first hop")),
        (b, back(&wan).expect("its return rule on its last hop")),
    ] {
        let out =
            Command::new("ip").args(["-n", &wan.ns(node), "rule", "del"]).args(rule_del_args(&rule)).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let deleted = Instant::now();
    assert!(forward(&wan).is_none() && back(&wan).is_none());
    let (mut reinstalled, mut broken) = (None, Value::Null);
    while deleted.elapsed() < Duration::from_secs(8) {
        if reinstalled.is_none() && forward(&wan).is_some() && back(&wan).is_some() {
            reinstalled = Some(deleted.elapsed());
        }
        let v: Value = app.get(&format!("/v1/plans/{id}"), ADMIN).await.json().await.unwrap();
        if v["status"] == "broken" && reinstalled.is_some() {
            broken = v;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("rules deleted: both back after {reinstalled:?}, plan broken after {:?}", deleted.elapsed());
    let reinstalled = reinstalled.expect("both routing rules installed again");
    // Within a reconciliation period (250 ms here) and a tc/ip round.
    assert!(reinstalled < Duration::from_millis(1500), "{reinstalled:?}");
    assert_eq!(broken["status"], "broken", "{broken}");
    let reason = broken["transfers"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|t| t["broken"].as_str().filter(|b| b.contains("installed again")))
        .unwrap_or_else(|| panic!("no transfer broken for a lost rule: {broken}"));
    assert!(reason.contains("return traffic's routing rule"), "{reason}");
    // Cancel: nothing left.
    let r = app.call(reqwest::Method::DELETE, &format!("/v1/plans/{id}"), Some(ADMIN), None).await;
    assert!(r.status().is_success(), "{:?}", r.text().await);
    ring_is_clean(&wan, &forwarding).unwrap();
}

/// Issue 48, rate-only mode (`--dataplane tc-rate-only`): a data plane that does not steer
/// installs no routing rule, and the NIS books only the paths the network routes. On the ring,
/// every ordered site pair booked together is booked on its routed path (the map's `routes`)
/// and its bytes cross the booked hops. With l1 (the route from s2 to s3) booked to 950 of
/// 1000 Mbit/s, a transfer of 300 from s2 to s3 is never put on the detour l0, l3, l2 (which
/// steering would book, see `a_transfer_booked_on_a_detour_takes_the_detour`): it is refused,
/// or booked on l1 after the fill's window; the detour's links carry nothing more. After the
/// windows nothing is left on any router.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_only_data_plane_books_only_the_routed_paths() {
    let _machine = machine::reserve("dataplane").await;
    let wan = Wan::start_with("r", &ring_json(), SCALE);
    let app = app_with(&wan, ring_json(), false).await;
    let nis = &app.state.participants.nis;
    assert!(nis.dataplane().is_some_and(|p| {
        use coreserve::nis::dataplane::PathSteering;
        !p.steers()
    }));
    let forwarding = ring_forwarding(&wan);
    let map: Value = serde_json::from_str(&std::fs::read_to_string(&wan.map).unwrap()).unwrap();
    let pairs = ring_pairs(20);
    let r = app.post("/v1/plans", ADMIN, &ring_plan("dp-routed", &pairs, 30)).await;
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["status"], "committed", "{p}");
    let transfers: Vec<(usize, usize, Value)> =
        pairs.iter().map(|(a, b, _)| (*a, *b, transfer_of(&p, *a, *b))).collect();
    // The booked route is the routed path, for every pair.
    for (a, b, t) in &transfers {
        assert_eq!(t["path"], json!(routed_path(&map, *a, *b)), "s{a} -> s{b}: {p}");
    }
    // l1 filled to 950 of 1000 Mbit/s over the same window (5 of the pairs' routes cross it at
    // 20 each), then 300 more from s2 to s3.
    let on_l1 = transfers.iter().filter(|(_, _, t)| t["path"].as_array().unwrap().contains(&json!("l1"))).count();
    assert_eq!(on_l1, 5, "{p}");
    let r = app.post("/v1/plans", ADMIN, &ring_plan("dp-fill", &[(2, 3, 850)], 30)).await;
    let fill: Value = r.json().await.unwrap();
    assert_eq!(fill["status"], "committed", "{fill}");
    let f = transfer_of(&fill, 2, 3);
    assert_eq!(f["path"], json!(["l1"]), "{fill}");
    let (fill_start, fill_end) = (time(&f["start"]), time(&f["end"]));
    let mid = (fill_start + (fill_end - fill_start) / 2).timestamp();
    let detour_links = ["l0", "l2", "l3"];
    let usage = |links: &[&str]| links.iter().map(|l| nis.usage_at(l, mid).unwrap()).collect::<Vec<u64>>();
    let (detour_before, l1_before) = (usage(&detour_links), usage(&["l1"]));
    assert_eq!(l1_before, [950]);
    let r = app.post("/v1/plans", ADMIN, &ring_plan("dp-no-detour", &[(2, 3, 300)], 16)).await;
    let third: Value = r.json().await.unwrap();
    eprintln!("300 more from s2 to s3: {}", third["status"]);
    if third["status"] == "committed" {
        let t = transfer_of(&third, 2, 3);
        assert_eq!(t["path"], json!(["l1"]), "{third}");
        assert!(time(&t["start"]) >= fill_end, "booked on l1 inside the fill's window: {third}");
    }
    assert_eq!(usage(&detour_links), detour_before, "the detour was booked: {third}");
    assert_eq!(usage(&["l1"]), l1_before);
    // The bytes of every pair cross its booked (= routed) hops, and no router has a routing rule
    // of the NIS's.
    for (_, b, t) in &transfers {
        wan.iperf_server(*b, t["traffic"]["port"].as_u64().unwrap() as u16);
    }
    let last_start = transfers.iter().map(|(_, _, t)| time(&t["start"])).max().unwrap();
    until(last_start + chrono::Duration::milliseconds(600)).await;
    for node in 1..=4 {
        assert!(wan.rules(node).is_empty(), "n{node}: {:?}", wan.rules(node));
    }
    let off_route = bytes_cross_booked_hops(&app, &wan, &map, &transfers);
    assert_eq!(off_route, 0);
    // After the windows (and the third plan's, if it was booked later: it is cancelled),
    // nothing left.
    if let Some(id) = third["id"].as_str().filter(|_| third["status"] == "committed") {
        let r = app.call(reqwest::Method::DELETE, &format!("/v1/plans/{id}"), Some(ADMIN), None).await;
        assert!(r.status().is_success(), "{:?}", r.text().await);
    }
    let end = transfers.iter().map(|(_, _, t)| time(&t["end"])).max().unwrap().max(fill_end);
    until(end).await;
    let closed = Instant::now();
    while ring_is_clean(&wan, &forwarding).is_err() && closed.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ring_is_clean(&wan, &forwarding).unwrap();
}
