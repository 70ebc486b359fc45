"""The per-stage roofline with a cache hierarchy, held against numbers worked out by hand."""

import csv
import json
import subprocess
import sys

import pytest

from kernels.cli import main
from kernels.io.computed_tables import columns
from kernels.models import stage_predictions
from kernels.models.hierarchy import Machine, from_ceilings, from_gpu, stage_time
from kernels.models.stage_type import StageCost
from kernels.models.stages import stage_costs
from kernels.planning.gpus import GPUS
from kernels.planning.point import Point

MIB = 1 << 20
# A made-up machine in round numbers: a 1,000 B cache at 1,000 B/s, a 10,000 B one at
# 100 B/s, DRAM at 10 B/s, 1,000 FLOP/s of products and 100 exponentials a second.
TOY = Machine(
    name="toy",
    levels=(("L1", 1_000, 1_000.0), ("L2", 10_000, 100.0)),
    dram_bytes_per_s=10.0,
    product_flops_per_s=lambda point: 1_000.0,
    exp_per_s=100.0,
    source="made up for the test",
)
ANY_POINT = Point("torch_naive", 1, 1, 16, 16, "float32", False)


def stage(footprint: int, flops: int = 0, exps: int = 0) -> StageCost:
    """1,000 B of hand-off and 5 B of other bytes."""
    return StageCost("x", "a stage", 1_000, 5, footprint, flops, exps)


def toy_time(cost: StageCost, *, optimistic: bool, cold: bool = False) -> dict:
    return stage_time(cost, TOY, point=ANY_POINT, optimistic=optimistic, cold=cold)


@pytest.mark.parametrize("optimistic", [True, False])
def test_a_footprint_inside_the_first_level_is_served_there(optimistic):
    """400 B fits in L1 and in half of it: L1 serves all 1,000 B (1 s), DRAM the 5 other
    bytes (0.5 s); L1 bounds the stage."""
    found = toy_time(stage(400), optimistic=optimistic)
    assert found["bytes"] == {"L1": 1_000, "L2": 0, "DRAM": 5}
    assert found["seconds"]["L1"] == 1.0 and found["seconds"]["DRAM"] == 0.5
    assert (found["bound"], found["time_s"]) == ("L1", 1.0)


def test_a_footprint_between_the_levels_at_both_ends():
    """4,000 B: the optimistic end lets L1 serve 1,000/4,000 of the hand-off (250 B, 0.25 s)
    and L2 the rest (750 B, 7.5 s); the pessimistic end gives L1 nothing (4,000 B is over half
    of it) and L2 everything (it fits in half of L2): 1,000 B, 10 s."""
    low = toy_time(stage(4_000), optimistic=True)
    assert low["bytes"] == {"L1": 250, "L2": 750, "DRAM": 5}
    assert (low["bound"], low["time_s"]) == ("L2", pytest.approx(7.5))
    high = toy_time(stage(4_000), optimistic=False)
    assert high["bytes"] == {"L1": 0, "L2": 1_000, "DRAM": 5}
    assert (high["bound"], high["time_s"]) == ("L2", pytest.approx(10.0))


def test_a_footprint_past_the_last_level_goes_to_dram():
    """40,000 B: optimistic, L1 serves 1/40 (25 B), L1 and L2 together 1/4, so L2 225 B and
    DRAM 750 + 5 B (75.5 s); pessimistic, DRAM serves all 1,005 B (100.5 s)."""
    low = toy_time(stage(40_000), optimistic=True)
    assert low["bytes"] == pytest.approx({"L1": 25, "L2": 225, "DRAM": 755})
    assert (low["bound"], low["time_s"]) == ("DRAM", pytest.approx(75.5))
    high = toy_time(stage(40_000), optimistic=False)
    assert high["bytes"] == {"L1": 0, "L2": 0, "DRAM": 1_005}
    assert (high["bound"], high["time_s"]) == ("DRAM", pytest.approx(100.5))


def test_cold_takes_every_byte_from_dram():
    found = toy_time(stage(400), optimistic=True, cold=True)
    assert found["bytes"] == {"L1": 0, "L2": 0, "DRAM": 1_005}
    assert (found["bound"], found["time_s"]) == ("DRAM", pytest.approx(100.5))


def test_products_or_exponentials_bound_a_stage_when_they_take_longest():
    """Cold, the bytes take 100.5 s; 200,000 FLOPs take 200 s; 50,000 exponentials 500 s."""
    products = toy_time(stage(400, flops=200_000), optimistic=True, cold=True)
    assert (products["bound"], products["time_s"]) == ("products", 200.0)
    both = toy_time(stage(400, flops=200_000, exps=50_000), optimistic=True, cold=True)
    assert (both["bound"], both["time_s"]) == ("exponentials", 500.0)
    assert both["seconds"]["products"] == 200.0


CEILINGS = {
    "device": "cpu",
    "device_name": "a test CPU",
    "threads": 2,
    "copy_gbps": 10.0,
    "matmul_tflops": 0.5,
    "matmul_dtype": "float32",
    "levels": [
        {"level": "L1d", "bytes": 32768, "footprint_bytes": 16384, "copy_gbps": 100.0},
        {"level": "L2", "bytes": MIB, "footprint_bytes": MIB // 2, "copy_gbps": None, "reason": "too quick"},
        {"level": "L3", "bytes": 32 * MIB, "footprint_bytes": 16 * MIB, "copy_gbps": 40.0},
        {"level": "DRAM", "bytes": None, "footprint_bytes": 128 * MIB, "copy_gbps": 10.0},
    ],
    "exp_per_s": 1e9,
    "exp_reason": None,
    "call_us": 3.0,
}


def test_this_machine_from_its_ceilings():
    """The levels with a copy rate, smallest first (L2 has none); the one product rate for
    every dtype."""
    machine = from_ceilings(CEILINGS)
    assert machine.name == "this machine"
    assert machine.levels == (("L1d", 32768, 100e9), ("L3", 32 * MIB, 40e9))
    assert machine.dram_bytes_per_s == 10e9 and machine.exp_per_s == 1e9
    assert machine.largest_cache_bytes == 32 * MIB
    for dtype in ("float16", "float32"):
        assert machine.product_flops_per_s(Point("triton_naive", 1, 1, 16, 16, dtype, False)) == 0.5e12


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"matmul_tflops": None, "reason": "no GPU"}, "matmul_tflops is null (no GPU)"),
        ({"exp_per_s": None, "exp_reason": "not timed"}, "exp_per_s is null (not timed)"),
        ({"levels": None, "copy_gbps": None}, "copy_gbps is null"),
    ],
)
def test_from_ceilings_refuses_a_missing_rate_by_name(change, field):
    with pytest.raises(ValueError, match=field.replace("(", r"\(").replace(")", r"\)")):
        from_ceilings(CEILINGS | change)
    missing = {k: v for k, v in CEILINGS.items() if k != "exp_per_s"}
    with pytest.raises(ValueError, match="exp_per_s is missing"):
        from_ceilings(missing)


def test_the_gpus_as_machines():
    """A100: 5,120 B per clock of L2 at 1,410 MHz; 16 exponentials per clock on each of 108
    SMs. H100 and H200 share one GH100 L2 rate and 3.9 T exponentials a second."""
    a100 = from_gpu(GPUS["A100"])
    assert a100.levels == (("L2", 40 * MIB, pytest.approx(5120 * 1410e6)),)
    assert a100.dram_bytes_per_s == 2039e9
    assert a100.exp_per_s == pytest.approx(16 * 108 * 1410e6)
    torch32 = Point("torch_naive", 1, 1, 16, 16, "float32", False)
    triton32 = Point("triton_naive", 1, 1, 16, 16, "float32", False)
    assert a100.product_flops_per_s(torch32) == 19.5e12 and a100.product_flops_per_s(triton32) == 156e12
    h100, h200 = from_gpu(GPUS["H100"]), from_gpu(GPUS["H200"])
    assert h100.levels[0][2] == h200.levels[0][2] > a100.levels[0][2]
    assert h100.exp_per_s == h200.exp_per_s == 3.9e12


def test_the_h200_softmax_at_8192_tokens_by_hand():
    """S and P are 8,192² × 2 B = 128 MiB each: the softmax reads one and writes the other,
    256 MiB, far past the 60 MiB L2. Optimistic, L2 serves 60/256 of it and DRAM 196 MiB at
    4.8 TB/s; pessimistic, DRAM serves all 256 MiB. 8,192² exponentials at 3.9 T/s take less."""
    point = Point("triton_naive", 1, 1, 8192, 128, "float16", False, 64, 64)
    softmax = next(s for s in stage_costs(point) if s.stage == "softmax")
    assert softmax.handoff_bytes == softmax.footprint_bytes == 256 * MIB and softmax.other_bytes == 0
    h200 = from_gpu(GPUS["H200"])
    low = stage_time(softmax, h200, point=point, optimistic=True)
    assert low["bytes"]["L2"] == 60 * MIB and low["bytes"]["DRAM"] == 196 * MIB
    assert (low["bound"], low["time_s"]) == ("DRAM", pytest.approx(196 * MIB / 4.8e12))
    assert low["seconds"]["exponentials"] == pytest.approx(8192**2 / 3.9e12)
    high = stage_time(softmax, h200, point=point, optimistic=False)
    assert high["time_s"] == pytest.approx(256 * MIB / 4.8e12)


TINY_SWEEP = {
    "impls": ["torch_naive", "triton_naive", "triton_flash"],
    "tokens": [64],
    "batch": [1],
    "heads": [1],
    "head_dim": [16],
    "dtype": ["float32"],
    "causal": [True],
    "blocks": [[16, 16]],
}


def test_stage_prediction_rows_for_a_tiny_sweep(tmp_path):
    """torch_naive's five stages and triton_naive's three, on four targets; the fused path has
    no stages. Without usable ceilings only the GPUs' rows are written, and the reason given."""
    out = tmp_path / "stage_predictions.csv"
    count, left_out = stage_predictions.write(TINY_SWEEP, CEILINGS, out)
    assert (count, left_out) == ((5 + 3) * 4, None)
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == columns("stage_predictions.csv")
    assert {r["target"] for r in rows} == {"A100", "H100", "H200", "this machine"}
    assert [r["stage"] for r in rows if r["impl"] == "torch_naive" and r["target"] == "H200"] == [
        "scores",
        "scale",
        "mask",
        "softmax",
        "pv",
    ]
    for r in rows:
        assert (
            float(r["predicted_warm_low_ms"])
            <= float(r["predicted_warm_high_ms"])
            <= float(r["predicted_cold_ms"])
        )
        assert int(r["handoff_bytes"]) <= int(r["bytes"])
    mine = [r for r in rows if r["target"] == "this machine"]
    assert {r["largest_cache_bytes"] for r in mine} == {str(32 * MIB)}
    count, left_out = stage_predictions.write(TINY_SWEEP, CEILINGS | {"matmul_tflops": None}, out)
    assert count == (5 + 3) * 3 and "matmul_tflops" in left_out


def test_the_predict_command_names_this_machine(tmp_path, capsys):
    path = tmp_path / "ceilings.json"
    path.write_text(json.dumps(CEILINGS))
    args = ["predict", "--impl", "torch_naive", "--tokens", "2048", "--head-dim", "64", "--dtype", "float32"]
    assert main([*args, "--stages", "--ceilings", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["target"], r["stage"]) for r in rows[-4:]] == [
        ("this machine", s) for s in ("scores", "scale", "softmax", "pv")
    ]
    # S is 2,048² × 4 B = 16 MiB: it fits in half of the 32 MiB L3, so warm, the scale stage's
    # 32 MiB come from L3 at 40 GB/s; the optimistic end lets the 32 KiB L1d serve 32 KiB / 16
    # MiB of them first. Cold, all 32 MiB come from DRAM at 10 GB/s.
    scale = rows[-3]
    assert scale["predicted_warm_low_ms"] == pytest.approx(32 * MIB * (1 - 32 / (16 * 1024)) / 40e9 * 1e3)
    assert scale["predicted_warm_high_ms"] == pytest.approx(32 * MIB / 40e9 * 1e3)
    assert scale["predicted_cold_ms"] == pytest.approx(32 * MIB / 10e9 * 1e3)
    assert (scale["bound_warm_low"], scale["bound_cold"]) == ("L3", "DRAM")
    assert main([*args, "--stages", "--ceilings", str(path)]) == 0
    said = capsys.readouterr()
    assert "this machine" in said.out
    # these ceilings time no product of the stages' shapes: the square product's rate stands
    # in for them, and the command says so (it once changed a stage's time without a word)
    assert "note: this machine: the ceilings time no float32 product of the stages' shapes" in said.err
    assert "they hold no operation rates (ops)" in said.err and "an assumption" in said.err
    product = {"dtype": "float32", "head_dim": 64, "tokens": 2048, "flops_per_s": 1e11}
    timed = {"products": [product | {"shape": s} for s in ("qk", "pv")], "passes": [], "fixed_us": {}}
    machine = from_ceilings(CEILINGS | {"ops": timed})
    assert machine.product_assumption("float32") is None
    assert "they time the stages' products in float32 only" in machine.product_assumption("float16")
    path.write_text(json.dumps(CEILINGS | {"exp_per_s": None}))
    with pytest.raises(SystemExit, match="exp_per_s is null"):
        main([*args, "--stages", "--ceilings", str(path)])
    with pytest.raises(SystemExit, match="go with --stages"):
        main([*args, "--ceilings", str(path)])


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (json.dumps(CEILINGS | {"exp_per_s": 0}), "exp_per_s"),  # once a ZeroDivisionError
        (json.dumps(CEILINGS | {"matmul_tflops": float("nan")}), "NaN"),  # once changed the answer
        (json.dumps(CEILINGS | {"copy_gbps": -10.0}), "copy_gbps"),
        (json.dumps(CEILINGS | {"levels": [CEILINGS["levels"][0] | {"copy_gbps": float("nan")}]}), "NaN"),
        (json.dumps({k: v for k, v in CEILINGS.items() if k != "levels"}), "levels"),
    ],
)
def test_the_predict_command_refuses_ceilings_off_their_schema(tmp_path, text, field):
    path = tmp_path / "ceilings.json"
    path.write_text(text)
    args = ["predict", "--tokens", "2048", "--head-dim", "64", "--dtype", "float32", "--stages"]
    with pytest.raises(SystemExit, match=f"--ceilings {path}.*{field}"):
        main([*args, "--ceilings", str(path)])


def test_the_stage_predictions_need_no_torch(no_torch):
    done = subprocess.run(
        [sys.executable, "-m", "kernels", "predict", "--tokens", "4096", "--head-dim", "128", "--stages"],
        capture_output=True,
        text=True,
        timeout=60,
        env=no_torch,
    )
    assert done.returncode == 0, done.stderr
    assert "Predicted, not measured: triton_naive" in done.stdout and "softmax" in done.stdout


def test_a_stage_updating_in_place_moves_at_the_in_place_rates():
    """The same footprint past L2 (all 1,000 B from DRAM): at the copy's 10 B/s 100 s, at an
    in-place pass's measured 20 B/s 50 s; a level without an in-place rate keeps the copy's."""
    from dataclasses import replace

    machine = replace(TOY, in_place_rates={"DRAM": 20.0})
    copy_like = stage_time(stage(50_000), machine, point=ANY_POINT, optimistic=False)
    in_place = stage_time(replace(stage(50_000), in_place=True), machine, point=ANY_POINT, optimistic=False)
    assert copy_like["time_s"] == (1_000 + 5) / 10.0
    assert in_place["time_s"] == (1_000 + 5) / 20.0
    served_in_l1 = stage_time(replace(stage(400), in_place=True), machine, point=ANY_POINT, optimistic=True)
    assert served_in_l1["seconds"]["L1"] == 1.0


def test_the_ceilings_in_place_rates_reach_the_machine():
    ceilings = {
        "device": "cpu",
        "copy_gbps": 10.0,
        "matmul_tflops": 0.1,
        "exp_per_s": 1e9,
        "levels": [
            {
                "level": "L2",
                "bytes": 1 << 20,
                "footprint_bytes": 1 << 19,
                "copy_gbps": 50.0,
                "update_gbps": 80.0,
            },
            {
                "level": "DRAM",
                "bytes": None,
                "footprint_bytes": 1 << 28,
                "copy_gbps": 10.0,
                "update_gbps": 15.0,
            },
        ],
    }
    assert from_ceilings(ceilings).in_place_rates == {"L2": 80e9, "DRAM": 15e9}
    scale = next(
        c for c in stage_costs(Point("torch_naive", 1, 1, 64, 16, "float32", True)) if c.stage == "scale"
    )
    assert scale.in_place


def test_the_measure_command_refuses_ceilings_without_levels(tmp_path):
    path = tmp_path / "ceilings.json"
    path.write_text(json.dumps({k: v for k, v in CEILINGS.items() if k != "levels"}))
    args = ["measure", "--impl", "torch_naive", "--tokens", "16", "--head-dim", "16", "--dtype", "float32"]
    with pytest.raises(SystemExit, match=f"--ceilings {path}.*levels"):
        main([*args, "--ceilings", str(path), "--out", str(tmp_path / "record.json")])
    assert not (tmp_path / "record.json").exists()
