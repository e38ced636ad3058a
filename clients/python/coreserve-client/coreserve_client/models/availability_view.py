from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="AvailabilityView")


@_attrs_define
class AvailabilityView:
    """What the LIS offers.

    Attributes:
        price_per_cpu_hour (float):
        price_per_gpu_hour (float):
        site (str):
        utilisation (float): Mean booked fraction of the site's CPUs over the window.
        earliest_start (datetime.datetime | None | Unset): Earliest start at which `cpus` CPUs are free for `duration_s`
            inside the window; absent
            when there is none.
        gpu_model (None | str | Unset): With `gpus`: the pool whose GPUs are free from `earliest_start`.
    """

    price_per_cpu_hour: float
    price_per_gpu_hour: float
    site: str
    utilisation: float
    earliest_start: datetime.datetime | None | Unset = UNSET
    gpu_model: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        price_per_cpu_hour = self.price_per_cpu_hour

        price_per_gpu_hour = self.price_per_gpu_hour

        site = self.site

        utilisation = self.utilisation

        earliest_start: None | str | Unset
        if isinstance(self.earliest_start, Unset):
            earliest_start = UNSET
        elif isinstance(self.earliest_start, datetime.datetime):
            earliest_start = self.earliest_start.isoformat()
        else:
            earliest_start = self.earliest_start

        gpu_model: None | str | Unset
        if isinstance(self.gpu_model, Unset):
            gpu_model = UNSET
        else:
            gpu_model = self.gpu_model

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "price_per_cpu_hour": price_per_cpu_hour,
                "price_per_gpu_hour": price_per_gpu_hour,
                "site": site,
                "utilisation": utilisation,
            }
        )
        if earliest_start is not UNSET:
            field_dict["earliest_start"] = earliest_start
        if gpu_model is not UNSET:
            field_dict["gpu_model"] = gpu_model

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        price_per_cpu_hour = d.pop("price_per_cpu_hour")

        price_per_gpu_hour = d.pop("price_per_gpu_hour")

        site = d.pop("site")

        utilisation = d.pop("utilisation")

        def _parse_earliest_start(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                earliest_start_type_0 = datetime.datetime.fromisoformat(data)

                return earliest_start_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        earliest_start = _parse_earliest_start(d.pop("earliest_start", UNSET))

        def _parse_gpu_model(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        gpu_model = _parse_gpu_model(d.pop("gpu_model", UNSET))

        availability_view = cls(
            price_per_cpu_hour=price_per_cpu_hour,
            price_per_gpu_hour=price_per_gpu_hour,
            site=site,
            utilisation=utilisation,
            earliest_start=earliest_start,
            gpu_model=gpu_model,
        )

        availability_view.additional_properties = d
        return availability_view

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
