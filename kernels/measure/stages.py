"""Each stage of a materialized path timed as it runs in the chain, warm and cold.

The stages (kernels.impl: torch_naive's five operations, triton_naive's three kernels) write
into tensors allocated once, so no stage pays for a fresh T×T allocation or its page faults.
The chain is run over and over; in each pass every stage is timed on its own, right after the
stage before it wrote its input. Passes alternate between two kinds, so that a change of
clock or load meets both alike:
- warm: nothing between the stages, so the input is wherever the stage before left it (in
  cache while it fits): the hand-off as the chain meets it;
- cold: the caches emptied just before each stage (CPU: a buffer STAGE_FLUSH_FACTOR times the
  last level's size read and written; GPU: a 256 MB buffer zeroed, as ``triton.testing.do_bench``
  does between repetitions), so the input comes from DRAM.
Warm over cold speed is then the share of the hand-off the caches serve.

CPU stages are timed with ``time.perf_counter`` around each call (torch's CPU operations are
synchronous); GPU stages with CUDA events around each launch sequence, read once per pass.
The Triton interpreter is never timed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from kernels.measure.timing import current_windows, summary
from kernels.spec import (
    CUDA_FLUSH_BYTES,
    STAGE_FEWEST_PASSES,
    STAGE_FLUSH_FACTOR,
    STAGE_FLUSH_MIN_BYTES,
    STAGE_MAX_PASSES,
    STAGE_MAX_SECONDS,
    STAGE_MIN_PASSES,
    STAGE_MIN_SECONDS,
)

Stage = tuple[str, Callable[[], object]]


def flush_buffer(device: str, last_level_bytes: int | None) -> torch.Tensor:
    """A buffer whose streaming evicts every cache level of the device."""
    if device == "cuda":
        return torch.empty(CUDA_FLUSH_BYTES // 4, dtype=torch.int32, device=device)
    size = max(STAGE_FLUSH_MIN_BYTES, STAGE_FLUSH_FACTOR * (last_level_bytes or 0))
    return torch.zeros(size // 4, dtype=torch.int32)


def empty_caches(buffer: torch.Tensor) -> None:
    if buffer.is_cuda:
        buffer.zero_()
    else:
        buffer.add_(1)  # read and written: every line of the buffer passes through the caches


def _pass_cpu(stages: list[Stage], flush: torch.Tensor | None) -> list[float]:
    times = []
    for _, fn in stages:
        if flush is not None:
            empty_caches(flush)
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def _pass_cuda(stages: list[Stage], flush: torch.Tensor | None) -> list[float]:
    events = []
    for _, fn in stages:
        if flush is not None:
            empty_caches(flush)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    return [start.elapsed_time(end) / 1e3 for start, end in events]


def time_stages(stages: list[Stage], device: str, last_level_bytes: int | None = None) -> list[dict]:
    """Per stage, in chain order: ``stage``, warm ``time_ms`` with its 10th and 90th
    percentiles, the same cold (``cold_time_ms``, ...), and ``repeats`` (passes of each kind)."""
    one_pass = _pass_cuda if device == "cuda" else _pass_cpu
    flush = flush_buffer(device, last_level_bytes)
    one_pass(stages, None)  # warm-up: first touch of every buffer, compilation on a GPU
    warm: list[list[float]] = [[] for _ in stages]
    cold: list[list[float]] = [[] for _ in stages]
    least = STAGE_MIN_SECONDS[device] if device == "cuda" else current_windows().stage_seconds
    started, passes = time.perf_counter(), 0
    while passes < STAGE_MAX_PASSES:
        elapsed = time.perf_counter() - started
        if passes >= STAGE_MIN_PASSES and elapsed >= least:
            break
        if passes >= STAGE_FEWEST_PASSES and elapsed >= STAGE_MAX_SECONDS:
            break
        for kind, flush_with in ((warm, None), (cold, flush)):
            for found, seconds in zip(kind, one_pass(stages, flush_with), strict=True):
                found.append(seconds * 1e3)
        passes += 1
    return [
        {"stage": name}
        | summary(w, passes)
        | {f"cold_{key}": value for key, value in summary(c, passes).items() if key != "repeats"}
        for (name, _), w, c in zip(stages, warm, cold, strict=True)
    ]
