//! The report: the summary lines printed at the end and the Markdown section of BENCHMARKS.md.

use crate::database::Pgbench;
use crate::deploy::Mode;
use crate::drive::RoundResult;
use crate::roles::RoleUsage;
use crate::settings::{
    Settings, BASE_MARGIN_S, OFFERED_LOAD, TARGET_ALL_GRID, TARGET_ALL_P99_MS, TARGET_ALL_RATIO, TARGET_ROLES_P99_MS,
    TARGET_ROLES_RATIO, TARGET_XACTS_PER_PARTICIPANT,
};
use crate::traffic::SAMPLE_EVERY;

pub(crate) struct Measured {
    pub(crate) mode: Mode,
    pub(crate) scenario: &'static str,
    pub(crate) sites: usize,
    pub(crate) processes: String,
    pub(crate) rounds: Vec<RoundResult>,
}

impl Measured {
    /// The round with the median plans/s (the lower middle one for an even count).
    pub(crate) fn median(&self) -> &RoundResult {
        let mut idx: Vec<usize> = (0..self.rounds.len()).collect();
        idx.sort_by(|&a, &b| self.rounds[a].plans_per_s.total_cmp(&self.rounds[b].plans_per_s));
        &self.rounds[idx[(idx.len() - 1) / 2]]
    }

    fn range(&self) -> (f64, f64) {
        let it = self.rounds.iter().map(|r| r.plans_per_s);
        (it.clone().fold(f64::INFINITY, f64::min), it.fold(0.0, f64::max))
    }

    /// Issues 13's and 52's targets for this deployment and whether the median round meets it (without
    /// errors); `-` where it sets none (all-in-one on another grid than Geant2012).
    fn target(&self, pg: &Pgbench) -> String {
        let m = self.median();
        let ratio = m.plans_per_s / pg.tps;
        let (text, met) = match self.mode {
            Mode::AllInOne if self.scenario == TARGET_ALL_GRID => (
                format!(">= {TARGET_ALL_RATIO} x pgbench, p99 <= {TARGET_ALL_P99_MS:.0} ms"),
                ratio >= TARGET_ALL_RATIO && m.latency_ms[2] <= TARGET_ALL_P99_MS,
            ),
            Mode::AllInOne => return "-".into(),
            Mode::Roles => (
                format!(
                    ">= {TARGET_ROLES_RATIO} x pgbench, p99 <= {TARGET_ROLES_P99_MS:.0} ms, <= \
                     {TARGET_XACTS_PER_PARTICIPANT:.0} durable txns/plan/participant"
                ),
                ratio >= TARGET_ROLES_RATIO
                    && m.latency_ms[2] <= TARGET_ROLES_P99_MS
                    && m.xacts_per_participant() <= TARGET_XACTS_PER_PARTICIPANT,
            ),
        };
        format!("{text} {}", if met && m.errors() == 0 { "(met)" } else { "(not met)" })
    }
}

/// A role's rows of the per-role table: the role itself, and for several LIS processes also
/// their mean (label, processes, divisor).
fn role_rows(r: &RoleUsage) -> Vec<(String, usize, f64)> {
    let mut rows = vec![(r.role.clone(), r.processes, 1.0)];
    if r.role == "lis" && r.processes > 1 {
        rows[0].0 = format!("lis (sum of {})", r.processes);
        rows.push(("lis (per process, mean)".into(), 1, r.processes as f64));
    }
    rows
}

/// One role's figures per plan (`plans` in the window), each divided by `div`: CPU ms,
/// requests served, kB received, kB sent.
fn per_plan(r: &RoleUsage, plans: usize, div: f64) -> (f64, Option<f64>, Option<(f64, f64)>) {
    let n = plans.max(1) as f64 * div;
    (
        r.cpu_s * 1e3 / n,
        r.served.map(|v| v as f64 / n),
        r.traffic.map(|t| (t.received as f64 / 1e3 / n, t.sent as f64 / 1e3 / n)),
    )
}

/// `role CPU x ms, y requests, a / b kB` per plan, for the summary line.
fn roles_line(r: &RoundResult) -> String {
    let parts: Vec<String> = r
        .roles
        .iter()
        .map(|u| {
            let (cpu, served, bytes) = per_plan(u, r.completed(), 1.0);
            let served = served.map_or("requests not counted".into(), |v| format!("{v:.1} requests served"));
            let bytes = bytes.map_or("bytes not measured".into(), |(i, o)| format!("{i:.1} kB in / {o:.1} kB out"));
            format!("{} (x{}) CPU {cpu:.2} ms, {served}, {bytes}", u.role, u.processes)
        })
        .collect();
    parts.join("; ")
}

pub(crate) fn summary_line(m: &Measured, pg: &Pgbench) -> String {
    let r = m.median();
    let (lo, hi) = m.range();
    let reasons: Vec<String> = r.reasons.iter().map(|(k, v)| format!("{v} {k}")).collect();
    let errors: Vec<String> = r.errors.iter().map(|(k, v)| format!("{v} {k}")).collect();
    format!(
        "{} on {} ({}): {:.0} plans/s (rounds {:.0}-{:.0}), ratio to pgbench {:.3}; latency p50 {:.2} ms, p90 {:.2} ms, \
         p99 {:.2} ms, max {:.2} ms (in the planner: p50 {:.2} ms, p99 {:.2} ms); {} committed, {} rejected (commit rate {:.3}{}{}), errors {}; per plan {:.0} messages in {:.1} message rounds, {:.1} holds aborted, \
         {:.1} PostgreSQL transactions ({:.2} writing, {:.2} WAL flushes), {:.2} participants touched (committed \
         plans), {:.2} writing transactions per plan per participant; by role per plan: {}; CPU in cores: {}; server \
         log warnings {}{}",
        m.mode.name(),
        m.scenario,
        m.processes,
        r.plans_per_s,
        lo,
        hi,
        r.plans_per_s / pg.tps,
        r.latency_ms[0],
        r.latency_ms[1],
        r.latency_ms[2],
        r.latency_ms[3],
        r.planning_ms[0],
        r.planning_ms[1],
        r.committed,
        r.rejected,
        r.commit_rate(),
        if reasons.is_empty() { "" } else { "; rejected: " },
        reasons.join(", "),
        if errors.is_empty() { "0".to_owned() } else { errors.join(", ") },
        r.messages_per_plan,
        r.rounds_per_plan,
        r.holds_aborted_per_plan,
        r.pg_xacts_per_plan,
        r.write_xacts_per_plan,
        r.wal_syncs_per_plan,
        r.participants_per_plan,
        r.xacts_per_participant(),
        roles_line(r),
        r.cpu.describe(),
        r.problems,
        match r.roles.iter().filter_map(|u| u.traffic).map(|t| t.closed).sum::<usize>() {
            0 => String::new(),
            n => format!("; {n} sockets closed inside the window (counted up to their last sample)"),
        }
    )
}

/// The section of BENCHMARKS.md below its heading (machine, command, date).
pub(crate) fn markdown(
    s: &Settings,
    pg_info: &str,
    pg: &Pgbench,
    measured: &[Measured],
    previous: Option<&str>,
) -> String {
    let idem = if s.idempotency { " and an `Idempotency-Key`" } else { "" };
    let mut body = String::new();
    body.push_str(&format!(
        "- database: {pg_info}, on this machine\n\n\
         {clients} closed-loop clients (tokio + reqwest, keep-alive, in the bench process) POST SDSC-BLUE-derived \
         workflow requests (`coreserve workload` rules: 4-job diamonds, CPUs from the trace clamped to 8-128, offered \
         load {OFFERED_LOAD} of the grid's CPUs) to `coreserve serve` with `DATABASE_URL` (default flags: 3 planners, \
         BIR, policy `time`, 2 HTTP workers per process). The trace's arrival times become `not_before` from a base \
         {margin} min after the run starts; each deadline keeps its window; every request carries its workload user's \
         token{idem}. Each deployment runs {rounds} rounds on a fresh database and fresh processes: {warmup} s warm-up, \
         then {measure} s measured. plans/s = `201` answers (committed or rejected plans) completed in the measured \
         window per second; the figures are those of the median round by plans/s (range over the rounds beside it). \
         Ceiling: each plan needs at least one durable commit, so pgbench's TPS on the same server, measured in the \
         same run just before, bounds it. CPU from /proc; planner time: the answers' `planning_ms` (search and \
         two-phase commit inside the server).\n\n",
        clients = s.clients,
        margin = BASE_MARGIN_S / 60,
        rounds = s.rounds,
        warmup = s.warmup.as_secs(),
        measure = s.measure.as_secs(),
    ));
    body.push_str(
        "| deployment | grid | processes | plans/s (range) | p50 | p90 | p99 | max | commit rate | errors | \
         plans/s ÷ pgbench TPS | target |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    body.push_str(&format!(
        "| pgbench tpcb-like (`{}`) | - | - | {:.0} TPS | latency average {:.2} ms | - | - | - | - | - | 1 | - |\n",
        pg.command, pg.tps, pg.latency_ms
    ));
    for m in measured {
        let r = m.median();
        let (lo, hi) = m.range();
        body.push_str(&format!(
            "| {} | {} ({} sites) | {} | {:.0} ({:.0}-{:.0}) | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.3} | {} | {:.3} | {} |\n",
            m.mode.name(),
            m.scenario,
            m.sites,
            m.processes,
            r.plans_per_s,
            lo,
            hi,
            r.latency_ms[0],
            r.latency_ms[1],
            r.latency_ms[2],
            r.latency_ms[3],
            r.commit_rate(),
            r.errors(),
            r.plans_per_s / pg.tps,
            m.target(pg)
        ));
    }
    if let Some(previous) = previous {
        body.push_str(&against_previous(previous, pg, measured));
    }
    body.push_str(
        "\nCPU during the measured window, in cores (of 2):\n\n| deployment | grid | coreserve | PostgreSQL | \
         load generator | other | idle |\n|---|---|---|---|---|---|---|\n",
    );
    for m in measured {
        let c = &m.median().cpu;
        let roles: Vec<String> = c.servers.iter().map(|(role, v)| format!("{role} {v:.2}")).collect();
        body.push_str(&format!(
            "| {} | {} | {:.2} ({}) | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            m.mode.name(),
            m.scenario,
            c.coreserve(),
            roles.join(", "),
            c.postgres,
            c.generator,
            c.other,
            c.idle
        ));
    }
    body.push_str(
        "\nPer plan: the planner's own time, its participant messages, their sequential rounds (messages in \
         flight together count once) and aborted holds (means); PostgreSQL \
         transactions: all of them in the deployment's database (commits and rollbacks, read-only ones \
         included: pg_stat_database), those that wrote (durable: the transaction ids PostgreSQL handed out, \
         cluster-wide, while only this deployment ran), and the WAL flushes to disk that made them durable \
         (pg_stat_wal.wal_sync: fewer flushes than writing transactions is group commit); the \
         participants a committed plan touches (mean of the `201` answers' distinct `jobs[].site`, + 1 for the NIS \
         if a `transfers[].path` is not empty), the writing transactions per plan divided by that mean (durable \
         transactions per plan per participant touched; every plan counts in the first, committed plans only in the \
         mean), \
         CPU time.\n\n\
         | deployment | grid | planner time p50 / p99 | messages | message rounds | holds aborted | PostgreSQL transactions | \
         writing transactions | WAL flushes | participants touched | writing transactions per participant | \
         CPU coreserve / PostgreSQL |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for m in measured {
        let r = m.median();
        let per_plan = |cores: f64| cores / r.plans_per_s.max(f64::MIN_POSITIVE) * 1e3;
        body.push_str(&format!(
            "| {} | {} | {:.2} / {:.2} ms | {:.0} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2}{} | {:.2} / {:.2} ms |\n",
            m.mode.name(),
            m.scenario,
            r.planning_ms[0],
            r.planning_ms[1],
            r.messages_per_plan,
            r.rounds_per_plan,
            r.holds_aborted_per_plan,
            r.pg_xacts_per_plan,
            r.write_xacts_per_plan,
            r.wal_syncs_per_plan,
            r.participants_per_plan,
            r.xacts_per_participant(),
            if m.mode == Mode::Roles {
                format!(" (target <= {TARGET_XACTS_PER_PARTICIPANT:.0})")
            } else {
                String::new()
            },
            per_plan(r.cpu.coreserve()),
            per_plan(r.cpu.postgres)
        ));
    }
    body.push_str(&format!(
        "\nPer plan and role, over the measured window (plans = the `201` answers completed in it): CPU time of \
         the role's processes (/proc/PID/stat); HTTP requests they served; TCP bytes their sockets received / sent \
         (the kernel's per-socket `bytes_received` / `bytes_sent`, read with `ss -tinOe` every {every} s and summed \
         over the sockets each process holds in /proc/PID/fd: client, peer and PostgreSQL connections, a socket \
         that closes in the window up to its last sample; /proc/PID/io is not used because it does not count \
         recv(2)/send(2)). Requests served: `all` and `planner` = `POST /v1/plans` \
         (the process's `coreserve_plans_total` on `/metrics`), `lis` and `nis` = the planner's calls to them (its \
         `coreserve_participant_call_seconds_count`, every message; all-in-one makes these calls in process); the \
         GIS's (one `candidates` call per job) are counted nowhere: `-`. `lis (sum of N)` = every LIS process; \
         `lis (per process, mean)` = that sum ÷ N.\n\n\
         | deployment | grid | role | processes | CPU | requests served | kB received / sent |\n\
         |---|---|---|---|---|---|---|\n",
        every = SAMPLE_EVERY.as_secs_f64()
    ));
    for m in measured {
        let r = m.median();
        for u in &r.roles {
            for (label, processes, div) in role_rows(u) {
                let (cpu, served, bytes) = per_plan(u, r.completed(), div);
                body.push_str(&format!(
                    "| {} | {} | {label} | {processes} | {cpu:.2} ms | {} | {} |\n",
                    m.mode.name(),
                    m.scenario,
                    served.map_or("-".into(), |v| format!("{v:.1}")),
                    bytes.map_or("-".into(), |(i, o)| format!("{i:.1} / {o:.1}")),
                ));
            }
        }
    }
    body
}

/// The rows of every Markdown table in `text`, each as (column header, cell) pairs.
fn table_rows(text: &str) -> Vec<Vec<(String, String)>> {
    let cells =
        |line: &str| -> Vec<String> { line.trim().trim_matches('|').split('|').map(|c| c.trim().to_owned()).collect() };
    let mut rows = Vec::new();
    let mut header: Option<Vec<String>> = None;
    for line in text.lines() {
        if !line.trim_start().starts_with('|') {
            header = None;
        } else if line.contains("|---") {
            continue;
        } else if let Some(h) = &header {
            rows.push(h.iter().cloned().zip(cells(line)).collect());
        } else {
            header = Some(cells(line));
        }
    }
    rows
}

/// The first number in `cell` (`909 (903-946)` -> 909, `21.04 ms` -> 21.04).
fn number(cell: &str) -> Option<f64> {
    let start = cell.find(|c: char| c.is_ascii_digit())?;
    let rest = &cell[start..];
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The figure under `column` in the previous run's row of `deployment` on `grid` (the grid cell
/// starts with the scenario's label), from any of its tables.
fn previous_figure(rows: &[Vec<(String, String)>], deployment: &str, grid: &str, column: &str) -> Option<f64> {
    rows.iter().find_map(|row| {
        let get = |name: &str| row.iter().find(|(h, _)| h == name).map(|(_, c)| c.as_str());
        if get("deployment")? == deployment && get("grid")?.starts_with(grid) {
            number(get(column)?)
        } else {
            None
        }
    })
}

/// This run beside the previous one (the section BENCHMARKS.md held before this run): plans/s,
/// the ratio to pgbench (each run's own pgbench), p99 and transactions per plan.
fn against_previous(previous: &str, pg: &Pgbench, measured: &[Measured]) -> String {
    let rows = table_rows(previous);
    let date = previous.lines().find_map(|l| l.strip_prefix("- date: ")).unwrap_or("unknown date");
    let mut out = format!(
        "\nAgainst the previous run of this bench (its section of BENCHMARKS.md, {date}; `-` where it had no such \
         figure). Each run's ratio to pgbench uses its own pgbench; `now ÷ previous` below 1 for plans/s, or \
         above 1 for p99 and transactions, is a regression.\n\n\
         | deployment | grid | plans/s now / previous | now ÷ previous | ÷ pgbench now / previous | p99 now / previous | \
         PostgreSQL transactions per plan now / previous | writing transactions per plan now / previous |\n\
         |---|---|---|---|---|---|---|---|\n"
    );
    let fmt = |v: Option<f64>, digits: usize| v.map_or("-".to_owned(), |v| format!("{v:.digits$}"));
    for m in measured {
        let r = m.median();
        let (d, g) = (m.mode.name(), m.scenario);
        let prev = |column: &str| previous_figure(&rows, d, g, column);
        let plans = prev("plans/s (range)");
        out.push_str(&format!(
            "| {d} | {g} | {:.0} / {} | {} | {:.3} / {} | {:.2} / {} ms | {:.1} / {} | {:.2} / {} |\n",
            r.plans_per_s,
            fmt(plans, 0),
            fmt(plans.map(|p| r.plans_per_s / p), 2),
            r.plans_per_s / pg.tps,
            fmt(prev("plans/s ÷ pgbench TPS"), 3),
            r.latency_ms[2],
            fmt(prev("p99"), 2),
            r.pg_xacts_per_plan,
            fmt(prev("PostgreSQL transactions"), 1),
            r.write_xacts_per_plan,
            fmt(prev("writing transactions"), 2),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The previous run's figures are found by column name, whatever the tables' layout.
    #[test]
    fn previous_figures_are_read_by_column() {
        let section = "- date: 2026-11-25 12:39 UTC\n\n\
            | deployment | grid | processes | plans/s (range) | p50 | p99 |\n|---|---|---|---|---|---|\n\
            | pgbench tpcb-like | - | - | 1216 TPS | x | - |\n\
            | all-in-one | geant2012 (40 sites) | 1 | 909 (903-946) | 8.15 ms | 21.04 ms |\n\
            | role-separated | gridg-w-8 (8 sites) | 11 | 107 (107-107) | 61.50 ms | 248.45 ms |\n\n\
            text\n\n\
            | deployment | grid | planner time p50 / p99 | PostgreSQL transactions |\n|---|---|---|---|\n\
            | all-in-one | geant2012 | 0.49 / 10.35 ms | 1.0 |\n";
        let rows = table_rows(section);
        assert_eq!(previous_figure(&rows, "all-in-one", "geant2012", "plans/s (range)"), Some(909.0));
        assert_eq!(previous_figure(&rows, "role-separated", "gridg-w-8", "p99"), Some(248.45));
        assert_eq!(previous_figure(&rows, "all-in-one", "geant2012", "PostgreSQL transactions"), Some(1.0));
        assert_eq!(previous_figure(&rows, "all-in-one", "gridg-w-8", "p99"), None);
        assert_eq!(previous_figure(&rows, "all-in-one", "geant2012", "writing transactions"), None);
    }
}
