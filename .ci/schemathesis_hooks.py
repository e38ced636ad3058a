"""schemathesis hooks of .ci/schemathesis: valid timestamps for positive cases.

JSON Schema cannot say "within --horizon-days of now" or "deadline after the earliest end",
so generated date-times would almost always be refused (422) before planning. For positive
cases only (negative cases must stay invalid), every timestamp is moved into the next hours:
`deadline` now + 12 h; `not_before`, `from`, `start` now + 1 h; `to`, `end` now + 2 h.

In the stateful phase, which follows what a POST created to the operations on it (`GET` and
`DELETE /v1/plans/{id}`), a plan request is never a dry run: a dry run books and stores
nothing by design, so its answer's `id` names no resource (the other phases still send dry
runs).
"""

from datetime import datetime, timedelta, timezone

import schemathesis
from schemathesis.generation.meta import TestPhase

EARLY = ("not_before", "from", "start")
LATE = ("to", "end")


def _at(hours):
    t = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(hours=hours)
    return t.isoformat().replace("+00:00", "Z")


def _fix(obj):
    if not isinstance(obj, dict):
        return
    if "deadline" in obj:
        obj["deadline"] = _at(12)
    for k in EARLY:
        if k in obj:
            obj[k] = _at(1)
    for k in LATE:
        if k in obj:
            obj[k] = _at(2)


@schemathesis.hook
def map_case(context, case):
    meta = getattr(case, "meta", None)
    if meta is None:
        return case
    if meta.phase.name == TestPhase.STATEFUL and isinstance(case.query, dict):
        if str(case.query.get("dry_run", "")).lower() == "true":
            del case.query["dry_run"]
    if not meta.generation.mode.is_positive:
        return case
    _fix(case.body)
    _fix(case.query)
    return case
