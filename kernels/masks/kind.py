"""What every mask kind answers (a Protocol: the kinds are plain frozen dataclasses)."""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar, Protocol


class Mask(Protocol):
    KIND: ClassVar[str]  # the name before the colon
    EXAMPLE: ClassVar[str]  # how it is written, for messages
    TAKES_ARGUMENT: ClassVar[bool]

    def spelled(self) -> str:
        """The string that parses back to this mask."""
        ...

    def refusal(self, tokens: int) -> str | None:
        """Why the mask cannot apply to T keys (naming its argument), or None."""
        ...

    def bounds(self, position, tokens: int) -> tuple:
        """(lo, hi): query ``position`` sees keys lo ≤ j < hi of the T, lo ≤ position < hi.
        ``position`` is an int, or a tensor of positions (the answer then tensors too: what
        the PyTorch paths mask with), so the kinds write it with arithmetic, comparisons and
        ``at_least``/``at_most`` only."""
        ...


def at_least(value, floor: int):
    """max(value, floor) of an int or, elementwise, of a tensor."""
    return value.clamp(min=floor) if hasattr(value, "clamp") else max(value, floor)


def at_most(value, ceiling: int):
    """min(value, ceiling) of an int or, elementwise, of a tensor."""
    return value.clamp(max=ceiling) if hasattr(value, "clamp") else min(value, ceiling)


def positive(text: str, mask: str, what: str, example: str) -> int:
    """An argument that must be an integer ≥ 1, or ValueError naming the mask as written
    (``mask``) and the rule."""
    if re.fullmatch("[1-9][0-9]*", text) is None:  # one spelling per value: no sign, no 0 first
        raise ValueError(f"mask {mask!r}: {what} must be an integer ≥ 1, as in {example}")
    return int(text)


class NoArgument:
    """A kind written by its name alone."""

    KIND: ClassVar[str]
    TAKES_ARGUMENT: ClassVar[bool] = False

    def spelled(self) -> str:
        return self.KIND

    def refusal(self, tokens: int) -> str | None:
        return None


class OneNumber:
    """A kind written ``kind:n``, n an integer ≥ 1, its one field (a frozen dataclass's)."""

    KIND: ClassVar[str]
    EXAMPLE: ClassVar[str]
    WHAT: ClassVar[str]  # what n is, for the refusal
    TAKES_ARGUMENT: ClassVar[bool] = True

    @classmethod
    def parse(cls, argument: str):
        return cls(positive(argument, f"{cls.KIND}:{argument}", cls.WHAT, cls.EXAMPLE))

    def spelled(self) -> str:
        return f"{self.KIND}:{dataclasses.astuple(self)[0]}"
