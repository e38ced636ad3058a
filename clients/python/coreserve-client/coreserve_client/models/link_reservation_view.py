from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.reservation_state import ReservationState
from ..types import UNSET, Unset

T = TypeVar("T", bound="LinkReservationView")


@_attrs_define
class LinkReservationView:
    """One link's share of a hold or reservation of bandwidth (a hold on a path of N links is
    listed once per link, with the same `hold`).

        Attributes:
            bandwidth_mbps (int): Booked bandwidth (Mbit/s).
            end (datetime.datetime):
            link (str): Identifier of a link between two nodes.
            start (datetime.datetime):
            state (ReservationState): State of a hold or reservation.
            expires_at (datetime.datetime | None | Unset): Lease end of a hold.
            hold (None | Unset | UUID):
    """

    bandwidth_mbps: int
    end: datetime.datetime
    link: str
    start: datetime.datetime
    state: ReservationState
    expires_at: datetime.datetime | None | Unset = UNSET
    hold: None | Unset | UUID = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        bandwidth_mbps = self.bandwidth_mbps

        end = self.end.isoformat()

        link = self.link

        start = self.start.isoformat()

        state = self.state.value

        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        hold: None | str | Unset
        if isinstance(self.hold, Unset):
            hold = UNSET
        elif isinstance(self.hold, UUID):
            hold = str(self.hold)
        else:
            hold = self.hold

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "bandwidth_mbps": bandwidth_mbps,
                "end": end,
                "link": link,
                "start": start,
                "state": state,
            }
        )
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at
        if hold is not UNSET:
            field_dict["hold"] = hold

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        bandwidth_mbps = d.pop("bandwidth_mbps")

        end = datetime.datetime.fromisoformat(d.pop("end"))

        link = d.pop("link")

        start = datetime.datetime.fromisoformat(d.pop("start"))

        state = ReservationState(d.pop("state"))

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

        def _parse_hold(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                hold_type_1 = UUID(data)

                return hold_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        hold = _parse_hold(d.pop("hold", UNSET))

        link_reservation_view = cls(
            bandwidth_mbps=bandwidth_mbps,
            end=end,
            link=link,
            start=start,
            state=state,
            expires_at=expires_at,
            hold=hold,
        )

        link_reservation_view.additional_properties = d
        return link_reservation_view

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
