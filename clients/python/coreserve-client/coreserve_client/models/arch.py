from enum import StrEnum


class Arch(StrEnum):
    AARCH64 = "aarch64"
    PPC64LE = "ppc64le"
    X86_64 = "x86_64"

    def __str__(self) -> str:
        return str(self.value)
