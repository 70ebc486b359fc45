"""Prefix-LM: the first p tokens see one another whole, the rest causal; query position q
sees keys j ≤ q and every key of the prefix, j < p (attn-gym's ``generate_prefix_lm_mask``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kernels.masks.kind import OneNumber, at_least


@dataclass(frozen=True)
class Prefix(OneNumber):
    tokens: int  # p: the prefix's length

    KIND: ClassVar[str] = "prefix"
    EXAMPLE: ClassVar[str] = "prefix:100"
    WHAT: ClassVar[str] = "the prefix (its tokens)"

    def refusal(self, tokens: int) -> str | None:
        if self.tokens > tokens:
            return (
                f"mask '{self.spelled()}': the prefix of {self.tokens:,} tokens is longer than T = {tokens:,}"
            )
        return None

    def bounds(self, position, tokens: int) -> tuple:
        return position * 0, at_least(position + 1, self.tokens)
