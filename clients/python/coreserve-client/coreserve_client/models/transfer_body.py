from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="TransferBody")


@_attrs_define
class TransferBody:
    """One transfer (network demand) between two jobs.

    Attributes:
        bandwidth_mbps (int): Mbit/s, 1 ..= 2^30.
        duration_s (int): Seconds, 1 ..= 3,153,600,000.
        from_ (str): The sending job's name.
        offset_s (int): Seconds from the application start, 0 ..= 3,153,600,000; inside both jobs' intervals.
        to (str): The receiving job's name (another job).
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

        transfer_body = cls(
            bandwidth_mbps=bandwidth_mbps,
            duration_s=duration_s,
            from_=from_,
            offset_s=offset_s,
            to=to,
        )

        return transfer_body
