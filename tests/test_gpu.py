"""The compiled path on a real GPU: validation against float64 up to T = 16,384, timing that
behaves, every launch candidate timed, and Nsight Compute's DRAM bytes parsed. Each test runs
the command line in a child process, which selects compiled Triton (this suite's own process
runs the interpreter). Without CUDA every test here is skipped, saying so; `make test` leaves
them out and scripts/gpu_profile.sh runs them (rule gpu_tests of workflow/rules/profile.smk,
which leaves out those the GPU study already does itself, saying why)."""

import json
import shutil
import subprocess
import sys

import pytest
import torch
from workflow_run import env

from kernels.planning import gpu_checks
from kernels.planning.point import Point

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA GPU: torch.cuda.is_available() is False"
    ),
]
CLI_TIMEOUT = 1200  # a hang guard: validating every implementation takes a few minutes


def kernels_cli(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "kernels", *args],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        env=env() | {"ATTNIO_INTERPRET": "0"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def measured(tmp_path, point: Point, *extra: str) -> dict:
    out = tmp_path / f"{point.impl}-{point.tokens}.json"
    kernels_cli("measure", *point.cli_args(), "--device", "cuda", "--out", str(out), *extra)
    return json.loads(out.read_text())


# The GPU study's validate jobs already validate every implementation of its sweep in bfloat16
# (config/presets/gpu_study.yaml: the fused and materialized kernels at 128x64 blocks) over
# the same shapes up to T = 16,384. Here, at the blocks kernels.planning.gpu_checks names (those
# the preflight compiles), the other dtypes, and the tile-local kernel, which the study does
# not run, in every dtype.
STUDY_DTYPES = ("bfloat16",)
NOT_VALIDATED_BY_THE_STUDY = {
    impl: [d for d in gpu_checks.VALIDATION_DTYPES if impl == "triton_tile_softmax" or d not in STUDY_DTYPES]
    for impl in (*gpu_checks.validation_impls(), "sdpa")
}


@pytest.mark.parametrize("impl", list(NOT_VALIDATED_BY_THE_STUDY))
def test_compiled_kernels_validate_up_to_16k_tokens(impl, tmp_path):
    out = tmp_path / "verdicts.json"
    block_m, block_n = gpu_checks.VALIDATION_BLOCKS
    kernels_cli(
        "validate", "--device", "cuda", "--impl", impl, "--dtype", *NOT_VALIDATED_BY_THE_STUDY[impl],
        "--block-m", str(block_m), "--block-n", str(block_n), "--exit-zero", "--quiet", "--json", str(out),
    )  # fmt: skip
    results = json.loads(out.read_text())
    assert max(r["tokens"] for r in results) == 16384
    assert all(r["as_expected"] for r in results), [r for r in results if not r["as_expected"]][:3]


def test_timing_behaves(tmp_path):
    """Times are positive, their spread is ordered, and a call four times as long (in T²)
    takes longer: not a speed claim, a check that the clock measures the work."""
    short, long = (measured(tmp_path, point, "--no-ncu") for point in gpu_checks.timing_points())
    for record in (short, long):
        assert record["status"] == "ok" and record["repeats"] >= 5
        assert 0 < record["time_p10_ms"] <= record["time_ms"] <= record["time_p90_ms"]
    assert long["time_ms"] > short["time_ms"]


def test_every_launch_candidate_is_timed_and_the_fastest_kept(tmp_path):
    point = gpu_checks.candidate_point()
    builds = tmp_path / "build.json"
    kernels_cli(
        "build", "--target", "local", "--point", point.name, "--out", str(builds),
        "--artifacts", str(tmp_path / "artifacts"),
    )  # fmt: skip
    target = json.loads(builds.read_text())["targets"][0]
    record = measured(
        tmp_path, point, "--no-ncu", "--require-build", str(builds), "--required-targets", target
    )
    timed = record["launch_candidates"]
    assert record["status"] == "ok" and timed
    assert record["time_ms"] == min(t["time_ms"] for t in timed)
    fastest = min(timed, key=lambda t: t["time_ms"])
    assert (record["num_warps"], record["num_stages"]) == (fastest["num_warps"], fastest["num_stages"])


@pytest.mark.skipif(shutil.which("ncu") is None, reason="Nsight Compute (ncu) is not on PATH")
def test_nsight_compute_dram_bytes_are_parsed(tmp_path):
    """Where S and P far exceed L2, the materialized path's DRAM bytes are at least what the
    model says every kernel must move once; the fused path's far fewer."""
    naive, fused = (measured(tmp_path, point) for point in gpu_checks.ncu_points())
    for record in (naive, fused):
        assert record["status"] == "ok" and record["dram_reason"] is None, record["dram_reason"]
        assert record["dram_bytes"] > 0 and record["ncu_kernels"]
    assert naive["dram_bytes"] >= 0.9 * naive["traffic_compulsory_bytes"]
    assert fused["dram_bytes"] < naive["dram_bytes"] / 4


@pytest.mark.parametrize("impl", ["torch_naive", "triton_naive"])
def test_the_materialized_stages_are_timed_warm_and_cold(impl, tmp_path):
    """Each stage in chain order with positive warm and cold medians (CUDA events, L2 zeroed
    before each cold one), summing to about the call's own time: a sanity check, not a speed
    claim."""
    from kernels.models.stages import stage_names

    point = Point(impl, 1, 8, 4096, 128, "bfloat16", True, *((128, 64) if impl == "triton_naive" else ()))
    record = measured(tmp_path, point, "--no-ncu")
    stages = record["stage_times"]
    assert record["status"] == "ok" and [s["stage"] for s in stages] == list(stage_names(point))
    for stage in stages:
        assert stage["time_ms"] > 0 and stage["cold_time_ms"] > 0 and stage["repeats"] >= 3
    total = sum(s["time_ms"] for s in stages)
    assert total / 5 < record["time_ms"] < 5 * total
    assert record["last_cache_bytes"] == torch.cuda.get_device_properties(0).L2_cache_size
