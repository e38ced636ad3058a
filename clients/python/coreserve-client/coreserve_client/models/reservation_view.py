from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.reservation_state import ReservationState
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.pool_gpus import PoolGpus


T = TypeVar("T", bound="ReservationView")


@_attrs_define
class ReservationView:
    """One hold or reservation of a site.

    Attributes:
        cpus (int):
        end (datetime.datetime):
        start (datetime.datetime):
        state (ReservationState): State of a hold or reservation.
        broken (None | str | Unset): Why the site's scheduler no longer honours this reservation (absent: it does).
        expires_at (datetime.datetime | None | Unset): Lease end of a hold.
        gpus (None | PoolGpus | Unset):
        hold (None | Unset | UUID):
        reservation_name (None | str | Unset): At a Slurm site: the Slurm advance reservation's name (shown with the
            hold id).
    """

    cpus: int
    end: datetime.datetime
    start: datetime.datetime
    state: ReservationState
    broken: None | str | Unset = UNSET
    expires_at: datetime.datetime | None | Unset = UNSET
    gpus: None | PoolGpus | Unset = UNSET
    hold: None | Unset | UUID = UNSET
    reservation_name: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.pool_gpus import PoolGpus  # noqa: PLC0415

        cpus = self.cpus

        end = self.end.isoformat()

        start = self.start.isoformat()

        state = self.state.value

        broken: None | str | Unset
        if isinstance(self.broken, Unset):
            broken = UNSET
        else:
            broken = self.broken

        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        gpus: dict[str, Any] | None | Unset
        if isinstance(self.gpus, Unset):
            gpus = UNSET
        elif isinstance(self.gpus, PoolGpus):
            gpus = self.gpus.to_dict()
        else:
            gpus = self.gpus

        hold: None | str | Unset
        if isinstance(self.hold, Unset):
            hold = UNSET
        elif isinstance(self.hold, UUID):
            hold = str(self.hold)
        else:
            hold = self.hold

        reservation_name: None | str | Unset
        if isinstance(self.reservation_name, Unset):
            reservation_name = UNSET
        else:
            reservation_name = self.reservation_name

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cpus": cpus,
                "end": end,
                "start": start,
                "state": state,
            }
        )
        if broken is not UNSET:
            field_dict["broken"] = broken
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at
        if gpus is not UNSET:
            field_dict["gpus"] = gpus
        if hold is not UNSET:
            field_dict["hold"] = hold
        if reservation_name is not UNSET:
            field_dict["reservation_name"] = reservation_name

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.pool_gpus import PoolGpus  # noqa: PLC0415

        d = dict(src_dict)
        cpus = d.pop("cpus")

        end = datetime.datetime.fromisoformat(d.pop("end"))

        start = datetime.datetime.fromisoformat(d.pop("start"))

        state = ReservationState(d.pop("state"))

        def _parse_broken(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        broken = _parse_broken(d.pop("broken", UNSET))

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

        def _parse_gpus(data: object) -> None | PoolGpus | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                gpus_type_1 = PoolGpus.from_dict(data)

                return gpus_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PoolGpus | Unset, data)

        gpus = _parse_gpus(d.pop("gpus", UNSET))

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

        def _parse_reservation_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reservation_name = _parse_reservation_name(d.pop("reservation_name", UNSET))

        reservation_view = cls(
            cpus=cpus,
            end=end,
            start=start,
            state=state,
            broken=broken,
            expires_at=expires_at,
            gpus=gpus,
            hold=hold,
            reservation_name=reservation_name,
        )

        reservation_view.additional_properties = d
        return reservation_view

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
