"""The as-issued traffic and executed FLOPs of triton_s_only's backward
(kernels.paths.triton_s_only.backward). Pure Python: no torch, no triton.

Three kernels, keyed as the interpreter's counter keys them:

- ``delta``: O and dO loaded once, D (float32, B·H·T) stored.
- ``dkdv``: one program per key block; V loaded once for it, dK and dV stored once; for
  every query block it visits, S's tile, the rows' M, L and D, and the rows of Q and dO.
- ``dq``: one program per query block; M, L, D and dO loaded once, dQ stored once; for
  every key block it visits, S's tile and the keys' rows of K and V.

Both visit the same tiles, the mask's tile map (``kernels.models.cost.visits_of``): causal,
(m, n) is visited iff n·BLOCK_N < (m + 1)·BLOCK_M; full, all of them, so S moves 2·B·H·T²·e_sp
(two full loads). Beyond causal ``dq`` reads its rows' runs of keys (8 bytes a row, as the
forward's pv) and ``dkdv`` its key block's query rows (8 bytes a program).

Grouped heads (kv_heads < heads): ``dkdv`` runs per K/V head over its group's query heads, so
its V load and dK, dV stores count B·kv_heads (T × d) matrices; the rest counts per query head
(``dq``'s K and V too: each query head's programs load the shared head). The group's sum is
taken in the kernel's registers: nothing else moves.
"""

from __future__ import annotations

from kernels import masks
from kernels.models.backward_stage_cost import FUSED_DOES, issued_kernel_stages, shared_work
from kernels.models.cost import RUN_BYTES, cdiv, runs_bytes, visits_of
from kernels.models.stage_type import StageCost

STAT_BYTES = 4  # M, L and D are float32


def _tiles(point):
    """The visited tiles, each as (m, n, rows, columns), rows and columns inside T."""
    T, bn = point.tokens, point.block_n
    for m, visit in enumerate(visits_of(point)):
        for n in range(visit.first, visit.stop):
            yield m, n, visit.rows[1] - visit.rows[0], min(bn, T - n * bn)


def as_issued_s_only_backward(point) -> dict[tuple[str, str, str], int]:
    """Bytes each (kernel, tensor, op) moves as the kernels are written, for ``point`` (a
    ``kernels.planning.point.Point``, or anything with its fields tokens, head_dim, block_m,
    block_n, causal, groups, kv_groups, e and e_sp)."""
    T, d, e, e_sp, G = point.tokens, point.head_dim, point.e, point.e_sp, point.groups
    Gkv = point.kv_groups
    s = qrows = krows = 0  # S elements; query rows (dkdv) and key rows (dq) loaded per tile
    for _, _, rows, cols in _tiles(point):
        s += rows * cols
        qrows += rows
        krows += cols
    rows_bytes = T * d * e  # one T × d tensor, once
    found = {
        ("delta", "O", "load"): G * rows_bytes,
        ("delta", "DO", "load"): G * rows_bytes,
        ("delta", "Delta", "store"): G * T * STAT_BYTES,
        ("dkdv", "S", "load"): G * s * e_sp,
        ("dkdv", "M", "load"): G * qrows * STAT_BYTES,
        ("dkdv", "L", "load"): G * qrows * STAT_BYTES,
        ("dkdv", "Delta", "load"): G * qrows * STAT_BYTES,
        ("dkdv", "Q", "load"): G * qrows * d * e,
        ("dkdv", "DO", "load"): G * qrows * d * e,
        ("dkdv", "V", "load"): Gkv * rows_bytes,
        ("dkdv", "DK", "store"): Gkv * rows_bytes,
        ("dkdv", "DV", "store"): Gkv * rows_bytes,
        ("dq", "S", "load"): G * s * e_sp,
        ("dq", "M", "load"): G * T * STAT_BYTES,
        ("dq", "L", "load"): G * T * STAT_BYTES,
        ("dq", "Delta", "load"): G * T * STAT_BYTES,
        ("dq", "DO", "load"): G * rows_bytes,
        ("dq", "V", "load"): G * krows * d * e,
        ("dq", "K", "load"): G * krows * d * e,
        ("dq", "DQ", "store"): G * rows_bytes,
    }
    if not masks.beyond_causal(point.mask_kind):
        return found
    return found | {
        ("dkdv", "KEY_ROWS", "load"): Gkv * cdiv(T, point.block_n) * RUN_BYTES,
        ("dq", "BOUNDS", "load"): runs_bytes(point),
    }


def flops_s_only_backward(point) -> int:
    """FLOPs of the tile products as executed: per visited tile, full BLOCK_M × BLOCK_N × d
    products (padding included): three in dkdv (pᵀ·dO, dO·Vᵀ, dsᵀ·Q), two in dq (dO·Vᵀ,
    ds·K), 2·BLOCK_M·BLOCK_N·d each. For T a multiple of both blocks that is 10·B·H·T²·d,
    or 5·B·H·T·(T + max(BLOCK_M, BLOCK_N))·d when causal."""
    tiles = sum(1 for _ in _tiles(point))
    return point.groups * tiles * 5 * 2 * point.block_m * point.block_n * point.head_dim


# each kernel's T×T·d products per visited tile and exponentials per tile element
PRODUCTS = {"delta": (0, 0), "dkdv": (3, 1), "dq": (2, 1)}  # S kept: P from it


def backward_stage_costs(point) -> list[StageCost]:
    return issued_kernel_stages(point, shared_work(point, PRODUCTS), FUSED_DOES)
