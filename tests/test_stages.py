"""Each stage of the materialized paths, timed as it runs in the chain: the chain computes what
the implementation does, the stage names and costs agree with the model's, a real torch_naive
point's stage times are present, positive and sum to about the call's own time (a loose
bound: a sanity check, not a speed claim), the long table derives its rates, and the sweep's
T values follow a cache size."""

import json
import math

import pytest
import torch

from kernels.impl.reference import future_mask
from kernels.io.records import validate_record
from kernels.io.tables import REST, timed_stage_table
from kernels.measure.run import measure
from kernels.measure.stages import time_stages
from kernels.measure.timing import Windows, windows
from kernels.models.cost import flops, matrix_bytes
from kernels.models.stages import stage_costs, stage_names
from kernels.paths.torch_naive.forward import torch_naive, torch_naive_stages
from kernels.paths.torch_naive.model import STAGES as TORCH_STAGES
from kernels.planning import sweep
from kernels.planning.point import Point


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("causal", [True, False])
def test_the_chain_computes_torch_naive_stage_by_stage(dtype, causal):
    torch.manual_seed(3)
    q, k, v = (torch.randn(2, 3, 77, 32).to(dtype) for _ in range(3))
    stages, out = torch_naive_stages(q, k, v, causal)
    assert [name for name, _ in stages] == list(
        stage_names(Point("torch_naive", 2, 3, 77, 32, "float32", causal))
    )
    out.fill_(float("nan"))
    for _, run in stages:
        run()
    assert torch.equal(out, torch_naive(q, k, v, causal))


def test_each_stage_reads_what_the_stage_before_wrote():
    """The scale stage run twice without the scores before it would scale twice: every
    pass reruns the chain from the top, so the output stays the implementation's."""
    q, k, v = (torch.randn(1, 1, 64, 16) for _ in range(3))
    stages, out = torch_naive_stages(q, k, v, True)
    time_stages(stages, "cpu", 1 << 20)
    assert torch.allclose(out, torch_naive(q, k, v, True), atol=1e-6)


def test_stage_costs_by_hand():
    T, d = 1000, 64
    point = Point("torch_naive", 2, 3, T, d, "float16", True)
    G, matrix = 6, 6 * T * T * 2
    costs = {c.stage: c for c in stage_costs(point)}
    assert list(costs) == list(TORCH_STAGES)
    assert costs["scores"].flops == costs["pv"].flops == 2 * G * T * T * d  # torch multiplies every tile
    assert costs["scale"].bytes == 2 * matrix and costs["scale"].flops == 0
    assert costs["mask"].other_bytes == G * T * T  # the boolean mask, read for every (b, h)
    assert costs["softmax"].exps == G * T * T
    # S read, float32 written and read back, P written
    assert costs["softmax"].handoff_bytes == 2 * matrix + 2 * G * T * T * 4
    assert costs["pv"].other_bytes == 2 * G * T * d * 2
    assert matrix == matrix_bytes(point)
    naive = stage_costs(Point("triton_naive", 1, 1, 300, 64, "float16", True))
    assert [c.stage for c in naive] == ["scores", "softmax", "pv"]
    assert sum(c.flops for c in naive) == flops(Point("triton_naive", 1, 1, 300, 64, "float16", True))
    assert stage_costs(Point("sdpa", 1, 1, 300, 64, "float16", True)) == []


def test_a_real_point_times_its_stages():
    point = Point("torch_naive", 1, 2, 512, 64, "float32", True)
    # one thread: on a busy machine (the suite's other worker) torch's threads wait out whole
    # scheduler slices, which hits the call and its stages unevenly; one thread waits on none
    threads = torch.get_num_threads()
    try:  # within the ci preset's windows: each stage still gets its fewest passes
        with windows(Windows(cpu_seconds=0.3, stage_seconds=0.1)):
            record = measure(point, "cpu", threads=1)
    finally:
        torch.set_num_threads(threads)
    validate_record(record)
    assert record["status"] == "ok"
    stages = record["stage_times"]
    assert [s["stage"] for s in stages] == list(stage_names(point))
    for stage in stages:
        assert stage["time_ms"] > 0 and stage["cold_time_ms"] > 0 and stage["repeats"] >= 3
        assert stage["time_p10_ms"] <= stage["time_ms"] <= stage["time_p90_ms"]
    total = sum(s["time_ms"] for s in stages)
    # loose: the call also allocates its S and P afresh; a busy machine moves either side
    assert total / 10 < record["time_ms"] < 10 * total
    table = timed_stage_table([record])
    assert list(table["stage"]) == [*stage_names(point), REST]
    rest = table[table["stage"] == REST].iloc[0]
    assert math.isclose(rest["time_ms"], record["time_ms"] - total)
    scale = table[table["stage"] == "scale"].iloc[0]
    assert math.isclose(scale["gbps"], scale["bytes"] / (scale["time_ms"] / 1e3) / 1e9)
    assert math.isclose(scale["warm_speedup"], scale["cold_time_ms"] / scale["time_ms"])
    assert math.isclose(scale["sp_over_cache"], 2 * 2 * 512**2 * 4 / record["last_cache_bytes"])
    json.dumps(record, allow_nan=False)


def test_fused_and_interpreted_points_have_no_stage_times():
    fused = measure(Point("sdpa", 1, 1, 128, 64, "float32", False), "cpu")
    assert fused["stage_times"] is None and fused["stage_time_reason"] is None
    interpreted = measure(Point("triton_naive", 1, 1, 64, 16, "float16", False), "cpu")
    assert interpreted["stage_times"] is None
    assert "interpreter" in interpreted["stage_time_reason"]


def test_tokens_follow_the_cache_size():
    span = {"from": 1 / 16, "to": 16}
    tokens = sweep.tokens_across_cache(span, 32 << 20, "float32")
    assert tokens == [512, 720, 1024, 1456, 2048, 2896, 4096, 5792, 8192]
    assert all(b / a <= 1.5 for a, b in zip(tokens, tokens[1:], strict=False))
    # S + P = 2·T²·4 from a sixteenth to sixteen times the cache
    assert 2 * tokens[0] ** 2 * 4 == (32 << 20) / 16 and 2 * tokens[-1] ** 2 * 4 == 16 * (32 << 20)
    assert sweep.tokens_across_cache(span, 8 << 20, "float32")[-1] == 4096  # a laptop's cache
    finer = sweep.tokens_across_cache(span | {"step": 2**0.25}, 32 << 20, "float32")
    assert len(finer) == 17


def test_a_cache_too_large_for_any_point_is_refused_naming_the_keys():
    """A cache_bytes of 10³⁰ would ask for T beyond MAX_TOKENS: refused naming cache_bytes and
    tokens_across_cache, not a Point's own bound on T."""
    with pytest.raises(ValueError, match=r"tokens_across_cache: to=16 .* \(cache_bytes, or the machine's\)"):
        sweep.tokens_across_cache({"from": 1 / 16, "to": 16}, 10**30, "float32")


def test_a_grid_following_the_cache_is_planned_per_dtype():
    grid = {
        "impls": ["torch_naive"],
        "tokens": [1],
        "tokens_across_cache": {"from": 0.25, "to": 4},
        "batch": [1],
        "heads": [1],
        "head_dim": [64],
        "dtype": ["float32", "bfloat16"],
        "causal": [False],
        "blocks": [[64, 64]],
    }
    grids = sweep.resolved([grid], 1 << 20)
    assert [g["dtype"] for g in grids] == [["float32"], ["bfloat16"]]
    # T = √(r·2²⁰ / (2·e)) for r = 1/4 … 4, rounded to a multiple of 16
    assert grids[0]["tokens"] == [176, 256, 368, 512, 720]
    assert grids[1]["tokens"] == [256, 368, 512, 720, 1024]
    assert len(sweep.points(grids)) == 10
    with pytest.raises(ValueError, match="cache_bytes"):
        sweep.resolved([grid], None)


def test_the_mask_stage_masks_the_future():
    q, k, v = (torch.randn(1, 1, 33, 16) for _ in range(3))
    stages, _ = torch_naive_stages(q, k, v, True)
    for _, run in stages[:3]:
        run()
    s = stages[0][1]()  # scores again: S unmasked ...
    stages[2][1]()  # ... masked in place
    assert torch.isinf(s[0, 0][future_mask(33, "cpu")]).all()


@pytest.mark.parametrize("causal", [True, False])
def test_triton_naive_stages_are_its_three_kernels(causal):
    """Under the interpreter (correctness only: never timed), the stages run in order give
    the implementation's output."""
    from kernels.paths.triton_naive.forward import TRITON_NAIVE_STAGES, triton_naive, triton_naive_stages

    torch.manual_seed(5)
    q, k, v = (torch.randn(1, 2, 45, 16).half() for _ in range(3))
    stages, out = triton_naive_stages(q, k, v, causal, 16, 32)
    assert tuple(name for name, _ in stages) == TRITON_NAIVE_STAGES
    assert stage_names(Point("triton_naive", 1, 2, 45, 16, "float16", causal)) == TRITON_NAIVE_STAGES
    for _, run in stages:
        run()
    assert torch.equal(out, triton_naive(q, k, v, causal, 16, 32))


def test_s_only_stage_costs_by_hand():
    """triton_s_only's stages are its three kernels, costed from its as-issued model: S written
    once and read twice (the hand-off), an exponential for each score read, and no P."""
    T, d, G = 300, 64, 2
    point = Point("triton_s_only", 1, G, T, d, "float16", False, 64, 64)
    assert stage_names(point) == ("scores", "stats", "pv")
    costs = {c.stage: c for c in stage_costs(point)}
    matrix = G * T * T * 2
    assert costs["scores"].handoff_bytes == matrix and costs["scores"].exps == 0
    assert costs["stats"].handoff_bytes == costs["pv"].handoff_bytes == matrix  # full rows, no mask
    assert costs["stats"].exps == costs["pv"].exps == G * T * T
    assert costs["stats"].flops == 0 and costs["scores"].flops == costs["pv"].flops == flops(point) // 2
    assert all(c.footprint_bytes == matrix for c in costs.values())  # S only, never P
    assert costs["stats"].other_bytes == 2 * G * T * 4  # the rows' max and sum, stored
