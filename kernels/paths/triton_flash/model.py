"""triton_flash's forward as a model: the bytes its one fused kernel moves as written (Q once,
K and V once per query block over its key span, O once; nothing T×T), and what it keeps for
the backward (q, k, v, O and each row's log-sum-exp: FlashAttention's). Pure Python.
"""

from __future__ import annotations

from kernels.models.backward_cost import FLOAT32_BYTES, kept_inputs
from kernels.models.cost import walk_of
from kernels.planning.point import Point
from kernels.spec import FUSED_LAUNCH_CANDIDATES


def as_issued_fused(point: Point) -> dict[tuple[str, str, str], int]:
    T, d, e, G = point.tokens, point.head_dim, point.e, point.groups
    kv = G * walk_of(point).span * d * e
    return {
        ("attention_fwd", "Q", "load"): G * T * d * e,
        ("attention_fwd", "K", "load"): kv,
        ("attention_fwd", "V", "load"): kv,
        ("attention_fwd", "O", "store"): G * T * d * e,
    }


def kept(point: Point) -> dict[str, int]:
    G, T = point.groups, point.tokens
    return kept_inputs(point) | {"O": G * T * point.head_dim * point.e, "LSE": G * T * FLOAT32_BYTES}


def launch_candidates(point: Point) -> tuple[tuple[int, int], ...]:
    """The (num_warps, num_stages) the build compiles for the point's head dim and a GPU
    point is timed with (kernels.spec.FUSED_LAUNCH_CANDIDATES)."""
    return FUSED_LAUNCH_CANDIDATES[point.head_dim]
