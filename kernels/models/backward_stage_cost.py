"""What does each kernel of a backward read, write and compute?

The cost of each kernel (or operation) of a backward as it runs: what it reads and writes,
split into the T×T hand-off (P, dP, dS, S) and the rest (Q, K, V, dO, the gradients, the
rows' statistics), the product FLOPs it executes and its exponentials. Pure Python: no torch,
no triton.

Each path's registration gives its own (``backward_stage_model``); a path that also gives
``backward_stages`` is timed stage by stage in that order. What is common lives here: the
standard backward's five steps in words, the fused backward's three loops in words, and one
cost per kernel of a path's backward traffic model (``issued_kernel_stages``).
"""

from __future__ import annotations

from collections.abc import Mapping

from kernels import catalog
from kernels.models.backward_cost import as_issued_backward, executed_flops_backward
from kernels.models.cost import score_bytes
from kernels.models.stage_type import StageCost
from kernels.planning.point import Point

# The standard backward (FlashAttention's Algorithm 3) as five steps, in the order they run
MATERIALIZED_STEPS = ("dp", "ds", "dv", "dq", "dk")
BACKWARD_HANDOFF = ("P", "DP", "DS", "S")  # the T×T tensors a backward reads or writes
MATERIALIZED_DOES: dict[str, str] = {
    "dp": "dP = dO·Vᵀ into a T×T tensor",
    "ds": "dS = P∘(dP − rowsum(P∘dP)): P and dP read, dS written",
    "dv": "dV = Pᵀ·dO: the kept P read again",
    "dq": "dQ = dS·K",
    "dk": "dK = dSᵀ·Q: dS read again",
}
# The fused backward in the structure of Triton's tutorial: D, then a loop per key block, then
# a loop per query block
FUSED_DOES: dict[str, str] = {
    "delta": "D = rowsum(dO∘O), one value per query row",
    "dkdv": "per key block: P recomputed tile by tile, dP and dS in registers, dK and dV accumulated",
    "dq": "per query block: P recomputed again, dQ accumulated",
}
Work = Mapping[str, tuple[int, int]]  # kernel → (FLOPs, exponentials)


def shared_work(point: Point, products: Mapping[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """(FLOPs, exponentials) of each kernel of a fused backward from its executed FLOPs:
    ``products`` gives each kernel's T×T·d products per visited tile and its exponentials per
    tile element (a fused loop recomputes P = exp(S − stats))."""
    count = sum(p for p, _ in products.values())
    total = executed_flops_backward(point)
    elements = total // (2 * point.head_dim * count)  # tile elements each loop visits
    return {k: (total * p // count, elements * x) for k, (p, x) in products.items()}


def issued_kernel_stages(point: Point, work: Work, does: Mapping[str, str]) -> list[StageCost]:
    """One cost per kernel of the path's backward traffic model, in launch order."""
    issued = as_issued_backward(point)
    matrix = score_bytes(point)  # one T×T tensor (one per query head)
    found = []
    for kernel in dict.fromkeys(k for k, _, _ in issued):
        mine = {(t, op): n for (k, t, op), n in issued.items() if k == kernel}
        handoff = sum(n for (t, _), n in mine.items() if t in BACKWARD_HANDOFF)
        touched = {t for t, _ in mine if t in BACKWARD_HANDOFF}
        flops, exps = work.get(kernel, (0, 0))
        found.append(
            StageCost(
                kernel,
                does.get(kernel, f"{kernel} (one kernel)"),
                handoff,
                sum(mine.values()) - handoff,
                matrix * len(touched),
                flops,
                exps,
            )
        )
    return found


def backward_kernel_costs(point: Point) -> list[StageCost]:
    """Each kernel (or operation) of the point's backward in launch order, from its
    registration's model ([] where it gives none, or where no backward runs at the point's
    shape: Point.trains)."""
    model = catalog.get(point.impl).hook("backward_stage_model")
    return [] if model is None or not point.trains else list(model(point))


def backward_stage_costs(point: Point) -> list[StageCost]:
    """Each stage of the point's backward as it is timed, in order ([] where the path's
    backward is not timed stage by stage)."""
    if catalog.get(point.impl).backward_stages is None:
        return []
    return backward_kernel_costs(point)


def backward_stage_names(point: Point) -> tuple[str, ...]:
    return tuple(stage.stage for stage in backward_stage_costs(point))
