from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="NetworkDemand")


@_attrs_define
class NetworkDemand:
    """One communication between two jobs (an edge of the request graph).

    The same type is the transfer of the REST body and of workload files; unknown fields are
    refused.

        Attributes:
            bandwidth_mbps (int): Bandwidth to reserve in Mbit/s, in `1 ..= MAX_AMOUNT` (2^30).
            duration_s (int): Reservation length in seconds, in `1 ..= MAX_DURATION_S`.
            from_ (str): Name of the sending job.
            offset_s (int): Start offset in seconds from the application start, in `0 ..= MAX_OFFSET_S`; inside
                both jobs' intervals.
            to (str): Name of the receiving job (another job).
    """

    bandwidth_mbps: int
    duration_s: int
    from_: str
    offset_s: int
    to: str

    def to_dict(self) -> dict[str, Any]:
        bandwidth_mbps = self.bandwidth_mbps

        duration_s = self.duration_s

        from_ = self.from_

        offset_s = self.offset_s

        to = self.to

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "bandwidth_mbps": bandwidth_mbps,
                "duration_s": duration_s,
                "from": from_,
                "offset_s": offset_s,
                "to": to,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        bandwidth_mbps = d.pop("bandwidth_mbps")

        duration_s = d.pop("duration_s")

        from_ = d.pop("from")

        offset_s = d.pop("offset_s")

        to = d.pop("to")

        network_demand = cls(
            bandwidth_mbps=bandwidth_mbps,
            duration_s=duration_s,
            from_=from_,
            offset_s=offset_s,
            to=to,
        )

        return network_demand
