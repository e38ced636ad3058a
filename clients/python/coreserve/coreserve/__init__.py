"""coreserve: a small hand-written layer on the generated client `coreserve_client`.

    import coreserve
    from coreserve.models import ComputeDemand, PlanBody

    with coreserve.Client("http://127.0.0.1:8080", token) as cs:
        try:
            plan = cs.create_plan(body, idempotency_key="wf-42", retries=3)
        except coreserve.Invalid as e:          # 422: e.slug, e.title, e.detail
            ...
        except coreserve.Unreachable as e:      # no answer: e.url
            ...

What it adds to the generated package:

- each method returns the success model (`PlanView`, `list[Site]`, `AvailabilityView`, ...),
  never `Model | Problem | None`; an error answer raises `ProblemError` (`NotFound`,
  `Conflict`, `Invalid`, `Unauthorized`, `Forbidden`, `Unavailable`) with the problem's
  `status`, `type`, `slug`, `title`, `detail` and `retry_after`;
- no answer raises `Unreachable` (with the URL), never a raw httpx exception;
- a field the answer leaves out reads None (a list: []), never `UNSET`: `plan.reason`,
  `plan.start`, `plan.deadline`, `plan.cancelled_at`, ... (the models' annotations, generated,
  still name `Unset`: `opt(plan.start)` is typed `datetime | None` for a type checker);
- `site_availability` and `route` default their windows as the CLI does;
- a naive datetime raises ValueError before anything is sent (the service would refuse it
  with 422, and reading it as UTC or as local time would be a guess);
- `events()`: the event stream as an iterator that resumes with `Last-Event-ID`.

`coreserve.models` is `coreserve_client.models`: build request bodies with it.
"""

from . import models
from ._values import opt
from .client import AVAILABILITY_WINDOW, ROUTE_LENGTH, ROUTE_START_IN, Client
from .errors import (
    Conflict,
    CoreserveError,
    Forbidden,
    Invalid,
    NotFound,
    ProblemError,
    Unauthorized,
    Unavailable,
    UnexpectedAnswer,
    Unreachable,
)
from .events import EventStream

__all__ = [
    "AVAILABILITY_WINDOW",
    "ROUTE_LENGTH",
    "ROUTE_START_IN",
    "Client",
    "Conflict",
    "CoreserveError",
    "EventStream",
    "Forbidden",
    "Invalid",
    "NotFound",
    "ProblemError",
    "Unauthorized",
    "Unavailable",
    "UnexpectedAnswer",
    "Unreachable",
    "models",
    "opt",
]
