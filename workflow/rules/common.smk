# Shared by every rule: the resolved device and the sweep's points (planned by the package).
import os
import sys

sys.path.insert(0, workflow.basedir)

from kernels import devices as attnio_devices
from kernels import sweep as attnio_sweep
from kernels.names import IMPLEMENTATIONS, TRITON_IMPLEMENTATIONS

RESULTS = "results"
REPORTS = ["storage", "traffic", "tile_softmax", "performance", "build"]


# auto: cuda when torch sees a GPU, else cpu. An explicit cuda is kept as asked: its points
# are recorded as skipped (unsupported) on a machine without one.
DEVICE = attnio_devices.resolve(config["device"])
ON_GPU = DEVICE == "cuda"
POINTS = attnio_sweep.points(config["sweep"])
POINT_FILES = [f"{RESULTS}/points/{attnio_sweep.point_name(p)}.json" for p in POINTS]
VALIDATIONS = sorted({attnio_sweep.validation_name(p) for p in POINTS})
VALIDATION_FILES = [f"{RESULTS}/validate/{v}.json" for v in VALIDATIONS]
# Build: every Triton variant for the configured targets, plus the local GPU's on a GPU
# machine (which also fills Triton's cache before anything is timed). One job per
# implementation, dtype, blocks, T and d, so that adding a T or a d builds only its own
# variants and leaves every existing point up to date. A point is skipped when a kernel it
# launches cannot build for the target it runs on: the local GPU; on a CPU the interpreter
# stands in for every configured target, so a failure on any of them skips it.
LOCAL_TARGET = attnio_devices.local_target() if ON_GPU else None
BUILD_TARGETS = list(dict.fromkeys(config["build"]["targets"] + ([LOCAL_TARGET] if LOCAL_TARGET else [])))
REQUIRED_TARGETS = [LOCAL_TARGET] if LOCAL_TARGET else BUILD_TARGETS
BUILD_PATTERN = "{validation}/T{tokens}-d{head_dim}"


def build_name(point):
    return BUILD_PATTERN.format(validation=attnio_sweep.validation_name(point),
                                tokens=point.tokens, head_dim=point.head_dim)


BUILD_POINTS = {}  # build job name → the points it compiles for
for _point in POINTS if BUILD_TARGETS else []:
    if _point.impl in TRITON_IMPLEMENTATIONS:
        BUILD_POINTS.setdefault(build_name(_point), []).append(attnio_sweep.point_name(_point))
BUILD_FILES = [f"{RESULTS}/build/{name}.json" for name in sorted(BUILD_POINTS)]
# Records are gathered per (impl, dtype) first: Snakemake hashes a job's whole input list
# once per upstream job, so one job over thousands of files would be slow to plan.
GROUPS = sorted({(p.impl, p.dtype) for p in POINTS})


def group_records(wildcards):
    return [f"{RESULTS}/points/{attnio_sweep.point_name(p)}.json" for p in POINTS
            if (p.impl, p.dtype) == (wildcards.impl, wildcards.dtype)]


wildcard_constraints:
    impl="|".join(IMPLEMENTATIONS),
    dtype="float32|float16|bfloat16",
    batch=r"\d+",
    heads=r"\d+",
    tokens=r"\d+",
    head_dim=r"\d+",
    mask="causal|full",
    blocks=r"na|bm\d+-bn\d+",


def build_points(wildcards):
    """Names of the points one build job compiles for."""
    return BUILD_POINTS[BUILD_PATTERN.format(
        validation=f"{wildcards.impl}_{wildcards.dtype}_{wildcards.blocks}",
        tokens=wildcards.tokens, head_dim=wildcards.head_dim)]


def builds_of_point(wildcards):
    """The build result a point depends on (none for the torch paths or without targets)."""
    if wildcards.impl not in TRITON_IMPLEMENTATIONS or not BUILD_TARGETS:
        return []
    return [f"{RESULTS}/build/{build_name(attnio_sweep.point_from_wildcards(wildcards))}.json"]


def times_on_this_machine(impl):
    """Jobs that time kernels take the machine for themselves: every GPU job, and on a CPU
    the torch paths (the interpreter is never timed, so its jobs run side by side)."""
    return 1 if ON_GPU or impl not in TRITON_IMPLEMENTATIONS else 0


def point_of(wildcards):
    return attnio_sweep.point_from_wildcards(wildcards)


def measure_mem_mb(wildcards):
    from kernels.model import predicted_bytes

    need = predicted_bytes(point_of(wildcards))
    return max(1024, int(need / 2**20 * 1.25) + 512)
