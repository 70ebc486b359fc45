"""Predictions for GPUs we do not have, held against numbers worked out by hand here."""

import json
import random
import subprocess
import sys
from dataclasses import replace

import pytest
from workflow_run import env

from kernels.models.cost import transfers
from kernels.models.predict import compare, dram_bytes, predict
from kernels.planning.gpus import GPUS
from kernels.planning.point import Point

MIB = 1 << 20
H200 = GPUS["H200"]


def seed_point(tokens: int, impl: str = "triton_naive", head_dim: int = 128) -> Point:
    return Point(impl, 1, 1, tokens, head_dim, "float16", False, 64, 64)


def test_h200_at_8192_tokens_by_hand():
    """S and P are 8,192² × 2 B = 128 MiB each. Stored and loaded once each, the hand-off
    moves 4 × 128 MiB; Q, K, V and O add 4 × 8,192 × 128 × 2 B = 8 MiB. 128 MiB is more than
    half of the H200's 60 MiB L2, so the high end takes all of it from DRAM; the low end lets
    L2 serve 60/128 of the hand-off."""
    found = predict(seed_point(8192), H200)
    handoff, qkvo = 4 * 128 * MIB, 8 * MIB
    assert found["bytes_S"] == 128 * MIB
    assert found["dram_high_bytes"] == handoff + qkvo
    assert found["dram_low_bytes"] == pytest.approx(handoff * (1 - 60 / 128) + qkvo)
    # the round trip alone, at 4.8 TB/s, bounds the time from below
    assert found["time_high_s"] >= handoff / 4.8e12
    assert found["time_high_s"] == pytest.approx((handoff + qkvo) / 4.8e12, rel=0.05)


def test_the_fused_kernel_at_8192_tokens_is_bound_by_its_products():
    """4 · 8,192² · 128 FLOPs at 989.5 dense TFLOP/s is 34.7 µs; its 8 MiB of Q, K, V, O take
    1.7 µs at 4.8 TB/s, so the products bound it and L2 makes no difference."""
    found = predict(seed_point(8192, "triton_flash"), H200)
    assert found["dram_low_bytes"] == found["dram_high_bytes"] == 8 * MIB
    assert found["time_low_s"] == found["time_high_s"] == pytest.approx(4 * 8192**2 * 128 / 989.5e12)
    assert found["bound"] == "attention_fwd: compute"


def test_the_band_collapses_far_below_and_far_above_l2():
    below = predict(seed_point(256), H200)  # S: 128 KiB
    assert below["dram_low_bytes"] == below["dram_high_bytes"] == 4 * 256 * 128 * 2
    above = predict(seed_point(65536), H200)  # S: 8 GiB
    assert above["dram_low_bytes"] < above["dram_high_bytes"]
    assert (above["dram_high_bytes"] - above["dram_low_bytes"]) / above["dram_high_bytes"] < 0.01
    between = predict(seed_point(4096), H200)  # S: 32 MiB, within L2 but over half of it
    assert between["dram_low_bytes"] == 4 * MIB and between["dram_high_bytes"] == 132 * MIB


def test_where_s_fits_the_l2_decides_the_band_per_gpu():
    """At T = 4,096, S (32 MiB) fits in the L2 of all three, but in half of none."""
    for gpu in GPUS.values():
        found = predict(seed_point(4096), gpu)
        assert found["handoff_in_l2_low"] == 1.0 and found["handoff_in_l2_high"] == 0.0


def test_without_l2_every_issued_byte_comes_from_dram():
    rng = random.Random(7)
    no_l2 = replace(H200, l2_bytes=0)
    for _ in range(50):
        point = Point(
            rng.choice(["triton_naive", "triton_flash", "triton_tile_softmax"]),
            rng.randint(1, 4),
            rng.randint(1, 8),
            rng.randint(1, 20000),
            rng.choice([16, 32, 64, 128, 256]),
            rng.choice(["float16", "bfloat16", "float32"]),
            rng.random() < 0.5,
            rng.choice([16, 32, 64, 128]),
            rng.choice([16, 32, 64, 128]),
        )
        issued = sum(t.as_issued for t in transfers(point))
        bare = predict(point, no_l2)
        assert bare["dram_low_bytes"] == bare["dram_high_bytes"] == issued
        with_l2 = predict(point, H200)
        assert with_l2["dram_low_bytes"] <= with_l2["dram_high_bytes"] <= issued
        assert with_l2["time_low_s"] <= with_l2["time_high_s"]


def test_fused_is_never_predicted_slower_than_materialized():
    for tokens in (256, 1024, 4096, 8192, 32768):
        for gpu in GPUS.values():
            both = compare(seed_point(tokens), gpu)
            assert 1.0 <= both["speedup_low"] <= both["speedup_high"]


def test_predict_command_needs_no_torch(no_torch):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernels",
            "predict",
            "--tokens",
            "4096",
            "8192",
            "--head-dim",
            "128",
            "--gpu",
            "H200",
            "A100",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=no_torch,
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [(r["gpu"], r["tokens"]) for r in rows] == [
        ("H200", 4096),
        ("A100", 4096),
        ("H200", 8192),
        ("A100", 8192),
    ]
    assert rows[2]["materialized_dram_high_bytes"] == 520 * MIB
    table = subprocess.run(
        [sys.executable, "-m", "kernels", "predict", "--tokens", "8192", "--head-dim", "128"],
        capture_output=True,
        text=True,
        timeout=60,
        env=no_torch,
    )
    assert table.returncode == 0 and "Predicted, not measured" in table.stdout
    assert "280.0–520.0" in table.stdout  # H200's band, as worked out above


def test_predict_command_refuses_bad_input_by_name():
    done = subprocess.run(
        [sys.executable, "-m", "kernels", "predict", "--tokens", "99999999", "--head-dim", "128"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env(),
    )
    assert done.returncode != 0 and "--tokens: 99,999,999 is more than 16,777,216" in done.stderr


def test_a_path_that_does_not_build_for_a_target_gets_no_prediction_there():
    from kernels.models.prediction_tables import prediction_rows

    sweep = {
        "impls": ["triton_flash"],
        "batch": [1],
        "heads": [1],
        "tokens": [512],
        "head_dim": [256],
        "dtype": ["float16"],
        "causal": [False],
        "inputs": ["normal"],
        "blocks": [[128, 64]],
    }
    name = "triton_flash/float16/B1-H1-T512-d256-full-bm128-bn64-normal"
    variant = {"variant": "v1", "kernel": "attention_fwd_kernel"}
    builds = [
        {
            "targets": ["sm_80", "sm_90"],
            "points": {name: ["v1"]},
            "variants": [
                variant
                | {"target": "sm_80", "status": "failed", "reason": "needs 212,992 B of shared memory"},
                variant | {"target": "sm_90", "status": "ok", "reason": None},
            ],
        }
    ]
    rows, kernel_rows = prediction_rows(sweep, builds, GPUS.values())
    fused = [r for r in rows if r["path"] == "fused"]
    on_a100 = [r for r in fused if r["gpu"] == "A100"]
    assert on_a100 and all("212,992 B" in r["launch_reason"] and "time_high_s" not in r for r in on_a100)
    assert all(r["launch_reason"] is None and r["time_high_s"] > 0 for r in fused if r["gpu"] != "A100")
    assert {r["gpu"] for r in kernel_rows if r["path"] == "fused"} == {"H100", "H200"}
    # the materialized path had no build here: predicted everywhere
    assert all(r["launch_reason"] is None for r in rows if r["path"] == "materialized")


def test_measured_gpu_times_are_held_against_their_predictions():
    """A GPU run's records meet the prediction of the same point on the GPU the run names."""
    import pandas as pd

    from kernels.models.prediction_tables import prediction_rows
    from reports.pages.predicted import measured

    sweep = {
        "impls": ["triton_naive", "triton_flash"],
        "batch": [1],
        "heads": [1],
        "tokens": [8192],
        "head_dim": [128],
        "dtype": ["float16"],
        "causal": [False],
        "inputs": ["normal"],
        "blocks": [[64, 64]],
    }
    predictions = pd.DataFrame(prediction_rows(sweep, [], GPUS.values())[0])
    key = {
        "batch": 1,
        "heads": 1,
        "tokens": 8192,
        "head_dim": 128,
        "dtype": "float16",
        "causal": False,
        "block_m": 64,
        "block_n": 64,
        "inputs": "normal",
        "status": "ok",
    }
    metrics = pd.DataFrame(
        [
            key | {"impl": "triton_naive", "time_ms": 0.2272, "dram_bytes": 400 * MIB},
            key | {"impl": "triton_flash", "time_ms": 0.0694, "dram_bytes": 9 * MIB},
        ]
    )
    assert measured(metrics, predictions, {"device": "cpu"}).empty
    found = measured(metrics, predictions, {"device": "cuda", "gpu_name": "NVIDIA H200"}).set_index("impl")
    assert set(found["gpu"]) == {"H200"}
    floor = predict(seed_point(8192), H200)["time_high_s"]
    assert found.loc["triton_naive", "measured_over_floor_high"] == pytest.approx(0.2272e-3 / floor)
    assert found.loc["triton_flash", "measured_over_floor_high"] == pytest.approx(
        0.0694e-3 / (4 * 8192**2 * 128 / 989.5e12)
    )
    assert found.loc["triton_naive", "dram_band_MiB"] == "280.0–520.0"


@pytest.mark.parametrize("impl", ["triton_naive", "triton_s_only", "triton_flash"])
def test_causal_skipped_tiles_never_make_dram_bytes_negative(impl):
    """A causal kernel loads fewer hand-off bytes than the compulsory ones (future tiles are
    never read): served from L2 or not, a transfer's DRAM bytes stay between 0 and issued."""
    for tokens in (256, 4096, 16384):
        point = Point(impl, 1, 1, tokens, 64, "float16", True, 64, 64)
        for gpu in GPUS.values():
            for transfer in transfers(point):
                for optimistic in (True, False):
                    moved = dram_bytes(transfer, point, gpu, optimistic=optimistic)
                    assert 0 <= moved <= max(transfer.as_issued, transfer.compulsory), (tokens, transfer)


@pytest.mark.parametrize("impl", ["triton_naive", "triton_s_only", "triton_flash"])
def test_a_prediction_carries_the_models_compulsory_and_issued_bytes(impl):
    """What the traffic headline draws comes from the predictions as the cost model gives it."""
    from kernels.models.cost import summarize

    point = Point(impl, 2, 3, 1000, 64, "float16", True, 64, 64)
    found, model = predict(point, GPUS["H200"]), summarize(point)
    assert found["compulsory_bytes"] == model["traffic_compulsory_bytes"]
    assert found["issued_bytes"] == model["traffic_model_bytes"]
