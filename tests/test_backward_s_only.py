"""triton_s_only's backward (S kept, P recomputed, dS never stored): gradients within the
rule, counted traffic equal to its as-issued model to the byte, FLOPs equal to an
independent count, and launches the build can plan on meta tensors."""

import itertools
import zlib

import pytest
import torch
from backward_helpers import case, check_gradients

from kernels.measure.traffic import count_traffic
from kernels.paths.triton_s_only.backward import (
    SAVED,
    backward,
    dkdv_kernel,
    dq_kernel,
    forward_saving,
    planned_backward_launches,
)
from kernels.paths.triton_s_only.backward_model import as_issued_s_only_backward, flops_s_only_backward
from kernels.paths.triton_s_only.forward import triton_s_only
from kernels.planning.point import Point

LAUNCHES = ["delta", "dkdv", "dq"]
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16

GRADIENTS = [
    # T, d, dtype, causal, (block_m, block_n), layout
    (1, 16, F32, False, (16, 32), "contiguous"),
    (1, 64, BF16, True, (64, 64), "contiguous"),
    (17, 16, F16, True, (32, 16), "contiguous"),
    (17, 256, F32, False, (16, 32), "contiguous"),
    (17, 128, BF16, False, (64, 64), "contiguous"),
    (77, 16, F32, True, (16, 32), "contiguous"),
    (77, 64, F16, False, (32, 16), "contiguous"),
    (77, 64, BF16, True, (64, 64), "bthd"),
    (130, 16, F16, True, (64, 64), "contiguous"),
    (45, 32, BF16, False, (16, 32), "contiguous"),  # 3 x 2 tiles, a tail in each
    (50, 128, F32, True, (32, 16), "contiguous"),
]


@pytest.mark.parametrize("T, d, dtype, causal, blocks, layout", GRADIENTS, ids=str)
def test_gradients_within_the_rule(T, d, dtype, causal, blocks, layout):
    seed = zlib.crc32(f"s_only_backward{T}{d}{dtype}{causal}{blocks}{layout}".encode())
    q, k, v, do = case(2 if layout == "bthd" else 1, 2, T, d, dtype, seed, layout)
    assert layout == "contiguous" or not q.is_contiguous()
    o, saved = forward_saving(q, k, v, causal, *blocks)
    assert len(saved) == len(SAVED) == 4 and saved[-1] is o
    assert torch.equal(o, triton_s_only(q, k, v, causal, *blocks))
    grads = backward(do, q, k, v, saved, causal, *blocks)
    assert all(g.is_contiguous() for g in grads)
    assert check_gradients(grads, q, k, v, do, causal) == []


TRAFFIC = [
    # T, causal, dtype, (block_m, block_n), layout
    (1, False, "float16", (16, 32), "contiguous"),
    (1, True, "float32", (64, 64), "contiguous"),
    (45, True, "float32", (32, 16), "contiguous"),
    (45, False, "bfloat16", (16, 32), "contiguous"),
    (77, True, "float16", (64, 64), "contiguous"),
    (70, True, "float16", (16, 64), "contiguous"),
    (20, True, "float16", (16, 16), "bthd"),
]


@pytest.mark.parametrize("T, causal, dtype, blocks, layout", TRAFFIC, ids=str)
def test_counted_equals_model(T, causal, dtype, blocks, layout):
    q, k, v, do = case(2, 2 if layout == "bthd" else 1, T, 16, getattr(torch, dtype), T, layout)
    _, saved = forward_saving(q, k, v, causal, *blocks)
    with count_traffic() as counter:
        backward(do, q, k, v, saved, causal, *blocks)
    point = Point("triton_s_only", q.shape[0], q.shape[1], T, 16, dtype, causal, *blocks)
    assert counter.by_stage() == as_issued_s_only_backward(point)
    assert counter.launches == LAUNCHES


def tile_products_by_element(point: Point) -> int:
    """FLOPs counted tile by tile: a tile runs its five products iff some (query i, key j)
    inside T in it is visible (j ≤ i when causal)."""
    T, bm, bn = point.tokens, point.block_m, point.block_n
    tiles = 0
    for m, n in itertools.product(range(-(-T // bm)), range(-(-T // bn))):
        rows = range(m * bm, min(T, (m + 1) * bm))
        cols = range(n * bn, min(T, (n + 1) * bn))
        tiles += any(not point.causal or j <= i for i in rows for j in cols)
    return point.groups * tiles * 5 * 2 * bm * bn * point.head_dim


@pytest.mark.parametrize("causal", [False, True])
def test_flops_as_executed(causal):
    for T, blocks in itertools.product((1, 17, 64, 77, 130, 256), ((16, 32), (32, 16), (64, 64))):
        point = Point("triton_s_only", 2, 3, T, 32, "float16", causal, *blocks)
        assert flops_s_only_backward(point) == tile_products_by_element(point), (T, blocks)
        if T % max(blocks) == 0:  # the closed forms
            G, d = point.groups, point.head_dim
            closed = 5 * G * T * (T + max(blocks)) * d if causal else 10 * G * T * T * d
            assert flops_s_only_backward(point) == closed, (T, blocks)


def test_kernels_take_the_named_tensors():
    """The counter keys bytes by argument name: the contract's names, in order."""
    dkdv = ["S", "M", "L", "Q", "DO", "V", "Delta", "DK", "DV"]
    dq = ["S", "M", "L", "DO", "V", "Delta", "K", "DQ"]
    assert list(dkdv_kernel.arg_names)[: len(dkdv)] == dkdv
    assert list(dq_kernel.arg_names)[: len(dq)] == dq


def test_planned_on_meta_tensors():
    """The build plans the backward on meta tensors: nothing runs, nothing is read."""
    q, k, v = (torch.empty((2, 3, 50, 64), dtype=torch.bfloat16, device="meta") for _ in range(3))
    launches = planned_backward_launches(q, k, v, causal=True, block_m=32, block_n=64)
    assert [launch.name for launch in launches] == ["delta_kernel", "dkdv_kernel", "dq_kernel"]
    assert [launch.grid for launch in launches] == [(1, 6), (1, 6), (2, 6)]
    tensors = [a for launch in launches for a in launch.args if isinstance(a, torch.Tensor)]
    assert tensors and all(t.device.type == "meta" for t in tensors)
