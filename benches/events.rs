//! Event benchmark (issue 25): what the durable event log costs the plan rate, how fast an
//! event reaches a Server-Sent Events client and a webhook receiver, and how many events per
//! second one service delivers.
//!
//! One all-in-one service in process (2 HTTP workers, 3 planners) on a fresh PostgreSQL
//! database (`CORESERVE_BENCH_PG`, default `postgres://postgres@127.0.0.1:5432/postgres`; the
//! bench creates and drops its own database), one site of 100,000 CPUs so that every plan
//! commits and planning is cheap: the event log's share of a plan's cost is as large as it gets.
//! `CLIENTS` closed-loop clients POST one-job plans for `SECONDS` s per arm:
//! 1. **no event log** (the trigger disabled: `ALTER TABLE plans DISABLE TRIGGER plans_event`):
//!    the baseline plan rate;
//! 2. **event log, counter row**: the same with the trigger and the id scheme before issue 52
//!    (ids from a counter row whose lock each writer holds to its commit, `pg_notify` in the
//!    trigger), installed for this arm only;
//! 3. **event log**: the same with the trigger as migrated (ids from the writing transaction's
//!    id, readers below the watermark);
//! 4. **event log + consumers**: one SSE client (admin, every event) and one webhook (admin) to
//!    a receiver in the bench process, at the full plan rate;
//! 5. **paced**: 20 plans/s with both consumers: the latency from the event's write (`at`, the
//!    database's clock) to its arrival at the SSE client and at the receiver;
//! 6. **modification** (after arm 3, with the event log): `CLIENTS` closed-loop clients
//!    `PATCH` 200 committed plans in turn (one job's duration): modifications per second
//!    against arm 3's plan rate, and their latency.
//!
//! Writes the `events` section of BENCHMARKS.md. Environment: `CORESERVE_EVENTS_SECONDS` (10).

#[path = "report.rs"]
mod report;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpResponse, HttpServer};
use anyhow::{bail, Context, Result};
use chrono::{DateTime, Utc};
use coreserve::api::{Application, ServeConfig};
use coreserve::store::PgStore;
use serde_json::{json, Value};
use sqlx::Executor;

const COMMAND: &str = "cargo bench --bench events";
const ADMIN: &str = "events-bench-admin-token";
const CLIENTS: usize = 8;
const PACED_PER_S: u64 = 20;

/// Arrival times by event id, and the events' write times.
#[derive(Default)]
struct Arrivals {
    at: HashMap<i64, (DateTime<Utc>, DateTime<Utc>)>,
}

fn plan(i: u64) -> Value {
    let start = Utc::now() + chrono::Duration::hours(1) + chrono::Duration::seconds((i % 100_000) as i64 * 60);
    json!({
        "id": format!("e{i}"),
        "deadline": (start + chrono::Duration::days(2)).to_rfc3339(),
        "not_before": start.to_rfc3339(),
        "jobs": [{"name": "A", "os": "linux", "cpus": 1, "offset_s": 0, "duration_s": 600}],
        "transfers": []
    })
}

/// `clients` closed-loop clients (or one paced at `per_s`) for `secs`: plans answered 201.
async fn load(base: &str, secs: u64, clients: usize, per_s: Option<u64>) -> Result<u64> {
    let http = reqwest::Client::new();
    let stop = Instant::now() + Duration::from_secs(secs);
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (http, base, next) = (http.clone(), base.to_owned(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut ok = 0u64;
            let started = Instant::now();
            while Instant::now() < stop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if let Some(rate) = per_s {
                    let due = started + Duration::from_secs_f64(i as f64 / rate as f64);
                    tokio::time::sleep_until(due.into()).await;
                }
                let r = http.post(format!("{base}/v1/plans")).bearer_auth(ADMIN).json(&plan(i)).send().await;
                if r.is_ok_and(|r| r.status() == reqwest::StatusCode::CREATED) {
                    ok += 1;
                }
            }
            ok
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await?;
    }
    Ok(total)
}

/// Books `n` plans (one job each, an hour ahead or later) and answers their ids.
async fn book(base: &str, n: u64) -> Result<Vec<String>> {
    let http = reqwest::Client::new();
    let mut ids = Vec::new();
    for i in 0..n {
        let mut body = plan(i);
        body["id"] = json!(format!("m{i}"));
        let r = http.post(format!("{base}/v1/plans")).bearer_auth(ADMIN).json(&body).send().await?;
        let v: Value = r.json().await?;
        match v["id"].as_str() {
            Some(id) if v["status"] == "committed" => ids.push(id.to_owned()),
            _ => bail!("plan m{i} not committed: {v}"),
        }
    }
    Ok(ids)
}

/// `clients` closed-loop clients, each modifying its own share of `plans` in turn for `secs` s
/// (`PATCH /v1/plans/{id}`: job A's duration 900 s, then back to 600 s, round after round):
/// the modifications answered 200, those answered otherwise, and the 200s' latencies (ms).
async fn modify(base: &str, secs: u64, plans: &[String], clients: usize) -> Result<(u64, u64, Vec<f64>)> {
    let http = reqwest::Client::new();
    let stop = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let mine: Vec<String> = plans.iter().skip(c).step_by(clients).cloned().collect();
        let (http, base) = (http.clone(), base.to_owned());
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut other, mut lat) = (0u64, 0u64, Vec::new());
            'rounds: for round in 0.. {
                let duration_s = if round % 2 == 0 { 900 } else { 600 };
                for id in &mine {
                    if Instant::now() >= stop {
                        break 'rounds;
                    }
                    let t = Instant::now();
                    let change = json!({"jobs": [{"name": "A", "duration_s": duration_s}]});
                    let r = http.patch(format!("{base}/v1/plans/{id}")).bearer_auth(ADMIN).json(&change).send().await;
                    if r.is_ok_and(|r| r.status() == reqwest::StatusCode::OK) {
                        ok += 1;
                        lat.push(t.elapsed().as_secs_f64() * 1e3);
                    } else {
                        other += 1;
                    }
                }
            }
            (ok, other, lat)
        }));
    }
    let (mut ok, mut other, mut lat) = (0, 0, Vec::new());
    for t in tasks {
        let (o, x, l) = t.await?;
        (ok, other) = (ok + o, other + x);
        lat.extend(l);
    }
    lat.sort_by(f64::total_cmp);
    Ok((ok, other, lat))
}

/// Follows `GET /v1/events` from the log's end, recording each event's arrival.
fn sse(base: &str, into: Arc<Mutex<Arrivals>>) {
    let url = format!("{base}/v1/events");
    tokio::spawn(async move {
        let Ok(mut r) = reqwest::Client::new().get(url).bearer_auth(ADMIN).send().await else { return };
        let mut buf = String::new();
        while let Ok(Some(chunk)) = r.chunk().await {
            let now = Utc::now();
            buf.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(i) = buf.find("\n\n") {
                let block: String = buf.drain(..i + 2).collect();
                if let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) {
                    let v: Value = serde_json::from_str(data).unwrap_or_default();
                    if let (Some(id), Some(at)) = (v["id"].as_i64(), v["at"].as_str()) {
                        let at: DateTime<Utc> = at.parse().unwrap_or(now);
                        into.lock().unwrap().at.insert(id, (at, now));
                    }
                }
            }
        }
    });
}

/// A webhook receiver: records each delivery's arrival; its URL.
fn receiver(into: Arc<Mutex<Arrivals>>) -> Result<String> {
    let data = web::Data::from(into);
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    let server = HttpServer::new(move || {
        App::new().app_data(data.clone()).route(
            "/hook",
            web::post().to(|into: web::Data<Mutex<Arrivals>>, body: web::Bytes| async move {
                let now = Utc::now();
                let v: Value = serde_json::from_slice(&body).unwrap_or_default();
                if let (Some(id), Some(at)) = (v["id"].as_i64(), v["at"].as_str()) {
                    into.lock().unwrap().at.insert(id, (at.parse().unwrap_or(now), now));
                }
                HttpResponse::NoContent().finish()
            }),
        )
    })
    .workers(1)
    .listen(listener)?
    .run();
    tokio::spawn(server);
    Ok(url)
}

/// p50 and p99 (ms) of arrival - write over the events written after `from`.
fn latency(a: &Mutex<Arrivals>, from: i64) -> (f64, f64, usize) {
    let mut lat: Vec<f64> = a
        .lock()
        .unwrap()
        .at
        .iter()
        .filter(|(id, _)| **id > from)
        .map(|(_, (at, got))| (*got - *at).num_microseconds().unwrap_or(0) as f64 / 1e3)
        .collect();
    lat.sort_by(f64::total_cmp);
    (report::percentile(&lat, 0.5), report::percentile(&lat, 0.99), lat.len())
}

/// The newest readable event's id.
async fn last_event(pool: &sqlx::PgPool) -> Result<i64> {
    Ok(sqlx::query_scalar::<_, i64>("SELECT COALESCE(max(id), 0) FROM plan_events WHERE id < plan_event_watermark()")
        .fetch_one(pool)
        .await?)
}

/// How many events were written after event `from`.
async fn events_since(pool: &sqlx::PgPool, from: i64) -> Result<i64> {
    Ok(sqlx::query_scalar::<_, i64>("SELECT count(*) FROM plan_events WHERE id > $1")
        .bind(from)
        .fetch_one(pool)
        .await?)
}

/// The scheme before migrations/0024_event_ids_without_lock.sql, for the comparison arm: ids
/// from a counter row whose lock each writer holds to its commit, and a `pg_notify` from the
/// trigger (whose queue lock PostgreSQL also holds across the commit). It continues after the
/// newest id, and [`NEW_SCHEME`] puts the current function back.
const OLD_SCHEME: &str = "
    CREATE TABLE bench_event_counter (one boolean PRIMARY KEY DEFAULT true, last_id bigint NOT NULL);
    INSERT INTO bench_event_counter SELECT true, COALESCE(max(id), 0) FROM plan_events;
    CREATE OR REPLACE FUNCTION plan_event(p plans, what text, part text) RETURNS void LANGUAGE plpgsql AS $$
    DECLARE next bigint;
    BEGIN
        UPDATE bench_event_counter SET last_id = last_id + 1 RETURNING last_id INTO next;
        INSERT INTO plan_events (id, plan_id, owner, \"user\", request_id, status, outcome, kind, part)
            VALUES (next, p.id, p.owner, p.\"user\", p.request_id, p.status, p.outcome, what, part);
        PERFORM pg_notify('coreserve_events', next::text);
    END $$;";

/// migrations/0024_event_ids_without_lock.sql's `plan_event`, back after the comparison arm.
const NEW_SCHEME: &str = include_str!("../migrations/0024_event_ids_without_lock.sql");

/// The `CREATE OR REPLACE FUNCTION plan_event` statement of a migration's text.
fn plan_event_function(migration: &str) -> Result<&str> {
    let start = migration.find("CREATE OR REPLACE FUNCTION plan_event(").context("plan_event in the migration")?;
    let end = migration[start..].find("END $$;").context("the function's end")? + start + "END $$;".len();
    Ok(&migration[start..end])
}

fn main() -> Result<()> {
    let secs: u64 = std::env::var("CORESERVE_EVENTS_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
    let server =
        std::env::var("CORESERVE_BENCH_PG").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let db = format!("coreserve_bench_events_{}", std::process::id());
        let admin_pool = sqlx::PgPool::connect(&server).await.context("CORESERVE_BENCH_PG: a PostgreSQL server")?;
        admin_pool.execute(format!("DROP DATABASE IF EXISTS {db}").as_str()).await?;
        admin_pool.execute(format!("CREATE DATABASE {db}").as_str()).await?;
        let url = match server.rsplit_once('/') {
            Some((head, _)) => format!("{head}/{db}"),
            None => bail!("CORESERVE_BENCH_PG: not a URL"),
        };
        let result = run(&url, secs).await;
        admin_pool.execute(format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)").as_str()).await?;
        let body = result?;
        report::write_markdown("events", &body);
        print!("{body}");
        Ok(())
    })
}

async fn run(url: &str, secs: u64) -> Result<String> {
    let grid = serde_json::from_value(json!({
        "nodes": [{"id": "n1"}], "links": [],
        "sites": [{"id": "s1", "node": "n1", "cpus": 100_000, "os": "linux", "price_per_cpu_hour": 1.0}]
    }))?;
    let store = Arc::new(PgStore::connect(url).await?);
    let pool = store.pool().clone();
    let config = ServeConfig {
        listen: "127.0.0.1:0".into(),
        admin_token: Some(ADMIN.into()),
        workers: Some(2),
        w_interval_s: 1,
        // The webhook receiver runs in this process, on loopback: allowed by the admin, as an
        // in-house receiver would be (docs/deploy.md).
        webhook_allow: vec!["127.0.0.1".parse()?],
        ..ServeConfig::default()
    };
    let app = Application::build(config, grid, store).await?;
    let base = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run_until_stopped());
    // Warm-up.
    load(&base, 2, CLIENTS, None).await?;

    pool.execute("ALTER TABLE plans DISABLE TRIGGER plans_event").await?;
    let without = load(&base, secs, CLIENTS, None).await? as f64 / secs as f64;
    pool.execute("ALTER TABLE plans ENABLE TRIGGER plans_event").await?;
    sqlx::raw_sql(OLD_SCHEME).execute(&pool).await?;
    let with_counter = load(&base, secs, CLIENTS, None).await? as f64 / secs as f64;
    pool.execute(plan_event_function(NEW_SCHEME)?).await?;
    pool.execute("DROP TABLE bench_event_counter").await?;
    let with = load(&base, secs, CLIENTS, None).await? as f64 / secs as f64;
    // Modification (two-phase commit of a replacement hold, the plan rewritten, its event).
    let plans = book(&base, CLIENTS as u64 * 25).await?;
    let (modified, not_modified, modify_ms) = modify(&base, secs, &plans, CLIENTS).await?;
    let modified = modified as f64 / secs as f64;

    let (streamed, hooked) = (Arc::new(Mutex::new(Arrivals::default())), Arc::new(Mutex::new(Arrivals::default())));
    sse(&base, streamed.clone());
    let hook = receiver(hooked.clone())?;
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/webhooks"))
        .bearer_auth(ADMIN)
        .json(&json!({"url": hook}))
        .send()
        .await?;
    if r.status() != reqwest::StatusCode::CREATED {
        bail!("POST /v1/webhooks answered {}", r.status());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let from = last_event(&pool).await?;
    let t0 = Instant::now();
    let consumed = load(&base, secs, CLIENTS, None).await? as f64 / secs as f64;
    let written = events_since(&pool, from).await?;
    // Until both consumers have everything (or 120 s): when each had it all.
    let (mut sse_done, mut hook_done) = (None, None);
    while t0.elapsed() < Duration::from_secs(secs + 120) && (sse_done.is_none() || hook_done.is_none()) {
        if sse_done.is_none() && latency(&streamed, from).2 as i64 >= written {
            sse_done = Some(t0.elapsed().as_secs_f64());
        }
        if hook_done.is_none() && latency(&hooked, from).2 as i64 >= written {
            hook_done = Some(t0.elapsed().as_secs_f64());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let caught_up = t0.elapsed().as_secs_f64();
    let rate = |done: Option<f64>, got: usize| done.map_or(got as f64 / caught_up, |d| got as f64 / d);
    let (s_full, h_full) = (latency(&streamed, from), latency(&hooked, from));

    let from = last_event(&pool).await?;
    load(&base, secs, 1, Some(PACED_PER_S)).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (s_paced, h_paced) = (latency(&streamed, from), latency(&hooked, from));

    let mut body = report::heading("Events: the event log's cost, SSE and webhook latency", COMMAND);
    body.push_str(&format!(
        "\nOne all-in-one service in process on PostgreSQL (this machine), one site of 100,000 CPUs, \
         one-job plans from {CLIENTS} closed-loop clients, {secs} s per arm (see benches/events.rs). \
         The first three rows measure the event log's price in the same run: without it, with the \
         counter row that ordered ids until issue 52 (plan writes passed it one at a time), and with \
         ids from the writing transaction's id, read below the oldest running transaction (no lock \
         held to commit; migrations/0024_event_ids_without_lock.sql). Latency: from the event's write \
         (`at`, the database's clock, at the start of the writing transaction) to its arrival.\n\n\
         | arm | plans/s | ratio to no event log | events | SSE p50 / p99 | webhook p50 / p99 |\n|---|---|---|---|---|---|\n"
    ));
    body.push_str(&format!("| no event log (trigger disabled; baseline) | {without:.0} | 1.00 | - | - | - |\n"));
    body.push_str(&format!(
        "| event log, ids from a counter row locked to commit (before issue 52) | {with_counter:.0} | {:.2} | - | - | - |\n",
        with_counter / without
    ));
    body.push_str(&format!(
        "| event log, ids from the transaction's id below the watermark (now) | {with:.0} | {:.2} | - | - | - |\n",
        with / without
    ));
    body.push_str(&format!(
        "| event log + 1 SSE client + 1 webhook, full rate | {consumed:.0} | {:.2} | {written} written in {secs} s; all at the SSE client after {} s, at the webhook after {} s | {:.1} / {:.1} ms | {:.1} / {:.1} ms |\n",
        consumed / without,
        sse_done.map_or("(not all)".into(), |d| format!("{d:.1}")),
        hook_done.map_or("(not all)".into(), |d| format!("{d:.1}")),
        s_full.0,
        s_full.1,
        h_full.0,
        h_full.1,
    ));
    body.push_str(&format!(
        "| paced {PACED_PER_S} plans/s, both consumers | {PACED_PER_S} | - | {} | {:.1} / {:.1} ms | {:.1} / {:.1} ms |\n",
        s_paced.2, s_paced.0, s_paced.1, h_paced.0, h_paced.1,
    ));
    body.push_str(&format!(
        "\nModification, in the same run with the event log and no consumer: {CLIENTS} closed-loop \
         clients PATCH {} committed plans in turn (one job's duration 600 s <-> 900 s; each a \
         replacement hold prepared, the decision and the rewritten plan in one transaction, the \
         commit, one `plan.modified` event): **{modified:.0} modifications/s** ({:.2} x the plan \
         rate with the event log), latency p50 / p99 {:.1} / {:.1} ms, {not_modified} answered \
         other than 200.\n",
        plans.len(),
        modified / with,
        report::percentile(&modify_ms, 0.5),
        report::percentile(&modify_ms, 0.99),
    ));
    let (to_sse, to_hook) = (rate(sse_done, s_full.2), rate(hook_done, h_full.2));
    let keeps_up = |r: f64| if r >= 0.9 * to_sse { "keeps up with it" } else { "does not" };
    body.push_str(&format!(
        "\nEvents delivered per second at the full rate (events over the time until the consumer had them \
         all): {to_sse:.0} to the SSE client, {to_hook:.0} to the webhook ({:.2} x the stream). The stream \
         keeps up with the plan rate; one webhook {}: its POSTs are sequential, to keep order, and \
         each round of up to 64 events ends with one delivery-log write (attempts and cursor), so a \
         webhook is bound by one POST's round trip per event. On this 2-core machine the service, \
         PostgreSQL, the clients and both consumers share the cores; with the counter row a larger \
         machine would have kept the plan rate's ceiling at one commit's WAL flush at a time (about \
         1/fsync); without it, concurrent plan writes share their flushes (group commit).\n",
        to_hook / to_sse,
        keeps_up(to_hook),
    ));
    Ok(body)
}
