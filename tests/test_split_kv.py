"""triton_split_kv: the keys cut into chunks, each chunk's partial O and log-sum-exp merged.
Each call is checked twice at once: O against the float64 definition (the house bound) and
the bytes the interpreter counts against the as-issued model to the byte (partials included),
at decode, a few queries and as many queries as keys; grouped heads packed into one program."""

import math

import pytest
import torch

import kernels
from kernels import catalog
from kernels.impl.checks import NoBackwardError
from kernels.impl.inputs import make_qkv
from kernels.impl.reference import future_mask, per_query_head, reference_float64
from kernels.measure.traffic import count_traffic
from kernels.models import cost
from kernels.paths.triton_split_kv.forward import planned_launches
from kernels.paths.triton_split_kv.model import FILL, TARGET_SMS, as_issued, programs, split_plan
from kernels.planning.point import Point

IMPL = "triton_split_kv"
D = 16

CASES = [
    # batch, heads, Tq, T, kv_heads, causal, (block_m, block_n), num_splits, dtype, layout
    (1, 8, 1, 37, 2, True, (16, 16), None, "float16", "contiguous"),  # decode: 3 splits of 1 tile
    (2, 8, 7, 129, 1, True, (16, 32), 3, "float32", "contiguous"),  # multi-query, the diagonal in a split
    (1, 8, 37, 37, 2, True, (16, 16), 2, "float16", "contiguous"),  # Tq = T: blocks cross heads
    (1, 8, 7, 129, 8, False, (32, 16), None, "float16", "contiguous"),  # a K/V head per query head
    (1, 4, 1, 7, 1, True, (16, 32), None, "float32", "contiguous"),  # T under one block and chunk
    (1, 8, 7, 37, 2, True, (16, 16), 1, "float16", "contiguous"),  # one split
    (2, 8, 7, 37, 2, True, (16, 16), None, "float16", "bthd"),  # strided inputs
    (1, 4, 37, 37, 4, False, (32, 32), 2, "float32", "bthd"),  # square, not causal
]


def naive_error(q, k, v, causal: bool, ref: torch.Tensor) -> float:
    """Standard attention's error in the input dtype (softmax in float32): the house bound is
    twice it, plus 1e-5."""
    k, v = per_query_head(k, q.shape[1]), per_query_head(v, q.shape[1])
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(future_mask(k.shape[-2], q.device, q.shape[-2]), float("-inf"))
    o = torch.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype) @ v
    return (o.double() - ref).abs().max().item()


def inputs(batch, heads, Tq, T, kv_heads, dtype, layout="contiguous"):
    dt, seed = getattr(torch, dtype), 31 * T + Tq
    return make_qkv(batch, heads, T, D, dt, "cpu", seed, layout, query_tokens=Tq, kv_heads=kv_heads)


def run(q, k, v, causal, blocks, num_splits=None):
    options = {"block_m": blocks[0], "block_n": blocks[1]}
    if num_splits is not None:
        options["num_splits"] = num_splits
    return kernels.attention(q, k, v, impl=IMPL, causal=causal, **options)


def assert_exact(out, q, k, v, causal) -> None:
    ref = reference_float64(q, k, v, causal)
    assert out.shape == q.shape and out.dtype == q.dtype and torch.isfinite(out).all()
    error = (out.double() - ref).abs().max().item()
    assert error <= 2 * naive_error(q, k, v, causal, ref) + 1e-5, error


@pytest.mark.parametrize("batch, heads, Tq, T, kv_heads, causal, blocks, num_splits, dtype, layout", CASES)
def test_exact_and_counted_as_modelled(
    batch, heads, Tq, T, kv_heads, causal, blocks, num_splits, dtype, layout
):
    q, k, v = inputs(batch, heads, Tq, T, kv_heads, dtype, layout)
    with count_traffic() as counter:
        out = run(q, k, v, causal, blocks, num_splits)
    assert_exact(out, q, k, v, causal)
    point = Point(IMPL, batch, heads, T, D, dtype, causal, *blocks, query_tokens=Tq, kv_heads=kv_heads)
    assert counter.by_stage() == as_issued(point, num_splits)
    assert counter.launches == ["split_kv_partial", "split_kv_merge"]
    if num_splits is None:  # the catalog's model: the default split count, as the call made
        assert counter.by_stage() == cost.as_issued(point)


def test_more_splits_than_tiles_are_clamped():
    """A split per key tile at most: 1,000 asked of 3 tiles runs the 3 (the same bytes, the same
    result bit for bit)."""
    q, k, v = inputs(1, 8, 7, 37, 2, "float16")
    with count_traffic() as many:
        clamped = run(q, k, v, True, (16, 16), 1000)
    with count_traffic() as three:
        exact = run(q, k, v, True, (16, 16), 3)
    assert torch.equal(clamped, exact)
    assert many.by_stage() == three.by_stage()
    assert three.by_stage()[("split_kv_partial", "M", "store")] == 8 * 7 * 3 * 4


def test_more_queries_than_keys_without_a_mask():
    """Not causal, q may have more rows than k (no Point plans it; the kernel is exact)."""
    q, k, v = inputs(1, 4, 40, 7, 2, "float32")
    assert_exact(run(q, k, v, False, (16, 16), 2), q, k, v, False)


def test_extreme_scores_stay_finite():
    """q = k = 61440 in float16: scores near 1.5e10, far past float16 and where float32 steps by
    thousands. O stays finite, and exact: each split weighed by its sum of equal scores (summed
    into one float32 log-sum-exp, log2 of that sum would be lost to the maximum's rounding)."""
    q, k, v = make_qkv(1, 8, 37, D, torch.float16, "cpu", 5, inputs="large", query_tokens=7, kv_heads=2)
    out = run(q, k, v, True, (16, 16), 3)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), reference_float64(q, k, v, True), atol=2e-3, rtol=0)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_num_splits_is_refused(bad):
    q, k, v = inputs(1, 4, 1, 37, 2, "float32")
    with pytest.raises(ValueError, match=rf"num_splits={bad!r}: must be a positive integer"):
        run(q, k, v, True, (16, 16), bad)


def test_default_splits_fill_the_gpu():
    """Decode, B = 1, 8 K/V heads: 8 programs without splitting; the default asks for the
    fewest splits giving FILL per SM (33), rounded to whole chunks of 4 tiles: 32 splits.
    Never more splits than key tiles, and one where the row blocks fill the GPU alone."""
    assert (FILL, TARGET_SMS) == (2, 132)
    assert split_plan(8, 4, 8192, 64, 64) == (32, 256)
    assert split_plan(1, 1, 100, 16, 64) == (2, 64)
    assert split_plan(4, 8 * 8192, 8192, 64, 64) == (1, 8192)
    decode = Point(IMPL, 1, 32, 8192, 128, "bfloat16", True, 64, 64, query_tokens=1, kv_heads=8)
    assert programs(decode, 108) == 8 * 32


def test_registration_and_planned_launches():
    entry = catalog.get(IMPL)
    assert (entry.stores, entry.triton, entry.twin, entry.default) == ("none", True, "triton_naive", False)
    assert entry.takes == {"query_tokens", "kv_heads"} and entry.options == {"num_splits"}
    # on meta tensors (the build): row blocks × B·kv_heads × splits, then the merge
    shapes = [(2, 8, 1, 128), (2, 2, 4096, 128), (2, 2, 4096, 128)]
    q, k, v = (torch.empty(shape, dtype=torch.float16, device="meta") for shape in shapes)
    partial, merge = planned_launches(q, k, v, causal=True, block_m=16, block_n=64)
    assert partial.name == "split_kv_partial_kernel" and merge.name == "split_kv_merge_kernel"
    assert partial.grid == (1, 4, 64) and merge.grid == (16,)
    q, k, v = inputs(1, 4, 1, 37, 2, "float32")
    with pytest.raises(NoBackwardError, match="inference only"):
        run(q.requires_grad_(), k, v, True, (16, 16))
