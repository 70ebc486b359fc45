"""What every backward test holds a path's gradients against: the float64 definition's
gradients, and the rule the forward's validation uses (FlashAttention's): the error of the
path at most twice the error of the same math done by PyTorch's autograd in the input dtype
(torch_naive), plus a small absolute term."""

from __future__ import annotations

import torch

from kernels.impl.inputs import make_qkv
from kernels.impl.reference import reference_float64, torch_naive
from kernels.measure.validate import RTOL_ABS


def gradients(fn, q, k, v, do) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dQ, dK, dV) of fn(q, k, v) against the upstream gradient ``do``, by autograd."""
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
    out = fn(*leaves)
    out.backward(do.to(out.dtype))
    return tuple(t.grad for t in leaves)


def reference_gradients(q, k, v, do, causal):
    """The float64 definition's gradients."""
    wide = (t.double() for t in (q, k, v, do))
    return gradients(lambda a, b, c: reference_float64(a, b, c, causal), *wide)


def baseline_gradients(q, k, v, do, causal):
    """torch_naive's autograd in the input dtype: the rule's baseline."""
    return gradients(lambda a, b, c: torch_naive(a, b, c, causal), q, k, v, do)


def check_gradients(got, q, k, v, do, causal) -> list[str]:
    """Each of dQ, dK, dV that breaks the rule, with its error and bound (empty: all pass)."""
    ref = reference_gradients(q, k, v, do, causal)
    base = baseline_gradients(q, k, v, do, causal)
    broken = []
    for name, g, r, b in zip(("dQ", "dK", "dV"), got, ref, base, strict=True):
        assert g.shape == r.shape and g.dtype == q.dtype, (name, g.shape, g.dtype)
        error = (g.double() - r).abs().max().item()
        bound = 2 * (b.double() - r).abs().max().item() + RTOL_ABS
        if not error <= bound:  # NaN breaks it too
            broken.append(f"{name}: error {error:.3g} > bound {bound:.3g}")
    return broken


def case(batch, heads, tokens, head_dim, dtype, seed=0, layout="contiguous"):
    """Fresh random q, k, v (kernels.impl.inputs) and an upstream gradient dO."""
    q, k, v = make_qkv(batch, heads, tokens, head_dim, dtype, "cpu", seed, layout)
    gen = torch.Generator().manual_seed(seed + 1)
    do = torch.randn(q.shape, generator=gen).to(dtype)
    return q, k, v, do
