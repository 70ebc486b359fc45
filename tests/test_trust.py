"""Numbers a reader can trust: timing with warm-up and spread, derived figures computed
once, non-finite outputs flagged, and no point that hangs. (What the shared ci study shows —
timed jobs that own the machine, the overflow in records and reports — is tested in
test_workflow.py, whose worker runs that study.)"""

import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from workflow_run import ROOT, env, seed_ceilings, snakemake

from kernels.catalog import implementation
from kernels.impl import mode
from kernels.io.records import DamagedRecordError, read_leaf, validate_record
from kernels.io.tables import tables
from kernels.measure.run import base_record, measure
from kernels.measure.timing import Windows, time_cpu, windows
from kernels.measure.validate import Shape, validate
from kernels.paths.torch_naive.forward import torch_naive
from kernels.planning.leaves import damaged_leaves, record_fields
from kernels.planning.point import Point
from kernels.spec import LARGE_INPUT, MAX_SEED

DEFAULT = str(ROOT / "config" / "config.yaml")
CI = str(ROOT / "config" / "presets" / "ci.yaml")


@pytest.fixture(autouse=True)
def interpreter():
    mode.set_interpret(True)


# what these tests ask of a record is no time: the shortest windows (a point's call timed for
# 20 ms at most, its stages for 10 ms)
QUICK = Windows(cpu_seconds=0.02, stage_seconds=0.01)


@implementation("trust_off_a_little", stores="SP")
def off_a_little(q, k, v, *, causal):
    """torch_naive's output 0.1 % too large: finite, close, and wrong (its gradients too)."""
    return torch_naive(q, k, v, causal) * 1.001


# --- timing and derived figures --------------------------------------------------------------


def test_cpu_timing_has_warm_up_repeats_and_spread():
    a = torch.randn(256, 256)
    found = time_cpu(lambda: a @ a, threads=1)
    assert found["repeats"] >= 10
    assert 0 < found["time_p10_ms"] <= found["time_ms"] <= found["time_p90_ms"]


def test_derived_figures_follow_the_records():
    with windows(QUICK):
        records = [
            measure(Point(impl, 1, 2, 32, 16, "float32", True), "cpu", seed=3)
            for impl in ("torch_naive", "sdpa", "triton_naive", "triton_flash")
        ]
    for record in records:
        validate_record(record)
    metrics, _ = tables(records)
    row = metrics.set_index("impl")
    naive, sdpa = row.loc["torch_naive"], row.loc["sdpa"]
    assert sdpa["twin"] == "torch_naive" and naive["twin"] == "torch_naive"
    assert sdpa["speedup_vs_materialized"] == pytest.approx(naive["time_ms"] / sdpa["time_ms"])
    assert naive["speedup_vs_materialized"] == pytest.approx(1.0)
    assert sdpa["tflops"] == pytest.approx(sdpa["flops"] / (sdpa["time_ms"] / 1e3) / 1e12)
    assert sdpa["gbps"] == pytest.approx(sdpa["traffic_compulsory_bytes"] / (sdpa["time_ms"] / 1e3) / 1e9)
    # interpreted Triton points have no time, so nothing is derived from one
    assert pd.isna(row.loc["triton_flash", "speedup_vs_materialized"])
    assert pd.isna(row.loc["triton_flash", "tflops"])


# --- non-finite outputs ------------------------------------------------------------------------


def test_an_overflowing_float16_s_is_a_failed_record_the_fused_kernel_is_not():
    def run(impl, dtype="float16"):
        blocks = (16, 32) if impl.startswith("triton_") else (None, None)
        point = Point(impl, 1, 1, 24, 16, dtype, False, *blocks, inputs="large")
        with windows(QUICK):
            return measure(point, "cpu", seed=1)

    for impl in ("torch_naive", "triton_naive"):
        record = run(impl)
        validate_record(record)
        assert record["status"] == "failed"
        assert record["nonfinite_outputs"] == 24 * 16
        assert "S stored in float16 overflows" in record["reason"]
        product = 16 * LARGE_INPUT**2
        assert f"{product:.3g}" in record["reason"] and "65,504" in record["reason"]
    for impl in ("triton_flash", "sdpa"):
        record = run(impl)
        assert record["status"] == "ok" and record["nonfinite_outputs"] == 0
        assert record["max_abs_error"] < 1e-2
    assert run("torch_naive", "bfloat16")["status"] == "ok"  # bfloat16 holds the scores


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_an_output_past_its_validation_bound_is_a_failed_record_naming_both(direction):
    """A finite output (or gradient) whose error exceeds the validation rule's bound on the
    point's own inputs is not ok: the record fails, naming the error and the bound."""
    point = Point("trust_off_a_little", 1, 2, 32, 16, "float32", True, direction=direction)
    with windows(QUICK):
        record = measure(point, "cpu", seed=3)
    validate_record(record)
    what = "its output" if direction == "forward" else "its (dQ|dK|dV)"
    rule = "the validation rule's bound at this point"
    said = re.fullmatch(
        rf"{what}'s largest error against the float64 definition, (\S+), exceeds {rule}, (\S+) \(.+\)",
        record["reason"] or "",
    )
    assert record["status"] == "failed" and said, record["reason"]
    error, bound = float(said[said.lastindex - 1]), float(said[said.lastindex])
    errors = record.get("gradient_errors") or {"output": record["max_abs_error"]}
    assert error > bound > 1e-5 and any(error == pytest.approx(e, rel=1e-2) for e in errors.values())


def test_validation_expects_the_overflow_and_nothing_else():
    results = validate(
        impls=("torch_naive", "sdpa", "triton_naive", "triton_flash"),
        dtypes=("float16", "bfloat16"),
        causals=(True,),
        shapes=(Shape(1, 1, 20, 16, inputs="large"),),
        block_m=16,
        block_n=32,
    )
    verdicts = {(r.impl, r.dtype): r.verdict for r in results}
    assert all(r.as_expected for r in results)
    assert verdicts[("torch_naive", "float16")] == verdicts[("triton_naive", "float16")] == "nonfinite"
    assert verdicts[("triton_flash", "float16")] == verdicts[("sdpa", "float16")] == "pass"
    assert {verdicts[(i, "bfloat16")] for i in ("torch_naive", "triton_naive")} == {"pass"}


# --- impossible numbers --------------------------------------------------------------------------

# a field and a finite value no real run gives it (metrics.schema.json says why for each bound)
ABSURD = {
    "time 1e308 ms": ("time_ms", 1e308),
    "a call over a day": ("time_ms", 86_400_001.0),
    "1e308 bytes counted": ("traffic_counted_bytes", 1e308),
    "a 309-digit count": ("traffic_counted_bytes", 10**308),
    "2^63 bytes allocated": ("peak_alloc_bytes", 2**63),
    "a modelled S of 1e31 bytes": ("bytes_S", 10**31),
    "a job over a day": ("wall_seconds", 86_401.0),
}


@pytest.mark.parametrize("case", ABSURD)
def test_an_absurd_finite_number_makes_a_record_damaged(tmp_path, case):
    """NaN and Infinity are refused when a record is read; a finite number past what any run
    can give is refused by the schema: no writer writes such a record, and the study's leaves
    check names it damaged, so that the workflow sets it aside and measures it again."""
    field, value = ABSURD[case]
    point = Point("sdpa", 1, 2, 32, 16, "float32", True)
    measured = {"time_ms": 1.5, "traffic_counted_bytes": 4096, "wall_seconds": 2.0}
    record = base_record(point, "cpu", 0) | measured
    validate_record(record)
    record[field] = value
    refusal = rf"field {field}: {re.escape(json.dumps(value))} is greater than the maximum of "
    with pytest.raises(ValueError, match=f"metrics record {refusal}"):
        validate_record(record)
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    found = damaged_leaves({str(path): ("record", record_fields(point))})
    assert list(found) == [str(path)] and re.search(refusal, found[str(path)]), found


def test_the_largest_point_the_config_accepts_is_within_the_records_bounds():
    """The bounds on the model's counts hold every point the config schema accepts: B and H
    at 65,535, T at 2^24, d at 256 (its record skipped, its model whole), both passes, the
    reference's 8-byte S among them."""
    for impl in ("reference", "torch_naive"):
        for direction in ("forward", "backward"):
            point = Point(impl, 65_535, 65_535, 2**24, 256, "float32", False, direction=direction)
            validate_record(base_record(point, "cpu", 0) | {"status": "skipped", "reason": "too large"})


def test_absurd_ceilings_are_damaged(tmp_path):
    from modelled_study import ceilings

    path = tmp_path / "ceilings.json"
    good = ceilings(4 * 2**20)
    for field, value in (("copy_gbps", 1e308), ("exp_per_s", 1e19), ("call_us", 1e11)):
        path.write_text(json.dumps(good | {field: value}))
        with pytest.raises(DamagedRecordError, match=rf"ceilings field {field}: .* greater than the maximum"):
            read_leaf(path, "ceilings")
    path.write_text(json.dumps(good))
    assert read_leaf(path, "ceilings") == good


# --- nothing hangs -----------------------------------------------------------------------------


def test_a_point_predicted_too_slow_is_skipped_before_it_runs(tmp_path):
    mode.set_interpret(True)
    # the machine's rates from `kernels ceilings`, measured once per test process
    rates = json.loads(seed_ceilings(tmp_path).read_text())
    assert rates["copy_gbps"] > 0 and rates["matmul_tflops"] > 0
    started = time.perf_counter()
    record = measure(
        Point("sdpa", 1, 1, 200_000, 64, "float32", False), "cpu", ceilings=rates, budget_seconds=5
    )
    assert time.perf_counter() - started < 30  # a hang guard: the point itself would take minutes
    assert record["status"] == "skipped" and "over the budget of 5 s per call" in record["reason"]
    flops = 4 * 200_000**2 * 64
    assert f"{flops:.2e} FLOP" in record["reason"]


def test_a_job_past_its_time_limit_leaves_a_failed_record(tmp_path):
    out = tmp_path / "slow.json"
    command = [sys.executable, "-m", "kernels", "measure", "--impl", "sdpa", "--tokens", "30000"]
    command += ["--head-dim", "64", "--dtype", "float32", "--device", "cpu", "--time-limit", "2"]
    started = time.perf_counter()
    done = subprocess.run(
        command + ["--out", str(out)], capture_output=True, text=True, timeout=300, env=env()
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.perf_counter() - started < 120  # alone: about 5 s (imports, then 2 s of work)
    record = json.loads(out.read_text())
    validate_record(record)
    assert record["status"] == "failed" and "time limit of 2 s" in record["reason"]
    assert "stopped after the time limit" in done.stderr


@pytest.mark.parametrize(
    "override, accepted",
    [
        ({"seed": 10**29}, False),
        ({"seed": MAX_SEED}, True),
        ({"seed": -1}, False),
        ({"sweep": {"tokens": [10**7]}}, True),
        ({"sweep": {"tokens": [2**25]}}, False),
        ({"sweep": {"heads": [70_000]}}, False),
        ({"sweep": [{"tokens": [16]}, {"dtype": ["float32"], "impls": ["sdpa"]}]}, True),
        ({"sweep": [{"tokenz": [16]}]}, False),
        ({"sweep": []}, False),
        ({"limits": {"call_seconds": 0}}, False),
        ({"limits": {"job_seconds": 86_400}}, True),
        ({"limits": {"job_seconds": 86_401}}, False),  # a record's times are held below a day
    ],
)
def test_schema_bounds(override, accepted):
    from snakemake.utils import validate as validate_config

    config = yaml.safe_load(Path(DEFAULT).read_text()) | override
    schema = str(ROOT / "workflow" / "schemas" / "config.schema.yaml")
    if accepted:
        validate_config(config, schema)
    else:
        with pytest.raises(Exception, match="Error validating config file"):
            validate_config(config, schema)


@pytest.mark.integration  # make integration (CI): a workflow of its own, 12 s
def test_ten_million_tokens_finish_in_seconds_as_skipped_records(tmp_path):
    """Slow by nature: a real run validates the two implementations before their points."""
    huge = tmp_path / "huge.yaml"
    grid = {"impls": ["torch_naive", "sdpa"], "tokens": [10**7], "head_dim": [16]}
    huge.write_text(
        yaml.safe_dump({"device": "cpu", "build": {"targets": []}, "sweep": grid | {"dtype": ["float32"]}})
    )
    seed_ceilings(tmp_path)  # measured here (its job takes a minute): what the budget holds against
    # the four points' records, as the workflow makes them; their table is made here by the
    # collect rule's own function (gathering and collecting: the shared study's tests)
    names = [
        Point(impl, 1, 1, 10**7, 16, "float32", causal).name
        for impl in ("torch_naive", "sdpa")
        for causal in (True, False)
    ]
    targets = [f"results/points/{name}.json" for name in names]
    started = time.perf_counter()
    done = snakemake(tmp_path, "--cores", "2", *targets, "--configfile", DEFAULT, str(huge), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    table, _ = tables([json.loads((tmp_path / target).read_text()) for target in targets])
    assert len(table) == 4 and (table["status"] == "skipped").all(), table[["impl", "reason"]]
    assert table["reason"].str.contains("would not fit in memory|over the budget").all()
    # alone about 15 s, most of it validating the two implementations first
    assert time.perf_counter() - started < 600
    assert math.isfinite(table["flops"].max())
