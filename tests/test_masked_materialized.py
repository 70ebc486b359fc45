"""The Triton paths that store S under every mask (Triton's interpreter): exact against the
float64 definition; S (and triton_naive's P) still stored whole, every score, however few the
mask keeps, the hidden ones as −∞ by each row's run of keys (no T×T mask tensor); the P·V
stage reads V only over the key tiles the mask's map visits; their backwards' gradients are
the definition's under every mask."""

from __future__ import annotations

import pytest
import torch
from helpers import max_abs

import kernels
from kernels import masks
from kernels.impl import mode
from kernels.impl.inputs import make_qkv
from kernels.impl.reference import reference_float64
from kernels.masks import tiles
from kernels.measure.traffic import count_traffic

mode.set_interpret(True)


@pytest.mark.parametrize("impl", ["triton_naive", "triton_s_only"])
@pytest.mark.parametrize("text", ["window:5", "documents:9", "documents-full:8", "prefix:13"])
@pytest.mark.parametrize("shape", [(37, 37, 4), (45, 7, 2)], ids=["square", "7 queries grouped"])
def test_s_stays_whole_under_every_mask(impl, text, shape):
    tokens, queries, kv_heads = shape
    q, k, v = make_qkv(1, 4, tokens, 16, torch.float16, "cpu", tokens)
    q, k, v = (
        q[:, :, tokens - queries :].contiguous(),
        k[:, :kv_heads].contiguous(),
        v[:, :kv_heads].contiguous(),
    )
    mask = masks.parse(text)
    expected = reference_float64(q, k, v, causal=False, mask=mask)
    bound = 2 * max_abs(kernels.attention(q, k, v, impl="torch_naive", mask=mask), expected) + 1e-5
    with count_traffic() as counted:
        got = kernels.attention(q, k, v, impl=impl, mask=mask, block_m=16, block_n=16)
    assert torch.isfinite(got).all() and max_abs(got, expected) <= bound
    assert counted.bytes[("scores", "S", "store")] == 4 * queries * tokens * 2  # every score
    stored_p = counted.bytes[("softmax", "P", "store")]
    assert stored_p == (4 * queries * tokens * 2 if impl == "triton_naive" else 0)
    keys = [min(tokens, n + 16) - n for n in range(0, tokens, 16)]
    visited = sum(sum(keys[v.first : v.stop]) for v in tiles.block_map(mask, tokens, 16, 16, queries))
    assert counted.bytes[("pv", "V", "load")] == 4 * visited * 16 * 2


@pytest.mark.parametrize("impl", ["triton_naive", "triton_s_only"])
@pytest.mark.parametrize("text", ["window:5", "documents:5+20+12", "documents-full:8", "prefix:13"])
def test_their_gradients_under_every_mask_are_the_definitions(impl, text):
    """float32, T = 37, 4 query heads sharing 2 K/V heads, blocks (16, 32): dQ, dK, dV
    against float64 autograd (their backwards visit only the tiles the mask's map keeps)."""
    q, k, v = make_qkv(1, 4, 37, 16, torch.float32, "cpu", 3)
    q, k, v = (x.contiguous().requires_grad_() for x in (q, k[:, :2], v[:, :2]))
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(5))
    mask = masks.parse(text)
    kernels.attention(q, k, v, impl=impl, mask=mask, block_m=16, block_n=32).backward(do)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    reference_float64(q64, k64, v64, causal=False, mask=mask).backward(do.double())
    for mine, theirs in zip((q.grad, k.grad, v.grad), (q64.grad, k64.grad, v64.grad), strict=True):
        assert max_abs(mine, theirs) < 1e-5
