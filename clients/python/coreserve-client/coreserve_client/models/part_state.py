from enum import StrEnum


class PartState(StrEnum):
    BROKEN = "broken"
    CANCELLED = "cancelled"
    ENDED = "ended"
    RUNNING = "running"
    SCHEDULED = "scheduled"

    def __str__(self) -> str:
        return str(self.value)
