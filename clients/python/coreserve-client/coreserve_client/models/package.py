from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="Package")


@_attrs_define
class Package:
    """A software package installed at a site.

    Attributes:
        name (str): Package name (`[A-Za-z0-9_.+-]`, 1-128 characters), compared case-insensitively.
        version (str): Installed version, semantic versioning; missing parts count as 0 (`2.12` is `2.12.0`). Example:
            2.13.1.
        depends (list[str] | Unset): What it needs installed to work, each `NAME [VERSION-REQUIREMENT]`, e.g. `cuda
            >=11.8`. Example: ['cuda >=11.8', 'cudnn'].
        needs_extensions (list[str] | Unset): Instruction-set extensions the package needs on the site's CPUs (e.g.
            `avx`).
        needs_gpu_compute_capability (float | None | Unset): Least GPU compute capability the package needs; the site
            must have a GPU pool with at
            least this much.
    """

    name: str
    version: str
    depends: list[str] | Unset = UNSET
    needs_extensions: list[str] | Unset = UNSET
    needs_gpu_compute_capability: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        version = self.version

        depends: list[str] | Unset = UNSET
        if not isinstance(self.depends, Unset):
            depends = self.depends

        needs_extensions: list[str] | Unset = UNSET
        if not isinstance(self.needs_extensions, Unset):
            needs_extensions = self.needs_extensions

        needs_gpu_compute_capability: float | None | Unset
        if isinstance(self.needs_gpu_compute_capability, Unset):
            needs_gpu_compute_capability = UNSET
        else:
            needs_gpu_compute_capability = self.needs_gpu_compute_capability

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
                "version": version,
            }
        )
        if depends is not UNSET:
            field_dict["depends"] = depends
        if needs_extensions is not UNSET:
            field_dict["needs_extensions"] = needs_extensions
        if needs_gpu_compute_capability is not UNSET:
            field_dict["needs_gpu_compute_capability"] = needs_gpu_compute_capability

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        name = d.pop("name")

        version = d.pop("version")

        depends = cast(list[str], d.pop("depends", UNSET))

        needs_extensions = cast(list[str], d.pop("needs_extensions", UNSET))

        def _parse_needs_gpu_compute_capability(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        needs_gpu_compute_capability = _parse_needs_gpu_compute_capability(d.pop("needs_gpu_compute_capability", UNSET))

        package = cls(
            name=name,
            version=version,
            depends=depends,
            needs_extensions=needs_extensions,
            needs_gpu_compute_capability=needs_gpu_compute_capability,
        )

        return package
