"""FlexAttention as a path (flex): compiled, under every mask through its BlockMask, against
the float64 definition; its model held to the BlockMask FlexAttention itself builds; what it
refuses (its uncompiled form, a CPU backward), each with its reason. Each compile of a new
shape and mask costs seconds on a CPU: two here."""

from __future__ import annotations

import pytest
import torch
from helpers import max_abs

import kernels
from kernels import masks
from kernels.impl.checks import UnavailableError
from kernels.impl.inputs import make_qkv
from kernels.impl.reference import reference_float64
from kernels.measure.gates import skip_reason
from kernels.measure.run import measure
from kernels.paths.flex import forward, model
from kernels.planning.point import Point

# a CPU's rates as the ceilings give them (what the floor is computed at)
CEILINGS = {"copy_gbps": 10.0, "matmul_tflops": 0.1}
TORCH_SAYS = "FlexAttention does not support backward on CPU"


def test_a_measured_point_is_the_definitions_and_records_its_compile_apart():
    """7 queries against 45 keys, 4 query heads sharing 2 K/V heads, a window: measured as the
    study measures it (first call apart, then timed), then called again without compiling."""
    point = Point("flex", 1, 4, 45, 16, "float32", "window:8", query_tokens=7, kv_heads=2)
    record = measure(point, "cpu", seed=5, ceilings=CEILINGS)
    assert record["status"] == "ok", record["reason"]
    assert record["max_abs_error"] < 1e-5
    assert record["compile_seconds"] > 0 and record["time_ms"] > 0
    assert record["traffic_counted_bytes"] is None  # not our kernel: never counted
    assert record["floor_ms"] > 0 and record["flops"] == model.flops(point)
    q, k, v = make_qkv(1, 4, 45, 16, torch.float32, "cpu", 5, query_tokens=7, kv_heads=2)
    with torch.compiler.set_stance("fail_on_recompile"):  # compiled once per shape and mask
        again = kernels.attention(q, k, v, impl="flex", mask="window:8")
    assert max_abs(again, reference_float64(q, k, v, causal=False, mask=masks.parse("window:8"))) < 1e-5


def test_documents_seen_whole_are_the_definitions():
    q, k, v = make_qkv(2, 2, 70, 32, torch.float32, "cpu", 6)
    text = "documents-full:20+37+13"
    got = kernels.attention(q, k, v, impl="flex", mask=text)
    assert max_abs(got, reference_float64(q, k, v, causal=False, mask=masks.parse(text))) < 1e-5


@pytest.mark.parametrize(
    "text", ["full", "causal", "window:100", "documents:300", "documents-full:200+500+324", "prefix:333"]
)
@pytest.mark.parametrize("queries", [1024, 129, 1])
def test_the_model_walks_the_tiles_flex_attentions_block_mask_lists(text, queries):
    """The model's visited tiles and BlockMask bytes against the BlockMask create_block_mask
    builds for the same mask (no kernel runs)."""
    point = Point("flex", 1, 1, 1024, 64, "float32", text, query_tokens=queries)
    block_mask = forward.block_mask_of(masks.parse(text), queries, 1024, "cpu")
    visited = block_mask.kv_num_blocks.sum() + block_mask.full_kv_num_blocks.sum()
    assert model.visited_tiles(point) == int(visited)
    tensors = [t for t in block_mask.as_tuple() if isinstance(t, torch.Tensor)]
    assert model.block_mask_bytes(point) == sum(t.numel() * t.element_size() for t in tensors)


def test_a_cpu_backward_is_refused_with_torchs_reason():
    point = Point("flex", 1, 1, 256, 64, "float32", "causal", direction="backward")
    why = skip_reason(point, "cpu", 1 << 20, ceilings=CEILINGS)
    assert why.startswith("unsupported on this device: ") and TORCH_SAYS in why
    q, k, v = (t.requires_grad_() for t in make_qkv(1, 1, 16, 16, torch.float32, "cpu", 0))
    with pytest.raises(UnavailableError, match=TORCH_SAYS):
        kernels.attention(q, k, v, impl="flex", causal=True)


@pytest.mark.parametrize(
    "setting, said",
    [({"TORCHDYNAMO_DISABLE": "1"}, "torch.compile is disabled"), ({"CXX": "no-such-c++"}, "no-such-c++")],
)
def test_where_it_cannot_compile_it_refuses_rather_than_materialize(monkeypatch, setting, said):
    for name, value in setting.items():
        monkeypatch.setenv(name, value)
    forward.why_not_compiled.cache_clear()
    try:
        point = Point("flex", 1, 1, 256, 64, "float32", "window:16")
        why = skip_reason(point, "cpu", 1 << 20, ceilings=CEILINGS)
        assert why.startswith("unsupported on this device: FlexAttention uncompiled") and said in why
        assert "materializes" in why
        q, k, v = make_qkv(1, 1, 16, 16, torch.float32, "cpu", 0)
        with pytest.raises(UnavailableError, match=said):
            kernels.attention(q, k, v, impl="flex", mask="window:4")
    finally:
        forward.why_not_compiled.cache_clear()
