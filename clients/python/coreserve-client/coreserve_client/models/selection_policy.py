from enum import StrEnum


class SelectionPolicy(StrEnum):
    COST = "cost"
    LOAD = "load"
    RANDOM = "random"
    TIME = "time"

    def __str__(self) -> str:
        return str(self.value)
