from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.part_state import PartState
from ..models.transfer_mode import TransferMode
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.transfer_traffic import TransferTraffic


T = TypeVar("T", bound="TransferPlacement")


@_attrs_define
class TransferPlacement:
    """The bandwidth reservation of one transfer. `path` is empty when both jobs share a node
    (no network reservation is needed).

        Attributes:
            bandwidth_mbps (int):
            end (datetime.datetime):
            from_ (str):
            path (list[str]):
            start (datetime.datetime):
            to (str):
            broken (None | str | Unset): Why the network can no longer honour this transfer's guaranteed rate, once it
                cannot
                (the plan is then `broken`); absent while it is honoured.
            mode (TransferMode | Unset): When a transfer runs relative to its two jobs (docs/model.md, "Workflows").

                Text (`Display`, `FromStr`): `concurrent` or `staged`; parsing ignores ASCII case.
            price_per_gbps_hour (float | Unset): The path's price of one Gbit/s-hour when the transfer was booked (0 and
                absent on a
                free path or none).
            state (None | PartState | Unset):
            traffic (None | TransferTraffic | Unset):
    """

    bandwidth_mbps: int
    end: datetime.datetime
    from_: str
    path: list[str]
    start: datetime.datetime
    to: str
    broken: None | str | Unset = UNSET
    mode: TransferMode | Unset = UNSET
    price_per_gbps_hour: float | Unset = UNSET
    state: None | PartState | Unset = UNSET
    traffic: None | TransferTraffic | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.transfer_traffic import TransferTraffic  # noqa: PLC0415

        bandwidth_mbps = self.bandwidth_mbps

        end = self.end.isoformat()

        from_ = self.from_

        path = self.path

        start = self.start.isoformat()

        to = self.to

        broken: None | str | Unset
        if isinstance(self.broken, Unset):
            broken = UNSET
        else:
            broken = self.broken

        mode: str | Unset = UNSET
        if not isinstance(self.mode, Unset):
            mode = self.mode.value

        price_per_gbps_hour = self.price_per_gbps_hour

        state: None | str | Unset
        if isinstance(self.state, Unset):
            state = UNSET
        elif isinstance(self.state, PartState):
            state = self.state.value
        else:
            state = self.state

        traffic: dict[str, Any] | None | Unset
        if isinstance(self.traffic, Unset):
            traffic = UNSET
        elif isinstance(self.traffic, TransferTraffic):
            traffic = self.traffic.to_dict()
        else:
            traffic = self.traffic

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "bandwidth_mbps": bandwidth_mbps,
                "end": end,
                "from": from_,
                "path": path,
                "start": start,
                "to": to,
            }
        )
        if broken is not UNSET:
            field_dict["broken"] = broken
        if mode is not UNSET:
            field_dict["mode"] = mode
        if price_per_gbps_hour is not UNSET:
            field_dict["price_per_gbps_hour"] = price_per_gbps_hour
        if state is not UNSET:
            field_dict["state"] = state
        if traffic is not UNSET:
            field_dict["traffic"] = traffic

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.transfer_traffic import TransferTraffic  # noqa: PLC0415

        d = dict(src_dict)
        bandwidth_mbps = d.pop("bandwidth_mbps")

        end = datetime.datetime.fromisoformat(d.pop("end"))

        from_ = d.pop("from")

        path = cast(list[str], d.pop("path"))

        start = datetime.datetime.fromisoformat(d.pop("start"))

        to = d.pop("to")

        def _parse_broken(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        broken = _parse_broken(d.pop("broken", UNSET))

        _mode = d.pop("mode", UNSET)
        mode: TransferMode | Unset
        if isinstance(_mode, Unset):
            mode = UNSET
        else:
            mode = TransferMode(_mode)

        price_per_gbps_hour = d.pop("price_per_gbps_hour", UNSET)

        def _parse_state(data: object) -> None | PartState | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                state_type_1 = PartState(data)

                return state_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PartState | Unset, data)

        state = _parse_state(d.pop("state", UNSET))

        def _parse_traffic(data: object) -> None | TransferTraffic | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                traffic_type_1 = TransferTraffic.from_dict(data)

                return traffic_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | TransferTraffic | Unset, data)

        traffic = _parse_traffic(d.pop("traffic", UNSET))

        transfer_placement = cls(
            bandwidth_mbps=bandwidth_mbps,
            end=end,
            from_=from_,
            path=path,
            start=start,
            to=to,
            broken=broken,
            mode=mode,
            price_per_gbps_hour=price_per_gbps_hour,
            state=state,
            traffic=traffic,
        )

        transfer_placement.additional_properties = d
        return transfer_placement

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
