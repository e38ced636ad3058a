from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="DeliveryRecord")


@_attrs_define
class DeliveryRecord:
    """One delivery attempt of an event to a webhook (its delivery log).

    Attributes:
        at (datetime.datetime):
        attempt (int): The attempt's number for this event (1 = first).
        duration_ms (float): How long the receiver took to answer, milliseconds (0 when it did not answer).
        event_id (int):
        webhook_id (UUID):
        error (None | str | Unset): Why it failed (absent when delivered): the receiver's status, or, when there was no
            answer (connection refused, reset or timed out, destination not allowed), only that
            there was none (`no answer from the destination`).
        status_code (int | None | Unset): The receiver's HTTP status (absent: no answer).
    """

    at: datetime.datetime
    attempt: int
    duration_ms: float
    event_id: int
    webhook_id: UUID
    error: None | str | Unset = UNSET
    status_code: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        attempt = self.attempt

        duration_ms = self.duration_ms

        event_id = self.event_id

        webhook_id = str(self.webhook_id)

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        status_code: int | None | Unset
        if isinstance(self.status_code, Unset):
            status_code = UNSET
        else:
            status_code = self.status_code

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "at": at,
                "attempt": attempt,
                "duration_ms": duration_ms,
                "event_id": event_id,
                "webhook_id": webhook_id,
            }
        )
        if error is not UNSET:
            field_dict["error"] = error
        if status_code is not UNSET:
            field_dict["status_code"] = status_code

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        at = datetime.datetime.fromisoformat(d.pop("at"))

        attempt = d.pop("attempt")

        duration_ms = d.pop("duration_ms")

        event_id = d.pop("event_id")

        webhook_id = UUID(d.pop("webhook_id"))

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        def _parse_status_code(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        status_code = _parse_status_code(d.pop("status_code", UNSET))

        delivery_record = cls(
            at=at,
            attempt=attempt,
            duration_ms=duration_ms,
            event_id=event_id,
            webhook_id=webhook_id,
            error=error,
            status_code=status_code,
        )

        delivery_record.additional_properties = d
        return delivery_record

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
