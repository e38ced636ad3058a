//! The report: the summary lines printed at the end and the Markdown section of BENCHMARKS.md.

use crate::database::Pgbench;
use crate::deploy::Mode;
use crate::drive::RoundResult;
use crate::settings::{Settings, BASE_MARGIN_S, OFFERED_LOAD, TARGET_P99_MS, TARGET_PLANS_PER_S};

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

    fn target(&self) -> String {
        if self.mode != Mode::AllInOne {
            return "-".into();
        }
        let m = self.median();
        let met = m.plans_per_s >= TARGET_PLANS_PER_S && m.latency_ms[2] <= TARGET_P99_MS && m.errors() == 0;
        format!(
            ">= {TARGET_PLANS_PER_S:.0} plans/s, p99 <= {TARGET_P99_MS:.0} ms {}",
            if met { "(met)" } else { "(MISSED)" }
        )
    }
}

pub(crate) fn summary_line(m: &Measured, pg: &Pgbench) -> String {
    let r = m.median();
    let (lo, hi) = m.range();
    let reasons: Vec<String> = r.reasons.iter().map(|(k, v)| format!("{v} {k}")).collect();
    let errors: Vec<String> = r.errors.iter().map(|(k, v)| format!("{v} {k}")).collect();
    format!(
        "{} on {} ({}): {:.0} plans/s (rounds {:.0}-{:.0}), ratio to pgbench {:.3}; latency p50 {:.2} ms, p90 {:.2} ms, \
         p99 {:.2} ms, max {:.2} ms (in the planner: p50 {:.2} ms, p99 {:.2} ms); {} committed, {} rejected (commit rate {:.3}{}{}), errors {}; per plan {:.0} messages, {:.1} holds aborted, \
         {:.1} PostgreSQL transactions; CPU in cores: {}; server log warnings {}",
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
        r.holds_aborted_per_plan,
        r.pg_xacts_per_plan,
        r.cpu.describe(),
        r.problems
    )
}

/// The section of BENCHMARKS.md below its heading (machine, command, date).
pub(crate) fn markdown(s: &Settings, pg_info: &str, pg: &Pgbench, measured: &[Measured]) -> String {
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
            m.target()
        ));
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
        "\nPer plan: the planner's own time, its participant messages and aborted holds (means), PostgreSQL \
         transactions in the deployment's database (commits and rollbacks, read-only ones included), CPU time.\n\n\
         | deployment | grid | planner time p50 / p99 | messages | holds aborted | PostgreSQL transactions | CPU \
         coreserve / PostgreSQL |\n|---|---|---|---|---|---|---|\n",
    );
    for m in measured {
        let r = m.median();
        let per_plan = |cores: f64| cores / r.plans_per_s.max(f64::MIN_POSITIVE) * 1e3;
        body.push_str(&format!(
            "| {} | {} | {:.2} / {:.2} ms | {:.0} | {:.1} | {:.1} | {:.2} / {:.2} ms |\n",
            m.mode.name(),
            m.scenario,
            r.planning_ms[0],
            r.planning_ms[1],
            r.messages_per_plan,
            r.holds_aborted_per_plan,
            r.pg_xacts_per_plan,
            per_plan(r.cpu.coreserve()),
            per_plan(r.cpu.postgres)
        ));
    }
    body
}
