"""The plan side of the plugin, free of Snakemake and of HTTP, so that it is tested on its own.

- `request_from_dag`: a plan request from a DAG's jobs (their CPUs, lengths, dependencies and
  the data between them), as the coreserve service takes it (`POST /v1/plans`).
- `placements`: where and when each job runs, from a plan answer.
- `extension_due`: whether a running job needs more time, and how much.
- `extension`: the `PATCH /v1/plans/{id}` body that gives a running job more time and pushes
  what depends on it later only as far as every dependency needs.
- `replan_request`: the request that books again the jobs that have not started, after a plan
  broke (a reservation deleted in Slurm, a link down).

Names and units are the service's (docs/model.md of the coreserve repository): seconds in
`*_s`, megabytes in `size_mb`, Mbit/s in `bandwidth_mbps`, instants RFC 3339 UTC.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

# Seconds of grace after a job's expected end (its `duration_s` + Snakemake's start-up in it)
# before it counts as overrunning (`extension_due`).
GRACE_S = 2


def rfc3339(t: datetime) -> str:
    """An instant as RFC 3339 UTC to the second."""
    return t.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def instant(s: str) -> datetime:
    """An RFC 3339 instant of a plan answer."""
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def job_name(rule: str, wildcards: dict[str, str]) -> str:
    """The plan's name of a Snakemake job without a `coreserve_job` resource: the rule, and its
    wildcards as `rule[k=v,...]`; at most 128 characters, printable."""
    name = rule if not wildcards else f"{rule}[{','.join(f'{k}={v}' for k, v in sorted(wildcards.items()))}]"
    name = re.sub(r"[\x00-\x1f\x7f]", "_", name)
    return name[:128]


@dataclass
class DagJob:
    """One job of the DAG to book: `cpus`, `duration_s` (its run time), `after` (names of the
    jobs it waits for) and `output_mb` (the data it hands each successor, if declared)."""

    name: str
    cpus: int
    duration_s: int
    after: list[str] = field(default_factory=list)
    output_mb: float | None = None


def request_from_dag(
    jobs: list[DagJob],
    *,
    request_id: str,
    os: str,
    deadline: datetime,
    not_before: datetime | None,
    gap_s: int,
    slack_s: int,
    bandwidth_mbps: int,
) -> dict:
    """A plan request of `jobs`: each `after` its dependencies (laid out by the broker), a
    staged transfer of the producer's `output_mb` on every edge whose producer declares one, the
    engine's reaction time as `dependency_gap_s` and the start-up margin as `slack_s`."""
    names = {j.name for j in jobs}
    body_jobs, transfers = [], []
    for j in jobs:
        job = {"name": j.name, "os": os, "cpus": max(1, int(j.cpus)), "duration_s": max(1, int(j.duration_s))}
        after = [a for a in j.after if a in names]
        if after:
            job["after"] = after
        body_jobs.append(job)
    by_name = {j.name: j for j in jobs}
    for j in jobs:
        for a in j.after:
            p = by_name.get(a)
            if p is not None and p.output_mb:
                transfers.append(
                    {"from": a, "to": j.name, "bandwidth_mbps": bandwidth_mbps, "mode": "staged", "size_mb": p.output_mb}
                )
    body = {
        "id": request_id,
        "deadline": rfc3339(deadline),
        "jobs": body_jobs,
        "transfers": transfers,
        "dependency_gap_s": gap_s,
        "slack_s": slack_s,
    }
    if not_before is not None:
        body["not_before"] = rfc3339(not_before)
    return body


@dataclass
class Placement:
    """Where and when a job runs: its plan, site, Slurm reservation and booked window."""

    plan_id: str
    site: str
    reservation: str | None
    start: datetime
    end: datetime
    broken: str | None = None


def placements(plan: dict) -> dict[str, Placement]:
    """Each job's placement in a plan answer, by job name."""
    return {
        j["name"]: Placement(
            plan_id=plan["id"],
            site=j["site"],
            reservation=j.get("reservation_name"),
            start=instant(j["start"]),
            end=instant(j["end"]),
            broken=j.get("broken"),
        )
        for j in plan.get("jobs", [])
    }


def widest_level(jobs: list[DagJob]) -> int:
    """The most jobs of one level of the DAG (a job's level: 1 + its deepest dependency's),
    the jobs that may start at once; 1 for no jobs."""
    after = {j.name: [a for a in j.after] for j in jobs}
    level: dict[str, int] = {}
    for name in after:
        todo = [name]
        while todo:  # iterative depth-first: a 1,000-job chain must not overflow the stack
            n = todo[-1]
            missing = [a for a in after.get(n, []) if a in after and a not in level]
            if missing:
                todo.extend(missing)
                continue
            todo.pop()
            level[n] = 1 + max((level[a] for a in after.get(n, []) if a in after), default=0)
    counts: dict[int, int] = {}
    for v in level.values():
        counts[v] = counts.get(v, 0) + 1
    return max(counts.values(), default=1)


def descendants(plan: dict, job: str) -> set[str]:
    """The jobs that depend on `job`, directly or not: by the placements' `after` and by staged
    transfers (a staged transfer's consumer waits for its producer)."""
    children: dict[str, list[str]] = {}
    for j in plan["jobs"]:
        for a in j.get("after", []):
            children.setdefault(a, []).append(j["name"])
    for t in plan.get("transfers", []):
        if t.get("mode") == "staged":
            children.setdefault(t["from"], []).append(t["to"])
    seen: set[str] = set()
    todo = list(children.get(job, []))
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(children.get(n, []))
    return seen


def early_end(plan: dict, ended: set[str], now: datetime, lead_s: int, gap_s: int) -> dict | None:
    """The modification that follows jobs that ended early (`ended`, names in `plan`), in one
    `PATCH`: each gives back the rest of its reservation, which then ends at `now + lead_s`
    (a started reservation's new end must lie ahead of the service's clock when the change
    arrives); and each job that waits for one of them (`after`, or a staged transfer from it)
    and has not begun by then starts as early as its dependencies now allow, not before
    `now + lead_s`: after each job it is `after` (an ended one's new end; the others' booked
    ends + `gap_s`, the request's `dependency_gap_s`) and after each staged transfer into it, a
    transfer from an ended job moved up to start at that job's new end. No gap is kept after
    an ended job: the engine has seen its end, and submits the dependant once this change is
    made. A job with a concurrent transfer keeps its reservation (the transfer must lie inside
    both jobs), and so does what comes after the dependants: it moves when they end. `None`:
    nothing changes. Offsets count from the plan's `start`, as in `extension`."""
    origin = instant(plan["start"])

    def offset(t: str) -> int:
        return int((instant(t) - origin).total_seconds())

    by_name = {j["name"]: j for j in plan["jobs"]}
    start = {n: offset(j["start"]) for n, j in by_name.items()}
    end = {n: offset(j["end"]) for n, j in by_name.items()}
    soon = math.ceil((now - origin).total_seconds()) + lead_s
    transfers = plan.get("transfers", [])
    staged = [t for t in transfers if t.get("mode") == "staged"]
    concurrent = {x for t in transfers if t.get("mode") != "staged" for x in (t["from"], t["to"])}
    jobs: list[dict] = []
    for n in sorted(ended & set(by_name) - concurrent):
        if start[n] < soon < end[n]:
            end[n] = soon
            jobs.append({"name": n, "duration_s": soon - start[n]})
    waiting = {j["name"] for j in plan["jobs"] if ended & set(j.get("after", []))}
    waiting |= {t["to"] for t in staged if t["from"] in ended}
    moved_transfers: list[dict] = []
    for n in sorted(waiting - ended - concurrent):
        if start[n] <= soon:
            continue
        after = [a for a in by_name[n].get("after", []) if a in end]
        allowed = max([soon] + [end[a] if a in ended else end[a] + gap_s for a in after])
        mine = []
        for t in (t for t in staged if t["to"] == n):
            booked, length = offset(t["start"]), offset(t["end"]) - offset(t["start"])
            begins = max(end[t["from"]], soon) if t["from"] in ended else booked
            if begins < booked:
                mine.append({"from": t["from"], "to": n, "offset_s": begins})
            else:
                begins = booked
            allowed = max(allowed, begins + length)
        if allowed < start[n]:
            jobs.append({"name": n, "offset_s": allowed})
            moved_transfers += mine
    if not jobs:
        return None
    body: dict = {"jobs": jobs}
    if moved_transfers:
        body["transfers"] = moved_transfers
    return body


def extension_due(
    now: datetime,
    started: datetime,
    booked_end: datetime,
    duration_s: int,
    startup_s: float,
    *,
    lead_s: float,
    margin_s: float,
    extend_by_s: int,
) -> int | None:
    """By how many seconds a job running since `started` must be extended now (`None`: not
    now). It is expected to end at `started + duration_s + startup_s + GRACE_S` (Snakemake's
    start-up inside the job, and some grace). Decided within `lead_s` of `booked_end` only: a
    job expected to end at least `margin_s` before `booked_end` (the time to notice that it
    did not, and to extend it: a status check and a `PATCH`) is left to end; one expected later
    (it started late, or ran past its expected end) gets `extend_by_s`, or as much as its
    expected end and the margin need."""
    if now < booked_end - timedelta(seconds=lead_s):
        return None
    expected_end = started + timedelta(seconds=duration_s + startup_s + GRACE_S)
    room = booked_end - timedelta(seconds=margin_s)
    if now < expected_end <= room:
        return None
    # An overdue job: from now on, as if it had only just started its last stretch.
    expected_end = max(expected_end, now)
    return max(extend_by_s, math.ceil((expected_end - room).total_seconds()))


def slack_for(latency_s: float, startup_s: float, interval_s: float, extension_s: float) -> int:
    """The `slack_s` to book for jobs that start `latency_s` after their reservation begins
    and spend `startup_s` in Snakemake's start-up: that, what `extension_due` leaves before
    the booked end of a job it does not extend (`GRACE_S`, a status check interval
    `interval_s`, an extension's `extension_s`), and as much start-up again (at least 3 s) for
    its variance. A job that starts that late is then not extended."""
    return math.ceil(latency_s + startup_s + GRACE_S + interval_s + extension_s + max(3.0, startup_s))


def extension(plan: dict, extend_by_s: dict[str, int], gap_s: int) -> dict:
    """The modification that makes each job of `extend_by_s` (job name -> seconds) that much
    longer and pushes what depends on them only as far as it must, in one `PATCH` (the jobs of
    a level that overrun together): each job of their `descendants` starts at the later of its
    booked start and what its dependencies now allow (each job it is `after` ends + `gap_s`,
    the request's `dependency_gap_s`; each staged transfer into it ends), each staged transfer
    from a job that ends later starts no earlier than that end, and a transfer between jobs that
    run together moves with the later of them. A dependant with room to spare does not move, nor
    does anything after it: an overrun off the critical path costs the workflow nothing. Offsets
    count from the plan's `start`, as `PATCH /v1/plans/{id}` takes them; a job or transfer that
    does not move is left out."""
    origin = instant(plan["start"])

    def offset(t: str) -> int:
        return int((instant(t) - origin).total_seconds())

    by_name = {j["name"]: j for j in plan["jobs"]}
    start = {n: offset(j["start"]) for n, j in by_name.items()}
    length = {n: offset(j["end"]) - start[n] for n, j in by_name.items()}
    for job, by_s in extend_by_s.items():
        length[job] += by_s
    staged = [t for t in plan.get("transfers", []) if t.get("mode") == "staged"]
    into: dict[str, list[dict]] = {}
    for t in staged:
        into.setdefault(t["to"], []).append(t)
    moved_transfer: dict[tuple[str, str], int] = {}

    def end(n: str) -> int:
        return start[n] + length[n]

    def transfer_end(t: dict) -> int:
        """Where staged transfer `t` ends once its producer's end is known (noting its move)."""
        booked, was = offset(t["start"]), offset(t["end"]) - offset(t["start"])
        begins = max(booked, end(t["from"]))
        if begins > booked:
            moved_transfer[(t["from"], t["to"])] = begins
        return begins + was

    # In booked start order, a topological order: a dependant starts after its dependencies.
    below = set().union(*(descendants(plan, job) for job in extend_by_s)) - set(extend_by_s)
    later = sorted(below, key=lambda n: (start[n], n))
    moved = []
    for n in later:
        allowed = max(
            [start[n]]
            + [end(a) + gap_s for a in by_name[n].get("after", []) if a in start]
            + [transfer_end(t) for t in into.get(n, [])]
        )
        if allowed > start[n]:
            start[n] = allowed
            moved.append(n)
    jobs = [{"name": job, "duration_s": length[job]} for job in extend_by_s]
    jobs += [{"name": n, "offset_s": start[n]} for n in moved]
    transfers = []
    for t in plan.get("transfers", []):
        key = (t["from"], t["to"])
        if t.get("mode") == "staged":
            if key in moved_transfer:
                transfers.append({"from": t["from"], "to": t["to"], "offset_s": moved_transfer[key]})
        elif t["from"] in moved or t["to"] in moved:
            # Runs while both jobs run: from the later of their (new) starts.
            transfers.append({"from": t["from"], "to": t["to"], "offset_s": max(offset(t["start"]), start[t["from"]], start[t["to"]])})
    body: dict = {"jobs": jobs}
    if transfers:
        body["transfers"] = transfers
    return body


def replan_request(
    request: dict, remaining: set[str], not_before: datetime, request_id: str, booked: dict[str, datetime]
) -> dict:
    """The request that books `remaining` (jobs of `request` that have not started) again, from
    `not_before` on: their dependencies among themselves, the transfers between them, the same
    deadline, gap and slack. Dependencies on jobs that ran or run are met by `not_before`. The
    jobs left with no dependency keep the spacing of their `booked` starts (the old plan's,
    where they fitted together): without an `offset_s` they would all start at once, a
    co-allocation of a whole level that may never fit the grid."""
    jobs = []
    for j in request["jobs"]:
        if j["name"] not in remaining:
            continue
        job = {k: v for k, v in j.items() if k not in ("after", "offset_s")}
        after = [a for a in j.get("after", []) if a in remaining]
        if after:
            job["after"] = after
        jobs.append(job)
    roots = [j for j in jobs if "after" not in j and j["name"] in booked]
    base = min((booked[j["name"]] for j in roots), default=None)
    for j in roots:
        j["offset_s"] = int((booked[j["name"]] - base).total_seconds())
    transfers = [t for t in request.get("transfers", []) if t["from"] in remaining and t["to"] in remaining]
    body = {k: v for k, v in request.items() if k not in ("jobs", "transfers", "not_before", "id")}
    body.update({"id": request_id, "jobs": jobs, "transfers": transfers, "not_before": rfc3339(not_before)})
    return body
