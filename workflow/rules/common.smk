# Shared by every rule: the resolved device and the sweep's points, planned by the package's
# study layer (no torch, no triton) with the allowed values of kernels.spec.
# Every other concern has a file of its own (the Snakefile includes each); every use of
# Snakemake's internals sits in snakemake_internals.py.
import os
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

import kernels.catalog as catalog
from kernels.planning import device as attnio_device
from kernels.planning import point as attnio_point
from kernels.planning import sweep as attnio_sweep
from kernels.planning.point import Point
from kernels.spec import INDUCTOR_CACHE

RESULTS = "results"
# Inductor's cache (what a compiled path, FlexAttention, compiles) beside the results, so
# that every job's process, the warm workers and the next run reuse what one compiled; a
# TORCHINDUCTOR_CACHE_DIR set by the user wins
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(INDUCTOR_CACHE).resolve()))
# One report per notebook template in reports/; its title is the notebook's first heading.
REPORTS = sorted(path.stem for path in Path(workflow.basedir, "reports").glob("*.ipynb"))


def given_cores():
    """--cores (workflow.cores, public); None where none was given (a cluster run)."""
    try:
        return workflow.cores
    except WorkflowError:
        return None


# auto: cuda when torch sees a GPU, else cpu. An explicit cuda is kept as asked: its points
# are recorded as skipped (unsupported) on a machine without one.
DEVICE = attnio_device.resolve(config["device"])
ON_GPU = DEVICE == "cuda"
# A grid with tokens_across_cache follows the cache size (config cache_bytes, else the
# machine's largest cache as the timed jobs' threads meet it: the local cores, or on a
# cluster every CPU of the affinity); its T values are listed here once, so every rule reads
# one sweep.
CACHE_BYTES = config.get("cache_bytes") or (
    attnio_device.largest_cache_bytes(DEVICE, threads=given_cores())
    if attnio_sweep.asks_for_cache(config["sweep"])
    else None
)
# Implementations of one's own: the configured plugin modules (and any installed package's
# entry point) are imported now, and named in ATTNIO_PLUGINS for every job. A plugin that
# cannot load is reported, naming it and why; the implementations it would have registered
# are left out and the rest of the study runs.
try:
    PLUGIN_PROBLEMS = catalog.use_plugins(config["plugins"])
except ValueError as err:
    raise WorkflowError(str(err)) from None
for problem in PLUGIN_PROBLEMS:
    logger.warning(f"attnio: {problem}; its implementations are left out")
# A grid that cannot be planned is refused in one line naming it by its index (sweep grid 1)
# and the field, as the schema's refusals are (config_file.smk).
try:
    config["sweep"], LEFT_OUT, POINTS = attnio_sweep.planned(config["sweep"], CACHE_BYTES)
except ValueError as err:
    raise WorkflowError(f"config: {err}") from None
for warning in LEFT_OUT:
    logger.warning(f"attnio: {warning}")
if not config["sweep"]:
    raise WorkflowError("sweep: no grid has an implementation left to measure")
# the matrix products the ceilings time in the stages' shapes: the sweep's dtypes, head
# dimensions and lengths, for the points timed on this device
PRODUCT_SHAPES = attnio_sweep.product_shapes(POINTS, "cuda" if ON_GPU else "cpu")
# Build: every Triton variant for the configured targets, plus the local GPU's on a GPU
# machine (which also fills Triton's cache before anything is timed). One job per
# implementation, dtype, blocks and d: the variants of its points at every T, each compiled
# once (per T they were mostly the same kernels compiled again: 186 compiles of 100 variants
# in the default study). A point waits for its build but is not made stale by a rebuild (a T
# added to its group: builds_of). A point is skipped when a kernel it
# launches cannot build for the target it runs on: the local GPU; on a CPU the interpreter
# stands in for every configured target, so a failure on any of them skips it.
LOCAL_TARGET = attnio_device.local_target() if ON_GPU else None
BUILD_TARGETS = list(
    dict.fromkeys(config["build"]["targets"] + ([LOCAL_TARGET] if LOCAL_TARGET else []))
)
REQUIRED_TARGETS = [LOCAL_TARGET] if LOCAL_TARGET else BUILD_TARGETS
BUILD_JOBS = attnio_sweep.build_jobs(POINTS) if BUILD_TARGETS else {}
GROUPS = attnio_sweep.groups(POINTS)
# the validations that also check gradients: those of the implementations a backward point uses
BACKWARD_VALIDATIONS = {point.validation_name for point in POINTS if point.backward}
# A measure job's own limit turns a hang into a failed record; SLURM's, a little longer, is
# the backstop where that cannot run.
JOB_MINUTES = config["limits"]["job_seconds"] // 60 + 5
# Every other rule that runs kernel, plugin or notebook code has a limit of its own kind
# (limits.rule_seconds), with SLURM's runtime a little longer in the same way.
RULE_SECONDS = config["limits"]["rule_seconds"]


def rule_minutes(rule):
    return RULE_SECONDS[rule] // 60 + 5


wildcard_constraints:
    **attnio_point.WILDCARD_CONSTRAINTS,


def point_of(wildcards):
    return Point.from_wildcards(wildcards)


def output_of(pattern, point):
    """A rule's output pattern filled in for one point."""
    return pattern.format(**point.wildcards())


# A job that times kernels owns the machine: it asks for every core Snakemake may use, so no
# other job (each takes at least one core) runs beside it. Timed are every measure job on a
# GPU, the torch paths on a CPU (the interpreter is never timed, so its jobs run side by
# side) and the ceilings. On a cluster (no --cores) it asks SLURM for a node of its own.
LOCAL_CORES = given_cores()


def times_kernels(impl):
    return ON_GPU or not catalog.get(impl).triton


def machine_threads(wildcards=None):
    return LOCAL_CORES or 1


def timed_threads(wildcards):
    return machine_threads() if times_kernels(wildcards.impl) else 1


def threads_option(wildcards, threads):
    """--threads for a local run (the cores Snakemake gave the job); on a cluster, the
    command takes the node's CPU affinity."""
    return ["--threads", threads] if LOCAL_CORES else []


def timed_slurm_extra(wildcards):
    return "--exclusive" if times_kernels(wildcards.impl) else ""


# --- inputs and resources of the rules (evaluated per job) ---


def validation_of(wildcards):
    return output_of(rules.validate.output[0], point_of(wildcards))


def builds_of(wildcards):
    """The build result a point depends on (none for the torch paths or without targets):
    ancient, as a rebuild for another T of the group compiles the point's variants as before."""
    point = point_of(wildcards)
    if point.build_name not in BUILD_JOBS:
        return []
    return [ancient(output_of(rules.build.output.json, point))]


def preflight_points(wildcards=None):
    """--point with every Triton point of the plan (none: the torch paths launch nothing)."""
    names = [point.name for point in POINTS if point.triton]
    return ["--point", *names] if names else []


def measure_mem_mb(wildcards):
    from kernels.models.cost import predicted_bytes

    need = predicted_bytes(point_of(wildcards))
    return max(1024, int(need / 2**20 * 1.25) + 512)
