from enum import StrEnum


class ReservationState(StrEnum):
    COMMITTED = "committed"
    HELD = "held"

    def __str__(self) -> str:
        return str(self.value)
