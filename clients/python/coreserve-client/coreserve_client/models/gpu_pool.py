from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="GpuPool")


@_attrs_define
class GpuPool:
    """A pool of identical GPUs at a site, reserved in advance by count like CPUs (one capacity
    calendar per pool).

        Attributes:
            compute_capability (float): CUDA compute capability (or the vendor's equivalent), e.g. `8.0`; finite, `>= 0`.
            count (int): Number of GPUs, in `1 ..= MAX_AMOUNT`.
            memory_gib (int): Memory of one GPU in GiB.
            model (str): Model name, unique within the site, e.g. `a100-40gb`.
    """

    compute_capability: float
    count: int
    memory_gib: int
    model: str

    def to_dict(self) -> dict[str, Any]:
        compute_capability = self.compute_capability

        count = self.count

        memory_gib = self.memory_gib

        model = self.model

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "compute_capability": compute_capability,
                "count": count,
                "memory_gib": memory_gib,
                "model": model,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        compute_capability = d.pop("compute_capability")

        count = d.pop("count")

        memory_gib = d.pop("memory_gib")

        model = d.pop("model")

        gpu_pool = cls(
            compute_capability=compute_capability,
            count=count,
            memory_gib=memory_gib,
            model=model,
        )

        return gpu_pool
