from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="SiteBody")


@_attrs_define
class SiteBody:
    """`PUT /v1/sites/{id}` body (the site without its id, which is in the path).

    Attributes:
        cpus (int): Must equal the current CPU count.
        node (str): Identifier of a topology node (a router / switch / PoP).
        os (str): 1-128 characters, not blank, no control characters. Cannot change while holds or
            reservations of the site end in the future (409).
        price_per_cpu_hour (float): 0 ..= 1,000,000.
    """

    cpus: int
    node: str
    os: str
    price_per_cpu_hour: float

    def to_dict(self) -> dict[str, Any]:
        cpus = self.cpus

        node = self.node

        os = self.os

        price_per_cpu_hour = self.price_per_cpu_hour

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "cpus": cpus,
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

        node = d.pop("node")

        os = d.pop("os")

        price_per_cpu_hour = d.pop("price_per_cpu_hour")

        site_body = cls(
            cpus=cpus,
            node=node,
            os=os,
            price_per_cpu_hour=price_per_cpu_hour,
        )

        return site_body
