"""The inference dimensions on a point: names, command line, sweep, records and refusals."""

import argparse
import math

import pytest
import torch

from kernels import catalog
from kernels.impl.inputs import make_qkv
from kernels.impl.reference import future_mask, reference_float64
from kernels.io.records import _disagreement
from kernels.measure.gates import no_backward, shape_not_taken
from kernels.models import cost
from kernels.planning import sweep
from kernels.planning.point import Point, add_cli_arguments


def decode_point(**kw) -> Point:
    fields = dict(impl="triton_flash", batch=2, heads=8, tokens=77, head_dim=16, dtype="float16", mask=True)
    return Point(**(fields | kw))


def test_square_names_are_unchanged_and_inference_names_round_trip():
    square = decode_point(query_tokens=77, kv_heads=8)
    assert square.query_tokens is None and square.kv_heads is None and square.square
    assert square.name == "triton_flash/float16/B2-H8-T77-d16-causal-bm64-bn64-normal"
    point = decode_point(query_tokens=1, kv_heads=2)
    assert point.name == "triton_flash/float16/B2-H8-KV2-Q1-T77-d16-causal-bm64-bn64-normal"
    assert Point.from_name(point.name) == point
    assert (point.queries, point.kv, point.group_size, point.kv_groups) == (1, 2, 4, 4)


def test_the_command_line_round_trips():
    parser = argparse.ArgumentParser()
    add_cli_arguments(parser)
    point = decode_point(query_tokens=7, kv_heads=1)
    assert Point.from_cli(parser.parse_args(point.cli_args())) == point


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"query_tokens": 78}, "query_tokens=78: at most tokens=77"),
        ({"kv_heads": 3}, "kv_heads=3: must divide heads=8"),
        ({"kv_heads": 0}, "kv_heads=0: must be an integer of at least 1"),
        ({"query_tokens": True}, "query_tokens=True: must be an integer"),
    ],
)
def test_bad_dimensions_are_refused_naming_the_field(kw, message):
    with pytest.raises(ValueError, match=message):
        decode_point(**kw)


def test_a_grid_crosses_the_dimensions_and_kv_follows_the_cache():
    grid = {
        "impls": ["torch_naive"],
        "batch": [1],
        "heads": [8],
        "head_dim": [128],
        "dtype": ["float32"],
        "causal": [False],
        "kv_heads": [None, 2],
        "query_tokens": [1],
        "tokens_across_cache": {"from": 0.25, "to": 4, "fills": "kv"},
    }
    cache = 3 << 20
    tokens = sweep.tokens_of(grid, "float32", cache)
    kv_bytes = [2 * 8 * t * 128 * 4 for t in tokens]  # K + V with a head per query head
    assert kv_bytes[0] == pytest.approx(cache / 4, rel=0.05) and kv_bytes[-1] == pytest.approx(
        4 * cache, rel=0.05
    )
    assert all(b / a == pytest.approx(2, rel=0.05) for a, b in zip(kv_bytes, kv_bytes[1:], strict=False))
    points = sweep.grid_points(grid, cache)
    assert len(points) == 2 * len(tokens) and {p.kv for p in points} == {8, 2}
    with pytest.raises(ValueError, match="fills: kv needs one heads"):
        sweep.tokens_of(grid | {"heads": [8, 16]}, "float32", cache)


def test_an_older_record_reads_as_the_square_problem():
    record = {"impl": "torch_naive", "tokens": 64, "heads": 2, "pass": "forward"}
    assert _disagreement(record, {"query_tokens": 64, "kv_heads": 2}) is None
    assert "query_tokens=64, but its file name says query_tokens=1" in _disagreement(
        record, {"query_tokens": 1}
    )


def test_refusals_become_skip_reasons():
    assert "fewer queries than tokens" in no_backward(decode_point(query_tokens=5, direction="backward"))
    assert no_backward(decode_point(kv_heads=2, direction="backward")) is None
    assert shape_not_taken(decode_point(query_tokens=5, kv_heads=2)) is None  # ours take both
    square_only = catalog.Implementation(
        "square_only", print, "none", "torch_naive", takes=frozenset({"kv_heads"})
    )
    assert square_only.shape_refusal(query_tokens=True, kv_heads=True) == (
        "impl='square_only' does not take query_tokens (its registration's takes= lists kv_heads)"
    )
    assert square_only.shape_refusal(query_tokens=False, kv_heads=True) is None


def test_the_reference_aligns_causal_to_the_end():
    """The last query of a sequence sees every key; row i of Tq sees i + T − Tq + 1 keys."""
    mask = future_mask(10, "cpu", 3)
    assert (~mask).sum(dim=1).tolist() == [8, 9, 10]
    q, k, v = make_qkv(1, 4, 10, 16, torch.float32, "cpu", 3, query_tokens=3, kv_heads=2)
    grouped = reference_float64(q, k, v, causal=True)
    whole = reference_float64(
        q, k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1), causal=True
    )  # the definition with K and V copied per head: the same numbers
    assert torch.equal(grouped, whole)
    full_q = make_qkv(1, 4, 10, 16, torch.float32, "cpu", 3, kv_heads=2)[0]
    assert full_q.shape == (1, 4, 10, 16) and k.shape == (1, 2, 10, 16)


def test_the_model_counts_kv_once_per_kv_head_and_scores_per_query():
    point = decode_point(impl="torch_naive", query_tokens=1, kv_heads=2, mask=False)
    moved = cost.compulsory_transfers(point)
    assert moved[("scores", "K", "load")] == 2 * 2 * 77 * 16 * 2
    assert moved[("scores", "S", "store")] == 2 * 8 * 1 * 77 * 2
    assert cost.flops(point) == 4 * 2 * 8 * 1 * 77 * 16
    causal = decode_point(impl="torch_naive", query_tokens=1)
    assert cost.flops(causal) == 2 * 2 * 8 * 16 * (
        2 * 77 - 1
    )  # the last row sees all 77 keys, less half a key
    square = decode_point(impl="torch_naive")
    assert cost.flops(square) == 4 * 2 * 8 * 77 * 77 * 16 // 2
    assert math.isclose(cost.flops(causal) / cost.flops(point), (2 * 77 - 1) / (2 * 77))


# --- num_splits: a sweep dimension and a flag, like the blocks ---------------------------------


def split_point(**kw) -> Point:
    return decode_point(impl="triton_split_kv", query_tokens=1, kv_heads=2, **kw)


def test_num_splits_names_only_points_that_set_it_and_round_trips():
    default = split_point()
    assert default.num_splits is None
    assert default.name == "triton_split_kv/float16/B2-H8-KV2-Q1-T77-d16-causal-bm64-bn64-normal"
    asked = split_point(num_splits=4)
    assert asked.name == "triton_split_kv/float16/B2-H8-KV2-Q1-T77-d16-causal-bm64-bn64-ns4-normal"
    assert Point.from_name(asked.name) == asked and asked.shape()["num_splits"] == 4
    parser = argparse.ArgumentParser()
    add_cli_arguments(parser)
    assert Point.from_cli(parser.parse_args(asked.cli_args())) == asked
    # a path whose registration does not take the option keeps no split count, and its name
    assert decode_point(num_splits=4) == decode_point()


def test_num_splits_bad_values_are_refused_naming_the_field(capsys):
    for bad in (0, True, 65536, "4"):
        with pytest.raises(ValueError, match=rf"num_splits={bad!r}: must be an integer from 1 to 65,535"):
            split_point(num_splits=bad)
    parser = argparse.ArgumentParser()
    add_cli_arguments(parser)
    square = ["--tokens", "64", "--head-dim", "16", "--dtype", "float16"]
    with pytest.raises(ValueError, match="--num-splits applies to --impl triton_split_kv only, not sdpa"):
        Point.from_cli(parser.parse_args(["--impl", "sdpa", *square, "--num-splits", "4"]))
    with pytest.raises(SystemExit):
        parser.parse_args(["--impl", "triton_split_kv", *square, "--num-splits", "0"])
    assert "argument --num-splits: 0 must be at least 1" in capsys.readouterr().err


def test_a_grid_sweeps_num_splits_for_the_paths_that_take_it():
    grid = {
        "impls": ["triton_split_kv", "triton_flash"],
        "batch": [1],
        "heads": [8],
        "kv_heads": [2],
        "query_tokens": [1],
        "tokens": [256],
        "head_dim": [16],
        "dtype": ["float16"],
        "causal": [False],
        "blocks": [[64, 64]],
        "num_splits": [None, 2],
    }
    names = [p.name.split("/")[-1] for p in sweep.grid_points(grid)]
    assert names == [
        "B1-H8-KV2-Q1-T256-d16-full-bm64-bn64-normal",
        "B1-H8-KV2-Q1-T256-d16-full-bm64-bn64-ns2-normal",
        "B1-H8-KV2-Q1-T256-d16-full-bm64-bn64-normal",  # triton_flash: no split count
    ]


def test_the_models_and_launches_follow_a_points_num_splits():
    """The traffic model, the partials' memory, the programs and the planned launches at the
    point's own split count, the default rule's where it sets none."""
    from kernels.build.variants import point_launches
    from kernels.paths.triton_split_kv import model

    default, asked = split_point(tokens=256), split_point(tokens=256, num_splits=2)
    assert model.point_plan(default)[0] == 4 and model.point_plan(asked)[0] == 2  # 256 / 64: 4 tiles
    assert model.as_issued(asked) == model.as_issued(default, 2) != model.as_issued(default)
    assert model.working(asked) * 2 == model.working(default)
    assert model.programs(asked) * 2 == model.programs(default)
    grids = [launch.grid for launch in point_launches(asked)]
    assert grids[0][2] == 2 and [launch.grid for launch in point_launches(default)][0][2] == 4


def test_the_measure_line_names_the_inference_dimensions_and_splits():
    from kernels.cli.measure import described

    assert described(split_point(num_splits=2)) == (
        "triton_split_kv B=2 H=8 kv_heads=2 T=77 query_tokens=1 d=16 float16 causal=True "
        "inputs=normal blocks=64×64 num_splits=2"
    )
    square = decode_point(impl="torch_naive")
    assert described(square) == "torch_naive B=2 H=8 T=77 d=16 float16 causal=True inputs=normal"
