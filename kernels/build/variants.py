"""The kernel launches a sweep point makes, planned without running anything.

Meta tensors (shape, dtype and strides, no storage) stand in for the point's inputs, so the
launch descriptions carry the same arguments the real call passes. Triton specializes a
kernel on its arguments (an integer equal to 1 becomes a constant, pointers and integers
divisible by 16 get alignment hints), so these are the variants the GPU would compile.
"""

from __future__ import annotations

import torch

from kernels.impl.triton.launch import Launch
from kernels.spec import FUSED_LAUNCH_CANDIDATES
from kernels.study.point import Point


def meta_qkv(point: Point) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    shape = (point.batch, point.heads, point.tokens, point.head_dim)
    dtype = getattr(torch, point.dtype)
    return tuple(torch.empty(shape, dtype=dtype, device="meta") for _ in range(3))


def point_launches(point: Point) -> list[Launch]:
    """The launches of one call of the point's implementation ([] for the torch paths)."""
    if not point.triton:
        return []
    from kernels.impl.triton import flash, naive

    q, k, v = meta_qkv(point)
    o = torch.empty_like(q)
    bm, bn = point.block_m, point.block_n
    if point.impl == "triton_naive":
        s, p = naive.sp_tensors(q, point.sp_dtype)
        return naive.naive_launches(q, k, v, s, p, o, point.causal, bm, bn, point.max_row_block)
    carry = point.impl == "triton_flash"
    return [flash.attention_fwd_launch(q, k, v, o, point.causal, bm, bn, carry)]


def candidate_launches(point: Point) -> list[Launch]:
    """The fused kernel's launch with each candidate (num_warps, num_stages) of its head dim
    ([] for every other implementation)."""
    if point.impl != "triton_flash":
        return []
    from kernels.impl.triton import flash

    q, k, v = meta_qkv(point)
    o = torch.empty_like(q)
    return [
        flash.attention_fwd_launch(
            q, k, v, o, point.causal, point.block_m, point.block_n, True, warps, stages
        )
        for warps, stages in FUSED_LAUNCH_CANDIDATES[point.head_dim]
    ]
