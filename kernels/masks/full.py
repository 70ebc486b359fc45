"""No mask: every query sees every key (``causal: false`` in the sweep's older spelling)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kernels.masks.kind import NoArgument


@dataclass(frozen=True)
class Full(NoArgument):
    KIND: ClassVar[str] = "full"
    EXAMPLE: ClassVar[str] = "full"

    def bounds(self, position, tokens: int) -> tuple:
        return position * 0, position * 0 + tokens
