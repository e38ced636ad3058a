from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.plan_status import PlanStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.footprint import Footprint
    from ..models.job_placement import JobPlacement
    from ..models.transfer_placement import TransferPlacement


T = TypeVar("T", bound="Outcome")


@_attrs_define
class Outcome:
    """What became of one plan request (one line of outcomes.jsonl).

    `cost` = sum over jobs of `duration_s/3600 * (cpus * price_per_cpu_hour + gpus *
    price_per_gpu_hour)` plus sum over
    transfers of `bandwidth_mbps/1000 * duration_s/3600 * sum(price_per_gbps_hour of its path)`;
    0 for a rejected request. `planning_ms` is wall-clock planning time (virtual in the simulator).

    `status` is the planner's (committed, rejected or planned); a plan shown by the REST API
    carries its stored plan's status instead (any `PlanStatus`).

        Attributes:
            cost (float):
            planner (str):
            planning_ms (float):
            request_id (str): The request's `id` (the client's reference).
            status (PlanStatus): The life of a plan, from the planner's answer to the stored plan: one type for the
                planner's outcome, the store and the REST API.

                One spelling, lowercase, for every form: JSON (serde), text (strum: `Display`, `FromStr`,
                `AsRef<str>`, `&'static str`, the metrics' labels) and the `plans.status` column (sqlx: a
                TEXT column read with `status as "status: PlanStatus"`; written as `&'static str`).
            deadline (datetime.datetime | None | Unset): The request's deadline, for a committed or planned plan: no
                modification may end a
                part after it.
            footprint (Footprint | None | Unset):
            holds_aborted (int | Unset): Holds released before commit (backtracks, `st` shifts, failed batches).
            jobs (list[JobPlacement] | Unset):
            messages (int | Unset): Participant messages this plan cost (queries, prepares, commits, aborts).
            reason (None | str | Unset): Why the request was rejected.
            rounds (int | Unset): Sequential message rounds this plan cost: its critical path in round trips. Messages
                sent together and awaited together (one per site of a batch, the commits of every
                participant) count once; the GIS's catalogue counts as one round (it is no participant
                message). Across a wide-area network planning time is about `rounds` round trips.
            start (datetime.datetime | None | Unset): Application start `st` of a committed plan.
            transfers (list[TransferPlacement] | Unset):
    """

    cost: float
    planner: str
    planning_ms: float
    request_id: str
    status: PlanStatus
    deadline: datetime.datetime | None | Unset = UNSET
    footprint: Footprint | None | Unset = UNSET
    holds_aborted: int | Unset = UNSET
    jobs: list[JobPlacement] | Unset = UNSET
    messages: int | Unset = UNSET
    reason: None | str | Unset = UNSET
    rounds: int | Unset = UNSET
    start: datetime.datetime | None | Unset = UNSET
    transfers: list[TransferPlacement] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.footprint import Footprint  # noqa: PLC0415

        cost = self.cost

        planner = self.planner

        planning_ms = self.planning_ms

        request_id = self.request_id

        status = self.status.value

        deadline: None | str | Unset
        if isinstance(self.deadline, Unset):
            deadline = UNSET
        elif isinstance(self.deadline, datetime.datetime):
            deadline = self.deadline.isoformat()
        else:
            deadline = self.deadline

        footprint: dict[str, Any] | None | Unset
        if isinstance(self.footprint, Unset):
            footprint = UNSET
        elif isinstance(self.footprint, Footprint):
            footprint = self.footprint.to_dict()
        else:
            footprint = self.footprint

        holds_aborted = self.holds_aborted

        jobs: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.jobs, Unset):
            jobs = []
            for jobs_item_data in self.jobs:
                jobs_item = jobs_item_data.to_dict()
                jobs.append(jobs_item)

        messages = self.messages

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        rounds = self.rounds

        start: None | str | Unset
        if isinstance(self.start, Unset):
            start = UNSET
        elif isinstance(self.start, datetime.datetime):
            start = self.start.isoformat()
        else:
            start = self.start

        transfers: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.transfers, Unset):
            transfers = []
            for transfers_item_data in self.transfers:
                transfers_item = transfers_item_data.to_dict()
                transfers.append(transfers_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cost": cost,
                "planner": planner,
                "planning_ms": planning_ms,
                "request_id": request_id,
                "status": status,
            }
        )
        if deadline is not UNSET:
            field_dict["deadline"] = deadline
        if footprint is not UNSET:
            field_dict["footprint"] = footprint
        if holds_aborted is not UNSET:
            field_dict["holds_aborted"] = holds_aborted
        if jobs is not UNSET:
            field_dict["jobs"] = jobs
        if messages is not UNSET:
            field_dict["messages"] = messages
        if reason is not UNSET:
            field_dict["reason"] = reason
        if rounds is not UNSET:
            field_dict["rounds"] = rounds
        if start is not UNSET:
            field_dict["start"] = start
        if transfers is not UNSET:
            field_dict["transfers"] = transfers

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.footprint import Footprint  # noqa: PLC0415
        from ..models.job_placement import JobPlacement  # noqa: PLC0415
        from ..models.transfer_placement import TransferPlacement  # noqa: PLC0415

        d = dict(src_dict)
        cost = d.pop("cost")

        planner = d.pop("planner")

        planning_ms = d.pop("planning_ms")

        request_id = d.pop("request_id")

        status = PlanStatus(d.pop("status"))

        def _parse_deadline(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                deadline_type_0 = datetime.datetime.fromisoformat(data)

                return deadline_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        deadline = _parse_deadline(d.pop("deadline", UNSET))

        def _parse_footprint(data: object) -> Footprint | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                footprint_type_1 = Footprint.from_dict(data)

                return footprint_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Footprint | None | Unset, data)

        footprint = _parse_footprint(d.pop("footprint", UNSET))

        holds_aborted = d.pop("holds_aborted", UNSET)

        _jobs = d.pop("jobs", UNSET)
        jobs: list[JobPlacement] | Unset = UNSET
        if _jobs is not UNSET:
            jobs = []
            for jobs_item_data in _jobs:
                jobs_item = JobPlacement.from_dict(jobs_item_data)

                jobs.append(jobs_item)

        messages = d.pop("messages", UNSET)

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        rounds = d.pop("rounds", UNSET)

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

        _transfers = d.pop("transfers", UNSET)
        transfers: list[TransferPlacement] | Unset = UNSET
        if _transfers is not UNSET:
            transfers = []
            for transfers_item_data in _transfers:
                transfers_item = TransferPlacement.from_dict(transfers_item_data)

                transfers.append(transfers_item)

        outcome = cls(
            cost=cost,
            planner=planner,
            planning_ms=planning_ms,
            request_id=request_id,
            status=status,
            deadline=deadline,
            footprint=footprint,
            holds_aborted=holds_aborted,
            jobs=jobs,
            messages=messages,
            reason=reason,
            rounds=rounds,
            start=start,
            transfers=transfers,
        )

        outcome.additional_properties = d
        return outcome

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
