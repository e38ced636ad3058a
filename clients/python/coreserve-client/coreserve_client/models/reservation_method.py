from enum import StrEnum


class ReservationMethod(StrEnum):
    BBR = "bbr"
    BBR_OVERLAY = "bbr-overlay"
    BIR = "bir"

    def __str__(self) -> str:
        return str(self.value)
