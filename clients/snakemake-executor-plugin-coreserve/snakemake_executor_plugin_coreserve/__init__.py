"""Snakemake executor plugin `coreserve`: the whole DAG booked in advance through a coreserve
service, every job run on its site's Slurm cluster inside its reservation.

Built on `snakemake-executor-plugin-slurm`: the sbatch command line, its settings and its job
status codes are that plugin's; this one adds, per job, the site's `SLURM_CONF`, the reservation
the plan gave it (`--reservation`, looked up at submit time, so a modified or re-planned job goes
where the plan says now) and a time limit that ends with the reservation. Before the first job
it books the DAG (`--coreserve-request FILE` from `coreserve workflow import`, or the DAG itself:
each job's threads, `runtime_s` / `runtime` and the `output_mb` it hands its successors); while
jobs run it extends a job that nears its booked end (and moves what depends on it), re-plans what
has not started when the plan breaks, and at the end, or on failure, cancels what is left.

Settings (`--coreserve-NAME` flags, or a profile's `coreserve-NAME:`): `url`, `token`
(also `CORESERVE_URL`, `CORESERVE_TOKEN`), `clusters` (`SITE=SLURM_CONF,...`), `request`,
`os`, `deadline_s`, `gap_s`, `slack_s`, `extend_before_s`, `extend_by_s`, `bandwidth_mbps`.
The engine author's guide is docs/engines.md of the coreserve repository.
"""


import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Generator, List, Optional

import snakemake_executor_plugin_slurm as slurm
from snakemake_executor_plugin_slurm import Executor as SlurmExecutor
from snakemake_executor_plugin_slurm import ExecutorSettings as SlurmExecutorSettings
from snakemake_interface_common.exceptions import WorkflowError
from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo
from snakemake_interface_executor_plugins.jobs import JobExecutorInterface
from snakemake_interface_executor_plugins.settings import CommonSettings

from .broker import Broker, BrokerError
from .plan import (
    DagJob,
    Placement,
    early_end,
    extension,
    extension_due,
    job_name,
    placements,
    replan_request,
    request_from_dag,
    slack_for,
    widest_level,
)

__all__ = ["Executor", "ExecutorSettings", "common_settings"]


def _setting(help: str, default=None):
    return field(default=default, metadata={"help": help, "env_var": False, "required": False})


@dataclass
class ExecutorSettings(SlurmExecutorSettings):
    """The Slurm executor's settings, and coreserve's."""

    url: Optional[str] = _setting("The coreserve service's base URL (default: $CORESERVE_URL).")
    token: Optional[str] = _setting("Bearer token for the service (default: $CORESERVE_TOKEN).")
    clusters: Optional[str] = _setting(
        "Each site's Slurm cluster, SITE=SLURM_CONF[,SITE=SLURM_CONF...]: a job booked at SITE is "
        "submitted with that SLURM_CONF."
    )
    request: Optional[str] = _setting(
        "Book this plan request (JSON, e.g. from `coreserve workflow import`) instead of one made "
        "from the DAG; Snakemake jobs are matched to its jobs by the `coreserve_job` resource."
    )
    os: str = _setting("Every job's operating system, when booking from the DAG.", "linux")
    deadline_s: int = _setting("The plan's deadline, seconds from now.", 86400)
    gap_s: Optional[int] = _setting(
        "dependency_gap_s: seconds kept between a job's end and its successors' start. Default: "
        "the status check interval + 1 s (a successor is submitted while its predecessor's slack "
        "runs, and waits for its reservation)."
    )
    slack_s: Optional[int] = _setting(
        "slack_s: seconds reserved after each job's run. Default: measured (a probe job's "
        "submit-to-start time + 2 x Snakemake's start-up inside a job, at least 3 s more, + "
        "the margin before its end that spares a job on time an extension: 2 s + the status "
        "check interval + 1 s)."
    )
    extend_before_s: int = _setting("Extend a running job this many seconds before its booked end.", 10)
    extend_by_s: int = _setting(
        "Each extension adds at least this many seconds (more for a job that started too late to "
        "end in time) and pushes the successors that no longer fit later.",
        30,
    )
    bandwidth_mbps: int = _setting("Bandwidth of the staged transfers booked from `output_mb`.", 1000)


common_settings = CommonSettings(
    non_local_exec=True,
    implies_no_shared_fs=False,
    job_deploy_sources=False,
    pass_default_storage_provider_args=True,
    pass_default_resources_args=True,
    pass_envvar_declarations_to_cmd=False,
    auto_deploy_default_storage_provider=False,
    init_seconds_before_status_checks=1,
)

# A job Slurm holds once the reservation it waits in is gone ("Reservation ... was deleted").
HELD = {"RESV_DEL_HOLD"}

FAILED = {"BOOT_FAIL", "CANCELLED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT", "PREEMPTED"}

# The executor whose plan routes sbatch calls (one per Snakemake process).
_ACTIVE: Optional["Executor"] = None
_slurm_submit_command = slurm.get_submit_command


def _routed_submit_command(job, params, **kwargs) -> str:
    """The Slurm plugin's sbatch command, sent to the job's site's cluster and reservation."""
    call = _slurm_submit_command(job, params, **kwargs)
    return _ACTIVE.route(job, call) if _ACTIVE is not None else call


# The Slurm plugin's run_job builds its command through this module-level name.
slurm.get_submit_command = _routed_submit_command


@dataclass
class Probe:
    """What a probe job measured on a cluster: seconds from sbatch to start, and from start to
    end of a one-rule workflow run as a job runs its rule (`python -m snakemake --executor
    local --jobs 1`: Snakemake's start-up inside a job, the rule itself doing nothing)."""

    start_latency_s: float
    startup_s: float


def _slurm(conf: str, args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, SLURM_CONF=conf)
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)


def _scontrol_job(conf: str, jobid: str) -> dict[str, str]:
    out = _slurm(conf, ["scontrol", "show", "job", "-o", jobid]).stdout
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)


def _slurm_time(s: str) -> Optional[datetime]:
    try:
        return datetime.fromisoformat(s).astimezone(UTC) if s and s not in ("Unknown", "None") else None
    except ValueError:
        return None


PROBE_SNAKEFILE = 'rule probe:\n    shell: "true"\n'

# At most this many probe jobs at once per cluster.
PROBES_AT_ONCE = 4

# The time an extension (a PATCH) takes, as a job's expected end must leave it: about 0.1-2 s
# for a job with few successors (the service changes a plan's Slurm reservations together, a
# few scontrol calls each: docs/engines.md). Not learnt from the extensions made.
EXTENSION_S = 1

# A job that ended early gives back the rest of its reservation, which then ends this many
# seconds from now (`early_end`): the time the change takes to reach the service, which refuses
# to end a started reservation in the past.
EARLY_END_LEAD_S = 3

# How many times a job whose sbatch Slurm refused for its reservation is submitted again: the
# service may be moving that reservation to other cores (make room for a running job) at that
# instant, and it exists again, under its name, a moment later.
RESUBMITS = 3


def probe(conf: str, python: str, jobs: int, timeout_s: float = 90) -> Optional[Probe]:
    """Submits `jobs` probe jobs at once to the cluster of `conf` (as many as the workflow
    starts at once, at most a few: Snakemake start-ups that share a node's cores take longer)
    and measures them: the slowest's submit-to-start and start-up, None if none ran. Each runs
    a one-rule Snakefile in a directory of its own (under the working directory: a job's node
    sees it, as it sees the workflow's)."""
    dirs = [tempfile.mkdtemp(prefix=".coreserve-probe.", dir=os.getcwd()) for _ in range(max(1, jobs))]
    try:
        submitted = []
        for workdir in dirs:
            with open(os.path.join(workdir, "Snakefile"), "w") as f:
                f.write(PROBE_SNAKEFILE)
            run = f"{python} -m snakemake -s Snakefile -d {shlex.quote(workdir)} --executor local --jobs 1 --quiet all"
            submitted.append(_slurm(conf, ["sbatch", "--parsable", "-n", "1", "-o", "/dev/null", "-D", workdir, "--wrap", run]))
        measured = [p for p in (_probe_result(conf, r, timeout_s) for r in submitted) if p is not None]
        if not measured:
            return None
        return Probe(max(p.start_latency_s for p in measured), max(p.startup_s for p in measured))
    finally:
        for workdir in dirs:
            shutil.rmtree(workdir, ignore_errors=True)


def _probe_result(conf: str, r: subprocess.CompletedProcess, timeout_s: float) -> Optional[Probe]:
    if r.returncode != 0:
        return None
    jobid = r.stdout.strip().split(";")[0]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = _scontrol_job(conf, jobid)
        if info.get("JobState") in ("COMPLETED", "FAILED"):
            sub, start, end = (_slurm_time(info.get(k, "")) for k in ("SubmitTime", "StartTime", "EndTime"))
            if sub and start and end:
                return Probe((start - sub).total_seconds(), (end - start).total_seconds())
            return None
        time.sleep(0.5)
    _slurm(conf, ["scancel", jobid])
    return None


class Executor(SlurmExecutor):
    def __init__(self, workflow, logger):
        settings = workflow.executor_settings
        self.clusters = self._parse_clusters(settings.clusters)
        # The Slurm plugin's own calls (sinfo, scontrol show config) go to the first cluster.
        if self.clusters and "SLURM_CONF" not in os.environ:
            os.environ["SLURM_CONF"] = next(iter(self.clusters.values()))
        url = settings.url or os.environ.get("CORESERVE_URL")
        token = settings.token or os.environ.get("CORESERVE_TOKEN")
        if not url or not token:
            raise WorkflowError("coreserve: set --coreserve-url and --coreserve-token (or CORESERVE_URL, CORESERVE_TOKEN)")
        self.broker = Broker(url, token)
        self.lock = threading.Lock()
        self.request: Optional[dict] = None
        self.plans: dict[str, dict] = {}  # plan id -> the plan as last read
        self.where: dict[str, Placement] = {}  # job name -> its placement now
        self.submitted: dict[str, tuple[str, str]] = {}  # job name -> (site, Slurm job id)
        self.startup_s = 5.0  # Snakemake's start-up inside a job (measured by the probe)
        self.overhead_s = 0.0  # the most a finished job ran beyond its duration_s
        self.resubmits: dict[str, int] = {}  # job name -> sbatch calls refused for its reservation
        self.refused_at: dict[str, float] = {}  # job name -> when an extension was last refused
        self.finished: set[str] = set()
        self.last_plan_check = 0.0
        super().__init__(workflow, logger)

    @staticmethod
    def _parse_clusters(spec: Optional[str]) -> dict[str, str]:
        clusters = {}
        for part in (spec or "").split(","):
            if part.strip():
                site, sep, conf = part.partition("=")
                if not sep or not site.strip() or not conf.strip():
                    raise WorkflowError(f"coreserve: --coreserve-clusters `{part}`: write SITE=SLURM_CONF")
                clusters[site.strip()] = conf.strip()
        return clusters

    # ---- the Slurm plugin's hooks ----

    def additional_general_args(self):
        # The job runs inside its allocation as a local Snakemake: the Slurm jobstep executor
        # (0.6.1) drops SLURM_CONF before its nested srun, which then finds no cluster.
        return "--executor local --jobs 1"

    def get_partition_arg(self, job: JobExecutorInterface):
        return ""  # the reservation names the partition

    def get_account_arg(self, job: JobExecutorInterface):
        if job.resources.get("slurm_account"):
            yield from super().get_account_arg(job)
        else:
            yield ""  # no guess against another cluster's accounting

    def run_jobs(self, jobs: List[JobExecutorInterface]):
        global _ACTIVE
        if self.request is None:
            self.book()
            _ACTIVE = self
        super().run_jobs(jobs)

    def route(self, job: JobExecutorInterface, call: str) -> str:
        """The sbatch command for `job`: its site's SLURM_CONF, reservation and time limit."""
        name = self.name_of(job)
        with self.lock:
            p = self.where.get(name)
        if p is None:
            raise WorkflowError(f"coreserve: job `{name}` is not in the plan")
        conf = self.clusters.get(p.site)
        if conf is None:
            raise WorkflowError(f"coreserve: job `{name}` is booked at site {p.site}, which --coreserve-clusters does not name")
        minutes = max(1, math.ceil((p.end - datetime.now(UTC)).total_seconds() / 60))
        with self.lock:
            self.submitted[name] = (p.site, "")
        return f"SLURM_CONF={shlex.quote(conf)} {call} --reservation={shlex.quote(p.reservation or '')} --time={minutes}"

    def _report_job_error_threadsafe(self, job_info: SubmittedJobInfo, msg: str):
        """A job whose sbatch Slurm refused for its reservation ("Problem using reservation")
        is submitted again, at most RESUBMITS times, 2 s apart; any other error is the Slurm
        plugin's."""
        name = self.name_of(job_info.job)
        with self.lock:
            tries = self.resubmits.get(name, 0)
            again = "Problem using reservation" in (msg or "") and tries < RESUBMITS
            if again:
                self.resubmits[name] = tries + 1
        if not again:
            super()._report_job_error_threadsafe(job_info, msg)
            return
        self.logger.warning(f"coreserve: Slurm refused `{name}` into its reservation; submitting it again in 2 s")
        time.sleep(2)
        self.run_job(job_info.job)

    def _report_job_submission_threadsafe(self, job_info: SubmittedJobInfo):
        name = self.name_of(job_info.job)
        with self.lock:
            site = self.submitted.get(name, ("", ""))[0]
            self.submitted[name] = (site, job_info.external_jobid or "")
        super()._report_job_submission_threadsafe(job_info)

    async def check_active_jobs(
        self, active_jobs: List[SubmittedJobInfo]
    ) -> Generator[SubmittedJobInfo, None, None]:
        states = await self.status_rate_limited(active_jobs)
        due: dict[str, dict[str, tuple[int, str, datetime]]] = {}  # plan id -> job -> (by_s, Slurm id, start)
        completed: dict[str, SubmittedJobInfo] = {}
        for info in active_jobs:
            name = self.name_of(info.job)
            state, started, ended = states.get(name, (None, None, None))
            if state == "COMPLETED":
                with self.lock:
                    self.finished.add(name)
                    self.learn_overhead(name, started, ended)
                completed[name] = info
            elif state in FAILED:
                with self.lock:
                    self.finished.add(name)
                self.report_job_error(info, msg=f"coreserve: Slurm job {info.external_jobid} of `{name}` ended {state}")
            elif state in HELD:
                self.rebook(info, state)
            else:
                if state == "RUNNING" and started is not None:
                    self.note_if_due(due, name, info.external_jobid, started)
                yield info
        for plan_id, jobs in due.items():
            self.extend(plan_id, jobs)
        # Their dependants are submitted once Snakemake hears of the ends: after the change that
        # starts them earlier, so that none waits in a reservation while it changes.
        self.follow_early_ends(set(completed))
        for info in completed.values():
            self.report_job_success(info)
        self.replan_if_broken()

    async def status_rate_limited(
        self, active_jobs: List[SubmittedJobInfo]
    ) -> dict[str, tuple[str, Optional[datetime], Optional[datetime]]]:
        """Each active job's Slurm state, start and end (`squeue -t all`), one query per
        cluster."""
        by_site: dict[str, dict[str, str]] = {}
        for info in active_jobs:
            name = self.name_of(info.job)
            with self.lock:
                site = self.submitted.get(name, ("", ""))[0]
            by_site.setdefault(site, {})[info.external_jobid] = name
        states: dict[str, tuple[str, Optional[datetime], Optional[datetime]]] = {}
        for site, ids in by_site.items():
            conf = self.clusters.get(site)
            if conf is None:
                continue
            async with self.status_rate_limiter:
                r = _slurm(conf, ["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", "%i|%T|%S|%e"])
            for line in r.stdout.splitlines():
                jobid, state, start, end = (line.split("|") + ["", "", ""])[:4]
                if jobid in ids:
                    states[ids[jobid]] = (state.strip(), _slurm_time(start.strip()), _slurm_time(end.strip()))
        return states

    def cancel_jobs(self, active_jobs: List[SubmittedJobInfo]):
        """scancel on each job's own cluster (Slurm job ids repeat across clusters)."""
        by_site: dict[str, list[str]] = {}
        for info in active_jobs:
            with self.lock:
                site = self.submitted.get(self.name_of(info.job), ("", ""))[0]
            if info.external_jobid and site in self.clusters:
                by_site.setdefault(site, []).append(info.external_jobid)
        for site, ids in by_site.items():
            _slurm(self.clusters[site], ["scancel", *ids])

    def shutdown(self) -> None:
        try:
            super().shutdown()
        finally:
            self.cancel_plans()

    def cancel(self):
        try:
            super().cancel()
        finally:
            self.cancel_plans()

    # ---- the plan ----

    def name_of(self, job: JobExecutorInterface) -> str:
        """The plan's name of a Snakemake job: its `coreserve_job` resource, else the rule and
        wildcards."""
        named = job.resources.get("coreserve_job")
        if named:
            return str(named)
        wildcards = getattr(job, "wildcards", None)
        return job_name(job.name, dict(wildcards.items()) if wildcards else {})

    def dag_jobs(self) -> list[DagJob]:
        """The jobs Snakemake will run, as the plan's jobs."""
        dag = self.workflow.dag
        needrun = [j for j in dag.needrun_jobs() if not j.is_norun]
        if any(j.is_group() for j in needrun):
            raise WorkflowError("coreserve: group jobs are not supported (book each job of the group)")
        names = {j: self.name_of(j) for j in needrun}
        jobs = []
        for j in needrun:
            res = j.resources
            duration_s = res.get("runtime_s") or (res.get("runtime") or 0) * 60
            if not duration_s:
                raise WorkflowError(f"coreserve: job `{names[j]}` has no runtime_s (or runtime, minutes) resource")
            after = sorted({names[d] for d in dag.dependencies[j] if d in names})
            jobs.append(DagJob(names[j], int(j.threads), int(duration_s), after, res.get("output_mb")))
        return jobs

    def engine_room(self) -> tuple[int, int]:
        """(dependency_gap_s, slack_s): the settings, else from a probe job on every cluster
        (the slowest counts). A job waits in Slurm for its reservation and starts late by
        submit-to-start + Snakemake's start-up: slack = that + the margin a job that is not
        extended keeps before its booked end + start-up again for the variance (`slack_for`).
        Its successor is submitted when the engine sees it end
        (a status check later), while its slack still runs, and waits for its own reservation:
        gap = the status check interval + 1 s for sbatch. A level of the DAG costs its run time
        + slack + gap (docs/engines.md)."""
        s = self.workflow.executor_settings
        if s.gap_s is not None and s.slack_s is not None:
            return s.gap_s, s.slack_s
        try:
            at_once = min(PROBES_AT_ONCE, widest_level(self.dag_jobs()))
        except WorkflowError:
            at_once = PROBES_AT_ONCE  # jobs without a runtime: booked from --coreserve-request
        # Every cluster at once, as a wide level runs: clusters that share a machine (two
        # `scripts/slurm-local` clusters) share its cores, and one after the other they would
        # each measure an idle machine.
        with ThreadPoolExecutor(max_workers=max(1, len(self.clusters))) as pool:
            probes = list(pool.map(lambda conf: probe(conf, sys.executable, at_once), self.clusters.values()))
        measured = [p for p in probes if p is not None]
        latency = max((p.start_latency_s for p in measured), default=5.0)
        startup = max((p.startup_s for p in measured), default=10.0)
        interval = self.workflow.remote_execution_settings.seconds_between_status_checks
        self.startup_s = startup
        gap = s.gap_s if s.gap_s is not None else math.ceil(interval + 1)
        slack = s.slack_s if s.slack_s is not None else slack_for(latency, startup, interval, EXTENSION_S)
        self.logger.info(
            f"coreserve: measured submit-to-start {latency:.0f} s, start-up {startup:.0f} s; "
            f"booking dependency_gap_s={gap}, slack_s={slack}"
        )
        return gap, slack

    def book(self) -> None:
        """Books the whole DAG (or --coreserve-request) before the first job is submitted."""
        s = self.workflow.executor_settings
        gap, slack = self.engine_room()
        run = uuid.uuid4().hex[:8]
        if s.request:
            with open(s.request) as f:
                request = json.load(f)
            request = dict(request, id=f"{request.get('id', 'snakemake')}-{run}")
            request.setdefault("dependency_gap_s", gap)
            request.setdefault("slack_s", slack)
            wanted = {self.name_of(j) for j in self.workflow.dag.needrun_jobs() if not j.is_norun}
            missing = wanted - {j["name"] for j in request["jobs"]}
            if missing:
                raise WorkflowError(f"coreserve: the request has no job for {sorted(missing)[:5]} (coreserve_job resources)")
        else:
            request = request_from_dag(
                self.dag_jobs(),
                request_id=f"snakemake-{run}",
                os=s.os,
                deadline=datetime.now(UTC) + timedelta(seconds=s.deadline_s),
                not_before=None,
                gap_s=gap,
                slack_s=slack,
                bandwidth_mbps=s.bandwidth_mbps,
            )
        began = time.monotonic()
        try:
            plan = self.broker.create_plan(request)
        except BrokerError as e:
            raise WorkflowError(f"coreserve: booking the workflow failed: {e}") from e
        if plan.get("status") != "committed":
            raise WorkflowError(f"coreserve: the workflow was not booked: {plan.get('reason') or plan.get('status')}")
        fp = plan.get("footprint") or {}
        self.logger.info(
            f"coreserve: plan {plan['id']} committed in {time.monotonic() - began:.1f} s: {len(plan['jobs'])} jobs "
            f"from {plan.get('start')}, makespan {fp.get('makespan_s')} s (critical path {fp.get('critical_path_s')} s), "
            f"{fp.get('booked_cpu_s')} CPU-seconds booked"
        )
        with self.lock:
            self.request = request
            self.plans[plan["id"]] = plan
            self.where.update(placements(plan))

    def gap_s(self) -> int:
        """The booked request's `dependency_gap_s` (0 before the booking)."""
        return (self.request or {}).get("dependency_gap_s", 0)

    def duration_of(self, name: str) -> Optional[int]:
        """Job `name`'s `duration_s` in the booked request (None before the booking, or for a
        job it does not have)."""
        jobs = self.request["jobs"] if self.request else []
        return next((j["duration_s"] for j in jobs if j["name"] == name), None)

    def learn_overhead(self, name: str, started: Optional[datetime], ended: Optional[datetime]) -> None:
        """Notes how long finished job `name` ran beyond its `duration_s` (Snakemake's start-up
        in it, as the workflow's jobs really take it): the most so far counts (call under the
        lock)."""
        duration_s = self.duration_of(name)
        if started and ended and duration_s is not None:
            self.overhead_s = max(self.overhead_s, (ended - started).total_seconds() - duration_s)

    def note_if_due(self, due: dict, name: str, jobid: str, started: datetime) -> None:
        """Notes in `due` (by plan) running job `name` if it must be extended now, as
        `extension_due` decides: within `extend_before_s` of its booked end, a job not expected
        to end with room for one more status check and an extension (`EXTENSION_S`) before
        it. Its expected end counts the start-up: the most a finished job ran
        beyond its `duration_s`, at least the probe's."""
        s = self.workflow.executor_settings
        with self.lock:
            p = self.where.get(name)
            duration_s = self.duration_of(name)
        if p is None or duration_s is None or time.monotonic() - self.refused_at.get(name, -1e9) < 10:
            return
        interval = self.workflow.remote_execution_settings.seconds_between_status_checks
        by_s = extension_due(
            datetime.now(UTC),
            started,
            p.end,
            duration_s,
            max(self.overhead_s, self.startup_s),
            lead_s=s.extend_before_s,
            margin_s=interval + EXTENSION_S,
            extend_by_s=s.extend_by_s,
        )
        if by_s is not None:
            due.setdefault(p.plan_id, {})[name] = (by_s, jobid, started)

    def extend(self, plan_id: str, jobs: dict[str, tuple[int, str, datetime]]) -> None:
        """Extends the running `jobs` of plan `plan_id` (name -> (seconds, Slurm job id, start))
        in one `PATCH` that also moves what depends on them, and raises their Slurm time limits
        to their new ends."""
        with self.lock:
            plan = self.plans.get(plan_id)
            old_end = {n: self.where[n].end for n in jobs}
        if plan is None:
            return
        asked, now = time.monotonic(), datetime.now(UTC)
        names = ", ".join(f"`{n}`" for n in sorted(jobs))
        try:
            changed = self.broker.modify_plan(plan_id, extension(plan, {n: j[0] for n, j in jobs.items()}, self.gap_s()))
        except BrokerError as e:
            with self.lock:
                self.refused_at.update((n, time.monotonic()) for n in jobs)
            self.logger.warning(f"coreserve: could not extend {names} ({time.monotonic() - asked:.1f} s): {e}")
            return
        took = time.monotonic() - asked
        with self.lock:
            self.plans[plan_id] = changed
            self.where.update(placements(changed))
            new = {n: self.where[n] for n in jobs}
        for name, (_, jobid, started) in jobs.items():
            minutes = math.ceil((new[name].end - started).total_seconds() / 60)
            _slurm(self.clusters[new[name].site], ["scontrol", "update", f"JobId={jobid}", f"TimeLimit={minutes}"])
            self.logger.info(
                f"coreserve: extended `{name}` to {new[name].end.isoformat()} (plan {plan_id}) in {took:.1f} s, "
                f"{(old_end[name] - now).total_seconds():.0f} s before its old end"
            )

    def follow_early_ends(self, names: set[str]) -> None:
        """Jobs that ended before their booked end give back the rest of their reservations,
        and what waits for them starts earlier where it may (`early_end`: one `PATCH` per plan
        for the jobs that ended since the last status check). If the service refuses the
        earlier starts (another reservation holds the time), the reservations are only given
        back; if it refuses that too, the plan stays as it is."""
        by_plan: dict[str, set[str]] = {}
        with self.lock:
            for n in names:
                p = self.where.get(n)
                if p is not None and p.plan_id in self.plans:
                    by_plan.setdefault(p.plan_id, set()).add(n)
        for plan_id, ended in by_plan.items():
            with self.lock:
                plan = self.plans[plan_id]
            asked = time.monotonic()
            body = early_end(plan, ended, datetime.now(UTC), EARLY_END_LEAD_S, self.gap_s())
            if body is None:
                continue
            # Refused: the reservations given back alone (unless that is what was refused).
            trims = {"jobs": [j for j in body["jobs"] if j["name"] in ended]}
            tries = [body] if trims == body or not trims["jobs"] else [body, trims]
            for b in tries:
                try:
                    changed = self.broker.modify_plan(plan_id, b)
                except BrokerError as e:
                    self.logger.warning(f"coreserve: could not follow the early end of {sorted(ended)}: {e}")
                    continue
                with self.lock:
                    self.plans[plan_id] = changed
                    self.where.update(placements(changed))
                moved = sorted(j["name"] for j in b["jobs"] if "offset_s" in j)
                self.logger.info(
                    f"coreserve: {sorted(ended)} ended early: gave back the rest of their reservations, "
                    f"started {moved or 'nothing'} earlier (plan {plan_id}) in {time.monotonic() - asked:.1f} s"
                )
                break

    def rebook(self, info: SubmittedJobInfo, state: str) -> None:
        """A job Slurm holds because its reservation went before it started (`RESV_DEL_HOLD`:
        the reservation ended or was deleted while the job waited in it) would wait forever:
        it is cancelled, booked again with the jobs of its plan that have not been submitted
        (as after a broken plan), and submitted again to its new reservation."""
        name = self.name_of(info.job)
        with self.lock:
            site, jobid = self.submitted.pop(name, ("", ""))
            p = self.where.get(name)
        if site in self.clusters and jobid:
            _slurm(self.clusters[site], ["scancel", jobid])
        self.logger.warning(f"coreserve: Slurm job {jobid} of `{name}` is {state}: its reservation is gone; booking it again")
        if p is not None:
            with self.lock:
                waiting = self.not_submitted(p.plan_id)
            self.replan(p.plan_id, waiting)
        self.run_job(info.job)

    def not_submitted(self, plan_id: str) -> set[str]:
        """The jobs placed by plan `plan_id` that have not been submitted to Slurm (call under
        the lock)."""
        return {n for n, p in self.where.items() if p.plan_id == plan_id and n not in self.submitted}

    def replan_if_broken(self, every_s: float = 5.0) -> None:
        """Re-plans the jobs not yet submitted when a plan of theirs broke."""
        now = time.monotonic()
        if now - self.last_plan_check < every_s or self.request is None:
            return
        self.last_plan_check = now
        with self.lock:
            live = {p.plan_id for n, p in self.where.items() if n not in self.finished}
        for plan_id in live:
            try:
                plan = self.broker.plan(plan_id)
            except BrokerError as e:
                self.logger.warning(f"coreserve: reading plan {plan_id}: {e}")
                continue
            with self.lock:
                self.plans[plan_id] = plan
                waiting = self.not_submitted(plan_id)
            broken = plan.get("status") == "broken" or any(j.get("broken") for j in plan.get("jobs", []))
            if broken and waiting:
                self.logger.warning(f"coreserve: plan {plan_id} broke")
                self.replan(plan_id, waiting)

    def replan(self, plan_id: str, waiting: set[str]) -> None:
        """Books `waiting` again from now on; their old reservations go when the old plan is
        cancelled (at the end)."""
        with self.lock:
            # A job still running elsewhere may be a dependency: start after its booked end.
            busy_until = [p.end for n, p in self.where.items() if n not in self.finished and n not in waiting]
            booked = {n: self.where[n].start for n in waiting if n in self.where}
        not_before = max([datetime.now(UTC) + timedelta(seconds=30), *busy_until])
        body = replan_request(self.request, waiting, not_before, f"{self.request['id']}-re{len(self.plans)}", booked)
        try:
            plan = self.broker.create_plan(body)
        except BrokerError as e:
            self.logger.error(f"coreserve: re-planning {len(waiting)} jobs of broken plan {plan_id} failed: {e}")
            return
        if plan.get("status") != "committed":
            self.logger.error(f"coreserve: re-planning after broken plan {plan_id} was rejected: {plan.get('reason')}")
            return
        with self.lock:
            self.plans[plan["id"]] = plan
            self.where.update(placements(plan))
        self.logger.info(f"coreserve: {len(waiting)} jobs of plan {plan_id} not started re-planned as plan {plan['id']}")

    def cancel_plans(self) -> None:
        """Cancels every plan of this run: what is left of them is released (at the end: the
        reservations' unused tails; on failure: everything not run)."""
        global _ACTIVE
        with self.lock:
            ids = list(self.plans)
            self.plans.clear()
        for plan_id in ids:
            try:
                self.broker.cancel_plan(plan_id)
                self.logger.info(f"coreserve: plan {plan_id} cancelled (what was left of it released)")
            except BrokerError as e:
                self.logger.warning(f"coreserve: cancelling plan {plan_id}: {e}")
        if _ACTIVE is self:
            _ACTIVE = None
