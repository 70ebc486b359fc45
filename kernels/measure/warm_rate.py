"""One operation timed warm against its fixed cost: the sampling the ceilings' copies and
exponentials and the stages' operation rates (kernels.measure.op_rates) share. The data stays
in the cache level it was sized for, and a one-element call of the same operation, timed
beside it, takes torch's fixed cost of a call out."""

from __future__ import annotations

import statistics
import time

from kernels.measure.timing import current_windows
from kernels.spec import RATE_MIN_SAMPLES, rate_seconds

SAMPLE_SECONDS = 1e-3  # calls per sample: about this long
CUDA_GRAPH_REP_MS = 20
FIXED_CALLS = 64  # one-element calls per block at least: the first after a large copy is cold


def warm_times(device: str, fn, fixed) -> tuple[float, float, float]:
    """Median seconds of one call of ``fn`` repeated on the same data (kept in cache), of one
    call of ``fixed`` (the same operation on one element: torch's fixed cost of a call), and of
    their difference (what the data took). On a CPU the two alternate, block by block, so that
    a change of clock or load meets both alike, and the difference is taken per pair."""
    if device == "cuda":
        from triton.testing import do_bench_cudagraph

        both = [do_bench_cudagraph(f, rep=CUDA_GRAPH_REP_MS, return_mode="median") / 1e3 for f in (fn, fixed)]
        return both[0], both[1], both[0] - both[1]
    fn()  # warm-up: first touch, and the data into cache
    fixed()
    started = time.perf_counter()
    fn()
    calls = max(1, int(SAMPLE_SECONDS / max(time.perf_counter() - started, 1e-9)))
    fixed_calls = max(calls, FIXED_CALLS)
    least, most = rate_seconds(current_windows().stage_seconds)  # config timing: a quick study less
    whole: list[float] = []
    alone: list[float] = []
    data: list[float] = []
    begun = time.perf_counter()
    while True:
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        middle = time.perf_counter()
        for _ in range(fixed_calls):
            fixed()
        whole.append((middle - started) / calls)
        alone.append((time.perf_counter() - middle) / fixed_calls)
        data.append(whole[-1] - alone[-1])
        spent = time.perf_counter() - begun
        if spent >= most or (spent >= least and len(data) >= RATE_MIN_SAMPLES):
            return statistics.median(whole), statistics.median(alone), statistics.median(data)
