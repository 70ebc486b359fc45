"""triton_s_only's forward as a model (kernels.paths.triton_s_only.forward: S stored, P never):
the bytes its kernels move as written, each kernel as a stage in words, and what it keeps for
the backward (q, k, v, S, the rows' M and L, and O). Pure Python: no torch, no triton.

Three kernels, keyed as the interpreter's counter keys them (the @triton.jit function's name
without "_kernel", the tensor argument's name, load or store):

- ``scores``: triton_naive's scores kernel, so exactly its entries: Q and K loaded for every
  tile not wholly in the future, S stored whole (future tiles as −∞).
- ``stats``: S loaded over each query block's rows and key span (all T, or up to the
  diagonal tile when causal); the rows' M and L stored, 4 bytes each.
- ``pv``: S loaded again over the same span, M and L loaded, V loaded over the span (once
  per query block), O stored.

Non-causal, S moves 3·B·H·T²·e_sp bytes (one store, two full loads) against triton_naive's
4·B·H·T²·e_sp for S and P together.

Inference shapes: S is B·H·Tq·T, M and L B·H·Tq; the walk covers the Tq query rows with the
causal diagonal moved right by T − Tq; V is loaded per query head's programs (B·H of them,
however many K/V heads there are).
"""

from __future__ import annotations

from kernels.models.backward_cost import kept_inputs
from kernels.models.cost import cdiv, runs_bytes, walk_of
from kernels.models.stage_cost import kernel_stages
from kernels.models.stage_type import StageCost
from kernels.planning.point import Point

STAT_BYTES = 4  # M and L are float32
DOES = {
    "scores": "S = Q·Kᵀ/√d, future tiles −∞ (one kernel)",
    "stats": "each row's max and sum of exp, from S (one kernel)",
    "pv": "O = softmax(S)·V, S read again, P in registers (one kernel)",
}


def as_issued_s_only(point) -> dict[tuple[str, str, str], int]:
    """Bytes each (kernel, tensor, op) moves as the kernels are written, for ``point`` (a
    ``kernels.planning.point.Point``, or anything with its fields tokens, queries, head_dim,
    block_m, block_n, causal, groups, e and e_sp)."""
    T, Tq, d, e, e_sp, G = point.tokens, point.queries, point.head_dim, point.e, point.e_sp, point.groups
    walk = walk_of(point)
    stats = Tq * STAT_BYTES
    found = {
        ("scores", "Q", "load"): G * walk.rows_by_tiles * d * e,
        ("scores", "K", "load"): G * walk.span * d * e,
        ("scores", "S", "store"): G * Tq * T * e_sp,
        ("stats", "S", "load"): G * walk.rows_by_span * e_sp,
        ("stats", "M", "store"): G * stats,
        ("stats", "L", "store"): G * stats,
        ("pv", "S", "load"): G * walk.rows_by_span * e_sp,
        ("pv", "M", "load"): G * stats,
        ("pv", "L", "load"): G * stats,
        ("pv", "V", "load"): G * walk.span * d * e,
        ("pv", "O", "store"): G * Tq * d * e,
    }
    runs = runs_bytes(point)  # every score tile's program reads its rows' runs, stats and pv once
    if not runs:
        return found
    by_tiles = runs * cdiv(T, point.block_n)
    return found | {
        (kernel, "BOUNDS", "load"): n for kernel, n in (("scores", by_tiles), ("stats", runs), ("pv", runs))
    }


def stage_costs(point: Point) -> list[StageCost]:
    return kernel_stages(point, DOES)


def kept(point: Point) -> dict[str, int]:
    G, T, Tq = point.groups, point.tokens, point.queries
    rows = G * Tq * STAT_BYTES
    return kept_inputs(point) | {
        "S": G * Tq * T * point.e_sp,
        "M": rows,
        "L": rows,
        "O": G * Tq * point.head_dim * point.e,
    }
