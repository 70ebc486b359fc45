"""FlashAttention's `local` cases (tests/test_flash_attn.py: a causal window_size=(left, 0),
seqlen_q against seqlen_k, the queries aligned to the end), scaled to the interpreter: odd
lengths, fewer queries than keys, a window of one key, one inside a tile and one past T. Our
`window:w` is window_size=(w − 1, 0). triton_flash against the float64 definition within
FlashAttention's rule (2 × torch_naive's error + 1e-5), its gradients too where the problem is
square (the backward trains on it)."""

from __future__ import annotations

import pytest
import torch
from helpers import max_abs

import kernels
from kernels import masks
from kernels.impl import mode
from kernels.impl.inputs import make_qkv
from kernels.impl.reference import reference_float64

mode.set_interpret(True)

# (seqlen_q, seqlen_k): FlashAttention's pairs of odd lengths, scaled down
LENGTHS = [(47, 47), (11, 47), (1, 47), (23, 61)]
LEFTS = [0, 8, 32, 100]  # window_size=(left, 0): a key alone, inside a tile, across tiles, past T


@pytest.mark.parametrize("left", LEFTS)
@pytest.mark.parametrize("seqlen_q, seqlen_k", LENGTHS)
def test_a_causal_local_window_is_the_definitions(seqlen_q, seqlen_k, left):
    q, k, v = make_qkv(1, 2, seqlen_k, 32, torch.float16, "cpu", seqlen_q * 101 + left)
    q = q[:, :, seqlen_k - seqlen_q :].contiguous()
    mask = f"window:{left + 1}"
    expected = reference_float64(q, k, v, causal=False, mask=masks.parse(mask))
    naive = kernels.attention(q, k, v, impl="torch_naive", mask=mask)
    got = kernels.attention(q, k, v, impl="triton_flash", mask=mask, block_m=16, block_n=16)
    assert max_abs(got, expected) <= 2 * max_abs(naive, expected) + 1e-5


@pytest.mark.parametrize("left", LEFTS[:3])
def test_its_gradients_under_a_local_window_are_the_definitions(left):
    seqlen = 47
    q, k, v = (x.requires_grad_(True) for x in make_qkv(1, 2, seqlen, 32, torch.float32, "cpu", left))
    do = torch.randn_like(q)
    mask = f"window:{left + 1}"
    wide = [x.detach().double().requires_grad_(True) for x in (q, k, v)]
    reference_float64(*wide, causal=False, mask=masks.parse(mask)).backward(do.double())
    out = kernels.attention(q, k, v, impl="triton_flash", mask=mask, block_m=16, block_n=16)
    out.backward(do)
    for got, want in zip((q.grad, k.grad, v.grad), (x.grad for x in wide), strict=True):
        assert max_abs(got, want) < 1e-4
