from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.route_view import RouteView


T = TypeVar("T", bound="RouteAnswer")


@_attrs_define
class RouteAnswer:
    """The NIS's answer: a route, or none (no path with enough free bandwidth).

    Attributes:
        route (None | RouteView | Unset):
    """

    route: None | RouteView | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.route_view import RouteView  # noqa: PLC0415

        route: dict[str, Any] | None | Unset
        if isinstance(self.route, Unset):
            route = UNSET
        elif isinstance(self.route, RouteView):
            route = self.route.to_dict()
        else:
            route = self.route

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if route is not UNSET:
            field_dict["route"] = route

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.route_view import RouteView  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_route(data: object) -> None | RouteView | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                route_type_1 = RouteView.from_dict(data)

                return route_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RouteView | Unset, data)

        route = _parse_route(d.pop("route", UNSET))

        route_answer = cls(
            route=route,
        )

        route_answer.additional_properties = d
        return route_answer

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
