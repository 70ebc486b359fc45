"""torch_naive as a model: each of its operations as it runs in the chain (bytes, products,
exponentials), what PyTorch's autograd keeps of it for the backward, and its backward's
operations and FLOPs. Pure Python: no torch, no triton.

The forward runs the seed's five stages as separate operations on whole (query_tokens × T)
tensors, one per query head: scores (Q·Kᵀ into S), scale (S *= 1/√d in place), mask (S's
hidden entries set to −∞ in place through a boolean (query_tokens × T) mask, under any mask
but full; beyond causal the call first builds that mask from the rows' runs of keys, a few
elementwise passes not modelled here), softmax (S into P, in float32; for a 2-byte
dtype into a float32 matrix first, then cast into P) and pv (P·V into O). Torch multiplies
every tile, whatever the mask keeps. With grouped heads each product stacks a K/V head's query heads as
its rows (kernels.paths.torch_naive.forward), so K and V are read once per K/V head,
B·kv_heads·T·d·e each, while S and P keep a matrix per query head, B·H·query_tokens·T·e.
A decode product (query_tokens = 1, few rows per K/V head) is then a matrix-vector product:
its bytes, not its FLOPs, set its time (kernels.models.expected).

Autograd keeps q and v, a contiguous copy of Kᵀ (the first product keeps its operand), P in
the input dtype (for P·V), the softmax's float32 result (for a 2-byte dtype a second T×T
tensor; for float32 it is P) and, under any mask but full, the boolean mask (measured by
kernels.measure.saved, held against this in the tests).

The backward (kernels.paths.torch_naive.backward_stages): dp (dO·Vᵀ into dP), ds (P∘dP into
dS, its row sums, then dS − P∘rowsum in place: seven T×T passes), dv (Pᵀ·dO), dq (dS·K), dk
(dSᵀ·Q), every product over all T×T elements (masked scores too).
"""

from __future__ import annotations

from kernels import masks
from kernels.models.backward_cost import FLOAT32_BYTES, kept_inputs
from kernels.models.backward_stage_cost import MATERIALIZED_DOES, MATERIALIZED_STEPS
from kernels.models.stage_type import StageCost
from kernels.planning.point import Point


def working_bytes(point: Point) -> int:
    """Beyond S and P at the peak: the softmax's float32 result before its cast back (none
    for float32 input, whose result is P)."""
    return 0 if point.e == 4 else scores(point) * 4


def scores(point: Point) -> int:
    """Elements of S (and of P): B·H·query_tokens·T."""
    return point.groups * point.queries * point.tokens


def operand_bytes(point: Point) -> int:
    """Bytes a product reads or writes besides S and P: a (query_tokens × d) matrix per query
    head (Q, O, dO, dQ) and a (T × d) matrix per K/V head (K, V, dK, dV), each once."""
    d, e = point.head_dim, point.e
    return point.groups * point.queries * d * e + point.kv_groups * point.tokens * d * e


STAGES = ("scores", "scale", "mask", "softmax", "pv")
DOES = {
    "scores": "S = Q·Kᵀ",
    "scale": "S ×= 1/√d, in place",
    "mask": "S = −∞ where the mask hides a key, in place",
    "softmax": "P = softmax(S) by rows, in float32",
    "pv": "O = P·V",
}
IN_PLACE = ("scale", "mask")  # the stages that update S where it lies
MASK_BYTES = masks.DENSE_BYTES  # its boolean mask
DS_PASSES = 7  # mul (P, dP → dS: 3), row sums (dS: 1), addcmul (dS, P → dS: 3)


def stage_names(point: Point) -> tuple[str, ...]:
    return tuple(s for s in STAGES if s != "mask" or masked(point))


def masked(point: Point) -> bool:
    """Whether the call masks S (every mask but full)."""
    return point.mask_kind != masks.from_causal(False)


def stage_costs(point: Point) -> list[StageCost]:
    n, d, e = scores(point), point.head_dim, point.e
    matrix, operands = n * e, operand_bytes(point)  # Q and K, or V and O
    product = 2 * n * d
    wide = n * FLOAT32_BYTES if e != FLOAT32_BYTES else 0  # softmax's float32 result
    # (handoff, other, footprint, flops, exps) per stage
    found = {
        "scores": (matrix, operands, matrix, product, 0),
        "scale": (2 * matrix, 0, matrix, 0, 0),
        "mask": (2 * matrix, n * MASK_BYTES, matrix, 0, 0),
        "softmax": (2 * matrix + 2 * wide, 0, 2 * matrix + wide, 0, n),
        "pv": (matrix, operands, matrix, product, 0),
    }
    return [StageCost(s, DOES[s], *found[s], in_place=s in IN_PLACE) for s in stage_names(point)]


def kept(point: Point) -> dict[str, int]:
    n, e = scores(point), point.e
    found = kept_inputs(point) | {"P": n * e}
    if e != FLOAT32_BYTES:
        found["P float32"] = n * FLOAT32_BYTES
    if masked(point):
        found["mask"] = point.queries * point.tokens * MASK_BYTES
    return found


def backward_flops(point: Point) -> int:
    """Four full T×T·d products: autograd computes the masked scores' gradients too."""
    return 8 * scores(point) * point.head_dim


def backward_stage_costs(point: Point) -> list[StageCost]:
    """dK and dV a matrix per K/V head (each the sum over its group, a product over the
    group's stacked rows), K and V read once per K/V head, as the forward reads them."""
    n, e = scores(point), point.e
    matrix, operands, product = n * e, operand_bytes(point), 2 * n * point.head_dim
    sums = 2 * point.groups * point.queries * e  # dS's row sums written, then read by addcmul
    found = {
        "dp": (matrix, operands, matrix, product),
        "ds": (DS_PASSES * matrix, sums, 3 * matrix, 0),
        "dv": (matrix, operands, matrix, product),
        "dq": (matrix, operands, matrix, product),
        "dk": (matrix, operands, matrix, product),
    }
    return [StageCost(s, MATERIALIZED_DOES[s], *found[s], exps=0) for s in MATERIALIZED_STEPS]
