"""Validation's side of the inference dimensions: a case of an inference shape is its own case
(keyed apart from the square one of the same T), the backward validates grouped K/V heads on
the paths that take them and have a backward (and no shape with fewer queries than keys), and
a forced SDPA backend is asked about the point's own shape."""

from __future__ import annotations

import json

import pytest
import torch

from kernels.impl.inputs import make_qkv
from kernels.io.records import read_leaf
from kernels.measure import gates, not_run
from kernels.measure import validate_backward as vb
from kernels.measure.validate import validate
from kernels.measure.verdict import Result
from kernels.planning.cases import Shape
from kernels.planning.point import Point
from kernels.spec import DEFAULT_INTERPRETER_LIMIT

SQUARE = Shape(2, 2, 29, 16)
DECODE = Shape(2, 2, 29, 16, query_tokens=1)
GROUPED = Shape(2, 2, 29, 16, kv_heads=1)
# grouped K/V heads (2 of 8, T under one block; 1 of 4, strided), and one with fewer queries
# than keys, which has no backward case
BACKWARD_SHAPES = (
    Shape(1, 8, 37, 16, kv_heads=2),
    Shape(1, 4, 21, 16, "bthd", kv_heads=1),
    Shape(1, 4, 21, 16, query_tokens=7, kv_heads=2),
)


def _written(results: list[Result], tmp_path) -> list[dict]:
    """The rows as validate --json writes them, read back through the schema."""
    path = tmp_path / "validation.json"
    path.write_text(json.dumps([r.to_dict() for r in results]))
    return read_leaf(path, "validation")


def test_a_case_not_run_of_an_inference_shape_is_keyed_apart_from_the_square_one(tmp_path):
    """A time limit keeps the square case that finished and writes the inference cases of the
    same B, H, T and d as timed out, instead of taking the square result for them."""
    grid = {"impls": ("torch_naive",), "dtypes": ("float32",), "causals": (True,)}
    finished = validate(shapes=(SQUARE,), **grid)
    assert [(r.verdict, r.query_tokens, r.kv_heads) for r in finished] == [("pass", None, None)]
    shapes = (SQUARE, DECODE, GROUPED)
    found = not_run.timed_out("the limit", finished, shapes=shapes, **grid)
    said = [(r.verdict, r.queries, r.kv) for r in found]
    assert said == [("pass", 29, 2), ("timeout", 1, 2), ("timeout", 29, 1)]
    assert found[0] is finished[0]
    skipped = not_run.unavailable("no GPU", shapes=shapes, backward_shapes=BACKWARD_SHAPES, **grid)
    assert len({not_run._case_of(r) for r in skipped}) == len(skipped) == 3 + 2
    rows = _written(found + skipped, tmp_path)  # every row says its shape, square ones T and H
    assert [(r["query_tokens"], r["kv_heads"]) for r in rows[:3]] == [(29, 2), (1, 2), (29, 1)]


def test_the_backward_validates_grouped_heads_on_the_paths_that_have_one(tmp_path):
    """triton_flash and torch_naive pass with 2 of 8 and 1 of 4 K/V heads, causal and not,
    their rows saying kv_heads and the bytes kept as the model counts them; a path without a
    backward has no grouped case, nor does a shape with fewer queries than keys."""
    impls = ("triton_flash", "torch_naive", "triton_tile_softmax")
    grid = {"impls": impls, "dtypes": ("float16",), "causals": (False, True)}
    results = vb.validate_backward(shapes=BACKWARD_SHAPES, **grid)
    assert all(r.verdict == "pass" and r.as_expected and r.direction == "backward" for r in results)
    said = [(r.impl, r.kv_heads, r.query_tokens, r.causal) for r in results]
    assert said == [
        (impl, kv, None, causal)
        for kv in (2, 1)
        for causal in (False, True)
        for impl in ("triton_flash", "torch_naive")
    ]
    assert all(r.saved_bytes == r.saved_model_bytes for r in results)
    not_run_ = vb.backward_not_run("x", "unavailable", *grid.values(), BACKWARD_SHAPES, 64, 64, 0)
    assert [not_run._case_of(r) for r in not_run_] == [not_run._case_of(r) for r in results]
    assert [r["kv_heads"] for r in _written(results, tmp_path)] == [r.kv_heads for r in results]


@pytest.mark.parametrize("causal", [False, True])
def test_the_widened_baseline_sums_a_k_v_heads_group(causal):
    """The float32-dP baseline gives torch_naive's own gradients on grouped heads too: dK and
    dV per K/V head, the sum over the query heads sharing it."""
    q, k, v = make_qkv(1, 4, 19, 16, torch.float32, "cpu", 5, kv_heads=2)
    do = vb.upstream_gradient(q, 6)
    plain = vb.gradients(lambda a, b, c: vb.torch_naive(a, b, c, causal), q, k, v, do)[1]
    widened = vb.widened_gradients(q, k, v, do, causal)
    for a, b in zip(plain, widened, strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_the_validate_command_runs_the_backward_with_kv_heads(tmp_path):
    from kernels.cli import main

    out = tmp_path / "v.json"
    args = ["validate", "--device", "cpu", "--impl", "torch_naive", "--dtype", "float32", "--causal", "true"]
    args += ["--tokens", "21", "--heads", "4", "--head-dim", "16", "--kv-heads", "2", "--backward"]
    assert main([*args, "--quiet", "--json", str(out)]) == 0
    rows = read_leaf(out, "validation")
    assert [(r["direction"], r["kv_heads"], r["verdict"]) for r in rows] == [
        ("forward", 2, "pass"),
        ("backward", 2, "pass"),
    ]


def test_a_forced_backend_is_asked_about_the_points_shape(monkeypatch):
    """sdpa_efficient on a CPU names the inference shape it refuses; a backend that refuses
    only that shape skips the inference point, not the square one."""
    decode = Point("sdpa_efficient", 1, 4, 33, 16, "float16", True, query_tokens=1, kv_heads=2)
    why = gates.backend_unavailable(decode, "cpu")
    assert why.startswith("unsupported on this device: PyTorch's efficient backend")
    assert "grouped K/V heads (enable_gqa)" in why and "lower-right causal bias" in why
    assert gates.skip_reason(decode, "cpu", DEFAULT_INTERPRETER_LIMIT) == why

    import kernels.paths.sdpa.forward as sdpa

    def grouped_refused(
        backend, dtype, device, head_dim, causal, query_tokens=None, kv_heads=None, mask=None
    ):
        return None if kv_heads is None else f"{backend} refuses grouped heads"

    monkeypatch.setattr(sdpa, "unavailable", grouped_refused)
    flash = Point("sdpa_flash", 1, 4, 33, 16, "float16", True)
    assert gates.backend_unavailable(flash, "cpu") is None
    grouped = Point("sdpa_flash", 1, 4, 33, 16, "float16", True, kv_heads=2)
    why = gates.backend_unavailable(grouped, "cpu")
    assert why == "unsupported on this device: flash refuses grouped heads"
