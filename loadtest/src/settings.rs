//! The run's settings, from the environment, and the constants of the experiment.

use std::time::Duration;

use anyhow::{anyhow, bail, Result};

pub(crate) const DEFAULT_SERVER: &str = "postgres://postgres@127.0.0.1:5432/postgres";
/// The planners' w_interval (serve's default); the workload's deadlines leave room for it.
pub(crate) const W_INTERVAL_S: i64 = 1800;
/// Offered load of the generated workload, relative to the grid's CPUs.
pub(crate) const OFFERED_LOAD: f64 = 0.5;
/// Requests generated per grid; a round that uses them all starts over one trace span later.
pub(crate) const POOL: usize = 40_000;
/// The first `not_before` lies this long after the round's start (so it stays after
/// `submitted_at + w_interval` for the whole round).
pub(crate) const BASE_MARGIN_S: i64 = W_INTERVAL_S + 600;
/// `--horizon-days` of the servers: the trace's timeline reaches months ahead.
pub(crate) const HORIZON_DAYS: &str = "3650";
/// Targets of issue 52 (issue 13's were 0.5 and 50 ms): all-in-one on Geant2012, plans/s
/// relative to pgbench's TPS and p99.
pub(crate) const TARGET_ALL_RATIO: f64 = 1.0;
pub(crate) const TARGET_ALL_P99_MS: f64 = 20.0;
/// The grid the all-in-one target is set on (a scenario label).
pub(crate) const TARGET_ALL_GRID: &str = "geant2012";
/// Role-separated: plans/s relative to pgbench's TPS, p99, and durable (writing) PostgreSQL
/// transactions per plan per participant it touches.
pub(crate) const TARGET_ROLES_RATIO: f64 = 0.25;
pub(crate) const TARGET_ROLES_P99_MS: f64 = 100.0;
pub(crate) const TARGET_XACTS_PER_PARTICIPANT: f64 = 3.0;

/// What the environment sets (see the crate's documentation).
pub(crate) struct Settings {
    pub(crate) server: String,
    pub(crate) clients: usize,
    pub(crate) warmup: Duration,
    pub(crate) measure: Duration,
    pub(crate) rounds: usize,
    pub(crate) pgbench_s: u64,
    pub(crate) idempotency: bool,
    /// Which deployments to run (`CORESERVE_LOAD_ONLY`, a comma list of `all-in-one` /
    /// `role-separated`; empty = all). A filtered run still writes its section.
    pub(crate) only: Vec<String>,
}

/// Variable `name` parsed, or `default` when it is unset or blank.
pub(crate) fn env_or<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
    match std::env::var(name).ok().filter(|v| !v.trim().is_empty()) {
        None => Ok(default),
        Some(v) => v.trim().parse().map_err(|_| anyhow!("{name}={v} is not valid")),
    }
}

impl Settings {
    pub(crate) fn from_env() -> Result<Self> {
        let s = Settings {
            server: env_or("CORESERVE_TEST_PG", DEFAULT_SERVER.to_owned())?,
            clients: env_or("CORESERVE_LOAD_CLIENTS", 8)?,
            warmup: Duration::from_secs(env_or("CORESERVE_LOAD_WARMUP_S", 5)?),
            measure: Duration::from_secs(env_or("CORESERVE_LOAD_SECONDS", 20)?),
            rounds: env_or("CORESERVE_LOAD_ROUNDS", 3)?,
            pgbench_s: env_or("CORESERVE_LOAD_PGBENCH_S", 15)?,
            idempotency: env_or("CORESERVE_LOAD_IDEMPOTENCY", 0u8)? == 1,
            only: env_or("CORESERVE_LOAD_ONLY", String::new())?
                .split(',')
                .map(|d| d.trim().to_owned())
                .filter(|d| !d.is_empty())
                .collect(),
        };
        if s.clients == 0 || s.rounds == 0 || s.measure.is_zero() || s.pgbench_s == 0 {
            bail!("clients, rounds, seconds and pgbench seconds must be > 0");
        }
        Ok(s)
    }
}
