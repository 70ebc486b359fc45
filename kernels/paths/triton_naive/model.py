"""triton_naive's forward as a model: the bytes its three kernels move as written (scores,
softmax, pv: S and P through global memory), each kernel as a stage in words, and what the
forward keeps for the backward (q, k, v and P in its stored dtype: FlashAttention's standard
backward). Pure Python: no torch, no triton.

Inference shapes: S and P are B·H·Tq·T; the walk (``walk_of``) covers the Tq query rows with
the causal diagonal moved right by T − Tq. K and V are loaded per query head's programs
(B·H of them, however many K/V heads there are: the kernels index the shared head).
"""

from __future__ import annotations

from kernels.models.backward_cost import kept_inputs
from kernels.models.cost import cdiv, next_power_of_2, runs_bytes, walk_of
from kernels.models.stage_cost import kernel_stages
from kernels.models.stage_type import StageCost
from kernels.planning.point import Point

DOES = {
    "scores": "S = Q·Kᵀ/√d, future tiles −∞ (one kernel)",
    "softmax": "P = softmax(S) by rows (one kernel)",
    "pv": "O = P·V (one kernel)",
}


def as_issued_naive(point: Point) -> dict[tuple[str, str, str], int]:
    T, Tq, d, e, e_sp, G = point.tokens, point.queries, point.head_dim, point.e, point.e_sp, point.groups
    walk = walk_of(point)
    passes = 1 if min(next_power_of_2(T), point.max_row_block) >= T else 2
    sp = Tq * T * e_sp
    found = {
        ("scores", "Q", "load"): G * walk.rows_by_tiles * d * e,
        ("scores", "K", "load"): G * walk.span * d * e,
        ("scores", "S", "store"): G * sp,
        ("softmax", "S", "load"): G * sp * passes,
        ("softmax", "P", "store"): G * sp,
        ("pv", "P", "load"): G * walk.rows_by_span * e_sp,
        ("pv", "V", "load"): G * walk.span * d * e,
        ("pv", "O", "store"): G * Tq * d * e,
    }
    runs = runs_bytes(point)  # every score tile's program reads its rows' runs, and pv's once
    return found | (
        {("scores", "BOUNDS", "load"): runs * cdiv(T, point.block_n), ("pv", "BOUNDS", "load"): runs}
        if runs
        else {}
    )


def stage_costs(point: Point) -> list[StageCost]:
    return kernel_stages(point, DOES)


def kept(point: Point) -> dict[str, int]:
    return kept_inputs(point) | {"P": point.groups * point.queries * point.tokens * point.e_sp}
