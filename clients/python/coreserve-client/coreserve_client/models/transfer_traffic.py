from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="TransferTraffic")


@_attrs_define
class TransferTraffic:
    """The traffic of one transfer as the NIS's data plane recognises it: TCP from `from_addr` to
    `to_addr`, destination port `port` (the receiver listens on it).

        Attributes:
            from_addr (str): The sending site's endpoint address.
            port (int): The destination port.
            protocol (str): Always `tcp`.
            to_addr (str): The receiving site's endpoint address.
    """

    from_addr: str
    port: int
    protocol: str
    to_addr: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from_addr = self.from_addr

        port = self.port

        protocol = self.protocol

        to_addr = self.to_addr

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "from_addr": from_addr,
                "port": port,
                "protocol": protocol,
                "to_addr": to_addr,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        from_addr = d.pop("from_addr")

        port = d.pop("port")

        protocol = d.pop("protocol")

        to_addr = d.pop("to_addr")

        transfer_traffic = cls(
            from_addr=from_addr,
            port=port,
            protocol=protocol,
            to_addr=to_addr,
        )

        transfer_traffic.additional_properties = d
        return transfer_traffic

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
