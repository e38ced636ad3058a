from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Link")


@_attrs_define
class Link:
    """An undirected link; its capacity is shared by both directions.

    Attributes:
        a (str): Identifier of a topology node (a router / switch / PoP).
        b (str): Identifier of a topology node (a router / switch / PoP).
        capacity_mbps (int): Reservable bandwidth in Mbit/s, > 0.
        id (str): Identifier of a link between two nodes.
        price_per_gbps_hour (float): Price of 1 Gbit/s for one hour on this link, in `0 ..= MAX_PRICE` (10^6).
    """

    a: str
    b: str
    capacity_mbps: int
    id: str
    price_per_gbps_hour: float
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        a = self.a

        b = self.b

        capacity_mbps = self.capacity_mbps

        id = self.id

        price_per_gbps_hour = self.price_per_gbps_hour

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "a": a,
                "b": b,
                "capacity_mbps": capacity_mbps,
                "id": id,
                "price_per_gbps_hour": price_per_gbps_hour,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        a = d.pop("a")

        b = d.pop("b")

        capacity_mbps = d.pop("capacity_mbps")

        id = d.pop("id")

        price_per_gbps_hour = d.pop("price_per_gbps_hour")

        link = cls(
            a=a,
            b=b,
            capacity_mbps=capacity_mbps,
            id=id,
            price_per_gbps_hour=price_per_gbps_hour,
        )

        link.additional_properties = d
        return link

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
