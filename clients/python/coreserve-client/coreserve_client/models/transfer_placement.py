from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="TransferPlacement")


@_attrs_define
class TransferPlacement:
    """The bandwidth reservation of one transfer. `path` is empty when both jobs share a node
    (no network reservation is needed).

        Attributes:
            bandwidth_mbps (int):
            end (datetime.datetime):
            from_ (str):
            path (list[str]):
            start (datetime.datetime):
            to (str):
    """

    bandwidth_mbps: int
    end: datetime.datetime
    from_: str
    path: list[str]
    start: datetime.datetime
    to: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        bandwidth_mbps = self.bandwidth_mbps

        end = self.end.isoformat()

        from_ = self.from_

        path = self.path

        start = self.start.isoformat()

        to = self.to

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "bandwidth_mbps": bandwidth_mbps,
                "end": end,
                "from": from_,
                "path": path,
                "start": start,
                "to": to,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        bandwidth_mbps = d.pop("bandwidth_mbps")

        end = datetime.datetime.fromisoformat(d.pop("end"))

        from_ = d.pop("from")

        path = cast(list[str], d.pop("path"))

        start = datetime.datetime.fromisoformat(d.pop("start"))

        to = d.pop("to")

        transfer_placement = cls(
            bandwidth_mbps=bandwidth_mbps,
            end=end,
            from_=from_,
            path=path,
            start=start,
            to=to,
        )

        transfer_placement.additional_properties = d
        return transfer_placement

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
