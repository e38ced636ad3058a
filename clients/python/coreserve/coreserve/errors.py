"""The exceptions of `coreserve`: every failure of a call is one of these, never a raw httpx
exception and never a `Problem` returned in place of the model.

    CoreserveError
    ├── ProblemError          the service answered with an error status (RFC 9457 problem)
    │   ├── Invalid           400, 413, 415, 422: the request is malformed or not valid
    │   ├── Unauthorized      401: no token, or not a token of this service
    │   ├── Forbidden         403: the token may not do this
    │   ├── NotFound          404
    │   ├── Conflict          409: the resource's state forbids it (`e.slug` says which)
    │   └── Unavailable       408, 429, 502, 503, 504: try again later (`e.retry_after`)
    ├── Unreachable           no answer: connection refused, DNS, TLS, timeout, dropped
    └── UnexpectedAnswer      an answer that is not the API's (e.g. a proxy's HTML page as a 200)
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

import httpx

PROBLEM_PREFIX = "urn:coreserve:problem:"

# Statuses after which the same request may succeed later (with the same Idempotency-Key).
_RETRYABLE_STATUSES = frozenset({408, 429, 502, 503, 504})


class CoreserveError(Exception):
    """Base class of every error this package raises."""


class ProblemError(CoreserveError):
    """The service answered with an error status. Its RFC 9457 problem details are here:

    - `status`: the HTTP status (int);
    - `type`: the problem kind's URI, e.g. `urn:coreserve:problem:not-found`;
    - `slug`: the last part of a coreserve `type` (`not-found`, `invalid-request`,
      `plan-not-committed`, ...), stable to match on; `type` itself for other URIs
      (`about:blank` when the body was not a problem document, e.g. a proxy's error page);
    - `title`: the kind's short summary; `detail`: what went wrong this time;
    - `retry_after`: the `Retry-After` header in seconds, or None;
    - `participant_error`: the participant protocol's error object (a dict), or None;
    - `method`, `url`: the request that failed.

    The subclass depends on the status only (see the module's docstring); `str(e)` reads
    `<status> <slug>: <detail>`.
    """

    def __init__(
        self,
        *,
        status: int,
        type: str,
        title: str,
        detail: str,
        retry_after: float | None = None,
        participant_error: dict[str, Any] | None = None,
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        self.status = status
        self.type = type
        self.slug = type.removeprefix(PROBLEM_PREFIX)
        self.title = title
        self.detail = detail
        self.retry_after = retry_after
        self.participant_error = participant_error
        self.method = method
        self.url = url
        super().__init__(f"{status} {self.slug}: {detail}")

    @property
    def retryable(self) -> bool:
        """True when the same request may succeed later: the service sent `Retry-After` (a
        request with this key still in progress, a pending plan, too many requests, ...) or
        the status says so (408, 429, 502, 503, 504). Retry with the same Idempotency-Key
        and the same body."""
        return self.retry_after is not None or self.status in _RETRYABLE_STATUSES


class Invalid(ProblemError):
    """400, 413, 415 or 422: the request is malformed or not valid (`invalid-request`,
    `unsatisfiable`, `bad-request`, ...). Sending it again does not help."""


class Unauthorized(ProblemError):
    """401: the request had no token, or one the service does not know (or revoked)."""


class Forbidden(ProblemError):
    """403: the token is valid but may not do this (e.g. another user's plan)."""


class NotFound(ProblemError):
    """404: no such plan, site, link, ..."""


class Conflict(ProblemError):
    """409: the resource's state forbids the request (`plan-not-committed`,
    `modification-refused`, `idempotency-in-progress`, ...). Some are retryable (see
    `retryable`): a request with the same key still in progress, or a pending plan."""


class Unavailable(ProblemError):
    """408, 429, 502, 503 or 504: the service cannot answer now (too many requests, the store
    or a participant unavailable, a plan whose commit is not confirmed yet). Retry after
    `retry_after` seconds with the same Idempotency-Key."""


_CLASS_OF_STATUS: dict[int, type[ProblemError]] = {
    400: Invalid,
    413: Invalid,
    415: Invalid,
    422: Invalid,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    408: Unavailable,
    429: Unavailable,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}


def problem_class(status: int) -> type[ProblemError]:
    """The ProblemError subclass raised for an HTTP status (ProblemError itself for the
    others, e.g. 405 or 500)."""
    return _CLASS_OF_STATUS.get(status, ProblemError)


class Unreachable(CoreserveError):
    """No answer from the service: connection refused, name not resolved, TLS failure, a
    timeout, or the connection dropped. `url` is the request's URL, `method` its method and
    `__cause__` (also `cause`) the httpx exception.

    After a timeout or a dropped connection the service may have received and done the
    request: retry with the same Idempotency-Key (it never books twice), or read the plan.
    """

    def __init__(self, method: str, url: str, cause: httpx.TransportError) -> None:
        self.method = method
        self.url = url
        self.cause = cause
        reason = str(cause) or type(cause).__name__
        super().__init__(f"cannot reach coreserve at {url}: {reason}")


class UnexpectedAnswer(CoreserveError):
    """An answer that is not one of the API's: a success status whose body is not the
    documented model (e.g. a proxy's HTML page), or a status such as 3xx. `status`, `url`
    and the start of the body (`content`) are kept."""

    def __init__(self, status: int, method: str, url: str, content: bytes, why: str) -> None:
        self.status = status
        self.method = method
        self.url = url
        self.content = content
        super().__init__(f"unexpected answer {status} to {method} {url}: {why}: {content[:200]!r}")


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: the service sends seconds only


def problem_error(response: httpx.Response) -> ProblemError:
    """The exception for an error answer (status >= 400): its problem document when the body is
    one, else an `about:blank` problem titled by the status's reason phrase."""
    status = response.status_code
    body: Any = None
    try:
        body = response.json()
    except (ValueError, UnicodeDecodeError):
        pass
    common: dict[str, Any] = {
        "status": status,
        "retry_after": _retry_after(response),
        "method": response.request.method,
        "url": str(response.request.url),
    }
    if isinstance(body, dict) and isinstance(body.get("type"), str) and isinstance(body.get("title"), str):
        participant = body.get("participant_error")
        return problem_class(status)(
            type=body["type"],
            title=body["title"],
            detail=str(body.get("detail") or body["title"]),
            participant_error=participant if isinstance(participant, dict) else None,
            **common,
        )
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = f"HTTP {status}"
    text = response.text.strip() if body is None else json.dumps(body)
    return problem_class(status)(
        type="about:blank", title=phrase, detail=text[:500] or phrase, participant_error=None, **common
    )
