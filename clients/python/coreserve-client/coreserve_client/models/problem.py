from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.problem_participant_error_type_0 import ProblemParticipantErrorType0


T = TypeVar("T", bound="Problem")


@_attrs_define
class Problem:
    """An RFC 9457 problem details body.

    Attributes:
        detail (str): What went wrong this time.
        status (int): The HTTP status code.
        title (str): Short summary of the problem kind.
        type_ (str): URI of the problem kind: `urn:coreserve:problem:<slug>`.
        participant_error (None | ProblemParticipantErrorType0 | Unset): Errors of the participant protocol: the exact
            error as an object tagged by `kind`, its
            data in `about` (e.g. `{"kind": "hold_expired", "about": "<id>"}`), read by remote
            planners; absent otherwise.
    """

    detail: str
    status: int
    title: str
    type_: str
    participant_error: None | ProblemParticipantErrorType0 | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.problem_participant_error_type_0 import ProblemParticipantErrorType0  # noqa: PLC0415

        detail = self.detail

        status = self.status

        title = self.title

        type_ = self.type_

        participant_error: dict[str, Any] | None | Unset
        if isinstance(self.participant_error, Unset):
            participant_error = UNSET
        elif isinstance(self.participant_error, ProblemParticipantErrorType0):
            participant_error = self.participant_error.to_dict()
        else:
            participant_error = self.participant_error

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "detail": detail,
                "status": status,
                "title": title,
                "type": type_,
            }
        )
        if participant_error is not UNSET:
            field_dict["participant_error"] = participant_error

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.problem_participant_error_type_0 import ProblemParticipantErrorType0  # noqa: PLC0415

        d = dict(src_dict)
        detail = d.pop("detail")

        status = d.pop("status")

        title = d.pop("title")

        type_ = d.pop("type")

        def _parse_participant_error(data: object) -> None | ProblemParticipantErrorType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                participant_error_type_0 = ProblemParticipantErrorType0.from_dict(data)

                return participant_error_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ProblemParticipantErrorType0 | Unset, data)

        participant_error = _parse_participant_error(d.pop("participant_error", UNSET))

        problem = cls(
            detail=detail,
            status=status,
            title=title,
            type_=type_,
            participant_error=participant_error,
        )

        problem.additional_properties = d
        return problem

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
