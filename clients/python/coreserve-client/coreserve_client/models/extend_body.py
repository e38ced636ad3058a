from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="ExtendBody")


@_attrs_define
class ExtendBody:
    """`POST /v1/holds/{id}/extend` body.

    Attributes:
        lease_s (int): New lease from now, seconds (1 ..= the horizon, `--horizon-days` x 86400).
    """

    lease_s: int

    def to_dict(self) -> dict[str, Any]:
        lease_s = self.lease_s

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "lease_s": lease_s,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        lease_s = d.pop("lease_s")

        extend_body = cls(
            lease_s=lease_s,
        )

        return extend_body
