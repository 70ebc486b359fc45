"""A kernel launch as data: the kernel, its grid, its arguments and its launch options.

The implementations run their launches; the build stage (``kernels.build``) compiles the
very same launches ahead of time for a GPU that is not there. One description serves both,
so the variants that are built are the ones the sweep launches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Launch:
    kernel: Any  # a @triton.jit function
    grid: tuple[int, ...]
    args: tuple
    options: dict[str, Any] = field(default_factory=dict)  # constexprs, num_warps, ...

    @property
    def name(self) -> str:
        return self.kernel.__name__

    def run(self) -> None:
        self.kernel[self.grid](*self.args, **self.options)
