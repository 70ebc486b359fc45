"""Attention by its definition, in PyTorch: the float64 reference every path is checked
against, the causal mask and the largest score a stored S must hold."""

from __future__ import annotations

import math

import torch


def future_mask(T: int, device: torch.device | str) -> torch.Tensor:
    """True where key j lies in the future of query i (j > i): those scores become −∞."""
    idx = torch.arange(T, device=device)
    return idx[None, :] > idx[:, None]


def reference_float64(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, chunk_rows: int | None = None
) -> torch.Tensor:
    """scores → scale by 1/√d → causal mask with −∞ → row softmax → P·V, all in float64.
    ``chunk_rows`` computes the same thing a block of query rows at a time, so that checking
    a long sequence needs only chunk_rows × T scores in memory at once."""
    q64, k64, v64 = q.double(), k.double(), v.double()
    T = q.shape[-2]
    step = T if chunk_rows is None else chunk_rows
    out = []
    for start in range(0, T, step):
        rows = slice(start, min(T, start + step))
        s = q64[..., rows, :] @ k64.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if causal:
            s = s.masked_fill(future_mask(T, q.device)[rows], float("-inf"))
        out.append(torch.softmax(s, dim=-1) @ v64)
    return out[0] if len(out) == 1 else torch.cat(out, dim=-2)


def largest_product(q: torch.Tensor, k: torch.Tensor, chunk_rows: int | None = None) -> float:
    """max |qᵢ·kⱼ| in float64, before the 1/√d scale: what a stored S must be able to hold
    (scaled or not, depending on where an implementation applies the scale)."""
    k64 = k.double().transpose(-1, -2)
    T = q.shape[-2]
    step = T if chunk_rows is None else chunk_rows
    return max(
        (q[..., start : start + step, :].double() @ k64).abs().max().item() for start in range(0, T, step)
    )


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """The float64 definition, cast back to the input dtype."""
    return reference_float64(q, k, v, causal).to(q.dtype)
