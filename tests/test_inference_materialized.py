"""triton_naive, triton_s_only and triton_tile_softmax on the inference shapes (issue 47): q
of query_tokens rows against T keys (causal aligned to the end), k and v with kv_heads heads
read by index. Each call is checked against the float64 definition and its counted traffic
against the registration's as-issued model, to the byte; the build's planned launches are the
call's own."""

from __future__ import annotations

import math
import zlib

import pytest
import torch

import kernels
from kernels.impl.inputs import make_qkv
from kernels.impl.reference import future_mask, per_query_head, reference_float64
from kernels.measure.traffic import count_traffic
from kernels.models.cost import as_issued
from kernels.planning.point import Point
from kernels.spec import MAX_ROW_BLOCK

B, H, D = 2, 4, 16
LAUNCHES = {
    "triton_naive": ["scores", "softmax", "pv"],
    "triton_s_only": ["scores", "stats", "pv"],
    "triton_tile_softmax": ["attention_fwd"],
}


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item()


def input_dtype_attention(q, k, v, causal: bool) -> torch.Tensor:
    """torch_naive's arithmetic on these shapes (products in the input dtype, softmax in
    float32, P rounded to the input dtype): the baseline of the project's error bound."""
    heads, Tq, T = q.shape[1], q.shape[2], k.shape[2]
    k, v = per_query_head(k, heads), per_query_head(v, heads)
    s = torch.matmul(q, k.transpose(-1, -2)).mul_(1.0 / math.sqrt(q.shape[-1]))
    if causal:
        s.masked_fill_(future_mask(T, q.device, Tq), float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype), v)


def inputs(Tq: int, T: int, kv: int, dtype: torch.dtype, layout: str = "contiguous"):
    seed = zlib.crc32(f"inference{Tq},{T},{kv},{dtype},{layout}".encode())
    return make_qkv(B, H, T, D, dtype, "cpu", seed, layout=layout, query_tokens=Tq, kv_heads=kv)


def point(impl: str, Tq: int, T: int, kv: int, dtype: torch.dtype, causal: bool, blocks, **kw) -> Point:
    name = str(dtype).removeprefix("torch.")
    return Point(impl, B, H, T, D, name, causal, *blocks, query_tokens=Tq, kv_heads=kv, **kw)


def run_counted(impl: str, q, k, v, causal: bool, blocks, **options):
    with count_traffic() as counter:
        out = kernels.attention(
            q, k, v, impl=impl, causal=causal, block_m=blocks[0], block_n=blocks[1], **options
        )
    return out, counter


EXACT = [
    # impl, Tq, T, kv_heads, causal, (block_m, block_n), dtype, layout, max_row_block
    ("triton_naive", 1, 37, 4, True, (16, 32), torch.float16, "contiguous", MAX_ROW_BLOCK),
    ("triton_naive", 7, 70, 2, False, (32, 16), torch.float16, "contiguous", MAX_ROW_BLOCK),
    ("triton_naive", 7, 37, 1, True, (32, 16), torch.float32, "bthd", MAX_ROW_BLOCK),
    ("triton_naive", 7, 70, 2, True, (16, 32), torch.float32, "contiguous", 16),  # two-pass softmax
    ("triton_naive", 1, 37, 1, False, (32, 16), torch.float16, "contiguous", 16),  # two-pass softmax
    ("triton_s_only", 1, 37, 4, False, (32, 16), torch.float16, "contiguous", None),
    ("triton_s_only", 7, 70, 2, True, (16, 32), torch.float16, "contiguous", None),
    ("triton_s_only", 7, 37, 1, True, (32, 16), torch.float32, "contiguous", None),
    ("triton_s_only", 1, 70, 1, True, (16, 32), torch.float32, "bthd", None),
    ("triton_s_only", 37, 37, 2, True, (32, 16), torch.float16, "contiguous", None),  # grouped only
    # the tile-local softmax is exact where every row's visible keys fit one key tile
    ("triton_tile_softmax", 1, 29, 2, True, (16, 32), torch.float16, "contiguous", None),
    ("triton_tile_softmax", 7, 29, 1, False, (16, 32), torch.float32, "bthd", None),
    ("triton_tile_softmax", 7, 13, 4, True, (32, 16), torch.float16, "contiguous", None),  # T < one block
]


@pytest.mark.parametrize("impl, Tq, T, kv, causal, blocks, dtype, layout, max_row_block", EXACT, ids=str)
def test_exact_and_counted_equals_model(impl, Tq, T, kv, causal, blocks, dtype, layout, max_row_block):
    """Error ≤ 2·(torch_naive's arithmetic's error) + 1e-5 against float64, as the paths'
    square tests bound it, and the bytes counted equal to the as-issued model."""
    q, k, v = inputs(Tq, T, kv, dtype, layout)
    options = {"max_row_block": max_row_block} if impl == "triton_naive" else {}
    out, counter = run_counted(impl, q, k, v, causal, blocks, **options)
    ref = reference_float64(q, k, v, causal)
    bound = 2 * max_abs(input_dtype_attention(q, k, v, causal), ref) + 1e-5
    assert out.shape == q.shape and out.dtype == q.dtype and torch.isfinite(out).all()
    assert max_abs(out, ref) <= bound
    assert counter.by_stage() == as_issued(point(impl, Tq, T, kv, dtype, causal, blocks, **options))
    assert counter.launches == LAUNCHES[impl]


@pytest.mark.parametrize("causal", [False, True])
def test_tile_softmax_is_wrong_the_same_way(causal):
    """With V = 1 the output is each row's total weight: for the tile-local softmax the number
    of key tiles holding a key the row sees (causal: keys j ≤ i + T − Tq); its traffic is
    still the fused loop's."""
    Tq, T, kv, blocks = 7, 70, 2, (32, 16)
    q, k, _ = inputs(Tq, T, kv, torch.float32)
    v = torch.ones_like(k)
    out, counter = run_counted("triton_tile_softmax", q, k, v, causal, blocks)
    last_key = torch.arange(Tq) + T - Tq if causal else torch.full((Tq,), T - 1)
    tiles = (last_key // blocks[1] + 1).to(torch.float32)
    torch.testing.assert_close(out, tiles[None, None, :, None].expand_as(out), rtol=1e-5, atol=1e-5)
    model = as_issued(point("triton_tile_softmax", Tq, T, kv, torch.float32, causal, blocks))
    assert counter.by_stage() == model


def test_naive_intermediates():
    """S and P are (B, H, Tq, T): −∞ and 0 where a key is in a query's future (aligned to the
    end), the scores of the shared K/V head elsewhere, rows of P summing to one."""
    Tq, T, kv = 7, 37, 2
    q, k, v = inputs(Tq, T, kv, torch.float32)
    s, p, o = kernels.attention(
        q, k, v, impl="triton_naive", causal=True, block_m=16, block_n=32, return_intermediates=True
    )
    assert s.shape == p.shape == (B, H, Tq, T)
    future = future_mask(T, "cpu", Tq)
    assert torch.isneginf(s[..., future]).all() and (p[..., future] == 0).all()
    scores = q.double() @ per_query_head(k, H).double().transpose(-1, -2) / math.sqrt(D)
    torch.testing.assert_close(s[..., ~future].double(), scores[..., ~future], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(p.double().sum(-1), torch.ones(B, H, Tq, dtype=torch.float64))
    assert torch.equal(
        o, kernels.attention(q, k, v, impl="triton_naive", causal=True, block_m=16, block_n=32)
    )


@pytest.mark.parametrize("impl", ["triton_naive", "triton_s_only"])
def test_stages_are_the_call(impl):
    """The stage chain on these shapes, run in order, gives the call's output."""
    from kernels import catalog

    q, k, v = inputs(7, 37, 1, torch.float16)
    entry = catalog.get(impl)
    stages, out = entry.stage_chain()(q, k, v, True, 16, 32)
    assert [name for name, _ in stages] == LAUNCHES[impl]
    for _, run in stages:
        run()
    assert torch.equal(out, kernels.attention(q, k, v, impl=impl, causal=True, block_m=16, block_n=32))


@pytest.mark.parametrize("impl", list(LAUNCHES))
def test_planned_launches_are_the_calls(impl):
    """The build's launches, planned on meta tensors of the point's shapes, are the ones the
    registration's planner makes on real inputs: kernels, grids, scalars and options."""
    from kernels import catalog
    from kernels.build.variants import point_launches

    Tq, T, kv, blocks = 7, 37, 2, (16, 32)
    planned = point_launches(point(impl, Tq, T, kv, torch.float16, True, blocks))
    q, k, v = inputs(Tq, T, kv, torch.float16)
    real = catalog.get(impl).planned_launches()(q, k, v, causal=True, block_m=blocks[0], block_n=blocks[1])
    assert [x.name.removesuffix("_kernel") for x in planned] == LAUNCHES[impl]

    def described(launch):
        return [(t.shape, t.stride(), t.dtype) if isinstance(t, torch.Tensor) else t for t in launch.args]

    for a, b in zip(planned, real, strict=True):
        assert a.grid == b.grid and a.options == b.options and described(a) == described(b)
    assert planned[0].grid[0] == math.ceil(Tq / blocks[0])  # a program per block of query rows
