#!/usr/bin/env python3
"""React to a plan's events instead of polling it (GET /v1/events, Server-Sent Events).

It opens the event stream, books a one-job plan with the generated client, and reacts to what
the stream says about that plan: once it is committed, it cancels it (a workflow engine would
instead stage data, or rebook when the plan turns `broken`); once it is cancelled, it is done.
A dropped connection is opened again with `Last-Event-ID`: nothing is missed, nothing repeated.

    CORESERVE_URL=http://127.0.0.1:8080 CORESERVE_TOKEN=... python3 react_to_events.py

Environment: CORESERVE_URL (default http://127.0.0.1:8080), CORESERVE_TOKEN (required),
CORESERVE_OS (the job's OS, default linux).

Exit status: 0 when the plan's committed and cancelled events came; 1 otherwise.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
from coreserve_client import AuthenticatedClient
from coreserve_client.api.plans import cancel_plan, create_plan
from coreserve_client.models import ComputeDemand, PlanBody, PlanEvent, PlanView


def events(url: str, token: str, ready: threading.Event, after: int | None = None) -> Iterator[PlanEvent]:
    """The caller's plan events from `after` on (None: from now), for ever; reconnects with the
    last id seen."""
    last = after
    while True:
        headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
        if last is not None:
            headers["Last-Event-ID"] = str(last)
        try:
            with httpx.stream("GET", f"{url}/v1/events", headers=headers, timeout=httpx.Timeout(10, read=45)) as r:
                r.raise_for_status()
                data: list[str] = []
                for line in r.iter_lines():
                    if line.startswith(":"):  # the stream's first comment, then heartbeats
                        ready.set()
                    elif line.startswith("data:"):
                        data.append(line[5:].strip())
                    elif line == "" and data:
                        event = PlanEvent.from_dict(json.loads("".join(data)))
                        data = []
                        last = event.id
                        yield event
        except httpx.TransportError as e:
            print(f"stream dropped ({e}); resuming after event {last}", file=sys.stderr)


def main() -> int:
    url = os.environ.get("CORESERVE_URL", "http://127.0.0.1:8080").rstrip("/")
    token = os.environ.get("CORESERVE_TOKEN")
    if not token:
        print("react to events: set CORESERVE_TOKEN", file=sys.stderr)
        return 1
    client = AuthenticatedClient(base_url=url, token=token)
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=2)
    body = PlanBody(
        id=f"react-{uuid.uuid4().hex[:8]}",
        deadline=start + timedelta(days=1),
        not_before=start,
        jobs=[ComputeDemand(name="A", os=os.environ.get("CORESERVE_OS", "linux"), cpus=2, offset_s=0, duration_s=600)],
        transfers=[],
    )
    ready = threading.Event()
    stream = events(url, token, ready)
    booked: dict[str, PlanView] = {}
    # Two threads print: one line at a time.
    printing = threading.Lock()

    def say(line: str) -> None:
        with printing:
            print(line, flush=True)

    def book() -> None:
        ready.wait(10)
        answer = create_plan.sync(client=client, body=body)
        if isinstance(answer, PlanView):
            booked["plan"] = answer
            say(f"booked {body.id}: plan {answer.id}, {answer.status.value}")

    threading.Thread(target=book, daemon=True).start()
    for event in stream:
        if event.request_id != body.id:
            continue  # another plan of ours
        state = getattr(event.jobs[0].state, "value", "-") if event.jobs else "-"
        say(f"event {event.id}: {event.type_} for plan {event.plan_id}, job A {state}")
        if event.type_ == "plan.committed":
            cancel_plan.sync(client=client, id=event.plan_id)
        elif event.type_ in ("plan.cancelled", "plan.rejected", "plan.completed", "plan.broken"):
            say(f"react to events: done ({event.type_})")
            return 0 if event.type_ == "plan.cancelled" else 1
    return 1


if __name__ == "__main__":
    sys.exit(main())
