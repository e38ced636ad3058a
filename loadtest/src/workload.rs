//! The grids (Geant2012 and a small GridG-style grid) and their SDSC-BLUE-derived workflow
//! requests, serialised once and stamped with a round's times on the way out.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use chrono::{DateTime, SecondsFormat, Utc};
use coreserve::grid::{gridg, import_graphml, save_grid, GridgParams, GridgVariant, ImportOptions};
use coreserve::model::{Grid, PlanRequest};
use coreserve::workload::{generate, procs_of, read_swf, AppKind, WorkloadParams};

use crate::settings::{OFFERED_LOAD, POOL, W_INTERVAL_S};

pub(crate) struct Scenario {
    pub(crate) label: &'static str,
    pub(crate) grid: Grid,
    pub(crate) path: PathBuf,
    pub(crate) workload: Arc<Workload>,
}

/// One request without its times: the rest of its body is serialised once.
pub(crate) struct Item {
    pub(crate) id: String,
    pub(crate) user: usize,
    /// Arrival in the trace's timeline, seconds after the first request.
    pub(crate) offset_s: i64,
    /// `deadline - submitted_at - w_interval`: the time the plan has after `not_before`.
    pub(crate) window_s: i64,
    /// `"jobs":[...],"transfers":[...]`.
    pub(crate) demands: String,
}

pub(crate) struct Workload {
    pub(crate) items: Vec<Item>,
    pub(crate) users: Vec<String>,
    /// The trace timeline's length plus one mean gap: what each further pass adds.
    pub(crate) span_s: i64,
}

impl Workload {
    /// The requests of `reqs` (ordered by `submitted_at`), each `not_before` its arrival's
    /// offset after a round's base, its deadline leaving its window.
    pub(crate) fn new(reqs: &[PlanRequest]) -> Result<Self> {
        let first = reqs.first().context("no requests")?.submitted_at();
        let mut users: Vec<String> = Vec::new();
        let mut items = Vec::with_capacity(reqs.len());
        for r in reqs {
            let user = match users.iter().position(|u| u == r.user()) {
                Some(i) => i,
                None => {
                    users.push(r.user().to_owned());
                    users.len() - 1
                }
            };
            let demands = format!(
                "\"jobs\":{},\"transfers\":{}",
                serde_json::to_string(r.jobs())?,
                serde_json::to_string(r.transfers())?
            );
            items.push(Item {
                id: r.id().to_owned(),
                user,
                offset_s: r.submitted_at() - first,
                window_s: r.deadline() - r.submitted_at() - W_INTERVAL_S,
                demands,
            });
        }
        let last = items.last().map_or(0, |i| i.offset_s);
        let span_s = last + last / items.len().max(1) as i64 + 1;
        Ok(Workload { items, users, span_s })
    }

    /// Request `i` (wrapping over the pool, one span later per pass) for a round whose timeline
    /// starts at `base` (Unix seconds): its user's index and its body.
    pub(crate) fn body(&self, i: usize, base: i64) -> (usize, String) {
        let (pass, item) = (i / self.items.len(), &self.items[i % self.items.len()]);
        let not_before = base + pass as i64 * self.span_s + item.offset_s;
        let deadline = not_before + item.window_s;
        let body = format!(
            "{{\"id\":\"{}-{pass}\",\"not_before\":\"{}\",\"deadline\":\"{}\",{}}}",
            item.id,
            rfc3339(not_before),
            rfc3339(deadline),
            item.demands
        );
        (item.user, body)
    }
}

/// Unix seconds `t` in RFC 3339 (UTC, whole seconds).
pub(crate) fn rfc3339(t: i64) -> String {
    DateTime::<Utc>::from_timestamp(t, 0).expect("a valid time").to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The small GridG-style grid (`gridg-w`, seed 1): 2 WAN routers x 2 MAN x 1 LAN x 2 hosts, so 8
/// sites, 8 LIS processes in the separated mode.
pub(crate) fn small_grid() -> Grid {
    let small_params =
        GridgParams { wan_nodes: 2, man_per_wan: 2, lan_per_man: 1, hosts_per_lan: 2, ..Default::default() };
    gridg(GridgVariant::Wide, 1, &small_params)
}

pub(crate) fn scenarios(data: &Path, dir: &Path) -> Result<Vec<Scenario>> {
    let trace = data.join("swf/SDSC-BLUE-2000-4.2-cln.swf.gz");
    let topology = data.join("topology-zoo/Geant2012.graphml");
    let cpus = procs_of(&read_swf(&trace).with_context(|| format!("reading {}", trace.display()))?);
    let xml = std::fs::read_to_string(&topology).with_context(|| format!("reading {}", topology.display()))?;
    let geant = import_graphml(&xml, &ImportOptions { seed: 1, ..Default::default() })?;
    let small = small_grid();
    let mut out = Vec::new();
    for (label, grid) in [("geant2012", geant), ("gridg-w-8", small)] {
        let path = dir.join(format!("{label}.json"));
        save_grid(&grid, &path)?;
        let params = WorkloadParams {
            requests: POOL,
            load: OFFERED_LOAD,
            seed: 1,
            w_interval_s: W_INTERVAL_S,
            ..WorkloadParams::for_kind(AppKind::Workflow)
        };
        let reqs = generate(&cpus, grid.total_cpus(), &params)?;
        let workload = Arc::new(Workload::new(&reqs)?);
        eprintln!(
            "{label}: {} sites, {} links, {} CPUs; {} workflow requests over {:.1} days of trace time",
            grid.sites().len(),
            grid.links().len(),
            grid.total_cpus(),
            reqs.len(),
            workload.span_s as f64 / 86_400.0
        );
        out.push(Scenario { label, grid, path, workload });
    }
    Ok(out)
}
