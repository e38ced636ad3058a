"""schemathesis hooks of .ci/schemathesis: valid timestamps for positive cases.

JSON Schema cannot say "within --horizon-days of now" or "deadline after the earliest end",
so generated date-times would almost always be refused (422) before planning. For positive
cases only (negative cases must stay invalid), every timestamp is moved into the next hours:
`deadline` now + 12 h; `not_before`, `from`, `start` now + 1 h; `to`, `end` now + 2 h.
"""

from datetime import datetime, timedelta, timezone

import schemathesis

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
    if meta is None or not meta.generation.mode.is_positive:
        return case
    _fix(case.body)
    _fix(case.query)
    return case
