from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="Allocation")


@_attrs_define
class Allocation:
    """A project's allocation for one period (admin-set).

    Attributes:
        cpu_hours (float): CPU-hours the project may use per period, >= 0 and finite.
        gpu_hours (float | None | Unset): GPU-hours per period; absent: GPUs are not limited.
        overdraft (bool | Unset): May book past the allocation (an admin's exception).
        period_s (int | Unset): Length of a period, seconds (> 0; default 30 days).
        period_start (datetime.datetime | Unset): Where periods are counted from (default: the Unix epoch).
    """

    cpu_hours: float
    gpu_hours: float | None | Unset = UNSET
    overdraft: bool | Unset = UNSET
    period_s: int | Unset = UNSET
    period_start: datetime.datetime | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        cpu_hours = self.cpu_hours

        gpu_hours: float | None | Unset
        if isinstance(self.gpu_hours, Unset):
            gpu_hours = UNSET
        else:
            gpu_hours = self.gpu_hours

        overdraft = self.overdraft

        period_s = self.period_s

        period_start: str | Unset = UNSET
        if not isinstance(self.period_start, Unset):
            period_start = self.period_start.isoformat()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "cpu_hours": cpu_hours,
            }
        )
        if gpu_hours is not UNSET:
            field_dict["gpu_hours"] = gpu_hours
        if overdraft is not UNSET:
            field_dict["overdraft"] = overdraft
        if period_s is not UNSET:
            field_dict["period_s"] = period_s
        if period_start is not UNSET:
            field_dict["period_start"] = period_start

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        cpu_hours = d.pop("cpu_hours")

        def _parse_gpu_hours(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        gpu_hours = _parse_gpu_hours(d.pop("gpu_hours", UNSET))

        overdraft = d.pop("overdraft", UNSET)

        period_s = d.pop("period_s", UNSET)

        _period_start = d.pop("period_start", UNSET)
        period_start: datetime.datetime | Unset
        if isinstance(_period_start, Unset):
            period_start = UNSET
        else:
            period_start = datetime.datetime.fromisoformat(_period_start)

        allocation = cls(
            cpu_hours=cpu_hours,
            gpu_hours=gpu_hours,
            overdraft=overdraft,
            period_s=period_s,
            period_start=period_start,
        )

        return allocation
