"""The cost of each stage of the materialized backward as it runs in the chain
(kernels.impl.backward_stages): what it reads and writes, split into the T×T hand-off (P, dP,
dS) and the rest (Q, K, V, dO, the gradients, dS's row sums), and the product FLOPs it
executes. Pure Python: no torch, no triton.

torch_naive: dp (dO·Vᵀ into dP), ds (P∘dP into dS, its row sums, then dS − P∘rowsum in
place: seven T×T passes), dv (Pᵀ·dO), dq (dS·K), dk (dSᵀ·Q), every product over all T×T
elements, causal or not. triton_naive: its five kernels, costed from its backward's traffic
model (kernels.study.naive_backward_cost) and the tiles each runs. triton_s_only's and
triton_flash's kernels (delta, dkdv, dq) are costed the same way for the predictions
(kernels.study.backward_predictions), though not timed stage by stage.
"""

from __future__ import annotations

from kernels.study.cost import _key_span, _scores_tiles, cdiv
from kernels.study.naive_backward_cost import _first_query
from kernels.study.point import Point
from kernels.study.stage_type import StageCost

BACKWARD_STAGES = ("dp", "ds", "dv", "dq", "dk")  # as kernels.impl.backward_stages runs them
STAGED_BACKWARD = ("torch_naive", "triton_naive")
BACKWARD_HANDOFF = ("P", "DP", "DS", "S")  # the T×T tensors a backward reads or writes
DOES: dict[str, str] = {
    "dp": "dP = dO·Vᵀ into a T×T tensor",
    "ds": "dS = P∘(dP − rowsum(P∘dP)): P and dP read, dS written",
    "dv": "dV = Pᵀ·dO: the kept P read again",
    "dq": "dQ = dS·K",
    "dk": "dK = dSᵀ·Q: dS read again",
}
FUSED_DOES: dict[str, str] = {
    "delta": "D = rowsum(dO∘O), one value per query row",
    "dkdv": "per key block: P recomputed tile by tile, dP and dS in registers, dK and dV accumulated",
    "dq": "per query block: P recomputed again, dQ accumulated",
}
TORCH_DS_PASSES = 7  # mul (P, dP → dS: 3), row sums (dS: 1), addcmul (dS, P → dS: 3)


def backward_stage_names(point: Point) -> tuple[str, ...]:
    return BACKWARD_STAGES if point.impl in STAGED_BACKWARD else ()


def _torch_stages(point: Point) -> list[StageCost]:
    G, T, d, e = point.groups, point.tokens, point.head_dim, point.e
    matrix, rows, product = G * T * T * e, G * T * d * e, 2 * G * T * T * d
    sums = 2 * G * T * e  # dS's row sums written, then read by addcmul
    found = {
        "dp": (matrix, 2 * rows, matrix, product),
        "ds": (TORCH_DS_PASSES * matrix, sums, 3 * matrix, 0),
        "dv": (matrix, 2 * rows, matrix, product),
        "dq": (matrix, 2 * rows, matrix, product),
        "dk": (matrix, 2 * rows, matrix, product),
    }
    return [StageCost(s, DOES[s], *found[s], exps=0) for s in BACKWARD_STAGES]


# Per kernel of each Triton backward: the T×T·d products it runs per visited tile and the
# exponentials per tile element (the fused paths recompute P = exp(S − stats) in both loops).
KERNEL_WORK: dict[str, dict[str, tuple[int, int]]] = {
    "triton_naive": {"dp": (1, 0), "ds": (0, 0), "dv": (1, 0), "dq": (1, 0), "dk": (1, 0)},
    "triton_s_only": {"delta": (0, 0), "dkdv": (3, 1), "dq": (2, 1)},  # S kept: P from it
    "triton_flash": {"delta": (0, 0), "dkdv": (4, 1), "dq": (3, 1)},  # S recomputed too
}


def _tile_products(point: Point) -> dict[str, int]:
    """Tile products each materialized kernel runs (as kernels.study.naive_backward_cost)."""
    T, bn = point.tokens, point.block_n
    tiles = dict.fromkeys(BACKWARD_STAGES, 0)
    for m in range(cdiv(T, point.block_m)):
        tiles["dp"] += _scores_tiles(point, m)
        tiles["dq"] += cdiv(_key_span(point, m), bn)
        tiles["dv"] += cdiv(T - _first_query(point, m), bn)
        tiles["dk"] += cdiv(T - _first_query(point, m), bn)
    return tiles


def _kernel_work(point: Point) -> dict[str, tuple[int, int]]:
    """(FLOPs, exponentials) of each kernel of a Triton backward."""
    per_tile = 2 * point.block_m * point.block_n * point.head_dim * point.groups
    if point.impl == "triton_naive":
        return {k: (per_tile * n, 0) for k, n in _tile_products(point).items()}
    from kernels.study.backward_cost import executed_flops_backward

    work = KERNEL_WORK[point.impl]
    products = sum(p for p, _ in work.values())
    total = executed_flops_backward(point)
    elements = total // (2 * point.head_dim * products)  # tile elements each loop visits
    return {k: (total * p // products, elements * x) for k, (p, x) in work.items()}


def _triton_stages(point: Point) -> list[StageCost]:
    """One cost per kernel of the path's backward, from its traffic model, in launch order."""
    from kernels.study.backward_cost import as_issued_backward

    issued = as_issued_backward(point)
    matrix = point.groups * point.tokens**2 * point.e_sp
    work = _kernel_work(point)
    found = []
    for kernel in dict.fromkeys(k for k, _, _ in issued):
        mine = {(t, op): n for (k, t, op), n in issued.items() if k == kernel}
        handoff = sum(n for (t, _), n in mine.items() if t in BACKWARD_HANDOFF)
        touched = {t for t, _ in mine if t in BACKWARD_HANDOFF}
        flops, exps = work.get(kernel, (0, 0))
        does = (
            DOES.get(kernel, f"{kernel} (one kernel)") if point.impl == "triton_naive" else FUSED_DOES[kernel]
        )
        found.append(
            StageCost(kernel, does, handoff, sum(mine.values()) - handoff, matrix * len(touched), flops, exps)
        )
    return found


def backward_stage_costs(point: Point) -> list[StageCost]:
    """Each stage of the point's materialized backward in the order it runs ([] if none)."""
    return backward_kernel_costs(point) if point.impl in STAGED_BACKWARD else []


def backward_kernel_costs(point: Point) -> list[StageCost]:
    """Each kernel (torch_naive: each operation) of the point's backward in launch order, for
    the paths we model ([] for others)."""
    if point.impl == "torch_naive":
        return _torch_stages(point)
    if point.impl in KERNEL_WORK:
        return _triton_stages(point)
    return []
