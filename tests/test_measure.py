"""One record per point: measured allocations, skips, schema, and the command line."""

import json
import os
import subprocess
import sys
import time

import pytest

from kernels.io.records import validate_record, write_record
from kernels.measure.run import measure
from kernels.measure.timing import Windows, windows
from kernels.planning.point import Point

QUICK = Windows(cpu_seconds=0.3, stage_seconds=0.1)  # config/presets/ci.yaml's timing


def test_peak_memory_shows_materialized_matrices():
    T = 2048
    naive = measure(Point("torch_naive", 1, 1, T, 64, "float32", False), "cpu")
    fused = measure(Point("sdpa", 1, 1, T, 64, "float32", False), "cpu")
    assert naive["status"] == fused["status"] == "ok"
    assert naive["peak_alloc_bytes"] >= 2 * T * T * 4
    assert fused["peak_alloc_bytes"] < naive["peak_alloc_bytes"] / 8
    for record in (naive, fused):
        validate_record(record)
        assert record["time_ms"] > 0 and record["repeats"] >= 5
        assert record["time_p10_ms"] <= record["time_ms"] <= record["time_p90_ms"]
        assert record["max_abs_error"] < 1e-4


def test_interpreter_record_counts_and_is_not_timed():
    record = measure(Point("triton_naive", 1, 2, 70, 32, "float16", True, 32, 16), "cpu")
    validate_record(record)
    assert record["status"] == "ok"
    assert record["traffic_counted_bytes"] == record["traffic_model_bytes"]
    assert all(s["counted_bytes"] == s["model_bytes"] for s in record["stages"])
    assert record["time_ms"] is None and "interpreter" in record["time_reason"]
    assert record["peak_alloc_bytes"] >= record["bytes_S"] + record["bytes_P"]
    assert record["dram_bytes"] is None and record["dram_reason"]


@pytest.mark.parametrize("impl", ["torch_naive", "triton_naive", "reference"])
def test_impossible_point_is_skipped_quickly(impl):
    started = time.perf_counter()
    record = measure(Point(impl, 1, 1, 1_000_000, 64, "float16", False), "cpu")
    assert time.perf_counter() - started < 5
    assert record["status"] == "skipped"
    assert record["reason"].startswith("would not fit in memory: needs about")
    validate_record(record)


def test_every_sdpa_backend_is_measured_or_skipped_naming_it():
    """Each forced backend either runs (error within the float64 bound, sdpa_math storing S
    and P like torch_naive) or, where the device lacks it, is skipped with PyTorch's reason;
    validation calls a missing backend unavailable, which is not a failed validation."""
    import torch

    from kernels.measure.validate import validate
    from kernels.paths.sdpa.forward import BACKENDS, unavailable

    point = dict(batch=1, heads=2, tokens=96, head_dim=32, dtype="float32", mask=True)
    for backend in BACKENDS:
        with windows(QUICK):  # whether it runs is asked here, not how steadily
            record = measure(Point(f"sdpa_{backend}", **point), "cpu")
        validate_record(record)
        missing = unavailable(backend, torch.float32, "cpu", 32, True)
        if missing:
            assert (
                record["status"] == "skipped" and record["reason"] == f"unsupported on this device: {missing}"
            )
            assert f"PyTorch's {backend} backend (backend='{backend}') is not available" in missing
        else:
            assert record["status"] == "ok" and record["max_abs_error"] < 1e-5
    with windows(QUICK):
        math = measure(Point("sdpa_math", **point), "cpu")
    assert (
        math["bytes_S"] == 2 * 96 * 96 * 4 and math["peak_alloc_bytes"] >= math["bytes_S"] + math["bytes_P"]
    )
    if not torch.cuda.is_available():  # a CPU has math and flash, not efficient or cudnn
        assert unavailable("math", torch.float16, "cpu", 64, False) is None
        assert unavailable("flash", torch.float16, "cpu", 64, False) is None
        results = validate(impls=("sdpa_efficient",), dtypes=("float32",), causals=(True,))
        assert {r.verdict for r in results} == {"unavailable"} and all(r.as_expected for r in results)


def test_interpreter_limit_and_missing_gpu():
    record = measure(
        Point("triton_flash", 1, 1, 600, 64, "float16", False), "cpu", interpreter_limit=500 * 500
    )
    assert record["status"] == "skipped" and "too large for the interpreter" in record["reason"]
    import torch

    if not torch.cuda.is_available():
        record = measure(Point("sdpa", 1, 1, 64, 64, "float16", False), "cuda")
        assert record["status"] == "skipped" and "unsupported on this device" in record["reason"]


def test_schema_rejects_a_broken_record(tmp_path):
    record = measure(Point("sdpa", 1, 1, 32, 16, "float32", True), "cpu")
    broken = dict(record, tokens=-1)
    with pytest.raises(ValueError, match="field tokens"):
        write_record(broken, tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists()
    missing = {k: v for k, v in record.items() if k != "bytes_S"}
    with pytest.raises(ValueError, match="'bytes_S' is a required property"):
        validate_record(missing)


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "kernels", "measure", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "ATTNIO_INTERPRET"},
    )


def test_cli_writes_a_valid_record(tmp_path):
    out = tmp_path / "sub" / "point.json"
    res = cli(
        "--impl",
        "triton_flash",
        "--batch",
        "2",
        "--heads",
        "1",
        "--tokens",
        "50",
        "--head-dim",
        "16",
        "--dtype",
        "bfloat16",
        "--causal",
        "--block-m",
        "16",
        "--block-n",
        "32",
        "--device",
        "cpu",
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    record = json.loads(out.read_text())
    validate_record(record)
    assert record["mode"] == "triton-interpreter"
    assert record["traffic_counted_bytes"] == record["traffic_model_bytes"]
    assert [p.name for p in out.parent.iterdir()] == ["point.json"]  # no temporary left


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tokens", "-3"], "argument --tokens: -3 must be at least 1"),
        (["--head-dim", "40"], "argument --head-dim: invalid choice: 40"),
        (["--dtype", "float64"], "argument --dtype: invalid choice: 'float64'"),
        (["--block-m", "32", "--impl", "sdpa"], "--block-m applies to the Triton implementations only"),
    ],
)
def test_cli_names_bad_arguments(tmp_path, args, message):
    base = {"--impl": "triton_flash", "--tokens": "8", "--head-dim": "16", "--dtype": "float16"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    flat = [x for pair in base.items() for x in pair]
    res = cli(*flat, "--device", "cpu", "--out", str(tmp_path / "x.json"))
    assert res.returncode != 0
    assert message in res.stderr
    assert not (tmp_path / "x.json").exists()
