"""triton_flash's forward as a model: the bytes its one fused kernel moves as written (Q once,
K and V once per query block over the key tiles its mask's map visits, O once, and under a
mask beyond causal each row's run of keys once; nothing T×T), and what it keeps for
the backward (q, k, v, O and each row's log-sum-exp: FlashAttention's). Pure Python.

Inference shapes: Q, O and the log-sum-exp have B·H·query_tokens rows, the kept K and V
B·kv_heads·T; the kernel still loads the shared K/V head once per query head's programs, so
its as-issued K and V are B·H × the walk's key span (``kernels.models.cost.walk_of``, which
walks the query_tokens rows with the causal offset the kernel uses).
"""

from __future__ import annotations

from kernels.models.backward_cost import FLOAT32_BYTES, kept_inputs
from kernels.models.cost import cdiv, runs_bytes, walk_of
from kernels.planning.point import Point
from kernels.spec import FUSED_LAUNCH_CANDIDATES


def as_issued_fused(point: Point) -> dict[tuple[str, str, str], int]:
    d, e, G = point.head_dim, point.e, point.groups
    rows = G * point.queries * d * e
    kv = G * walk_of(point).span * d * e
    found = {
        ("attention_fwd", "Q", "load"): rows,
        ("attention_fwd", "K", "load"): kv,
        ("attention_fwd", "V", "load"): kv,
        ("attention_fwd", "O", "store"): rows,
    }
    return found | ({("attention_fwd", "BOUNDS", "load"): runs} if (runs := runs_bytes(point)) else {})


def kept(point: Point) -> dict[str, int]:
    """q, k and v as given (K and V with their kv_heads, not one per query head), O, and a
    float32 log-sum-exp per query row."""
    G, Tq = point.groups, point.queries
    return kept_inputs(point) | {"O": G * Tq * point.head_dim * point.e, "LSE": G * Tq * FLOAT32_BYTES}


def programs(point: Point, sms: int | None = None) -> int:
    """Programs the fused kernel launches: a query block of one query head each, B·H·⌈Tq/block_m⌉
    whatever the GPU (``sms``): at decode, one per head, too few to fill a GPU's SMs."""
    return point.groups * cdiv(point.queries, point.block_m)


def launch_candidates(point: Point) -> tuple[tuple[int, int], ...]:
    """The (num_warps, num_stages) the build compiles for the point's head dim and a GPU
    point is timed with (kernels.spec.FUSED_LAUNCH_CANDIDATES)."""
    return FUSED_LAUNCH_CANDIDATES[point.head_dim]
