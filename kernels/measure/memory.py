"""Peak memory allocated during one call, and memory available for a point.

CUDA: torch's allocator statistics. CPU: the allocation and free events PyTorch's profiler
records, replayed in time order. Both report the peak above what was allocated when the call
began, so inputs made before the call are not counted. On a CPU the same profile names the
ATen operations the call ran (a record's ``ops_run``: which of PyTorch's kernels a path's call
reached, e.g. the backend scaled_dot_product_attention chose).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from kernels import _compat


def profiled_cpu(fn: Callable[[], object]) -> tuple[int, list[str], object]:
    """(peak bytes allocated during ``fn()``, the ATen operations it ran, each once in the
    order first called, result): one profile gives both."""
    # the autograd profiler that torch.profiler.profile wraps: the wrapper's first start
    # asks hasattr(torch, "_inductor"), which imports TorchDynamo and Inductor (1.3 s of CPU
    # in every process that measures, for a flag only CUDA graphs read)
    from torch.autograd.profiler import profile

    with profile(use_cpu=True, profile_memory=True) as prof:
        result = fn()
    current = peak = 0
    for _start, nbytes in sorted(_compat.memory_events(prof)):
        current += nbytes
        peak = max(peak, current)
    return peak, _compat.op_names(prof), result


def peak_allocated_cpu(fn: Callable[[], object]) -> tuple[int, object]:
    peak, _ops, result = profiled_cpu(fn)
    return peak, result


def peak_allocated_cuda(fn: Callable[[], object]) -> tuple[int, object]:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    result = fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before, result


def peak_allocated(device: str, fn: Callable[[], object]) -> tuple[int, object]:
    """(peak bytes allocated during ``fn()`` above the bytes allocated before it, result)."""
    return peak_allocated_cuda(fn) if device == "cuda" else peak_allocated_cpu(fn)


def allocated_and_ops(device: str, fn: Callable[[], object]) -> tuple[int, list[str] | None, object]:
    """peak_allocated, with the ATen operations ``fn()`` ran where a profile takes the peak (a
    CPU; None on a GPU, whose allocator gives the peak without one)."""
    if device == "cuda":
        peak, result = peak_allocated_cuda(fn)
        return peak, None, result
    return profiled_cpu(fn)


def available_bytes(device: str) -> int:
    if device == "cuda":
        free, _total = torch.cuda.mem_get_info()
        return free
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("cannot read MemAvailable from /proc/meminfo")
