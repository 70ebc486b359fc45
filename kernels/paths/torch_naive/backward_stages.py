"""The materialized backward stage by stage: dP, dS, dV, dQ and dK each its own call, writing
into tensors allocated once, so each can be timed warm and cold as the forward's stages are
(kernels.measure.stages).

torch_naive's stages are PyTorch operations on its P (the input dtype); triton_naive's are its
backward's five kernels (kernels.paths.triton_naive.backward). Run in order, each stage reads
what the one before wrote; together they compute FlashAttention's standard backward:
dP = dO·Vᵀ, dS = P∘(dP − rowsum(P∘dP))/√d, dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q.

Grouped heads (k and v with fewer heads than q) as torch_naive's forward takes them, never
copying K or V per query head: each product stacks the query heads sharing a K/V head as its
rows (``stacked``: dO, P, dS and Q viewed (B, kv_heads, group·T, ·)), so dP = dO·Vᵀ and
dQ = dS·K read the shared head, and dV = Pᵀ·dO and dK = dSᵀ·Q contract over the stacked rows:
the sum over the group's query heads is the product's own sum, written once per K/V head.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from kernels.impl.autograd import check_backward_queries
from kernels.paths.torch_naive.forward import stacked, torch_naive_parts

BACKWARD_STAGES = ("dp", "ds", "dv", "dq", "dk")  # the order they run in
Stages = list[tuple[str, Callable[[], object]]]
Gradients = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def torch_naive_backward_stages(q, k, v, do, causal: bool, *blocks, **options) -> tuple[Stages, Gradients]:
    """torch_naive's backward as five stages on its P; returns them and (dQ, dK, dV), each
    shaped as its input. dO is scaled by 1/√d once here (a T×d tensor), so that dP comes out
    scaled and dS needs no pass of its own for the scale."""
    check_backward_queries(q, k)
    kv_heads = k.shape[1]
    _, p, _ = torch_naive_parts(q, k, v, causal)
    scaled_do = do / math.sqrt(q.shape[-1])
    dp, ds = torch.empty_like(p), torch.empty_like(p)
    rows = torch.empty(p.shape[:-1] + (1,), dtype=p.dtype, device=p.device)
    # contiguous, so that the stacked views below are views (the products write into them)
    dq, dk, dv = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
    # a K/V head's query heads as one product's rows (views of what is allocated here; a
    # strided dO or q is copied once, here, not in a stage)
    do_rows, q_rows = stacked(do, kv_heads), stacked(q, kv_heads)
    dp_rows, dq_rows = stacked(dp, kv_heads), stacked(dq, kv_heads)
    p_t, ds_rows = stacked(p, kv_heads).transpose(-1, -2), stacked(ds, kv_heads)
    v_t, ds_t = v.transpose(-1, -2), ds_rows.transpose(-1, -2)
    scaled_rows = stacked(scaled_do, kv_heads)

    def softmax_gradient() -> None:
        torch.mul(p, dp, out=ds)
        torch.sum(ds, dim=-1, keepdim=True, out=rows)
        torch.addcmul(ds, p, rows, value=-1, out=ds)  # P∘dP − P∘rowsum = P∘(dP − rowsum)

    stages = {
        "dp": lambda: torch.matmul(scaled_rows, v_t, out=dp_rows),
        "ds": softmax_gradient,
        "dv": lambda: torch.matmul(p_t, do_rows, out=dv),
        "dq": lambda: torch.matmul(ds_rows, k, out=dq_rows),
        "dk": lambda: torch.matmul(ds_t, q_rows, out=dk),
    }
    return [(name, stages[name]) for name in BACKWARD_STAGES], (dq, dk, dv)
