from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="WebhookCreated")


@_attrs_define
class WebhookCreated:
    """A new webhook, with its secret (shown only here).

    Attributes:
        all_users (bool): Gets every user's events (made by an admin).
        created_at (datetime.datetime):
        delivered_through (int): The id of the last event the receiver acknowledged.
        enabled (bool): False once disabled (its deliveries failed for longer than the service allows).
        failures (int): Failed attempts in a row at the next event (0 when all is well).
        id (UUID):
        url (str):
        user (str):
        secret (str): The HMAC-SHA256 key of the `Coreserve-Signature` header of every delivery.
        failing_since (datetime.datetime | None | Unset):
        last_error (None | str | Unset):
        retry_at (datetime.datetime | None | Unset): The next attempt, while failing.
    """

    all_users: bool
    created_at: datetime.datetime
    delivered_through: int
    enabled: bool
    failures: int
    id: UUID
    url: str
    user: str
    secret: str
    failing_since: datetime.datetime | None | Unset = UNSET
    last_error: None | str | Unset = UNSET
    retry_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        all_users = self.all_users

        created_at = self.created_at.isoformat()

        delivered_through = self.delivered_through

        enabled = self.enabled

        failures = self.failures

        id = str(self.id)

        url = self.url

        user = self.user

        secret = self.secret

        failing_since: None | str | Unset
        if isinstance(self.failing_since, Unset):
            failing_since = UNSET
        elif isinstance(self.failing_since, datetime.datetime):
            failing_since = self.failing_since.isoformat()
        else:
            failing_since = self.failing_since

        last_error: None | str | Unset
        if isinstance(self.last_error, Unset):
            last_error = UNSET
        else:
            last_error = self.last_error

        retry_at: None | str | Unset
        if isinstance(self.retry_at, Unset):
            retry_at = UNSET
        elif isinstance(self.retry_at, datetime.datetime):
            retry_at = self.retry_at.isoformat()
        else:
            retry_at = self.retry_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "all_users": all_users,
                "created_at": created_at,
                "delivered_through": delivered_through,
                "enabled": enabled,
                "failures": failures,
                "id": id,
                "url": url,
                "user": user,
                "secret": secret,
            }
        )
        if failing_since is not UNSET:
            field_dict["failing_since"] = failing_since
        if last_error is not UNSET:
            field_dict["last_error"] = last_error
        if retry_at is not UNSET:
            field_dict["retry_at"] = retry_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        all_users = d.pop("all_users")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        delivered_through = d.pop("delivered_through")

        enabled = d.pop("enabled")

        failures = d.pop("failures")

        id = UUID(d.pop("id"))

        url = d.pop("url")

        user = d.pop("user")

        secret = d.pop("secret")

        def _parse_failing_since(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                failing_since_type_0 = datetime.datetime.fromisoformat(data)

                return failing_since_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        failing_since = _parse_failing_since(d.pop("failing_since", UNSET))

        def _parse_last_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        last_error = _parse_last_error(d.pop("last_error", UNSET))

        def _parse_retry_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                retry_at_type_0 = datetime.datetime.fromisoformat(data)

                return retry_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        retry_at = _parse_retry_at(d.pop("retry_at", UNSET))

        webhook_created = cls(
            all_users=all_users,
            created_at=created_at,
            delivered_through=delivered_through,
            enabled=enabled,
            failures=failures,
            id=id,
            url=url,
            user=user,
            secret=secret,
            failing_since=failing_since,
            last_error=last_error,
            retry_at=retry_at,
        )

        webhook_created.additional_properties = d
        return webhook_created

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
