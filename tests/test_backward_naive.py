"""triton_naive's materialized backward (kernels.paths.triton_naive.backward): gradients
within the rule, dP and dS as the float64 formulas give them, the float16 dP overflow, and
counted traffic and executed FLOPs equal to the study layer's model."""

import math

import pytest
import torch
from backward_helpers import case, check_gradients

from kernels.measure.traffic import count_traffic
from kernels.paths.triton_naive import backward as naive_backward
from kernels.paths.triton_naive.backward_model import KERNELS, as_issued_naive_backward, flops_naive_backward
from kernels.planning.point import Point

F16_HALF_ULP = 2.0**-11  # float16's relative rounding error (round to nearest)
F16_SUBNORMAL_HALF_STEP = 2.0**-25

GRADIENT_CASES = [
    # dtype, causal, T, d, (block_m, block_n), options, layout
    ("float32", False, 17, 16, (16, 32), {}, "contiguous"),
    ("float32", True, 1, 64, (32, 16), {}, "contiguous"),
    ("float16", True, 77, 64, (16, 32), {}, "contiguous"),
    ("float16", False, 70, 128, (64, 64), {}, "contiguous"),
    ("float16", True, 17, 256, (16, 32), {}, "contiguous"),
    ("float16", False, 77, 16, (32, 16), {"max_row_block": 32}, "contiguous"),  # two-pass ds
    ("bfloat16", True, 50, 32, (32, 16), {}, "contiguous"),
    ("bfloat16", False, 45, 16, (64, 64), {}, "bthd"),
    ("bfloat16", True, 77, 16, (16, 32), {"sp_dtype": "float32"}, "contiguous"),
]


def run_backward(q, k, v, do, causal, blocks, return_intermediates=False, **options):
    """The forward that saves P, then the backward on it."""
    _, saved = naive_backward.forward_saving(q, k, v, causal, *blocks, **options)
    grads = naive_backward.backward(
        do, q, k, v, saved, causal, *blocks, return_intermediates=return_intermediates, **options
    )
    return grads, saved


@pytest.mark.parametrize("dtype, causal, T, d, blocks, options, layout", GRADIENT_CASES)
def test_gradients_within_rule(dtype, causal, T, d, blocks, options, layout):
    q, k, v, do = case(1, 2, T, d, getattr(torch, dtype), seed=T + d, layout=layout)
    if layout == "bthd":  # the upstream gradient strided too
        do = do.transpose(1, 2).contiguous().transpose(1, 2)
    grads, _ = run_backward(q, k, v, do, causal, blocks, **options)
    assert all(g.is_contiguous() for g in grads)
    assert check_gradients(grads, q, k, v, do, causal) == []


def test_intermediates_are_the_float64_formulas():
    """dP = dO·Vᵀ (0 in the future) and dS = c·P∘(dP − rowsum(P∘dP)), on the stored P, within
    float16's rounding of each entry, beside float32's rounding of dP's d-term sums (at most
    d·2⁻²⁴·Σ|dO||V|), dP's error carried into dS, and float16's subnormal half-step."""
    T, d, causal = 77, 32, True
    q, k, v, do = case(1, 2, T, d, torch.float16, seed=3)
    (*_, dp, ds), (p,) = run_backward(q, k, v, do, causal, (16, 32), return_intermediates=True)
    assert dp.shape == ds.shape == (1, 2, T, T) and dp.dtype == ds.dtype == torch.float16
    visible = torch.ones(T, T, dtype=torch.bool).tril()
    dp64 = (do.double() @ v.double().transpose(-1, -2)).masked_fill(~visible, 0.0)
    summed = (do.double().abs() @ v.double().abs().transpose(-1, -2)).masked_fill(~visible, 0.0)
    dp_bound = F16_HALF_ULP * dp64.abs() + d * 2.0**-24 * summed + F16_SUBNORMAL_HALF_STEP
    assert ((dp.double() - dp64).abs() <= dp_bound).all()
    p64 = p.double()
    ds64 = p64 * (dp64 - (p64 * dp64).sum(-1, keepdim=True)) / math.sqrt(d)
    carried = p64 * (dp_bound + (p64 * dp_bound).sum(-1, keepdim=True)) / math.sqrt(d)
    ds_bound = (F16_HALF_ULP * ds64.abs() + carried) * 1.01 + F16_SUBNORMAL_HALF_STEP
    assert ((ds.double() - ds64).abs() <= ds_bound).all()
    assert (dp[..., ~visible] == 0).all() and (ds[..., ~visible] == 0).all()


@pytest.mark.filterwarnings("ignore:overflow encountered", "ignore:invalid value encountered")
def test_float16_dp_overflows():
    """dO = V = 300 make dO·Vᵀ = 300²·d, past float16's 65,504: stored in float16, dP is
    ∞, dS ∞ − ∞, so dQ and dK are not finite (dV = Pᵀ·dO needs no dP); stored in float32,
    every gradient is finite."""
    q, k, v, do = case(1, 1, 17, 16, torch.float16, seed=5)
    v.fill_(300.0)
    do.fill_(300.0)
    (dq, dk, dv, dp, _), _ = run_backward(q, k, v, do, False, (16, 16), return_intermediates=True)
    assert torch.isinf(dp).all()
    assert not torch.isfinite(dq).any() and not torch.isfinite(dk).any()
    assert torch.isfinite(dv).all()
    (dq, dk, dv), _ = run_backward(q, k, v, do, False, (16, 16), sp_dtype="float32")
    assert all(torch.isfinite(g).all() for g in (dq, dk, dv))


TRAFFIC_CASES = [
    # dtype, causal, T, (block_m, block_n), sp_dtype, max_row_block
    ("float16", False, 1, (16, 32), None, 16384),
    ("float16", True, 45, (32, 16), None, 16384),
    ("float32", False, 77, (16, 16), None, 32),  # two-pass ds
    ("bfloat16", True, 100, (32, 64), "float32", 16384),
]


@pytest.mark.parametrize("dtype, causal, T, blocks, sp_dtype, max_row_block", TRAFFIC_CASES)
def test_counted_traffic_equals_model(dtype, causal, T, blocks, sp_dtype, max_row_block):
    q, k, v, do = case(2, 1, T, 16, getattr(torch, dtype), seed=T)
    options = {"sp_dtype": sp_dtype, "max_row_block": max_row_block}
    _, saved = naive_backward.forward_saving(q, k, v, causal, *blocks, **options)
    with count_traffic() as counter:
        naive_backward.backward(do, q, k, v, saved, causal, *blocks, **options)
    point = Point(
        "triton_naive", 2, 1, T, 16, dtype, causal, *blocks, sp_dtype=sp_dtype, max_row_block=max_row_block
    )
    assert counter.by_stage() == as_issued_naive_backward(point)
    assert counter.launches == list(KERNELS)


def test_flops_model_counts_the_products_run(monkeypatch):
    """The model against the tile products the kernels actually run (every ``mma`` call,
    counted as it happens), and against the closed forms where T is a multiple of the blocks:
    8·B·H·T²·d, or 4·B·H·d·T·(T + max(block_m, block_n)) when causal."""
    products = []
    original = naive_backward.mma

    def counting_mma(a, b, acc, dot_f32):
        (m, k), n = a.shape, b.shape[1]
        products.append(2 * int(m) * int(k) * int(n))
        return original(a, b, acc, dot_f32)

    for T, causal, blocks in [(45, True, (16, 32)), (45, False, (32, 16)), (64, True, (32, 16))]:
        q, k, v, do = case(1, 2, T, 16, torch.float16, seed=T)
        _, saved = naive_backward.forward_saving(q, k, v, causal, *blocks)
        products.clear()
        with monkeypatch.context() as patch:
            patch.setattr(naive_backward, "mma", counting_mma)
            naive_backward.backward(do, q, k, v, saved, causal, *blocks)
        point = Point("triton_naive", 1, 2, T, 16, "float16", causal, *blocks)
        assert flops_naive_backward(point) == sum(products), (T, causal, blocks)
    for T, causal, (bm, bn) in [(128, False, (16, 32)), (128, True, (16, 32)), (256, True, (64, 32))]:
        point = Point("triton_naive", 2, 3, T, 64, "float16", causal, bm, bn)
        closed = 4 * 6 * 64 * T * (T + max(bm, bn)) if causal else 8 * 6 * T * T * 64
        assert flops_naive_backward(point) == closed


def test_planned_launches_are_the_calls():
    """The build's plan on meta tensors: the five kernels, each on the grid and options the
    call runs them with."""
    q, k, v, do = case(1, 2, 45, 16, torch.float16)
    options = {"sp_dtype": "float32", "max_row_block": 32}
    planned = naive_backward.planned_backward_launches(
        *(t.to("meta") for t in (q, k, v)), causal=True, block_m=16, block_n=32, **options
    )
    _, saved = naive_backward.forward_saving(q, k, v, True, 16, 32, **options)
    grads = tuple(torch.empty_like(t) for t in (q, k, v))
    called = naive_backward.backward_launches(do, q, k, v, saved, grads, True, 16, 32, **options)
    assert [launch.name for launch in planned] == [f"{name}_kernel" for name in KERNELS]
    assert [(c.grid, c.options) for c in planned] == [(c.grid, c.options) for c in called]
