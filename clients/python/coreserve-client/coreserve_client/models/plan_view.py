from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.plan_status import PlanStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.job_placement import JobPlacement
    from ..models.transfer_placement import TransferPlacement


T = TypeVar("T", bound="PlanView")


@_attrs_define
class PlanView:
    """A plan: the planner's outcome plus the API's record (`id`, owner, status, times).

    Attributes:
        cost (float):
        created_at (datetime.datetime):
        holds_aborted (int):
        id (UUID): The plan's own id.
        jobs (list[JobPlacement]):
        messages (int):
        planner (str):
        planning_ms (float):
        request_id (str): The request's `id` (the client's reference).
        status (PlanStatus): The life of a stored plan.

            One spelling, lowercase, for every form: JSON (serde), text (strum: `Display`, `FromStr`,
            `AsRef<str>`, `&'static str`, the metrics' labels) and the `plans.status` column (sqlx: a
            TEXT column read with `status as "status: PlanStatus"`; written as `&'static str`).
        transfers (list[TransferPlacement]):
        user (str):
        cancelled_at (datetime.datetime | None | Unset):
        reason (None | str | Unset): Why a plan was rejected.
        start (datetime.datetime | None | Unset): Application start.
    """

    cost: float
    created_at: datetime.datetime
    holds_aborted: int
    id: UUID
    jobs: list[JobPlacement]
    messages: int
    planner: str
    planning_ms: float
    request_id: str
    status: PlanStatus
    transfers: list[TransferPlacement]
    user: str
    cancelled_at: datetime.datetime | None | Unset = UNSET
    reason: None | str | Unset = UNSET
    start: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cost = self.cost

        created_at = self.created_at.isoformat()

        holds_aborted = self.holds_aborted

        id = str(self.id)

        jobs = []
        for jobs_item_data in self.jobs:
            jobs_item = jobs_item_data.to_dict()
            jobs.append(jobs_item)

        messages = self.messages

        planner = self.planner

        planning_ms = self.planning_ms

        request_id = self.request_id

        status = self.status.value

        transfers = []
        for transfers_item_data in self.transfers:
            transfers_item = transfers_item_data.to_dict()
            transfers.append(transfers_item)

        user = self.user

        cancelled_at: None | str | Unset
        if isinstance(self.cancelled_at, Unset):
            cancelled_at = UNSET
        elif isinstance(self.cancelled_at, datetime.datetime):
            cancelled_at = self.cancelled_at.isoformat()
        else:
            cancelled_at = self.cancelled_at

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        start: None | str | Unset
        if isinstance(self.start, Unset):
            start = UNSET
        elif isinstance(self.start, datetime.datetime):
            start = self.start.isoformat()
        else:
            start = self.start

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cost": cost,
                "created_at": created_at,
                "holds_aborted": holds_aborted,
                "id": id,
                "jobs": jobs,
                "messages": messages,
                "planner": planner,
                "planning_ms": planning_ms,
                "request_id": request_id,
                "status": status,
                "transfers": transfers,
                "user": user,
            }
        )
        if cancelled_at is not UNSET:
            field_dict["cancelled_at"] = cancelled_at
        if reason is not UNSET:
            field_dict["reason"] = reason
        if start is not UNSET:
            field_dict["start"] = start

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.job_placement import JobPlacement  # noqa: PLC0415
        from ..models.transfer_placement import TransferPlacement  # noqa: PLC0415

        d = dict(src_dict)
        cost = d.pop("cost")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        holds_aborted = d.pop("holds_aborted")

        id = UUID(d.pop("id"))

        jobs = []
        _jobs = d.pop("jobs")
        for jobs_item_data in _jobs:
            jobs_item = JobPlacement.from_dict(jobs_item_data)

            jobs.append(jobs_item)

        messages = d.pop("messages")

        planner = d.pop("planner")

        planning_ms = d.pop("planning_ms")

        request_id = d.pop("request_id")

        status = PlanStatus(d.pop("status"))

        transfers = []
        _transfers = d.pop("transfers")
        for transfers_item_data in _transfers:
            transfers_item = TransferPlacement.from_dict(transfers_item_data)

            transfers.append(transfers_item)

        user = d.pop("user")

        def _parse_cancelled_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                cancelled_at_type_0 = datetime.datetime.fromisoformat(data)

                return cancelled_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        cancelled_at = _parse_cancelled_at(d.pop("cancelled_at", UNSET))

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        def _parse_start(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                start_type_0 = datetime.datetime.fromisoformat(data)

                return start_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        start = _parse_start(d.pop("start", UNSET))

        plan_view = cls(
            cost=cost,
            created_at=created_at,
            holds_aborted=holds_aborted,
            id=id,
            jobs=jobs,
            messages=messages,
            planner=planner,
            planning_ms=planning_ms,
            request_id=request_id,
            status=status,
            transfers=transfers,
            user=user,
            cancelled_at=cancelled_at,
            reason=reason,
            start=start,
        )

        plan_view.additional_properties = d
        return plan_view

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
