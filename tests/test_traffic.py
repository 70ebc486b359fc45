"""Counted global traffic in the interpreter equals the as-issued model to the byte."""

import itertools

import pytest
import torch

import kernels
from kernels.impl.inputs import make_qkv
from kernels.measure.traffic import count_traffic
from kernels.models.cost import transfers
from kernels.planning.point import Point

GRID = [
    # impl, dtype, causal, T, (block_m, block_n), sp_dtype, max_row_block
    *[
        (impl, "float16", causal, T, blocks, None, 16384)
        for impl, causal, T, blocks in itertools.product(
            ("triton_naive", "triton_flash", "triton_tile_softmax"),
            (False, True),
            (1, 45, 70),  # one row, and tails in every tile shape
            ((16, 32), (32, 16), (64, 64)),
        )
        if not (T == 1 and blocks != (16, 32))
    ],
    ("triton_naive", "bfloat16", True, 77, (32, 32), "float32", 16384),
    ("triton_naive", "float32", False, 77, (16, 16), None, 32),  # two-pass softmax
    ("triton_naive", "float16", True, 90, (32, 64), None, 64),
]


@pytest.mark.parametrize("impl, dtype, causal, T, blocks, sp_dtype, max_row_block", GRID)
def test_counted_equals_model(impl, dtype, causal, T, blocks, sp_dtype, max_row_block):
    q, k, v = make_qkv(2, 1, T, 16, getattr(torch, dtype), "cpu", T)
    options = {}
    if impl == "triton_naive":
        options = {"sp_dtype": sp_dtype, "max_row_block": max_row_block}
    with count_traffic() as counter:
        kernels.attention(q, k, v, impl=impl, causal=causal, block_m=blocks[0], block_n=blocks[1], **options)
    point = Point(impl, 2, 1, T, 16, dtype, causal, *blocks, sp_dtype=sp_dtype, max_row_block=max_row_block)
    modelled = {(t.kernel, t.tensor, t.op): t.as_issued for t in transfers(point)}
    assert counter.by_stage() == modelled
    expected = ["scores", "softmax", "pv"] if impl == "triton_naive" else ["attention_fwd"]
    assert counter.launches == expected


def test_counter_sees_masked_lanes_only():
    """A 1-token sequence in 64-wide tiles moves one row of each tensor, not 64."""
    q, k, v = make_qkv(1, 1, 1, 32, torch.float32, "cpu", 0)
    with count_traffic() as counter:
        kernels.attention(q, k, v, impl="triton_flash", causal=False, block_m=64, block_n=64)
    assert counter.total == 4 * 32 * 4


def test_strided_inputs_are_attributed():
    q, k, v = make_qkv(2, 2, 20, 16, torch.float16, "cpu", 4, layout="bthd")
    with count_traffic() as counter:
        kernels.attention(q, k, v, impl="triton_flash", causal=True, block_m=16, block_n=16)
    point = Point("triton_flash", 2, 2, 20, 16, "float16", True, 16, 16)
    assert counter.by_stage() == {(t.kernel, t.tensor, t.op): t.as_issued for t in transfers(point)}
