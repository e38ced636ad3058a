//! The load: closed-loop clients POST the workload's requests; latencies go into HDR
//! histograms, and the CPU and PostgreSQL transactions are read at the measured window's ends.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Result};
use chrono::Utc;
use hdrhistogram::Histogram;
use serde::Deserialize;

use crate::cpu::{clk_tck, snapshot, CpuSplit};
use crate::database::{durable, xacts, Databases};
use crate::deploy::{wait_ready, Mode, Procs};
use crate::roles::{by_role, RoleUsage};
use crate::settings::{Settings, BASE_MARGIN_S, HORIZON_DAYS, W_INTERVAL_S};
use crate::traffic::{sample_traffic, scrape};
use crate::workload::{Scenario, Workload};

#[derive(Deserialize)]
pub(crate) struct PlanAnswer {
    pub(crate) status: String,
    #[serde(default)]
    pub(crate) reason: Option<String>,
    /// The planner's own time (search and two-phase commit), inside the server.
    planning_ms: f64,
    /// Participant messages the planner sent for this plan.
    pub(crate) messages: u64,
    /// Sequential message rounds of the plan (messages in flight together count once), if the
    /// server reports them (issue 53).
    #[serde(default)]
    pub(crate) rounds: Option<u64>,
    /// Holds it made and aborted again (BIR's backtracking and shifts).
    holds_aborted: u64,
    #[serde(default)]
    jobs: Vec<JobAt>,
    #[serde(default)]
    transfers: Vec<TransferOn>,
}

/// A placed job of an answer: its site.
#[derive(Deserialize)]
struct JobAt {
    site: String,
}

/// A placed transfer of an answer: its links (empty within a site).
#[derive(Deserialize)]
struct TransferOn {
    #[serde(default)]
    path: Vec<serde::de::IgnoredAny>,
}

impl PlanAnswer {
    /// The participants the plan touches: the distinct sites of its jobs (a LIS each), and the
    /// NIS if a transfer crosses a link.
    pub(crate) fn participants(&self) -> usize {
        let mut sites: Vec<&str> = self.jobs.iter().map(|j| j.site.as_str()).collect();
        sites.sort_unstable();
        sites.dedup();
        sites.len() + usize::from(self.transfers.iter().any(|t| !t.path.is_empty()))
    }
}

struct ClientLog {
    /// Answer latencies and the answers' `planning_ms`, in microseconds.
    latencies: Histogram<u64>,
    planning: Histogram<u64>,
    messages: u64,
    rounds: u64,
    holds_aborted: u64,
    /// Participants touched, summed over the committed plans.
    participants: usize,
    committed: usize,
    rejected: usize,
    reasons: BTreeMap<String, usize>,
    errors: BTreeMap<String, usize>,
}

pub(crate) struct RoundResult {
    pub(crate) plans_per_s: f64,
    pub(crate) committed: usize,
    pub(crate) rejected: usize,
    pub(crate) errors: BTreeMap<String, usize>,
    pub(crate) reasons: BTreeMap<String, usize>,
    /// p50, p90, p99, max in ms.
    pub(crate) latency_ms: [f64; 4],
    /// The planner's share of it (the answers' `planning_ms`): p50, p99.
    pub(crate) planning_ms: [f64; 2],
    /// Means over the measured plans.
    pub(crate) messages_per_plan: f64,
    /// Sequential message rounds per plan (the answers' `rounds`), mean.
    pub(crate) rounds_per_plan: f64,
    pub(crate) holds_aborted_per_plan: f64,
    /// Transactions (commits and rollbacks, read-only ones too) in the round's database during
    /// the window, per plan (pg_stat_database; its counters lag by up to about a second).
    pub(crate) pg_xacts_per_plan: f64,
    /// Transactions that wrote (transaction ids handed out), and WAL flushes, per plan, over the
    /// window (cluster-wide: only this deployment runs then).
    pub(crate) write_xacts_per_plan: f64,
    pub(crate) wal_syncs_per_plan: f64,
    /// Participants (LIS and NIS) a committed plan touches, mean.
    pub(crate) participants_per_plan: f64,
    pub(crate) cpu: CpuSplit,
    /// CPU, socket bytes and requests served by role, over the window.
    pub(crate) roles: Vec<RoleUsage>,
    pub(crate) problems: usize,
}

impl Default for ClientLog {
    fn default() -> Self {
        // 1 µs to 1 hour, 3 significant digits; a larger value is counted as 1 hour.
        let histogram = || Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds");
        ClientLog {
            latencies: histogram(),
            planning: histogram(),
            messages: 0,
            rounds: 0,
            holds_aborted: 0,
            participants: 0,
            committed: 0,
            rejected: 0,
            reasons: BTreeMap::new(),
            errors: BTreeMap::new(),
        }
    }
}

/// Milliseconds as whole microseconds, for a histogram.
fn us(ms: f64) -> u64 {
    (ms * 1e3).round().max(0.0) as u64
}

impl RoundResult {
    pub(crate) fn completed(&self) -> usize {
        self.committed + self.rejected
    }

    pub(crate) fn commit_rate(&self) -> f64 {
        self.committed as f64 / self.completed().max(1) as f64
    }

    pub(crate) fn errors(&self) -> usize {
        self.errors.values().sum()
    }

    /// Durable (writing) PostgreSQL transactions per plan per participant a committed plan
    /// touches (NaN when no plan committed).
    pub(crate) fn xacts_per_participant(&self) -> f64 {
        if self.participants_per_plan > 0.0 {
            self.write_xacts_per_plan / self.participants_per_plan
        } else {
            f64::NAN
        }
    }
}

/// The reason's kind: its text up to the first `:` or digit, shortened.
pub(crate) fn reason_kind(r: &str) -> String {
    let head: String = r.split(':').next().unwrap_or_default().chars().take_while(|c| !c.is_ascii_digit()).collect();
    head.trim().chars().take(60).collect()
}

/// One user token per workload user (POST /v1/tokens with the admin token).
pub(crate) async fn user_tokens(
    client: &reqwest::Client,
    url: &str,
    admin: &str,
    users: &[String],
) -> Result<Vec<String>> {
    #[derive(Deserialize)]
    struct TokenView {
        token: String,
    }
    let mut out = Vec::new();
    for u in users {
        let r = client
            .post(format!("{url}/v1/tokens"))
            .bearer_auth(admin)
            .json(&serde_json::json!({ "user": u }))
            .send()
            .await?;
        if r.status() != reqwest::StatusCode::CREATED {
            bail!("POST /v1/tokens answered {}: {}", r.status(), r.text().await.unwrap_or_default());
        }
        out.push(r.json::<TokenView>().await?.token);
    }
    Ok(out)
}

/// `settings.clients` closed-loop clients POST the workload's requests (in order, from a shared
/// counter) for warm-up + measure; only requests that complete inside the measured window
/// count. The CPU of every process is sampled at the window's ends.
#[allow(clippy::too_many_arguments)]
async fn drive(
    s: &Settings,
    dbs: &Databases,
    db: &str,
    url: &str,
    tokens: Arc<Vec<String>>,
    workload: Arc<Workload>,
    procs: &Procs,
) -> Result<RoundResult> {
    let db = db.rsplit('/').next().unwrap_or_default().split('?').next().unwrap_or_default();
    coreserve::protocol::http::install_crypto_provider();
    let client = reqwest::Client::builder().pool_max_idle_per_host(s.clients).build()?;
    let base = Utc::now().timestamp() + BASE_MARGIN_S;
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let (from, to) = (start + s.warmup, start + s.warmup + s.measure);
    let mut tasks = Vec::new();
    for c in 0..s.clients {
        let (client, tokens, workload, next) = (client.clone(), tokens.clone(), workload.clone(), next.clone());
        let (url, idempotency) = (format!("{url}/v1/plans"), s.idempotency);
        tasks.push(tokio::spawn(async move {
            let mut log = ClientLog::default();
            while Instant::now() < to {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let (user, body) = workload.body(i, base);
                let mut req = client
                    .post(&url)
                    .bearer_auth(&tokens[user])
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body);
                if idempotency {
                    req = req.header("Idempotency-Key", format!("load-{i}"));
                }
                let sent = Instant::now();
                let answer = match req.send().await {
                    Ok(r) => {
                        let status = r.status();
                        r.bytes().await.map(|b| (status, b))
                    }
                    Err(e) => Err(e),
                };
                let done = Instant::now();
                if done < from || done >= to {
                    continue;
                }
                match answer {
                    Ok((status, bytes)) if status == reqwest::StatusCode::CREATED => {
                        let answer = serde_json::from_slice::<PlanAnswer>(&bytes);
                        if let Ok(a) = &answer {
                            log.planning.saturating_record(us(a.planning_ms));
                            log.messages += a.messages;
                            log.rounds += a.rounds.unwrap_or(0);
                            log.holds_aborted += a.holds_aborted;
                        }
                        match answer {
                            Ok(a) if a.status == "committed" => {
                                log.committed += 1;
                                log.participants += a.participants();
                            }
                            Ok(a) if a.status == "rejected" => {
                                log.rejected += 1;
                                *log.reasons
                                    .entry(reason_kind(a.reason.as_deref().unwrap_or_default()))
                                    .or_default() += 1;
                            }
                            _ => *log.errors.entry("201 with an unexpected body".into()).or_default() += 1,
                        }
                        log.latencies.saturating_record((done - sent).as_micros() as u64);
                    }
                    Ok((status, bytes)) => {
                        let e = log.errors.entry(format!("HTTP {}", status.as_u16())).or_default();
                        if *e == 0 && c == 0 {
                            eprintln!("  HTTP {status}: {}", String::from_utf8_lossy(&bytes));
                        }
                        *e += 1;
                    }
                    Err(e) => {
                        *log.errors.entry(format!("transport: {}", reason_kind(&e.to_string()))).or_default() += 1;
                    }
                }
            }
            log
        }));
    }
    // CPU, sockets, transactions and the planner's counters at the ends of the measured window.
    let pids = procs.pids();
    let scraper = reqwest::Client::new();
    let sockets = {
        let pids = pids.clone();
        tokio::task::spawn_blocking(move || sample_traffic(&pids, from, to))
    };
    tokio::time::sleep_until(from.into()).await;
    let a = snapshot(&pids);
    let (xa, da, ca) = (xacts(dbs, db).await?, durable(dbs).await?, scrape(&scraper, url).await?);
    tokio::time::sleep_until(to.into()).await;
    let b = snapshot(&pids);
    let (xb, db_, cb) = (xacts(dbs, db).await?, durable(dbs).await?, scrape(&scraper, url).await?);
    let cpu = CpuSplit::of(&a, &b, s.measure.as_secs_f64(), clk_tck());
    let roles = by_role(&a, &b, sockets.await?.as_deref(), &ca.until(&cb), clk_tck());

    let mut all = ClientLog::default();
    for t in tasks {
        let log = t.await?;
        all.latencies.add(&log.latencies)?;
        all.planning.add(&log.planning)?;
        all.messages += log.messages;
        all.rounds += log.rounds;
        all.holds_aborted += log.holds_aborted;
        all.participants += log.participants;
        all.committed += log.committed;
        all.rejected += log.rejected;
        for (k, v) in log.reasons {
            *all.reasons.entry(k).or_default() += v;
        }
        for (k, v) in log.errors {
            *all.errors.entry(k).or_default() += v;
        }
    }
    let ms = |h: &Histogram<u64>, q: f64| if h.is_empty() { f64::NAN } else { h.value_at_quantile(q) as f64 / 1e3 };
    let (l, p) = (&all.latencies, &all.planning);
    Ok(RoundResult {
        plans_per_s: (all.committed + all.rejected) as f64 / s.measure.as_secs_f64(),
        committed: all.committed,
        rejected: all.rejected,
        errors: all.errors,
        reasons: all.reasons,
        latency_ms: [ms(l, 0.50), ms(l, 0.90), ms(l, 0.99), ms(l, 1.0)],
        planning_ms: [ms(p, 0.50), ms(p, 0.99)],
        messages_per_plan: all.messages as f64 / p.len().max(1) as f64,
        rounds_per_plan: all.rounds as f64 / p.len().max(1) as f64,
        holds_aborted_per_plan: all.holds_aborted as f64 / p.len().max(1) as f64,
        pg_xacts_per_plan: (xb - xa) as f64 / (all.committed + all.rejected).max(1) as f64,
        write_xacts_per_plan: (db_.xids - da.xids) as f64 / (all.committed + all.rejected).max(1) as f64,
        wal_syncs_per_plan: (db_.wal_syncs - da.wal_syncs) as f64 / (all.committed + all.rejected).max(1) as f64,
        participants_per_plan: all.participants as f64 / all.committed.max(1) as f64,
        cpu,
        roles,
        problems: procs.problems.load(Ordering::Relaxed),
    })
}

/// One round: a fresh database, fresh processes, the load, then everything torn down.
pub(crate) async fn round(s: &Settings, bin: &Path, dbs: &Databases, mode: Mode, sc: &Scenario) -> Result<RoundResult> {
    let db = dbs.create(if mode == Mode::Roles { "roles" } else { "all" }).await?;
    let admin = format!("load-admin-{}", uuid::Uuid::new_v4().simple());
    let service = format!("load-service-{}", uuid::Uuid::new_v4().simple());
    let common = ["--horizon-days", HORIZON_DAYS, "--w-interval-s", &W_INTERVAL_S.to_string()].map(String::from);
    let mut procs = Procs::new(bin, &db, &admin, &service, &common);
    let url = procs.deploy(mode, &sc.grid, &sc.path)?;
    coreserve::protocol::http::install_crypto_provider();
    let client = reqwest::Client::new();
    wait_ready(&client, &url).await?;
    let tokens = Arc::new(user_tokens(&client, &url, &admin, &sc.workload.users).await?);
    let result = drive(s, dbs, &db, &url, tokens, sc.workload.clone(), &procs).await;
    drop(procs);
    result
}
