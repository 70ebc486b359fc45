"""One reference pass: the same two operations timed the same way wherever they run — a copy
past the caches (256 MiB read and written) and a float32 product of two 1,024 × 1,024
matrices, each the median of 15 calls. The ceilings time it at their start and their end
(how far it moves on its own); each point whose stages are timed times it again beside them.
Their ratio is the machine's drift between the two (another tenant, a clock that changed): a
stage that missed its expected time by as much as the machine drifted was not the model's
error."""

from __future__ import annotations

import statistics

import torch

from kernels.measure.op_rates import timed_call

COPY_BYTES = 256 << 20  # past the last cache of a CPU (a 48 MiB L3) or a GPU (an H200 L2: 60 MiB)
PRODUCT_SIZE = 1024
CALLS = 15


def _median_seconds(fn, device: str) -> float:
    timed_call(device, fn)  # first touch, allocator, kernels chosen
    return max(statistics.median(timed_call(device, fn) for _ in range(CALLS)), 1e-9)


def reference_pass(device: str) -> dict:
    """The reference operations' rates now: GB/s of the copy (bytes read and written), GFLOP/s
    of the product."""
    src = torch.ones(COPY_BYTES // 8, device=device)  # source and destination: COPY_BYTES together
    dst = torch.empty_like(src)
    copy = _median_seconds(lambda: dst.copy_(src), device)
    a = torch.randn(PRODUCT_SIZE, PRODUCT_SIZE, device=device)
    b = torch.randn(PRODUCT_SIZE, PRODUCT_SIZE, device=device)
    product = _median_seconds(lambda: a @ b, device)
    return {
        "copy_gbps": COPY_BYTES / copy / 1e9,
        "product_gflops": 2 * PRODUCT_SIZE**3 / product / 1e9,
        "method": (
            f"median of {CALLS} calls after one: a copy of {COPY_BYTES >> 21} MiB into as much, and a "
            f"float32 product of two {PRODUCT_SIZE}×{PRODUCT_SIZE} matrices"
        ),
    }
