"""Packed documents: T tokens holding several sequences, each query seeing only its own
document's keys, causally (``documents``) or whole (``documents-full``). Written as the
documents' lengths, ``documents:300+700+24`` (summing to T), or as one length that tiles T,
``documents:512`` (the last document holds what is left). attn-gym's
``generate_doc_mask_mod(causal_mask or noop_mask, offsets)`` is the same mask."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from kernels.masks.kind import at_most, positive


def _lengths(kind: str, argument: str, example: str) -> tuple[int, ...]:
    written = f"{kind}:{argument}"
    return tuple(positive(part, written, "each document's length", example) for part in argument.split("+"))


@dataclass(frozen=True)
class Documents:
    lengths: tuple[int, ...]  # the documents' lengths in order; one length: it tiles T

    KIND: ClassVar[str] = "documents"
    EXAMPLE: ClassVar[str] = "documents:300+700+24"
    TAKES_ARGUMENT: ClassVar[bool] = True
    CAUSAL: ClassVar[bool] = True  # within each document

    @classmethod
    def parse(cls, argument: str):
        return cls(_lengths(cls.KIND, argument, cls.EXAMPLE))

    def spelled(self) -> str:
        return f"{self.KIND}:{'+'.join(map(str, self.lengths))}"

    def refusal(self, tokens: int) -> str | None:
        if len(self.lengths) > 1 and sum(self.lengths) != tokens:
            return (
                f"mask '{self.spelled()}': the documents' lengths sum to {sum(self.lengths):,}, "
                f"not T = {tokens:,} (one length, as in {self.KIND}:512, tiles any T)"
            )
        return None

    @cached_property
    def _offsets(self) -> tuple[int, ...]:
        """Each document's first position, then T (the lengths given one by one)."""
        found = [0]
        for length in self.lengths:
            found.append(found[-1] + length)
        return tuple(found)

    def document(self, position, tokens: int) -> tuple:
        """(start, end) of the document holding ``position`` (an int, or a tensor of them)."""
        if len(self.lengths) == 1:
            start = position // self.lengths[0] * self.lengths[0]
            return start, at_most(start + self.lengths[0], tokens)
        starts = self._offsets
        if isinstance(position, int):
            index = bisect.bisect_right(starts, position) - 1
            return starts[index], starts[index + 1]
        # elementwise: each boundary passed moves the start on by the document before it
        start, end = position * 0, position * 0 + starts[1]
        for before, boundary, after in zip(starts, starts[1:-1], starts[2:], strict=False):
            passed = position >= boundary
            start, end = start + passed * (boundary - before), end + passed * (after - boundary)
        return start, end

    def bounds(self, position, tokens: int) -> tuple:
        start, end = self.document(position, tokens)
        return start, (position + 1 if self.CAUSAL else end)


@dataclass(frozen=True)
class FullDocuments(Documents):
    """Each document seen whole by its own queries (an encoder's packed batch)."""

    KIND: ClassVar[str] = "documents-full"
    EXAMPLE: ClassVar[str] = "documents-full:300+700+24"
    CAUSAL: ClassVar[bool] = False
