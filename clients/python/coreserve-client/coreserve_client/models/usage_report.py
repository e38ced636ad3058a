from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.allocation import Allocation


T = TypeVar("T", bound="UsageReport")


@_attrs_define
class UsageReport:
    """What `GET /v1/projects/{id}/usage` shows: the project's allocation, its paper quantities
    now, and its bookings in the current period.

        Attributes:
            allocated_cpu_hours (float): The allocation's CPU-hours (0 without one).
            booked_cpu_hours (float): CPU-hours of committed plans inside the current period (without an allocation: inside
                the 30 days from the last period boundary of the epoch).
            booked_gpu_hours (float):
            entitled_cpus (float): `R_i`: CPUs the project is entitled to at its allocation's pace.
            project (str):
            allocated_gpu_hours (float | None | Unset):
            allocation (Allocation | None | Unset):
            period_end (datetime.datetime | None | Unset):
            period_start (datetime.datetime | None | Unset): The current allocation period (absent without an allocation).
            priority (float | None | Unset): `p_i` (eq. 11): 0 at or under the planned pace, negative above; null when `u_i`
                is.
            usage_index (float | None | Unset): `u_i` (eq. 12); null when infinite (used something with no allocation).
    """

    allocated_cpu_hours: float
    booked_cpu_hours: float
    booked_gpu_hours: float
    entitled_cpus: float
    project: str
    allocated_gpu_hours: float | None | Unset = UNSET
    allocation: Allocation | None | Unset = UNSET
    period_end: datetime.datetime | None | Unset = UNSET
    period_start: datetime.datetime | None | Unset = UNSET
    priority: float | None | Unset = UNSET
    usage_index: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.allocation import Allocation  # noqa: PLC0415

        allocated_cpu_hours = self.allocated_cpu_hours

        booked_cpu_hours = self.booked_cpu_hours

        booked_gpu_hours = self.booked_gpu_hours

        entitled_cpus = self.entitled_cpus

        project = self.project

        allocated_gpu_hours: float | None | Unset
        if isinstance(self.allocated_gpu_hours, Unset):
            allocated_gpu_hours = UNSET
        else:
            allocated_gpu_hours = self.allocated_gpu_hours

        allocation: dict[str, Any] | None | Unset
        if isinstance(self.allocation, Unset):
            allocation = UNSET
        elif isinstance(self.allocation, Allocation):
            allocation = self.allocation.to_dict()
        else:
            allocation = self.allocation

        period_end: None | str | Unset
        if isinstance(self.period_end, Unset):
            period_end = UNSET
        elif isinstance(self.period_end, datetime.datetime):
            period_end = self.period_end.isoformat()
        else:
            period_end = self.period_end

        period_start: None | str | Unset
        if isinstance(self.period_start, Unset):
            period_start = UNSET
        elif isinstance(self.period_start, datetime.datetime):
            period_start = self.period_start.isoformat()
        else:
            period_start = self.period_start

        priority: float | None | Unset
        if isinstance(self.priority, Unset):
            priority = UNSET
        else:
            priority = self.priority

        usage_index: float | None | Unset
        if isinstance(self.usage_index, Unset):
            usage_index = UNSET
        else:
            usage_index = self.usage_index

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "allocated_cpu_hours": allocated_cpu_hours,
                "booked_cpu_hours": booked_cpu_hours,
                "booked_gpu_hours": booked_gpu_hours,
                "entitled_cpus": entitled_cpus,
                "project": project,
            }
        )
        if allocated_gpu_hours is not UNSET:
            field_dict["allocated_gpu_hours"] = allocated_gpu_hours
        if allocation is not UNSET:
            field_dict["allocation"] = allocation
        if period_end is not UNSET:
            field_dict["period_end"] = period_end
        if period_start is not UNSET:
            field_dict["period_start"] = period_start
        if priority is not UNSET:
            field_dict["priority"] = priority
        if usage_index is not UNSET:
            field_dict["usage_index"] = usage_index

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.allocation import Allocation  # noqa: PLC0415

        d = dict(src_dict)
        allocated_cpu_hours = d.pop("allocated_cpu_hours")

        booked_cpu_hours = d.pop("booked_cpu_hours")

        booked_gpu_hours = d.pop("booked_gpu_hours")

        entitled_cpus = d.pop("entitled_cpus")

        project = d.pop("project")

        def _parse_allocated_gpu_hours(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        allocated_gpu_hours = _parse_allocated_gpu_hours(d.pop("allocated_gpu_hours", UNSET))

        def _parse_allocation(data: object) -> Allocation | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                allocation_type_1 = Allocation.from_dict(data)

                return allocation_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Allocation | None | Unset, data)

        allocation = _parse_allocation(d.pop("allocation", UNSET))

        def _parse_period_end(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                period_end_type_0 = datetime.datetime.fromisoformat(data)

                return period_end_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        period_end = _parse_period_end(d.pop("period_end", UNSET))

        def _parse_period_start(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                period_start_type_0 = datetime.datetime.fromisoformat(data)

                return period_start_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        period_start = _parse_period_start(d.pop("period_start", UNSET))

        def _parse_priority(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        priority = _parse_priority(d.pop("priority", UNSET))

        def _parse_usage_index(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        usage_index = _parse_usage_index(d.pop("usage_index", UNSET))

        usage_report = cls(
            allocated_cpu_hours=allocated_cpu_hours,
            booked_cpu_hours=booked_cpu_hours,
            booked_gpu_hours=booked_gpu_hours,
            entitled_cpus=entitled_cpus,
            project=project,
            allocated_gpu_hours=allocated_gpu_hours,
            allocation=allocation,
            period_end=period_end,
            period_start=period_start,
            priority=priority,
            usage_index=usage_index,
        )

        usage_report.additional_properties = d
        return usage_report

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
