"""Every implementation against an independent float64 attention, with FlashAttention's
bound: error ≤ 2·(torch_naive's error) + 1e-5, on fresh random inputs."""

import zlib

import pytest
import torch
from helpers import attention_float64, max_abs

import kernels
from kernels import catalog
from kernels.impl.inputs import make_qkv
from kernels.paths.sdpa.forward import unavailable
from kernels.paths.torch_naive.forward import torch_naive
from kernels.spec import HEAD_DIMS, SDPA_IMPLEMENTATIONS

# sdpa_math and sdpa_flash: the forced SDPA backends every machine has (a CPU too)
EXACT_IMPLS = ("reference", "sdpa", "sdpa_math", "sdpa_flash", "triton_naive", "triton_flash")
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check(impl, q, k, v, causal, **blocks):
    ref = attention_float64(q, k, v, causal)
    bound = 2 * max_abs(torch_naive(q, k, v, causal), ref) + 1e-5
    out = kernels.attention(q, k, v, impl=impl, causal=causal, **blocks)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert torch.isfinite(out).all()
    error = max_abs(out, ref)
    assert error <= bound, f"{impl}: error {error:.3e} > bound {bound:.3e}"


@pytest.mark.parametrize("impl", EXACT_IMPLS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_matches_reference(impl, dtype, causal):
    seed = zlib.crc32(f"{impl}{dtype}{causal}".encode())
    q, k, v = make_qkv(1, 2, 45, 32, dtype, "cpu", seed)  # batches: the out buffer's test
    blocks = {"block_m": 16, "block_n": 32} if impl.startswith("triton") else {}
    check(impl, q, k, v, causal, **blocks)


@pytest.mark.parametrize("impl", ("triton_naive", "triton_flash"))
@pytest.mark.parametrize("tokens", [1, 2, 17, 35, 97])
def test_lengths_not_multiple_of_block(impl, tokens):
    q, k, v = make_qkv(1, 2, tokens, 16, torch.float16, "cpu", 100 + tokens)
    check(impl, q, k, v, True, block_m=32, block_n=16)


@pytest.mark.parametrize("impl", ("triton_naive", "triton_flash"))
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_every_head_dim(impl, head_dim):
    q, k, v = make_qkv(1, 1, 40, head_dim, torch.bfloat16, "cpu", 7 * head_dim)
    check(impl, q, k, v, False, block_m=16, block_n=16)


@pytest.mark.parametrize("impl", ("triton_naive", "triton_flash"))
@pytest.mark.parametrize("blocks", [(16, 64), (64, 16), (128, 32)])
def test_block_shapes(impl, blocks):
    q, k, v = make_qkv(1, 1, 150, 32, torch.float32, "cpu", sum(blocks))
    check(impl, q, k, v, True, block_m=blocks[0], block_n=blocks[1])


@pytest.mark.parametrize("impl", ("triton_naive", "triton_flash"))
def test_strided_layouts(impl):
    q, k, v = make_qkv(2, 2, 33, 16, torch.float16, "cpu", 5, layout="bthd")
    assert not q.is_contiguous()
    check(impl, q, k, v, True, block_m=16, block_n=16)
    # every other element of a wider last dimension: a non-unit innermost stride
    wide = torch.randn(1, 2, 29, 64, generator=torch.Generator().manual_seed(9))
    q, k, v = wide[..., ::4], wide[..., 1::4].flip(2), wide[..., 2::4]
    check(impl, q, k, v, False, block_m=16, block_n=16)


def test_out_buffer_is_written_everywhere():
    q, k, v = make_qkv(2, 2, 40, 16, torch.float16, "cpu", 3)  # 2 x 2 tiles, the last ones cut
    for impl in kernels.IMPLEMENTATIONS:
        backend = SDPA_IMPLEMENTATIONS.get(impl)
        if backend and unavailable(backend, q.dtype, "cpu", 16, True):
            continue  # a forced SDPA backend this machine lacks (a CPU has math and flash)
        if catalog.get(impl).compiles:
            # FlexAttention: torch 2.13's CPU kernel is wrong at this shape (T = 40, d = 16:
            # NaN or errors of 0.4 to 2.5, changing from run to run); its out= is the
            # registry's, as every PyTorch path's, and tests/test_flex.py checks its output
            continue
        out = torch.full_like(q, float("nan"))
        blocks = {"block_m": 32, "block_n": 32} if impl.startswith("triton") else {}
        result = kernels.attention(q, k, v, impl=impl, causal=True, out=out, **blocks)
        assert result.data_ptr() == out.data_ptr()
        assert not torch.isnan(out).any(), impl


def test_fused_launch_options_reach_the_kernel():
    """num_warps and num_stages are launch options of the fused kernel only; the interpreter
    runs one program at a time, so the result is the same with any of them."""
    q, k, v = make_qkv(1, 2, 70, 32, torch.float16, "cpu", 4)
    default = kernels.attention(q, k, v, impl="triton_flash", causal=True, block_m=32, block_n=16)
    tuned = kernels.attention(
        q, k, v, impl="triton_flash", causal=True, block_m=32, block_n=16, num_warps=8, num_stages=2
    )
    assert torch.equal(default, tuned)
    with pytest.raises(ValueError, match="option\\(s\\) num_warps not accepted by impl='triton_naive'"):
        kernels.attention(q, k, v, impl="triton_naive", causal=True, num_warps=8)
