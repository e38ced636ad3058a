from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="TransferChange")


@_attrs_define
class TransferChange:
    """A transfer's new offset, length or bandwidth.

    Attributes:
        from_ (str): The sending job's name.
        to (str): The receiving job's name.
        bandwidth_mbps (int | None | Unset): New bandwidth in Mbit/s, in `1 ..= MAX_AMOUNT`.
        duration_s (int | None | Unset): New length in seconds.
        offset_s (int | None | Unset): New start offset in seconds from the application's start.
    """

    from_: str
    to: str
    bandwidth_mbps: int | None | Unset = UNSET
    duration_s: int | None | Unset = UNSET
    offset_s: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from_ = self.from_

        to = self.to

        bandwidth_mbps: int | None | Unset
        if isinstance(self.bandwidth_mbps, Unset):
            bandwidth_mbps = UNSET
        else:
            bandwidth_mbps = self.bandwidth_mbps

        duration_s: int | None | Unset
        if isinstance(self.duration_s, Unset):
            duration_s = UNSET
        else:
            duration_s = self.duration_s

        offset_s: int | None | Unset
        if isinstance(self.offset_s, Unset):
            offset_s = UNSET
        else:
            offset_s = self.offset_s

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "from": from_,
                "to": to,
            }
        )
        if bandwidth_mbps is not UNSET:
            field_dict["bandwidth_mbps"] = bandwidth_mbps
        if duration_s is not UNSET:
            field_dict["duration_s"] = duration_s
        if offset_s is not UNSET:
            field_dict["offset_s"] = offset_s

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        from_ = d.pop("from")

        to = d.pop("to")

        def _parse_bandwidth_mbps(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        bandwidth_mbps = _parse_bandwidth_mbps(d.pop("bandwidth_mbps", UNSET))

        def _parse_duration_s(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        duration_s = _parse_duration_s(d.pop("duration_s", UNSET))

        def _parse_offset_s(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        offset_s = _parse_offset_s(d.pop("offset_s", UNSET))

        transfer_change = cls(
            from_=from_,
            to=to,
            bandwidth_mbps=bandwidth_mbps,
            duration_s=duration_s,
            offset_s=offset_s,
        )

        return transfer_change
