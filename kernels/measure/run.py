"""Measure one sweep point and return its record (see kernels/io/metrics.schema.json).

A record always comes back: ``ok``, ``skipped`` with the reason (predicted not to fit in
memory, too large for the interpreter, unsupported on this device) or ``failed`` with the
error (an out-of-memory included). Under the interpreter a Triton point carries counted
traffic and its error but no time; the torch paths on a CPU are timed as CPU runs; on a GPU
every path is timed with do_bench and, when ``ncu`` exists, profiled for DRAM bytes.
"""

from __future__ import annotations

import math
import time

import torch

from kernels.impl import mode
from kernels.impl.checks import DTYPES
from kernels.measure.gates import skip_reason
from kernels.measure.memory import peak_allocated
from kernels.measure.provenance import device_name, versions
from kernels.spec import DEFAULT_INTERPRETER_LIMIT, REFERENCE_CHUNK_BYTES
from kernels.study import cost
from kernels.study.point import Point


def call_of(point: Point, q, k, v):
    from kernels.impl.registry import attention

    options = {}
    if point.triton:
        options = {"block_m": point.block_m, "block_n": point.block_n}
    if point.impl == "triton_naive" and point.sp_dtype:
        options["sp_dtype"] = point.sp_dtype
    return lambda: attention(q, k, v, impl=point.impl, causal=point.causal, **options)


def max_abs_error(q, k, v, causal: bool, out: torch.Tensor) -> float:
    from kernels.impl.reference import reference_float64

    chunk = max(1, REFERENCE_CHUNK_BYTES // (8 * q.shape[0] * q.shape[1] * q.shape[2]))
    ref = reference_float64(q, k, v, causal, chunk_rows=chunk)
    return (out.double() - ref).abs().max().item()


def _run(point: Point, device: str, seed: int, use_ncu: bool, ncu_args: list[str]) -> dict:
    from kernels.impl.inputs import make_qkv
    from kernels.measure.timing import time_cpu, time_cuda

    q, k, v = make_qkv(
        point.batch, point.heads, point.tokens, point.head_dim, DTYPES[point.dtype], device, seed
    )
    call = call_of(point, q, k, v)
    out_bytes = q.numel() * q.element_size()
    found: dict = {}
    if point.triton and mode.interpret():
        from kernels.measure.traffic import count_traffic

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
        from kernels.measure import ncu

        found |= ncu.profile(ncu_args)
    return found


def _merge_counted(record: dict, counted: dict[tuple[str, str, str], int]) -> None:
    for stage in record["stages"]:
        stage["counted_bytes"] = counted.pop((stage["kernel"], stage["tensor"], stage["op"]), 0)
    for (kernel, tensor, op), nbytes in sorted(counted.items()):  # traffic the model lacks
        record["stages"].append(
            {
                "kernel": kernel,
                "tensor": tensor,
                "op": op,
                "compulsory_bytes": 0,
                "model_bytes": 0,
                "counted_bytes": nbytes,
            }
        )
    record["traffic_counted_bytes"] = sum(s["counted_bytes"] for s in record["stages"])


def base_record(point: Point, device: str, seed: int) -> dict:
    record = {
        "impl": point.impl,
        "batch": point.batch,
        "heads": point.heads,
        "tokens": point.tokens,
        "head_dim": point.head_dim,
        "dtype": point.dtype,
        "causal": point.causal,
        "block_m": point.block_m,
        "block_n": point.block_n,
        "sp_dtype": (point.sp_dtype or point.dtype) if point.materialized else None,
        "device": device,
        "device_name": device_name(device),
        "mode": mode.describe() if point.triton else "torch",
        "seed": seed,
        "versions": versions(),
        "traffic_counted_bytes": None,
        "peak_alloc_bytes": None,
        "time_ms": None,
        "time_p10_ms": None,
        "time_p90_ms": None,
        "repeats": None,
        "time_reason": None,
        "tflops": None,
        "gbps": None,
        "max_abs_error": None,
        "status": "ok",
        "reason": None,
    }
    from kernels.measure.ncu import NULL, unavailable

    record |= NULL | {"dram_reason": None}
    if device != "cuda":
        record |= unavailable("device is cpu: Nsight Compute measures GPU kernels only")
    record |= cost.summarize(point)
    for stage in record["stages"]:
        stage["counted_bytes"] = None
    return record


def measure(
    point: Point,
    device: str,
    *,
    seed: int = 0,
    interpreter_limit: int = DEFAULT_INTERPRETER_LIMIT,
    use_ncu: bool = True,
    ncu_args: list[str] | None = None,
    validation: list[dict] | None = None,
    builds: list[dict] | None = None,
    required_targets: list[str] | None = None,
) -> dict:
    """Run one point and return its record; never raises for a point that cannot run.
    ``validation``: the implementation's validation results; a failed one skips the point.
    ``builds``: build results covering the point; a variant that failed to build for one of
    ``required_targets`` (default: every target built) skips it."""
    record = base_record(point, device, seed)
    reason = skip_reason(
        point,
        device,
        interpreter_limit,
        validation=validation,
        builds=builds,
        required_targets=required_targets,
    )
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
