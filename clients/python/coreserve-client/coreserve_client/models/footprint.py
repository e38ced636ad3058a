from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Footprint")


@_attrs_define
class Footprint:
    """What a plan's reservations hold, against what its jobs need: how much slack and the gaps
    between dependent jobs cost (docs/model.md, "Workflows").

        Attributes:
            booked_cpu_s (int): CPU-seconds the jobs' reservations hold: the sum of `cpus * (end - start)`.
            critical_path_s (int): The longest chain of run times (reservation less slack) through the jobs' `after`, in
                seconds: the makespan without slack, gaps nor staged transfers. `makespan_s -
                critical_path_s` is what they (and waiting for resources) cost the workflow.
            makespan_s (int): Seconds from the first job's start to the last job's end.
            slack_cpu_s (int): Of `booked_cpu_s`, those of the jobs' slack: the sum of `cpus * slack_s`.
    """

    booked_cpu_s: int
    critical_path_s: int
    makespan_s: int
    slack_cpu_s: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        booked_cpu_s = self.booked_cpu_s

        critical_path_s = self.critical_path_s

        makespan_s = self.makespan_s

        slack_cpu_s = self.slack_cpu_s

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "booked_cpu_s": booked_cpu_s,
                "critical_path_s": critical_path_s,
                "makespan_s": makespan_s,
                "slack_cpu_s": slack_cpu_s,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        booked_cpu_s = d.pop("booked_cpu_s")

        critical_path_s = d.pop("critical_path_s")

        makespan_s = d.pop("makespan_s")

        slack_cpu_s = d.pop("slack_cpu_s")

        footprint = cls(
            booked_cpu_s=booked_cpu_s,
            critical_path_s=critical_path_s,
            makespan_s=makespan_s,
            slack_cpu_s=slack_cpu_s,
        )

        footprint.additional_properties = d
        return footprint

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
