"""triton_flash's fused backward (kernels.paths.triton_flash.backward): gradients within the
rule, the forward's log-sum-exp, and the traffic and FLOPs models (kernels.models)."""

import inspect
import math

import pytest
import torch
from backward_helpers import case, check_gradients

from kernels.measure.traffic import count_traffic
from kernels.models.cost import cdiv
from kernels.paths.triton_flash import backward as flash_backward
from kernels.paths.triton_flash.backward_model import as_issued_flash_backward, flops_flash_backward
from kernels.paths.triton_flash.forward import triton_flash
from kernels.planning.point import Point

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16

GRADIENT_CASES = [
    # dtype, causal, T, d, (block_m, block_n), (B, H)
    (F32, False, 17, 16, (16, 32), (1, 2)),
    (F32, True, 77, 64, (32, 16), (1, 1)),
    (F32, True, 70, 32, (64, 64), (1, 1)),
    (F32, True, 1, 16, (64, 64), (1, 2)),
    (F16, True, 50, 16, (16, 32), (1, 1)),
    (F16, False, 77, 128, (64, 64), (1, 1)),
    (F16, False, 1, 64, (16, 32), (1, 1)),
    (F16, True, 17, 256, (32, 16), (1, 1)),
    (F16, True, 40, 16, (16, 32), (2, 2)),
    (BF16, True, 17, 64, (64, 64), (1, 2)),
    (BF16, False, 50, 32, (32, 16), (1, 1)),
    (BF16, True, 45, 128, (32, 16), (1, 1)),
]


def fused_gradients(q, k, v, do, causal, blocks):
    _, saved = flash_backward.forward_saving(q, k, v, causal, *blocks)
    return flash_backward.backward(do, q, k, v, saved, causal, *blocks)


@pytest.mark.parametrize("dtype, causal, T, d, blocks, groups", GRADIENT_CASES)
def test_gradients_within_the_rule(dtype, causal, T, d, blocks, groups):
    q, k, v, do = case(*groups, T, d, dtype, seed=T + d)
    got = fused_gradients(q, k, v, do, causal, blocks)
    assert all(g.is_contiguous() for g in got)
    assert check_gradients(got, q, k, v, do, causal) == []


def test_strided_inputs_and_upstream_gradient():
    """bthd views of q, k, v and of dO: every tensor's strides are passed."""
    q, k, v, _ = case(2, 2, 45, 32, F16, seed=3, layout="bthd")
    do = torch.randn(2, 45, 2, 32, generator=torch.Generator().manual_seed(9)).to(F16).transpose(1, 2)
    assert not q.is_contiguous() and not do.is_contiguous()
    got = fused_gradients(q, k, v, do, True, (32, 16))
    assert all(g.is_contiguous() for g in got)
    assert check_gradients(got, q, k, v, do, True) == []


def test_extreme_scores_stay_finite_and_within_the_rule():
    """q and k scaled so that the scores reach about ±50: P from the LSE neither overflows
    nor loses the rows' largest weights."""
    q, k, v, do = case(1, 1, 77, 64, F32, seed=5)
    q, k = q * 3.6, k * 3.6
    scores = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(64)
    assert 40 < scores.abs().max().item() < 80
    for causal in (False, True):
        got = fused_gradients(q, k, v, do, causal, (32, 16))
        assert all(torch.isfinite(g).all() for g in got)
        assert check_gradients(got, q, k, v, do, causal) == []


@pytest.mark.parametrize("dtype, causal", [(F32, True), (F16, False), (BF16, True)])
def test_saved_lse_is_the_base_2_logsumexp_of_the_scores(dtype, causal):
    q, k, v, _ = case(1, 2, 77, 32, dtype, seed=1)
    _, (_, lse) = flash_backward.forward_saving(q, k, v, causal, 32, 16)
    scores = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(32)
    if causal:
        scores = scores.masked_fill(torch.ones(77, 77, dtype=torch.bool).triu(1), float("-inf"))
    expected = torch.logsumexp(scores, dim=-1) / math.log(2)
    assert lse.dtype == F32 and lse.shape == (1, 2, 77) and lse.is_contiguous()
    torch.testing.assert_close(lse.double(), expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize(
    "layout, causal, blocks", [("contiguous", True, (16, 32)), ("bthd", False, (32, 16))]
)
def test_storing_the_lse_leaves_the_output_unchanged(layout, causal, blocks):
    q, k, v, _ = case(1, 2, 45, 16, BF16, seed=2, layout=layout)
    o, saved = flash_backward.forward_saving(q, k, v, causal, *blocks)
    assert torch.equal(o, triton_flash(q, k, v, causal, *blocks))
    assert saved[0] is o


def test_storing_the_lse_adds_only_its_store():
    q, k, v, _ = case(2, 1, 45, 16, F16, seed=4)
    with count_traffic() as plain:
        triton_flash(q, k, v, True, 16, 32)
    with count_traffic() as saving:
        flash_backward.forward_saving(q, k, v, True, 16, 32)
    assert saving.by_stage() == plain.by_stage() | {("attention_fwd", "LSE", "store"): 2 * 45 * 4}


TRAFFIC_CASES = [
    # T, (block_m, block_n), causal, dtype, layout
    (1, (16, 32), True, "float16", "contiguous"),
    (45, (16, 32), True, "float16", "bthd"),
    (45, (32, 16), False, "float32", "contiguous"),
    (77, (32, 16), True, "bfloat16", "contiguous"),
    (100, (64, 64), True, "float16", "contiguous"),
    (70, (16, 64), False, "float16", "bthd"),
]


@pytest.mark.parametrize("T, blocks, causal, dtype, layout", TRAFFIC_CASES)
def test_counted_traffic_equals_the_model(T, blocks, causal, dtype, layout):
    q, k, v, do = case(2, 1, T, 16, getattr(torch, dtype), seed=T, layout=layout)
    _, saved = flash_backward.forward_saving(q, k, v, causal, *blocks)
    with count_traffic() as counter:
        flash_backward.backward(do, q, k, v, saved, causal, *blocks)
    point = Point("triton_flash", 2, 1, T, 16, dtype, causal, *blocks)
    assert counter.by_stage() == as_issued_flash_backward(point)
    assert counter.launches == list(flash_backward.BACKWARD_STAGES)


def kernel_tile_ranges(T, bm, bn, causal):
    """The kernels' loop ranges, written out again: for each dkdv program its (lo, hi,
    masked) query ranges, for each dq program its key ranges."""
    dkdv, dq = [], []
    whole_m, whole_n = (T // bm) * bm, (T // bn) * bn
    for first_key in range(0, T, bn):
        lo, unmasked_lo = 0, 0
        if causal:
            lo = (first_key // bm) * bm
            unmasked_lo = max(lo, min(-(-(first_key + bn - 1) // bm) * bm, whole_m))
        unmasked_hi = max(unmasked_lo, whole_m)
        dkdv.append(
            (first_key, [(lo, unmasked_lo, True), (unmasked_lo, unmasked_hi, False), (unmasked_hi, T, True)])
        )
    for first_row in range(0, T, bm):
        hi, whole = T, whole_n
        if causal:
            hi, whole = min(T, first_row + bm), min(whole_n, ((first_row + 1) // bn) * bn)
        dq.append((first_row, [(0, whole, False), (whole, hi, True)]))
    return dkdv, dq


def needs_mask(rows: range, keys: range, T: int, causal: bool, streamed: range) -> bool:
    """Whether a tile has a hidden (causal) or out-of-T entry in its streamed dimension."""
    return streamed.stop > T or (causal and keys.stop - 1 > rows.start)


@pytest.mark.parametrize("T", [1, 17, 64, 77, 128, 130])
@pytest.mark.parametrize("blocks", [(16, 32), (32, 16), (64, 64), (16, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_flops_model_counts_the_tile_products_the_kernels_run(T, blocks, causal):
    """By the kernels' own loop ranges (4 products per dkdv tile, 3 per dq tile); an
    unmasked tile never needs a mask; and the closed forms where T is a multiple of both."""
    bm, bn = blocks
    dkdv, dq = kernel_tile_ranges(T, bm, bn, causal)
    tiles = 0
    for first_key, ranges in dkdv:
        keys = range(first_key, first_key + bn)
        for lo, hi, masked in ranges:
            for start in range(lo, hi, bm):
                rows = range(start, start + bm)
                assert masked or not needs_mask(rows, keys, T, causal, rows)
                assert not causal or rows.stop - 1 >= keys.start  # never wholly in the future
                tiles += 4
    for first_row, ranges in dq:
        rows = range(first_row, first_row + bm)
        for lo, hi, masked in ranges:
            for start in range(lo, hi, bn):
                keys = range(start, start + bn)
                assert masked or not needs_mask(rows, keys, T, causal, keys)
                tiles += 3
    per_product = 2 * bm * bn * 16
    point = Point("triton_flash", 1, 2, T, 16, "float16", causal, bm, bn)
    assert flops_flash_backward(point) == 2 * tiles * per_product
    if T % bm == 0 and T % bn == 0:
        closed = 7 * 2 * 16 * T * (T + max(bm, bn)) if causal else 14 * 2 * T * T * 16
        assert flops_flash_backward(point) == closed
    full = cdiv(T, bm) * cdiv(T, bn) * 7 * per_product * 2
    assert flops_flash_backward(point) <= full


def test_planned_launches_run_nothing_on_meta_tensors():
    q, k, v = (torch.empty(2, 3, 100, 64, dtype=F16, device="meta") for _ in range(3))
    launches = flash_backward.planned_backward_launches(q, k, v, causal=True, block_m=32, block_n=64)
    assert [launch.name for launch in launches] == ["delta_kernel", "dkdv_kernel", "dq_kernel"]
    assert [launch.grid for launch in launches[1:]] == [(2, 6), (4, 6)]
    names = list(inspect.signature(launches[1].kernel.fn).parameters)
    assert [names[i] for i, a in enumerate(launches[1].args) if isinstance(a, torch.Tensor)] == [
        "Q",
        "K",
        "V",
        "DO",
        "LSE",
        "Delta",
        "DK",
        "DV",
        "BOUNDS",
        "KEY_ROWS",
    ]
    # a causal launch reads no runs of keys: dK stands in for the pointers (BOUNDED is False)
    tensors = dict(zip(names, launches[1].args, strict=False))
    assert tensors["BOUNDS"] is tensors["DK"] and tensors["KEY_ROWS"] is tensors["DK"]
    assert launches[1].options["BOUNDED"] is False
