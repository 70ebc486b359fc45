"""Attention by its definition, in PyTorch: the float64 reference every path is checked
against, a mask's element predicate as a dense tensor, and the largest score a stored S must
hold."""

from __future__ import annotations

import math

import torch

from kernels import masks


def visible(
    mask: masks.Mask,
    T: int,
    device: torch.device | str,
    queries: int | None = None,
    rows: slice = slice(None),
) -> torch.Tensor:
    """The mask's element predicate as a (queries, T) boolean tensor, True where query row i
    (at position i + T − queries: the queries are the last positions) sees key j; ``rows``:
    those rows only. Built from the mask's runs of keys, a few elementwise operations."""
    queries = T if queries is None else queries
    positions = torch.arange(queries, device=device)[rows] + (T - queries)
    lo, hi = mask.bounds(positions[:, None], T)
    keys = torch.arange(T, device=device)[None, :]
    return (keys >= lo) & (keys < hi)


def future_mask(T: int, device: torch.device | str, queries: int | None = None) -> torch.Tensor:
    """True where key j lies in the future of query i, the queries being the last ``queries``
    (default T) positions of the T: j > i + T − queries. Those scores become −∞. The causal
    mask's complement (tests/test_masks.py holds the two equal) as one comparison, since
    torch_naive builds it inside its timed call."""
    queries = T if queries is None else queries
    rows = torch.arange(queries, device=device) + (T - queries)
    return torch.arange(T, device=device)[None, :] > rows[:, None]


def hidden_keys(
    mask: masks.Mask, T: int, device: torch.device | str, queries: int | None = None
) -> torch.Tensor | None:
    """True where the mask hides a key from a query, as PyTorch code builds a dense mask;
    None where it hides none. The causal one as future_mask builds it."""
    if mask == masks.from_causal(False):
        return None
    if mask == masks.from_causal(True):
        return future_mask(T, device, queries)
    return ~visible(mask, T, device, queries)


def per_query_head(kv: torch.Tensor, heads: int) -> torch.Tensor:
    """K or V with a head per query head: each K/V head repeated for the group sharing it (the
    definition's own view of grouped heads; the kernels index the shared head instead)."""
    return kv if kv.shape[1] == heads else kv.repeat_interleave(heads // kv.shape[1], dim=1)


def reference_float64(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool | masks.Mask,
    chunk_rows: int | None = None,
    mask: masks.Mask | None = None,
) -> torch.Tensor:
    """scores → scale by 1/√d → mask with −∞ → row softmax → P·V, all in float64. The mask is
    ``mask`` where given, else ``causal``: True or False (causal or none), or a mask itself.
    ``chunk_rows`` computes the same thing a block of query rows at a time, so that checking a
    long sequence needs only chunk_rows × T scores in memory at once. q may have fewer rows
    (query_tokens) and k, v fewer heads (kv_heads) than the square problem."""
    heads, Tq, T = q.shape[1], q.shape[-2], k.shape[-2]
    q64 = q.double()
    k64, v64 = (per_query_head(x, heads).double() for x in (k, v))
    step = Tq if chunk_rows is None else chunk_rows
    mask = masks.as_mask(causal) if mask is None else mask
    out = []
    for start in range(0, Tq, step):
        rows = slice(start, min(Tq, start + step))
        s = q64[..., rows, :] @ k64.transpose(-1, -2) / math.sqrt(q.shape[-1])
        hidden = ~visible(mask, T, q.device, Tq, rows)
        if bool(hidden.any()):
            s = s.masked_fill(hidden, float("-inf"))
        out.append(torch.softmax(s, dim=-1) @ v64)
    return out[0] if len(out) == 1 else torch.cat(out, dim=-2)


def largest_product(q: torch.Tensor, k: torch.Tensor, chunk_rows: int | None = None) -> float:
    """max |qᵢ·kⱼ| in float64, before the 1/√d scale: what a stored S must be able to hold
    (scaled or not, depending on where an implementation applies the scale)."""
    k64 = per_query_head(k, q.shape[1]).double().transpose(-1, -2)
    Tq = q.shape[-2]
    step = Tq if chunk_rows is None else chunk_rows
    return max(
        (q[..., start : start + step, :].double() @ k64).abs().max().item() for start in range(0, Tq, step)
    )


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool | masks.Mask,
    mask: masks.Mask | None = None,
) -> torch.Tensor:
    """The float64 definition, cast back to the input dtype."""
    return reference_float64(q, k, v, causal, mask=mask).to(q.dtype)
