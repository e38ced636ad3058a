from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="RouteView")


@_attrs_define
class RouteView:
    """A path the NIS could reserve now.

    Attributes:
        links (list[str]): Link ids from the first site's node to the second's; empty when both share a node.
        price_per_gbps_hour (float):
        free_mbps (int | None | Unset): Bottleneck free bandwidth over the interval (Mbit/s); absent for an empty path.
    """

    links: list[str]
    price_per_gbps_hour: float
    free_mbps: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        links = self.links

        price_per_gbps_hour = self.price_per_gbps_hour

        free_mbps: int | None | Unset
        if isinstance(self.free_mbps, Unset):
            free_mbps = UNSET
        else:
            free_mbps = self.free_mbps

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "links": links,
                "price_per_gbps_hour": price_per_gbps_hour,
            }
        )
        if free_mbps is not UNSET:
            field_dict["free_mbps"] = free_mbps

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        links = cast(list[str], d.pop("links"))

        price_per_gbps_hour = d.pop("price_per_gbps_hour")

        def _parse_free_mbps(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        free_mbps = _parse_free_mbps(d.pop("free_mbps", UNSET))

        route_view = cls(
            links=links,
            price_per_gbps_hour=price_per_gbps_hour,
            free_mbps=free_mbps,
        )

        route_view.additional_properties = d
        return route_view

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
