from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.pool_gpus import PoolGpus


T = TypeVar("T", bound="SiteHoldBody")


@_attrs_define
class SiteHoldBody:
    """`POST /v1/sites/{id}/holds` body: prepare (phase 1) a compute hold.

    Attributes:
        cpus (int): CPUs, 1 ..= 2^30.
        end (datetime.datetime):
        start (datetime.datetime): Not in the past; before `end`.
        gpus (None | PoolGpus | Unset):
        txn (None | Unset | UUID):
    """

    cpus: int
    end: datetime.datetime
    start: datetime.datetime
    gpus: None | PoolGpus | Unset = UNSET
    txn: None | Unset | UUID = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.pool_gpus import PoolGpus  # noqa: PLC0415

        cpus = self.cpus

        end = self.end.isoformat()

        start = self.start.isoformat()

        gpus: dict[str, Any] | None | Unset
        if isinstance(self.gpus, Unset):
            gpus = UNSET
        elif isinstance(self.gpus, PoolGpus):
            gpus = self.gpus.to_dict()
        else:
            gpus = self.gpus

        txn: None | str | Unset
        if isinstance(self.txn, Unset):
            txn = UNSET
        elif isinstance(self.txn, UUID):
            txn = str(self.txn)
        else:
            txn = self.txn

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "cpus": cpus,
                "end": end,
                "start": start,
            }
        )
        if gpus is not UNSET:
            field_dict["gpus"] = gpus
        if txn is not UNSET:
            field_dict["txn"] = txn

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.pool_gpus import PoolGpus  # noqa: PLC0415

        d = dict(src_dict)
        cpus = d.pop("cpus")

        end = datetime.datetime.fromisoformat(d.pop("end"))

        start = datetime.datetime.fromisoformat(d.pop("start"))

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

        def _parse_txn(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                txn_type_1 = UUID(data)

                return txn_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        txn = _parse_txn(d.pop("txn", UNSET))

        site_hold_body = cls(
            cpus=cpus,
            end=end,
            start=start,
            gpus=gpus,
            txn=txn,
        )

        return site_hold_body
