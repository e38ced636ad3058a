//! Role-separated deployment, end to end: real `coreserve serve` processes — one LIS per site
//! of a small grid, one NIS, one GIS — and three planner processes competing for them over
//! HTTP, every process on one fresh PostgreSQL database ([`TestDb`]). Concurrent plan requests
//! go to all three planners with tight resources; afterwards no site or link may be overbooked
//! ([`coreserve::check::check_outcomes`]) and each LIS's committed reservations must be exactly
//! the jobs of the committed plans at that site, also in a LIS process started afterwards (its
//! calendar rebuilt from the journal). Ten processes answering within their timeouts: the test
//! has the machine to itself ([`machine::reserve`]).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use coreserve::model::{Grid, Outcome, PlanRequest, PlanStatus};
use reqwest::Client;
use serde_json::{json, Value};

use crate::support::{machine, TestDb};

const ADMIN: &str = "roles-admin-token";
const SERVICE: &str = "roles-service-token";
const W_INTERVAL_S: i64 = 60;

/// Kills every child process when dropped (also when the test panics): the children, a count
/// of failed participant calls in their logs, and their `DATABASE_URL`.
struct Procs(Vec<Child>, Arc<AtomicUsize>, String);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Procs {
    /// Starts `coreserve serve` with `args` on a free port of 127.0.0.1 and returns its base URL
    /// (read from the startup line on stderr, printed once the listener is bound).
    fn serve(&mut self, args: &[&str]) -> String {
        match self.start(args) {
            Started::Serving { url, .. } => url,
            Started::Exited(lines) => panic!("`serve {}` did not start:\n{}", args.join(" "), lines.join("\n")),
        }
    }

    /// Starts `coreserve serve` with `args`: what it said on stderr up to its startup line and
    /// its URL, or everything it said before it exited.
    fn start(&mut self, args: &[&str]) -> Started {
        let mut child = Command::new(env!("CARGO_BIN_EXE_coreserve"))
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--workers", "2", "--admin-token", ADMIN, "--service-token", SERVICE])
            .args(["--w-interval-s", &W_INTERVAL_S.to_string()])
            .args(args)
            .env("DATABASE_URL", &self.2)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("coreserve starts");
        let stderr = child.stderr.take().expect("piped stderr");
        self.0.push(child);
        let (tx, rx) = std::sync::mpsc::channel();
        let what = args.join(" ");
        let failures = self.1.clone();
        std::thread::spawn(move || {
            let mut started = false;
            // Keep draining stderr so the child never blocks on a full pipe.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("participant call failed") {
                    failures.fetch_add(1, Ordering::SeqCst);
                    eprintln!("[{what}] {line}");
                }
                if started {
                    continue;
                }
                if let Some(i) = line.find(" on http://") {
                    started = true;
                    let url = line[i + 4..].split_whitespace().next().unwrap_or_default().to_owned();
                    let _ = tx.send(Ok(url));
                } else {
                    eprintln!("[{what}] {line}");
                    let _ = tx.send(Err(line));
                }
            }
        });
        let mut lines = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(40);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(Ok(url)) => return Started::Serving { url, said: lines },
                Ok(Err(line)) => lines.push(line),
                // stderr closed: the process ended.
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Started::Exited(lines),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    panic!("`serve {}` neither started nor exited in 40 s", args.join(" "))
                }
            }
        }
    }
}

/// How a `coreserve serve` process started ([`Procs::start`]).
enum Started {
    /// It serves at `url`, having said `said` on stderr before.
    Serving { url: String, said: Vec<String> },
    /// It exited, having said this.
    Exited(Vec<String>),
}

/// `GET url` with `token` (none if empty): the status and the body.
async fn get_text(client: &Client, url: &str, token: &str) -> (u16, String) {
    let mut r = client.get(url);
    if !token.is_empty() {
        r = r.bearer_auth(token);
    }
    let r = r.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Four sites on three nodes in a line (n1 - n2 - n3), 500 Mbit/s links; few CPUs each.
fn grid() -> Value {
    json!({
        "nodes": [{"id": "n1", "label": "one"}, {"id": "n2", "label": "two"}, {"id": "n3", "label": "three"}],
        "links": [
            {"id": "l12", "a": "n1", "b": "n2", "capacity_mbps": 500, "price_per_gbps_hour": 0.1},
            {"id": "l23", "a": "n2", "b": "n3", "capacity_mbps": 500, "price_per_gbps_hour": 0.2}
        ],
        "sites": [
            {"id": "s1", "node": "n1", "cpus": 8, "os": "linux", "price_per_cpu_hour": 1.0},
            {"id": "s2", "node": "n2", "cpus": 8, "os": "linux", "price_per_cpu_hour": 2.0},
            {"id": "s3", "node": "n3", "cpus": 6, "os": "linux", "price_per_cpu_hour": 1.5},
            {"id": "s4", "node": "n3", "cpus": 4, "os": "linux", "price_per_cpu_hour": 0.5}
        ]
    })
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Request `i`: two jobs joined by a transfer, all within a 6-hour window after w_interval.
fn body(i: usize, now: DateTime<Utc>) -> Value {
    let cpus = 2 + (i % 4) as u32; // 2..=5
    let mode = if i.is_multiple_of(3) { "bbr" } else { "bir" };
    json!({
        "id": format!("r{i:03}"),
        "deadline": ts(now + chrono::Duration::seconds(W_INTERVAL_S + 6 * 3600 + 60)),
        "jobs": [
            {"name": "a", "os": "linux", "cpus": cpus, "offset_s": 0, "duration_s": 3600},
            {"name": "b", "os": "linux", "cpus": 6 - cpus + 1, "offset_s": 0, "duration_s": 3600}
        ],
        "transfers": [{"from": "a", "to": "b", "bandwidth_mbps": 200 + 50 * (i % 3) as u64, "offset_s": 600, "duration_s": 1800}],
        "mode": mode
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn separate_roles_never_overbook() {
    let _machine = machine::reserve("roles").await;
    let db = TestDb::new().await;
    separate_roles_on(db.url.clone()).await;
}

async fn separate_roles_on(db: String) {
    let dir = tempfile::tempdir().unwrap();
    let grid_path = dir.path().join("grid.json");
    std::fs::write(&grid_path, serde_json::to_vec(&grid()).unwrap()).unwrap();
    let g = grid_path.to_str().unwrap();
    let sites = ["s1", "s2", "s3", "s4"];

    let mut procs = Procs(Vec::new(), Arc::new(AtomicUsize::new(0)), db);
    let mut lis_urls = Vec::new();
    for s in sites {
        lis_urls.push((s, procs.serve(&["--role", "lis", "--site", s, "--grid", g])));
    }
    let nis = procs.serve(&["--role", "nis", "--grid", g]);
    let gis = procs.serve(&["--role", "gis", "--grid", g]);
    let mut planner_args: Vec<String> =
        vec!["--role".into(), "planner".into(), "--gis".into(), gis.clone(), "--nis".into(), nis.clone()];
    for (s, u) in &lis_urls {
        planner_args.push("--lis".into());
        planner_args.push(format!("{s}={u}"));
    }
    let planner_args: Vec<&str> = planner_args.iter().map(String::as_str).collect();
    let planners: Vec<String> = (0..3).map(|_| procs.serve(&planner_args)).collect();

    coreserve::protocol::http::install_crypto_provider();
    let client = Client::new();
    // Roles serve only their endpoints.
    let r = client.get(format!("{}/v1/plans", lis_urls[0].1)).bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let r = client.get(format!("{}/v1/sites", gis)).bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(r.json::<Vec<Value>>().await.unwrap().len(), 4);
    // A planner is the users' one entry point (issue 29: it answered 404 to these): the
    // others' reads, forwarded, answer as their owners do.
    let now = Utc::now();
    let (from, to) = (ts(now + chrono::Duration::hours(2)), ts(now + chrono::Duration::hours(8)));
    let availability = format!("/v1/sites/s2/availability?from={from}&to={to}&cpus=3&duration_s=1800");
    let route = format!("/v1/network/route?from_site=s1&to_site=s3&bandwidth_mbps=100&start={from}&end={to}");
    for (path, owner) in [
        ("/v1/sites".to_owned(), &gis),
        ("/v1/sites/s3".to_owned(), &gis),
        (availability, &lis_urls[1].1),
        ("/v1/network".to_owned(), &nis),
        (route, &nis),
    ] {
        let (status, through) = get_text(&client, &format!("{}{path}", planners[0]), ADMIN).await;
        assert_eq!(status, 200, "{path} through the planner: {through}");
        assert_eq!(through, get_text(&client, &format!("{owner}{path}"), ADMIN).await.1, "{path}");
    }
    let (status, page) = get_text(&client, &format!("{}/ui", planners[1]), "").await;
    assert!(status == 200 && page.contains("<html"), "the timeline: {status}");
    let (status, problem) = get_text(&client, &format!("{}/v1/sites/s9/availability", planners[0]), ADMIN).await;
    assert_eq!(status, 404, "{problem}");
    let (status, _) = get_text(&client, &format!("{}/v1/network", planners[0]), "not-a-token").await;
    assert_eq!(status, 401, "the planner checks the token before it forwards");
    // Participant endpoints want a service token.
    let r = client.post(format!("{nis}/v1/participant/network/query")).json(&json!({})).send().await.unwrap();
    assert_eq!(r.status(), 401);

    // 60 requests over 12 tasks, round-robin over the three planners.
    let n = 60;
    let requests: Vec<PlanRequest> = (0..n)
        .map(|i| {
            let mut raw = body(i, now);
            raw["user"] = json!("admin");
            raw["submitted_at"] = json!(ts(now - chrono::Duration::seconds(1)));
            serde_json::from_value(raw).unwrap()
        })
        .collect();
    let planners = Arc::new(planners);
    let mut tasks = Vec::new();
    for t in 0..12 {
        let (client, planners) = (client.clone(), planners.clone());
        tasks.push(tokio::spawn(async move {
            for i in (t..n).step_by(12) {
                let url = format!("{}/v1/plans", planners[i % 3]);
                let r = client.post(url).bearer_auth(ADMIN).json(&body(i, now)).send().await.unwrap();
                let status = r.status();
                let text = r.text().await.unwrap();
                assert_eq!(status, 201, "request {i}: {text}");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }

    // Every outcome: the planners share the database, so each lists every plan.
    let mut lists = Vec::new();
    for p in planners.iter() {
        let list: Vec<Value> =
            client.get(format!("{p}/v1/plans")).bearer_auth(ADMIN).send().await.unwrap().json().await.unwrap();
        lists.push(list);
    }
    assert!(lists.iter().all(|l| *l == lists[0]), "the planners share plans");
    let outcomes: Vec<Outcome> =
        lists[0].iter().map(|v| serde_json::from_value::<Outcome>(v.clone()).unwrap()).collect();
    assert_eq!(outcomes.len(), n);
    let committed = outcomes.iter().filter(|o| o.status == PlanStatus::Committed).count();
    let mut reasons: HashMap<String, usize> = HashMap::new();
    for o in &outcomes {
        if let Some(r) = &o.reason {
            *reasons.entry(r.split(':').next().unwrap_or_default().to_owned()).or_default() += 1;
        }
    }
    eprintln!("{committed} of {n} plans committed; rejections: {reasons:?}");
    assert!(committed > 0, "something must fit");
    assert!(committed < n, "the resources are tight: some requests must be refused");
    for o in &outcomes {
        if o.status == PlanStatus::Rejected {
            let reason = o.reason.as_deref().unwrap_or_default();
            assert!(!reason.contains("transport"), "{}: {reason}", o.request_id);
        }
    }
    let grid: Grid = serde_json::from_value(grid()).unwrap();
    let violations = coreserve::check::check_outcomes(&grid, &requests, &outcomes, W_INTERVAL_S);
    assert!(violations.is_empty(), "{violations:?}");

    // Modifications through the planners (issue 25): replacement holds at the remote LISes,
    // persisted, decided in the log, committed (swapped) and ended by the store; each LIS below,
    // and one restarted from its journal, must book the plans as modified.
    let ids: Vec<&str> =
        lists[0].iter().filter(|p| p["status"] == "committed").filter_map(|p| p["id"].as_str()).take(6).collect();
    let mut modified = 0;
    for (k, id) in ids.iter().enumerate() {
        let url = format!("{}/v1/plans/{id}", planners[k % 3]);
        // Shorter and thinner: it always fits, so every one must commit.
        let change = json!({
            "jobs": [{"name": "a", "duration_s": 2700}],
            "transfers": [{"from": "a", "to": "b", "bandwidth_mbps": 100}]
        });
        let r = client.patch(url).bearer_auth(ADMIN).json(&change).send().await.unwrap();
        match r.status().as_u16() {
            200 => modified += 1,
            409 | 422 => eprintln!("modification of {id} refused: {}", r.text().await.unwrap()),
            s => panic!("modification of {id}: {s} {}", r.text().await.unwrap()),
        }
    }
    eprintln!("{modified} of {} modifications committed", ids.len());
    assert_eq!(modified, ids.len(), "a shrinking change always fits");
    let list: Vec<Value> =
        client.get(format!("{}/v1/plans", planners[0])).bearer_auth(ADMIN).send().await.unwrap().json().await.unwrap();
    let outcomes: Vec<Outcome> = list.iter().map(|v| serde_json::from_value::<Outcome>(v.clone()).unwrap()).collect();

    // Each LIS books exactly the committed plans' jobs at its site, and holds nothing; so does
    // a second LIS process of the site started now, whose calendar comes from the journal.
    let (from, to) = (ts(now - chrono::Duration::hours(1)), ts(now + chrono::Duration::hours(8)));
    let restarted: Vec<(&str, String)> =
        sites.iter().map(|s| (*s, procs.serve(&["--role", "lis", "--site", s]))).collect();
    for (s, url) in lis_urls.iter().chain(&restarted) {
        let list: Vec<Value> = client
            .get(format!("{url}/v1/sites/{s}/reservations?from={from}&to={to}"))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let mut booked: Vec<(String, String, u64)> = list
            .iter()
            .map(|r| {
                assert_eq!(r["state"], "committed", "{s}: a hold is left over: {r}");
                let t = |k: &str| r[k].as_str().unwrap().parse::<DateTime<Utc>>().unwrap().timestamp().to_string();
                (t("start"), t("end"), r["cpus"].as_u64().unwrap())
            })
            .collect();
        let mut planned: Vec<(String, String, u64)> = outcomes
            .iter()
            .filter(|o| o.status == PlanStatus::Committed)
            .flat_map(|o| o.jobs.iter())
            .filter(|j| j.site == *s)
            .map(|j| (j.start.timestamp().to_string(), j.end.timestamp().to_string(), u64::from(j.cpus)))
            .collect();
        booked.sort();
        planned.sort();
        assert_eq!(booked, planned, "site {s}");
    }
    // A site's reservations through a planner are the LIS's, with the hold ids the caller may
    // see; a LIS that is gone is named in a 502.
    for (s, url) in &lis_urls {
        let path = format!("/v1/sites/{s}/reservations?from={from}&to={to}");
        let (status, through) = get_text(&client, &format!("{}{path}", planners[2]), ADMIN).await;
        assert_eq!(status, 200, "{through}");
        assert_eq!(through, get_text(&client, &format!("{url}{path}"), ADMIN).await.1, "{s}");
    }
    let _ = procs.0[0].kill();
    let _ = procs.0[0].wait();
    let (status, problem) =
        get_text(&client, &format!("{}/v1/sites/s1/reservations?from={from}&to={to}", planners[0]), ADMIN).await;
    assert_eq!(status, 502, "{problem}");
    assert!(problem.contains("participant-unreachable") && problem.contains("site `s1`"), "{problem}");
    let by_planner: HashMap<&str, usize> = outcomes.iter().fold(HashMap::new(), |mut m, o| {
        *m.entry(o.planner.as_str()).or_default() += 1;
        m
    });
    eprintln!("outcomes by planner name: {by_planner:?}");
    // A planner takes a failed query for a missing candidate: make sure none failed.
    assert_eq!(procs.1.load(Ordering::SeqCst), 0, "participant calls failed (see the log above)");
    drop(procs);
}

/// A planner checks its `--lis` list against the GIS before it serves (issue 29: one that
/// missed a site started silently and refused every plan needing it as "no feasible plan"): a
/// site the GIS lists without a LIS, a LIS for a site the GIS does not list and a LIS that
/// serves another site stop it; a LIS that does not answer yet is a loud warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planner_checks_its_lis_list_against_the_gis() {
    let _machine = machine::reserve("roles").await;
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let grid_path = dir.path().join("grid.json");
    std::fs::write(&grid_path, serde_json::to_vec(&grid()).unwrap()).unwrap();
    let g = grid_path.to_str().unwrap();
    let mut procs = Procs(Vec::new(), Arc::new(AtomicUsize::new(0)), db.url.clone());
    let s1 = procs.serve(&["--role", "lis", "--site", "s1", "--grid", g]);
    let s2 = procs.serve(&["--role", "lis", "--site", "s2", "--grid", g]);
    let nis = procs.serve(&["--role", "nis", "--grid", g]);
    let gis = procs.serve(&["--role", "gis", "--grid", g]);
    // Nothing listens on a port taken and let go again.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let planner = |lis: &[(&str, &str)]| {
        let mut args =
            vec!["--role".to_owned(), "planner".into(), "--gis".into(), gis.clone(), "--nis".into(), nis.clone()];
        for (s, u) in lis {
            args.extend(["--lis".to_owned(), format!("{s}={u}")]);
        }
        args
    };
    let refusal = |procs: &mut Procs, lis: &[(&str, &str)]| {
        let args = planner(lis);
        match procs.start(&args.iter().map(String::as_str).collect::<Vec<_>>()) {
            Started::Exited(lines) => lines.join("\n"),
            Started::Serving { url, .. } => panic!("a planner with {lis:?} started at {url}"),
        }
    };

    let said = refusal(&mut procs, &[("s1", &s1), ("s2", &s2)]);
    assert!(said.contains("lists site(s) s3, s4") && said.contains("--lis s3=URL"), "{said}");
    let said = refusal(&mut procs, &[("s1", &s1), ("s2", &s2), ("s3", &s2), ("s4", &s2)]);
    assert!(said.contains("does not serve site `s3`"), "{said}");
    let said = refusal(&mut procs, &[("s1", &s1), ("s2", &s2), ("s3", &dead), ("s4", &dead), ("s9", &dead)]);
    assert!(said.contains("--lis names site(s) s9"), "{said}");

    // Every site has a LIS, two of them not answering: it starts, and says so.
    let args = planner(&[("s1", &s1), ("s2", &s2), ("s3", &dead), ("s4", &dead)]);
    match procs.start(&args.iter().map(String::as_str).collect::<Vec<_>>()) {
        Started::Serving { said, .. } => {
            let warnings: Vec<&String> = said.iter().filter(|l| l.starts_with("WARNING: the LIS of site")).collect();
            assert_eq!(warnings.len(), 2, "{said:?}");
            assert!(warnings[0].contains("`s3`") && warnings[1].contains("`s4`"), "{warnings:?}");
        }
        Started::Exited(lines) => panic!("the planner did not start: {lines:?}"),
    }
}
