"""The materialized backward stage by stage: dP, dS, dV, dQ and dK each its own call, writing
into tensors allocated once, so each can be timed warm and cold as the forward's stages are
(kernels.measure.stages).

torch_naive's stages are PyTorch operations on its P (the input dtype); triton_naive's are its
backward's five kernels (kernels.paths.triton_naive.backward). Run in order, each stage reads
what the one before wrote; together they compute FlashAttention's standard backward:
dP = dO·Vᵀ, dS = P∘(dP − rowsum(P∘dP))/√d, dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from kernels.paths.torch_naive.forward import torch_naive_parts

BACKWARD_STAGES = ("dp", "ds", "dv", "dq", "dk")  # the order they run in
Stages = list[tuple[str, Callable[[], object]]]
Gradients = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def torch_naive_backward_stages(q, k, v, do, causal: bool, *blocks, **options) -> tuple[Stages, Gradients]:
    """torch_naive's backward as five stages on its P; returns them and (dQ, dK, dV). dO is
    scaled by 1/√d once here (a T×d tensor), so that dP comes out scaled and dS needs no
    pass of its own for the scale."""
    _, p, _ = torch_naive_parts(q, k, v, causal)
    scaled_do = do / math.sqrt(q.shape[-1])
    dp, ds = torch.empty_like(p), torch.empty_like(p)
    rows = torch.empty(p.shape[:-1] + (1,), dtype=p.dtype, device=p.device)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    v_t, p_t, ds_t = v.transpose(-1, -2), p.transpose(-1, -2), ds.transpose(-1, -2)

    def softmax_gradient() -> None:
        torch.mul(p, dp, out=ds)
        torch.sum(ds, dim=-1, keepdim=True, out=rows)
        torch.addcmul(ds, p, rows, value=-1, out=ds)  # P∘dP − P∘rowsum = P∘(dP − rowsum)

    stages = {
        "dp": lambda: torch.matmul(scaled_do, v_t, out=dp),
        "ds": softmax_gradient,
        "dv": lambda: torch.matmul(p_t, do, out=dv),
        "dq": lambda: torch.matmul(ds, k, out=dq),
        "dk": lambda: torch.matmul(ds_t, q, out=dk),
    }
    return [(name, stages[name]) for name in BACKWARD_STAGES], (dq, dk, dv)
