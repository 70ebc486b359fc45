"""A causal sliding window of w keys: query position p sees keys p − w < j ≤ p, itself and
the w − 1 before it (FlashAttention's ``window_size=(w − 1, 0)``; attn-gym's
``generate_sliding_window(w − 1)``, whose argument counts the keys behind the query)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kernels.masks.kind import OneNumber, at_least


@dataclass(frozen=True)
class Window(OneNumber):
    keys: int  # w: the keys each query sees, its own included

    KIND: ClassVar[str] = "window"
    EXAMPLE: ClassVar[str] = "window:256"
    WHAT: ClassVar[str] = "the window (keys each query sees)"

    def refusal(self, tokens: int) -> str | None:
        return None  # a window at least T long is causal: allowed, the tiles say so

    def bounds(self, position, tokens: int) -> tuple:
        return at_least(position - self.keys + 1, 0), position + 1
