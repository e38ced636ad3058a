//! The durable transactions a plan costs, counted rather than timed: the guard against the
//! regression that cost round 3 half its throughput unnoticed (issue 52). A test of the
//! coreserve package (`tests/it/budget.rs`) runs it on a PostgreSQL cluster of its own, where
//! nothing else writes, so the transaction ids PostgreSQL hands out (one per transaction that
//! writes, none for one that only reads) are exactly the deployment's, whatever the machine's
//! speed.

use std::sync::Arc;

use anyhow::{bail, Result};
use chrono::Utc;

use crate::database::{durable, Databases};
use crate::deploy::{wait_ready, Mode, Procs};
use crate::drive::{user_tokens, PlanAnswer};
use crate::settings::{BASE_MARGIN_S, HORIZON_DAYS, W_INTERVAL_S};
use crate::workload::scenarios;
use crate::Paths;

/// Plans sent before counting starts (first-use work: caches, connections).
const WARM_UP: usize = 5;

/// What [`count_transactions`] counted over its plans.
#[derive(Debug, Clone, Copy)]
pub struct Counted {
    /// Plans answered `201` while counting (committed or rejected).
    pub plans: usize,
    /// Of them, committed.
    pub committed: usize,
    /// Transactions that wrote, per plan (every plan counts).
    pub write_xacts_per_plan: f64,
    /// Participants (LIS and NIS) a committed plan touches, mean over the committed plans.
    pub participants_per_plan: f64,
}

/// Deploys `mode` on a fresh database of the PostgreSQL server `server` (all-in-one on
/// Geant2012, role-separated on the bench's 8-site grid, as `cargo bench --bench load` does) and
/// sends `plans` of the load bench's requests one after the other, counting the transactions
/// that wrote from the first answer counted to the last. Nothing else may write on that server
/// meanwhile: the count is cluster-wide.
///
/// # Errors
/// The server is unreachable, a process does not start, or a request is not answered `201`.
pub fn count_transactions(paths: &Paths, server: &str, mode: Mode, plans: usize) -> Result<Counted> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let dbs = Databases::new(server);
        let result = count(paths, &dbs, mode, plans).await;
        dbs.drop_all().await?;
        result
    })
}

async fn count(paths: &Paths, dbs: &Databases, mode: Mode, plans: usize) -> Result<Counted> {
    let dir = tempfile::tempdir()?;
    let scenarios = scenarios(&paths.data, dir.path())?;
    let sc = &scenarios[if mode == Mode::AllInOne { 0 } else { 1 }];
    let db = dbs.create("budget").await?;
    let (admin, service) = ("budget-admin-token", "budget-service-token");
    let common = ["--horizon-days", HORIZON_DAYS, "--w-interval-s", &W_INTERVAL_S.to_string()].map(String::from);
    let mut procs = Procs::new(&paths.coreserve, &db, admin, service, &common);
    let url = procs.deploy(mode, &sc.grid, &sc.path)?;
    coreserve::protocol::http::install_crypto_provider();
    let client = reqwest::Client::new();
    wait_ready(&client, &url).await?;
    let tokens = Arc::new(user_tokens(&client, &url, admin, &sc.workload.users).await?);
    let base = Utc::now().timestamp() + BASE_MARGIN_S;
    let (mut committed, mut participants) = (0, 0);
    let mut before = None;
    for i in 0..WARM_UP + plans {
        if i == WARM_UP {
            before = Some(durable(dbs).await?);
        }
        let (user, body) = sc.workload.body(i, base);
        let r = client
            .post(format!("{url}/v1/plans"))
            .bearer_auth(&tokens[user])
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await?;
        if r.status() != reqwest::StatusCode::CREATED {
            bail!("plan {i} answered {}: {}", r.status(), r.text().await.unwrap_or_default());
        }
        let answer: PlanAnswer = r.json().await?;
        if i >= WARM_UP && answer.status == "committed" {
            committed += 1;
            participants += answer.participants();
        }
    }
    let after = durable(dbs).await?;
    let before = before.expect("counting started");
    drop(procs);
    Ok(Counted {
        plans,
        committed,
        write_xacts_per_plan: (after.xids - before.xids) as f64 / plans.max(1) as f64,
        participants_per_plan: participants as f64 / committed.max(1) as f64,
    })
}
