"""torch_naive: standard attention as three PyTorch operations, S and P stored as whole
(query_tokens × T) tensors in the input dtype (the softmax in float32) — the baseline of the
validation rule — and the same operations one by one, for the stage timing.

Grouped heads (k and v with fewer heads than q) are never copied per query head: the query
heads sharing a K/V head are stacked as the rows of one product, q (B, H, Tq, d) viewed as
(B, kv_heads, group·Tq, d), multiplied by that head's Kᵀ (and P likewise by its V). S keeps
the bytes of (B, H, Tq, T) and is viewed so; the causal mask (aligned to the end of the keys,
kernels.impl.reference.future_mask), or any other as a dense boolean tensor, broadcasts over it."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from kernels import masks
from kernels.impl.reference import future_mask, hidden_keys


def stacked(x: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """(B, H, rows, n) as (B, kv_heads, group·rows, n): each K/V head's query heads stacked as
    one product's rows. A view where x's layout allows (always for a tensor allocated here,
    and for q with one query row); otherwise a copy of x, the size of Q, never of K or V."""
    B, H, rows, n = x.shape
    return x.reshape(B, kv_heads, H // kv_heads * rows, n)


def torch_naive_parts(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool | masks.Mask,
    mask: masks.Mask | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Standard attention as three stored results: S and P in the input dtype, softmax in
    float32. Returns (S, P, O), each with a row block per query head, (B, H, Tq, ·), so that
    callers can inspect the intermediates. ``mask``: any mask, built dense (else ``causal``:
    True or False, or a mask itself)."""
    kv_heads, T = k.shape[1], k.shape[-2]
    s = torch.matmul(stacked(q, kv_heads), k.transpose(-1, -2)).mul_(1.0 / math.sqrt(q.shape[-1]))
    s = s.view(*q.shape[:-1], T)
    mask_scores(s, masks.as_mask(causal) if mask is None else mask, q.shape[-2])
    p = torch.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
    o = torch.matmul(stacked(p, kv_heads), v).view(q.shape)
    return s, p, o


def mask_scores(s: torch.Tensor, mask: masks.Mask, queries: int) -> None:
    """−∞ into S where the mask hides a key; the dense mask lives only as long as this call,
    so it is gone before P is allocated."""
    hidden = hidden_keys(mask, s.shape[-1], s.device, queries)
    if hidden is not None:
        s.masked_fill_(hidden, float("-inf"))


def torch_naive(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool | masks.Mask,
    mask: masks.Mask | None = None,
) -> torch.Tensor:
    return torch_naive_parts(q, k, v, causal, mask)[2]


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
    reads what the one before wrote. Grouped heads as torch_naive stacks them: S, P and O are
    allocated (B, H, Tq, ·) and the products write their (B, kv_heads, group·Tq, ·) views.
    Returns the stages and O."""
    B, H, Tq, d = q.shape
    kv_heads, T = k.shape[1], k.shape[-2]
    s = torch.empty((B, H, Tq, T), dtype=q.dtype, device=q.device)
    p = torch.empty_like(s)
    wide = p if q.dtype == torch.float32 else torch.empty_like(s, dtype=torch.float32)
    o = torch.empty((B, H, Tq, d), dtype=q.dtype, device=q.device)
    rows, k_t, scale = stacked(q, kv_heads), k.transpose(-1, -2), 1.0 / math.sqrt(d)
    s_rows, p_rows, o_rows = (stacked(x, kv_heads) for x in (s, p, o))
    mask = future_mask(T, q.device, Tq) if causal else None

    stages = [
        ("scores", lambda: torch.matmul(rows, k_t, out=s_rows)),
        ("scale", lambda: s.mul_(scale)),
        ("mask", lambda: s.masked_fill_(mask, float("-inf"))),
        ("softmax", lambda: softmax_into(s, wide, p)),
        ("pv", lambda: torch.matmul(p_rows, v, out=o_rows)),
    ]
    return [(name, fn) for name, fn in stages if name != "mask" or causal], o
