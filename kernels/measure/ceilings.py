"""The machine's ceilings, measured once per run before any point is timed: how fast it copies
memory and how fast it multiplies matrices. A point's predicted time is bounded below by its
bytes over the copy rate and its FLOPs over the matrix-product rate (a roofline), which is
what lets a point too slow to finish be skipped before it starts.

CPU: a 256 MiB float32 copy and a 2,048² float32 product on the job's threads. GPU: a 1 GiB
device-to-device copy and an 8,192² bfloat16 product, timed with do_bench. ``quick`` is what
the measure command uses when it is given no ceilings: on a CPU a 64 MiB copy and a 1,024²
product, best of three (a fraction of a second). Asked for cuda on a machine without a GPU,
``unavailable`` says so in the same fields, with the rates null.
"""

from __future__ import annotations

import datetime
import time

import torch

from kernels.measure.provenance import device_name
from kernels.measure.timing import time_cpu, time_cuda

COPY_BYTES = {"cpu": 256 << 20, "cuda": 1 << 30}
MATMUL_SIZE = {"cpu": 2048, "cuda": 8192}
MATMUL_DTYPE = {"cpu": "float32", "cuda": "bfloat16"}


def _time(device: str, fn) -> float:
    found = time_cuda(fn) if device == "cuda" else time_cpu(fn, torch.get_num_threads())
    return found["time_ms"] / 1e3


def copy_rate(device: str) -> float:
    """Bytes per second moved by a copy: each element read once and written once."""
    n = COPY_BYTES[device] // 4
    src = torch.rand(n, device=device)
    dst = torch.empty_like(src)
    seconds = _time(device, lambda: dst.copy_(src))
    return 2 * COPY_BYTES[device] / seconds


def matmul_rate(device: str) -> float:
    """FLOP/s of one square matrix product in the device's fast dtype."""
    n = MATMUL_SIZE[device]
    dtype = getattr(torch, MATMUL_DTYPE[device])
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    seconds = _time(device, lambda: a @ b)
    return 2 * n**3 / seconds


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def measure(device: str) -> dict:
    started = _now()
    return {
        "device": device,
        "device_name": device_name(device),
        "threads": torch.get_num_threads(),
        "copy_gbps": copy_rate(device) / 1e9,
        "matmul_tflops": matmul_rate(device) / 1e12,
        "matmul_dtype": MATMUL_DTYPE[device],
        "measured_at": started,
        "reason": None,
    }


def unavailable(device: str, reason: str) -> dict:
    """The ceilings of a device this machine does not have: the same fields, rates null."""
    return {
        "device": device,
        "device_name": device_name(device),
        "threads": torch.get_num_threads(),
        "copy_gbps": None,
        "matmul_tflops": None,
        "matmul_dtype": MATMUL_DTYPE[device],
        "measured_at": None,
        "reason": reason,
    }


def usable(found: dict | None) -> bool:
    """Whether ``found`` holds rates to predict with (not null, finite and positive)."""
    if not found:
        return False
    rates = (found.get("copy_gbps"), found.get("matmul_tflops"))
    return all(isinstance(r, (int, float)) and 0 < r < float("inf") for r in rates)


QUICK_COPY_BYTES = 64 << 20
QUICK_MATMUL_SIZE = 1024


def _best_of_three(fn) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return max(best, 1e-9)


def quick(device: str) -> dict:
    """The machine's rates in a fraction of a second: a small copy and product on a CPU (the
    full measurement on a GPU, which takes under a second there)."""
    if device == "cuda":
        return measure(device)
    n = QUICK_COPY_BYTES // 4
    src = torch.rand(n)
    dst = torch.empty_like(src)
    copy = _best_of_three(lambda: dst.copy_(src))
    a = torch.randn(QUICK_MATMUL_SIZE, QUICK_MATMUL_SIZE)
    b = torch.randn(QUICK_MATMUL_SIZE, QUICK_MATMUL_SIZE)
    product = _best_of_three(lambda: a @ b)
    return {
        "device": device,
        "device_name": device_name(device),
        "threads": torch.get_num_threads(),
        "copy_gbps": 2 * QUICK_COPY_BYTES / copy / 1e9,
        "matmul_tflops": 2 * QUICK_MATMUL_SIZE**3 / product / 1e12,
        "matmul_dtype": "float32",
        "measured_at": _now(),
        "reason": None,
    }
