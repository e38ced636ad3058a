from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="TokenBody")


@_attrs_define
class TokenBody:
    """Who the new token is for.

    Attributes:
        user (str): The user the token acts as: 1-128 characters, not blank, no control characters
            (surrounding whitespace is dropped).
        admin (bool | Unset):
        service (bool | Unset): May drive holds directly.
    """

    user: str
    admin: bool | Unset = UNSET
    service: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        user = self.user

        admin = self.admin

        service = self.service

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "user": user,
            }
        )
        if admin is not UNSET:
            field_dict["admin"] = admin
        if service is not UNSET:
            field_dict["service"] = service

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        user = d.pop("user")

        admin = d.pop("admin", UNSET)

        service = d.pop("service", UNSET)

        token_body = cls(
            user=user,
            admin=admin,
            service=service,
        )

        return token_body
