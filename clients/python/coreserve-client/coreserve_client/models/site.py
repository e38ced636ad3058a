from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Site")


@_attrs_define
class Site:
    """A compute resource: a cluster of identical nodes reserved in CPUs (see docs/model.md).

    Attributes:
        cpus (int): Number of CPUs, > 0.
        id (str): Identifier of a compute resource (site).
        node (str): Identifier of a topology node (a router / switch / PoP).
        os (str): Operating system, e.g. `linux`, `solaris`, `bsd` (compared case-insensitively).
        price_per_cpu_hour (float): Price of one CPU for one hour, in `0 ..= MAX_PRICE` (10^6).
    """

    cpus: int
    id: str
    node: str
    os: str
    price_per_cpu_hour: float
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cpus = self.cpus

        id = self.id

        node = self.node

        os = self.os

        price_per_cpu_hour = self.price_per_cpu_hour

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cpus": cpus,
                "id": id,
                "node": node,
                "os": os,
                "price_per_cpu_hour": price_per_cpu_hour,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        cpus = d.pop("cpus")

        id = d.pop("id")

        node = d.pop("node")

        os = d.pop("os")

        price_per_cpu_hour = d.pop("price_per_cpu_hour")

        site = cls(
            cpus=cpus,
            id=id,
            node=node,
            os=os,
            price_per_cpu_hour=price_per_cpu_hour,
        )

        site.additional_properties = d
        return site

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
