"""How long a GPU study will take, before it starts: every job of the plan costed from the
cost model's time floors and from two figures measured on the GPU machine itself — what a
job's start-up costs (a fresh Python importing torch and initializing CUDA) and what one
kernel compile costs. Jobs that use the GPU run one at a time (the workflow's gpu resource),
compiles for other targets run side by side on the machine's cores.

An estimate, not a promise: the float64 check of each point and the reports are not in it,
and the start-up and compile figures are taken once. The GPU study script prints it before
it starts and the run's own duration after, so the two can be compared."""

from __future__ import annotations

from dataclasses import dataclass, replace

from kernels.spec import (
    CUDA_REP_MS,
    CUDA_WARMUP_MS,
    DEFAULT_BLOCK,
    FUSED_LAUNCH_CANDIDATES,
    MATERIALIZED,
    TRITON_IMPLEMENTATIONS,
)
from kernels.study import predict
from kernels.study.gpus import Gpu
from kernels.study.point import Point
from kernels.study.sweep import build_jobs

# calls of a point outside do_bench: the warm-up that compiles, the peak-memory call, the
# call whose output is checked
EXTRA_CALLS = 3


@dataclass(frozen=True)
class Machine:
    startup_s: float  # measured: one job's Python, torch import and CUDA initialization
    compile_s: float  # measured: one Triton kernel variant compiled
    cores: int


def call_seconds(point: Point, gpu: Gpu) -> float:
    """The model's slower time floor for one call (a PyTorch path costed as the Triton path
    of its kind: materialized or fused)."""
    if not point.triton:
        point = replace(point, impl="triton_naive" if point.impl in MATERIALIZED else "triton_flash")
        point = replace(point, block_m=point.block_m or DEFAULT_BLOCK, block_n=point.block_n or DEFAULT_BLOCK)
    return predict.predict(point, gpu)["time_high_s"]


def launches(point: Point) -> int:
    """Configurations a point is timed with: each launch candidate of the fused kernel."""
    return len(FUSED_LAUNCH_CANDIDATES[point.head_dim]) if point.impl == "triton_flash" else 1


def compiled_variants(point: Point) -> int:
    """Kernels the build compiles for a Triton point: the materialized path's three, the
    fused kernel with each candidate, the tile-local one."""
    if point.impl == "triton_naive":
        return 3
    return launches(point) + (point.impl == "triton_flash")


def measure_seconds(point: Point, gpu: Gpu, machine: Machine) -> float:
    window = (CUDA_WARMUP_MS + CUDA_REP_MS) / 1e3
    call = call_seconds(point, gpu)
    return machine.startup_s + launches(point) * (window + EXTRA_CALLS * call)


def estimate(points: list[Point], gpu: Gpu, machine: Machine, validation_cases: int) -> dict:
    """Seconds per stage and in total (the stages run one after the other)."""
    measuring = sum(measure_seconds(p, gpu, machine) for p in points)
    groups = {(p.impl, p.dtype, p.block_m, p.block_n) for p in points}
    triton_groups = sum(1 for impl, *_ in groups if impl in TRITON_IMPLEMENTATIONS)
    validating = len(groups) * machine.startup_s + triton_groups * validation_cases * machine.compile_s
    jobs = build_jobs(points)
    variants = sum(compiled_variants(Point.from_name(name)) for names in jobs.values() for name in names)
    building = (len(jobs) * machine.startup_s + variants * machine.compile_s) / max(1, machine.cores)
    return {
        "gpu": gpu.name,
        "points": len(points),
        "build_s": building,
        "validate_s": validating,
        "measure_s": measuring,
        "total_s": building + validating + measuring,
        "startup_s": machine.startup_s,
        "compile_s": machine.compile_s,
        "cores": machine.cores,
    }
