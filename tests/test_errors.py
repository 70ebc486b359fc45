"""Bad calls raise ValueError naming the argument and what is allowed."""

import pytest
import torch

import kernels
from kernels.impl.inputs import make_qkv


def qkv(T=8, d=16, dtype=torch.float16):
    return make_qkv(1, 1, T, d, dtype, "cpu", 0)


def call(q, k, v, impl="triton_flash", **kw):
    return kernels.attention(q, k, v, impl=impl, causal=kw.pop("causal", False), **kw)


def test_names():
    """Ours, each registered by its folder in kernels/paths, in the folders' order (a
    plugin's, where one is loaded, follow)."""
    assert kernels.IMPLEMENTATIONS[:13] == (
        "flex",
        "reference",
        "sdpa",
        "sdpa_math",
        "sdpa_flash",
        "sdpa_efficient",
        "sdpa_cudnn",
        "torch_naive",
        "triton_flash",
        "triton_naive",
        "triton_s_only",
        "triton_split_kv",
        "triton_tile_softmax",
    )
    assert kernels.TRITON_IMPLEMENTATIONS[:5] == (
        "triton_flash",
        "triton_naive",
        "triton_s_only",
        "triton_split_kv",
        "triton_tile_softmax",
    )


@pytest.mark.parametrize("impl", kernels.IMPLEMENTATIONS)
@pytest.mark.parametrize("d", [8, 48, 96, 512])
def test_unsupported_head_dim(impl, d):
    with pytest.raises(ValueError, match=r"head dim d=\d+.*allowed values are \(16, 32, 64, 128, 256\)"):
        call(*qkv(d=d), impl=impl)


def test_unknown_impl():
    with pytest.raises(ValueError, match="impl='flash2': allowed values are flex, reference"):
        call(*qkv(), impl="flash2")


def test_mismatched_shapes_and_dtypes():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"v.shape=\(1, 1, 8, 16\) must equal k.shape=\(1, 1, 9, 16\)"):
        call(q, qkv(T=9)[1], v)
    with pytest.raises(ValueError, match=r"k.shape=\(1, 1, 8, 32\) must be \(B, kv_heads, T, d\)"):
        call(q, *qkv(d=32)[1:])
    three = make_qkv(1, 3, 8, 16, torch.float16, "cpu", 0)
    with pytest.raises(ValueError, match="kv_heads dividing q's H=3"):
        call(three[0], *make_qkv(1, 2, 8, 16, torch.float16, "cpu", 0)[1:])
    with pytest.raises(
        ValueError, match=r"causal \(or masked\) with 9 queries \(q.shape\[2\]\) against 8 keys"
    ):
        call(qkv(T=9)[0], k, v, causal=True)
    with pytest.raises(ValueError, match="v.dtype=float32 must equal q.dtype=float16"):
        call(q, k, v.float())
    with pytest.raises(ValueError, match="q must have 4 dimensions"):
        call(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="q.dtype=float64: allowed dtypes are float32, float16, bfloat16"):
        call(q.double(), k.double(), v.double())


@pytest.mark.parametrize("bad", [0, 8, 48, 512, -64, 64.0, True])
def test_bad_blocks(bad):
    with pytest.raises(ValueError, match=r"block_m=.*allowed values are \(16, 32, 64, 128, 256\)"):
        call(*qkv(), block_m=bad)
    with pytest.raises(ValueError, match=r"block_n=.*allowed values"):
        call(*qkv(), block_n=bad)


def test_blocks_only_for_triton():
    with pytest.raises(ValueError, match="block_m/block_n apply to Triton implementations only"):
        call(*qkv(), impl="torch_naive", block_m=32)


def test_unknown_option_and_bad_causal():
    with pytest.raises(ValueError, match="option\\(s\\) sp_dtype not accepted by impl='triton_flash'"):
        call(*qkv(), sp_dtype="float32")
    with pytest.raises(ValueError, match="causal=1: must be True or False"):
        call(*qkv(), causal=1)
    with pytest.raises(ValueError, match="sp_dtype='int8': allowed dtypes"):
        call(*qkv(), impl="triton_naive", sp_dtype="int8")


def test_bad_out_and_backend():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="out must match q"):
        call(q, k, v, out=torch.empty(1, 1, 8, 16))
    with pytest.raises(ValueError, match="backend='fast': allowed values are math, flash"):
        call(q, k, v, impl="sdpa", backend="fast")


def test_empty_sequence():
    with pytest.raises(ValueError, match="B, H and T must each be at least 1"):
        call(*qkv(T=0))


def test_sdpa_backend_missing_on_device():
    q, k, v = qkv(dtype=torch.float32)
    out = kernels.attention(q, k, v, impl="sdpa", causal=True, backend="math")
    assert out.shape == q.shape
    if not torch.cuda.is_available():
        with pytest.raises(
            ValueError, match=r"cudnn backend \(backend='cudnn'\) is not available for float32 on cpu"
        ):
            kernels.attention(q, k, v, impl="sdpa", causal=True, backend="cudnn")


def test_batch_heads_beyond_grid_limit():
    q = torch.randn(1, 1, 1, 16).expand(300, 300, 1, 16)  # a view: no memory for 90,000 heads
    with pytest.raises(ValueError, match=r"B·H=90000 .*at most 65535"):
        kernels.attention(q, q, q, impl="triton_flash", causal=False)


def test_large_batch_heads_run():
    q, k, v = make_qkv(3, 70, 3, 16, torch.float32, "cpu", 8)
    out = kernels.attention(q, k, v, impl="triton_flash", causal=True, block_m=16, block_n=16)
    ref = kernels.attention(q, k, v, impl="reference", causal=True)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_the_tile_local_softmax_refuses_inputs_that_require_gradients():
    q, k, v = qkv()
    k.requires_grad_(True)
    with pytest.raises(ValueError, match=r"k.requires_grad=True: impl='triton_tile_softmax' has no backward"):
        call(q, k, v, impl="triton_tile_softmax")
    with torch.no_grad():  # no graph asked for: answered
        assert call(q, k, v, impl="triton_tile_softmax", block_m=16, block_n=16).grad_fn is None


def test_torch_paths_keep_their_graphs():
    q, k, v = qkv(dtype=torch.float32)
    q.requires_grad_(True)
    for impl in ("torch_naive", "sdpa", "reference"):
        call(q, k, v, impl=impl).sum().backward()
        assert q.grad is not None and torch.isfinite(q.grad).all()
        q.grad = None
