"""Wall-clock timing as the ecosystem does it. CUDA: ``triton.testing.do_bench`` (warm-up,
L2 flushed between repetitions). CPU: ``torch.utils.benchmark.Timer.adaptive_autorange``
(warm-up, then blocks of runs until the median is stable, and at least ten calls' worth
of time for a slow call), on the job's thread count. The
Triton interpreter is never timed. Either way the record gets the median, the 10th and 90th
percentiles of the samples and how many calls were timed."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import NamedTuple

from kernels.spec import CPU_MIN_SAMPLES, CPU_MIN_SECONDS, CUDA_REP_MS, CUDA_WARMUP_MS

CPU_MAX_SECONDS = 3.0  # after which the measurement stops, stable or not (spread recorded)
CPU_STABLE_IQR = 0.1  # interquartile range / median at which it is stable


class Windows(NamedTuple):
    """How long a point is timed on a CPU (config ``timing``): its call at most
    ``cpu_seconds``, stable or not; its stages' warm and cold passes at least
    ``stage_seconds`` (kernels.measure.stages). A quick study (the ci preset) asks for less."""

    cpu_seconds: float
    stage_seconds: float


_WINDOWS: ContextVar[Windows | None] = ContextVar("timing_windows", default=None)


def default_windows() -> Windows:
    from kernels.spec import STAGE_MIN_SECONDS

    return Windows(CPU_MAX_SECONDS, STAGE_MIN_SECONDS["cpu"])


def current_windows() -> Windows:
    """The windows of the command running now: those it was given, else the defaults."""
    return _WINDOWS.get() or default_windows()


@contextmanager
def windows(chosen: Windows | None) -> Iterator[None]:
    """Time with ``chosen`` inside the block (None: the defaults); a warm worker's next
    command starts from the defaults again."""
    token = _WINDOWS.set(chosen)
    try:
        yield
    finally:
        _WINDOWS.reset(token)


def summary(samples_ms: list[float], calls: int) -> dict:
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
        "repeats": calls,
    }


def time_cpu(fn: Callable[[], object], threads: int) -> dict:
    """Median time of ``fn`` on ``threads`` threads; each sample is the mean of a block of
    calls long enough for the clock's resolution not to matter."""
    from torch.utils.benchmark import Timer

    started = time.perf_counter()
    fn()  # warm-up: allocator, lazy initialization; also sizes the run for slow calls
    warm_up = time.perf_counter() - started
    most = current_windows().cpu_seconds
    min_run = min(most, max(min(CPU_MIN_SECONDS, most), CPU_MIN_SAMPLES * warm_up))
    timer = Timer("fn()", globals={"fn": fn}, num_threads=threads)
    found = timer.adaptive_autorange(threshold=CPU_STABLE_IQR, min_run_time=min_run, max_run_time=most)
    samples = [t * 1e3 for t in found.times]
    return summary(samples, len(samples) * found.number_per_run)


def time_cuda(fn: Callable[[], object], rep_ms: int = CUDA_REP_MS) -> dict:
    from triton.testing import do_bench

    samples = do_bench(fn, warmup=CUDA_WARMUP_MS, rep=rep_ms, return_mode="all")
    return summary(list(samples), len(samples))
