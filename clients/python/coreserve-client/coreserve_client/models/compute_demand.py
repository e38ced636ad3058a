from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

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
            duration_s (int): Run time in seconds, in `1 ..= MAX_DURATION_S` (3,153,600,000: 100 years); the
                reservation lasts `duration_s + slack_s`.
            name (str): Job name, unique within the request; 1-128 characters, not blank, no control characters.
            os (str): Required operating system, matched case-insensitively against a site's `os`; 1-128
                characters, not blank, no control characters.
            after (list[str] | Unset): Names of the jobs that must end (their reservation, slack included) before this one
                starts: the workflow's dependencies. Default: none.
            offset_s (int | None | Unset): Start offset in seconds from the application start, in `0 ..= MAX_OFFSET_S`
                (3,153,600,000: 100 years). Absent: the planner lays the job out, as early as its
                `after` jobs, its staged transfers and `dependency_gap_s` allow (0 without any).
            requires (Requirements | Unset): What a job requires of the site it runs on (the `requires` object of a job).
                Every field is
                optional; an empty object requires nothing beyond the job's OS and CPUs.

                Example (Saito & Hirotsu's): `{"software": ["tensorflow >=1.5"], "extensions": ["avx"],
                "gpus": {"count": 1, "min_compute_capability": 3.5}}`.
            slack_s (int | None | Unset): Seconds reserved after `duration_s`, so that a job the engine starts late still
                ends
                inside its reservation, in `0 ..= MAX_DURATION_S`. Default: the request's `slack_s`.
    """

    cpus: int
    duration_s: int
    name: str
    os: str
    after: list[str] | Unset = UNSET
    offset_s: int | None | Unset = UNSET
    requires: Requirements | Unset = UNSET
    slack_s: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        cpus = self.cpus

        duration_s = self.duration_s

        name = self.name

        os = self.os

        after: list[str] | Unset = UNSET
        if not isinstance(self.after, Unset):
            after = self.after

        offset_s: int | None | Unset
        if isinstance(self.offset_s, Unset):
            offset_s = UNSET
        else:
            offset_s = self.offset_s

        requires: dict[str, Any] | Unset = UNSET
        if not isinstance(self.requires, Unset):
            requires = self.requires.to_dict()

        slack_s: int | None | Unset
        if isinstance(self.slack_s, Unset):
            slack_s = UNSET
        else:
            slack_s = self.slack_s

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "cpus": cpus,
                "duration_s": duration_s,
                "name": name,
                "os": os,
            }
        )
        if after is not UNSET:
            field_dict["after"] = after
        if offset_s is not UNSET:
            field_dict["offset_s"] = offset_s
        if requires is not UNSET:
            field_dict["requires"] = requires
        if slack_s is not UNSET:
            field_dict["slack_s"] = slack_s

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.requirements import Requirements  # noqa: PLC0415

        d = dict(src_dict)
        cpus = d.pop("cpus")

        duration_s = d.pop("duration_s")

        name = d.pop("name")

        os = d.pop("os")

        after = cast(list[str], d.pop("after", UNSET))

        def _parse_offset_s(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        offset_s = _parse_offset_s(d.pop("offset_s", UNSET))

        _requires = d.pop("requires", UNSET)
        requires: Requirements | Unset
        if isinstance(_requires, Unset):
            requires = UNSET
        else:
            requires = Requirements.from_dict(_requires)

        def _parse_slack_s(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        slack_s = _parse_slack_s(d.pop("slack_s", UNSET))

        compute_demand = cls(
            cpus=cpus,
            duration_s=duration_s,
            name=name,
            os=os,
            after=after,
            offset_s=offset_s,
            requires=requires,
            slack_s=slack_s,
        )

        return compute_demand
