"""What each of our paths keeps from its forward for the backward (bytes, by tensor). Pure
Python; the as-issued bytes and FLOPs of each backward's kernels are its own cost module's
(kernels.study.*_backward_cost, registered as ``backward_traffic_model``).

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
from kernels.study.point import Point

FLOAT32_BYTES = ELEMENT_BYTES["float32"]


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
