from enum import StrEnum


class OutcomePlanStatusStatus(StrEnum):
    ACTIVE = "active"
    BROKEN = "broken"
    CANCELLED = "cancelled"
    COMMITTED = "committed"
    COMPLETED = "completed"
    PENDING = "pending"
    PLANNED = "planned"
    REJECTED = "rejected"

    def __str__(self) -> str:
        return str(self.value)
