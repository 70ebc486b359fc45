"""The cost of each stage of a materialized path as it runs in the chain: what the stage
reads and writes, the matrix-product FLOPs it executes and the exponentials it computes.
Pure Python: no torch, no triton.

torch_naive runs the seed's five stages as separate operations on whole T×T tensors: scores
(Q·Kᵀ into S), scale (S *= 1/√d in place), mask (S's future entries set to −∞ in place, when
causal), softmax (S into P, in float32; for a 2-byte dtype into a float32 matrix first, then
cast into P) and pv (P·V into O). triton_naive runs three kernels: scores (with the scale and
the mask inside), softmax and pv (kernels.impl.triton.naive); triton_s_only three too: scores,
stats (each row's max and sum, from S) and pv (S streamed again into P·V). A Triton
implementation whose registration gives a stage chain has one stage per kernel of its traffic
model, costed from the model's bytes.

Bytes are split into the hand-off (S, P and softmax's float32 matrix: the T×T tensors one
stage writes and the next reads back, which a cache may serve while they fit) and the rest
(Q, K, V, O and the boolean mask). ``footprint_bytes`` is what must stay in cache for the
stage's hand-off to be served there: the distinct T×T tensors it touches. FLOPs count the
products as executed: torch multiplies every tile, causal or not; our scores and P·V kernels
skip the tiles wholly in the future (the convention of kernels.study.cost.flops).
"""

from __future__ import annotations

from kernels import catalog
from kernels.study.cost import flops, transfers
from kernels.study.point import Point
from kernels.study.predict import PRODUCTS
from kernels.study.stage_type import StageCost

TORCH_STAGES = ("scores", "scale", "mask", "softmax", "pv")
# What each stage does, for tables and pages
DOES: dict[tuple[str, str], str] = {
    ("torch_naive", "scores"): "S = Q·Kᵀ",
    ("torch_naive", "scale"): "S ×= 1/√d, in place",
    ("torch_naive", "mask"): "S[j > i] = −∞, in place",
    ("torch_naive", "softmax"): "P = softmax(S) by rows, in float32",
    ("torch_naive", "pv"): "O = P·V",
    ("triton_naive", "scores"): "S = Q·Kᵀ/√d, future tiles −∞ (one kernel)",
    ("triton_naive", "softmax"): "P = softmax(S) by rows (one kernel)",
    ("triton_naive", "pv"): "O = P·V (one kernel)",
    ("triton_s_only", "scores"): "S = Q·Kᵀ/√d, future tiles −∞ (one kernel)",
    ("triton_s_only", "stats"): "each row's max and sum of exp, from S (one kernel)",
    ("triton_s_only", "pv"): "O = softmax(S)·V, S read again, P in registers (one kernel)",
}
HANDOFF_TENSORS = ("S", "P")
IN_PLACE = ("scale", "mask")  # torch_naive's stages that update S where it lies
FLOAT32_BYTES = 4
MASK_BYTES = 1  # torch.bool


def forward_stage_names(point: Point) -> tuple[str, ...]:
    """The stages of a forward point in the order they run; () for a path that is not staged
    (its registration gives no stage chain)."""
    if catalog.get(point.impl).stages is None:
        return ()
    if point.impl == "torch_naive":
        return tuple(s for s in TORCH_STAGES if s != "mask" or point.causal)
    return tuple(dict.fromkeys(t.kernel for t in transfers(point)))


def staged() -> tuple[str, ...]:
    """The implementations that can be timed stage by stage."""
    return tuple(name for name, entry in catalog.registered().items() if entry.stages is not None)


def _torch_stages(point: Point) -> list[StageCost]:
    G, T, d, e = point.groups, point.tokens, point.head_dim, point.e
    matrix, qkvo = G * T * T * e, G * T * d * e
    product = 2 * G * T * T * d
    wide = G * T * T * FLOAT32_BYTES if e != FLOAT32_BYTES else 0  # softmax's float32 result
    # (handoff, other, footprint, flops, exps) per stage
    found = {
        "scores": (matrix, 2 * qkvo, matrix, product, 0),
        "scale": (2 * matrix, 0, matrix, 0, 0),
        "mask": (2 * matrix, G * T * T * MASK_BYTES, matrix, 0, 0),
        "softmax": (2 * matrix + 2 * wide, 0, 2 * matrix + wide, 0, G * T * T),
        "pv": (matrix, 2 * qkvo, matrix, product, 0),
    }
    return [
        StageCost(s, DOES[("torch_naive", s)], *found[s], in_place=s in IN_PLACE)
        for s in forward_stage_names(point)
    ]


def _kernel_stages(point: Point) -> list[StageCost]:
    """One stage per kernel of the traffic model (as issued where the model gives it): the
    hand-off is its S and P bytes, its footprint the distinct T×T tensors it touches, its
    products as kernels.study.predict assigns them, and an exponential for every element of
    S it loads (S is loaded only to turn scores into probabilities)."""
    moves = transfers(point)
    stages = forward_stage_names(point)
    per_product = flops(point) // 2
    unnamed = [s for s in stages if s not in PRODUCTS]
    matrix = point.groups * point.tokens**2 * point.e_sp
    found = []
    for stage in stages:
        mine = [t for t in moves if t.kernel == stage]
        moved = {id(t): t.compulsory if t.as_issued is None else t.as_issued for t in mine}
        handoff = sum(moved[id(t)] for t in mine if t.tensor in HANDOFF_TENSORS)
        loaded_s = sum(moved[id(t)] for t in mine if t.tensor == "S" and t.op == "load")
        work = per_product * PRODUCTS[stage] if stage in PRODUCTS else 2 * per_product // len(unnamed)
        found.append(
            StageCost(
                stage,
                DOES.get((point.impl, stage), f"{stage} (one kernel)"),
                handoff,
                sum(moved[id(t)] for t in mine) - handoff,
                matrix * len({t.tensor for t in mine if t.tensor in HANDOFF_TENSORS}),
                work,
                loaded_s // point.e_sp,
            )
        )
    return found


def forward_stage_costs(point: Point) -> list[StageCost]:
    """Each stage of a forward point in the order it runs (empty for a path that is not
    staged)."""
    if not forward_stage_names(point):
        return []
    if point.impl == "torch_naive":
        return _torch_stages(point)
    return _kernel_stages(point)
