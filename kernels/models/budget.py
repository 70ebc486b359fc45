"""How long will this study take on the machine that runs it?

How long a study will take, before it starts: every job of the workflow's plan costed as a
job costs on the machine that will run it, and the jobs scheduled as Snakemake runs them.

A job's cost is its start-up plus its work. Start-ups are measured on the machine itself, as
jobs of a throw-away Snakemake workflow (kernels.estimate): a shell job importing
the package and torch and initializing CUDA where there is one, a script job, a papermill and
an nbconvert job, and a real measure, validate and build job on a tiny point. Work:

- measure: the tiny measure job, with its timing window replaced by the point's (the model's
  time per call: kernels.models.predict on a GPU, the machine's copy and product rates on a
  CPU; do_bench's windows on a GPU, torch.utils.benchmark's on a CPU) for each launch (the
  fused kernel's candidates), and the float64 check; under the interpreter, the point's
  interpreted launches instead (``Interpreter``). A point a gate skips (interpreter limit, a
  backend the device lacks, predicted over the call budget) costs the tiny job without its
  timing.
- validate, build, preflight, tile_errors: compiles counted per kernel variant each job really
  builds (distinct variants, per target), each at its kernel's measured compile time (a real
  build job measures them), a build's also with its resources read back (cuobjdump);
  validation's cases at the tiny validate job's cost per case; under the interpreter, every
  case's launches.
- every other job (scripts, reports): its kind's start-up.

Jobs run as the workflow allows (``schedule``): a job that times kernels takes every core,
jobs using the GPU take it one at a time, the others run side by side on the cores; each job
waits for the jobs whose outputs it reads.

Pure Python (no torch, no triton): the script that measures the machine counts the plan's
kernel variants and interpreted launches and passes them in as numbers. What is not costed is
named in the estimate's ``left_out``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from kernels import catalog
from kernels.models import cost, expected, predict
from kernels.models.stages import stage_names
from kernels.planning.gpus import Gpu
from kernels.planning.point import Point
from kernels.spec import (
    CUDA_FLUSH_BYTES,
    DEFAULT_BLOCK,
    DEFAULT_INTERPRETER_LIMIT,
    RATE_MIN_SAMPLES,
    RATE_SINGLE_CALLS,
    STAGE_FEWEST_PASSES,
    STAGE_FLUSH_FACTOR,
    STAGE_FLUSH_MIN_BYTES,
    STAGE_MAX_PASSES,
    STAGE_MAX_SECONDS,
    STAGE_MIN_PASSES,
    STAGE_MIN_SECONDS,
    rate_seconds,
)

# Interpreter cost of one program instance and of one loop iteration inside it, per kernel, in
# milliseconds on the development machine (least squares over 180 launches: every kernel at
# nine shapes, T 1 to 512, d 16 to 256, blocks 16 to 64, causal and not, float16 and float32;
# each launch within a factor 1.5 to 2.5 of its fit, the rest is the machine's noise). The
# interpreter runs each program in Python, one tile operation at a time, so its time follows
# the operations executed, not the elements. Only the ratios matter: the probe measures each
# kernel on this machine and scales its pair (``Interpreter.speed``).
INTERPRETER_MS: dict[str, tuple[float, float]] = {
    "scores_kernel": (7.5, 0.0),
    "softmax_kernel": (6.6, 2.9),
    "pv_kernel": (5.7, 2.9),  # triton_naive's; triton_s_only's pv kernel measured (8.8, 2.5)
    "stats_kernel": (5.8, 2.2),  # triton_s_only's: least squares over T = 256, 512, 1,024
    "attention_fwd_kernel": (11.6, 5.7),  # with carried row statistics (triton_flash)
    "attention_fwd_kernel_tile": (9.0, 6.9),  # without (triton_tile_softmax)
}
# A kernel not measured here (a plugin's) is costed as the dearest measured one, per program
# and per iteration: an estimate that errs long.
UNMEASURED_KERNEL_MS = tuple(max(pair[i] for pair in INTERPRETER_MS.values()) for i in (0, 1))


def interpreter_ms(kernel: str) -> tuple[float, float]:
    """(per program, per loop iteration) interpreted milliseconds of a kernel key."""
    return INTERPRETER_MS.get(kernel, UNMEASURED_KERNEL_MS)


@dataclass(frozen=True)
class Windows:
    """How long the timing of one call takes (kernels.measure.timing, kernels.spec)."""

    cpu_min_s: float  # torch.utils.benchmark's least run time
    cpu_max_s: float  # and its most
    cpu_min_samples: int  # a slow call still gets this many
    cuda_warmup_s: float  # do_bench's warm-up window
    cuda_rep_s: float  # and its timed one
    cuda_flush_bytes: int = 256 << 20  # L2 flushed before each timed call (do_bench's buffer)
    cpu_stage_s: float = STAGE_MIN_SECONDS["cpu"]  # the stages' passes at least (config timing)


@dataclass(frozen=True)
class Startup:
    """What a job costs before it does anything, as Snakemake runs it on this machine (from
    Snakemake's own start and end times of each job of the throw-away workflow)."""

    shell_s: float  # a command in its own process: python, torch, triton (and CUDA)
    script_s: float  # a script: job (Snakemake's script machinery, kernels, pandas)
    notebook_s: float  # a real report page executed on tiny data (rule report_notebook)
    html_s: float  # its outcome read and the page converted to HTML (rule report_html)
    workflow_s: float  # Snakemake's own start and end, once per run
    # a command handed to a warm worker (kernels.warm: Snakemake's job and the thin client);
    # None: every command runs in its own process (shell_s)
    warm_s: float | None = None
    worker_s: float = 0.0  # a worker's start beyond a warm job (imports, CUDA, rehearsal)

    @property
    def job_s(self) -> float:
        """What a command of the study (measure, validate, build, ceilings, tile_errors)
        costs before it does anything, its worker being warm."""
        return self.shell_s if self.warm_s is None else self.warm_s


@dataclass(frozen=True)
class Interpreter:
    """The Triton interpreter on this machine: ``speed`` scales each kernel's pair in
    INTERPRETER_MS (measured seconds over the pair's prediction, from one short run of each
    kernel), ``setup_s`` is a process's first interpreted launch beyond its work, and
    ``counting`` the slow-down of a launch while the traffic counter hooks its loads and
    stores (a measured point runs under it)."""

    speed: dict[str, float]
    setup_s: float
    counting: float

    def seconds(self, work: dict[str, tuple[int, int]]) -> float:
        """Interpreted seconds of {kernel: (programs, loop iterations)}."""
        total = 0.0
        for kernel, (programs, iterations) in work.items():
            per_program, per_iteration = interpreter_ms(kernel)
            total += self.speed.get(kernel, 1.0) * (programs * per_program + iterations * per_iteration) / 1e3
        return total


def kernel_key(kernel: str, constants: dict) -> str:
    """A kernel's name, the fused kernel without carried statistics (the tile-local softmax)
    told apart: it compiles and interprets differently."""
    if kernel == "attention_fwd_kernel" and not constants.get("CARRY_STATS", True):
        return "attention_fwd_kernel_tile"
    return kernel


@dataclass(frozen=True)
class Machine:
    device: str  # where the plan's kernels run: cpu (the interpreter) or cuda
    cores: int  # Snakemake's --cores
    startup: Startup
    windows: Windows
    measure_s: float  # a real measure job of a tiny torch point, start to end
    measure_timed_s: float  # of which its timing window
    validate_case_s: float  # one validation case (inputs, float64 definition, baseline, one call)
    compile_s: dict[str, float] = field(default_factory=dict)  # one variant, one target, by kernel
    inspect_s: float = 0.0  # a build reading a compiled variant back (cuobjdump, artifacts)
    build_fixed_s: float = 0.0  # a build job beyond its start-up and its variants
    gpu: Gpu | None = None  # on cuda: the GPU the model predicts
    ceilings: dict | None = None  # on cpu: {"copy_gbps", "matmul_tflops"} of this machine
    interpreter: Interpreter | None = None  # on cpu
    interpreted_measure_s: float = 0.0  # a real measure job of a tiny Triton point, interpreted


@dataclass
class Work:
    """What one job does beyond its start-up: kernel variants it compiles ({kernel: variants,
    each for one target}), validation cases it runs, launches it interprets ({kernel:
    (programs, iterations)}). Kernels are named by ``kernel_key``."""

    compiles: dict[str, int] = field(default_factory=dict)
    cases: int = 0
    interpreted: dict[str, tuple[int, int]] = field(default_factory=dict)

    def add_interpreted(self, kernel: str, programs: int, iterations: int) -> None:
        p, i = self.interpreted.get(kernel, (0, 0))
        self.interpreted[kernel] = (p + programs, i + iterations)


@dataclass
class Plan:
    """The study's jobs, as the workflow plans them (workflow/rules/common.smk)."""

    points: list[Point]
    build_jobs: dict[str, Work]  # build job name → its compiles (variants × targets)
    validations: dict[str, Work]  # validation name → its cases (and their work)
    measures: dict[str, Work]  # point name → compiles left to the measure job, interpreted launches
    gathers: list[str]  # gather groups
    reports: dict[str, list[str]]  # report → the rules whose outputs its notebook reads
    tile_errors: Work | None = None
    preflight: Work | None = None  # on a GPU: compiles for the local target, on every core
    # on a GPU the preflight (in the plan or run before it) filled Triton's cache with every
    # variant of the points and the validation cases: validation compiles nothing itself
    validation_cached: bool = False
    rules: list[str] = field(default_factory=list)  # every rule of the workflow
    interpreter_limit: int = DEFAULT_INTERPRETER_LIMIT
    call_seconds: float = 30.0


@dataclass
class Job:
    rule: str
    name: str
    seconds: float
    after: list[str] = field(default_factory=list)  # names of the jobs it waits for
    exclusive: bool = False  # times kernels: every core
    gpu: bool = False  # takes the GPU


# Rules no study job runs: the default target, this estimate, and the profiling command's
# (scripts/gpu_profile.sh asks for those; not part of `all`).
NOT_IN_STUDY = ("all", "budget", "profile", "profile_ncu", "profile_summary", "gpu_tests")
ORDER = (
    "preflight",
    "build",
    "validate",
    "tile_errors",
    "model",
    "env",
    "build_table",
    "predict",
    "predict_stages",
    "backward_model",
    "ceilings",
    "measure",
    "gather",
    "collect",
    "report_notebook",
    "report_html",
    "index",
    "pack",
)


# --- work of a launch ---------------------------------------------------------------------


def interpreted_launch(
    kernel: str, grid: tuple[int, ...], constants: dict, tokens: int
) -> tuple[str, int, int]:
    """(kernel key of INTERPRETER_MS, programs, loop iterations) of one launch: each program
    streams its key tiles (up to the diagonal when causal) or its row blocks."""
    programs = math.prod(grid)
    kernel = kernel_key(kernel, constants)
    if kernel == "scores_kernel":
        return kernel, programs, 0
    if kernel == "softmax_kernel":
        passes = 0 if constants["SINGLE_PASS"] else 2 * cost.cdiv(tokens, constants["ROW_BLOCK"])
        return kernel, programs, programs * passes
    if not {"BLOCK_M", "BLOCK_N"} <= constants.keys():  # a plugin's kernel: its loop unknown
        return kernel, programs, programs
    bm, bn = constants["BLOCK_M"], constants["BLOCK_N"]
    spans = (min(tokens, (m + 1) * bm) if constants.get("CAUSAL") else tokens for m in range(grid[0]))
    per_row_block = sum(cost.cdiv(hi, bn) for hi in spans)
    return kernel, programs, per_row_block * math.prod(grid[1:])


# --- one call and its timing ----------------------------------------------------------------


def call_seconds(point: Point, gpu: Gpu) -> float:
    """The model's slower time floor for one call on a GPU (a PyTorch path costed as the
    Triton path of its kind: materialized or fused)."""
    if not point.triton:
        point = replace(point, impl=catalog.triton_path(point.stores))
        point = replace(point, block_m=point.block_m or DEFAULT_BLOCK, block_n=point.block_n or DEFAULT_BLOCK)
    return predict.predict(point, gpu)["time_high_s"]


def cpu_call_seconds(point: Point, ceilings: dict) -> float:
    """The roofline of one call at the machine's measured rates, as the time gate holds it."""
    return expected.call_seconds(point, ceilings)


def cpu_window(call: float, windows: Windows, fill: float) -> float:
    """torch.utils.benchmark's adaptive run for one call: at least max(least run time, the
    minimum samples' worth), and ``fill`` of the way to the most (how far this machine's
    noise takes the tiny job's run, measured)."""
    least = min(windows.cpu_max_s, max(windows.cpu_min_s, windows.cpu_min_samples * call))
    return call + least + fill * (windows.cpu_max_s - least)


def cpu_fill(machine: Machine) -> float:
    w = machine.windows
    return min(1.0, max(0.0, (machine.measure_timed_s - w.cpu_min_s) / (w.cpu_max_s - w.cpu_min_s)))


def cuda_window(call: float, windows: Windows, gpu: Gpu) -> float:
    """triton.testing.do_bench: a call, five to estimate, the warm-up window, the timed window
    (each timed call after an L2 flush)."""
    flush = windows.cuda_flush_bytes / gpu.hbm_bytes_per_s
    estimate = call + flush
    warm = max(1, int(windows.cuda_warmup_s / estimate))
    timed = max(1, int(windows.cuda_rep_s / estimate))
    return call + 5 * estimate + warm * call + timed * estimate


def check_seconds(point: Point, machine: Machine) -> float:
    """The float64 check of the output: the definition's two products and its scores, at
    half the float32 rate (float64 on a GPU's CUDA cores or a CPU's vector units)."""
    work = 4 * point.groups * point.tokens**2 * point.head_dim
    scores = 4 * 8 * point.groups * point.tokens**2  # written, read by the softmax, read by P·V
    if machine.device == "cuda" and machine.gpu:
        return work / (machine.gpu.fp32_flops / 2) + scores / machine.gpu.hbm_bytes_per_s
    if machine.ceilings:
        return work / (machine.ceilings["matmul_tflops"] * 1e12 / 2) + scores / (
            machine.ceilings["copy_gbps"] * 1e9
        )
    return 0.0


def launches(point: Point) -> int:
    """Configurations a point is timed with on a GPU: each launch candidate its registration names."""
    candidates = catalog.get(point.impl).hook("launch_candidates")
    return len(candidates(point)) if candidates else 1


def skipped(point: Point, machine: Machine, plan: Plan) -> str | None:
    """Why a gate records the point as skipped before it runs (as far as a plan can tell)."""
    if machine.device == "cpu":
        if not catalog.get(point.impl).cpu:
            return "backend unavailable on a CPU"
        if point.triton and point.groups * point.tokens**2 > plan.interpreter_limit:
            return "over the interpreter limit"
        call = cpu_call_seconds(point, machine.ceilings) if machine.ceilings else 0.0
    else:
        call = call_seconds(point, machine.gpu) if machine.gpu else 0.0
    if call > plan.call_seconds:
        return "predicted over the call budget"
    return None


def flush_seconds(machine: Machine) -> float:
    """Emptying the caches once before a cold stage (kernels.measure.stages)."""
    if machine.device == "cuda" and machine.gpu:
        return CUDA_FLUSH_BYTES / machine.gpu.hbm_bytes_per_s
    levels = [level for level in (machine.ceilings or {}).get("levels") or [] if level.get("level") != "DRAM"]
    last = levels[-1]["bytes"] if levels and levels[-1].get("bytes") else 0
    return 2 * max(STAGE_FLUSH_MIN_BYTES, STAGE_FLUSH_FACTOR * last) / (machine.ceilings["copy_gbps"] * 1e9)


def stages_seconds(point: Point, call: float, machine: Machine) -> float:
    """Timing a materialized path's stages: a warm-up pass, then passes of the chain (about a
    call each), warm and cold, the cold ones emptying the caches before every stage, as many
    as kernels.measure.stages runs; nothing for a point without stages or under the
    interpreter."""
    stages = len(stage_names(point))
    if not stages or (machine.device == "cpu" and point.triton):
        return 0.0
    per_pass = 2 * call + stages * flush_seconds(machine)
    least = machine.windows.cpu_stage_s if machine.device == "cpu" else STAGE_MIN_SECONDS[machine.device]
    passes = min(STAGE_MAX_PASSES, max(STAGE_MIN_PASSES, math.ceil(least / per_pass)))
    if passes * per_pass > STAGE_MAX_SECONDS:
        passes = max(STAGE_FEWEST_PASSES, min(passes, math.ceil(STAGE_MAX_SECONDS / per_pass)))
    return call + passes * per_pass


def measure_seconds(point: Point, machine: Machine, plan: Plan, work: Work | None = None) -> float:
    """One measure job: the tiny measure job (a point without stages), its timing window
    replaced by the point's, and the point's stages timed."""
    work = work or Work()
    fixed = machine.measure_s - machine.measure_timed_s
    if skipped(point, machine, plan):
        return fixed
    check = check_seconds(point, machine)
    if machine.device == "cpu":
        if point.triton:
            interp = machine.interpreter
            seconds = interp.counting * interp.seconds(work.interpreted) if interp else 0.0
            return machine.interpreted_measure_s + seconds + check
        call = cpu_call_seconds(point, machine.ceilings) if machine.ceilings else 0.0
        # the timing (its warm-up call included), then the peak-memory call, whose output is
        # checked, then its stages
        window = cpu_window(call, machine.windows, cpu_fill(machine))
        return fixed + window + call + check + stages_seconds(point, call, machine)
    call = call_seconds(point, machine.gpu)
    # per launch a warm-up call (it loads the kernel) and do_bench; then the peak-memory call
    timed = launches(point) * (call + cuda_window(call, machine.windows, machine.gpu))
    staged = stages_seconds(point, call, machine)
    return fixed + timed + call + check + compile_seconds(work, machine) + staged


# The ceilings job samples each cache level's copy and the exponentials for RATE_MIN_SECONDS
# to RATE_MAX_SECONDS each (kernels.measure.ceilings), a quick study in proportion
# (kernels.spec.rate_seconds); a machine describes up to three data levels: about 2 × the least.
SAMPLED_LEVELS = 4


# The backward's crossing walks every tile pair of its fused model at each T of its range
# (kernels.models.backward_predictions): about 3 million pairs a second, measured on the
# 2-core development machine (the ci preset's two shapes: 12.6 million pairs in 4.2 s).
MODEL_TILE_PAIRS_PER_S = 3e6
TRAINING_BLOCKS = (64, 64)  # the blocks of the training shape's crossing (Point's defaults)


def backward_model_seconds(points: list[Point], script_s: float) -> float:
    """The backward_model job: its script's start, and the crossing's tile pairs per shape."""
    from kernels.models.backward_predictions import CROSSING_TOKENS

    shapes = {
        (p.head_dim, p.dtype, p.causal, p.block_m, p.block_n) for p in points if p.backward and p.triton
    }
    pairs = sum(-(-t // bm) * -(-t // bn) for *_, bm, bn in shapes for t in CROSSING_TOKENS)
    bm, bn = TRAINING_BLOCKS
    pairs += sum(-(-t // bm) * -(-t // bn) for t in CROSSING_TOKENS)
    return script_s + pairs / MODEL_TILE_PAIRS_PER_S


def ceilings_seconds(machine: Machine) -> float:
    """The ceilings job: a DRAM copy and a square product, each timed like a point (sizes of
    kernels.measure.ceilings), their inputs filled, and the levels' copies and the
    exponentials sampled."""
    if machine.device == "cuda" and machine.gpu:
        copy, product = (
            2 * (1 << 30) / machine.gpu.hbm_bytes_per_s,
            2 * 8192**3 / machine.gpu.tensor_flops["bfloat16"],
        )
        timed = cuda_window(copy, machine.windows, machine.gpu) + cuda_window(
            product, machine.windows, machine.gpu
        )
        return machine.startup.job_s + timed
    if not machine.ceilings:
        raise ValueError("a CPU estimate needs the machine's ceilings (copy_gbps, matmul_tflops)")
    copy = 2 * (128 << 20) / (machine.ceilings["copy_gbps"] * 1e9)
    product = 2 * 2048**3 / (machine.ceilings["matmul_tflops"] * 1e12)
    fill = cpu_fill(machine)
    timed = cpu_window(copy, machine.windows, fill) + cpu_window(product, machine.windows, fill)
    # the inputs: random numbers, written once
    sampling = SAMPLED_LEVELS * 2 * rate_seconds(machine.windows.cpu_stage_s)[0]
    ops = ops_seconds(machine.ceilings, machine.windows)
    return machine.startup.job_s + timed + 4 * copy + sampling + ops


def ops_seconds(ceilings: dict, windows: Windows) -> float:
    """The operations' rates (kernels.measure.op_rates), from the calls the ceilings timed:
    each sampled as the copies are (three calls to start, then blocks for at least
    RATE_MIN_SECONDS, at most RATE_MAX_SECONDS, RATE_MIN_SAMPLES at least); a flushed or handed
    pass RATE_SINGLE_CALLS
    single calls, each after what it recorded running before it (a flush, a product)."""
    ops = ceilings.get("ops")
    if not ops:
        return 0.0
    least, most = rate_seconds(windows.cpu_stage_s)
    total = 0.0
    for entry in (ops.get("products") or []) + (ops.get("passes") or []):
        call = entry["time_us"] / 1e6
        if "before_us" in entry:
            total += RATE_SINGLE_CALLS * (call + entry["before_us"] / 1e6)
        else:
            sampled = min(most, max(least, RATE_MIN_SAMPLES * max(call, 1e-3)))
            total += 3 * call + max(call, sampled)
    return total + 4 * 2 * least  # the fixed costs: a chain timed, each call in blocks


def validate_seconds(work: Work, machine: Machine, cache_filled: bool) -> float:
    seconds = machine.startup.job_s + work.cases * machine.validate_case_s
    if work.interpreted and machine.interpreter:
        seconds += machine.interpreter.setup_s + machine.interpreter.seconds(work.interpreted)
    if not cache_filled:
        seconds += compile_seconds(work, machine)
    return seconds


def build_seconds(work: Work, machine: Machine, cores: int = 1, artifacts: bool = True) -> float:
    """A build job (artifacts kept, each variant read back with cuobjdump; its command goes to
    a warm worker), or the preflight (in its own process, on ``cores`` processes; only the
    ptxas log read)."""
    read_back = sum(work.compiles.values()) * machine.inspect_s if artifacts else 0.0
    start = machine.startup.job_s if artifacts else machine.startup.shell_s
    return start + machine.build_fixed_s + (compile_seconds(work, machine) + read_back) / cores


def compile_seconds(work: Work, machine: Machine) -> float:
    """The job's compiles, each at its kernel's measured time (a kernel not measured: the
    mean of those that were)."""
    known = machine.compile_s
    mean = sum(known.values()) / len(known) if known else 0.0
    return sum(n * known.get(kernel, mean) for kernel, n in work.compiles.items())


# --- the plan's jobs and their schedule -----------------------------------------------------


def jobs(plan: Plan, machine: Machine) -> tuple[list[Job], list[str]]:
    """Every job of the plan with its cost and what it waits for; and what is left out."""
    s = machine.startup
    on_gpu = machine.device == "cuda"
    out: list[Job] = []
    left_out: list[str] = []

    def add(rule, name, seconds, after=(), exclusive=False, gpu=False):
        out.append(Job(rule, name, seconds, list(after), exclusive, gpu))
        return name

    preflight = []
    if plan.preflight is not None:
        preflight = [
            add(
                "preflight",
                "preflight",
                build_seconds(plan.preflight, machine, machine.cores, artifacts=False),
                exclusive=True,
            )
        ]
    builds = [add("build", f"build {n}", build_seconds(w, machine)) for n, w in plan.build_jobs.items()]
    cache_filled = plan.validation_cached or bool(preflight)
    validations = {
        name: add(
            "validate", f"validate {name}", validate_seconds(w, machine, cache_filled), preflight, gpu=on_gpu
        )
        for name, w in plan.validations.items()
    }
    tile = []
    if plan.tile_errors is not None:
        tile = [
            add("tile_errors", "tile_errors", validate_seconds(plan.tile_errors, machine, False), gpu=on_gpu)
        ]
    model = add("model", "model", s.script_s)
    env = add("env", "env", s.script_s + s.shell_s)  # a script importing torch (provenance)
    table = add("build_table", "build_table", s.script_s, builds)
    predicted = add("predict", "predict", s.script_s, [table])
    ceilings = add("ceilings", "ceilings", ceilings_seconds(machine), exclusive=True, gpu=on_gpu)
    staged = add("predict_stages", "predict_stages", s.script_s, [ceilings])
    backward_seconds = backward_model_seconds(plan.points, s.script_s)
    backward_model = add("backward_model", "backward_model", backward_seconds, [ceilings])
    measures: dict[str, list[str]] = {}
    for point in plan.points:
        after = [validations[point.validation_name], ceilings]
        if point.build_name in plan.build_jobs:
            after.append(f"build {point.build_name}")
        timed = on_gpu or not point.triton
        seconds = measure_seconds(point, machine, plan, plan.measures.get(point.name))
        name = add("measure", f"measure {point.name}", seconds, after, exclusive=timed, gpu=on_gpu)
        measures.setdefault(f"{point.impl}_{point.dtype}", []).append(name)
    gathers = [add("gather", f"gather {g}", s.script_s, measures.get(g, [])) for g in plan.gathers]
    collect = add("collect", "collect", s.script_s, [*gathers, env])
    produced = {"collect": [collect], "model": [model], "predict": [predicted], "env": [env]}
    produced |= {"predict_stages": [staged], "backward_model": [backward_model]}
    produced |= {"tile_errors": tile, "build_table": [table]}
    notebooks, pages = [], []
    for report, rules in plan.reports.items():
        after = [name for rule in rules for name in produced.get(rule, [])]
        notebooks.append(add("report_notebook", f"report_notebook {report}", s.notebook_s, after))
        pages.append(add("report_html", f"report_html {report}", s.html_s, [notebooks[-1]]))
    index_after = [*pages, *notebooks, collect, env, *validations.values(), table, predicted]
    index = add("index", "index", s.script_s, index_after)
    add("pack", "pack", s.script_s, [index])
    for rule in plan.rules:
        if rule not in ORDER and rule not in NOT_IN_STUDY:
            left_out.append(f"rule {rule}: not costed (a rule this estimate does not know)")
    add_worker_starts(out, machine)
    return out, left_out


# The rules whose commands go to a warm worker (kernels.warm.client.WARM_COMMANDS).
WARM_RULES = ("measure", "validate", "build", "ceilings", "tile_errors")


def lane_kind(rule: str, machine: Machine) -> str:
    """A worker serves one Triton mode: builds compile, the rest interpret on a CPU."""
    return "compiled" if rule == "build" or machine.device == "cuda" else "interpret"


def add_worker_starts(jobs: list[Job], machine: Machine) -> int:
    """Each lane's worker starts with its first job: the first jobs of a kind, as many as run
    side by side (one per core), pay ``startup.worker_s`` each. The starts added."""
    if machine.startup.warm_s is None or not machine.startup.worker_s:
        return 0
    started: dict[str, int] = {}
    for job in jobs:
        if job.rule not in WARM_RULES:
            continue
        kind = lane_kind(job.rule, machine)
        if started.get(kind, 0) < max(1, machine.cores):
            started[kind] = started.get(kind, 0) + 1
            job.seconds += machine.startup.worker_s
    return sum(started.values())


def schedule(jobs: list[Job], cores: int) -> dict[str, tuple[float, float]]:
    """Start and end of every job, as a greedy scheduler runs them: whenever a job ends,
    each waiting job whose inputs are done starts, in the order given, if its cores (all of
    them for an exclusive job, else one) and the GPU (one job at a time) are free."""
    cores = max(1, cores)
    names = {job.name for job in jobs}
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    running: dict[str, Job] = {}
    waiting = list(jobs)
    now = 0.0
    while waiting or running:
        free = cores - sum(cores if job.exclusive else 1 for job in running.values())
        gpu_busy = any(job.gpu for job in running.values())
        for job in list(waiting):
            need = cores if job.exclusive else 1
            ready = all(a in ends for a in job.after if a in names)
            if not ready or need > free or (job.gpu and gpu_busy):
                continue
            starts[job.name] = now
            running[job.name] = job
            waiting.remove(job)
            free -= need
            gpu_busy = gpu_busy or job.gpu
        if not running:
            raise ValueError(f"jobs wait for jobs that never run: {[job.name for job in waiting][:3]}")
        now = min(starts[n] + job.seconds for n, job in running.items())
        for name in [n for n, job in running.items() if starts[n] + job.seconds <= now]:
            del running[name]
            ends[name] = now
    return {name: (starts[name], ends[name]) for name in ends}


def estimate(plan: Plan, machine: Machine) -> dict:
    """Seconds in total (the schedule's length plus Snakemake's own start and end), per rule
    (jobs and the seconds they take, side by side or not) and the figures they come from."""
    planned, left_out = jobs(plan, machine)
    order = {rule: i for i, rule in enumerate(ORDER)}
    planned.sort(key=lambda job: order.get(job.rule, len(ORDER)))
    times = schedule(planned, machine.cores)
    span = max((end for _, end in times.values()), default=0.0)
    rules: dict[str, dict] = {}
    for job in planned:
        entry = rules.setdefault(
            job.rule, {"jobs": 0, "seconds": 0.0, "first_start_s": None, "last_end_s": 0.0}
        )
        start, end = times[job.name]
        entry["jobs"] += 1
        entry["seconds"] += job.seconds
        entry["first_start_s"] = (
            start if entry["first_start_s"] is None else min(entry["first_start_s"], start)
        )
        entry["last_end_s"] = max(entry["last_end_s"], end)
    skips: dict[str, int] = {}
    for point in plan.points:
        if why := skipped(point, machine, plan):
            skips[why] = skips.get(why, 0) + 1
    left_out.append("a point skipped for a failed validation or build is costed as measured")
    if machine.device == "cpu":
        left_out.append("float16 and bfloat16 products on a CPU are costed at the float32 product rate")
    else:
        left_out.append("loading a compiled kernel from Triton's cache (the build and preflight fill it)")
    total = machine.startup.workflow_s + span
    return {
        "device": machine.device,
        "gpu": machine.gpu.name if machine.gpu else None,
        "points": len(plan.points),
        "cores": machine.cores,
        "total_s": total,
        "schedule_s": span,
        "rules": rules,
        "skipped_points": skips,
        "startup": vars(machine.startup),
        "measured": {
            "measure_s": machine.measure_s,
            "measure_timed_s": machine.measure_timed_s,
            "validate_case_s": machine.validate_case_s,
            "compile_s": machine.compile_s,
            "inspect_s": machine.inspect_s,
            "build_fixed_s": machine.build_fixed_s,
            "interpreted_measure_s": machine.interpreted_measure_s,
            "interpreter": vars(machine.interpreter) if machine.interpreter else None,
            "ceilings": machine.ceilings,
        },
        "left_out": left_out,
        # the figures of earlier estimates, which scripts print
        "startup_s": machine.startup.shell_s,
        "compile_s": max(machine.compile_s.values(), default=0.0),  # the slowest kernel's
        "build_s": rules.get("build", {}).get("seconds", 0.0)
        + rules.get("preflight", {}).get("seconds", 0.0),
        "validate_s": rules.get("validate", {}).get("seconds", 0.0),
        "measure_s": rules.get("measure", {}).get("seconds", 0.0),
    }


def warm_start(start: dict) -> str:
    if start.get("warm_s") is None:
        return f"shell {start['shell_s']:.1f} s (each command in its own process)"
    return (
        f"through a warm worker {start['warm_s']:.2f} s (a worker's start {start['worker_s']:.1f} s "
        f"per lane; a command in its own process {start['shell_s']:.1f} s)"
    )


def summary(found: dict) -> list[str]:
    """The estimate in a few lines, for a console."""
    where = found["gpu"] or found["device"]
    start = found["startup"]
    lines = [
        f"estimated {found['total_s']:.0f} s for {found['points']} points on {where} "
        f"({found['cores']} cores): Snakemake {start['workflow_s']:.1f} s + jobs {found['schedule_s']:.0f} s",
        f"start-up per job: {warm_start(start)}, script {start['script_s']:.1f} s, notebook "
        f"{start['notebook_s']:.1f} s, html {start['html_s']:.1f} s; "
        f"compile up to {found['compile_s']:.2f} s per variant",
    ]
    for rule, entry in found["rules"].items():
        lines.append(
            f"  {rule:16s} {entry['jobs']:4d} jobs {entry['seconds']:8.1f} s of work, "
            f"{entry['first_start_s']:6.0f} s to {entry['last_end_s']:6.0f} s"
        )
    return lines
