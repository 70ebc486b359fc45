"""triton_s_only (S stored, P never): exact against the float64 definition, its counted
traffic equal to its as-issued model to the byte, and its stage chain equal to the call."""

import zlib

import pytest
import torch

from kernels.impl.inputs import make_qkv
from kernels.impl.reference import reference_float64
from kernels.measure.traffic import count_traffic
from kernels.paths.torch_naive.forward import torch_naive
from kernels.paths.triton_s_only.forward import TRITON_S_ONLY_STAGES, triton_s_only, triton_s_only_stages
from kernels.paths.triton_s_only.model import as_issued_s_only
from kernels.planning.point import Point

LAUNCHES = ["scores", "stats", "pv"]

CORRECTNESS = [
    # T, causal, dtype, (block_m, block_n)
    (1, False, torch.float32, (16, 16)),
    (1, True, torch.float16, (64, 32)),
    (17, False, torch.float16, (16, 32)),
    (17, True, torch.float32, (32, 16)),
    (70, False, torch.float32, (32, 64)),
    (70, True, torch.float16, (16, 16)),
    (70, True, torch.float32, (64, 16)),
    (129, False, torch.float16, (64, 64)),
    (129, True, torch.float16, (32, 64)),
    (45, True, torch.bfloat16, (16, 32)),
]


def max_abs(a, b):
    return (a.double() - b.double()).abs().max().item()


def check(q, k, v, causal, block_m, block_n):
    """The project's rule: error ≤ 2·(torch_naive's error) + 1e-5 against float64."""
    ref = reference_float64(q, k, v, causal)
    bound = 2 * max_abs(torch_naive(q, k, v, causal), ref) + 1e-5
    out = triton_s_only(q, k, v, causal, block_m, block_n)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert torch.isfinite(out).all()
    error = max_abs(out, ref)
    assert error <= bound, f"error {error:.3e} > bound {bound:.3e}"


@pytest.mark.parametrize("T, causal, dtype, blocks", CORRECTNESS, ids=str)
def test_matches_float64_definition(T, causal, dtype, blocks):
    seed = zlib.crc32(f"s_only{T}{causal}{dtype}{blocks}".encode())
    q, k, v = make_qkv(1, 2, T, 16, dtype, "cpu", seed)
    check(q, k, v, causal, *blocks)


def test_strided_inputs():
    q, k, v = make_qkv(2, 2, 33, 16, torch.float16, "cpu", 11, layout="bthd")
    assert not q.is_contiguous()
    check(q, k, v, True, 16, 32)
    # every other element of a wider last dimension: a non-unit innermost stride
    wide = torch.randn(1, 2, 29, 64, generator=torch.Generator().manual_seed(9))
    q, k, v = wide[..., ::4], wide[..., 1::4].flip(2), wide[..., 2::4]
    check(q, k, v, False, 32, 16)


def test_out_buffer_is_written():
    q, k, v = make_qkv(1, 2, 40, 16, torch.float16, "cpu", 12)
    out = torch.full_like(q, float("nan"))
    result = triton_s_only(q, k, v, True, 32, 16, out=out)
    assert result.data_ptr() == out.data_ptr()
    assert torch.equal(out, triton_s_only(q, k, v, True, 32, 16))


TRAFFIC = [
    # T, causal, dtype, (block_m, block_n)
    (1, False, "float16", (16, 32)),
    (1, True, "float32", (64, 64)),
    (17, False, "float16", (32, 16)),
    (17, True, "float16", (16, 32)),
    (45, True, "float32", (16, 16)),
    (45, False, "bfloat16", (64, 32)),
    (70, True, "float16", (32, 16)),
    (70, False, "float16", (16, 64)),
    (129, True, "float16", (64, 32)),
]


@pytest.mark.parametrize("T, causal, dtype, blocks", TRAFFIC, ids=str)
def test_counted_equals_model(T, causal, dtype, blocks):
    q, k, v = make_qkv(2, 1, T, 16, getattr(torch, dtype), "cpu", T)
    with count_traffic() as counter:
        triton_s_only(q, k, v, causal, *blocks)
    point = Point("triton_s_only", 2, 1, T, 16, dtype, causal, *blocks)
    assert counter.by_stage() == as_issued_s_only(point)
    assert counter.launches == LAUNCHES


def test_strided_traffic_is_attributed():
    q, k, v = make_qkv(2, 2, 20, 16, torch.float16, "cpu", 4, layout="bthd")
    with count_traffic() as counter:
        triton_s_only(q, k, v, True, 16, 16)
    assert counter.by_stage() == as_issued_s_only(
        Point("triton_s_only", 2, 2, 20, 16, "float16", True, 16, 16)
    )


@pytest.mark.parametrize("T", [1, 17, 100, 257, 1000])
@pytest.mark.parametrize("blocks", [(16, 16), (16, 64), (64, 32)])
def test_full_rows_move_s_three_times(T, blocks):
    """Non-causal: S stored once and loaded whole by stats and by pv, 3·B·H·T²·e, against
    triton_naive's 4·B·H·T²·e for S and P; causal moves less."""
    point = Point("triton_s_only", 2, 3, T, 16, "float16", False, *blocks)
    model = as_issued_s_only(point)
    s_bytes = sum(n for (_, tensor, _), n in model.items() if tensor == "S")
    assert s_bytes == 3 * T * T * 2 * 2 * 3
    assert model[("stats", "S", "load")] == model[("pv", "S", "load")] == T * T * 2 * 2 * 3
    causal = as_issued_s_only(Point("triton_s_only", 2, 3, T, 16, "float16", True, *blocks))
    assert causal[("scores", "S", "store")] == model[("scores", "S", "store")]
    assert causal[("stats", "S", "load")] <= model[("stats", "S", "load")]


@pytest.mark.parametrize("causal", [False, True])
def test_stages_are_its_three_kernels(causal):
    """The stages run in order give the implementation's output."""
    q, k, v = make_qkv(1, 2, 45, 16, torch.float16, "cpu", 5)
    stages, out = triton_s_only_stages(q, k, v, causal, 16, 32)
    assert tuple(name for name, _ in stages) == TRITON_S_ONLY_STAGES == ("scores", "stats", "pv")
    for _, run in stages:
        run()
    assert torch.equal(out, triton_s_only(q, k, v, causal, 16, 32))


def test_scores_entries_are_triton_naives():
    """Launch 1 is triton_naive's scores kernel: the same bytes, counted on triton_naive."""
    from kernels.paths.triton_naive.forward import triton_naive

    q, k, v = make_qkv(1, 2, 45, 16, torch.float16, "cpu", 6)
    with count_traffic() as counter:
        triton_naive(q, k, v, True, 32, 16)
    naive = {key: n for key, n in counter.by_stage().items() if key[0] == "scores"}
    model = as_issued_s_only(Point("triton_s_only", 1, 2, 45, 16, "float16", True, 32, 16))
    assert {key: n for key, n in model.items() if key[0] == "scores"} == naive


def test_through_the_registry():
    """kernels.attention runs the registered implementation, counted like the direct call."""
    import kernels

    q, k, v = make_qkv(1, 2, 30, 16, torch.float16, "cpu", 7)
    with count_traffic() as counter:
        out = kernels.attention(q, k, v, impl="triton_s_only", causal=True, block_m=16, block_n=32)
    assert torch.equal(out, triton_s_only(q, k, v, True, 16, 32))
    assert counter.by_stage() == as_issued_s_only(
        Point("triton_s_only", 1, 2, 30, 16, "float16", True, 16, 32)
    )
    assert counter.launches == LAUNCHES
