from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="JobChange")


@_attrs_define
class JobChange:
    """A job's new offset, length or CPUs.

    Attributes:
        name (str): The job's name.
        cpus (int | None | Unset): New CPU count, > 0.
        duration_s (int | None | Unset): New length in seconds (extends or shortens the job's end), in `1 ..=
            MAX_DURATION_S`.
        offset_s (int | None | Unset): New start offset in seconds from the application's start, in `0 ..=
            MAX_OFFSET_S`.
    """

    name: str
    cpus: int | None | Unset = UNSET
    duration_s: int | None | Unset = UNSET
    offset_s: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        cpus: int | None | Unset
        if isinstance(self.cpus, Unset):
            cpus = UNSET
        else:
            cpus = self.cpus

        duration_s: int | None | Unset
        if isinstance(self.duration_s, Unset):
            duration_s = UNSET
        else:
            duration_s = self.duration_s

        offset_s: int | None | Unset
        if isinstance(self.offset_s, Unset):
            offset_s = UNSET
        else:
            offset_s = self.offset_s

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
            }
        )
        if cpus is not UNSET:
            field_dict["cpus"] = cpus
        if duration_s is not UNSET:
            field_dict["duration_s"] = duration_s
        if offset_s is not UNSET:
            field_dict["offset_s"] = offset_s

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        name = d.pop("name")

        def _parse_cpus(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        cpus = _parse_cpus(d.pop("cpus", UNSET))

        def _parse_duration_s(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        duration_s = _parse_duration_s(d.pop("duration_s", UNSET))

        def _parse_offset_s(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        offset_s = _parse_offset_s(d.pop("offset_s", UNSET))

        job_change = cls(
            name=name,
            cpus=cpus,
            duration_s=duration_s,
            offset_s=offset_s,
        )

        return job_change
