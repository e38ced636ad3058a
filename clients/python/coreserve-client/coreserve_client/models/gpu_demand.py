from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="GpuDemand")


@_attrs_define
class GpuDemand:
    """GPUs a job needs: `count` GPUs of one pool that meets every bound.

    Attributes:
        count (int): GPUs to reserve, in `1 ..= MAX_AMOUNT`.
        min_compute_capability (float | None | Unset): Least compute capability, e.g. `3.5`.
        min_memory_gib (int | None | Unset): Least memory per GPU in GiB.
        model (None | str | Unset): This model only (case-insensitive).
    """

    count: int
    min_compute_capability: float | None | Unset = UNSET
    min_memory_gib: int | None | Unset = UNSET
    model: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        count = self.count

        min_compute_capability: float | None | Unset
        if isinstance(self.min_compute_capability, Unset):
            min_compute_capability = UNSET
        else:
            min_compute_capability = self.min_compute_capability

        min_memory_gib: int | None | Unset
        if isinstance(self.min_memory_gib, Unset):
            min_memory_gib = UNSET
        else:
            min_memory_gib = self.min_memory_gib

        model: None | str | Unset
        if isinstance(self.model, Unset):
            model = UNSET
        else:
            model = self.model

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "count": count,
            }
        )
        if min_compute_capability is not UNSET:
            field_dict["min_compute_capability"] = min_compute_capability
        if min_memory_gib is not UNSET:
            field_dict["min_memory_gib"] = min_memory_gib
        if model is not UNSET:
            field_dict["model"] = model

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        count = d.pop("count")

        def _parse_min_compute_capability(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        min_compute_capability = _parse_min_compute_capability(d.pop("min_compute_capability", UNSET))

        def _parse_min_memory_gib(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        min_memory_gib = _parse_min_memory_gib(d.pop("min_memory_gib", UNSET))

        def _parse_model(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        model = _parse_model(d.pop("model", UNSET))

        gpu_demand = cls(
            count=count,
            min_compute_capability=min_compute_capability,
            min_memory_gib=min_memory_gib,
            model=model,
        )

        return gpu_demand
