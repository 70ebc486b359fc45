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


def executed_flops_backward(point: Point) -> int | None:
    """FLOPs of the backward as its kernels execute them: each Triton path's own count
    (kernels.study.*_backward_cost), PyTorch's autograd of torch_naive four full T×T·d
    products (it computes masked scores too); None for a path we do not model."""
    from kernels.study.flash_backward_cost import flops_flash_backward
    from kernels.study.naive_backward_cost import flops_naive_backward
    from kernels.study.s_only_backward_cost import flops_s_only_backward

    counted = {
        "triton_naive": flops_naive_backward,
        "triton_s_only": flops_s_only_backward,
        "triton_flash": flops_flash_backward,
    }
    if point.impl == "torch_naive":
        return 8 * point.groups * point.tokens**2 * point.head_dim
    return counted[point.impl](point) if point.impl in counted else None


def as_issued_backward(point: Point) -> dict[tuple[str, str, str], int] | None:
    """The backward kernels' own model of what they move, or None where none is given."""
    from kernels import catalog

    model = catalog.get(point.impl).backward_model()
    return None if model is None else {key: int(nbytes) for key, nbytes in model(point).items()}


def backward_stages(point: Point) -> list[dict]:
    """A row per (kernel, tensor, op) the backward's model moves, beside the compulsory
    transfer of its tensor (on the first kernel that moves it; a compulsory transfer no
    kernel models is a row of kernel "compulsory")."""
    issued = as_issued_backward(point) or {}
    floor = dict(compulsory_backward(point))
    rows = []
    for (kernel, tensor, op), nbytes in issued.items():
        rows.append(
            {
                "kernel": kernel,
                "tensor": tensor,
                "op": op,
                "compulsory_bytes": floor.pop((tensor, op), 0),
                "model_bytes": nbytes,
            }
        )
    for (tensor, op), nbytes in floor.items():
        rows.append(
            {
                "kernel": "compulsory",
                "tensor": tensor,
                "op": op,
                "compulsory_bytes": nbytes,
                "model_bytes": None if not issued else 0,
            }
        )
    return rows


def summarize_backward(point: Point) -> dict:
    """The model's fields of a backward point's record: what the forward keeps, what the
    backward moves (compulsory and as issued, by kernel and tensor) and its FLOPs."""
    kept = kept_bytes(point)
    issued = as_issued_backward(point)
    return {
        "saved_model_bytes": None if kept is None else sum(kept.values()),
        "saved_model": kept,
        "backward_compulsory_bytes": sum(compulsory_backward(point).values()),
        "backward_model_bytes": None if issued is None else sum(issued.values()),
        "backward_flops": executed_flops_backward(point),
        "backward_convention_flops": convention_flops_backward(point),
        "backward_stages": backward_stages(point),
    }
