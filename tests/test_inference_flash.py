"""triton_flash's forward at inference shapes: fewer queries than keys (Tq, causal aligned to
the end) and grouped K/V heads (Hkv < H, read by index). Each call is checked twice at once:
O against the float64 definition (FlashAttention's bound), and the bytes the interpreter
counts against the as-issued model to the byte — equal bytes of K and V mean the kernel
visits exactly the key tiles the model's block walk (kernels.models.cost.walk_of) says."""

import math

import pytest
import torch

import kernels
from kernels.impl.inputs import make_qkv
from kernels.impl.reference import future_mask, per_query_head, reference_float64
from kernels.measure.saved import saved_during
from kernels.measure.traffic import count_traffic
from kernels.models.cost import transfers
from kernels.paths.triton_flash.forward import attention_fwd_launch, planned_launches
from kernels.paths.triton_flash.model import kept
from kernels.planning.point import Point

H, D = 4, 16

CASES = [
    # batch, Tq, T, kv_heads, causal, (block_m, block_n), layout; H = 4, float16
    (1, 1, 37, 1, True, (16, 32), "contiguous"),  # decode, multi-query
    (1, 7, 37, 2, True, (32, 16), "contiguous"),  # the diagonal crosses two key tiles
    (2, 7, 129, 4, True, (64, 64), "contiguous"),  # a K/V head per query head
    (1, 1, 129, 2, False, (64, 64), "contiguous"),
    (1, 7, 129, 1, False, (16, 32), "contiguous"),
    (1, 37, 129, 2, True, (16, 32), "contiguous"),  # three query blocks, the last one cut
    (1, 37, 37, 1, True, (32, 16), "contiguous"),  # square queries, grouped heads
    (1, 1, 7, 2, True, (16, 32), "contiguous"),  # T smaller than one block
    (1, 7, 13, 1, True, (64, 64), "contiguous"),
    (2, 7, 37, 2, True, (32, 16), "bthd"),  # strided inputs
]
# batch, heads, Tq, T, kv_heads, causal, blocks, dtype: 2 K/V heads of 8, the other dtypes
OTHER = [
    (1, 8, 7, 77, 2, True, (16, 32), "bfloat16"),
    (1, 8, 1, 45, 2, False, (32, 16), "float32"),
]


def naive_error(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, ref: torch.Tensor) -> float:
    """The error of standard attention in the input dtype (softmax in float32): the house
    bound is twice it, plus 1e-5."""
    k, v = per_query_head(k, q.shape[1]), per_query_head(v, q.shape[1])
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(future_mask(k.shape[-2], q.device, q.shape[-2]), float("-inf"))
    o = torch.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype) @ v
    return (o.double() - ref).abs().max().item()


def point(batch, Tq, T, kv_heads, causal, blocks, dtype="float16", heads=H) -> Point:
    return Point(
        "triton_flash", batch, heads, T, D, dtype, causal, *blocks, query_tokens=Tq, kv_heads=kv_heads
    )


def check_case(batch, heads, Tq, T, kv_heads, causal, blocks, layout, dtype) -> None:
    """O within the house bound of the float64 definition; bytes counted = the model's."""
    q, k, v = make_qkv(
        batch,
        heads,
        T,
        D,
        getattr(torch, dtype),
        "cpu",
        31 * T + Tq,
        layout,
        query_tokens=Tq,
        kv_heads=kv_heads,
    )
    assert k.shape == (batch, kv_heads, T, D) and q.shape == (batch, heads, Tq, D)
    with count_traffic() as counter:
        out = kernels.attention(
            q, k, v, impl="triton_flash", causal=causal, block_m=blocks[0], block_n=blocks[1]
        )
    ref = reference_float64(q, k, v, causal)
    error = (out.double() - ref).abs().max().item()
    assert out.shape == q.shape and out.dtype == q.dtype and torch.isfinite(out).all()
    assert error <= 2 * naive_error(q, k, v, causal, ref) + 1e-5, error
    modelled = point(batch, Tq, T, kv_heads, causal, blocks, dtype, heads)
    assert counter.by_stage() == {(t.kernel, t.tensor, t.op): t.as_issued for t in transfers(modelled)}
    assert counter.launches == ["attention_fwd"]


@pytest.mark.parametrize("batch, Tq, T, kv_heads, causal, blocks, layout", CASES)
def test_exact_and_counted_as_modelled(batch, Tq, T, kv_heads, causal, blocks, layout):
    check_case(batch, H, Tq, T, kv_heads, causal, blocks, layout, "float16")


@pytest.mark.parametrize("batch, heads, Tq, T, kv_heads, causal, blocks, dtype", OTHER)
def test_other_dtypes_and_groups(batch, heads, Tq, T, kv_heads, causal, blocks, dtype):
    check_case(batch, heads, Tq, T, kv_heads, causal, blocks, "contiguous", dtype)


def test_extreme_scores_stay_finite():
    """q = k = 61440 in float16: every score near 1.5e10, far past a 2-byte S; the fused path
    holds them in float32 registers and stays finite (and exact: uniform rows of V)."""
    q, k, v = make_qkv(1, H, 37, D, torch.float16, "cpu", 5, inputs="large", query_tokens=7, kv_heads=2)
    out = kernels.attention(q, k, v, impl="triton_flash", causal=True, block_m=16, block_n=16)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), reference_float64(q, k, v, True), atol=2e-3, rtol=0)


def test_log_sum_exp_per_query_row():
    """With an LSE buffer of (B, H, Tq), each query row's base-2 log-sum-exp of its visible
    scaled scores (what the fused backward rebuilds P from)."""
    q, k, v = make_qkv(1, H, 37, D, torch.float32, "cpu", 9, query_tokens=7, kv_heads=2)
    o, lse = torch.empty_like(q), torch.empty(1, H, 7, dtype=torch.float32)
    attention_fwd_launch(q, k, v, o, True, 16, 16, True, lse=lse).run()
    s = q.double() @ per_query_head(k, H).double().transpose(-1, -2) / math.sqrt(D)
    s = s.masked_fill(future_mask(37, "cpu", 7), float("-inf"))
    torch.testing.assert_close(lse.double(), torch.logsumexp(s, dim=-1) / math.log(2), atol=1e-5, rtol=1e-5)


def test_planned_launch_covers_the_query_blocks_only():
    """On meta tensors (the build): one program per query block of Tq (none wholly past the
    last query) and (b, h); nothing runs."""
    shapes = [(2, H, 7, D), (2, 1, 129, D), (2, 1, 129, D)]
    q, k, v = (torch.empty(s, dtype=torch.float16, device="meta") for s in shapes)
    [launch] = planned_launches(q, k, v, causal=True, block_m=64, block_n=64, num_warps=4, num_stages=2)
    assert launch.grid == (1, 2 * H)
    assert launch.args[-4:] == (H, 129, 7, H)  # H, T, Tq and the query heads per K/V head


def test_kept_is_what_autograd_saves():
    """What the forward keeps for a backward, measured with one K/V head for four query heads
    (a backward needs as many queries as keys): q, k and v as given (K and V with their one
    head), O and a float32 log-sum-exp per query row; at Tq < T the model keeps Tq rows."""
    q, k, v = make_qkv(2, H, 37, D, torch.float16, "cpu", 3, kv_heads=1)
    leaves = [t.requires_grad_(True) for t in (q, k, v)]
    _, saved = saved_during(
        lambda: kernels.attention(*leaves, impl="triton_flash", causal=True, block_m=16, block_n=16)
    )
    model = kept(point(2, 37, 37, 1, True, (16, 16)))
    assert sorted(s["bytes"] for s in saved) == sorted(model.values()), (saved, model)
    assert model["K"] == 2 * 1 * 37 * D * 2
    decode = kept(point(2, 7, 37, 1, True, (16, 16)))
    assert decode["Q"] == decode["O"] == 2 * H * 7 * D * 2 and decode["LSE"] == 2 * H * 7 * 4
