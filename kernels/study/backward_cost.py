"""The backward's model: what each of our paths keeps from its forward for the backward
(bytes, by tensor), the backward's compulsory transfers, and its FLOPs as executed beside
the field's convention. Pure Python; the as-issued bytes of each backward's kernels are its
registration's own model (kernels.catalog: ``backward_traffic_model``).

What is kept, per path (measured by kernels.measure.saved, held against this in the tests):
- torch_naive (PyTorch's autograd): q and v, a contiguous copy of Kᵀ (the first product
  keeps its operand), P in the input dtype (for P·V), the softmax's float32 result (for a
  2-byte dtype a second T×T tensor; for float32 it is P) and, causal, the boolean mask;
- triton_naive: q, k, v and P (in its stored dtype) — FlashAttention's standard backward;
- triton_s_only: q, k, v, S, the rows' maximum M and sum L (float32) and O;
- triton_flash: q, k, v, O and each row's log-sum-exp (float32) — FlashAttention's.
"""

from __future__ import annotations

from kernels.spec import ELEMENT_BYTES
from kernels.study import flash_backward_cost, naive_backward_cost, s_only_backward_cost
from kernels.study.point import Point

FLOAT32_BYTES = ELEMENT_BYTES["float32"]
CONVENTION = 2.5  # the field's count: a backward is 2.5 times its forward's FLOPs


def kept_bytes(point: Point) -> dict[str, int] | None:
    """Bytes each kept tensor holds, by name; None for a path we do not model."""
    G, T, d, e = point.groups, point.tokens, point.head_dim, point.e
    inputs = {"Q": G * T * d * e, "K": G * T * d * e, "V": G * T * d * e}
    rows = G * T * FLOAT32_BYTES
    matrix = G * T * T
    if point.impl == "torch_naive":
        kept = inputs | {"P": matrix * e}
        if e != FLOAT32_BYTES:
            kept["P float32"] = matrix * FLOAT32_BYTES
        if point.causal:
            kept["mask"] = T * T
        return kept
    if point.impl == "triton_naive":
        return inputs | {"P": matrix * point.e_sp}
    if point.impl == "triton_s_only":
        return inputs | {"S": matrix * point.e_sp, "M": rows, "L": rows, "O": G * T * d * e}
    if point.impl == "triton_flash":
        return inputs | {"O": G * T * d * e, "LSE": rows}
    return None


def compulsory_backward(point: Point) -> dict[str, int]:
    """Bytes the backward must move at least, by tensor: q, k, v, dO (and O where D comes from
    it) read once, dQ, dK, dV written once, and each T×T tensor it keeps or stores moved once
    per way: P read (triton_naive, torch_naive), dP and dS written and read once each (the
    materialized backward stores them); S read once (triton_s_only); none fused."""
    G, T, d, e = point.groups, point.tokens, point.head_dim, point.e
    qkvo = G * T * d * e
    moved = {"Q": qkvo, "K": qkvo, "V": qkvo, "dO": qkvo, "dQ": qkvo, "dK": qkvo, "dV": qkvo}
    matrix = G * T * T * point.e_sp
    if point.stores == "SP":
        return moved | {"P": matrix, "dP": 2 * matrix, "dS": 2 * matrix}
    if point.stores == "S":
        return moved | {"S": matrix, "O": qkvo}
    return moved | {"O": qkvo}


def convention_flops(point: Point) -> int:
    """The field's backward FLOPs: 2.5 × the forward's 4·B·H·T²·d (halved when causal)."""
    forward = 4 * point.groups * point.tokens**2 * point.head_dim // (2 if point.causal else 1)
    return int(CONVENTION * forward)


def executed_flops(point: Point) -> int | None:
    """FLOPs of the backward's matrix products as executed, None for a path we do not model.
    torch_naive's autograd runs four whole T×T by T×d products (dP, dV, dQ, dK), causal or not;
    each Triton backward counts the tile products its launches run (its cost module)."""
    if point.impl == "torch_naive":
        return 4 * 2 * point.groups * point.tokens**2 * point.head_dim
    counted = {
        "triton_naive": naive_backward_cost.flops_naive_backward,
        "triton_s_only": s_only_backward_cost.flops_s_only_backward,
        "triton_flash": flash_backward_cost.flops_flash_backward,
    }.get(point.impl)
    return None if counted is None else counted(point)
