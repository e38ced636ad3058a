"""A WfCommons workflow instance as a coreserve plan request: the Python twin of
`coreserve workflow import` (the CLI, `src/cli/workflow/` of the coreserve repository), job for
job and transfer for transfer.

It reads WfFormat 1.4 (`workflow.tasks[]`, each with its `files[]`; parents by id or by name)
and 1.5 or later (`workflow.specification` and `workflow.execution`, as WfCommons 1.6 writes).
Each task becomes a job `after` its parents, with its cores as CPUs and its run time times
`time_scale` (rounded up, at least 1 s). Each edge that carries data (bytes of the files the
parent writes and the child reads, times `data_scale`) becomes a staged transfer of that many
megabytes at `bandwidth_mbps`; edges below `min_transfer_mb` are left out. What cannot be
expressed raises `WorkflowImportError`, naming the task.

    request = coreserve.workflow.from_wfcommons("epigenomics.json", time_scale=0.1,
                                                 deadline=datetime.now(UTC) + timedelta(hours=6))
    plan = client.create_plan(request)
"""

from __future__ import annotations

import json
import math
import os
from datetime import datetime, timezone
from typing import Any, Optional, Union

#: The most jobs and transfers one plan request holds (the service's `model::limits`).
MAX_JOBS = 1000
MAX_TRANSFERS = 4000


class WorkflowImportError(ValueError):
    """The instance cannot be expressed as a plan request (the message names the task)."""


def _bytes(b: Any) -> int:
    try:
        b = float(b)
    except (TypeError, ValueError):
        return 0
    return _round(b) if math.isfinite(b) and b > 0 else 0


def _round(x: float) -> int:
    """Half away from zero, as the CLI rounds (Python's round() rounds half to even)."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def _tasks(doc: dict) -> list[dict]:
    """The tasks as `{id, name, runtime_s, cores, parents, inputs, outputs}` (files as
    `(name, bytes)`), from either WfFormat shape."""
    wf = doc.get("workflow")
    if not isinstance(wf, dict):
        raise WorkflowImportError("not a WfCommons instance (WfFormat 1.4 or 1.5 JSON): no `workflow` object")
    if "specification" in wf:
        spec = wf["specification"]
        runs = {t["id"]: t for t in (wf.get("execution") or {}).get("tasks", [])}
        size = {f["id"]: _bytes(f.get("sizeInBytes", 0)) for f in spec.get("files", [])}
        out = []
        for t in spec["tasks"]:
            run = runs.get(t["id"], {})
            out.append(
                {
                    "id": t["id"],
                    "name": t["id"],
                    "runtime_s": run.get("runtimeInSeconds"),
                    "cores": run.get("coreCount"),
                    "parents": list(t.get("parents", [])),
                    "inputs": [(f, size.get(f, 0)) for f in t.get("inputFiles", [])],
                    "outputs": [(f, size.get(f, 0)) for f in t.get("outputFiles", [])],
                }
            )
        return out
    out = []
    for t in wf.get("tasks", []):
        files = t.get("files", [])

        def linked(link: str, files=files) -> list[tuple[str, int]]:
            return [(f["name"], _bytes(f.get("sizeInBytes", f.get("size", 0)))) for f in files if f.get("link") == link]

        out.append(
            {
                "id": t.get("id") or t["name"],
                "name": t["name"],
                "runtime_s": t.get("runtimeInSeconds", t.get("runtime")),
                "cores": t.get("cores"),
                "parents": list(t.get("parents", [])),
                "inputs": linked("input"),
                "outputs": linked("output"),
            }
        )
    return out


def from_wfcommons(
    instance: Union[str, os.PathLike, dict],
    *,
    time_scale: float = 1.0,
    data_scale: float = 1.0,
    bandwidth_mbps: int = 1000,
    min_transfer_mb: float = 0.0,
    os_name: str = "linux",
    request_id: Optional[str] = None,
    deadline: Optional[datetime] = None,
    not_before: Optional[datetime] = None,
    gap_s: Optional[int] = None,
    slack_s: Optional[int] = None,
) -> dict:
    """The plan request (a dict for `POST /v1/plans`) of a WfCommons instance: a file's path
    or the parsed JSON. Jobs and transfers are those `coreserve workflow import` makes with the
    same options. Without `deadline`: `not_before` (else now) plus every job, gap, slack and
    transfer one after the other, plus a day. Without `request_id`: the instance's name.

    Raises `WorkflowImportError`: not an instance, a task twice, an unknown parent, a task
    without a run time > 0 or with impossible cores, more than `MAX_JOBS` tasks or
    `MAX_TRANSFERS` data edges, or an option out of range.
    """
    if not isinstance(instance, dict):
        with open(instance) as f:
            instance = json.load(f)
    for name, v in (("time_scale", time_scale), ("data_scale", data_scale), ("bandwidth_mbps", bandwidth_mbps)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise WorkflowImportError(f"{name} must be a number > 0")
    raws = _tasks(instance)
    if not raws:
        raise WorkflowImportError("the instance has no task")
    if len(raws) > MAX_JOBS:
        raise WorkflowImportError(f"the instance has {len(raws)} tasks; a plan request holds at most {MAX_JOBS} jobs")
    index: dict[str, int] = {}
    for i, r in enumerate(raws):
        if r["id"] in index:
            raise WorkflowImportError(f"task `{r['id']}` appears twice")
        index[r["id"]] = i
    names: dict[str, Optional[int]] = {}
    for i, r in enumerate(raws):
        names[r["name"]] = None if r["name"] in names else i
    jobs, transfers = [], []
    for child, r in enumerate(raws):
        runtime = r["runtime_s"]
        if not (isinstance(runtime, (int, float)) and math.isfinite(runtime) and runtime > 0):
            raise WorkflowImportError(f"task `{r['id']}`: no runtimeInSeconds > 0 in the instance (a plan needs each job's length)")
        cores = 1.0 if r["cores"] is None else r["cores"]
        if not (isinstance(cores, (int, float)) and math.isfinite(cores) and 1 <= cores and math.ceil(cores) <= 2**30):
            raise WorkflowImportError(f"task `{r['id']}`: {cores} cores cannot be booked (a job needs 1 to 2^30 CPUs)")
        parents: list[int] = []
        for p in r["parents"]:
            parent = index.get(p, names.get(p))
            if parent is None:
                raise WorkflowImportError(f"task `{r['id']}`: its parent `{p}` is not a task of the instance")
            if parent in parents:
                continue
            parents.append(parent)
            written = {f for f, _ in raws[parent]["outputs"]}
            data = sum(size for f, size in r["inputs"] if f in written)
            size_mb = _round(data * data_scale / 1e3) / 1e3
            if size_mb > 0 and size_mb >= min_transfer_mb:
                transfers.append(
                    {"from": raws[parent]["id"], "to": r["id"], "bandwidth_mbps": bandwidth_mbps, "mode": "staged", "size_mb": size_mb}
                )
        job: dict = {"name": r["id"], "os": os_name, "cpus": math.ceil(cores), "duration_s": max(1, math.ceil(runtime * time_scale))}
        if parents:
            job["after"] = [raws[p]["id"] for p in parents]
        jobs.append(job)
    if len(transfers) > MAX_TRANSFERS:
        raise WorkflowImportError(
            f"the instance has {len(transfers)} edges carrying data; a plan request holds at most {MAX_TRANSFERS} transfers (raise min_transfer_mb)"
        )
    now = datetime.now(timezone.utc)
    if deadline is None:
        per_job = (gap_s or 0) + (slack_s or 0)
        serial = sum(j["duration_s"] + per_job for j in jobs) + sum(
            math.ceil(t["size_mb"] * 8 / bandwidth_mbps) for t in transfers
        )
        deadline = datetime.fromtimestamp((not_before or now).timestamp() + serial + 86400, timezone.utc)
    if request_id is None:
        name = "".join(c for c in str(instance.get("name") or "workflow") if c.isascii() and (c.isalnum() or c == "-"))[:40]
        request_id = name or "workflow"
    request: dict = {"id": request_id, "deadline": _rfc3339(deadline), "jobs": jobs, "transfers": transfers}
    if not_before is not None:
        request["not_before"] = _rfc3339(not_before)
    if gap_s is not None:
        request["dependency_gap_s"] = gap_s
    if slack_s is not None:
        request["slack_s"] = slack_s
    return request


def _rfc3339(t: datetime) -> str:
    if t.tzinfo is None:
        raise WorkflowImportError("times must be timezone-aware (UTC)")
    return t.astimezone(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
