# Shared by every rule: the resolved device and the sweep's points, planned by the package's
# study layer (no torch, no triton) with the allowed values of kernels.spec.
from pathlib import Path
import ast
import json
import os

from snakemake.logging import logger

from kernels.spec import TRITON_IMPLEMENTATIONS
from kernels.study import device as attnio_device
from kernels.study import point as attnio_point
from kernels.study import sweep as attnio_sweep
from kernels.study.point import Point

RESULTS = "results"
# One report per notebook template in reports/; its title is the notebook's first heading.
REPORTS = sorted(path.stem for path in Path(workflow.basedir, "reports").glob("*.ipynb"))


# auto: cuda when torch sees a GPU, else cpu. An explicit cuda is kept as asked: its points
# are recorded as skipped (unsupported) on a machine without one.
DEVICE = attnio_device.resolve(config["device"])
ON_GPU = DEVICE == "cuda"
POINTS = attnio_sweep.points(config["sweep"])
# Build: every Triton variant for the configured targets, plus the local GPU's on a GPU
# machine (which also fills Triton's cache before anything is timed). One job per
# implementation, dtype, blocks, T and d, so that adding a T or a d builds only its own
# variants and leaves every existing point up to date. A point is skipped when a kernel it
# launches cannot build for the target it runs on: the local GPU; on a CPU the interpreter
# stands in for every configured target, so a failure on any of them skips it.
LOCAL_TARGET = attnio_device.local_target() if ON_GPU else None
BUILD_TARGETS = list(
    dict.fromkeys(config["build"]["targets"] + ([LOCAL_TARGET] if LOCAL_TARGET else []))
)
REQUIRED_TARGETS = [LOCAL_TARGET] if LOCAL_TARGET else BUILD_TARGETS
BUILD_JOBS = attnio_sweep.build_jobs(POINTS) if BUILD_TARGETS else {}
GROUPS = attnio_sweep.groups(POINTS)
# A measure job's own limit turns a hang into a failed record; SLURM's, a little longer, is
# the backstop where that cannot run.
JOB_MINUTES = config["limits"]["job_seconds"] // 60 + 5


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
LOCAL_CORES = workflow.resource_settings.cores


def times_kernels(impl):
    return ON_GPU or impl not in TRITON_IMPLEMENTATIONS


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
    """The build result a point depends on (none for the torch paths or without targets)."""
    point = point_of(wildcards)
    if point.build_name not in BUILD_JOBS:
        return []
    return [output_of(rules.build.output.json, point)]


def preflight_points(wildcards=None):
    """--point with every Triton point of the plan (none: the torch paths launch nothing)."""
    names = [point.name for point in POINTS if point.triton]
    return ["--point", *names] if names else []


def measure_mem_mb(wildcards):
    from kernels.study.cost import predicted_bytes

    need = predicted_bytes(point_of(wildcards))
    return max(1024, int(need / 2**20 * 1.25) + 512)


def notebook_parameters(template):
    """The parameters cell of a report template as {name: default}: the results files the
    report reads, so that the notebook alone says what it needs."""
    cells = json.loads(Path(template).read_text())["cells"]
    cell = next(c for c in cells if "parameters" in c["metadata"].get("tags", []))
    body = ast.parse("".join(cell["source"])).body
    return {a.targets[0].id: ast.literal_eval(a.value) for a in body if isinstance(a, ast.Assign)}


REPORT_INPUTS = {
    name: notebook_parameters(Path(workflow.basedir, "reports", f"{name}.ipynb"))
    for name in REPORTS
}


# Every table the reports read, and the CSV twins of the parquet and build tables: the index
# links each and report.zip packs them.
TABLES = sorted(
    {path for inputs in REPORT_INPUTS.values() for path in inputs.values()}
    | {f"{RESULTS}/metrics.csv", f"{RESULTS}/build.csv"}
)


def report_inputs(wildcards):
    return REPORT_INPUTS[wildcards.report]


def papermill_parameters(wildcards, input):
    return [arg for name in report_inputs(wildcards) for arg in ("-p", name, input[name])]


# --- the study's leaves: records, verdicts and build results ---


def leaves():
    """Every file a job measures or checks on its own, by kind. `all` asks for each, so a
    deleted one is made again although the tables built from it are newer than it."""
    records = {output_of(rules.measure.output[0], p): "record" for p in POINTS}
    verdicts = {output_of(rules.validate.output[0], p): "json" for p in POINTS}
    builds = {
        output_of(rules.build.output.json, Point.from_name(names[0])): "json"
        for names in BUILD_JOBS.values()
    }
    return records | verdicts | builds


def point_files(wildcards=None):
    """Each point by its fields, with its record and its job's log relative to results/:
    the index links them."""
    return [
        {"impl": p.impl, **p.shape(), "inputs": p.inputs}
        | {
            "record": os.path.relpath(output_of(rules.measure.output[0], p), RESULTS),
            "log": os.path.relpath(output_of(rules.measure.log[0], p), RESULTS),
        }
        for p in POINTS
    ]


def set_aside_damaged(files):
    """A leaf that is damaged (empty, cut short, not JSON; a record also with NaN inside or
    off the schema) is named on the console and in Snakemake's log and renamed to
    <name>.damaged, so that, missing, it is made again like a deleted one. Only the main
    process looks; a cluster job's own Snakemake does not."""
    from kernels.io.records import DamagedRecordError, load_json, read_record

    if not workflow.is_main_process:
        return
    for path, kind in files.items():
        if not os.path.exists(path):
            continue
        try:
            read_record(path) if kind == "record" else load_json(path, strict=False)
        except DamagedRecordError as err:
            os.replace(path, f"{path}.damaged")
            logger.warning(f"Damaged, set aside as {path}.damaged to be made again: {err}")


def print_run_summary():
    """How many points are ok, skipped and failed, and where to look: the last lines a run
    prints (from the tables, when this run has them)."""
    import csv
    from collections import Counter

    table = Path(RESULTS, "metrics.csv")
    if not table.exists():
        return
    with table.open(newline="") as rows:
        counts = Counter(row["status"] for row in csv.DictReader(rows))
    said = ", ".join(f"{counts[s]} {s}" for s in ("ok", "skipped", "failed") if counts[s])
    logger.info(f"attnio: {sum(counts.values())} points: {said} (why: {table}, column reason)")
    index = Path(RESULTS, "index.html")
    if index.exists():
        logger.info(f"attnio: reports: {index}")
