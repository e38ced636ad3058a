from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.requirements import Requirements


T = TypeVar("T", bound="ComputeDemand")


@_attrs_define
class ComputeDemand:
    """One job of an application: where it may run and for how long (a vertex of the request graph).

    The same type is the job of the REST body (`POST /v1/plans`) and of workload files; unknown
    fields are refused.

        Attributes:
            cpus (int): CPUs to reserve, in `1 ..= MAX_AMOUNT` (2^30).
            duration_s (int): Reservation length in seconds, in `1 ..= MAX_DURATION_S` (3,153,600,000: 100 years).
            name (str): Job name, unique within the request; 1-128 characters, not blank, no control characters.
            offset_s (int): Start offset in seconds from the application start, in `0 ..= MAX_OFFSET_S`
                (3,153,600,000: 100 years).
            os (str): Required operating system, matched case-insensitively against a site's `os`; 1-128
                characters, not blank, no control characters.
            requires (Requirements | Unset): What a job requires of the site it runs on (the `requires` object of a job).
                Every field is
                optional; an empty object requires nothing beyond the job's OS and CPUs.

                Example (Saito & Hirotsu's): `{"software": ["tensorflow >=1.5"], "extensions": ["avx"],
                "gpus": {"count": 1, "min_compute_capability": 3.5}}`.
    """

    cpus: int
    duration_s: int
    name: str
    offset_s: int
    os: str
    requires: Requirements | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        cpus = self.cpus

        duration_s = self.duration_s

        name = self.name

        offset_s = self.offset_s

        os = self.os

        requires: dict[str, Any] | Unset = UNSET
        if not isinstance(self.requires, Unset):
            requires = self.requires.to_dict()

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
        if requires is not UNSET:
            field_dict["requires"] = requires

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.requirements import Requirements  # noqa: PLC0415

        d = dict(src_dict)
        cpus = d.pop("cpus")

        duration_s = d.pop("duration_s")

        name = d.pop("name")

        offset_s = d.pop("offset_s")

        os = d.pop("os")

        _requires = d.pop("requires", UNSET)
        requires: Requirements | Unset
        if isinstance(_requires, Unset):
            requires = UNSET
        else:
            requires = Requirements.from_dict(_requires)

        compute_demand = cls(
            cpus=cpus,
            duration_s=duration_s,
            name=name,
            offset_s=offset_s,
            os=os,
            requires=requires,
        )

        return compute_demand
