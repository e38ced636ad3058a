"""`GET /v1/events` (Server-Sent Events) as an iterator of `PlanEvent`s that resumes a dropped
connection with `Last-Event-ID`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from uuid import UUID

import httpx
from coreserve_client.models import PlanEvent

from ._values import normalize
from .errors import ProblemError, UnexpectedAnswer, Unreachable, problem_error


class StreamEnded(httpx.TransportError):
    """The service ended the event stream (it does when its store fails): reconnected like a
    dropped connection."""


class EventStream(Iterator[PlanEvent]):
    """The caller's plan events, in order, each once; made by `coreserve.Client.events()`,
    which opens the stream before returning it.

    Iterating blocks until the next event. A dropped or ended connection is opened again after
    the service's `retry:` delay (2 s) with `Last-Event-ID: <last id seen>`, up to `reconnects`
    times in a row; then `Unreachable` is raised. An error answer when opening raises its
    `ProblemError` (a retryable one, e.g. 503, counts as a drop). `last_id` is the id of the
    last event returned (None before the first): a new stream with `after=last_id` goes on
    from there.
    """

    def __init__(
        self,
        http: httpx.Client,
        *,
        after: int | None,
        plan_id: UUID | None,
        timeout: httpx.Timeout,
        reconnects: int,
    ) -> None:
        if after is not None and after < 0:
            raise ValueError("after must be an event id (>= 0)")
        self._http = http
        self.last_id = after
        self._plan_id = plan_id
        self._timeout = timeout
        self._reconnects = reconnects
        self._retry_s = 2.0
        self._response: httpx.Response | None = None
        self._lines: Iterator[str] | None = None
        self._closed = False
        self._open()

    @property
    def url(self) -> str:
        return str(self._http.base_url.join("/v1/events"))

    def _open(self) -> None:
        headers = {"Accept": "text/event-stream"}
        if self.last_id is not None:
            headers["Last-Event-ID"] = str(self.last_id)
        params = {"plan_id": str(self._plan_id)} if self._plan_id is not None else {}
        request = self._http.build_request("GET", "/v1/events", params=params, headers=headers, timeout=self._timeout)
        try:
            response = self._http.send(request, stream=True)
        except httpx.TransportError as e:
            raise Unreachable("GET", str(request.url), e) from e
        if response.status_code != 200:
            try:
                response.read()
            except httpx.TransportError as e:
                raise Unreachable("GET", str(request.url), e) from e
            finally:
                response.close()
            if response.status_code >= 400:
                raise problem_error(response)
            raise UnexpectedAnswer(response.status_code, "GET", str(request.url), response.content, "not a stream")
        self._response = response
        self._lines = response.iter_lines()

    def _drop(self) -> None:
        if self._response is not None:
            self._response.close()
        self._response = None
        self._lines = None

    def _read_event(self) -> PlanEvent:
        """The next event of the open connection; StreamEnded when the service ends it."""
        assert self._lines is not None
        data: list[str] = []
        for line in self._lines:
            if line == "":
                if data:
                    return self._event("\n".join(data))
                continue
            if line.startswith(":"):
                continue  # `: connected`, `: heartbeat`
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "data":
                data.append(value)
            elif field == "retry" and value.isdigit():
                self._retry_s = int(value) / 1000
            # `id:` and `event:` repeat the data's `id` and `type`
        raise StreamEnded("the service ended the event stream")

    def _event(self, data: str) -> PlanEvent:
        try:
            event = PlanEvent.from_dict(json.loads(data))
        except (ValueError, KeyError, TypeError) as e:
            raise UnexpectedAnswer(200, "GET", self.url, data.encode(), f"not a PlanEvent ({e})") from e
        self.last_id = event.id
        return normalize(event)

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> PlanEvent:
        if self._closed:
            raise StopIteration
        failures = 0
        while True:
            try:
                if self._response is None:
                    self._open()
                return self._read_event()
            except httpx.TransportError as e:
                failure: Exception = Unreachable("GET", self.url, e)
                failure.__cause__ = e
            except Unreachable as e:
                failure = e
            except ProblemError as e:
                if not e.retryable:
                    self._drop()
                    raise
                failure = e
            self._drop()
            failures += 1
            if failures > self._reconnects:
                raise failure
            time.sleep(self._retry_s)

    def close(self) -> None:
        """Closes the connection; iterating then stops."""
        self._closed = True
        self._drop()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
