"""Measure a backward point: one forward that saves what its path keeps, then the backward
from a fresh random dO (kernels.measure.run calls this for a point whose pass is backward).

What it adds to the record: the bytes the forward kept (saved-tensor hooks, beside the
model's), the peak memory of forward + backward, each gradient's error against autograd
through the float64 definition; under the interpreter, the backward kernels' counted traffic
(the forward runs before counting starts) and no time; otherwise the backward timed alone
(autograd.grad on the kept graph, retained between calls) and forward + backward timed
together, and for the materialized paths each backward stage warm and cold.
"""

from __future__ import annotations

import torch

from kernels import catalog, masks
from kernels.impl import mode
from kernels.measure.chain_times import STAGES_UNMASKED, timed_chain
from kernels.measure.memory import peak_allocated
from kernels.measure.saved import saved_bytes, saved_during
from kernels.measure.verdict import RTOL_ABS, held_to_the_rule, past_bound
from kernels.planning.point import Point

INTERPRETED = "not timed: Triton interpreter (correctness and counting only)"
GRADIENTS = ("dQ", "dK", "dV")
DO_SEED_OFFSET = 1  # dO is drawn from the point's seed + 1: fresh, and not q's draw again


def leaves(q, k, v) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_(True) for t in (q, k, v)]


def gradient_check(point: Point, q, k, v, do, grads) -> dict:
    """Each gradient's largest error against the float64 definition's; where a gradient is
    not finite but the definition's is, or one exceeds the validation rule's bound on these
    inputs (``gradients_past_bound``), the reason the point failed."""
    from kernels.measure.validate_backward import reference_gradients

    ref = reference_gradients(q, k, v, do, point.mask_kind)
    bad = sum(int((~torch.isfinite(g)).sum().item()) for g in grads)
    errors = {
        name: ((g.double() - r).abs().max().item() if torch.isfinite(g).all() else None)
        for name, g, r in zip(GRADIENTS, grads, ref, strict=True)
    }
    found = {"gradient_errors": errors, "nonfinite_outputs": bad}
    found["max_abs_error"] = None if bad else max(errors.values())
    if bad and all(torch.isfinite(r).all() for r in ref):
        found["check_reason"] = f"{bad:,} gradient elements are not finite where the float64 definition's are"
    elif not bad and found["max_abs_error"] > RTOL_ABS:
        held = held_to_the_rule(point.impl, point.tokens, point.block_n)
        past = gradients_past_bound(point, q, k, v, do, grads, ref) if held else None
        if past:
            found["check_reason"] = past
    return found


BOUND_RULE = "3 × torch_naive's error in the same dtype + 1e-05, as validation holds it"


def gradients_past_bound(point: Point, q, k, v, do, grads, ref) -> str | None:
    """The first gradient whose error exceeds the validation rule's bound on these very
    inputs (kernels.measure.validate_backward: torch_naive's gradients as the baseline), as
    the point's reason for failing; None where all three hold. Only asked where an error
    exceeds 1e-5."""
    from kernels.measure.validate_backward import baseline_gradients, gradient_errors

    base = baseline_gradients(q, k, v, do, point.mask_kind)
    for name, error, bound in gradient_errors(grads, ref, base):
        if not error <= bound:
            return past_bound(f"its {name}", error, bound, BOUND_RULE)
    return None


def timed(point: Point, device: str, threads: int, forward, inputs, do) -> dict:
    """The backward alone on one kept graph, and forward + backward, each median of many."""
    from kernels.measure.timing import time_cpu, time_cuda

    clock = time_cuda if device == "cuda" else (lambda fn: time_cpu(fn, threads))
    out = forward()
    backward = clock(lambda: torch.autograd.grad(out, inputs, do, retain_graph=True))
    step = clock(lambda: torch.autograd.grad(forward(), inputs, do))
    return backward | {f"step_{key}": value for key, value in step.items()}


def timed_backward_stages(point: Point, q, k, v, do, device: str) -> dict:
    """The materialized backward's stages warm and cold, beside their modelled cost."""
    chain = catalog.get(point.impl).hook("backward_stages")
    if chain is None:
        return {}
    if point.triton and mode.interpret():
        return {"stage_time_reason": INTERPRETED}
    if masks.beyond_causal(point.mask_kind):
        return {"stage_time_reason": STAGES_UNMASKED}
    blocks = (point.block_m, point.block_n) if point.triton else ()
    options = {"sp_dtype": point.sp_dtype} if point.sp_dtype else {}
    stages, _ = chain(q, k, v, do, point.causal, *blocks, **options)
    return timed_chain(point, stages, device)


def run_backward(point: Point, q, k, v, device: str, seed: int, threads: int, forward_of) -> dict:
    """What a backward point adds to its record (``forward_of(q, k, v)``: the point's call)."""
    from kernels.measure.validate_backward import upstream_gradient

    do = upstream_gradient(q, seed + DO_SEED_OFFSET)
    inputs = leaves(q, k, v)
    forward = forward_of(*inputs)
    out, saved = saved_during(forward)
    found: dict = {"saved_bytes": saved_bytes(saved), "saved": saved}
    del out
    interpreted = point.triton and mode.interpret()
    counter = None

    def step():
        nonlocal counter
        out = forward()
        if not interpreted:
            return torch.autograd.grad(out, inputs, do)
        from kernels.measure.traffic import count_traffic

        with count_traffic() as counting:
            grads = torch.autograd.grad(out, inputs, do)
        counter = counting
        return grads

    peak, grads = peak_allocated(device, step)
    found["peak_alloc_bytes"] = max(0, peak)
    found |= gradient_check(point, q, k, v, do, grads)
    del grads
    if interpreted:
        found["counted"] = counter.by_stage()
        found["time_reason"] = INTERPRETED
    else:
        if device == "cuda":
            step()  # compile and warm up before anything is timed
        found |= timed(point, device, threads, forward, inputs, do)
    return found | timed_backward_stages(point, q, k, v, do, device)
