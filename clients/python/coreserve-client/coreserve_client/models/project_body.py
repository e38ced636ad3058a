from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.allocation import Allocation


T = TypeVar("T", bound="ProjectBody")


@_attrs_define
class ProjectBody:
    """`PUT /v1/projects/{id}` body. Unknown fields are refused.

    Attributes:
        allocation (Allocation): A project's allocation for one period (admin-set).
        members (list[str] | Unset): The users whose plans count against the project (naming a user here moves them from
            their previous project).
    """

    allocation: Allocation
    members: list[str] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        allocation = self.allocation.to_dict()

        members: list[str] | Unset = UNSET
        if not isinstance(self.members, Unset):
            members = self.members

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "allocation": allocation,
            }
        )
        if members is not UNSET:
            field_dict["members"] = members

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.allocation import Allocation  # noqa: PLC0415

        d = dict(src_dict)
        allocation = Allocation.from_dict(d.pop("allocation"))

        members = cast(list[str], d.pop("members", UNSET))

        project_body = cls(
            allocation=allocation,
            members=members,
        )

        return project_body
