from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="NetworkHoldBody")


@_attrs_define
class NetworkHoldBody:
    """`POST /v1/network/holds` body: prepare (phase 1) bandwidth on every link of a path.

    Attributes:
        bandwidth_mbps (int): Mbit/s, 1 ..= 2^30.
        end (datetime.datetime):
        links (list[str]): The path (e.g. from `GET /v1/network/route`); all links are held or none.
        start (datetime.datetime): Not in the past; before `end`.
        txn (None | Unset | UUID):
    """

    bandwidth_mbps: int
    end: datetime.datetime
    links: list[str]
    start: datetime.datetime
    txn: None | Unset | UUID = UNSET

    def to_dict(self) -> dict[str, Any]:
        bandwidth_mbps = self.bandwidth_mbps

        end = self.end.isoformat()

        links = self.links

        start = self.start.isoformat()

        txn: None | str | Unset
        if isinstance(self.txn, Unset):
            txn = UNSET
        elif isinstance(self.txn, UUID):
            txn = str(self.txn)
        else:
            txn = self.txn

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "bandwidth_mbps": bandwidth_mbps,
                "end": end,
                "links": links,
                "start": start,
            }
        )
        if txn is not UNSET:
            field_dict["txn"] = txn

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        bandwidth_mbps = d.pop("bandwidth_mbps")

        end = datetime.datetime.fromisoformat(d.pop("end"))

        links = cast(list[str], d.pop("links"))

        start = datetime.datetime.fromisoformat(d.pop("start"))

        def _parse_txn(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                txn_type_1 = UUID(data)

                return txn_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        txn = _parse_txn(d.pop("txn", UNSET))

        network_hold_body = cls(
            bandwidth_mbps=bandwidth_mbps,
            end=end,
            links=links,
            start=start,
            txn=txn,
        )

        return network_hold_body
