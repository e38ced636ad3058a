from enum import StrEnum


class OutcomePlanStatusStatus(StrEnum):
    BROKEN = "broken"
    CANCELLED = "cancelled"
    COMMITTED = "committed"
    PENDING = "pending"
    PLANNED = "planned"
    REJECTED = "rejected"

    def __str__(self) -> str:
        return str(self.value)
