"""The kernel launches a sweep point or a validation case makes, planned without running
anything.

Meta tensors (shape, dtype and strides, no storage) stand in for the inputs, so the launch
descriptions carry the same arguments the real call passes. Triton specializes a kernel on
its arguments (an integer equal to 1 becomes a constant, pointers and integers divisible by
16 get alignment hints), so these are the variants the GPU would compile.
"""

from __future__ import annotations

import torch

from kernels import catalog, masks
from kernels.impl.triton.launch import Launch
from kernels.planning.cases import Shape
from kernels.planning.point import Point
from kernels.spec import MAX_ROW_BLOCK


def meta_inputs(
    shape: Shape, dtype: str, query_tokens: int | None = None, kv_heads: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v of the shape's layout (``bthd``: stored (B, T, H, d), viewed (B, H, T, d)); q
    with ``query_tokens`` rows, k and v with ``kv_heads`` heads where given."""
    b, h, t, d = shape.batch, shape.heads, shape.tokens, shape.head_dim
    sizes = [(h, query_tokens or t), (kv_heads or h, t), (kv_heads or h, t)]
    tensors = []
    for heads, tokens in sizes:
        stored = (b, tokens, heads, d) if shape.layout == "bthd" else (b, heads, tokens, d)
        x = torch.empty(stored, dtype=getattr(torch, dtype), device="meta")
        tensors.append(x.transpose(1, 2) if shape.layout == "bthd" else x)
    return tensors[0], tensors[1], tensors[2]


def meta_qkv(point: Point) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    shape = Shape(point.batch, point.heads, point.tokens, point.head_dim)
    return meta_inputs(shape, point.dtype, point.query_tokens, point.kv_heads)


def impl_launches(
    impl: str,
    q,
    k,
    v,
    causal: bool,
    block_m: int,
    block_n: int,
    sp_dtype=None,
    max_row_block=MAX_ROW_BLOCK,
    num_splits=None,
    mask=None,
) -> list[Launch]:
    """The launches of one call of a Triton implementation on these inputs, as its
    registration plans them ([] where it gives no planner: its kernels compile on first call);
    ``mask``: a mask beyond causal, for a path that takes it (its block-sparse variants)."""
    entry = catalog.get(impl)
    planner = entry.planned_launches()
    if planner is None:
        return []
    given = {"sp_dtype": sp_dtype, "max_row_block": max_row_block, "num_splits": num_splits}
    options = {name: value for name, value in given.items() if name in entry.options and value is not None}
    return planner(q, k, v, causal=causal, block_m=block_m, block_n=block_n, **options, **masked(entry, mask))


def masked(entry: catalog.Implementation, mask) -> dict:
    """``mask=`` for a planner, where the mask is beyond causal (a path is planned with it only
    then: causal and full are its ``causal=``, and a path that takes no mask plans none)."""
    return {"mask": mask} if mask is not None and masks.beyond_causal(mask) and entry.takes_masks else {}


def point_launches(point: Point) -> list[Launch]:
    """The launches of one call of the point's implementation ([] for the torch paths, and
    for a path that does not take the point's mask: the point is recorded skipped); a
    backward point's also those of its backward."""
    if not point.triton or catalog.get(point.impl).mask_refusal(point.mask_kind):
        return []
    q, k, v = meta_qkv(point)
    bm, bn = point.block_m, point.block_n
    forward = impl_launches(
        point.impl, q, k, v, point.causal, bm, bn, point.sp_dtype, point.max_row_block, point.num_splits,
        point.mask_kind,
    )  # fmt: skip
    return forward + (backward_launches(point) if point.backward else [])


def impl_backward_launches(
    impl: str,
    q,
    k,
    v,
    causal: bool,
    block_m: int,
    block_n: int,
    sp_dtype=None,
    max_row_block=MAX_ROW_BLOCK,
    mask=None,
) -> list[Launch]:
    """The launches of one backward of a Triton implementation on these inputs, as its
    backward module plans them ([] for a path without a backward module)."""
    entry = catalog.get(impl)
    module = entry.backward_module() if entry.triton else None
    if module is None or not hasattr(module, "planned_backward_launches"):
        return []  # none planned: its kernels compile on first call
    given = {"sp_dtype": sp_dtype, "max_row_block": max_row_block}
    options = {name: value for name, value in given.items() if name in entry.options and value is not None}
    return module.planned_backward_launches(
        q, k, v, causal=causal, block_m=block_m, block_n=block_n, **options, **masked(entry, mask)
    )


def backward_launches(point: Point) -> list[Launch]:
    """The launches of one backward of the point's implementation ([] for the torch paths, and
    for a backward that does not take the point's mask: the point is recorded skipped)."""
    if not point.triton or catalog.get(point.impl).backward_mask_refusal(point.mask_kind):
        return []
    q, k, v = meta_qkv(point)
    bm, bn = point.block_m, point.block_n
    return impl_backward_launches(
        point.impl, q, k, v, point.causal, bm, bn, point.sp_dtype, point.max_row_block, point.mask_kind
    )


def case_launches(
    impl: str, shape: Shape, dtype: str, causal: bool, block_m: int, block_n: int, direction: str = "forward"
) -> list[Launch]:
    """The launches of one validation case of a Triton implementation: its forward, or for
    a backward case the forward that saves and then the backward; q with the shape's query
    rows, k and v with its K/V heads."""
    q, k, v = meta_inputs(shape, dtype, shape.query_tokens, shape.kv_heads)
    launches = impl_launches(impl, q, k, v, causal, block_m, block_n)
    if direction == "backward":
        launches += impl_backward_launches(impl, q, k, v, causal, block_m, block_n)
    return launches


def candidate_launches(point: Point) -> list[Launch]:
    """The point's launch with each candidate (num_warps, num_stages) its registration names
    (``launch_candidates``; [] for a path without them)."""
    entry = catalog.get(point.impl)
    candidates = entry.hook("launch_candidates")
    if candidates is None:
        return []
    q, k, v = meta_qkv(point)
    plan = entry.planned_launches()
    blocks = dict(causal=point.causal, block_m=point.block_m, block_n=point.block_n)
    blocks |= masked(entry, point.mask_kind)
    return [
        launch
        for warps, stages in candidates(point)
        for launch in plan(q, k, v, **blocks, num_warps=warps, num_stages=stages)
    ]
