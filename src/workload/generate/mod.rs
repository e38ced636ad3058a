//! Synthetic plan-request workloads following the paper's experiment (Ando & Aida, section 4,
//! Table 1; see docs/simulator.md).
//!
//! Every request is one application (a workflow or a co-allocation) whose shape is a small graph
//! of jobs ([`Shape`]). Per compute demand: OS `linux:solaris:bsd = 1:1:1`, CPU count drawn from
//! an SWF trace's processor counts modelled into `[8, 128]` ([`CpuModel`]), duration
//! `600:1200:1800:3600:5400:7200 s = 2:2:2:2:1:1`. Per network demand: bandwidth
//! `500:1000:2000 Mbit/s = 6:3:1`, duration from the same duration distribution. Deadline:
//! `submitted_at + w_interval + span * f`, `f ~ Normal(5, 1.02)` (95 % in `[3, 7]`). Arrivals are
//! Poisson with the rate that makes the offered load equal to [`WorkloadParams::load`].
//!
//! # Random streams (independent, as the Bricks simulator taught; docs/simulator.md)
//! Every random component has its own ChaCha8 stream, derived from one seed with
//! [`ChaCha8Rng::set_stream`](rand_chacha::ChaCha8Rng::set_stream): arrivals (1), CPU counts
//! (2), job durations (3), transfer durations (4), OS (5), bandwidths (6), deadline factors (7),
//! users (8). The number of draws a request takes from each stream depends only on the shape,
//! so changing `load` changes only the arrival times (and with them the absolute deadlines, by
//! the same shift), and generating more requests keeps the demands of the first ones.
//!
//! Files: `params.rs` (kinds, shapes, [`WorkloadParams`]), `streams.rs` (the random streams),
//! this file (the generation), `jsonl.rs` (request files), `error.rs` ([`WorkloadError`]).

mod error;
mod jsonl;
mod params;
mod requirements;
mod streams;

use rand::distributions::Distribution;
use rand::Rng;
use rand_distr::{Exp, Normal};

pub use error::WorkloadError;
pub use jsonl::{parse_jsonl, read_jsonl, write_jsonl, write_jsonl_to};
pub use params::{AppKind, CpuModel, Shape, WorkloadParams, DEFAULT_START};
pub use requirements::RequirementsProfile;
use streams::{rng, stream, Weighted};

use crate::model::{from_time, ComputeDemand, NetworkDemand, PlanRequest, RawPlanRequest};

/// The trace's processor counts modelled into `range` (see [`CpuModel`]); the generator samples
/// this list uniformly, so its empirical distribution is the CPU-count distribution.
///
/// # Errors
/// [`WorkloadError::EmptyTrace`] for an empty list; [`WorkloadError::NoCpusInRange`] when
/// [`CpuModel::Discard`] leaves nothing.
pub fn model_cpus(trace_cpus: &[u32], range: (u32, u32), model: CpuModel) -> Result<Vec<u32>, WorkloadError> {
    if trace_cpus.is_empty() {
        return Err(WorkloadError::EmptyTrace);
    }
    let (lo, hi) = range;
    let pool: Vec<u32> = match model {
        CpuModel::Clamp => trace_cpus.iter().map(|&c| c.clamp(lo, hi)).collect(),
        CpuModel::Discard => trace_cpus.iter().copied().filter(|c| (lo..=hi).contains(c)).collect(),
    };
    if pool.is_empty() {
        return Err(WorkloadError::NoCpusInRange { min: lo, max: hi });
    }
    Ok(pool)
}

/// The demands of one request before its arrival time is known.
struct Demands {
    user: String,
    jobs: Vec<ComputeDemand>,
    transfers: Vec<NetworkDemand>,
    factor: f64,
}

/// Generates `params.requests` plan requests (Ando & Aida, section 4; docs/simulator.md).
///
/// - `trace_cpus`: processor counts of an SWF trace (e.g. [`super::swf::procs_of`] of
///   SDSC-BLUE), modelled into `params.cpu_range` by [`model_cpus`] and sampled uniformly.
/// - `total_cpus`: CPUs of the whole grid, the denominator of the offered load.
///
/// Timing of a **co-allocation**: one duration `d` is drawn; every job and transfer has offset 0
/// and duration `d`. Timing of a **workflow** (jobs in index order, a topological order):
/// durations `d_v` are drawn per job and `t_uv` per transfer, `t_uv` capped at `min(d_u, d_v)`;
/// a job without predecessors has offset 0; otherwise `offset(v) = min over predecessors u of
/// (end_u - t_uv)`, and the transfer `u->v` occupies `[end_u - t_uv, end_u)` (it ends when its
/// sender ends). If some predecessor ends after `offset(v) + d_v`, `d_v` is extended to that
/// end, so every transfer lies inside both of its jobs. All offsets are relative to the
/// application start.
///
/// Deadline: `submitted_at + w_interval_s + round(span * f)`, `span` the latest job end offset,
/// `f ~ Normal(deadline_factor_mean, deadline_factor_sd)` clamped to `>= deadline_factor_min`.
///
/// Arrivals: Poisson with rate `lambda = load * total_cpus / mean cpu-seconds per request`, the
/// mean taken over the generated requests, so the expected requested CPU-seconds per second is
/// `load * total_cpus`. The first request arrives at `start`; exponential inter-arrival gaps are
/// accumulated in real numbers and each arrival time rounded to whole seconds (no rounding drift).
/// Ids are `req-000001`, `req-000002`, ...; users `user-1`..`user-N` drawn uniformly.
///
/// Deterministic: the same arguments give the same output. Each random component has its own
/// stream (module documentation), so `load` changes only the arrival times.
///
/// # Errors
/// Parameter, shape and trace errors ([`WorkloadError`]); `requests == 0` gives an empty list.
pub fn generate(
    trace_cpus: &[u32],
    total_cpus: u64,
    params: &WorkloadParams,
) -> Result<Vec<PlanRequest>, WorkloadError> {
    params.validate()?;
    let pool = model_cpus(trace_cpus, params.cpu_range, params.cpu_model)?;
    if total_cpus == 0 {
        return Err(WorkloadError::ZeroTotalCpus);
    }
    if params.requests == 0 {
        return Ok(vec![]);
    }
    let shape = params.effective_shape();
    let (n, edges) = (shape.jobs(), shape.edges());
    let names: Vec<String> = (0..n).map(|i| Shape::job_name(i, n)).collect();

    let seed = params.seed;
    let mut r_cpus = rng(seed, stream::CPUS);
    let mut r_jdur = rng(seed, stream::JOB_DURATIONS);
    let mut r_tdur = rng(seed, stream::TRANSFER_DURATIONS);
    let mut r_os = rng(seed, stream::OS);
    let mut r_bw = rng(seed, stream::BANDWIDTHS);
    let mut r_factor = rng(seed, stream::DEADLINE_FACTORS);
    let mut r_users = rng(seed, stream::USERS);
    let mut r_arrivals = rng(seed, stream::ARRIVALS);
    let mut r_requires = rng(seed, stream::REQUIREMENTS);

    let os = Weighted::new(&params.os);
    let durations = Weighted::new(&params.durations_s);
    let bandwidths = Weighted::new(&params.bandwidths_mbps);
    let factor = Normal::new(params.deadline_factor_mean, params.deadline_factor_sd)
        .map_err(|e| WorkloadError::BadParam { name: "deadline_factor_sd", reason: e.to_string() })?;

    let mut all = Vec::with_capacity(params.requests);
    for _ in 0..params.requests {
        let user = format!("user-{}", r_users.gen_range(1..=params.users));
        let oses: Vec<String> = (0..n).map(|_| os.sample(&mut r_os)).collect();
        let cpus: Vec<u32> = (0..n).map(|_| pool[r_cpus.gen_range(0..pool.len())]).collect();
        let bws: Vec<u64> = edges.iter().map(|_| bandwidths.sample(&mut r_bw)).collect();
        let (offsets, durs, transfer_times) = match params.kind {
            AppKind::Coallocation => {
                let d = durations.sample(&mut r_jdur);
                (vec![0; n], vec![d; n], vec![(0, d); edges.len()])
            }
            AppKind::Workflow => {
                let d: Vec<i64> = (0..n).map(|_| durations.sample(&mut r_jdur)).collect();
                let t: Vec<i64> = edges.iter().map(|_| durations.sample(&mut r_tdur)).collect();
                workflow_timing(d, &edges, &t)
            }
        };
        let jobs = (0..n)
            .map(|i| ComputeDemand {
                name: names[i].clone(),
                os: oses[i].clone(),
                cpus: cpus[i],
                offset_s: Some(offsets[i]),
                duration_s: durs[i],
                after: Vec::new(),
                slack_s: None,
                requires: params.requirements.draw(&mut r_requires),
            })
            .collect();
        let transfers = edges
            .iter()
            .zip(&transfer_times)
            .zip(&bws)
            .map(|((&(u, v), &(offset_s, duration_s)), &bandwidth_mbps)| {
                NetworkDemand::new(&names[u], &names[v], bandwidth_mbps, offset_s, duration_s)
            })
            .collect();
        let f = factor.sample(&mut r_factor).max(params.deadline_factor_min);
        all.push(Demands { user, jobs, transfers, factor: f });
    }

    let cpu_seconds = |d: &Demands| d.jobs.iter().map(|j| f64::from(j.cpus) * j.duration_s as f64).sum::<f64>();
    let mean = all.iter().map(cpu_seconds).sum::<f64>() / all.len() as f64;
    let lambda = params.load * total_cpus as f64 / mean;
    let gap = Exp::new(lambda).map_err(|e| WorkloadError::BadParam { name: "load", reason: e.to_string() })?;

    let mut t = 0.0f64;
    let mut out = Vec::with_capacity(all.len());
    for (i, d) in all.into_iter().enumerate() {
        if i > 0 {
            t += gap.sample(&mut r_arrivals);
        }
        let submitted = params.start + t.round() as i64;
        let span = d.jobs.iter().map(|j| j.offset_s.unwrap_or(0) + j.duration_s).max().unwrap_or(0);
        let deadline = submitted + params.w_interval_s + (span as f64 * d.factor).round() as i64;
        let id = format!("req-{:06}", i + 1);
        let raw = RawPlanRequest {
            id: id.clone(),
            user: d.user,
            submitted_at: from_time(submitted),
            deadline: from_time(deadline),
            not_before: None,
            jobs: d.jobs,
            transfers: d.transfers,
            policy: None,
            method: None,
            dependency_gap_s: 0,
            slack_s: 0,
        };
        out.push(PlanRequest::new(raw).map_err(|source| WorkloadError::Invalid { id, source })?);
    }
    Ok(out)
}

/// Workflow offsets (see [`generate`]): returns `(job offsets, job durations (possibly
/// extended), (offset, duration) of every transfer)`. `edges` must point forward (`u < v`).
fn workflow_timing(
    mut dur: Vec<i64>,
    edges: &[(usize, usize)],
    t_drawn: &[i64],
) -> (Vec<i64>, Vec<i64>, Vec<(i64, i64)>) {
    let n = dur.len();
    let mut offset = vec![0i64; n];
    let mut t_eff = vec![0i64; edges.len()];
    for v in 0..n {
        let mut start: Option<i64> = None;
        let mut latest_pred_end = 0i64;
        for (k, &(u, _)) in edges.iter().enumerate().filter(|(_, e)| e.1 == v) {
            let end_u = offset[u] + dur[u];
            let t = t_drawn[k].min(dur[u]).min(dur[v]);
            t_eff[k] = t;
            start = Some(start.map_or(end_u - t, |s| s.min(end_u - t)));
            latest_pred_end = latest_pred_end.max(end_u);
        }
        if let Some(s) = start {
            offset[v] = s;
            if s + dur[v] < latest_pred_end {
                dur[v] = latest_pred_end - s;
            }
        }
    }
    let transfers = edges.iter().zip(&t_eff).map(|(&(u, _), &t)| (offset[u] + dur[u] - t, t)).collect();
    (offset, dur, transfers)
}

#[cfg(test)]
mod tests;
