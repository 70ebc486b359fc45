"""torch_naive: standard attention as three PyTorch operations, S and P stored as whole T×T
tensors in the input dtype (the softmax in float32) — the baseline of the validation rule —
and the same operations one by one, for the stage timing."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from kernels.impl.reference import future_mask


def torch_naive_parts(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Standard attention as three stored results: S and P in the input dtype, softmax in
    float32. Returns (S, P, O) so that callers can inspect the intermediates."""
    s = torch.matmul(q, k.transpose(-1, -2)).mul_(1.0 / math.sqrt(q.shape[-1]))
    if causal:
        s.masked_fill_(future_mask(q.shape[-2], q.device), float("-inf"))
    p = torch.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
    o = torch.matmul(p, v)
    return s, p, o


def torch_naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    return torch_naive_parts(q, k, v, causal)[2]


def softmax_wide(s: torch.Tensor, wide: torch.Tensor) -> None:
    """Rows of S into their softmax in float32, into ``wide`` (allocated once). On a CPU,
    torch.softmax(S, dtype=float32) of a 2-byte S first converts S into a float32 copy it
    allocates each call, whose pages are fresh or reused as the allocator's history has it
    (glibc's dynamic mmap threshold); converting into ``wide`` first runs the same passes to
    the same bits in memory kept. A GPU's kernel reads the 2-byte S directly."""
    if s.dtype == wide.dtype or s.device.type != "cpu":
        torch.softmax(s, dim=-1, dtype=torch.float32, out=wide)
        return
    wide.copy_(s)
    torch.softmax(wide, dim=-1, out=wide)


def softmax_into(s: torch.Tensor, wide: torch.Tensor, p: torch.Tensor) -> None:
    """torch_naive's P = softmax(S) in float32 (``wide``), then cast into P where P is not
    float32 (``wide`` is not ``p``)."""
    softmax_wide(s, wide)
    if wide is not p:
        p.copy_(wide)


def torch_naive_stages(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
) -> tuple[list[tuple[str, Callable[[], object]]], torch.Tensor]:
    """torch_naive's operations one by one, each writing into a tensor allocated here once
    (as a GPU's caching allocator keeps them), in the order they run: scores, scale, mask
    (causal only), softmax, pv. Run in order, the stages compute what torch_naive does; each
    reads what the one before wrote. Returns the stages and O."""
    B, H, T, d = q.shape
    s = torch.empty((B, H, T, T), dtype=q.dtype, device=q.device)
    p = torch.empty_like(s)
    wide = p if q.dtype == torch.float32 else torch.empty_like(s, dtype=torch.float32)
    o = torch.empty_like(q)
    k_t, scale = k.transpose(-1, -2), 1.0 / math.sqrt(d)
    mask = future_mask(T, q.device) if causal else None

    stages = [
        ("scores", lambda: torch.matmul(q, k_t, out=s)),
        ("scale", lambda: s.mul_(scale)),
        ("mask", lambda: s.masked_fill_(mask, float("-inf"))),
        ("softmax", lambda: softmax_into(s, wide, p)),
        ("pv", lambda: torch.matmul(p, v, out=o)),
    ]
    return [(name, fn) for name, fn in stages if name != "mask" or causal], o
