"""Attention in PyTorch a chunk of query rows at a time: an attnio plugin.

S and P exist for ``chunk_rows`` query rows at once (chunk × T instead of T × T), so their peak
memory falls by T/chunk; every score is still written and read back, so the traffic of S and P
is the materialized path's. The operations are torch_naive's, only chunked.

Importing this module registers ``torch_chunked_128`` and ``torch_chunked_1024`` in
``kernels.catalog``; ``register(chunk_rows)`` adds other sizes. Like attnio's own wrappers it
imports torch on the first call, not at import, so that planning a study needs no torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from kernels.catalog import implementation

if TYPE_CHECKING:
    import torch

__all__ = ["SHIPPED", "chunked_attention", "register"]

SHIPPED: tuple[int, ...] = (128, 1024)  # the chunk sizes registered at import


def _check_rows(chunk_rows: object) -> int:
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ValueError(f"chunk_rows={chunk_rows!r}: must be a positive integer (query rows per chunk)")
    return chunk_rows


def chunked_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, chunk_rows: int
) -> torch.Tensor:
    """softmax(Q·Kᵀ/√d)·V for q, k, v of shape (B, H, T, d), ``chunk_rows`` query rows at a time.

    Per chunk, as torch_naive does for all rows: S = q_chunk·Kᵀ scaled in place (input dtype),
    the causal mask with −∞ (key j visible to query i iff j ≤ i, i the absolute row), P =
    softmax(S) computed in float32 and stored in the input dtype, O_chunk = P·V."""
    import torch

    _check_rows(chunk_rows)
    T, d = q.shape[-2], q.shape[-1]
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    k_t, scale = k.transpose(-1, -2), 1.0 / math.sqrt(d)
    keys = torch.arange(k.shape[-2], device=q.device) if causal else None
    for start in range(0, T, chunk_rows):
        stop = min(T, start + chunk_rows)
        s = torch.matmul(q[..., start:stop, :], k_t).mul_(scale)
        if causal:
            rows = torch.arange(start, stop, device=q.device)
            s.masked_fill_(keys[None, :] > rows[:, None], float("-inf"))
        p = torch.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
        del s  # only one chunk's S and P alive at a time
        out[..., start:stop, :] = torch.matmul(p, v)
        del p
    return out


def register(chunk_rows: int, name: str | None = None) -> Callable[..., torch.Tensor]:
    """Register chunked attention at this chunk size as ``name`` (default
    ``torch_chunked_<chunk_rows>``) in kernels.catalog; returns the registered callable.
    A name already taken raises kernels.catalog.PluginError."""
    _check_rows(chunk_rows)
    name = name or f"torch_chunked_{chunk_rows}"

    def run(q, k, v, *, causal):
        return chunked_attention(q, k, v, causal=causal, chunk_rows=chunk_rows)

    # a closure, not functools.partial: the catalog keeps the callable's docstring, and a
    # partial's is the partial class's own
    run.__name__ = run.__qualname__ = name
    run.__doc__ = (
        f"torch_naive's operations {chunk_rows} query rows at a time: S and P exist as "
        f"{chunk_rows} × T, each still written and read once."
    )
    implementation(name, stores="SP", stored_rows=chunk_rows, twin="torch_naive")(run)
    return run


for _rows in SHIPPED:
    register(_rows)
del _rows
