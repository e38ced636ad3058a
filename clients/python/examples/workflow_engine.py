#!/usr/bin/env python3
"""A tiny workflow engine on the generated coreserve client (coreserve_client).

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
import time
import uuid
from datetime import UTC, datetime, timedelta
from http import HTTPStatus

import httpx
from coreserve_client import AuthenticatedClient, errors
from coreserve_client.api.plans import cancel_plan, create_plan, get_plan
from coreserve_client.api.sites import list_sites
from coreserve_client.models import ComputeDemand, NetworkDemand, PlanBody, PlanStatus, PlanView, Problem
from coreserve_client.types import Response, Unset

# Answers after which the same request may be sent again with the same Idempotency-Key: the
# server timed out reading the request before looking at it (408); the key is in use by a request still planning, or the plan is pending (409); too many of our
# requests are in flight (429); the plan could not be recorded or its commit is not confirmed
# yet (503). A retry with the same key and body never books twice.
RETRYABLE = {
    HTTPStatus.REQUEST_TIMEOUT,
    HTTPStatus.CONFLICT,
    HTTPStatus.TOO_MANY_REQUESTS,
    HTTPStatus.SERVICE_UNAVAILABLE,
}


class EngineError(Exception):
    """The broker refused or failed a step of the workflow."""


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


def expect_plan(resp: Response[PlanView | Problem], what: str) -> PlanView:
    """The PlanView of a successful answer, else an EngineError with the problem's detail."""
    if isinstance(resp.parsed, PlanView):
        return resp.parsed
    if isinstance(resp.parsed, Problem):
        raise EngineError(f"{what}: {resp.status_code.value} {resp.parsed.title}: {resp.parsed.detail}")
    raise EngineError(f"{what}: unexpected answer {resp.status_code.value}: {resp.content[:200]!r}")


def submit(client: AuthenticatedClient, body: PlanBody, key: str, attempts: int = 5) -> PlanView:
    """POST /v1/plans with an Idempotency-Key, retried (same key, same body) while the broker
    answers 408, 409, 429 or 503, after the Retry-After it sends."""
    for attempt in range(1, attempts + 1):
        resp = create_plan.sync_detailed(client=client, body=body, idempotency_key=key)
        if resp.status_code not in RETRYABLE or attempt == attempts:
            return expect_plan(resp, "submit")
        wait = min(float(resp.headers.get("Retry-After", "1")), 10.0)
        print(f"broker answered {resp.status_code.value}; retrying with the same key in {wait:.0f} s")
        time.sleep(wait)
    raise AssertionError("unreachable")


def ts(t: datetime | None | Unset) -> str:
    """A time as RFC 3339 UTC; "-" for a field the answer does not have (UNSET or null)."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(t, datetime) else "-"


def show(plan: PlanView) -> None:
    print(
        f"plan {plan.id}: {plan.status.value}, request {plan.request_id}, start {ts(plan.start)}, cost {plan.cost:.2f}"
    )
    for job in sorted(plan.jobs, key=lambda j: j.name):
        print(f"  job {job.name}: site {job.site}, {ts(job.start)} -> {ts(job.end)}, {job.cpus} CPUs")
    for t in plan.transfers:
        path = " -> ".join(t.path) if t.path else "none (same node)"
        print(f"  transfer {t.from_} -> {t.to}: {t.bandwidth_mbps} Mbit/s, {ts(t.start)} -> {ts(t.end)}, links {path}")


def run(client: AuthenticatedClient, os_name: str) -> None:
    sites = list_sites.sync(client=client)
    if not isinstance(sites, list):
        raise EngineError(f"listing sites: {sites.detail if isinstance(sites, Problem) else 'no answer'}")
    matching = [s.id for s in sites if s.os.lower() == os_name.lower()]
    print(f"grid: {len(sites)} sites, {len(matching)} run {os_name}: {', '.join(matching)}")
    if not matching:
        raise EngineError(f"no site runs {os_name}: set CORESERVE_OS to one of {sorted({s.os for s in sites})}")

    # Whole seconds: the broker stores RFC 3339 times; the deadline lies within its horizon.
    deadline = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    body = diamond(os_name, deadline)
    key = f"workflow-engine-{uuid.uuid4()}"
    answer = submit(client, body, key)
    print(f"submitted {body.id} (Idempotency-Key {key}): {answer.status.value}, plan {answer.id}")
    if answer.status != PlanStatus.COMMITTED:
        raise EngineError(f"the broker did not book the workflow: {answer.status.value}: {answer.reason}")

    plan = expect_plan(get_plan.sync_detailed(client=client, id=answer.id), "get plan")
    show(plan)

    cancelled = expect_plan(cancel_plan.sync_detailed(client=client, id=plan.id), "cancel")
    again = expect_plan(get_plan.sync_detailed(client=client, id=plan.id), "get plan after cancel")
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
    # Raise on statuses the OpenAPI document does not declare instead of returning None.
    with AuthenticatedClient(
        base_url=url, token=token, timeout=httpx.Timeout(60.0), raise_on_unexpected_status=True
    ) as client:
        try:
            run(client, os_name)
        except (EngineError, errors.UnexpectedStatus, httpx.HTTPError) as e:
            print(f"workflow engine: {e}", file=sys.stderr)
            return 1
    print("workflow engine: done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
