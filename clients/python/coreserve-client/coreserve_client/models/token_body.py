from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="TokenBody")


@_attrs_define
class TokenBody:
    """Who the new token is for.

    Attributes:
        user (str): The user (principal) the token acts as: 1-128 characters, no control characters, no
            leading or trailing whitespace (refused, not trimmed), not a reserved name (`admin`,
            `service`, `root`, `system`, any case, or anything starting with `@`).
        admin (bool | Unset):
        expires_at (datetime.datetime | None | Unset): Refused from this instant on (absent: never expires). Must be in
            the future.
        planner (bool | Unset): A planner of this deployment (implies `service`): its holds belong to the deployment's
            planner principal `@planners`, which every planner credential may drive, so that any
            planner finishes another's in-doubt transactions.
        service (bool | Unset): May drive holds directly.
    """

    user: str
    admin: bool | Unset = UNSET
    expires_at: datetime.datetime | None | Unset = UNSET
    planner: bool | Unset = UNSET
    service: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        user = self.user

        admin = self.admin

        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        planner = self.planner

        service = self.service

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "user": user,
            }
        )
        if admin is not UNSET:
            field_dict["admin"] = admin
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at
        if planner is not UNSET:
            field_dict["planner"] = planner
        if service is not UNSET:
            field_dict["service"] = service

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        user = d.pop("user")

        admin = d.pop("admin", UNSET)

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

        planner = d.pop("planner", UNSET)

        service = d.pop("service", UNSET)

        token_body = cls(
            user=user,
            admin=admin,
            expires_at=expires_at,
            planner=planner,
            service=service,
        )

        return token_body
