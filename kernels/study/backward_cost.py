"""What each of our paths keeps from its forward for the backward (bytes, by tensor), what
its backward must move at the least (compulsory, by tensor), and the FLOPs the field's
convention gives a backward. Pure Python; the as-issued bytes and executed FLOPs of each
backward's kernels are its own cost module's (kernels.study.*_backward_cost, registered as
``backward_traffic_model``).

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
from kernels.study.cost import flops, score_bytes
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


def compulsory_backward(point: Point) -> dict[tuple[str, str], int]:
    """Each tensor of the path's backward algorithm moved once, by (tensor, op), named as
    the interpreter's counter names the kernels' arguments. Every path reads Q, K, V and dO
    and writes dQ, dK and dV once. The materialized one (FlashAttention's Algorithm 3) also
    reads the kept P, writes dP and reads it back, writes dS and reads it back: five T×T
    passes. The S-only one reads the kept S once with its rows' M and L, and O once for the
    rows' D = rowsum(dO∘O) it writes and reads back; the fused one the same with O and the
    log-sum-exp, and no T×T tensor at all. Causal or not, a T×T pass counts every element
    (as the forward's compulsory transfers do)."""
    G, T, d, e = point.groups, point.tokens, point.head_dim, point.e
    rows = G * T * d * e
    moved = {(name, "load"): rows for name in ("Q", "K", "V", "DO")}
    moved |= {(name, "store"): rows for name in ("DQ", "DK", "DV")}
    tt = score_bytes(point)
    stats = G * T * FLOAT32_BYTES
    if point.stores == "SP":
        return (
            moved
            | {("P", "load"): tt, ("DP", "store"): tt, ("DP", "load"): tt, ("DS", "store"): tt}
            | {("DS", "load"): tt}
        )
    delta = {("O", "load"): rows, ("Delta", "store"): stats, ("Delta", "load"): stats}
    if point.stores == "S":
        return moved | delta | {("S", "load"): tt, ("M", "load"): stats, ("L", "load"): stats}
    return moved | delta | {("LSE", "load"): stats}


def by_tensor(issued: dict[tuple[str, str, str], int]) -> dict[tuple[str, str], int]:
    """As-issued bytes (kernel, tensor, op) summed over kernels, by (tensor, op)."""
    out: dict[tuple[str, str], int] = {}
    for (_, tensor, op), nbytes in issued.items():
        out[tensor, op] = out.get((tensor, op), 0) + nbytes
    return out


def convention_flops_backward(point: Point) -> int:
    """The field's count of a backward's FLOPs: 2.5 × the forward's (FlashAttention's
    benchmarks: five products against the forward's two), halved when causal as the forward's
    is. What a kernel executes differs: the materialized backward runs four products (0.8 of
    this), the fused one five where it accumulates dQ with atomics, and ours, in the
    structure of Triton's tutorial (separate dK/dV and dQ loops), seven (1.4 of this)."""
    return flops(point) * 5 // 2
