"""The generated client (coreserve_client) against a live all-in-one service (conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from coreserve_client import AuthenticatedClient
from coreserve_client.api.network import get_network
from coreserve_client.api.ops import healthz, readyz
from coreserve_client.api.plans import cancel_plan, create_plan, get_plan, list_plans, modify_plan
from coreserve_client.api.sites import get_site, list_sites
from coreserve_client.models import (
    ComputeDemand,
    Health,
    JobChange,
    NetworkDemand,
    NetworkView,
    PlanBody,
    PlanModification,
    PlanStatus,
    PlanView,
    Problem,
    Site,
)
from coreserve_client.types import Response, Unset

from conftest import GRID, W_INTERVAL_S, Service, client_for

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "workflow_engine.py"
REACT = Path(__file__).resolve().parents[1] / "examples" / "react_to_events.py"
JOBS = ("A", "B", "C", "D")
EDGES = (("A", "B"), ("A", "C"), ("B", "D"), ("C", "D"))


def diamond(os_name: str = "linux", deadline: datetime | None = None, request_id: str | None = None) -> PlanBody:
    """A -> B, A -> C, B -> D, C -> D: 12-CPU one-hour jobs, 500 Mbit/s ten-minute transfers
    while both ends run. B and C overlap A's last ten minutes and D overlaps theirs."""
    deadline = deadline or datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    offset = {"A": 0, "B": 3000, "C": 3000, "D": 6000}
    return PlanBody(
        id=request_id or f"wf-{uuid.uuid4().hex[:8]}",
        deadline=deadline,
        jobs=[ComputeDemand(name=j, os=os_name, cpus=12, offset_s=offset[j], duration_s=3600) for j in JOBS],
        transfers=[
            NetworkDemand(from_=a, to=b, bandwidth_mbps=500, offset_s=offset[b], duration_s=600) for a, b in EDGES
        ],
    )


def plan_of(resp: Response, status: int) -> PlanView:
    assert resp.status_code == status, resp.content
    assert isinstance(resp.parsed, PlanView), resp.content
    return resp.parsed


def problem_of(resp: Response, status: int, slug: str) -> Problem:
    assert resp.status_code == status, resp.content
    assert resp.headers["content-type"].startswith("application/problem+json")
    assert isinstance(resp.parsed, Problem), resp.content
    assert resp.parsed.status == status
    assert resp.parsed.type_ == f"urn:coreserve:problem:{slug}"
    assert resp.parsed.title and resp.parsed.detail
    return resp.parsed


def my_plans(client: AuthenticatedClient, status: PlanStatus | None = None) -> list[PlanView]:
    resp = list_plans.sync_detailed(client=client, **({"status": status} if status else {}))
    assert resp.status_code == 200, resp.content
    assert isinstance(resp.parsed, list)
    return resp.parsed


def test_probes(service: Service) -> None:
    from coreserve_client import Client

    with Client(base_url=service.base_url) as c:
        assert healthz.sync(client=c) == Health(status="ok")
        ready = readyz.sync(client=c)
        assert isinstance(ready, Health)
        assert (ready.status, ready.store) == ("ready", "memory")


def test_list_and_get_sites(alice: AuthenticatedClient) -> None:
    sites = list_sites.sync(client=alice)
    assert isinstance(sites, list) and all(isinstance(s, Site) for s in sites)
    assert [(s.id, s.node, s.cpus, s.os, s.price_per_cpu_hour) for s in sites] == [
        (s["id"], s["node"], s["cpus"], s["os"], s["price_per_cpu_hour"]) for s in GRID["sites"]
    ]
    s4 = get_site.sync(client=alice, id="s4")
    assert isinstance(s4, Site) and (s4.os, s4.cpus) == ("bsd", 8)
    problem_of(get_site.sync_detailed(client=alice, id="nowhere"), 404, "not-found")


def test_network(alice: AuthenticatedClient) -> None:
    net = get_network.sync(client=alice)
    assert isinstance(net, NetworkView)
    assert sorted(n.id for n in net.nodes) == ["n1", "n2", "n3"]
    assert {(link.id, link.a, link.b, link.capacity_mbps) for link in net.links} == {
        (link["id"], link["a"], link["b"], link["capacity_mbps"]) for link in GRID["links"]
    }


def test_workflow_commit_retry_read_list_cancel(alice: AuthenticatedClient) -> None:
    body = diamond()
    key = f"pytest-{uuid.uuid4()}"
    committed_before = {p.id for p in my_plans(alice, PlanStatus.COMMITTED)}
    sent_at = datetime.now(UTC)

    # Book it.
    resp = create_plan.sync_detailed(client=alice, body=body, idempotency_key=key)
    plan = plan_of(resp, 201)
    assert resp.headers["location"] == f"/v1/plans/{plan.id}"
    assert plan.status == PlanStatus.COMMITTED, plan.reason
    assert (plan.request_id, plan.user) == (body.id, "alice")
    # Absent from the JSON, not null: the client reads UNSET (not None).
    assert isinstance(plan.reason, Unset) and isinstance(plan.cancelled_at, Unset)
    # Always sent (issue 49): a bool in the generated client too, never UNSET.
    assert plan.modification_pending is False
    assert isinstance(plan.start, datetime)
    assert plan.cost > 0 and plan.messages > 0

    # The placements keep the request's shape and the grid's rules.
    jobs = {j.name: j for j in plan.jobs}
    assert sorted(jobs) == list(JOBS)
    linux = {s["id"] for s in GRID["sites"] if s["os"] == "linux"}
    for j in plan.jobs:
        assert j.site in linux and j.cpus == 12
        assert j.end - j.start == timedelta(hours=1)
        assert j.start - plan.start == timedelta(seconds={"A": 0, "B": 3000, "C": 3000, "D": 6000}[j.name])
        assert j.end <= body.deadline
    # No start before the W interval (a second of slack for whole-second timestamps).
    assert plan.start >= sent_at + timedelta(seconds=W_INTERVAL_S - 1)
    # 12 of a site's 16 CPUs: jobs that run at the same time use different sites.
    assert len({jobs["A"].site, jobs["B"].site, jobs["C"].site}) == 3
    assert jobs["D"].site not in {jobs["B"].site, jobs["C"].site}
    assert sorted((t.from_, t.to) for t in plan.transfers) == sorted(EDGES)
    links = {link["id"] for link in GRID["links"]}
    for t in plan.transfers:
        assert t.bandwidth_mbps == 500 and t.end - t.start == timedelta(minutes=10)
        assert t.path and set(t.path) <= links, t  # different nodes: a path over the links
        assert jobs[t.from_].start <= t.start and t.end <= jobs[t.from_].end
        assert jobs[t.to].start <= t.start and t.end <= jobs[t.to].end

    # A retry with the same key and body returns the same plan and books nothing more.
    again = plan_of(create_plan.sync_detailed(client=alice, body=body, idempotency_key=key), 201)
    assert again.id == plan.id and again.status == PlanStatus.COMMITTED
    assert again.jobs == plan.jobs
    committed_after = {p.id for p in my_plans(alice, PlanStatus.COMMITTED)}
    assert committed_after - committed_before == {plan.id}

    # Read it back, and find it in the lists.
    got = plan_of(get_plan.sync_detailed(client=alice, id=plan.id), 200)
    assert (got.id, got.status, got.jobs, got.transfers, got.start) == (
        plan.id,
        PlanStatus.COMMITTED,
        plan.jobs,
        plan.transfers,
        plan.start,
    )
    assert plan.id in {p.id for p in my_plans(alice)}
    window = list_plans.sync(client=alice, from_=plan.start, to=plan.start + timedelta(seconds=1))
    assert isinstance(window, list) and plan.id in {p.id for p in window}
    assert plan.id not in {p.id for p in my_plans(alice, PlanStatus.CANCELLED)}

    # Cancel it: cancelled, idempotently, and readable as such.
    cancelled = plan_of(cancel_plan.sync_detailed(client=alice, id=plan.id), 200)
    assert cancelled.status == PlanStatus.CANCELLED and isinstance(cancelled.cancelled_at, datetime)
    twice = plan_of(cancel_plan.sync_detailed(client=alice, id=plan.id), 200)
    assert (twice.status, twice.cancelled_at) == (PlanStatus.CANCELLED, cancelled.cancelled_at)
    assert plan_of(get_plan.sync_detailed(client=alice, id=plan.id), 200).status == PlanStatus.CANCELLED
    assert plan.id in {p.id for p in my_plans(alice, PlanStatus.CANCELLED)}
    assert plan.id not in {p.id for p in my_plans(alice, PlanStatus.COMMITTED)}

    # The key still answers the first plan, now cancelled; it never books again.
    after = plan_of(create_plan.sync_detailed(client=alice, body=body, idempotency_key=key), 201)
    assert (after.id, after.status) == (plan.id, PlanStatus.CANCELLED)


def test_modify_a_plan_all_or_nothing(alice: AuthenticatedClient) -> None:
    plan = plan_of(create_plan.sync_detailed(client=alice, body=diamond()), 201)
    assert plan.status == PlanStatus.COMMITTED, plan.reason
    # D is the last job: an extra hour fits (nothing depends on its end).
    longer = PlanModification(jobs=[JobChange(name="D", duration_s=7200)])
    modified = plan_of(modify_plan.sync_detailed(client=alice, id=plan.id, body=longer), 200)
    d0, d1 = ({j.name: j for j in p.jobs}["D"] for p in (plan, modified))
    assert (d1.start, d1.end) == (d0.start, d0.end + timedelta(hours=1))
    assert modified.cost > plan.cost
    # More CPUs than any site has: refused, naming the job; nothing changes.
    resp = modify_plan.sync_detailed(client=alice, id=plan.id, body=PlanModification(jobs=[JobChange(name="D", cpus=99)]))
    assert "job `D`" in problem_of(resp, 409, "modification-refused").detail
    assert plan_of(get_plan.sync_detailed(client=alice, id=plan.id), 200).jobs == modified.jobs
    cancel_plan.sync_detailed(client=alice, id=plan.id)


def test_dry_run_is_planned_and_stores_nothing(alice: AuthenticatedClient) -> None:
    before = {p.id for p in my_plans(alice)}
    resp = create_plan.sync_detailed(client=alice, body=diamond(), dry_run=True, idempotency_key=f"dry-{uuid.uuid4()}")
    plan = plan_of(resp, 200)
    assert plan.status == PlanStatus.PLANNED
    assert "location" not in resp.headers
    assert sorted(j.name for j in plan.jobs) == list(JOBS) and len(plan.transfers) == 4
    assert {p.id for p in my_plans(alice)} == before
    problem_of(get_plan.sync_detailed(client=alice, id=plan.id), 404, "not-found")


@pytest.mark.parametrize(
    ("what", "body"),
    [
        ("duplicate job names", PlanBody(deadline=diamond().deadline, jobs=[diamond().jobs[0], diamond().jobs[0]])),
        (
            "a transfer naming an unknown job",
            PlanBody(
                deadline=diamond().deadline,
                jobs=diamond().jobs,
                transfers=[NetworkDemand(from_="A", to="Z", bandwidth_mbps=1, offset_s=0, duration_s=1)],
            ),
        ),
        (
            "0 CPUs (the client does not check the schema's bounds)",
            PlanBody(
                deadline=diamond().deadline, jobs=[ComputeDemand(name="A", os="linux", cpus=0, offset_s=0, duration_s=60)]
            ),
        ),
        ("a deadline beyond the horizon", diamond(deadline=datetime.now(UTC) + timedelta(days=4000))),
        ("a deadline before the earliest end", diamond(deadline=datetime.now(UTC) + timedelta(minutes=30))),
    ],
)
def test_invalid_body_is_a_422_problem(alice: AuthenticatedClient, what: str, body: PlanBody) -> None:
    before = {p.id for p in my_plans(alice)}
    problem = problem_of(create_plan.sync_detailed(client=alice, body=body), 422, "invalid-request")
    assert problem.detail, what
    assert {p.id for p in my_plans(alice)} == before


def test_key_reused_with_another_body_is_422(alice: AuthenticatedClient) -> None:
    key = f"pytest-{uuid.uuid4()}"
    first = plan_of(create_plan.sync_detailed(client=alice, body=diamond(), idempotency_key=key), 201)
    try:
        problem = problem_of(
            create_plan.sync_detailed(client=alice, body=diamond(), idempotency_key=key), 422, "invalid-request"
        )
        assert key in problem.detail
    finally:
        plan_of(cancel_plan.sync_detailed(client=alice, id=first.id), 200)


def test_rejected_plan_and_its_cancel(alice: AuthenticatedClient) -> None:
    # A deadline the model accepts (it leaves the span) but w_interval makes unreachable:
    # planned, rejected with a reason, stored.
    tight = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=9600 + 30)
    plan = plan_of(create_plan.sync_detailed(client=alice, body=diamond(deadline=tight)), 201)
    assert plan.status == PlanStatus.REJECTED
    assert isinstance(plan.reason, str) and plan.reason and isinstance(plan.start, Unset)
    assert plan.jobs == [] and plan.transfers == []
    assert plan.id in {p.id for p in my_plans(alice, PlanStatus.REJECTED)}
    problem_of(cancel_plan.sync_detailed(client=alice, id=plan.id), 409, "plan-not-committed")


def test_a_job_no_site_can_run_is_unsatisfiable(alice: AuthenticatedClient) -> None:
    # No site runs this OS: 422 naming what the nearest site lacks, nothing stored.
    p = problem_of(create_plan.sync_detailed(client=alice, body=diamond(os_name="plan9")), 422, "unsatisfiable")
    assert "lacks OS plan9" in p.detail


def test_auth_errors(service: Service, alice: AuthenticatedClient, bob: AuthenticatedClient) -> None:
    with client_for(service, "cs_not_a_token") as nobody:
        problem_of(list_sites.sync_detailed(client=nobody), 401, "unauthorized")
        problem_of(create_plan.sync_detailed(client=nobody, body=diamond()), 401, "unauthorized")
    problem_of(get_plan.sync_detailed(client=alice, id=uuid.uuid4()), 404, "not-found")
    plan = plan_of(create_plan.sync_detailed(client=alice, body=diamond()), 201)
    try:
        problem_of(get_plan.sync_detailed(client=bob, id=plan.id), 403, "forbidden")
        problem_of(cancel_plan.sync_detailed(client=bob, id=plan.id), 403, "forbidden")
        assert plan.id not in {p.id for p in my_plans(bob)}
    finally:
        plan_of(cancel_plan.sync_detailed(client=alice, id=plan.id), 200)


def run_example(service: Service, token: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CORESERVE_URL=service.base_url, CORESERVE_TOKEN=token, **extra)
    return subprocess.run(
        [sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_example_workflow_engine(service: Service, alice_token: str, alice: AuthenticatedClient) -> None:
    run = run_example(service, alice_token)
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    out = run.stdout
    assert "grid: 4 sites, 3 run linux: s1, s2, s3" in out
    submitted = re.search(r"^submitted (diamond-\w+) \(Idempotency-Key \S+\): committed, plan (\S+)$", out, re.M)
    assert submitted, out
    plan_id = submitted.group(2)
    assert re.search(rf"^plan {plan_id}: committed, request {submitted.group(1)}, start \S+Z, cost ", out, re.M)
    job_lines = re.findall(r"^  job ([ABCD]): site (s[123]), \S+Z -> \S+Z, 12 CPUs$", out, re.M)
    assert sorted(name for name, _ in job_lines) == list(JOBS), out
    transfer_lines = re.findall(r"^  transfer (\w) -> (\w): 500 Mbit/s, \S+Z -> \S+Z, links (.+)$", out, re.M)
    assert sorted((a, b) for a, b, _ in transfer_lines) == sorted(EDGES), out
    assert all(re.fullmatch(r"l\d\d( -> l\d\d)*", path) for _, _, path in transfer_lines), out
    assert re.search(rf"^cancelled plan {plan_id}: cancelled at \S+Z$", out, re.M), out
    assert out.rstrip().endswith("workflow engine: done")
    # What the example printed is what the service holds.
    stored = plan_of(get_plan.sync_detailed(client=alice, id=uuid.UUID(plan_id)), 200)
    assert stored.status == PlanStatus.CANCELLED and stored.request_id == submitted.group(1)
    assert sorted(job_lines) == sorted((j.name, j.site) for j in stored.jobs)


def test_example_fails_clearly(service: Service, alice_token: str) -> None:
    run = run_example(service, alice_token, CORESERVE_OS="plan9")
    assert run.returncode == 1
    assert "no site runs plan9: set CORESERVE_OS to one of ['bsd', 'linux']" in run.stderr
    run = run_example(service, "cs_not_a_token")
    assert run.returncode == 1
    assert "workflow engine: listing sites:" in run.stderr and "token" in run.stderr.lower()
    env = {k: v for k, v in os.environ.items() if k != "CORESERVE_TOKEN"}
    missing = subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "CORESERVE_TOKEN is not set" in missing.stderr


def test_example_reacts_to_events(service: Service, alice_token: str) -> None:
    """The event-driven example books a plan, sees it committed on the stream, cancels it, and
    sees it cancelled, with its job's state in each event."""
    env = dict(os.environ, CORESERVE_URL=service.base_url, CORESERVE_TOKEN=alice_token)
    run = subprocess.run([sys.executable, str(REACT)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    out = run.stdout
    booked = re.search(r"^booked (react-\w+): plan (\S+), committed$", out, re.M)
    assert booked, out
    plan_id = booked.group(2)
    assert re.search(rf"^event \d+: plan.committed for plan {plan_id}, job A scheduled$", out, re.M), out
    assert re.search(rf"^event \d+: plan.cancelled for plan {plan_id}, job A cancelled$", out, re.M), out
    assert out.rstrip().endswith("react to events: done (plan.cancelled)")
