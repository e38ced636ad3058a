from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="TokenView")


@_attrs_define
class TokenView:
    """A new token (shown only in this answer).

    Attributes:
        admin (bool):
        id (UUID): The token's id: what `DELETE /v1/tokens/{id}` names.
        planner (bool):
        service (bool):
        token (str):
        user (str):
        expires_at (datetime.datetime | None | Unset):
    """

    admin: bool
    id: UUID
    planner: bool
    service: bool
    token: str
    user: str
    expires_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        admin = self.admin

        id = str(self.id)

        planner = self.planner

        service = self.service

        token = self.token

        user = self.user

        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "admin": admin,
                "id": id,
                "planner": planner,
                "service": service,
                "token": token,
                "user": user,
            }
        )
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        admin = d.pop("admin")

        id = UUID(d.pop("id"))

        planner = d.pop("planner")

        service = d.pop("service")

        token = d.pop("token")

        user = d.pop("user")

        def _parse_expires_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                expires_at_type_0 = datetime.datetime.fromisoformat(data)

                return expires_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        expires_at = _parse_expires_at(d.pop("expires_at", UNSET))

        token_view = cls(
            admin=admin,
            id=id,
            planner=planner,
            service=service,
            token=token,
            user=user,
            expires_at=expires_at,
        )

        token_view.additional_properties = d
        return token_view

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
