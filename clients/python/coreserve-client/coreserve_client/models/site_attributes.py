from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.arch import Arch
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.gpu_pool import GpuPool
    from ..models.package import Package


T = TypeVar("T", bound="SiteAttributes")


@_attrs_define
class SiteAttributes:
    """The attributes of a heterogeneous site, beside its CPUs, OS and price (every field has a
    default; JSON: flattened into the site).

        Attributes:
            arch (Arch | Unset): Processor architecture of a site (and of a job's requirement).
            cpu_generation (int | None | Unset): Processor generation within its architecture (a larger number is newer),
                when known.
            extensions (list[str] | Unset): Instruction-set extensions of the site's CPUs, e.g. `sse4_2`, `avx2`, `avx512f`,
                `sve`
                (compared case-insensitively).
            gpus (list[GpuPool] | Unset): GPU pools (model names unique within the site).
            labels (list[str] | Unset): Free labels (e.g. `ssd`, `infiniband`), compared case-insensitively.
            price_per_gpu_hour (float | Unset): Price of one GPU for one hour, in `0 ..= MAX_PRICE`; default 0.
            software (list[Package] | Unset): Installed software.
    """

    arch: Arch | Unset = UNSET
    cpu_generation: int | None | Unset = UNSET
    extensions: list[str] | Unset = UNSET
    gpus: list[GpuPool] | Unset = UNSET
    labels: list[str] | Unset = UNSET
    price_per_gpu_hour: float | Unset = UNSET
    software: list[Package] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        arch: str | Unset = UNSET
        if not isinstance(self.arch, Unset):
            arch = self.arch.value

        cpu_generation: int | None | Unset
        if isinstance(self.cpu_generation, Unset):
            cpu_generation = UNSET
        else:
            cpu_generation = self.cpu_generation

        extensions: list[str] | Unset = UNSET
        if not isinstance(self.extensions, Unset):
            extensions = self.extensions

        gpus: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.gpus, Unset):
            gpus = []
            for gpus_item_data in self.gpus:
                gpus_item = gpus_item_data.to_dict()
                gpus.append(gpus_item)

        labels: list[str] | Unset = UNSET
        if not isinstance(self.labels, Unset):
            labels = self.labels

        price_per_gpu_hour = self.price_per_gpu_hour

        software: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.software, Unset):
            software = []
            for software_item_data in self.software:
                software_item = software_item_data.to_dict()
                software.append(software_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if arch is not UNSET:
            field_dict["arch"] = arch
        if cpu_generation is not UNSET:
            field_dict["cpu_generation"] = cpu_generation
        if extensions is not UNSET:
            field_dict["extensions"] = extensions
        if gpus is not UNSET:
            field_dict["gpus"] = gpus
        if labels is not UNSET:
            field_dict["labels"] = labels
        if price_per_gpu_hour is not UNSET:
            field_dict["price_per_gpu_hour"] = price_per_gpu_hour
        if software is not UNSET:
            field_dict["software"] = software

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.gpu_pool import GpuPool  # noqa: PLC0415
        from ..models.package import Package  # noqa: PLC0415

        d = dict(src_dict)
        _arch = d.pop("arch", UNSET)
        arch: Arch | Unset
        if isinstance(_arch, Unset):
            arch = UNSET
        else:
            arch = Arch(_arch)

        def _parse_cpu_generation(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        cpu_generation = _parse_cpu_generation(d.pop("cpu_generation", UNSET))

        extensions = cast(list[str], d.pop("extensions", UNSET))

        _gpus = d.pop("gpus", UNSET)
        gpus: list[GpuPool] | Unset = UNSET
        if _gpus is not UNSET:
            gpus = []
            for gpus_item_data in _gpus:
                gpus_item = GpuPool.from_dict(gpus_item_data)

                gpus.append(gpus_item)

        labels = cast(list[str], d.pop("labels", UNSET))

        price_per_gpu_hour = d.pop("price_per_gpu_hour", UNSET)

        _software = d.pop("software", UNSET)
        software: list[Package] | Unset = UNSET
        if _software is not UNSET:
            software = []
            for software_item_data in _software:
                software_item = Package.from_dict(software_item_data)

                software.append(software_item)

        site_attributes = cls(
            arch=arch,
            cpu_generation=cpu_generation,
            extensions=extensions,
            gpus=gpus,
            labels=labels,
            price_per_gpu_hour=price_per_gpu_hour,
            software=software,
        )

        site_attributes.additional_properties = d
        return site_attributes

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
