# Shared by every rule: the resolved device and the sweep's points (planned by the package).
import os
import sys

sys.path.insert(0, workflow.basedir)

from kernels import devices as attnio_devices
from kernels import sweep as attnio_sweep
from kernels.names import IMPLEMENTATIONS, TRITON_IMPLEMENTATIONS

RESULTS = "results"
REPORTS = ["storage", "traffic", "tile_softmax", "performance"]


# auto: cuda when torch sees a GPU, else cpu. An explicit cuda is kept as asked: its points
# are recorded as skipped (unsupported) on a machine without one.
DEVICE = attnio_devices.resolve(config["device"])
ON_GPU = DEVICE == "cuda"
POINTS = attnio_sweep.points(config["sweep"])
POINT_FILES = [f"{RESULTS}/points/{attnio_sweep.point_name(p)}.json" for p in POINTS]
VALIDATIONS = sorted({attnio_sweep.validation_name(p) for p in POINTS})
VALIDATION_FILES = [f"{RESULTS}/validate/{v}.json" for v in VALIDATIONS]
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
