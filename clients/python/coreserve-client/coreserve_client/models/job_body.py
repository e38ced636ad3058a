from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="JobBody")


@_attrs_define
class JobBody:
    """One job (compute demand) of a plan request.

    Attributes:
        cpus (int): CPUs, 1 ..= 2^30.
        duration_s (int): Seconds, 1 ..= 3,153,600,000 (100 years).
        name (str): Unique within the request; 1-128 characters, not blank, no control characters.
        offset_s (int): Seconds from the application start, 0 ..= 3,153,600,000 (100 years).
        os (str): Required OS (case-insensitive); 1-128 characters, not blank, no control characters.
    """

    cpus: int
    duration_s: int
    name: str
    offset_s: int
    os: str

    def to_dict(self) -> dict[str, Any]:
        cpus = self.cpus

        duration_s = self.duration_s

        name = self.name

        offset_s = self.offset_s

        os = self.os

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "cpus": cpus,
                "duration_s": duration_s,
                "name": name,
                "offset_s": offset_s,
                "os": os,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        cpus = d.pop("cpus")

        duration_s = d.pop("duration_s")

        name = d.pop("name")

        offset_s = d.pop("offset_s")

        os = d.pop("os")

        job_body = cls(
            cpus=cpus,
            duration_s=duration_s,
            name=name,
            offset_s=offset_s,
            os=os,
        )

        return job_body
