#!/usr/bin/env python3
"""A tiny workflow engine on the coreserve client (`coreserve`, the layer on the generated
`coreserve_client`).

It books a 4-job diamond workflow in advance — A feeds B and C, which both feed D, each edge a
network transfer — checks the broker's answer, prints where and when every job and transfer
runs, then cancels the booking (an engine would instead launch the jobs at their start times).

    CORESERVE_URL=http://127.0.0.1:8080 CORESERVE_TOKEN=... python3 workflow_engine.py

Environment:
    CORESERVE_URL    the service (default http://127.0.0.1:8080)
    CORESERVE_TOKEN  a bearer token (POST /v1/tokens with the admin token makes one); required
    CORESERVE_OS     the OS every job needs (default linux); some site must run it

Exit status: 0 when the workflow was committed, read back and cancelled; 1 otherwise.
"""

from __future__ import annotations

import os
import sys
import uuid
from datetime import UTC, datetime, timedelta

import coreserve
from coreserve.models import ComputeDemand, NetworkDemand, PlanBody, PlanStatus, PlanView

# A request answered 408, 409 (the key in use by a request still planning, or the plan pending),
# 429 or 503, or not answered at all, is sent again with the same Idempotency-Key and body after
# the Retry-After the broker sends: coreserve.Client.create_plan(retries=...) does it, and a
# retry with the same key never books twice.
RETRIES = 4


class EngineError(Exception):
    """The broker refused a step of the workflow."""


def diamond(os_name: str, deadline: datetime) -> PlanBody:
    """A -> B, A -> C, B -> D, C -> D. Times are offsets from the application's start (chosen by
    the broker); each transfer runs while both of its jobs run: the last 10 minutes of the
    sender overlap the first 10 minutes of the receiver."""
    hour, ten_min = 3600, 600
    mid = hour - ten_min  # B and C start 10 minutes before A ends
    last = 2 * mid  # D starts 10 minutes before B and C end
    jobs = [
        ComputeDemand(name="A", os=os_name, cpus=12, offset_s=0, duration_s=hour),
        ComputeDemand(name="B", os=os_name, cpus=12, offset_s=mid, duration_s=hour),
        ComputeDemand(name="C", os=os_name, cpus=12, offset_s=mid, duration_s=hour),
        ComputeDemand(name="D", os=os_name, cpus=12, offset_s=last, duration_s=hour),
    ]
    transfers = [
        NetworkDemand(from_="A", to="B", bandwidth_mbps=500, offset_s=mid, duration_s=ten_min),
        NetworkDemand(from_="A", to="C", bandwidth_mbps=500, offset_s=mid, duration_s=ten_min),
        NetworkDemand(from_="B", to="D", bandwidth_mbps=500, offset_s=last, duration_s=ten_min),
        NetworkDemand(from_="C", to="D", bandwidth_mbps=500, offset_s=last, duration_s=ten_min),
    ]
    return PlanBody(id=f"diamond-{uuid.uuid4().hex[:8]}", deadline=deadline, jobs=jobs, transfers=transfers)


def ts(t: datetime | None) -> str:
    """A time as RFC 3339 UTC; "-" for a field the answer does not have (None)."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if t is not None else "-"


def show(plan: PlanView) -> None:
    print(
        f"plan {plan.id}: {plan.status.value}, request {plan.request_id}, start {ts(plan.start)}, cost {plan.cost:.2f}"
    )
    for job in sorted(plan.jobs, key=lambda j: j.name):
        print(f"  job {job.name}: site {job.site}, {ts(job.start)} -> {ts(job.end)}, {job.cpus} CPUs")
    for t in plan.transfers:
        path = " -> ".join(t.path) if t.path else "none (same node)"
        print(f"  transfer {t.from_} -> {t.to}: {t.bandwidth_mbps} Mbit/s, {ts(t.start)} -> {ts(t.end)}, links {path}")


def run(cs: coreserve.Client, os_name: str) -> None:
    try:
        sites = cs.sites()
    except coreserve.ProblemError as e:
        raise EngineError(f"listing sites: {e.title}: {e.detail}") from e
    matching = [s.id for s in sites if s.os.lower() == os_name.lower()]
    print(f"grid: {len(sites)} sites, {len(matching)} run {os_name}: {', '.join(matching)}")
    if not matching:
        raise EngineError(f"no site runs {os_name}: set CORESERVE_OS to one of {sorted({s.os for s in sites})}")

    # Whole seconds: the broker stores RFC 3339 times; the deadline lies within its horizon.
    deadline = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    body = diamond(os_name, deadline)
    key = f"workflow-engine-{uuid.uuid4()}"
    answer = cs.create_plan(body, idempotency_key=key, retries=RETRIES)
    print(f"submitted {body.id} (Idempotency-Key {key}): {answer.status.value}, plan {answer.id}")
    if answer.status != PlanStatus.COMMITTED:
        raise EngineError(f"the broker did not book the workflow: {answer.status.value}: {answer.reason}")

    plan = cs.get_plan(answer.id)
    show(plan)

    cancelled = cs.cancel_plan(plan.id)
    again = cs.get_plan(plan.id)
    print(f"cancelled plan {again.id}: {again.status.value} at {ts(cancelled.cancelled_at)}")
    if again.status != PlanStatus.CANCELLED:
        raise EngineError(f"plan {again.id} reads {again.status.value} after cancel")


def main() -> int:
    url = os.environ.get("CORESERVE_URL", "http://127.0.0.1:8080")
    token = os.environ.get("CORESERVE_TOKEN")
    if not token:
        print("CORESERVE_TOKEN is not set (a bearer token of the service)", file=sys.stderr)
        return 1
    os_name = os.environ.get("CORESERVE_OS", "linux")
    with coreserve.Client(url, token, timeout=60) as cs:
        try:
            run(cs, os_name)
        except (EngineError, coreserve.CoreserveError) as e:
            # CoreserveError: a problem answer (`403 forbidden: ...`) or none (`cannot reach ...`).
            print(f"workflow engine: {e}", file=sys.stderr)
            return 1
    print("workflow engine: done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
