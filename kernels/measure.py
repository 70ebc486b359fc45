"""Measure one sweep point and return its record (see workflow/schemas/metrics.schema.json).

A record always comes back: ``ok``, ``skipped`` with the reason (predicted not to fit in
memory, too large for the interpreter, unsupported on this device) or ``failed`` with the
error (an out-of-memory included). Under the interpreter a Triton point carries counted
traffic and its error but no time; the torch paths on a CPU are timed as CPU runs; on a GPU
every path is timed with do_bench and, when ``ncu`` exists, profiled for DRAM bytes.
"""

from __future__ import annotations

import math
import platform
import time
from pathlib import Path

import torch

from kernels import model, runtime
from kernels.build import build_failure
from kernels.checks import DTYPES
from kernels.memory import available_bytes, peak_allocated
from kernels.names import TRITON_IMPLEMENTATIONS
from kernels.sweep import point_name

DEFAULT_INTERPRETER_LIMIT = 1 << 20  # B·H·T² score elements the interpreter takes (T = 1,024)
MEMORY_FRACTION = 0.8  # of the memory available when the point starts
GIB = float(1 << 30)


def device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def versions() -> dict:
    import numpy

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {"python": platform.python_version(), "torch": torch.__version__,
            "triton": triton_version, "numpy": numpy.__version__}


def skip_reason(point: model.Point, device: str, interpreter_limit: int) -> str | None:
    if device == "cuda" and not torch.cuda.is_available():
        return "unsupported on this device: cuda requested but torch.cuda.is_available() is False"
    need, have = model.predicted_bytes(point), available_bytes(device)
    if need > MEMORY_FRACTION * have:
        return (f"would not fit in memory: needs about {need / GIB:.2f} GiB, "
                f"{have / GIB:.2f} GiB available on {device}")
    interpreted = device == "cpu" and point.impl in TRITON_IMPLEMENTATIONS
    scores = point.groups * point.tokens**2
    if interpreted and scores > interpreter_limit:
        return (f"too large for the interpreter: B·H·T² = {scores:,} score elements, "
                f"limit {interpreter_limit:,}")
    return None


def call_of(point: model.Point, q, k, v):
    from kernels.registry import attention

    options = {}
    if point.impl in TRITON_IMPLEMENTATIONS:
        options = {"block_m": point.block_m, "block_n": point.block_n}
    if point.impl == "triton_naive" and point.sp_dtype:
        options["sp_dtype"] = point.sp_dtype
    return lambda: attention(q, k, v, impl=point.impl, causal=point.causal, **options)


def max_abs_error(q, k, v, causal: bool, out: torch.Tensor) -> float:
    from kernels.reference import reference_float64

    chunk = max(1, model.REFERENCE_CHUNK_BYTES // (8 * q.shape[0] * q.shape[1] * q.shape[2]))
    ref = reference_float64(q, k, v, causal, chunk_rows=chunk)
    return (out.double() - ref).abs().max().item()


def _run(point: model.Point, device: str, seed: int, use_ncu: bool, ncu_args: list[str]) -> dict:
    from kernels.inputs import make_qkv
    from kernels.timing import time_cpu, time_cuda

    q, k, v = make_qkv(point.batch, point.heads, point.tokens, point.head_dim,
                       DTYPES[point.dtype], device, seed)
    call = call_of(point, q, k, v)
    out_bytes = q.numel() * q.element_size()
    found: dict = {}
    interpreted = runtime.INTERPRET and point.impl in TRITON_IMPLEMENTATIONS
    if interpreted:
        from kernels.traffic import count_traffic

        with count_traffic() as counter:
            peak, out = peak_allocated(device, call)
        found["counted"] = counter.by_stage()
        found["time_reason"] = "not timed: Triton interpreter (correctness and counting only)"
    else:
        if device == "cuda":
            call()  # compile and warm up before anything is measured
        peak, out = peak_allocated(device, call)
        found |= time_cuda(call) if device == "cuda" else time_cpu(call)
    found["peak_alloc_bytes"] = max(0, peak - out_bytes)
    found["max_abs_error"] = max_abs_error(q, k, v, point.causal, out)
    if device == "cuda" and use_ncu:
        from kernels import ncu

        found |= ncu.profile(ncu_args)
    return found


def _merge_counted(record: dict, counted: dict[tuple[str, str, str], int]) -> None:
    for stage in record["stages"]:
        stage["counted_bytes"] = counted.pop((stage["kernel"], stage["tensor"], stage["op"]), 0)
    for (kernel, tensor, op), nbytes in sorted(counted.items()):  # traffic the model lacks
        record["stages"].append({"kernel": kernel, "tensor": tensor, "op": op,
                                 "compulsory_bytes": 0, "model_bytes": 0, "counted_bytes": nbytes})
    record["traffic_counted_bytes"] = sum(s["counted_bytes"] for s in record["stages"])


def base_record(point: model.Point, device: str, seed: int) -> dict:
    record = {
        "impl": point.impl, "batch": point.batch, "heads": point.heads, "tokens": point.tokens,
        "head_dim": point.head_dim, "dtype": point.dtype, "causal": point.causal,
        "block_m": point.block_m, "block_n": point.block_n,
        "sp_dtype": (point.sp_dtype or point.dtype) if point.materialized else None,
        "device": device, "device_name": device_name(device),
        "mode": runtime.describe() if point.impl in TRITON_IMPLEMENTATIONS else "torch",
        "seed": seed, "versions": versions(),
        "traffic_counted_bytes": None, "peak_alloc_bytes": None, "time_ms": None,
        "time_p10_ms": None, "time_p90_ms": None, "repeats": None, "time_reason": None,
        "tflops": None, "gbps": None, "max_abs_error": None, "status": "ok", "reason": None,
    }
    from kernels.ncu import NULL, unavailable

    record |= NULL | {"dram_reason": None}
    if device != "cuda":
        record |= unavailable("device is cpu: Nsight Compute measures GPU kernels only")
    record |= model.summarize(point)
    for stage in record["stages"]:
        stage["counted_bytes"] = None
    return record


def validation_failure(results: list[dict] | None) -> str | None:
    """Why a point must not be measured: its implementation failed validation."""
    if results is None:
        return None
    unexpected = [r for r in results if not r["as_expected"]]
    if not results or unexpected:
        first = unexpected[0] if unexpected else {}
        return (f"validation failed: {len(unexpected)} of {len(results)} checks unexpected"
                + (f", e.g. T={first['tokens']} d={first['head_dim']} causal={first['causal']}: "
                   f"{first['verdict']} {first['message']}".rstrip() if first else ""))
    return None


def measure(point: model.Point, device: str, *, seed: int = 0,
            interpreter_limit: int = DEFAULT_INTERPRETER_LIMIT, use_ncu: bool = True,
            ncu_args: list[str] | None = None, validation: list[dict] | None = None,
            builds: list[dict] | None = None, required_targets: list[str] | None = None) -> dict:
    """Run one point and return its record; never raises for a point that cannot run.
    ``validation``: the implementation's validation results; a failed one skips the point.
    ``builds``: build results covering the point; a variant that failed to build for one of
    ``required_targets`` (default: every target built) skips it."""
    record = base_record(point, device, seed)
    reason = (build_failure(point_name(point), builds, required_targets)
              or validation_failure(validation)
              or skip_reason(point, device, interpreter_limit))
    if reason:
        return record | {"status": "skipped", "reason": reason}
    started = time.perf_counter()
    try:
        found = _run(point, device, seed, use_ncu, ncu_args or [])
    except (torch.OutOfMemoryError, MemoryError) as err:
        return record | {"status": "failed", "reason": f"out of memory: {str(err).splitlines()[0]}"}
    except Exception as err:  # any other failure is a record too
        return record | {"status": "failed", "reason": f"{type(err).__name__}: {err}"}
    counted = found.pop("counted", None)
    record |= found
    if counted is not None:
        _merge_counted(record, counted)
    if record["time_ms"]:
        seconds = record["time_ms"] / 1e3
        moved = record["traffic_model_bytes"] or record["traffic_compulsory_bytes"]
        record["tflops"] = record["flops"] / seconds / 1e12
        record["gbps"] = moved / seconds / 1e9
    record["wall_seconds"] = time.perf_counter() - started
    if record["max_abs_error"] is not None and not math.isfinite(record["max_abs_error"]):
        record |= {"status": "failed", "reason": "output is not finite", "max_abs_error": None}
    return record
