"""What every backward test holds a path's gradients against: the validation's own rule
(kernels.measure.validate_backward): the float64 definition's gradients, and each gradient's
error at most twice the error of the same math done by PyTorch's autograd in the input dtype
(torch_naive), plus a small absolute term."""

from __future__ import annotations

import torch

from kernels.impl.inputs import make_qkv
from kernels.measure import validate_backward as rule


def gradients(fn, q, k, v, do) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dQ, dK, dV) of fn(q, k, v) against the upstream gradient ``do``, by autograd."""
    return rule.gradients(fn, q, k, v, do)[1]


def check_gradients(got, q, k, v, do, causal) -> list[str]:
    """Each of dQ, dK, dV that breaks the rule, with its error and bound (empty: all pass)."""
    ref = rule.reference_gradients(q, k, v, do, causal)
    base = rule.baseline_gradients(q, k, v, do, causal)
    for name, g, r in zip(rule.GRADIENT_NAMES, got, ref, strict=True):
        assert g.shape == r.shape and g.dtype == q.dtype, (name, g.shape, g.dtype)
    return [
        f"{name}: error {error:.3g} > bound {bound:.3g}"
        for name, error, bound in rule.gradient_errors(got, ref, base)
        if not error <= bound  # NaN breaks it too
    ]


def case(batch, heads, tokens, head_dim, dtype, seed=0, layout="contiguous"):
    """Fresh random q, k, v (kernels.impl.inputs) and an upstream gradient dO."""
    q, k, v = make_qkv(batch, heads, tokens, head_dim, dtype, "cpu", seed, layout)
    return q, k, v, rule.upstream_gradient(q, seed + 1)
