"""The GPU study's estimated duration (kernels.study.budget), from the plan and two figures
measured on the machine: each part costed as its docstring says, and the shipped GPU study
within its 8 minutes even with a slow start-up."""

import pytest
import yaml
from workflow_run import ROOT

from kernels.spec import CUDA_REP_MS, CUDA_WARMUP_MS, FUSED_LAUNCH_CANDIDATES
from kernels.study.budget import Machine, call_seconds, estimate, launches, measure_seconds
from kernels.study.gpus import GPUS
from kernels.study.point import Point
from kernels.study.sweep import points

H200 = GPUS["H200"]


def test_a_point_costs_its_start_up_and_a_timing_window_per_launch():
    machine = Machine(startup_s=2.0, compile_s=0.5, cores=4)
    fused = Point("triton_flash", 2, 16, 8192, 128, "bfloat16", False, 128, 64)
    naive = Point("torch_naive", 2, 16, 8192, 128, "bfloat16", False)
    assert launches(fused) == len(FUSED_LAUNCH_CANDIDATES[128]) and launches(naive) == 1
    window = (CUDA_WARMUP_MS + CUDA_REP_MS) / 1e3
    assert measure_seconds(fused, H200, machine) == pytest.approx(
        2.0 + launches(fused) * (window + 3 * call_seconds(fused, H200))
    )
    # torch_naive is costed as the materialized Triton path: S and P through DRAM
    assert call_seconds(naive, H200) > 2 * call_seconds(fused, H200)


def test_the_gpu_study_fits_its_eight_minutes_with_a_slow_start_up():
    """Start-up and compile well above what the development machine measures (2.8 s and
    0.52 s: `snakemake budget` with the gpu_study preset), so that a slower GPU host still fits."""
    config = yaml.safe_load((ROOT / "config" / "presets" / "gpu_study.yaml").read_text())
    planned = points(config["sweep"])
    from kernels.measure.validate import CUDA_SHAPES

    machine = Machine(startup_s=6.0, compile_s=1.5, cores=16)
    found = estimate(planned, H200, machine, validation_cases=2 * len(CUDA_SHAPES))
    assert found["points"] == len(planned) == 42
    assert found["total_s"] == pytest.approx(found["build_s"] + found["validate_s"] + found["measure_s"])
    assert found["total_s"] < 480, found
