from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.transfer_mode import TransferMode
from ..types import UNSET, Unset

T = TypeVar("T", bound="NetworkDemand")


@_attrs_define
class NetworkDemand:
    """One communication between two jobs (an edge of the request graph).

    The same type is the transfer of the REST body and of workload files; unknown fields are
    refused.

        Attributes:
            bandwidth_mbps (int): Bandwidth to reserve in Mbit/s, in `1 ..= MAX_AMOUNT` (2^30).
            from_ (str): Name of the sending job.
            to (str): Name of the receiving job (another job).
            duration_s (int | None | Unset): Reservation length in seconds, in `1 ..= MAX_DURATION_S`. Absent: `size_mb * 8
                /
                bandwidth_mbps`, rounded up (then `size_mb` is required).
            mode (TransferMode | Unset): When a transfer runs relative to its two jobs (docs/model.md, "Workflows").

                Text (`Display`, `FromStr`): `concurrent` or `staged`; parsing ignores ASCII case.
            offset_s (int | None | Unset): Start offset in seconds from the application start, in `0 ..= MAX_OFFSET_S`.
                Concurrent: inside both jobs' reservations (absent: the later of their starts).
                Staged: at or after the producer's end (absent: its end).
            size_mb (float | None | Unset): The data to move, in megabytes (10^6 bytes), in `(0, MAX_SIZE_MB]` (10^9: a
                petabyte):
                what sets `duration_s` when it is absent; with it, `duration_s` must be long enough.
    """

    bandwidth_mbps: int
    from_: str
    to: str
    duration_s: int | None | Unset = UNSET
    mode: TransferMode | Unset = UNSET
    offset_s: int | None | Unset = UNSET
    size_mb: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        bandwidth_mbps = self.bandwidth_mbps

        from_ = self.from_

        to = self.to

        duration_s: int | None | Unset
        if isinstance(self.duration_s, Unset):
            duration_s = UNSET
        else:
            duration_s = self.duration_s

        mode: str | Unset = UNSET
        if not isinstance(self.mode, Unset):
            mode = self.mode.value

        offset_s: int | None | Unset
        if isinstance(self.offset_s, Unset):
            offset_s = UNSET
        else:
            offset_s = self.offset_s

        size_mb: float | None | Unset
        if isinstance(self.size_mb, Unset):
            size_mb = UNSET
        else:
            size_mb = self.size_mb

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "bandwidth_mbps": bandwidth_mbps,
                "from": from_,
                "to": to,
            }
        )
        if duration_s is not UNSET:
            field_dict["duration_s"] = duration_s
        if mode is not UNSET:
            field_dict["mode"] = mode
        if offset_s is not UNSET:
            field_dict["offset_s"] = offset_s
        if size_mb is not UNSET:
            field_dict["size_mb"] = size_mb

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        bandwidth_mbps = d.pop("bandwidth_mbps")

        from_ = d.pop("from")

        to = d.pop("to")

        def _parse_duration_s(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        duration_s = _parse_duration_s(d.pop("duration_s", UNSET))

        _mode = d.pop("mode", UNSET)
        mode: TransferMode | Unset
        if isinstance(_mode, Unset):
            mode = UNSET
        else:
            mode = TransferMode(_mode)

        def _parse_offset_s(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        offset_s = _parse_offset_s(d.pop("offset_s", UNSET))

        def _parse_size_mb(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        size_mb = _parse_size_mb(d.pop("size_mb", UNSET))

        network_demand = cls(
            bandwidth_mbps=bandwidth_mbps,
            from_=from_,
            to=to,
            duration_s=duration_s,
            mode=mode,
            offset_s=offset_s,
            size_mb=size_mb,
        )

        return network_demand
