"""Gradients through a Triton implementation: one autograd Function for every path that
registers a backward module (kernels.catalog: ``backward="package.module"``).

The module keeps the path's own choice of what lives from the forward to the backward —
triton_naive P, triton_s_only S and the rows' statistics, triton_flash O and the
log-sum-exp — and autograd keeps it with q, k and v through ``ctx.save_for_backward``, so
that ``torch.autograd.graph.saved_tensors_hooks`` sees every byte the path keeps
(kernels.measure.saved). The module's contract:

- ``SAVED``: the names of what it keeps, in order;
- ``forward_saving(q, k, v, causal, block_m, block_n, **options) -> (O, saved)``;
- ``backward(dO, q, k, v, saved, causal, block_m, block_n, **options) -> (dQ, dK, dV)``
  (a PyTorch path, not a Triton one, gets ``block_m = block_n = None`` in both);
- ``planned_backward_launches(q, k, v, *, causal, block_m, block_n, **options)`` (optional): the
  backward's launches on meta tensors, for the build stage.

Shapes pass through as given: k and v may have fewer heads than q (grouped heads), and the
backward returns dK and dV with k's and v's shapes, each K/V head's gradient the sum over the
query heads sharing it. A backward has as many queries as keys: with fewer (query_tokens, an
inference shape) a graph is refused when the forward builds it (``check_backward_queries``).
"""

from __future__ import annotations

from types import ModuleType

import torch


def check_backward_queries(q: torch.Tensor, k: torch.Tensor) -> None:
    """A backward needs the square problem in its rows: q's query_tokens equal to k's T (the
    Triton backwards' kernels walk T query rows against T keys)."""
    if q.shape[2] != k.shape[2]:
        raise ValueError(
            f"query_tokens={q.shape[2]} (q.shape={tuple(q.shape)}) with tokens={k.shape[2]} keys: a "
            "backward needs as many queries as keys (query_tokens = T); fewer queries are an "
            "inference shape, forward only"
        )


class SavedAttention(torch.autograd.Function):
    """O from the path's forward_saving; dQ, dK, dV from its backward on what it saved."""

    @staticmethod
    def forward(ctx, q, k, v, path: ModuleType, causal: bool, block_m: int, block_n: int, options: dict):
        check_backward_queries(q, k)
        o, saved = path.forward_saving(q, k, v, causal, block_m, block_n, **options)
        ctx.save_for_backward(q, k, v, *saved)
        ctx.path, ctx.call = path, (causal, block_m, block_n, options)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, *saved = ctx.saved_tensors
        causal, block_m, block_n, options = ctx.call
        dq, dk, dv = ctx.path.backward(do, q, k, v, tuple(saved), causal, block_m, block_n, **options)
        return dq, dk, dv, None, None, None, None, None


def wants_gradient(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether this call builds a graph: gradients enabled and an input that requires one."""
    return torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))


def differentiable(path: ModuleType, q, k, v, causal: bool, block_m: int, block_n: int, options: dict):
    """O with a graph whose backward is the path's own."""
    return SavedAttention.apply(q, k, v, path, causal, block_m, block_n, options)
