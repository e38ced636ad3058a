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


T = TypeVar("T", bound="PlanEvent")


@_attrs_define
class PlanEvent:
    """One change of a plan's state, from the durable event log (`GET /v1/events`).

    Written in the same transaction as the change it records (PostgreSQL: a trigger on `plans`,
    migrations/0020_plan_events.sql; memory: under the store's lock). Ids grow in commit order,
    so a reader that resumes after id N (`Last-Event-ID: N`) misses nothing and sees nothing
    twice.

        Attributes:
            at (datetime.datetime): When the change was written.
            id (int): Monotonic, > 0, in commit order; the SSE `id:`.
            jobs (list[JobPlacement]): The plan's jobs at the change (a broken one says why in `broken`).
            plan_id (UUID): The plan (`/v1/plans/{plan_id}`).
            request_id (str): The client's reference of the plan request.
            status (PlanStatus): The life of a plan, from the planner's answer to the stored plan: one type for the
                planner's outcome, the store and the REST API.

                One spelling, lowercase, for every form: JSON (serde), text (strum: `Display`, `FromStr`,
                `AsRef<str>`, `&'static str`, the metrics' labels) and the `plans.status` column (sqlx: a
                TEXT column read with `status as "status: PlanStatus"`; written as `&'static str`).
            transfers (list[TransferPlacement]): The plan's transfers at the change (a broken one says why in `broken`).
            type_ (str): What changed, also the SSE `event:`: `plan.` and the plan's new status
                (`plan.committed`, `plan.active`, `plan.broken`, ...), `plan.modified`, or a part's new
                state at its start or end (`job.running`, `job.ended`, `transfer.running`,
                `transfer.ended`, written as the service's clock passes the part's booked start and end).
            user (str): The plan owner's name.
            part (None | str | Unset): The job (its name) or transfer (`from->to`, its jobs' names) a `job.*` or
                `transfer.*`
                event is about; absent on a plan's event.
    """

    at: datetime.datetime
    id: int
    jobs: list[JobPlacement]
    plan_id: UUID
    request_id: str
    status: PlanStatus
    transfers: list[TransferPlacement]
    type_: str
    user: str
    part: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        id = self.id

        jobs = []
        for jobs_item_data in self.jobs:
            jobs_item = jobs_item_data.to_dict()
            jobs.append(jobs_item)

        plan_id = str(self.plan_id)

        request_id = self.request_id

        status = self.status.value

        transfers = []
        for transfers_item_data in self.transfers:
            transfers_item = transfers_item_data.to_dict()
            transfers.append(transfers_item)

        type_ = self.type_

        user = self.user

        part: None | str | Unset
        if isinstance(self.part, Unset):
            part = UNSET
        else:
            part = self.part

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "at": at,
                "id": id,
                "jobs": jobs,
                "plan_id": plan_id,
                "request_id": request_id,
                "status": status,
                "transfers": transfers,
                "type": type_,
                "user": user,
            }
        )
        if part is not UNSET:
            field_dict["part"] = part

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.job_placement import JobPlacement  # noqa: PLC0415
        from ..models.transfer_placement import TransferPlacement  # noqa: PLC0415

        d = dict(src_dict)
        at = datetime.datetime.fromisoformat(d.pop("at"))

        id = d.pop("id")

        jobs = []
        _jobs = d.pop("jobs")
        for jobs_item_data in _jobs:
            jobs_item = JobPlacement.from_dict(jobs_item_data)

            jobs.append(jobs_item)

        plan_id = UUID(d.pop("plan_id"))

        request_id = d.pop("request_id")

        status = PlanStatus(d.pop("status"))

        transfers = []
        _transfers = d.pop("transfers")
        for transfers_item_data in _transfers:
            transfers_item = TransferPlacement.from_dict(transfers_item_data)

            transfers.append(transfers_item)

        type_ = d.pop("type")

        user = d.pop("user")

        def _parse_part(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        part = _parse_part(d.pop("part", UNSET))

        plan_event = cls(
            at=at,
            id=id,
            jobs=jobs,
            plan_id=plan_id,
            request_id=request_id,
            status=status,
            transfers=transfers,
            type_=type_,
            user=user,
            part=part,
        )

        plan_event.additional_properties = d
        return plan_event

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
