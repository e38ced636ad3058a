from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="WhoAmI")


@_attrs_define
class WhoAmI:
    """Whom a token acts as, and its roles.

    Attributes:
        admin (bool): May do everything (everyone's plans, grid changes, tokens).
        service (bool): May drive holds directly.
        user (str):
        planner (bool | Unset): A planner of this deployment.
        token_id (None | Unset | UUID): The id of the token used (what `DELETE /v1/tokens/{id}` names).
    """

    admin: bool
    service: bool
    user: str
    planner: bool | Unset = UNSET
    token_id: None | Unset | UUID = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        admin = self.admin

        service = self.service

        user = self.user

        planner = self.planner

        token_id: None | str | Unset
        if isinstance(self.token_id, Unset):
            token_id = UNSET
        elif isinstance(self.token_id, UUID):
            token_id = str(self.token_id)
        else:
            token_id = self.token_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "admin": admin,
                "service": service,
                "user": user,
            }
        )
        if planner is not UNSET:
            field_dict["planner"] = planner
        if token_id is not UNSET:
            field_dict["token_id"] = token_id

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        admin = d.pop("admin")

        service = d.pop("service")

        user = d.pop("user")

        planner = d.pop("planner", UNSET)

        def _parse_token_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                token_id_type_0 = UUID(data)

                return token_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        token_id = _parse_token_id(d.pop("token_id", UNSET))

        who_am_i = cls(
            admin=admin,
            service=service,
            user=user,
            planner=planner,
            token_id=token_id,
        )

        who_am_i.additional_properties = d
        return who_am_i

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
