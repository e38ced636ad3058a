"""The hand-written layer `coreserve` (clients/python/coreserve) against the live service of
conftest.py, and against tiny fake servers for what the live one never does (no answer, a
dropped connection, a proxy's error page).

Regression tests of issue 29 ("a user's first hour"): `site_availability` needs no window; an
absent `reason` (and `start`, `cancelled_at`, ...) reads None, not `Unset`; no answer is
`coreserve.Unreachable`, not a raw `httpx.ConnectError`; every call returns its model or raises,
never `PlanView | Problem | None`; a naive datetime is refused with a clear ValueError.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import coreserve
import httpx
import pytest
from coreserve.models import (
    AvailabilityView,
    ComputeDemand,
    JobChange,
    NetworkView,
    PlanBody,
    PlanEvent,
    PlanModification,
    PlanStatus,
    PlanView,
    RouteAnswer,
    Site,
    WhoAmI,
)
from coreserve_client.api.sites import site_availability
from coreserve_client.types import Unset

from conftest import GRID, W_INTERVAL_S, Service, new_token
from test_client import diamond


@pytest.fixture(scope="module")
def cs(service: Service, alice_token: str) -> Iterator[coreserve.Client]:
    with coreserve.Client(service.base_url, alice_token, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def cs_carol(service: Service, admin) -> Iterator[coreserve.Client]:
    with coreserve.Client(service.base_url, new_token(admin, "carol"), timeout=60) as c:
        yield c


def one_job(request_id: str | None = None, cpus: int = 2) -> PlanBody:
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=2)
    return PlanBody(
        id=request_id or f"erg-{uuid.uuid4().hex[:8]}",
        deadline=start + timedelta(days=1),
        not_before=start,
        jobs=[ComputeDemand(name="A", os="linux", cpus=cpus, offset_s=0, duration_s=600)],
        transfers=[],
    )


def no_unset(obj: object) -> None:
    """Fails if any field of a model (nested too) still holds `Unset`."""
    if isinstance(obj, list):
        for item in obj:
            no_unset(item)
    elif hasattr(obj, "__attrs_attrs__"):
        for field in obj.__attrs_attrs__:
            value = getattr(obj, field.name)
            assert not isinstance(value, Unset), f"{type(obj).__name__}.{field.name} is Unset"
            no_unset(value)


# -- a successful call returns the model itself --------------------------------------------------


def test_success_returns_the_model_itself(cs: coreserve.Client) -> None:
    me = cs.whoami()
    assert type(me) is WhoAmI and (me.user, me.admin, me.service) == ("alice", False, False)
    no_unset(me)
    sites = cs.sites()
    assert type(sites) is list and all(type(s) is Site for s in sites)
    assert [s.id for s in sites] == [s["id"] for s in GRID["sites"]]
    s4 = cs.site("s4")
    assert type(s4) is Site and (s4.os, s4.cpus) == ("bsd", 8)
    assert type(cs.network()) is NetworkView
    route = cs.route("s1", "s2", 100)  # the CLI's default interval: in an hour, for an hour
    assert type(route) is RouteAnswer and route.route is not None
    assert cs.route("s1", "s2", 100_000).route is None  # more than any link: none, not UNSET


# -- site_availability without from_/to ----------------------------------------------------------


def test_site_availability_defaults_its_window_as_the_cli(cs: coreserve.Client) -> None:
    # The generated function needs the window (what issue 29 reported) ...
    with pytest.raises(TypeError):
        site_availability.sync("s1", client=cs.generated, cpus=4, duration_s=3600)  # type: ignore[call-arg]
    # ... the layer defaults it: from now, for 7 days.
    asked = datetime.now(UTC)
    a = cs.site_availability("s1", cpus=4, duration_s=3600)
    assert type(a) is AvailabilityView and a.site == "s1" and a.price_per_cpu_hour == 1.0
    assert isinstance(a.earliest_start, datetime) and a.earliest_start.tzinfo is not None
    # Never before now + the W interval (a second of slack for whole seconds).
    assert asked + timedelta(seconds=W_INTERVAL_S - 1) <= a.earliest_start
    assert a.earliest_start < asked + coreserve.AVAILABILITY_WINDOW
    assert a.gpu_model is None  # absent (no GPUs asked): None, not UNSET
    # Only `to`, or only `from_`: the other is defaulted.
    later = asked + timedelta(days=1)
    b = cs.site_availability("s1", 4, 3600, from_=later)
    assert b.earliest_start is not None and b.earliest_start >= later.replace(microsecond=0)
    c = cs.site_availability("s1", 4, 3600, to=asked + timedelta(days=2))
    assert c.earliest_start is not None
    # A window too short for the job: no start, read as None.
    short = cs.site_availability("s1", 4, 3600, from_=later, to=later + timedelta(minutes=30))
    assert short.earliest_start is None


# -- absent fields read None ---------------------------------------------------------------------


def test_absent_reason_start_cancelled_at_read_none(cs: coreserve.Client) -> None:
    plan = cs.create_plan(diamond())
    assert type(plan) is PlanView and plan.status == PlanStatus.COMMITTED
    # The generated client reads these UNSET (test_client.py); here they are None.
    assert plan.reason is None and plan.cancelled_at is None
    assert isinstance(plan.start, datetime) and isinstance(plan.deadline, datetime)
    no_unset(plan)
    listed = {p.id: p for p in cs.list_plans()}
    assert listed[plan.id].reason is None
    no_unset(list(listed.values()))
    cancelled = cs.cancel_plan(plan.id)
    assert cancelled.status == PlanStatus.CANCELLED and isinstance(cancelled.cancelled_at, datetime)
    assert cancelled.reason is None


def test_modification_pending_is_a_bool_false_when_nothing_is_pending(cs: coreserve.Client) -> None:
    # Issue 49: the service sends `modification_pending` always; it reads False, never None.
    plan = cs.create_plan(diamond())
    try:
        for view in [plan, cs.get_plan(plan.id), *[p for p in cs.list_plans() if p.id == plan.id]]:
            assert view.modification_pending is False, view
        modified = cs.modify_plan(plan.id, PlanModification(jobs=[JobChange(name="D", duration_s=7200)]))
        assert modified.modification_pending is False
        assert cs.dry_run(one_job()).modification_pending is False
    finally:
        assert cs.cancel_plan(plan.id).modification_pending is False


def test_rejected_plan_has_a_reason_and_no_start(cs: coreserve.Client) -> None:
    # A deadline the model accepts but w_interval makes unreachable: rejected, stored.
    tight = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=9600 + 30)
    plan = cs.create_plan(diamond(deadline=tight))
    assert plan.status == PlanStatus.REJECTED  # an answer, not an exception
    assert isinstance(plan.reason, str) and plan.reason
    assert plan.start is None and plan.cancelled_at is None
    assert plan.jobs == [] and plan.transfers == []
    no_unset(plan)
    again = cs.get_plan(plan.id)
    assert (again.reason, again.start) == (plan.reason, None)


# -- problems raise ProblemError with the slug ---------------------------------------------------


def test_problems_raise_with_their_slug(service: Service, cs: coreserve.Client, cs_carol: coreserve.Client) -> None:
    with pytest.raises(coreserve.NotFound) as e404:
        cs.get_plan(uuid.uuid4())
    e = e404.value
    assert isinstance(e, coreserve.ProblemError) and isinstance(e, coreserve.CoreserveError)
    assert (e.status, e.slug, e.type) == (404, "not-found", "urn:coreserve:problem:not-found")
    assert e.title and e.detail and str(e) == f"404 not-found: {e.detail}"
    assert e.method == "GET" and e.url and "/v1/plans/" in e.url and not e.retryable
    with pytest.raises(coreserve.NotFound):
        cs.site("nowhere")

    # 409: cancelling a rejected plan.
    tight = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=9600 + 30)
    rejected = cs.create_plan(diamond(deadline=tight))
    with pytest.raises(coreserve.Conflict) as e409:
        cs.cancel_plan(rejected.id)
    assert (e409.value.status, e409.value.slug) == (409, "plan-not-committed")

    # 422: an invalid body, an unsatisfiable one, a window that ends before it starts.
    dup = PlanBody(deadline=diamond().deadline, jobs=[diamond().jobs[0], diamond().jobs[0]])
    with pytest.raises(coreserve.Invalid) as e422:
        cs.create_plan(dup)
    assert (e422.value.status, e422.value.slug) == (422, "invalid-request") and e422.value.detail
    with pytest.raises(coreserve.Invalid) as unsat:
        cs.create_plan(diamond(os_name="plan9"))
    assert unsat.value.slug == "unsatisfiable" and "lacks OS plan9" in unsat.value.detail
    now = datetime.now(UTC)
    with pytest.raises(coreserve.Invalid) as window:
        cs.site_availability("s1", 1, 60, from_=now + timedelta(hours=2), to=now + timedelta(hours=1))
    assert window.value.status == 422

    # 401 and 403.
    with coreserve.Client(service.base_url, "cs_not_a_token") as nobody:
        with pytest.raises(coreserve.Unauthorized) as e401:
            nobody.sites()
    assert (e401.value.status, e401.value.slug) == (401, "unauthorized")
    plan = cs.create_plan(diamond())
    try:
        with pytest.raises(coreserve.Forbidden) as e403:
            cs_carol.get_plan(plan.id)
        assert (e403.value.status, e403.value.slug) == (403, "forbidden")
    finally:
        cs.cancel_plan(plan.id)


def test_modify_plan(cs: coreserve.Client) -> None:
    plan = cs.create_plan(diamond())
    try:
        longer = cs.modify_plan(plan.id, PlanModification(jobs=[JobChange(name="D", duration_s=7200)]))
        assert type(longer) is PlanView and longer.id == plan.id and longer.cost > plan.cost
        with pytest.raises(coreserve.Conflict) as refused:
            cs.modify_plan(str(plan.id), PlanModification(jobs=[JobChange(name="D", cpus=99)]))
        assert refused.value.slug == "modification-refused" and "job `D`" in refused.value.detail
        assert cs.get_plan(plan.id).jobs == longer.jobs  # nothing changed
    finally:
        cs.cancel_plan(plan.id)


# -- plans: key, dry run, by request id, list, cancel --------------------------------------------


def test_create_with_key_dry_run_read_list_cancel(cs: coreserve.Client) -> None:
    body = one_job()
    before = {p.id for p in cs.list_plans()}
    dry = cs.dry_run(body)
    assert dry.status == PlanStatus.PLANNED and {p.id for p in cs.list_plans()} == before

    key = f"erg-{uuid.uuid4()}"
    plan = cs.create_plan(body, idempotency_key=key, retries=3)
    assert plan.status == PlanStatus.COMMITTED, plan.reason
    again = cs.create_plan(body, idempotency_key=key)
    assert again.id == plan.id  # the same plan, booked once
    with pytest.raises(coreserve.Invalid):  # the key with another body
        cs.create_plan(one_job(), idempotency_key=key)

    assert cs.get_plan(plan.id).id == plan.id
    assert cs.get_plan(str(plan.id)).id == plan.id
    assert cs.get_plan_by_request_id(body.id).id == plan.id
    with pytest.raises(coreserve.NotFound):
        cs.get_plan_by_request_id(f"no-such-{uuid.uuid4()}")
    with pytest.raises(ValueError, match="get_plan_by_request_id"):
        cs.get_plan(body.id)  # a request id is not a plan id: said before sending
    assert plan.id in {p.id for p in cs.list_plans(status="committed")}
    assert plan.id in {p.id for p in cs.list_plans(status=PlanStatus.COMMITTED, request_id=body.id)}
    assert plan.id in {p.id for p in cs.list_plans(from_=plan.start, to=plan.start + timedelta(seconds=1))}

    cancelled = cs.cancel_plan(plan.id)
    assert cancelled.status == PlanStatus.CANCELLED
    assert cs.cancel_plan(plan.id).cancelled_at == cancelled.cancelled_at  # idempotent
    assert plan.id in {p.id for p in cs.list_plans(status="cancelled")}

    with pytest.raises(ValueError, match="idempotency_key"):
        cs.create_plan(one_job(), retries=2)  # a blind resend could book twice


# -- naive datetimes -----------------------------------------------------------------------------


def test_naive_datetimes_are_refused_before_sending(cs: coreserve.Client) -> None:
    before = {p.id for p in cs.list_plans()}
    naive = datetime.now() + timedelta(days=1)  # local time, or UTC? The layer does not guess.
    body = one_job()
    body.deadline = naive
    with pytest.raises(ValueError, match=r"body\.deadline is a naive datetime"):
        cs.create_plan(body)
    body = one_job()
    body.not_before = datetime.now()
    with pytest.raises(ValueError, match=r"body\.not_before is a naive datetime.*datetime\.now\(UTC\)"):
        cs.create_plan(body)
    with pytest.raises(ValueError, match="from_ is a naive datetime"):
        cs.site_availability("s1", 1, 60, from_=datetime.now())
    with pytest.raises(ValueError, match="to is a naive datetime"):
        cs.site_availability("s1", 1, 60, to=datetime.now() + timedelta(days=1))
    with pytest.raises(ValueError, match="from_ is a naive datetime"):
        cs.list_plans(from_=datetime.now())
    with pytest.raises(ValueError, match="start is a naive datetime"):
        cs.route("s1", "s2", 1, start=datetime.now())
    with pytest.raises(ValueError, match=r"change\.start is a naive datetime"):
        cs.modify_plan(uuid.uuid4(), PlanModification(start=datetime.now()))
    assert {p.id for p in cs.list_plans()} == before  # nothing was sent
    # The same times made aware work, in any zone.
    aware = datetime.now(UTC).astimezone()  # the local zone, with its offset
    assert cs.site_availability("s1", 1, 60, from_=aware).earliest_start is not None


# -- no answer: Unreachable ----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_stopped_server_is_unreachable_not_connect_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there any more
    with coreserve.Client(url, "cs_token", timeout=5) as c:
        for call in (
            c.whoami,
            c.sites,
            lambda: c.site_availability("s1", 1, 60),
            lambda: c.create_plan(one_job()),
            lambda: c.get_plan(uuid.uuid4()),
            lambda: c.cancel_plan(uuid.uuid4()),
            c.list_plans,
            c.events,
        ):
            with pytest.raises(coreserve.Unreachable) as e:
                call()
            assert not isinstance(e.value, httpx.HTTPError)
            assert isinstance(e.value.cause, httpx.ConnectError) and e.value.__cause__ is e.value.cause
            assert e.value.url.startswith(url + "/v1/") and url in str(e.value)


def test_retries_with_a_key_give_up_unreachable() -> None:
    with coreserve.Client(f"http://127.0.0.1:{free_port()}", "cs_token", timeout=5) as c:
        t0 = time.monotonic()
        with pytest.raises(coreserve.Unreachable):
            c.create_plan(one_job(), idempotency_key="k", retries=2, max_wait_s=0.1)
        assert time.monotonic() - t0 >= 0.2  # it waited between the attempts


class FakeServer:
    """A server on 127.0.0.1 that answers each connection with `handle(conn)`."""

    def __init__(self, handle) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.handle = handle
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                self.handle(conn)

    def close(self) -> None:
        self.sock.close()


def test_dropped_and_silent_connections_are_unreachable() -> None:
    drop = FakeServer(lambda conn: None)  # reads the request, closes without a word
    silent = FakeServer(lambda conn: time.sleep(2))
    try:
        with coreserve.Client(drop.url, "cs_token", timeout=5) as c:
            with pytest.raises(coreserve.Unreachable) as e:
                c.sites()
            assert isinstance(e.value.cause, httpx.RemoteProtocolError)
        with coreserve.Client(silent.url, "cs_token", timeout=0.3) as c:
            with pytest.raises(coreserve.Unreachable) as e:
                c.sites()
            assert isinstance(e.value.cause, httpx.ReadTimeout)
    finally:
        drop.close()
        silent.close()


def answer(status: str, ctype: str, body: bytes):
    def handle(conn: socket.socket) -> None:
        head = f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        conn.sendall(head.encode() + body)

    return handle


def test_a_proxys_pages_are_problems_or_unexpected_answers() -> None:
    page = b"<html><body>502 Bad Gateway</body></html>"
    bad_gateway = FakeServer(answer("502 Bad Gateway", "text/html", page))
    # 503 is a status the document declares with a problem body: an HTML one must not crash.
    html_503 = FakeServer(answer("503 Service Unavailable", "text/html", b"<html>down</html>"))
    html_200 = FakeServer(answer("200 OK", "text/html", b"<html>a login page</html>"))
    try:
        with coreserve.Client(bad_gateway.url, "t") as c, pytest.raises(coreserve.Unavailable) as e:
            c.sites()
        assert (e.value.status, e.value.slug, e.value.title) == (502, "about:blank", "Bad Gateway")
        assert "502 Bad Gateway" in e.value.detail and e.value.retryable
        with coreserve.Client(html_503.url, "t") as c, pytest.raises(coreserve.Unavailable) as e:
            c.get_plan(uuid.uuid4())
        assert (e.value.status, e.value.slug) == (503, "about:blank")
        with coreserve.Client(html_200.url, "t") as c, pytest.raises(coreserve.UnexpectedAnswer) as u:
            c.sites()
        assert u.value.status == 200 and b"login" in u.value.content
    finally:
        for s in (bad_gateway, html_503, html_200):
            s.close()


# -- events --------------------------------------------------------------------------------------


def test_events_follow_a_plan_and_resume(cs: coreserve.Client) -> None:
    body = one_job()
    with cs.events() as stream:  # open before booking: nothing of the new plan is missed
        plan = cs.create_plan(body)
        assert plan.status == PlanStatus.COMMITTED
        committed = next(e for e in stream if e.request_id == body.id)
        assert type(committed) is PlanEvent and committed.type_ == "plan.committed"
        assert committed.plan_id == plan.id and stream.last_id == committed.id
        no_unset(committed)
    cs.cancel_plan(plan.id)
    # A new stream after the last id seen: the cancel, and nothing before it again.
    with cs.events(after=committed.id, plan_id=plan.id) as resumed:
        cancelled = next(iter(resumed))
        assert (cancelled.type_, cancelled.plan_id) == ("plan.cancelled", plan.id)
        assert cancelled.id > committed.id


def test_a_failing_http_server_for_events() -> None:
    # The stream's open answers 401 with a problem: raised, not retried.
    problem = (
        b'{"type":"urn:coreserve:problem:unauthorized","title":"Authentication required","status":401,"detail":"no"}'
    )
    server = FakeServer(answer("401 Unauthorized", "application/problem+json", problem))
    try:
        with coreserve.Client(server.url, "t") as c, pytest.raises(coreserve.Unauthorized) as e:
            c.events()
        assert e.value.slug == "unauthorized" and e.value.detail == "no"
    finally:
        server.close()
