"""An independent float64 attention, written without the package, for the tests to trust."""

import math

import torch


def attention_float64(q, k, v, causal):
    q, k, v = (t.to(torch.float64) for t in (q, k, v))
    T, d = q.shape[-2], q.shape[-1]
    scores = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(d)
    if causal:
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, -math.inf)
    weights = torch.exp(scores - scores.amax(-1, keepdim=True))
    weights = weights / weights.sum(-1, keepdim=True)
    return torch.einsum("bhij,bhjd->bhid", weights, v)


def max_abs(a, b):
    return (a.double() - b.double()).abs().max().item()
