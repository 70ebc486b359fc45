"""Wall-clock timing. CUDA: ``triton.testing.do_bench`` (L2 flushed between repetitions).
CPU: repeated runs of the whole call. The Triton interpreter is never timed."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def _summary(samples_ms: list[float]) -> dict:
    ordered = sorted(samples_ms)
    if len(ordered) == 1:
        p10 = p90 = ordered[0]
    else:
        deciles = statistics.quantiles(ordered, n=10, method="inclusive")
        p10, p90 = deciles[0], deciles[-1]
    return {
        "time_ms": statistics.median(ordered),
        "time_p10_ms": p10,
        "time_p90_ms": p90,
        "repeats": len(ordered),
    }


def time_cpu(
    fn: Callable[[], object], min_repeats: int = 5, max_repeats: int = 50, min_seconds: float = 0.5
) -> dict:
    """At least ``min_repeats`` runs after one warm-up, more while under ``min_seconds``."""
    fn()
    samples: list[float] = []
    started = time.perf_counter()
    while len(samples) < max_repeats and (
        len(samples) < min_repeats or time.perf_counter() - started < min_seconds
    ):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return _summary(samples)


def time_cuda(fn: Callable[[], object], rep_ms: int = 100) -> dict:
    from triton.testing import do_bench

    samples = do_bench(fn, warmup=25, rep=rep_ms, return_mode="all")
    return _summary(list(samples))
