from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.job_change import JobChange
    from ..models.transfer_change import TransferChange


T = TypeVar("T", bound="PlanModification")


@_attrs_define
class PlanModification:
    """What to change in a committed plan; what is absent stays as it is. Offsets count from the
    application's start (the plan's `start`, or the new `start`), as in a plan request.

        Attributes:
            jobs (list[JobChange] | Unset): Changes to jobs, by name.
            start (datetime.datetime | None | Unset): The application's new start (RFC 3339 with a time zone): every job and
                transfer moves
                with it, keeping its offset.
            transfers (list[TransferChange] | Unset): Changes to transfers, by their two jobs.
    """

    jobs: list[JobChange] | Unset = UNSET
    start: datetime.datetime | None | Unset = UNSET
    transfers: list[TransferChange] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        jobs: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.jobs, Unset):
            jobs = []
            for jobs_item_data in self.jobs:
                jobs_item = jobs_item_data.to_dict()
                jobs.append(jobs_item)

        start: None | str | Unset
        if isinstance(self.start, Unset):
            start = UNSET
        elif isinstance(self.start, datetime.datetime):
            start = self.start.isoformat()
        else:
            start = self.start

        transfers: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.transfers, Unset):
            transfers = []
            for transfers_item_data in self.transfers:
                transfers_item = transfers_item_data.to_dict()
                transfers.append(transfers_item)

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if jobs is not UNSET:
            field_dict["jobs"] = jobs
        if start is not UNSET:
            field_dict["start"] = start
        if transfers is not UNSET:
            field_dict["transfers"] = transfers

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.job_change import JobChange  # noqa: PLC0415
        from ..models.transfer_change import TransferChange  # noqa: PLC0415

        d = dict(src_dict)
        _jobs = d.pop("jobs", UNSET)
        jobs: list[JobChange] | Unset = UNSET
        if _jobs is not UNSET:
            jobs = []
            for jobs_item_data in _jobs:
                jobs_item = JobChange.from_dict(jobs_item_data)

                jobs.append(jobs_item)

        def _parse_start(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                start_type_0 = datetime.datetime.fromisoformat(data)

                return start_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        start = _parse_start(d.pop("start", UNSET))

        _transfers = d.pop("transfers", UNSET)
        transfers: list[TransferChange] | Unset = UNSET
        if _transfers is not UNSET:
            transfers = []
            for transfers_item_data in _transfers:
                transfers_item = TransferChange.from_dict(transfers_item_data)

                transfers.append(transfers_item)

        plan_modification = cls(
            jobs=jobs,
            start=start,
            transfers=transfers,
        )

        return plan_modification
