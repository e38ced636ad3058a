"""What goes in and what comes out: times sent must be timezone-aware, and no `Unset` comes
back to the caller."""

from __future__ import annotations

import datetime as _dt
from typing import Any, TypeVar

import attrs
from coreserve_client.types import Unset

T = TypeVar("T")

UTC = _dt.UTC


def aware(value: _dt.datetime, name: str) -> _dt.datetime:
    """`value` if it carries a timezone; a ValueError naming `name` if it is naive.

    A naive datetime is ambiguous: `datetime.now()` is local time, `datetime.utcnow()` is UTC,
    and the service cannot tell which (it refuses a time without an offset with 422). Guessing
    would book at the wrong hour without a word, so this layer refuses it before sending."""
    if not isinstance(value, _dt.datetime):
        raise TypeError(f"{name} must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValueError(
            f"{name} is a naive datetime ({value.isoformat()}): coreserve needs a timezone-aware one, "
            "e.g. datetime.now(UTC) or value.replace(tzinfo=UTC) for a time that is already UTC"
        )
    return value


def whole_seconds(value: _dt.datetime) -> _dt.datetime:
    """`value` in UTC without its microseconds (what the CLI sends and the service stores)."""
    return value.astimezone(UTC).replace(microsecond=0)


def check_aware(obj: Any, name: str) -> None:
    """Raise ValueError for any naive datetime in a generated model about to be sent (its
    fields, nested models and lists), naming the field (`body.deadline`)."""
    if isinstance(obj, _dt.datetime):
        aware(obj, name)
    elif isinstance(obj, list | tuple):
        for i, item in enumerate(obj):
            check_aware(item, f"{name}[{i}]")
    elif attrs.has(type(obj)):
        for field in attrs.fields(type(obj)):
            if field.name != "additional_properties":
                check_aware(getattr(obj, field.name), f"{name}.{field.name}")


def _is_list_field(field: attrs.Attribute) -> bool:
    kind = field.type if isinstance(field.type, str) else repr(field.type)
    return kind.startswith("list[")


def opt(value: T | None | Unset) -> T | None:
    """`value`, or None for `UNSET`: the type a checker needs for a field of a model this
    package returned (its annotation, the generated one, still says `| Unset`; its value never
    is). `start: datetime | None = coreserve.opt(plan.start)`."""
    return None if isinstance(value, Unset) else value


def normalize(obj: T) -> T:
    """The same object with every `Unset` replaced, in place and in nested models and lists: a
    field the answer left out reads `[]` when it is a list and `None` otherwise. So a plan's
    `reason`, `start`, `deadline` or `cancelled_at` is the value or None, never `UNSET`."""
    if isinstance(obj, list):
        for item in obj:
            normalize(item)
    elif attrs.has(type(obj)):
        for field in attrs.fields(type(obj)):
            if field.name == "additional_properties":
                continue
            value = getattr(obj, field.name)
            if isinstance(value, Unset):
                setattr(obj, field.name, [] if _is_list_field(field) else None)
            else:
                normalize(value)
    return obj
