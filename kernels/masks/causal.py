"""Causal: query position p sees keys j ≤ p (``causal: true`` in the sweep's older spelling)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Causal:
    KIND: ClassVar[str] = "causal"
    EXAMPLE: ClassVar[str] = "causal"
    TAKES_ARGUMENT: ClassVar[bool] = False
    NEVER_LOOKS_AHEAD: ClassVar[bool] = True

    def spelled(self) -> str:
        return self.KIND

    def refusal(self, tokens: int) -> str | None:
        return None

    def bounds(self, position, tokens: int) -> tuple:
        return position * 0, position + 1
