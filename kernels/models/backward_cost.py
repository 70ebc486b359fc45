"""What does a backward keep from its forward, move at the least, and compute?

What a path keeps from its forward for the backward (bytes, by tensor), what its backward
must move at the least (compulsory, by tensor), and the FLOPs the field's convention gives a
backward. Pure Python. What each path keeps, the as-issued bytes and the executed FLOPs of its
backward are its own models (kernels.paths.*, registered as ``kept_model``,
``backward_traffic_model`` and ``backward_flops_model``); they are asked for here, by point.
"""

from __future__ import annotations

from kernels import catalog
from kernels.models.cost import flops, score_bytes
from kernels.planning.point import Point
from kernels.spec import ELEMENT_BYTES

FLOAT32_BYTES = ELEMENT_BYTES["float32"]


def kept_inputs(point: Point) -> dict[str, int]:
    """Q, K and V, which every backward keeps, as given: Q with a (query_tokens × d) matrix
    per query head, K and V with a (T × d) matrix per K/V head (kv_heads, not one per query
    head: a path reads the shared head by index)."""
    d, e = point.head_dim, point.e
    kv = point.kv_groups * point.tokens * d * e
    return {"Q": point.groups * point.queries * d * e, "K": kv, "V": kv}


def kept_bytes(point: Point) -> dict[str, int] | None:
    """Bytes each kept tensor holds, by name, from the path's registration (``kept_model``);
    None for a path that gives none."""
    model = catalog.get(point.impl).hook("kept_model")
    return None if model is None else {name: int(n) for name, n in model(point).items()}


def compulsory_backward(point: Point) -> dict[tuple[str, str], int]:
    """Each tensor of the path's backward algorithm moved once, by (tensor, op), named as
    the interpreter's counter names the kernels' arguments. Every path reads Q, K, V and dO
    and writes dQ, dK and dV once. The materialized one (FlashAttention's Algorithm 3) also
    reads the kept P, writes dP and reads it back, writes dS and reads it back: five T×T
    passes. The S-only one reads the kept S once with its rows' M and L, and O once for the
    rows' D = rowsum(dO∘O) it writes and reads back; the fused one the same with O and the
    log-sum-exp, and no T×T tensor at all. Causal or not, a T×T pass counts every element
    (as the forward's compulsory transfers do). Grouped heads: K, V, dK and dV have a matrix
    per K/V head (B·kv_heads·T·d), each dK and dV the sum over its group's query heads; Q,
    dO, dQ, O and the rows' statistics one per query head."""
    G, d, e = point.groups, point.head_dim, point.e
    rows = G * point.queries * d * e
    kv = point.kv_groups * point.tokens * d * e
    moved = {(name, "load"): rows for name in ("Q", "DO")} | {(name, "load"): kv for name in ("K", "V")}
    moved |= {("DQ", "store"): rows} | {(name, "store"): kv for name in ("DK", "DV")}
    tt = score_bytes(point)
    stats = G * point.queries * FLOAT32_BYTES
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
    """FLOPs of the backward as its kernels execute them, from the path's registration
    (``backward_flops_model``); None for a path that gives none, or a shape no backward runs
    at (Point.trains: the models are the square problem's)."""
    model = catalog.get(point.impl).hook("backward_flops_model")
    return None if model is None or not point.trains else int(model(point))


def as_issued_backward(point: Point) -> dict[tuple[str, str, str], int] | None:
    """The backward kernels' own model of what they move, or None where none is given or
    where no backward runs at the point's shape (Point.trains)."""
    model = catalog.get(point.impl).backward_model()
    return (
        None
        if model is None or not point.trains
        else {key: int(nbytes) for key, nbytes in model(point).items()}
    )


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
