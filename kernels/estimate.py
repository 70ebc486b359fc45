"""The study's estimated duration on this machine, before it starts (rule budget,
results/budget.json; the costing is kernels.models.budget): Snakemake's own plan of the study,
each job costed from the last run's benchmark records here, and where none stands for a job,
from a calibration: the study's workflow on its smallest points in a scratch folder."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from kernels.io.snakemake_failure import why_failed
from kernels.measure.gates import device_absent
from kernels.models import budget
from kernels.planning.gpus import GPUS
from kernels.planning.point import Point


class BudgetError(RuntimeError):
    """A Snakemake run the estimate needs failed; its message is one line naming why."""


def environment(study: str | os.PathLike) -> dict[str, str]:
    """The environment of a Snakemake run the estimate starts: this one (ATTNIO_PLUGINS, as the
    study's planner set it, and the installed entry points come with it), this Python's folder
    first on PATH, no interpreter switch, and the ``study``'s folder first on the module path:
    the study's own Snakemake runs there, so a plugin module beside its config is found; a
    calibration runs in a scratch folder, where it would not be."""
    env = os.environ | {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    env.pop("ATTNIO_INTERPRET", None)
    paths = [os.path.abspath(study), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return env | {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


def snakemake(smk, folder: str, config: dict, *args: str) -> tuple[str, float]:
    """Run the study's Snakefile in ``folder`` with ``config``: its printed output and seconds.
    BudgetError, one line naming why (kernels.io.snakemake_failure), where it fails."""
    config_file = Path(tempfile.mkdtemp(prefix="attnio-budget-"), "config.yaml")
    config_file.write_text(yaml.safe_dump(config))
    command = [sys.executable, "-m", "snakemake", *args, "--snakefile", smk.params.snakefile]
    command += ["--directory", folder, "--cores", str(smk.params.cores), "--configfile", str(config_file)]
    started = time.perf_counter()
    env = environment(os.getcwd())  # the budget job runs in the study's folder
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, check=False)
    shutil.rmtree(config_file.parent)
    if done.returncode != 0:
        raise BudgetError(why_failed(done.stdout + "\n" + done.stderr, folder))
    return done.stdout + done.stderr, time.perf_counter() - started


def plan(smk, folder: str, config: dict, *targets: str) -> tuple[list[budget.Job], float]:
    """Snakemake's own plan of ``targets`` (every job forced, as on a first run), each job with
    its benchmark record's path made absolute, and how long Snakemake took to plan it."""
    text, seconds = snakemake(smk, folder, config, "--dry-run", "--forceall", "--nolock", *targets)
    jobs = budget.planned_jobs(text)
    for job in (j for j in jobs if j.benchmark):
        job.benchmark = str(Path(folder, job.benchmark))
    return jobs, seconds


def followers(jobs: list[budget.Job], after: dict[str, str]) -> list[budget.Job]:
    """The jobs a checkpoint adds once it has run (``after``: checkpoint rule → its follower's
    rule), one per checkpoint job, with the checkpoint's wildcards and benchmark folder."""
    added = []
    for job in [j for j in jobs if j.checkpoint and j.rule in after]:
        follower = budget.Job(after[job.rule], f"{job.jobid}+", wildcards=job.wildcards, after=[job.jobid])
        follower.benchmark = job.benchmark and job.benchmark.replace(f"/{job.rule}/", f"/{follower.rule}/")
        added.append(follower)
    for job in jobs:  # what waits for the checkpoint waits for its followers too
        job.after += [f.jobid for f in added if f.after[0] in job.after]
    return jobs + added


def calibration_sweep(points: list[Point]) -> list[dict]:
    """One grid per path and pass of the study, its smallest point; the smallest grid first."""
    smallest: dict[tuple, Point] = {}
    for p in sorted(points, key=lambda p: (p.groups * p.queries * p.tokens * p.head_dim, p.name)):
        smallest.setdefault((p.impl, p.direction), p)
    grids = []
    for p in smallest.values():
        grid = {"impls": [p.impl], "batch": [p.batch], "heads": [p.heads], "tokens": [p.tokens]}
        grid |= {"head_dim": [p.head_dim], "dtype": [p.dtype], "mask": [p.mask], "inputs": [p.inputs]}
        grid |= {"pass": [p.direction]} | ({"blocks": [[p.block_m, p.block_n]]} if p.block_m else {})
        grid |= {"query_tokens": [p.query_tokens], "kv_heads": [p.kv_heads]}
        grids.append(grid)
    return grids


def calibrate(smk, config: dict, sweep: list[dict]) -> tuple[list[budget.Job], dict | None]:
    """The study's workflow on a calibration ``sweep`` in a scratch folder, up to the tables
    and one page: its jobs costed from their records, and its ceilings. Where it fails, the
    folder is kept for its logs and BudgetError names it and why, in one line."""
    config = config | {"sweep": sweep}
    folder = tempfile.mkdtemp(prefix="attnio-budget-")
    try:
        jobs, _ = plan(smk, folder, config, *smk.params.calibration_targets)
        jobs = followers(jobs, smk.params.followers)
        snakemake(smk, folder, config, *smk.params.calibration_targets)
    except BudgetError as err:
        raise BudgetError(
            f"the calibration (the study's workflow on its smallest points, in {folder}, kept) failed: {err}"
        ) from None
    for job in (made := budget.recorded(jobs)):
        job.basis = "the calibration"
    ceilings = Path(folder, smk.params.ceilings_json)
    found = json.loads(ceilings.read_text()) if ceilings.exists() else None
    shutil.rmtree(folder, ignore_errors=True)
    return made, found


def work(wildcards: dict, machine: budget.Machine) -> float:
    """The model's work of a measure job's point on ``machine`` (kernels.models.budget)."""
    from kernels.build.variants import point_launches

    point = Point.from_wildcards(wildcards)
    launches = point_launches(point) if machine.device == "cpu" and point.triton else []
    interpreted = sum(budget.interpreted_launch(x.name, x.grid, x.options, point.tokens) for x in launches)
    return budget.point_work(point, machine, interpreted)


def measure_adjustment(pool: list[budget.Job], machine: budget.Machine, rehearsal: bool):
    """A measure job's seconds from a related record's: the record's, plus the model's work of
    the job's point less the record's point's; never less than a job doing nothing. In a
    rehearsal (a GPU study planned here, without one) the records' points did no work: they
    were skipped. None for other rules."""
    start = min((j.seconds for j in pool if j.rule == "measure"), default=0.0)

    def adjusted(job: budget.Job, kin: budget.Job) -> float | None:
        if job.rule != "measure":
            return None
        theirs = 0.0 if rehearsal else work(kin.wildcards, machine)
        return max(start, kin.seconds + work(job.wildcards, machine) - theirs)

    return adjusted


def machine(smk, device: str, ceilings: dict | None, gpu) -> budget.Machine:
    config, cores = smk.params.config, smk.params.cores
    limits = {
        "interpreter_limit": config["interpreter_limit"],
        "call_seconds": config["limits"]["call_seconds"],
    }
    return budget.Machine(device, cores, config["timing"]["cpu_seconds"], ceilings, gpu, **limits)


def local_gpu() -> str:
    """This machine's GPU among those the model knows; without one, the H200 the GPU study is
    sized for (a rehearsal)."""
    import torch

    if not torch.cuda.is_available():
        return "H200"
    name = torch.cuda.get_device_name()
    known = [key for key in GPUS if key in name]
    if not known:
        raise SystemExit(f"{name}: not among the GPUs the model knows ({', '.join(GPUS)})")
    return known[0]


def skipped_points(points: list[Point], study: budget.Machine, absent: str | None) -> dict[str, int]:
    """How many points a gate will skip, by its reason: every one where the study's device is
    absent here (``absent``: the gates' reason, kernels.measure.gates.device_absent), else each
    the plan can tell (kernels.models.budget.skipped)."""
    found = [absent] * len(points) if absent else [why for p in points if (why := budget.skipped(p, study))]
    return {why: found.count(why) for why in sorted(set(found))}


def main(smk) -> dict:
    params = smk.params
    started = time.perf_counter()
    try:
        jobs, snakemake_s = plan(smk, os.getcwd(), params.config, "all")
    except BudgetError as err:
        raise BudgetError(f"Snakemake's plan of the study failed: {err}") from None
    jobs = followers([j for j in jobs if j.rule != "all"], params.followers)
    points = [Point.from_wildcards(j.wildcards) for j in jobs if j.rule == "measure"]
    gpu_name = local_gpu() if params.device == "cuda" else None
    gpu = GPUS[gpu_name] if gpu_name else None
    # a device this machine lacks: every point skipped, as the gates say it (kernels.measure.gates),
    # and the plan costed as a rehearsal of the GPU one
    absent = device_absent(params.device)
    ceilings_json = Path(params.ceilings_json)
    ceilings = json.loads(ceilings_json.read_text()) if ceilings_json.exists() else None
    damaged: list[str] = []
    pool = budget.recorded(jobs, damaged)
    # what no record of the last run here stands for is calibrated: on those measure jobs'
    # points, or for other rules alone on the study's smallest point
    unknown = [j for j in jobs if not j.basis and not any(budget.related(r, j) for r in pool)]
    if unknown:
        unmeasured = [Point.from_wildcards(j.wildcards) for j in unknown if j.rule == "measure"]
        sweep = calibration_sweep(unmeasured) if unmeasured else calibration_sweep(points)[:1]
        calibrated, calibrated_ceilings = calibrate(smk, params.config, sweep)
        pool, ceilings = pool + calibrated, ceilings or calibrated_ceilings
    study = machine(smk, params.device, ceilings, gpu)
    rehearsal = absent is not None
    left_out = budget.cost_jobs(jobs, pool, measure_adjustment(pool, study, rehearsal)) + damaged
    if rehearsal:
        left_out.append("a rehearsal: no GPU here, so the records are this machine's")
    found = budget.estimate(jobs, params.cores, snakemake_s, left_out)
    found |= {"device": params.device, "gpu": gpu_name, "points": len(points), "calibrated_for": len(unknown)}
    found |= {"skipped_points": skipped_points(points, study, absent), "device_absent": absent}
    found |= {"measured_here_s": time.perf_counter() - started, "summary": budget.summary(found)}
    return found
