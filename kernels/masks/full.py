"""No mask: every query sees every key (``causal: false`` in the sweep's older spelling)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Full:
    KIND: ClassVar[str] = "full"
    EXAMPLE: ClassVar[str] = "full"
    TAKES_ARGUMENT: ClassVar[bool] = False
    NEVER_LOOKS_AHEAD: ClassVar[bool] = False

    def spelled(self) -> str:
        return self.KIND

    def refusal(self, tokens: int) -> str | None:
        return None

    def bounds(self, position, tokens: int) -> tuple:
        return position * 0, position * 0 + tokens
