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

from kernels.runtime import SWITCH
from kernels.triton_env import INTERPRET

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
        spans = []
        for name, arg in zip(arg_names, args_hst, strict=False):
            if hasattr(arg, "data_ptr") and arg.numel() > 0:
                extent = sum((n - 1) * s for n, s in zip(arg.shape, arg.stride(), strict=True)) + 1
                spans.append((arg.data_ptr(), arg.data_ptr() + extent * arg.element_size(), name))
        spans.sort()
        self._starts = np.array([s for s, _, _ in spans], dtype=np.uint64)
        self._ends = np.array([e for _, e, _ in spans], dtype=np.uint64)
        self._names = [n for _, _, n in spans]

    def add(self, op: str, ptrs, mask) -> None:
        addresses = np.asarray(ptrs.data).astype(np.uint64, copy=False)
        enabled = np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)
        addresses = addresses[enabled]
        if addresses.size == 0:
            return
        element = ptrs.get_element_ty().primitive_bitwidth // 8
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
    if not INTERPRET:
        raise RuntimeError(f"counting traffic needs Triton's interpreter: set {SWITCH}=1")
    from triton.runtime import interpreter

    counter = TrafficCounter()
    builder = interpreter.InterpreterBuilder
    executor = interpreter.GridExecutor
    original_load, original_store = builder.create_masked_load, builder.create_masked_store
    original_init = executor._init_args_hst

    def masked_load(self, ptrs, mask, other, *rest):
        counter.add("load", ptrs, mask)
        return original_load(self, ptrs, mask, other, *rest)

    def masked_store(self, ptrs, value, mask, *rest):
        counter.add("store", ptrs, mask)
        return original_store(self, ptrs, value, mask, *rest)

    def init_args(self, args_dev, kwargs):
        args_hst, kwargs_hst = original_init(self, args_dev, kwargs)
        counter.begin_launch(self.fn.__name__, self.arg_names, args_hst)
        return args_hst, kwargs_hst

    builder.create_masked_load, builder.create_masked_store = masked_load, masked_store
    executor._init_args_hst = init_args
    try:
        yield counter
    finally:
        builder.create_masked_load, builder.create_masked_store = original_load, original_store
        executor._init_args_hst = original_init
