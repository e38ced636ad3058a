from enum import StrEnum


class TransferMode(StrEnum):
    CONCURRENT = "concurrent"
    STAGED = "staged"

    def __str__(self) -> str:
        return str(self.value)
