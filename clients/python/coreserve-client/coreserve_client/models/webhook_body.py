from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="WebhookBody")


@_attrs_define
class WebhookBody:
    """A new webhook.

    Example:
        {'url': 'https://ci.example.org/hooks/coreserve'}

    Attributes:
        url (str): Where to POST the events: an absolute `http` or `https` URL, at most 2048 characters;
            or `nats://host:port/<subject>` to publish them to NATS JetStream on
            `<subject>.<type>` (a stream must capture those subjects). Its host must be, and resolve
            to, public addresses only (no loopback, private, link-local, unique-local, multicast or
            unspecified address), unless the service's admin allowed it (`--webhook-allow`).
        secret (None | str | Unset): The key of the deliveries' signatures (16-256 printable characters); absent: one is
            generated, and shown once in the answer.
    """

    url: str
    secret: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        url = self.url

        secret: None | str | Unset
        if isinstance(self.secret, Unset):
            secret = UNSET
        else:
            secret = self.secret

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "url": url,
            }
        )
        if secret is not UNSET:
            field_dict["secret"] = secret

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        url = d.pop("url")

        def _parse_secret(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        secret = _parse_secret(d.pop("secret", UNSET))

        webhook_body = cls(
            url=url,
            secret=secret,
        )

        return webhook_body
