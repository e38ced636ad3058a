#!/usr/bin/env python3
"""React to a plan's events instead of polling it (GET /v1/events, Server-Sent Events).

It opens the event stream, books a one-job plan with the coreserve client, and reacts to what
the stream says about that plan: once it is committed, it cancels it (a workflow engine would
instead stage data, or rebook when the plan turns `broken`); once it is cancelled, it is done.
`coreserve.Client.events()` opens the stream before it returns, so booking after it misses
nothing, and opens a dropped connection again with `Last-Event-ID`: nothing is missed, nothing
repeated.

    CORESERVE_URL=http://127.0.0.1:8080 CORESERVE_TOKEN=... python3 react_to_events.py

Environment: CORESERVE_URL (default http://127.0.0.1:8080), CORESERVE_TOKEN (required),
CORESERVE_OS (the job's OS, default linux).

Exit status: 0 when the plan's committed and cancelled events came; 1 otherwise.
"""

from __future__ import annotations

import os
import sys
import uuid
from datetime import UTC, datetime, timedelta

import coreserve
from coreserve.models import ComputeDemand, PlanBody

DONE = ("plan.cancelled", "plan.rejected", "plan.completed", "plan.broken")


def react(cs: coreserve.Client, body: PlanBody) -> int:
    with cs.events() as stream:  # open now: every event from here on comes
        plan = cs.create_plan(body)
        print(f"booked {body.id}: plan {plan.id}, {plan.status.value}", flush=True)
        for event in stream:
            if event.plan_id != plan.id:
                continue  # another plan of ours
            state = event.jobs[0].state.value if event.jobs and event.jobs[0].state else "-"
            print(f"event {event.id}: {event.type_} for plan {event.plan_id}, job A {state}", flush=True)
            if event.type_ == "plan.committed":
                cs.cancel_plan(event.plan_id)
            elif event.type_ in DONE:
                print(f"react to events: done ({event.type_})")
                return 0 if event.type_ == "plan.cancelled" else 1
    return 1


def main() -> int:
    url = os.environ.get("CORESERVE_URL", "http://127.0.0.1:8080")
    token = os.environ.get("CORESERVE_TOKEN")
    if not token:
        print("react to events: set CORESERVE_TOKEN", file=sys.stderr)
        return 1
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=2)
    body = PlanBody(
        id=f"react-{uuid.uuid4().hex[:8]}",
        deadline=start + timedelta(days=1),
        not_before=start,
        jobs=[ComputeDemand(name="A", os=os.environ.get("CORESERVE_OS", "linux"), cpus=2, offset_s=0, duration_s=600)],
        transfers=[],
    )
    with coreserve.Client(url, token) as cs:
        try:
            return react(cs, body)
        except coreserve.CoreserveError as e:
            print(f"react to events: {e}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
