"""Measure one sweep point and return its record (see kernels/io/metrics.schema.json).

A record always comes back: ``ok``, ``skipped`` with the reason (predicted not to fit in
memory or not to finish within the time budget, too large for the interpreter, unsupported on
this device) or ``failed`` with the error (an out-of-memory included, and an output that is
not finite where the float64 definition is). Under the interpreter a Triton point carries
counted traffic and its error but no time; the torch paths on a CPU are timed as CPU runs; on
a GPU every path is timed with do_bench and, when ``ncu`` exists, profiled for DRAM bytes.
Derived figures (TFLOP/s, GB/s, speed-ups) are not a record's: kernels.io.derived computes
them once for the whole table.

This is the harness: it gates, builds the inputs and the record, and hands the point to its
pass (kernels.measure.forward_run or kernels.measure.backward_run), which know nothing of
each other.
"""

from __future__ import annotations

import datetime
import time
from contextlib import nullcontext

import torch

from kernels import catalog
from kernels.impl import mode
from kernels.impl.checks import DTYPES
from kernels.measure.backward_run import run_backward
from kernels.measure.forward_run import call_of, run_forward
from kernels.measure.gates import skip_reason
from kernels.measure.process_guard import guarded
from kernels.measure.provenance import device_name, measured_by, versions
from kernels.models import cost, expected
from kernels.planning.launch import launch_candidates
from kernels.planning.point import Point
from kernels.spec import CALL_BUDGET_SECONDS, DEFAULT_INTERPRETER_LIMIT


def _run(
    point: Point,
    device: str,
    seed: int,
    threads: int,
    use_ncu: bool,
    ncu_args: list[str],
    candidates: list[tuple[int, int]],
) -> dict:
    from kernels.impl.inputs import make_qkv
    from kernels.measure.contention import watched

    q, k, v = make_qkv(
        point.batch,
        point.heads,
        point.tokens,
        point.head_dim,
        DTYPES[point.dtype],
        device,
        seed,
        inputs=point.inputs,
        query_tokens=point.query_tokens,
        kv_heads=point.kv_heads,
    )
    if not point.backward:
        return run_forward(point, q, k, v, device, threads, use_ncu, ncu_args, candidates)
    forward_of = lambda *inputs: call_of(point, *inputs)  # noqa: E731
    interpreted = point.triton and mode.interpret()
    with nullcontext() if interpreted else watched(threads) as contention:
        found = run_backward(point, q, k, v, device, seed, threads, forward_of)
    return found | ({"contention": contention} if contention is not None else {})


def _merged_stages(stages: list[dict], counted: dict[tuple[str, str, str], int]) -> list[dict]:
    """The model's stages with the counted bytes beside them, and counted traffic the model
    lacks as stages of its own (model bytes 0 where the path has a model that leaves it out,
    None where the path has no model at all)."""
    counted = dict(counted)
    modelled = any(s["model_bytes"] is not None for s in stages)
    merged = [s | {"counted_bytes": counted.pop((s["kernel"], s["tensor"], s["op"]), 0)} for s in stages]
    for (kernel, tensor, op), nbytes in sorted(counted.items()):
        merged.append(
            {
                "kernel": kernel,
                "tensor": tensor,
                "op": op,
                "compulsory_bytes": 0,
                "model_bytes": 0 if modelled else None,
                "counted_bytes": nbytes,
            }
        )
    return merged


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def base_record(point: Point, device: str, seed: int) -> dict:
    record = {
        "impl": point.impl,
        "batch": point.batch,
        "heads": point.heads,
        "kv_heads": point.kv,
        "query_tokens": point.queries,
        "tokens": point.tokens,
        "head_dim": point.head_dim,
        "dtype": point.dtype,
        "causal": point.causal,
        "mask": point.mask,
        "inputs": point.inputs,
        "pass": point.direction,
        "block_m": point.block_m,
        "block_n": point.block_n,
        "num_splits": point.num_splits,
        "sp_dtype": (point.sp_dtype or point.dtype) if point.materialized else None,
        "device": device,
        "device_name": device_name(device),
        "mode": mode.describe() if point.triton else "torch",
        "seed": seed,
        "threads": torch.get_num_threads(),
        "processor": device_name("cpu"),
        "started_at": now(),
        "finished_at": None,
        "versions": versions(),
        "process": measured_by(),
        "traffic_counted_bytes": None,
        "peak_alloc_bytes": None,
        "ops_run": None,  # the ATen operations a PyTorch call ran, on a CPU (kernels.measure.memory)
        "time_ms": None,
        "time_p10_ms": None,
        "time_p90_ms": None,
        "repeats": None,
        "time_reason": None,
        "compile_seconds": None,  # a compiled path's first call (kernels.measure.forward_run)
        "num_warps": None,  # the fused kernel's launch options when candidates were timed
        "num_stages": None,
        "launch_candidates": None,
        "max_abs_error": None,
        "nonfinite_outputs": None,
        "stage_times": None,
        "stage_time_reason": None,
        "last_cache_bytes": None,
        "status": "ok",
        "reason": None,
    }
    from kernels.measure.ncu import NULL, unavailable

    record |= NULL | {"dram_reason": None}
    if device != "cuda":
        record |= unavailable("device is cpu: Nsight Compute measures GPU kernels only")
    record |= model_summary(point)
    for stage in record["stages"]:
        stage["counted_bytes"] = None
    return record


def model_summary(point: Point) -> dict:
    """The model's fields of the record: the forward's (kernels.models.cost.summarize), or for
    a backward point its backward's traffic, FLOPs and stages, with what the forward keeps."""
    forward = cost.summarize(point.forward())
    if not point.backward:
        return forward
    from kernels.models.backward_cost import summarize_backward

    back = summarize_backward(point)
    issued = back["backward_model_bytes"]
    work = back["backward_flops"]  # None where the path models no FLOPs: not the convention's
    return forward | {
        "traffic_compulsory_bytes": back["backward_compulsory_bytes"],
        "traffic_model_bytes": issued,
        "flops": work,
        "forward_flops": forward["flops"],
        "convention_flops": back["backward_convention_flops"],
        "intensity_flop_per_byte": None
        if work is None
        else work / (issued or back["backward_compulsory_bytes"]),
        "saved_model_bytes": back["saved_model_bytes"],
        "saved_model": back["saved_model"],
        "stages": back["backward_stages"],
        "saved_bytes": None,
        "saved": None,
        "gradient_errors": None,
        "step_time_ms": None,
        "step_time_p10_ms": None,
        "step_time_p90_ms": None,
        "step_repeats": None,
    }


def floor_ms(point: Point, ceilings: dict | None) -> float | None:
    """The forward point's floor for one call at the measured ceilings (null without them)."""
    from kernels.measure.ceilings import usable

    if point.backward or not usable(ceilings):
        return None
    return expected.call_seconds(point, ceilings) * 1e3


def measure(
    point: Point,
    device: str,
    *,
    seed: int = 0,
    threads: int | None = None,
    interpreter_limit: int = DEFAULT_INTERPRETER_LIMIT,
    use_ncu: bool = True,
    ncu_args: list[str] | None = None,
    validation: list[dict] | None = None,
    builds: list[dict] | None = None,
    required_targets: list[str] | None = None,
    ceilings: dict | None = None,
    budget_seconds: float = CALL_BUDGET_SECONDS,
) -> dict:
    """Run one point and return its record; never raises for a point that cannot run.
    ``threads``: torch's thread count for the run (default: as torch has it).
    ``validation``: the implementation's validation results; a failed one skips the point.
    ``builds``: build results covering the point; a variant that failed to build for one of
    ``required_targets`` (default: every target built) skips it. ``ceilings``: the machine's
    measured rates; a point predicted to take longer than ``budget_seconds`` per call is
    skipped (without them, or with null rates, a point too large for a very slow machine is
    held against a quick measurement of this one, taken generously: kernels.measure.gates)."""
    if threads:
        torch.set_num_threads(threads)
    record = base_record(point, device, seed) | {"floor_ms": floor_ms(point, ceilings)}
    reason = skip_reason(
        point,
        device,
        interpreter_limit,
        validation=validation,
        builds=builds,
        required_targets=required_targets,
        ceilings=ceilings,
        budget_seconds=budget_seconds,
    )
    if reason:
        return record | {"status": "skipped", "reason": reason, "finished_at": now()}
    candidates = []
    if device == "cuda" and catalog.get(point.impl).launch_candidates and required_targets:
        candidates = launch_candidates(point.name, builds, required_targets[0])
    found = _measured(point, device, seed, use_ncu, ncu_args or [], candidates)
    return record | found | {"finished_at": now()}


def _measured(
    point: Point, device: str, seed: int, use_ncu: bool, ncu_args: list[str], candidates: list
) -> dict:
    """What running the point adds to its record, or why it failed."""
    started = time.perf_counter()
    with guarded() as tampered:  # the folder set back, threads left found (a plugin's)
        try:
            found = _run(point, device, seed, torch.get_num_threads(), use_ncu, ncu_args, candidates)
        except (torch.OutOfMemoryError, MemoryError) as err:
            found = {"status": "failed", "reason": f"out of memory: {str(err).splitlines()[0]}"}
        except Exception as err:  # any other failure is a record too
            found = {"status": "failed", "reason": f"{type(err).__name__}: {err}"}
        except SystemExit as err:  # a point's code that asks to end the process
            said = f"it called sys.exit({err.code!r}); a point's code must not"
            found = {"status": "failed", "reason": said}
    if tampered:
        return {"status": "failed", "reason": "; ".join(tampered)}
    if found.get("status") == "failed":
        return found
    counted = found.pop("counted", None)
    failure = found.pop("overflow", None) or found.pop("check_reason", None)
    found["wall_seconds"] = time.perf_counter() - started
    if counted is not None:
        found["stages"] = _merged_stages(model_summary(point)["stages"], counted)
        found["traffic_counted_bytes"] = sum(s["counted_bytes"] for s in found["stages"])
    if failure:
        found |= {"status": "failed", "reason": failure}
    return found
