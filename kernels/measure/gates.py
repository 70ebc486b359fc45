"""Every reason a sweep point is recorded as skipped instead of measured, decided here and
nowhere else: a kernel it launches cannot build for a required target, its implementation
failed validation, the device is absent or lacks the SDPA backend the point forces, it would
not fit in memory, it is predicted to take longer than the time budget, or it is too large
for the interpreter."""

from __future__ import annotations

from kernels.measure.memory import available_bytes
from kernels.spec import CALL_BUDGET_SECONDS, SDPA_IMPLEMENTATIONS
from kernels.study import cost
from kernels.study.launch import build_failure
from kernels.study.point import Point

MEMORY_FRACTION = 0.8  # of the memory available when the point starts
GIB = float(1 << 30)


def validation_failure(results: list[dict] | None) -> str | None:
    """The implementation's validation results hold an unexpected verdict (or none at all)."""
    if results is None:
        return None
    unexpected = [r for r in results if not r["as_expected"]]
    if not results or unexpected:
        first = unexpected[0] if unexpected else {}
        return f"validation failed: {len(unexpected)} of {len(results)} checks unexpected" + (
            f", e.g. T={first['tokens']} d={first['head_dim']} causal={first['causal']}: "
            f"{first['verdict']} {first['message']}".rstrip()
            if first
            else ""
        )
    return None


def device_absent(device: str) -> str | None:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        return "unsupported on this device: cuda requested but torch.cuda.is_available() is False"
    return None


def backend_unavailable(point: Point, device: str) -> str | None:
    """A forced SDPA backend this device does not have for the point's dtype and head dim."""
    backend = SDPA_IMPLEMENTATIONS.get(point.impl)
    if backend is None:
        return None
    import torch

    from kernels.impl.sdpa import unavailable

    why = unavailable(backend, getattr(torch, point.dtype), device, point.head_dim, point.causal)
    return f"unsupported on this device: {why}" if why else None


def memory_short(point: Point, device: str) -> str | None:
    need, have = cost.predicted_bytes(point), available_bytes(device)
    if need > MEMORY_FRACTION * have:
        return (
            f"would not fit in memory: needs about {need / GIB:.2f} GiB, "
            f"{have / GIB:.2f} GiB available on {device}"
        )
    return None


def predicted_seconds(point: Point, ceilings: dict) -> float:
    """A lower bound on one call's time (a roofline): the model's bytes at the measured copy
    rate or its FLOPs at the measured matrix-product rate, whichever takes longer."""
    model = cost.summarize(point)
    moved = model["traffic_model_bytes"] or model["traffic_compulsory_bytes"]
    return max(moved / (ceilings["copy_gbps"] * 1e9), model["flops"] / (ceilings["matmul_tflops"] * 1e12))


def too_slow(point: Point, ceilings: dict | None, budget_seconds: float) -> str | None:
    if not ceilings:
        return None
    seconds = predicted_seconds(point, ceilings)
    if seconds > budget_seconds:
        return (
            f"predicted to take at least {seconds:,.0f} s per call ({cost.flops(point):.2e} FLOP at "
            f"the measured {ceilings['matmul_tflops'] * 1e3:,.0f} GFLOP/s, or its bytes at "
            f"{ceilings['copy_gbps']:,.1f} GB/s), over the budget of {budget_seconds:g} s per call"
        )
    return None


def interpreter_too_small(point: Point, device: str, interpreter_limit: int) -> str | None:
    scores = point.groups * point.tokens**2
    if device == "cpu" and point.triton and scores > interpreter_limit:
        return (
            f"too large for the interpreter: B·H·T² = {scores:,} score elements, limit {interpreter_limit:,}"
        )
    return None


def skip_reason(
    point: Point,
    device: str,
    interpreter_limit: int,
    *,
    validation: list[dict] | None = None,
    builds: list[dict] | None = None,
    required_targets: list[str] | None = None,
    ceilings: dict | None = None,
    budget_seconds: float = CALL_BUDGET_SECONDS,
) -> str | None:
    """The first reason the point must not run, in the order a reader would check them.
    ``ceilings``: the machine's measured rates (kernels.measure.ceilings); without them the
    time budget is not applied."""
    return (
        build_failure(point.name, builds, required_targets)
        or validation_failure(validation)
        or device_absent(device)
        or backend_unavailable(point, device)
        or memory_short(point, device)
        or too_slow(point, ceilings, budget_seconds)
        or interpreter_too_small(point, device, interpreter_limit)
    )
