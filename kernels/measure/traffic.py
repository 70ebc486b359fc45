"""Global-memory traffic counted in Triton's interpreter.

While a ``count_traffic()`` block is open, every global load and store the interpreter
executes is counted: the bytes of the lanes its mask enables (masked-off lanes move
nothing), attributed to the running kernel and to the tensor argument whose memory the
address falls in. This is the measurement the traffic model's ``as_issued`` form must match.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from kernels import _compat
from kernels.impl import mode

UNKNOWN = "?"


class TrafficCounter:
    """Bytes by (kernel, tensor, op), and the kernels launched, in order."""

    def __init__(self) -> None:
        self.bytes: Counter[tuple[str, str, str]] = Counter()
        self.launches: list[str] = []
        self._kernel = ""
        self._starts = np.zeros(0, dtype=np.uint64)
        self._ends = np.zeros(0, dtype=np.uint64)
        self._names: list[str] = []

    @property
    def total(self) -> int:
        return sum(self.bytes.values())

    def begin_launch(self, kernel: str, arg_names, args_hst) -> None:
        self._kernel = kernel.removesuffix("_kernel")
        self.launches.append(self._kernel)
        found: dict[tuple[int, int], str] = {}
        for name, arg in zip(arg_names, args_hst, strict=False):
            if hasattr(arg, "data_ptr") and arg.numel() > 0:
                extent = sum((n - 1) * s for n, s in zip(arg.shape, arg.stride(), strict=True)) + 1
                # a tensor passed twice (an unused pointer filled with another argument) is
                # named as its first argument
                found.setdefault((arg.data_ptr(), arg.data_ptr() + extent * arg.element_size()), name)
        spans = sorted((start, end, name) for (start, end), name in found.items())
        self._starts = np.array([s for s, _, _ in spans], dtype=np.uint64)
        self._ends = np.array([e for _, e, _ in spans], dtype=np.uint64)
        self._names = [n for _, _, n in spans]

    def add(self, op: str, addresses: np.ndarray, enabled: np.ndarray, element: int) -> None:
        addresses = addresses[enabled]
        if addresses.size == 0:
            return
        index = np.searchsorted(self._starts, addresses, side="right").astype(np.int64) - 1
        inside = (index >= 0) & (addresses < self._ends[np.maximum(index, 0)])
        counts = np.bincount(index[inside], minlength=len(self._names))
        for name, count in zip(self._names, counts, strict=True):
            if count:
                self.bytes[(self._kernel, name, op)] += int(count) * element
        stray = int(np.count_nonzero(~inside))
        if stray:
            self.bytes[(self._kernel, UNKNOWN, op)] += stray * element

    def by_stage(self) -> dict[tuple[str, str, str], int]:
        return dict(self.bytes)


@contextmanager
def count_traffic() -> Iterator[TrafficCounter]:
    """Count the global traffic of every interpreted Triton launch inside the block."""
    if not mode.interpret():
        raise RuntimeError(f"counting traffic needs Triton's interpreter: set {mode.SWITCH}=1")
    counter = TrafficCounter()
    with _compat.interpreter_hooks(counter.begin_launch, counter.add):
        yield counter
