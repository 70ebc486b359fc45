"""Tile-local softmax is right only when a row fits in one key tile, and its error is the
one the seed predicts: each tile's weights sum to one on their own."""

import math

import pytest
import torch
from helpers import attention_float64, max_abs

import kernels
from kernels.impl.inputs import make_qkv
from kernels.paths.torch_naive.forward import torch_naive


@pytest.mark.parametrize("causal", [False, True])
def test_exact_when_row_fits_one_tile(causal):
    q, k, v = make_qkv(1, 2, 30, 32, torch.float16, "cpu", 11)
    ref = attention_float64(q, k, v, causal)
    bound = 2 * max_abs(torch_naive(q, k, v, causal), ref) + 1e-5
    out = kernels.attention(q, k, v, impl="triton_tile_softmax", causal=causal, block_m=16, block_n=32)
    assert max_abs(out, ref) <= bound


@pytest.mark.parametrize("causal", [False, True])
def test_wrong_when_row_spans_tiles(causal):
    q, k, v = make_qkv(1, 2, 90, 32, torch.float16, "cpu", 12)
    ref = attention_float64(q, k, v, causal)
    bound = 2 * max_abs(torch_naive(q, k, v, causal), ref) + 1e-5
    out = kernels.attention(q, k, v, impl="triton_tile_softmax", causal=causal, block_m=16, block_n=32)
    assert max_abs(out, ref) > 100 * bound


@pytest.mark.parametrize("causal", [False, True])
def test_weights_sum_to_number_of_tiles_seen(causal):
    """With V = 1 the output is each row's total weight: 1 for attention, but for the
    tile-local softmax the number of key tiles holding a visible key."""
    T, block_n = 70, 16
    q, k, _ = make_qkv(1, 1, T, 16, torch.float32, "cpu", 13)
    v = torch.ones_like(q)
    out = kernels.attention(q, k, v, impl="triton_tile_softmax", causal=causal, block_m=16, block_n=block_n)
    rows = torch.arange(T)
    tiles = rows // block_n + 1 if causal else torch.full((T,), math.ceil(T / block_n))
    expected = tiles.to(torch.float32)[None, None, :, None].expand_as(out)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    exact = kernels.attention(q, k, v, impl="triton_flash", causal=causal, block_m=16, block_n=block_n)
    torch.testing.assert_close(exact, torch.ones_like(exact), rtol=1e-5, atol=1e-5)
