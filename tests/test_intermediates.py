"""The materialized path really stores S and P, and stores what the definition says."""

import math

import pytest
import torch

import kernels
from kernels.impl.inputs import make_qkv


@pytest.mark.parametrize("sp_dtype", [None, "float32"])
def test_scores_and_probabilities_are_stored(sp_dtype):
    T = 75
    q, k, v = make_qkv(2, 1, T, 32, torch.bfloat16, "cpu", 21)
    s, p, o = kernels.attention(
        q,
        k,
        v,
        impl="triton_naive",
        causal=True,
        block_m=32,
        block_n=16,
        sp_dtype=sp_dtype,
        return_intermediates=True,
    )
    expected_dtype = torch.bfloat16 if sp_dtype is None else torch.float32
    assert s.shape == p.shape == (2, 1, T, T)
    assert s.dtype == p.dtype == expected_dtype
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    assert torch.isneginf(s[..., future]).all()
    assert (p[..., future] == 0).all()
    scores = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(32)
    tol = 2e-2 if sp_dtype is None else 1e-5
    torch.testing.assert_close(s[..., ~future].double(), scores[..., ~future], rtol=tol, atol=tol)
    torch.testing.assert_close(
        p.double().sum(-1), torch.ones(2, 1, T, dtype=torch.float64), rtol=2e-2, atol=2e-2
    )


def test_long_rows_take_two_passes_and_agree():
    """Rows longer than the softmax kernel's block are normalized in two passes."""
    q, k, v = make_qkv(1, 2, 100, 16, torch.float32, "cpu", 22)
    one = kernels.attention(q, k, v, impl="triton_naive", causal=False, return_intermediates=True)
    two = kernels.attention(
        q, k, v, impl="triton_naive", causal=False, max_row_block=16, return_intermediates=True
    )
    torch.testing.assert_close(two[1], one[1], rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(two[2], one[2], rtol=1e-6, atol=1e-6)
