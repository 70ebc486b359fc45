"""The machine's ceilings, measured once per run before any point is timed: how fast it copies
memory at each of its memory levels, how fast it multiplies matrices and how fast it computes
exponentials (the softmax's own arithmetic). A point's predicted time is bounded below by its
bytes over the copy rate and its FLOPs over the matrix-product rate (a roofline), which is
what lets a point too slow to finish be skipped before it starts.

Memory levels (``levels``): the cache levels the machine describes (kernels.measure.caches:
the OS's on a CPU, torch's L2 size on a GPU), then ``DRAM``. For each cache level a float32
copy whose source and destination together fill half of what the copy meets at that level
(``bytes``: the sizes of the instances the copy's threads touch, kernels.planning.cpu_caches'
``study_used``; a copy under torch's grain of 32,768 elements per tensor runs on one thread, so
it meets that thread's instance), and for DRAM (``bytes``: the memory's size) a copy of four
times what the job's threads meet of the last level (at least 64 MiB, at most a quarter of the
memory). Each copy is run over and over on the same buffers, so they stay in their level: on
a CPU in blocks of about a millisecond for at least 0.15 s (at most 0.6 s; a study timed
quicker, config ``timing``, in proportion: kernels.spec.rate_seconds), each block
followed by as many one-element copies, 64 at least (torch's fixed cost of a call,
``call_us``, which would otherwise dominate a copy inside L1); on a GPU as a CUDA graph of
repeated copies without any L2 flush (``triton.testing.do_bench_cudagraph``), the one-element
copy likewise. ``time_us`` is the median time per call; ``copy_gbps`` the
footprint (each byte read once and written once) over the median of the time per call less the
fixed cost, block by block; ``update_gbps`` the same for one tensor of the same footprint
multiplied in place (kernels.models.hierarchy uses it for the stages that update S in place).
Where that leaves under 5 % of the time to the data, the rate is null and ``reason`` says so.
The top-level ``copy_gbps`` is DRAM's (past the last level); ``call_us`` the least over the
levels (the fixed cost with torch's own code and data in cache). Without any cache
description: only DRAM, at 512 MiB (CPU) or 2 GiB (GPU).

``exp_per_s``: ``torch.exp`` over float32 data in cache (input and output filling half of what
the job meets in L2, else in the last level), exponentials per second, the fixed cost of a
call taken out as above. ``matmul_tflops``: CPU a 2,048² float32 product on the job's threads,
GPU an 8,192² bfloat16 product (``do_bench``). ``quick`` is what the measure command uses when
it is given no ceilings: on a CPU a 64 MiB copy and a 1,024² product, best of three (a fraction
of a second). Asked for cuda on a machine without a GPU, ``unavailable`` says so in the same
fields, with the rates null.
"""

from __future__ import annotations

import datetime
import math
import os
import time

import torch

from kernels.measure import caches as cache_levels
from kernels.measure.provenance import device_name
from kernels.measure.reference_pass import reference_pass
from kernels.measure.timing import time_cpu, time_cuda
from kernels.measure.warm_rate import warm_times
from kernels.spec import MIN_DATA_SHARE

COPY_BYTES = {"cpu": 256 << 20, "cuda": 1 << 30}  # per tensor, when no cache level is known
MATMUL_SIZE = {"cpu": 2048, "cuda": 8192}
MATMUL_DTYPE = {"cpu": "float32", "cuda": "bfloat16"}

GRAIN = 32768  # elements under which torch runs an elementwise op on one thread (at::internal::GRAIN_SIZE)
PAST_FACTOR = 4  # DRAM's copy footprint over the last level's total size
PAST_MIN_BYTES = 64 << 20
EXP_BYTES = 1 << 20  # the exponentials' footprint when no cache level is known


def _time(device: str, fn) -> float:
    found = time_cuda(fn) if device == "cuda" else time_cpu(fn, torch.get_num_threads())
    return found["time_ms"] / 1e3


def _floats(footprint: int, tensors: int = 2) -> int:
    """float32 elements per tensor for ``tensors`` tensors to fill ``footprint`` bytes (whole
    64-byte lines)."""
    return max(16, footprint // tensors // 4 // 16 * 16)


def _reach(level: dict, threads: int, device: str) -> int:
    """Bytes of ``level`` a copy filling half of them meets: a GPU's L2 once; on a CPU the
    instances the copy's threads touch (``study_used``, in the order the threads first meet
    them), a copy too small to run on all ``threads`` meeting only its threads' instances. A
    level read without ``study_used`` counts one instance of ``bytes`` per thread."""
    if device == "cuda":
        return level["bytes"] * max(1, min(level.get("instances") or 1, threads))
    used = level.get("study_used") or [
        {"bytes": level["bytes"], "first_thread": i}
        for i in range(max(1, min(level.get("instances") or 1, threads)))
    ]
    met = [u for u in used if u["first_thread"] < threads] or used[:1]
    while len(met) > 1:
        elements = _floats(sum(u["bytes"] for u in met) // 2)
        if min(threads, math.ceil(elements / GRAIN)) > met[-1]["first_thread"]:
            break
        met.pop()
    return sum(u["bytes"] for u in met)


def _met_bytes(level: dict, threads: int) -> int:
    """Bytes of ``level`` a copy far larger than it meets on ``threads`` threads: the instances
    those threads touch (a GPU's L2, or a level read without ``study_used``: its total)."""
    used = level.get("study_used")
    if not used:
        return level["total_bytes"]
    return sum(u["bytes"] for u in used if u["first_thread"] < threads) or used[0]["bytes"]


def memory_bytes(device: str) -> int | None:
    if device == "cuda":
        return torch.cuda.get_device_properties(0).total_memory
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, AttributeError):
        return None


def _rate(amount: float, times: tuple[float, float, float]) -> tuple[float | None, str | None]:
    seconds, call, data = times
    if data < MIN_DATA_SHARE * seconds:
        return None, (
            f"a call took {seconds * 1e6:.2f} us, torch's fixed cost of a call {call * 1e6:.2f} us: "
            "too little left to the data to time"
        )
    return amount / data, None


def copy_at(device: str, name: str, capacity: int | None, footprint: int) -> dict:
    """One level's copy rate: source and destination together ``footprint`` bytes."""
    n = _floats(footprint)
    src = torch.empty(n, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    one, into = torch.ones(1, device=device), torch.empty(1, device=device)
    times = warm_times(device, lambda: dst.copy_(src), lambda: into.copy_(one))
    rate, reason = _rate(2 * n * 4, times)
    found = {
        "level": name,
        "bytes": capacity,
        "footprint_bytes": 2 * n * 4,
        "copy_gbps": rate / 1e9 if rate else None,
        "time_us": times[0] * 1e6,
        "call_us": times[1] * 1e6,
        "update_gbps": update_at(device, footprint),
    }
    return found | ({"reason": reason} if reason else {})


def update_at(device: str, footprint: int) -> float | None:
    """GB/s of a pass that reads and writes one tensor of ``footprint`` bytes in place (each
    byte read once and written once, as the scale and mask stages do). A copy's destination
    is read before it is written on a CPU (write-allocate), a cost an in-place pass does not
    pay, so the two rates differ where the data is past the caches."""
    x = torch.empty(_floats(footprint, tensors=1), device=device).fill_(1.0)
    one = torch.ones(1, device=device)
    times = warm_times(device, lambda: x.mul_(1.0), lambda: one.mul_(1.0))
    rate, _ = _rate(2 * x.numel() * 4, times)
    return rate / 1e9 if rate else None


def level_footprints(device: str, found: dict, threads: int) -> list[tuple[str, int | None, int]]:
    """(level, bytes, footprint) for each cache level and DRAM, in that order."""
    planned = []
    for level in found.get("levels") or []:
        capacity = _reach(level, threads, device)
        planned.append((level["level"], capacity, capacity // 2))
    memory = memory_bytes(device)
    if planned:
        last = _met_bytes(found["levels"][-1], threads)
        past = max(PAST_FACTOR * last, PAST_MIN_BYTES, 2 * planned[-1][2])
        if memory:
            past = max(min(past, memory // 4), 2 * last)
    else:
        past = 2 * COPY_BYTES[device]
    planned.append(("DRAM", memory, past))
    return planned


def exp_rate(device: str, footprint: int) -> tuple[float | None, int, str | None]:
    """Exponentials per second of torch.exp over float32 input and output of ``footprint``
    bytes together, in cache."""
    n = _floats(footprint)
    x = torch.linspace(-10.0, 0.0, n, device=device)  # as the softmax meets them: x - max <= 0
    y = torch.empty_like(x)
    one, into = torch.zeros(1, device=device), torch.empty(1, device=device)
    rate, reason = _rate(n, warm_times(device, lambda: torch.exp(x, out=y), lambda: torch.exp(one, out=into)))
    return rate, 2 * n * 4, reason


def matmul_rate(device: str) -> float:
    """FLOP/s of one square matrix product in the device's fast dtype."""
    n = MATMUL_SIZE[device]
    dtype = getattr(torch, MATMUL_DTYPE[device])
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    seconds = _time(device, lambda: a @ b)
    return 2 * n**3 / seconds


BUSY_RETRIES = 2  # more measurements of a cache level found slower than DRAM


def below_dram_checked(device: str, planned: list, levels: list[dict], measure_again=None) -> list[dict]:
    """A cache level slower than DRAM is no cache's rate but a busy machine's (other jobs
    took the cores while it was timed): such a level is measured again, up to BUSY_RETRIES
    times, keeping the fastest; still below DRAM, its rate is null and the reason says so,
    so no prediction rests on it."""
    measure_again = measure_again or copy_at
    dram = levels[-1]
    checked = []
    for footprint, level in zip(planned[:-1], levels[:-1], strict=True):
        for key in ("copy_gbps", "update_gbps"):
            floor = dram.get(key)
            for _ in range(BUSY_RETRIES):
                if not floor or not level.get(key) or level[key] >= floor:
                    break
                again = measure_again(device, *footprint)
                if (again.get(key) or 0) > level[key]:
                    level = level | {key: again[key]}
            if floor and level.get(key) and level[key] < floor:
                slow = level[key]
                level = level | {key: None}
                if key == "copy_gbps":
                    level["reason"] = (
                        f"measured {slow:.3g} GB/s, below DRAM's {floor:.3g} GB/s past every cache, after "
                        f"{BUSY_RETRIES + 1} tries: the machine was busy, the rate is not the cache's"
                    )
        checked.append(level)
    return [*checked, dram]


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def measure(device: str, found_caches: dict | None = None, products: list[dict] | None = None) -> dict:
    """Every ceiling of ``device``; ``found_caches`` (kernels.measure.caches) is read from the
    machine when not given. ``products``: the sweep's dtypes, head dimensions and lengths
    (kernels.planning.sweep.product_shapes), for the operations' rates (``ops``,
    kernels.measure.op_rates), which the expected times and the time gate use."""
    started = _now()
    reference = reference_pass(device)  # each staged point times it again: the drift
    threads = torch.get_num_threads()
    found_caches = cache_levels.caches(device, threads=threads) if found_caches is None else found_caches
    planned = level_footprints(device, found_caches, threads)
    levels = below_dram_checked(device, planned, [copy_at(device, *footprint) for footprint in planned])
    cached = planned[:-1]
    exp_level = next((p for p in cached if p[0] == "L2"), cached[-1] if cached else None)
    exp, exp_bytes, exp_reason = exp_rate(device, exp_level[2] if exp_level else EXP_BYTES)
    return {
        "device": device,
        "device_name": device_name(device),
        "threads": threads,
        "copy_gbps": levels[-1]["copy_gbps"],
        "matmul_tflops": matmul_rate(device) / 1e12,
        "matmul_dtype": MATMUL_DTYPE[device],
        "levels": levels,
        "exp_per_s": exp,
        "exp_level": exp_level[0] if exp_level else None,
        "exp_footprint_bytes": exp_bytes,
        "call_us": min(level["call_us"] for level in levels),
        "caches_source": found_caches.get("source"),
        "caches_reason": found_caches.get("reason"),
        "measured_at": started,
        "reason": None if levels[-1]["copy_gbps"] else f"DRAM: {levels[-1].get('reason')}",
        "ops": operation_rates(device, threads, planned, products),
        "reference_pass": reference,
        # the same pass once more at the end: how far it moves on its own within one job
        "reference_pass_end": reference_pass(device),
    } | ({"exp_reason": exp_reason} if exp_reason else {})


def operation_rates(device: str, threads: int, planned: list, products: list[dict] | None) -> dict | None:
    """The ceilings' ``ops`` (kernels.measure.op_rates) with the largest cache the threads
    meet and DRAM's footprint; None where the sweep names no products."""
    if not products:
        return None
    from kernels.measure import op_rates

    cache_bytes = planned[-2][1] if len(planned) > 1 else None
    return op_rates.measure(device, threads, products, cache_bytes, planned[-1][2])


def describe(found: dict) -> str:
    """One line for the console: the copy rate at each level, the product and the exponentials."""
    levels = ", ".join(
        f"{level['level']} {level['footprint_bytes'] / 2**20:.3g} MiB "
        + (f"{level['copy_gbps']:.3g} GB/s" if level.get("copy_gbps") else "not timed")
        for level in found.get("levels") or []
    )
    exp = found.get("exp_per_s")
    exp = f"exp {exp / 1e9:.2f} G/s" if exp else "exp not timed"
    product = f"{found['matmul_dtype']} matrix product {found['matmul_tflops'] * 1e3:.0f} GFLOP/s"
    return f"copy {levels}; {product}; {exp}"


def unavailable(device: str, reason: str) -> dict:
    """The ceilings of a device this machine does not have: the same fields, rates null."""
    return {
        "device": device,
        "device_name": device_name(device),
        "threads": torch.get_num_threads(),
        "copy_gbps": None,
        "matmul_tflops": None,
        "matmul_dtype": MATMUL_DTYPE[device],
        "levels": None,
        "exp_per_s": None,
        "call_us": None,
        "measured_at": None,
        "reason": reason,
        "ops": None,
        "reference_pass": None,
        "reference_pass_end": None,
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
