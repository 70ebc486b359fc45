"""Every Triton path's bytes under masks beyond causal, counted in Triton's interpreter,
equal its as-issued model to the byte (kernels.models.cost.transfers of a Point carrying the
mask): at T not a multiple of the blocks, windows and documents ending inside tiles, a prefix
inside a tile, fewer queries than keys (decode-like) and grouped heads; every backward (fused,
materialized, S only) likewise. The models walk the mask's tile map (kernels.masks.tiles), as
the kernels do."""

from __future__ import annotations

import pytest
import torch

import kernels
from kernels.impl import mode
from kernels.impl.inputs import make_qkv
from kernels.measure.traffic import count_traffic
from kernels.models.backward_cost import as_issued_backward
from kernels.models.cost import transfers
from kernels.planning.point import Point

mode.set_interpret(True)

B, H, D = 1, 4, 16
SHAPES = {  # name: (T, query_tokens, kv_heads, (block_m, block_n))
    "square": (37, 37, 4, (16, 32)),
    "decode grouped": (70, 9, 2, (32, 16)),
}
MASKS = ["window:20", "documents:9", "documents-full:8", "prefix:13", "documents:5+20+12"]
PATHS = ["triton_flash", "triton_tile_softmax", "triton_naive", "triton_s_only", "triton_split_kv"]


def problem(tokens: int, queries: int, kv_heads: int, requires_grad: bool = False):
    q, k, v = make_qkv(B, H, tokens, D, torch.float16, "cpu", tokens + 3 * queries)
    q = q[:, :, tokens - queries :].contiguous()
    k, v = (x[:, :kv_heads].contiguous() for x in (k, v))
    return [x.requires_grad_(requires_grad) for x in (q, k, v)]


def point(impl, text, tokens, queries, kv_heads, blocks, direction="forward") -> Point:
    return Point(
        impl, B, H, tokens, D, "float16", text, *blocks,
        query_tokens=queries, kv_heads=kv_heads, direction=direction,
    )  # fmt: skip


def modelled(p: Point) -> dict:
    return {(t.kernel, t.tensor, t.op): t.as_issued for t in transfers(p) if t.as_issued}


def cases():
    for name, (tokens, queries, kv_heads, blocks) in SHAPES.items():
        for text in MASKS:
            if text.count("+") and tokens != 37:
                continue  # the lengths sum to 37
            yield pytest.param(text, tokens, queries, kv_heads, blocks, id=f"{text} {name}")


@pytest.mark.parametrize("impl", PATHS)
@pytest.mark.parametrize("text, tokens, queries, kv_heads, blocks", list(cases()))
def test_counted_equals_model_under_masks(impl, text, tokens, queries, kv_heads, blocks):
    q, k, v = problem(tokens, queries, kv_heads)
    with count_traffic() as counter:
        kernels.attention(q, k, v, impl=impl, mask=text, block_m=blocks[0], block_n=blocks[1])
    counted = {key: n for key, n in counter.by_stage().items() if n}
    assert counted == modelled(point(impl, text, tokens, queries, kv_heads, blocks))


@pytest.mark.parametrize("impl", ["triton_flash", "triton_naive", "triton_s_only"])
@pytest.mark.parametrize("text", MASKS)
def test_every_backward_counted_equals_its_model_under_masks(impl, text):
    tokens, blocks = 37, (16, 32)
    q, k, v = problem(tokens, tokens, 2, requires_grad=True)
    out = kernels.attention(q, k, v, impl=impl, mask=text, block_m=blocks[0], block_n=blocks[1])
    with count_traffic() as counter:
        out.backward(torch.randn_like(out))
    counted = {key: n for key, n in counter.by_stage().items() if n}
    backward = point(impl, text, tokens, tokens, 2, blocks, "backward")
    assert counted == {key: n for key, n in as_issued_backward(backward).items() if n}
