"""What does each stage of a staged forward read, write and compute?

The cost of each stage of a staged forward as it runs in the chain: what the stage reads
and writes, the matrix-product FLOPs it executes and the exponentials it computes. Pure
Python: no torch, no triton.

A path is staged when its registration gives a stage chain (``stages``). Its stages' costs are
its registration's ``stage_model`` where it gives one (torch_naive's five operations, each
Triton path's kernels described in its own words); otherwise one stage per kernel of its
traffic model, costed here from the model's bytes (``kernel_stages``).

Bytes are split into the hand-off (S, P and softmax's float32 matrix: the (query_tokens × T)
tensors, one per query head, that one stage writes and the next reads back, which a cache may
serve while they fit) and the rest (Q, K, V, O and the boolean mask; K and V a matrix per K/V
head). ``footprint_bytes`` is what must stay in cache for the stage's hand-off to be served
there: the distinct S-sized tensors it touches. FLOPs count the
products as executed (the convention of kernels.models.cost.flops).
"""

from __future__ import annotations

from collections.abc import Mapping

from kernels import catalog
from kernels.models.cost import flops, transfers
from kernels.models.predict import PRODUCTS
from kernels.models.stage_type import StageCost
from kernels.planning.point import Point

HANDOFF_TENSORS = ("S", "P")


def staged() -> tuple[str, ...]:
    """The implementations that can be timed stage by stage."""
    return tuple(name for name, entry in catalog.registered().items() if entry.stages is not None)


def kernel_stages(point: Point, does: Mapping[str, str] = {}) -> list[StageCost]:  # noqa: B006
    """One stage per kernel of the traffic model (as issued where the model gives it): the
    hand-off is its S and P bytes, its footprint the distinct T×T tensors it touches, its
    products as kernels.models.predict assigns them, and an exponential for every element of
    S it loads (S is loaded only to turn scores into probabilities). ``does``: each kernel's
    work in words, for the tables and pages."""
    moves = transfers(point)
    stages = tuple(dict.fromkeys(t.kernel for t in moves))
    per_product = flops(point) // 2
    unnamed = [s for s in stages if s not in PRODUCTS]
    matrix = point.groups * point.queries * point.tokens * point.e_sp  # one S: (Tq × T) per query head
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
                does.get(stage, f"{stage} (one kernel)"),
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
    entry = catalog.get(point.impl)
    if entry.stages is None:
        return []
    model = entry.hook("stage_model")
    return list(model(point)) if model is not None else kernel_stages(point)


def forward_stage_names(point: Point) -> tuple[str, ...]:
    """The stages of a forward point in the order they run; () for a path that is not staged."""
    return tuple(stage.stage for stage in forward_stage_costs(point))
