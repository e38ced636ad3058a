from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.part_state import PartState
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.pool_gpus import PoolGpus


T = TypeVar("T", bound="JobPlacement")


@_attrs_define
class JobPlacement:
    """Where and when one job runs.

    Attributes:
        cpus (int):
        end (datetime.datetime):
        name (str):
        site (str): Identifier of a compute resource (site).
        start (datetime.datetime):
        after (list[str] | Unset): The jobs this one starts after: its `after` and the producers of its staged transfers
            (absent: none).
        broken (None | str | Unset): Why the site can no longer honour this job's reservation, once it cannot (the plan
            is
            then `broken`); absent while it is honoured.
        gpus (None | PoolGpus | Unset):
        price_per_cpu_hour (float | Unset): The site's price of one CPU-hour when the job was booked (what its cost and
            a
            modification's are computed from; 0 and absent on a free site).
        price_per_gpu_hour (float | Unset): The site's price of one GPU-hour of the job's pool (0 and absent without
            GPUs).
        reservation_name (None | str | Unset): At a site whose LIS fronts Slurm: the job's Slurm advance reservation,
            for
            `sbatch --reservation=NAME` (absent elsewhere, and before the plan is booked).
        slack_s (int | Unset): Seconds of the reservation after the job's run time, for an engine that starts it
            late (absent: 0).
        state (None | PartState | Unset):
    """

    cpus: int
    end: datetime.datetime
    name: str
    site: str
    start: datetime.datetime
    after: list[str] | Unset = UNSET
    broken: None | str | Unset = UNSET
    gpus: None | PoolGpus | Unset = UNSET
    price_per_cpu_hour: float | Unset = UNSET
    price_per_gpu_hour: float | Unset = UNSET
    reservation_name: None | str | Unset = UNSET
    slack_s: int | Unset = UNSET
    state: None | PartState | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.pool_gpus import PoolGpus  # noqa: PLC0415

        cpus = self.cpus

        end = self.end.isoformat()

        name = self.name

        site = self.site

        start = self.start.isoformat()

        after: list[str] | Unset = UNSET
        if not isinstance(self.after, Unset):
            after = self.after

        broken: None | str | Unset
        if isinstance(self.broken, Unset):
            broken = UNSET
        else:
            broken = self.broken

        gpus: dict[str, Any] | None | Unset
        if isinstance(self.gpus, Unset):
            gpus = UNSET
        elif isinstance(self.gpus, PoolGpus):
            gpus = self.gpus.to_dict()
        else:
            gpus = self.gpus

        price_per_cpu_hour = self.price_per_cpu_hour

        price_per_gpu_hour = self.price_per_gpu_hour

        reservation_name: None | str | Unset
        if isinstance(self.reservation_name, Unset):
            reservation_name = UNSET
        else:
            reservation_name = self.reservation_name

        slack_s = self.slack_s

        state: None | str | Unset
        if isinstance(self.state, Unset):
            state = UNSET
        elif isinstance(self.state, PartState):
            state = self.state.value
        else:
            state = self.state

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cpus": cpus,
                "end": end,
                "name": name,
                "site": site,
                "start": start,
            }
        )
        if after is not UNSET:
            field_dict["after"] = after
        if broken is not UNSET:
            field_dict["broken"] = broken
        if gpus is not UNSET:
            field_dict["gpus"] = gpus
        if price_per_cpu_hour is not UNSET:
            field_dict["price_per_cpu_hour"] = price_per_cpu_hour
        if price_per_gpu_hour is not UNSET:
            field_dict["price_per_gpu_hour"] = price_per_gpu_hour
        if reservation_name is not UNSET:
            field_dict["reservation_name"] = reservation_name
        if slack_s is not UNSET:
            field_dict["slack_s"] = slack_s
        if state is not UNSET:
            field_dict["state"] = state

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.pool_gpus import PoolGpus  # noqa: PLC0415

        d = dict(src_dict)
        cpus = d.pop("cpus")

        end = datetime.datetime.fromisoformat(d.pop("end"))

        name = d.pop("name")

        site = d.pop("site")

        start = datetime.datetime.fromisoformat(d.pop("start"))

        after = cast(list[str], d.pop("after", UNSET))

        def _parse_broken(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        broken = _parse_broken(d.pop("broken", UNSET))

        def _parse_gpus(data: object) -> None | PoolGpus | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                gpus_type_1 = PoolGpus.from_dict(data)

                return gpus_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PoolGpus | Unset, data)

        gpus = _parse_gpus(d.pop("gpus", UNSET))

        price_per_cpu_hour = d.pop("price_per_cpu_hour", UNSET)

        price_per_gpu_hour = d.pop("price_per_gpu_hour", UNSET)

        def _parse_reservation_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reservation_name = _parse_reservation_name(d.pop("reservation_name", UNSET))

        slack_s = d.pop("slack_s", UNSET)

        def _parse_state(data: object) -> None | PartState | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                state_type_1 = PartState(data)

                return state_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PartState | Unset, data)

        state = _parse_state(d.pop("state", UNSET))

        job_placement = cls(
            cpus=cpus,
            end=end,
            name=name,
            site=site,
            start=start,
            after=after,
            broken=broken,
            gpus=gpus,
            price_per_cpu_hour=price_per_cpu_hour,
            price_per_gpu_hour=price_per_gpu_hour,
            reservation_name=reservation_name,
            slack_s=slack_s,
            state=state,
        )

        job_placement.additional_properties = d
        return job_placement

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
