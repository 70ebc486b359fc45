"""Causal: query position p sees keys j ≤ p (``causal: true`` in the sweep's older spelling)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kernels.masks.kind import NoArgument


@dataclass(frozen=True)
class Causal(NoArgument):
    KIND: ClassVar[str] = "causal"
    EXAMPLE: ClassVar[str] = "causal"

    def bounds(self, position, tokens: int) -> tuple:
        return position * 0, position + 1
