"""`coreserve.Client`: the operations a workflow engine uses, each returning its model or
raising a `coreserve.errors.CoreserveError`."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from types import ModuleType
from typing import Any, TypeVar
from uuid import UUID

import httpx
from coreserve_client import AuthenticatedClient
from coreserve_client.api.network import get_network, get_route
from coreserve_client.api.plans import cancel_plan, create_plan, get_plan, list_plans, modify_plan
from coreserve_client.api.sites import get_site, list_sites, site_availability
from coreserve_client.api.tokens import whoami
from coreserve_client.models import (
    AvailabilityView,
    NetworkView,
    PlanBody,
    PlanModification,
    PlanStatus,
    PlanView,
    Problem,
    RouteAnswer,
    Site,
    WhoAmI,
)
from coreserve_client.types import UNSET

from ._values import UTC, aware, check_aware, normalize, whole_seconds
from .errors import NotFound, ProblemError, UnexpectedAnswer, Unreachable, problem_error
from .events import EventStream

T = TypeVar("T")

#: The window of `site_availability` when `to` is not given, as `coreserve availability`.
AVAILABILITY_WINDOW = timedelta(days=7)
#: `route`'s defaults, as `coreserve route`: from one hour from now, for one hour.
ROUTE_START_IN = timedelta(hours=1)
ROUTE_LENGTH = timedelta(hours=1)


def _uuid(value: UUID | str, name: str) -> UUID:
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value))
    except ValueError:
        raise ValueError(
            f"{name} must be a plan's UUID (PlanView.id), not {value!r}; "
            "a request's own id (PlanBody.id) is found with get_plan_by_request_id"
        ) from None


class Client:
    """A coreserve service at `base_url`, called with a bearer `token`.

        with coreserve.Client("http://127.0.0.1:8080", token, timeout=60) as cs:
            plan = cs.create_plan(body, idempotency_key="wf-42")   # a PlanView, or an exception

    Every method returns the success model of the generated package (`coreserve_client.models`)
    and raises `coreserve.ProblemError` (a subclass per kind: `NotFound`, `Conflict`,
    `Invalid`, ...) for an error answer, `coreserve.Unreachable` when there is no answer.
    Fields the answer leaves out read None (lists: []), never `UNSET`. Times must be
    timezone-aware (a naive datetime is a ValueError, before anything is sent).

    `timeout` is in seconds (or an `httpx.Timeout`) for each request; `verify_ssl` and
    `httpx_args` go to the underlying `httpx.Client`. `generated` is the generated package's
    `AuthenticatedClient` for any operation this layer does not wrap.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float | httpx.Timeout = 60.0,
        verify_ssl: bool | str = True,
        httpx_args: Mapping[str, Any] | None = None,
    ) -> None:
        if not token:
            raise ValueError("token is empty: pass a bearer token of the service (POST /v1/tokens makes one)")
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self.generated = AuthenticatedClient(
            base_url=self.base_url,
            token=token,
            timeout=self._timeout,
            verify_ssl=verify_ssl,
            httpx_args=dict(httpx_args or {}),
        )

    def __repr__(self) -> str:
        return f"coreserve.Client({self.base_url!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connections (also done by `with`)."""
        self.generated.get_httpx_client().close()

    # -- the one way every call goes --------------------------------------------------------

    def _call(self, operation: ModuleType, **kwargs: Any) -> Any:
        """Sends one operation of the generated package and returns its parsed success model,
        with no `Unset` left. It uses the module's request builder and parser (the same that
        its `sync_detailed` uses) so that the raw answer is at hand for the errors."""
        request = operation._get_kwargs(**kwargs)
        http = self.generated.get_httpx_client()
        try:
            response = http.request(**request)
        except httpx.TransportError as e:
            raise Unreachable(request["method"].upper(), self._url_of(e, request["url"]), e) from e
        return self._parsed(operation, response)

    def _parsed(self, operation: ModuleType, response: httpx.Response) -> Any:
        method, url = response.request.method, str(response.request.url)
        if response.status_code >= 400:
            raise problem_error(response)
        if not 200 <= response.status_code < 300:
            raise UnexpectedAnswer(response.status_code, method, url, response.content, "not a success")
        try:
            parsed = operation._build_response(client=self.generated, response=response).parsed
        except (ValueError, KeyError, TypeError) as e:
            raise UnexpectedAnswer(response.status_code, method, url, response.content, f"unreadable ({e})") from e
        if parsed is None or isinstance(parsed, Problem):
            raise UnexpectedAnswer(response.status_code, method, url, response.content, "not the documented model")
        return normalize(parsed)

    def _url_of(self, error: httpx.TransportError, path: str) -> str:
        try:
            return str(error.request.url)
        except RuntimeError:  # raised before a request existed
            return self.base_url + path

    # -- identity, sites, network -----------------------------------------------------------

    def whoami(self) -> WhoAmI:
        """Whom the token acts as (`user`, `admin`, `service`, `planner`, `token_id`)."""
        return self._call(whoami)

    def sites(self) -> list[Site]:
        """Every site of the grid."""
        return self._call(list_sites)

    def site(self, site: str) -> Site:
        """One site; `NotFound` if there is none of that id."""
        return self._call(get_site, id=site)

    def network(self) -> NetworkView:
        """The grid's nodes and links."""
        return self._call(get_network)

    def site_availability(
        self,
        site: str,
        cpus: int,
        duration_s: int,
        from_: datetime | None = None,
        to: datetime | None = None,
        *,
        gpus: int | None = None,
        min_gpu_compute_capability: float | None = None,
    ) -> AvailabilityView:
        """The earliest start at `site` of `cpus` CPUs (and `gpus` GPUs of one pool) for
        `duration_s` seconds inside the window [`from_`, `to`], with its price and utilisation.
        `earliest_start` is None when nothing fits in the window.

        The window defaults as `coreserve availability` does: `from_` now, `to` seven days
        after `from_` (`AVAILABILITY_WINDOW`). Nothing starts before now + the broker's W
        interval, whatever the window. Times are sent in whole seconds, UTC."""
        start = whole_seconds(aware(from_, "from_")) if from_ is not None else whole_seconds(datetime.now(UTC))
        end = whole_seconds(aware(to, "to")) if to is not None else start + AVAILABILITY_WINDOW
        return self._call(
            site_availability,
            id=site,
            from_=start,
            to=end,
            cpus=cpus,
            duration_s=duration_s,
            gpus=UNSET if gpus is None else gpus,
            min_gpu_compute_capability=UNSET if min_gpu_compute_capability is None else min_gpu_compute_capability,
        )

    def route(
        self,
        from_site: str,
        to_site: str,
        bandwidth_mbps: int,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> RouteAnswer:
        """The NIS's path between two sites for `bandwidth_mbps` over [`start`, `end`]
        (`route` is None when no path has the bandwidth free). Defaults as `coreserve route`:
        `start` in one hour, `end` one hour after `start`."""
        s = (
            whole_seconds(aware(start, "start"))
            if start is not None
            else whole_seconds(datetime.now(UTC)) + ROUTE_START_IN
        )
        e = whole_seconds(aware(end, "end")) if end is not None else s + ROUTE_LENGTH
        return self._call(
            get_route, from_site=from_site, to_site=to_site, bandwidth_mbps=bandwidth_mbps, start=s, end=e
        )

    # -- plans ------------------------------------------------------------------------------

    def create_plan(
        self,
        body: PlanBody,
        *,
        idempotency_key: str | None = None,
        dry_run: bool = False,
        retries: int = 0,
        max_wait_s: float = 10.0,
    ) -> PlanView:
        """Books `body` (POST /v1/plans) and returns the stored plan: its `status` is
        `committed`, or `rejected` with a `reason` (a rejection is an answer, not an
        exception). With `dry_run` the plan is only planned (`planned`, nothing booked or
        stored).

        With an `idempotency_key`, sending the same body again returns the same plan and never
        books twice; `retries` > 0 does that here on a retryable answer (`e.retryable`: a
        request with this key in progress, a pending plan, 429, 503, ...) or no answer
        (`Unreachable`), after the `Retry-After` the service sends (at most `max_wait_s`).
        Without a key, `retries` must be 0: a blind resend could book twice."""
        check_aware(body, "body")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        if retries and idempotency_key is None:
            raise ValueError("retries need an idempotency_key: without one, a resent plan could be booked twice")
        attempt = 0
        while True:
            try:
                return self._call(
                    create_plan,
                    body=body,
                    dry_run=True if dry_run else UNSET,
                    idempotency_key=UNSET if idempotency_key is None else idempotency_key,
                )
            except Unreachable:
                if attempt >= retries:
                    raise
                wait = 1.0
            except ProblemError as e:
                if attempt >= retries or not e.retryable:
                    raise
                wait = e.retry_after or 1.0
            attempt += 1
            time.sleep(min(wait, max_wait_s))

    def dry_run(self, body: PlanBody, *, idempotency_key: str | None = None) -> PlanView:
        """Plans `body` without booking or storing anything: a `planned` (or `rejected`)
        PlanView. The same as `create_plan(body, dry_run=True)`."""
        return self.create_plan(body, idempotency_key=idempotency_key, dry_run=True)

    def get_plan(self, plan_id: UUID | str) -> PlanView:
        """A plan by its id (`PlanView.id`, a UUID or its text); `NotFound` if there is none,
        `Forbidden` if it is another user's."""
        return self._call(get_plan, id=_uuid(plan_id, "plan_id"))

    def get_plan_by_request_id(self, request_id: str) -> PlanView:
        """The newest of the caller's plans whose request had this `id` (`PlanBody.id`, echoed as
        `request_id`). `NotFound` (made here, status 404, slug `not-found`) if there is none."""
        plans = self.list_plans(request_id=request_id)
        if not plans:
            raise NotFound(
                status=404,
                type="urn:coreserve:problem:not-found",
                title="No such resource",
                detail=f"no plan of yours has request id `{request_id}`",
                method="GET",
                url=f"{self.base_url}/v1/plans",
            )
        return max(plans, key=lambda p: p.created_at)

    def list_plans(
        self,
        *,
        status: PlanStatus | str | None = None,
        from_: datetime | None = None,
        to: datetime | None = None,
        request_id: str | None = None,
    ) -> list[PlanView]:
        """The caller's plans (an admin's: everyone's), oldest first; only those of a `status`
        (`committed`, `rejected`, ...), of a `request_id`, or booked in [`from_`, `to`] when
        given."""
        return self._call(
            list_plans,
            status=UNSET if status is None else PlanStatus(status),
            from_=UNSET if from_ is None else aware(from_, "from_"),
            to=UNSET if to is None else aware(to, "to"),
            request_id=UNSET if request_id is None else request_id,
        )

    def cancel_plan(self, plan_id: UUID | str) -> PlanView:
        """Cancels a committed plan and releases what it booked: the plan, `cancelled`, with
        `cancelled_at`. Idempotent (a cancelled plan answers the same). `Conflict` with slug
        `plan-not-committed` for a rejected plan, `plan-pending` (retryable) for a pending one."""
        return self._call(cancel_plan, id=_uuid(plan_id, "plan_id"))

    def modify_plan(
        self, plan_id: UUID | str, change: PlanModification, *, idempotency_key: str | None = None
    ) -> PlanView:
        """Changes a committed plan all or nothing (jobs' CPUs, lengths, offsets, transfers,
        start) and returns it as it is now. `Conflict` with slug `modification-refused` (and
        nothing changed) when the new shape does not fit."""
        check_aware(change, "change")
        return self._call(
            modify_plan,
            id=_uuid(plan_id, "plan_id"),
            body=change,
            idempotency_key=UNSET if idempotency_key is None else idempotency_key,
        )

    # -- events -----------------------------------------------------------------------------

    def events(
        self,
        *,
        after: int | None = None,
        plan_id: UUID | str | None = None,
        read_timeout_s: float = 45.0,
        reconnects: int = 5,
    ) -> EventStream:
        """The caller's plan events (`GET /v1/events`) as an iterator of `PlanEvent`s.

        The stream is open when this returns: every event after this moment (or after event
        `after`) comes, so book after opening it to see all of a new plan's events. A dropped
        connection is opened again with `Last-Event-ID` (nothing missed, nothing twice) up to
        `reconnects` times in a row before `Unreachable` is raised. `plan_id` keeps one plan's
        events. The service sends a heartbeat every 15 s; `read_timeout_s` is how long a
        silent connection is trusted. Close it with `close()` or `with`."""
        return EventStream(
            self.generated.get_httpx_client(),
            after=after,
            plan_id=None if plan_id is None else _uuid(plan_id, "plan_id"),
            timeout=httpx.Timeout(
                connect=self._timeout.connect, read=read_timeout_s, write=self._timeout.write, pool=self._timeout.pool
            ),
            reconnects=reconnects,
        )
