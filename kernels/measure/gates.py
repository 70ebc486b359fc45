"""Every reason a sweep point is recorded as skipped instead of measured, decided here and
nowhere else: a backward point's path has no backward, its path (or backward) does not take
the point's mask, a kernel it launches cannot build for
a required target, its implementation failed validation (its gradients', for a backward
point), the device is absent or lacks the SDPA backend the point forces, it would not fit in
memory, it is predicted to take longer than the time budget, or it is too large for the
interpreter."""

from __future__ import annotations

import math

from kernels import catalog
from kernels.measure.memory import available_bytes
from kernels.models import cost, expected
from kernels.planning.launch import build_failure
from kernels.planning.point import Point
from kernels.spec import (
    CALL_BUDGET_SECONDS,
    DEFAULT_INTERPRETER_LIMIT,
    QUICK_CEILINGS_MARGIN,
    REFERENCE,
    SLOW_MACHINE,
)

MEMORY_FRACTION = 0.8  # of the memory available when the point starts
GIB = float(1 << 30)


def validation_failure(results: list[dict] | None, direction: str = "forward") -> str | None:
    """The implementation's validation results of this direction (forward, or backward:
    its gradients) hold an unexpected verdict (or none at all). Rows written before the
    backward existed carry no direction: they are forward's."""
    if results is None:
        return None
    results = [r for r in results if r.get("direction", "forward") == direction]
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


def no_backward(point: Point) -> str | None:
    """A backward point of a path that has no backward (the registration says why), or with
    fewer queries than keys (inference's shape: no study trains on it)."""
    why = catalog.get(point.impl).backward_reason() if point.backward else None
    if why is None and point.backward and not point.trains:
        why = (
            f"query_tokens={point.query_tokens} is fewer queries than tokens={point.tokens} keys, an "
            "inference shape; the backward is measured on the square problem (grouped heads allowed)"
        )
    return f"no backward: {why}" if why else None


def mask_not_taken(point: Point) -> str | None:
    """A point under a mask its implementation does not take (its backward's, for a backward
    point): the registration's masks= or backward_masks= say which it takes."""
    entry = catalog.get(point.impl)
    why = entry.mask_refusal(point.mask_kind)
    if why is None and point.backward:
        why = entry.backward_mask_refusal(point.mask_kind)
    return f"unsupported mask: {why}" if why else None


def shape_not_taken(point: Point) -> str | None:
    """A point with query_tokens or kv_heads that its implementation does not take."""
    why = catalog.get(point.impl).shape_refusal(point.query_tokens is not None, point.kv_heads is not None)
    return f"unsupported shape: {why}" if why else None


def device_absent(device: str) -> str | None:
    """Why ``device`` cannot run anything here (cuda asked for without a GPU), or None."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        return "unsupported on this device: cuda requested but torch.cuda.is_available() is False"
    return None


def backend_unavailable(point: Point, device: str) -> str | None:
    """What the point's registration says this device lacks for it (its ``unavailable``: a
    forced SDPA backend for its dtype, head dim and shape, FlexAttention's backward on a CPU,
    a compiler): a skip naming why, not a failure."""
    probe = catalog.get(point.impl).hook("unavailable")
    why = probe(point, device) if probe is not None else None
    return f"unsupported on this device: {why}" if why else None


def figure(value: float) -> str:
    """A number for a reason: three significant figures, thousands separated from 1,000 on,
    never a rounded zero (2.4e-05, 0.375, 64.2, 16,384)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def memory_short(point: Point, device: str) -> str | None:
    need, have = cost.predicted_bytes(point), available_bytes(device)
    if need > MEMORY_FRACTION * have:
        return (
            f"would not fit in memory: needs about {figure(need / GIB)} GiB, "
            f"{figure(have / GIB)} GiB available on {device}"
        )
    return None


def predicted_seconds(point: Point, ceilings: dict) -> float:
    """A lower bound on one call's time (kernels.models.expected.call_seconds)."""
    return expected.call_seconds(point, ceilings)


def assumed_ceilings(point: Point, device: str, budget_seconds: float) -> tuple[dict | None, str]:
    """Rates to hold a point against when none were measured (or they are null: a device
    this machine lacks), and how they were had. None where even a very slow machine
    (SLOW_MACHINE) does one call within the budget: no measurement is needed then."""
    if predicted_seconds(point, SLOW_MACHINE) <= budget_seconds:
        return None, ""
    from kernels.measure.ceilings import quick

    found = quick(device)
    margin = QUICK_CEILINGS_MARGIN
    scaled = found | {k: found[k] * margin for k in ("copy_gbps", "matmul_tflops")}
    return scaled, f"{margin:g} times a quick measurement of this machine, as no ceilings were given"


def too_slow(
    point: Point, ceilings: dict | None, budget_seconds: float, device: str | None = None
) -> str | None:
    """Over the time budget at ``ceilings``; without usable ceilings, on ``device``, at a
    quick measurement of its rates taken generously (see ``assumed_ceilings``)."""
    from kernels.measure.ceilings import usable

    source = "the measured"
    if not usable(ceilings):
        if device is None:
            return None
        ceilings, how = assumed_ceilings(point, device, budget_seconds)
        if ceilings is None:
            return None
        source = f"{how}:"
    seconds = predicted_seconds(point, ceilings)
    if seconds > budget_seconds:
        products = expected.product_seconds(point, cost.flops(point), ceilings)
        rate = cost.flops(point) / products if products else ceilings["matmul_tflops"] * 1e12
        return (
            f"predicted to take at least {figure(seconds)} s per call ({cost.flops(point):.2e} FLOP at "
            f"{source} {figure(rate / 1e9)} GFLOP/s for {point.dtype}, or its bytes at "
            f"{figure(ceilings['copy_gbps'])} GB/s), over the budget of {budget_seconds:g} s per call"
        )
    return None


def interpreter_too_small(point: Point, device: str, interpreter_limit: int) -> str | None:
    scores = point.groups * point.queries * point.tokens
    if device == "cpu" and point.triton and scores > interpreter_limit:
        return (
            f"too large for the interpreter: B·H·query_tokens·T = {scores:,} score elements, limit "
            f"{interpreter_limit:,}"
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
    ``ceilings``: the machine's measured rates (kernels.measure.ceilings); without them (or
    with null rates) the time budget is applied at a quick measurement taken generously."""
    return (
        shape_not_taken(point)
        or no_backward(point)
        or mask_not_taken(point)
        or build_failure(point.name, builds, required_targets)
        or validation_failure(validation, point.direction)
        or device_absent(device)
        or backend_unavailable(point, device)
        or memory_short(point, device)
        or too_slow(point, ceilings, budget_seconds, device)
        or interpreter_too_small(point, device, interpreter_limit)
    )


def validation_too_large(impls, dtypes, shapes, device: str) -> str | None:
    """Why validation cannot run one of ``shapes``, naming the flags (the float64 reference
    keeps S and P whole; under the interpreter, no larger than measure would run there), or
    None: refused before anything is allocated."""
    triton = [name for name in impls if catalog.get(name).triton]
    have = available_bytes(device)
    for shape in shapes:
        flags = (
            f"--tokens {shape.tokens} --head-dim {shape.head_dim} --batch {shape.batch} --heads {shape.heads}"
        )
        need = max(
            cost.predicted_bytes(
                Point(impl, shape.batch, shape.heads, shape.tokens, shape.head_dim, dtype, True)
            )
            for impl in (REFERENCE, *impls)
            for dtype in dtypes
        )
        if need > MEMORY_FRACTION * have:
            return (
                f"validate {flags}: needs about {figure(need / GIB)} GiB (the float64 reference keeps "
                f"S and P whole), {figure(have / GIB)} GiB available on {device}; give smaller --tokens"
            )
        scores = shape.batch * shape.heads * shape.tokens**2
        if device == "cpu" and triton and scores > DEFAULT_INTERPRETER_LIMIT:
            return (
                f"validate {flags}: B·H·T² = {scores:,} score elements, more than the Triton "
                f"interpreter is given in a study ({DEFAULT_INTERPRETER_LIMIT:,}, measure's "
                f"--interpreter-limit); give smaller --tokens, or leave {', '.join(triton)} out of --impl"
            )
    return None
