from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.allocation import Allocation


T = TypeVar("T", bound="Project")


@_attrs_define
class Project:
    """A project: its allocation and its members (users). Users not named by any project form a
    project of their own, named like them.

        Attributes:
            allocation (Allocation): A project's allocation for one period (admin-set).
            id (str): 1-128 characters, no control characters.
            members (list[str] | Unset): The users whose plans count against this project (a user is in one project at most:
                naming them here moves them).
    """

    allocation: Allocation
    id: str
    members: list[str] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        allocation = self.allocation.to_dict()

        id = self.id

        members: list[str] | Unset = UNSET
        if not isinstance(self.members, Unset):
            members = self.members

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "allocation": allocation,
                "id": id,
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

        id = d.pop("id")

        members = cast(list[str], d.pop("members", UNSET))

        project = cls(
            allocation=allocation,
            id=id,
            members=members,
        )

        project.additional_properties = d
        return project

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
