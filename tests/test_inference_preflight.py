"""The GPU preflight plans the inference validation cases: every shape of
kernels.planning.cases a path's registration takes, on meta inputs with the shape's query rows
(q) and K/V heads (k, v), so that the kernels it compiles are those validation launches; a path
that does not take a dimension gets none of the shapes that have it. Planning only: nothing
compiles or runs."""

from dataclasses import replace

import pytest
import torch

from kernels import catalog
from kernels.build.preflight import validation_plan
from kernels.planning.cases import CUDA_SHAPES, INFERENCE_CUDA_SHAPES, Shape, case_key, shapes_for

DTYPE, BLOCK_M, BLOCK_N = "bfloat16", 64, 64
MASKS = (False, True)


def planned(impl: str) -> dict[str, list[set[tuple[int, ...]]]]:
    """Validation case key → the shapes of each planned launch's tensor arguments."""
    out: dict[str, list[set[tuple[int, ...]]]] = {}
    for item in validation_plan([(impl, DTYPE, BLOCK_M, BLOCK_N)]):
        tensors = {tuple(a.shape) for a in item.launch.args if isinstance(a, torch.Tensor)}
        out.setdefault(item.what, []).append(tensors)
    return out


def keys(impl: str, shapes) -> set[str]:
    return {case_key(impl, s, DTYPE, causal, BLOCK_M, BLOCK_N) for s in shapes for causal in MASKS}


def q_and_kv(shape: Shape) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """q's (B, H, Tq, d) and k's and v's (B, Hkv, T, d), as the shape says them."""
    b, h, t, d = shape.batch, shape.heads, shape.tokens, shape.head_dim
    return (b, h, shape.query_tokens or t, d), (b, shape.kv_heads or h, t, d)


@pytest.mark.parametrize("impl", ["triton_flash", "triton_split_kv"])
def test_a_path_that_takes_both_dimensions_plans_every_inference_case_at_its_shape(impl):
    plan = planned(impl)
    assert set(plan) == keys(impl, shapes_for("cuda"))  # the square cases and the inference ones
    for shape in INFERENCE_CUDA_SHAPES:
        q, kv = q_and_kv(shape)
        for key in keys(impl, [shape]):
            # the first launch reads q, k and v (the split path's merge reads its partials)
            first = plan[key][0]
            assert q in first and kv in first, (key, first)
    if impl == "triton_split_kv":  # partials, then their merge
        assert all(len(launches) == 2 for launches in plan.values())


@pytest.mark.parametrize("taken", [frozenset(), frozenset({"kv_heads"})])
def test_a_path_plans_no_case_with_a_dimension_its_registration_does_not_take(taken, monkeypatch):
    name = "triton_flash_limited"
    entry = replace(catalog.get("triton_flash"), name=name, takes=taken)
    monkeypatch.setitem(catalog._registered, name, entry)
    wanted = [
        s
        for s in INFERENCE_CUDA_SHAPES
        if (s.query_tokens is None or "query_tokens" in taken) and (s.kv_heads is None or "kv_heads" in taken)
    ]
    assert bool(wanted) == bool(taken)  # the kv_heads-only case, or none
    plan = planned(name)
    assert set(plan) == keys(name, CUDA_SHAPES + tuple(wanted))
    for shape in CUDA_SHAPES + tuple(wanted):
        q, kv = q_and_kv(shape)
        assert all(q in plan[key][0] and kv in plan[key][0] for key in keys(name, [shape]))


def test_the_backward_cases_stay_the_square_ones():
    """A backward needs as many queries as keys: its validation plans the square cases only."""
    plan = validation_plan([("triton_flash", DTYPE, BLOCK_M, BLOCK_N)], direction="backward")
    backward = shapes_for("cuda", backward=True)
    assert {p.what for p in plan} == {
        case_key("triton_flash", s, DTYPE, c, BLOCK_M, BLOCK_N, "backward") for s in backward for c in MASKS
    }
