"""Pieces the Triton backward passes share: the row term D = rowsum(dO ∘ O) every softmax
backward subtracts (dS = P ∘ (dP − D)), and the shapes of what a backward returns.

D equals rowsum(P ∘ dP) (since O = P·V and dP = dO·Vᵀ); a path that keeps O computes it from
dO and O, T·d per row instead of T, before its main kernels (FlashAttention-2's
preprocessing). triton_naive, which stores dP anyway, takes it from P and dP instead.
"""

from __future__ import annotations

import torch

from kernels.impl.triton.lang import tl, triton
from kernels.impl.triton.launch import Launch

DELTA_ROWS = 64  # query rows per program of the delta kernel


@triton.jit
def delta_kernel(
    O,
    DO,
    Delta,
    s_ob,
    s_oh,
    s_ot,
    s_od,
    s_gb,
    s_gh,
    s_gt,
    s_gd,
    H,
    T,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    """Delta[b, h, i] = Σ_d dO[i, d]·O[i, d] in float32 for BLOCK_M rows; Delta contiguous (B, H, T)."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m[:, None] < T
    o_ptrs = O + b * s_ob + h * s_oh + offs_m[:, None] * s_ot + offs_d[None, :] * s_od
    do_ptrs = DO + b * s_gb + h * s_gh + offs_m[:, None] * s_gt + offs_d[None, :] * s_gd
    o = tl.load(o_ptrs, mask=rows, other=0.0)
    do = tl.load(do_ptrs, mask=rows, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    tl.store(Delta + pid_bh.to(tl.int64) * T + offs_m, delta, mask=offs_m < T)


def delta_tensor(o: torch.Tensor) -> torch.Tensor:
    """An empty float32 (B, H, T) for D, on O's device (meta tensors plan a build)."""
    B, H, T, _ = o.shape
    return torch.empty((B, H, T), dtype=torch.float32, device=o.device)


def delta_launch(o: torch.Tensor, do: torch.Tensor, delta: torch.Tensor) -> Launch:
    B, H, T, d = o.shape
    return Launch(
        delta_kernel,
        (triton.cdiv(T, DELTA_ROWS), B * H),
        (o, do, delta, *o.stride(), *do.stride(), H, T),
        dict(HEAD_DIM=d, BLOCK_M=DELTA_ROWS, num_warps=4),
    )


def empty_gradients(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """dQ, dK, dV: contiguous, in the inputs' dtype, on their device."""
    return tuple(torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
