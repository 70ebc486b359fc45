"""How long will this study take on the machine that runs it?

Snakemake plans the jobs (``planned_jobs``: a dry run's printed plan); each is costed from its
``benchmark:`` record of the last run here, else from a related record (``cost_jobs``: the
last run's or a calibration's, kernels.estimate; a measure job's adjusted by the model's work
of its point, ``point_work``), and laid out as Snakemake runs them (``schedule``). Pure
Python: no torch, no triton."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from kernels import catalog
from kernels.io.benchmarks import DAMAGED, read_records
from kernels.models import cost, expected, predict
from kernels.planning.gpus import Gpu
from kernels.planning.point import Point
from kernels.spec import CPU_MIN_SAMPLES, CPU_MIN_SECONDS, CUDA_REP_MS, CUDA_WARMUP_MS, DEFAULT_BLOCK

# The Triton interpreter runs each program in Python, one tile operation at a time: its time
# follows the programs and loop iterations a launch executes, about 10 ms and 5 ms each on the
# development machine (least squares over 180 launches of the built-in kernels).
PROGRAM_S, ITERATION_S = 10e-3, 5e-3


@dataclass
class Job:
    """One job of Snakemake's plan, as its dry run prints it."""

    rule: str
    jobid: str
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    benchmark: str | None = None
    wildcards: dict[str, str] = field(default_factory=dict)
    threads: int = 1
    gpu: bool = False
    checkpoint: bool = False
    seconds: float = 0.0
    basis: str = ""
    after: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Machine:
    """What the work model needs of the machine that runs the plan."""

    device: str  # cpu (torch timed, Triton interpreted) or cuda
    cores: int
    cpu_max_s: float = 1.0  # config timing.cpu_seconds
    ceilings: dict | None = None  # on cpu: copy_gbps, matmul_tflops
    gpu: Gpu | None = None
    interpreter_limit: int = 1 << 20
    call_seconds: float = 30.0


JOB_HEAD = re.compile(r"^(local)?(rule|checkpoint) (\w+):$")
FIELD = re.compile(r"^    (\w+): (.*)$")


def planned_jobs(text: str) -> list[Job]:
    """Every job of a dry run's printed plan (``snakemake -n``), with what it waits for: the
    jobs whose outputs it reads."""
    jobs, job = [], None
    for line in text.splitlines():
        if head := JOB_HEAD.match(line):
            job = Job(rule=head[3], jobid="", checkpoint=head[2] == "checkpoint")
            jobs.append(job)
        elif job and (found := FIELD.match(line)):
            key, value = found.groups()
            if key in ("input", "output"):
                setattr(job, f"{key}s", value.split(", "))
            elif key in ("jobid", "benchmark"):
                setattr(job, key, value)
            elif key == "threads":
                job.threads = int(value)
            elif key == "wildcards":
                job.wildcards = dict(item.split("=", 1) for item in value.split(", "))
            elif key == "resources":
                job.gpu = bool(re.search(r"\bgpu=[1-9]", value))
        elif not line.startswith("    "):
            job = None
    made_by = {path: job.jobid for job in jobs for path in job.outputs}
    for job in jobs:
        job.after = sorted({made_by[p] for p in job.inputs if p in made_by} - {job.jobid})
    return jobs


def interpreted_launch(kernel: str, grid: tuple[int, ...], constants: dict, tokens: int) -> float:
    """Interpreted seconds of one launch: each program streams its key tiles (up to the
    diagonal when causal) or its row blocks; a kernel whose loop is unknown, one per program."""
    programs = math.prod(grid)
    if kernel == "scores_kernel":
        iterations = 0
    elif kernel == "softmax_kernel":
        iterations = programs * (
            0 if constants["SINGLE_PASS"] else 2 * cost.cdiv(tokens, constants["ROW_BLOCK"])
        )
    elif {"BLOCK_M", "BLOCK_N"} <= constants.keys():
        bm, bn = constants["BLOCK_M"], constants["BLOCK_N"]
        spans = (min(tokens, (m + 1) * bm) if constants.get("CAUSAL") else tokens for m in range(grid[0]))
        iterations = sum(cost.cdiv(hi, bn) for hi in spans) * math.prod(grid[1:])
    else:
        iterations = programs
    return programs * PROGRAM_S + iterations * ITERATION_S


def call_seconds(point: Point, machine: Machine) -> float:
    """The model's time of one call: the roofline at the measured rates on a CPU; on a GPU the
    slower floor of kernels.models.predict (a PyTorch path as the Triton path of its kind)."""
    if machine.device == "cpu":
        return expected.call_seconds(point, machine.ceilings) if machine.ceilings else 0.0
    if not point.triton:
        point = replace(point, impl=catalog.triton_path(point.stores))
        point = replace(point, block_m=point.block_m or DEFAULT_BLOCK, block_n=point.block_n or DEFAULT_BLOCK)
    return predict.predict(point, machine.gpu)["time_high_s"] if machine.gpu else 0.0


def timing_window(call: float, machine: Machine) -> float:
    """How long one call's timing takes: torch.utils.benchmark's adaptive run on a CPU (at
    least its least run time or its minimum samples, at most config timing.cpu_seconds);
    triton.testing.do_bench on a GPU (five to estimate, its warm-up and timed windows)."""
    if machine.device == "cpu":
        return min(machine.cpu_max_s, max(CPU_MIN_SECONDS, CPU_MIN_SAMPLES * call)) + call
    return 6 * call + max(call, CUDA_WARMUP_MS / 1e3) + CUDA_REP_MS / 1e3


def skipped(point: Point, machine: Machine) -> str | None:
    """Why a gate records the point as skipped before it does its work (as far as a plan can tell)."""
    if machine.device == "cpu" and not catalog.get(point.impl).cpu:
        return "backend unavailable on a CPU"
    if machine.device == "cpu" and point.triton:
        over = point.groups * point.queries * point.tokens > machine.interpreter_limit
        return "over the interpreter limit" if over else None
    return "predicted over the call budget" if call_seconds(point, machine) > machine.call_seconds else None


def point_work(point: Point, machine: Machine, interpreted: float = 0.0) -> float:
    """A measure job's work beyond its start, as the model has it: under the interpreter its
    launches (``interpreted``, relative); else each launch candidate's timing window, the
    peak-memory call and the float64 check; nothing for a point a gate skips."""
    if skipped(point, machine):
        return 0.0
    if machine.device == "cpu" and point.triton:
        return interpreted
    call = call_seconds(point, machine)
    candidates = catalog.get(point.impl).hook("launch_candidates")
    launches = len(candidates(point)) if candidates and machine.device == "cuda" else 1
    # the float64 check of the output: the definition's two products at half the float32 rate
    tflops = machine.gpu.fp32_flops / 1e12 if machine.gpu else (machine.ceilings or {}).get("matmul_tflops")
    check = 4 * point.groups * point.queries * point.tokens * point.head_dim / ((tflops or 0.1) * 1e12 / 2)
    return launches * timing_window(call, machine) + call + check


NAMED_DAMAGED = 3  # damaged records named in what is left out; the rest counted


def recorded(jobs: list[Job], left_out: list[str] | None = None) -> list[Job]:
    """The jobs the last run here left a whole benchmark record for, costed from it. The
    records are read as the index reads them (kernels.io.benchmarks.read_records): only the
    planned jobs' (a stale one stands for no job), and a damaged one (cut short, unreadable)
    stands for nothing, said in ``left_out``."""
    records = read_records([job.benchmark for job in jobs if job.benchmark])
    for job in jobs:
        if job.benchmark and (own := records.found.get(job.benchmark)):
            job.seconds, job.basis = own["wall_s"], "benchmark"
    if records.damaged and left_out is not None:
        named = [f"{path} ({why})" for path, why in list(records.damaged.items())[:NAMED_DAMAGED]]
        more = len(records.damaged) - len(named)
        left_out.append(
            f"{len(records.damaged)} benchmark record(s) {DAMAGED}, their jobs costed as if they had none: "
            + ", ".join(named)
            + (f" and {more} more" if more else "")
        )
    return [job for job in jobs if job.basis == "benchmark"]


def related(a: Job, b: Job) -> bool:
    """Jobs of one rule, path and pass: one's record stands for the other's."""
    return all(a.wildcards.get(k) == b.wildcards.get(k) for k in ("impl", "direction")) and a.rule == b.rule


def cost_jobs(jobs: list[Job], pool: list[Job], adjust: Callable[[Job, Job], float | None]) -> list[str]:
    """Each job without a record of its own costed from the records in ``pool`` (the last
    run's, the calibration's): one with its wildcards; else a related one, ``adjust``ed for
    the job's own work where it can; else its rule's median; else every record's median,
    said in what is returned."""
    left_out = set()
    for job in (j for j in jobs if j.basis != "benchmark"):
        known = [c for c in pool if c.rule == job.rule and c is not job]  # ids of two plans may meet
        kin = [c for c in known if c.wildcards == job.wildcards] or [c for c in known if related(c, job)]
        if kin and (seconds := adjust(job, kin[0])) is not None:
            job.seconds, job.basis = seconds, f"like {kin[0].basis}, scaled"
        elif kin or known:
            job.seconds = statistics.median(c.seconds for c in kin or known)
            job.basis = f"like {(kin or known)[0].basis}"
        elif pool:
            job.seconds, job.basis = statistics.median(c.seconds for c in pool), "any job"
            left_out.add(f"rule {job.rule}: no record of it here, costed as the median job")
        else:
            left_out.add(f"rule {job.rule}: no record of it here, nor a calibration")
    return sorted(left_out)


def schedule(jobs: list[Job], cores: int) -> dict[str, tuple[float, float]]:
    """Start and end of every job as a greedy scheduler runs them: whenever a job ends, each
    waiting job whose inputs are made starts, in plan order, if its threads (at most every
    core) and the GPU (one job at a time) are free."""
    cores = max(1, cores)
    ids = {job.jobid for job in jobs}
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    running: dict[str, Job] = {}
    waiting, now = list(jobs), 0.0
    while waiting or running:
        free = cores - sum(min(cores, j.threads) for j in running.values())
        gpu_busy = any(j.gpu for j in running.values())
        for job in list(waiting):
            need = min(cores, job.threads)
            if any(a not in ends for a in job.after if a in ids) or need > free or (job.gpu and gpu_busy):
                continue
            starts[job.jobid], running[job.jobid] = now, job
            waiting.remove(job)
            free, gpu_busy = free - need, gpu_busy or job.gpu
        if not running:
            raise ValueError(f"jobs wait for jobs that never run: {[j.jobid for j in waiting][:3]}")
        now = min(starts[i] + j.seconds for i, j in running.items())
        for jobid in [i for i, j in running.items() if starts[i] + j.seconds <= now]:
            del running[jobid]
            ends[jobid] = now
    return {jobid: (starts[jobid], ends[jobid]) for jobid in ends}


def estimate(jobs: list[Job], cores: int, snakemake_s: float, left_out: list[str]) -> dict:
    """Seconds in total (the schedule's length plus Snakemake's own planning), per rule (jobs,
    their seconds, when the first starts and the last ends, on what basis)."""
    times = schedule(jobs, cores)
    span = max((end for _, end in times.values()), default=0.0)
    rules: dict[str, dict] = {}
    for job in jobs:
        start, end = times[job.jobid]
        new = {"jobs": 0, "seconds": 0.0, "first_start_s": start, "last_end_s": end, "basis": {}}
        e = rules.setdefault(job.rule, new)
        e["jobs"], e["seconds"] = e["jobs"] + 1, e["seconds"] + job.seconds
        e["first_start_s"], e["last_end_s"] = min(e["first_start_s"], start), max(e["last_end_s"], end)
        e["basis"][job.basis or "none"] = e["basis"].get(job.basis or "none", 0) + 1
    found = {"total_s": snakemake_s + span, "schedule_s": span, "snakemake_s": snakemake_s, "cores": cores}
    return found | {"jobs": len(jobs), "rules": rules, "left_out": left_out}


def summary(found: dict) -> list[str]:
    """The estimate in a few lines, for a console: where a study asks for a device this
    machine lacks (``device_absent``: the gates' reason), that every point would be skipped
    here, and that the estimate is a rehearsal of the plan on the GPU it is sized for; the
    points a gate will skip, by reason."""
    points, absent = found.get("points", "?"), found.get("device_absent")
    target = found.get("gpu") or found.get("device")
    where = f"as a rehearsal of the {target} plan with this machine's records" if absent else f"on {target}"
    lines = [
        f"estimated {found['total_s']:.0f} s for {points} points {where} ({found['cores']} cores): "
        f"Snakemake {found['snakemake_s']:.1f} s + jobs {found['schedule_s']:.0f} s"
    ]
    if absent:
        lines.append(
            f"  this machine has no {found['device'].upper()} device: run here, every one of the {points} "
            f"points would be skipped ({absent})"
        )
    else:
        skipped = found.get("skipped_points", {}).items()
        lines += [f"  skipped: {n} point{'s' * (n != 1)}: {why}" for why, n in skipped]
    for rule, e in found["rules"].items():
        lines.append(
            f"  {rule:16s} {e['jobs']:4d} jobs {e['seconds']:8.1f} s of work, {e['first_start_s']:6.0f} s to "
            f"{e['last_end_s']:6.0f} s ({', '.join(f'{n} {b}' for b, n in e['basis'].items())})"
        )
    return lines + [f"  left out: {item}" for item in found["left_out"]]
