from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.reservation_method import ReservationMethod
from ..models.selection_policy import SelectionPolicy
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.compute_demand import ComputeDemand
    from ..models.network_demand import NetworkDemand


T = TypeVar("T", bound="PlanBody")


@_attrs_define
class PlanBody:
    """`POST /v1/plans` body: a plan request in the model's format, without `user` (the token's)
    and `submitted_at` (the time the server received it). Unknown fields are refused.

        Example:
            {'deadline': datetime.datetime(2030, 1, 1, 12, 0, tzinfo=datetime.timezone(datetime.timedelta(0), 'Z')), 'id':
                'wf-1', 'jobs': [{'cpus': 16, 'duration_s': 3600, 'name': 'A', 'offset_s': 0, 'os': 'linux'}, {'cpus': 16,
                'duration_s': 3600, 'name': 'B', 'offset_s': 0, 'os': 'linux'}], 'transfers': [{'bandwidth_mbps': 500,
                'duration_s': 600, 'from': 'A', 'offset_s': 0, 'to': 'B'}]}

        Attributes:
            deadline (datetime.datetime): Every reservation must end by then.
            jobs (list[ComputeDemand]): 1 to 1,000 jobs (`MAX_JOBS`).
            dependency_gap_s (int | Unset): Seconds kept at least between a job's end and the start of a job `after` it
                (what a
                workflow engine needs to notice the end and submit the next job), in `0 ..=
                3153600000`. Default 0.
            id (None | str | Unset): The client's reference, echoed as `request_id` (default: a fresh UUID); 1-128
                characters, not blank, no control characters.
            method (None | ReservationMethod | Unset):
            not_before (datetime.datetime | None | Unset): Earliest application start.
            policy (None | SelectionPolicy | Unset):
            slack_s (int | Unset): Every job's `slack_s` unless it gives its own, in `0 ..= 3153600000`. Default 0.
            transfers (list[NetworkDemand] | Unset): At most 4,000 transfers (`MAX_TRANSFERS`).
    """

    deadline: datetime.datetime
    jobs: list[ComputeDemand]
    dependency_gap_s: int | Unset = UNSET
    id: None | str | Unset = UNSET
    method: None | ReservationMethod | Unset = UNSET
    not_before: datetime.datetime | None | Unset = UNSET
    policy: None | SelectionPolicy | Unset = UNSET
    slack_s: int | Unset = UNSET
    transfers: list[NetworkDemand] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        deadline = self.deadline.isoformat()

        jobs = []
        for jobs_item_data in self.jobs:
            jobs_item = jobs_item_data.to_dict()
            jobs.append(jobs_item)

        dependency_gap_s = self.dependency_gap_s

        id: None | str | Unset
        if isinstance(self.id, Unset):
            id = UNSET
        else:
            id = self.id

        method: None | str | Unset
        if isinstance(self.method, Unset):
            method = UNSET
        elif isinstance(self.method, ReservationMethod):
            method = self.method.value
        else:
            method = self.method

        not_before: None | str | Unset
        if isinstance(self.not_before, Unset):
            not_before = UNSET
        elif isinstance(self.not_before, datetime.datetime):
            not_before = self.not_before.isoformat()
        else:
            not_before = self.not_before

        policy: None | str | Unset
        if isinstance(self.policy, Unset):
            policy = UNSET
        elif isinstance(self.policy, SelectionPolicy):
            policy = self.policy.value
        else:
            policy = self.policy

        slack_s = self.slack_s

        transfers: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.transfers, Unset):
            transfers = []
            for transfers_item_data in self.transfers:
                transfers_item = transfers_item_data.to_dict()
                transfers.append(transfers_item)

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "deadline": deadline,
                "jobs": jobs,
            }
        )
        if dependency_gap_s is not UNSET:
            field_dict["dependency_gap_s"] = dependency_gap_s
        if id is not UNSET:
            field_dict["id"] = id
        if method is not UNSET:
            field_dict["method"] = method
        if not_before is not UNSET:
            field_dict["not_before"] = not_before
        if policy is not UNSET:
            field_dict["policy"] = policy
        if slack_s is not UNSET:
            field_dict["slack_s"] = slack_s
        if transfers is not UNSET:
            field_dict["transfers"] = transfers

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.compute_demand import ComputeDemand  # noqa: PLC0415
        from ..models.network_demand import NetworkDemand  # noqa: PLC0415

        d = dict(src_dict)
        deadline = datetime.datetime.fromisoformat(d.pop("deadline"))

        jobs = []
        _jobs = d.pop("jobs")
        for jobs_item_data in _jobs:
            jobs_item = ComputeDemand.from_dict(jobs_item_data)

            jobs.append(jobs_item)

        dependency_gap_s = d.pop("dependency_gap_s", UNSET)

        def _parse_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        id = _parse_id(d.pop("id", UNSET))

        def _parse_method(data: object) -> None | ReservationMethod | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                method_type_1 = ReservationMethod(data)

                return method_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ReservationMethod | Unset, data)

        method = _parse_method(d.pop("method", UNSET))

        def _parse_not_before(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                not_before_type_0 = datetime.datetime.fromisoformat(data)

                return not_before_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        not_before = _parse_not_before(d.pop("not_before", UNSET))

        def _parse_policy(data: object) -> None | SelectionPolicy | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                policy_type_1 = SelectionPolicy(data)

                return policy_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | SelectionPolicy | Unset, data)

        policy = _parse_policy(d.pop("policy", UNSET))

        slack_s = d.pop("slack_s", UNSET)

        _transfers = d.pop("transfers", UNSET)
        transfers: list[NetworkDemand] | Unset = UNSET
        if _transfers is not UNSET:
            transfers = []
            for transfers_item_data in _transfers:
                transfers_item = NetworkDemand.from_dict(transfers_item_data)

                transfers.append(transfers_item)

        plan_body = cls(
            deadline=deadline,
            jobs=jobs,
            dependency_gap_s=dependency_gap_s,
            id=id,
            method=method,
            not_before=not_before,
            policy=policy,
            slack_s=slack_s,
            transfers=transfers,
        )

        return plan_body
