from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.arch import Arch
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.gpu_demand import GpuDemand


T = TypeVar("T", bound="Requirements")


@_attrs_define
class Requirements:
    """What a job requires of the site it runs on (the `requires` object of a job). Every field is
    optional; an empty object requires nothing beyond the job's OS and CPUs.

    Example (Saito & Hirotsu's): `{"software": ["tensorflow >=1.5"], "extensions": ["avx"],
    "gpus": {"count": 1, "min_compute_capability": 3.5}}`.

        Attributes:
            arch (Arch | None | Unset):
            extensions (list[str] | Unset): Instruction-set extensions the site's CPUs must all have.
            gpus (GpuDemand | None | Unset):
            labels (list[str] | Unset): Labels the site must all have.
            min_cpu_generation (int | None | Unset): Least processor generation (a site without a known generation fails
                it).
            software (list[str] | Unset): Software, each `NAME [VERSION-REQUIREMENT]` with a semantic-versioning
                requirement, e.g.
                `tensorflow >=2.12, <3`; it counts only with its dependencies installed. Example: ['tensorflow >=2.12, <3'].
    """

    arch: Arch | None | Unset = UNSET
    extensions: list[str] | Unset = UNSET
    gpus: GpuDemand | None | Unset = UNSET
    labels: list[str] | Unset = UNSET
    min_cpu_generation: int | None | Unset = UNSET
    software: list[str] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.gpu_demand import GpuDemand  # noqa: PLC0415

        arch: None | str | Unset
        if isinstance(self.arch, Unset):
            arch = UNSET
        elif isinstance(self.arch, Arch):
            arch = self.arch.value
        else:
            arch = self.arch

        extensions: list[str] | Unset = UNSET
        if not isinstance(self.extensions, Unset):
            extensions = self.extensions

        gpus: dict[str, Any] | None | Unset
        if isinstance(self.gpus, Unset):
            gpus = UNSET
        elif isinstance(self.gpus, GpuDemand):
            gpus = self.gpus.to_dict()
        else:
            gpus = self.gpus

        labels: list[str] | Unset = UNSET
        if not isinstance(self.labels, Unset):
            labels = self.labels

        min_cpu_generation: int | None | Unset
        if isinstance(self.min_cpu_generation, Unset):
            min_cpu_generation = UNSET
        else:
            min_cpu_generation = self.min_cpu_generation

        software: list[str] | Unset = UNSET
        if not isinstance(self.software, Unset):
            software = self.software

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if arch is not UNSET:
            field_dict["arch"] = arch
        if extensions is not UNSET:
            field_dict["extensions"] = extensions
        if gpus is not UNSET:
            field_dict["gpus"] = gpus
        if labels is not UNSET:
            field_dict["labels"] = labels
        if min_cpu_generation is not UNSET:
            field_dict["min_cpu_generation"] = min_cpu_generation
        if software is not UNSET:
            field_dict["software"] = software

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.gpu_demand import GpuDemand  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_arch(data: object) -> Arch | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                arch_type_1 = Arch(data)

                return arch_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Arch | None | Unset, data)

        arch = _parse_arch(d.pop("arch", UNSET))

        extensions = cast(list[str], d.pop("extensions", UNSET))

        def _parse_gpus(data: object) -> GpuDemand | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                gpus_type_1 = GpuDemand.from_dict(data)

                return gpus_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(GpuDemand | None | Unset, data)

        gpus = _parse_gpus(d.pop("gpus", UNSET))

        labels = cast(list[str], d.pop("labels", UNSET))

        def _parse_min_cpu_generation(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        min_cpu_generation = _parse_min_cpu_generation(d.pop("min_cpu_generation", UNSET))

        software = cast(list[str], d.pop("software", UNSET))

        requirements = cls(
            arch=arch,
            extensions=extensions,
            gpus=gpus,
            labels=labels,
            min_cpu_generation=min_cpu_generation,
            software=software,
        )

        return requirements
