"""The study's estimated duration on this machine, before it starts (rule budget,
results/budget.json; the costing itself is kernels.models.budget). First the machine is
measured with a throw-away Snakemake workflow in a temporary folder (``calibrate``): its
jobs are the kinds the study's jobs are, each timed by Snakemake itself; then the plan's
kernel variants and interpreted launches are counted (``planned_launches``, the one place
that counts them), and every job is costed."""

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernels.impl import mode

mode.set_interpret(False)  # variants are specialized as the compiler sees them, never run here

from kernels.models import budget  # noqa: E402
from kernels.planning.gpus import GPUS  # noqa: E402
from kernels.planning.point import Point, parse_blocks  # noqa: E402

SHELL = "import torch, triton, kernels.cli; torch.cuda.is_available() and torch.cuda.init()"
SCRIPT = """import pandas
from kernels.io.script_log import logged_to
with logged_to(snakemake.log[0]):
    open(snakemake.output[0], "w").write("ok")
"""
# The calibration's tables for a real report page (the budget rule names it): the two tiny
# measure jobs' records as the metrics table, this machine's provenance, the model's tables.
TABLES_SCRIPT = """import json
from kernels.io.atomic import write_csv_atomic
from kernels.io.script_log import logged_to
from kernels.io.tables import write_tables
from kernels.measure import provenance
from kernels.models import model_tables
with logged_to(snakemake.log[0]):
    records = [json.load(open(path)) for path in snakemake.input]
    write_tables(records, "results/metrics.parquet", "results/metrics.csv", "results/stages.csv",
                 "results/stage_times.csv")
    provenance.write({}, snakemake.params.device, "results/env.json", root=".")
    write_csv_atomic("results/model/matrix_sizes.csv", model_tables.matrix_sizes())
    open(snakemake.output[0], "w").write("ok")
"""
# What the calibration's tables job writes, relative to its folder: the page may read these.
CALIBRATION_TABLES = (
    "results/metrics.parquet",
    "results/metrics.csv",
    "results/stages.csv",
    "results/stage_times.csv",
    "results/env.json",
    "results/model/matrix_sizes.csv",
)
# The throw-away workflow's own warm workers (kernels.warm), as the study's Snakefile has them.
SESSION = """from kernels.warm import session
RUN = []
onstart:
    RUN.append(session.begin(".", leak_mb=512))
onsuccess:
    session.end(RUN.pop() if RUN else None)
onerror:
    session.end(RUN.pop() if RUN else None)
"""
# Jobs that hand their command to a worker run one after another, in this order (each waits
# for the one before), so that the first of each lane starts its worker and the rest find it
# warm: the first measure job's extra time is a worker's start.
WARM_CHAIN = (
    "measure0",
    "measure1",
    "warm0",
    "validate",
    "interpreted0",
    "interpreted1",
    "compiled0",
    "build_one",
    "build",
)
# The interpreter on this machine: one launch of each kernel at a small shape, after a first
# launch that sets the interpreter up; one launch under the traffic counter; short ceilings.
PROBE = """import json, os, sys, time
os.environ["ATTNIO_INTERPRET"] = "1"
import torch
from kernels.impl.inputs import make_qkv
from kernels.paths.triton_flash import forward as flash
from kernels.paths.triton_naive import forward as naive
from kernels.measure.traffic import count_traffic
torch.set_num_threads(1)
B, H, T, d, bm, bn = 1, 1, 100, 32, 16, 32
q, k, v = make_qkv(B, H, T, d, torch.float32, "cpu", 0)
o = torch.empty_like(q)
s, p = naive.sp_tensors(q)
launches = naive.naive_launches(q, k, v, s, p, o, False, bm, bn) + [
    flash.attention_fwd_launch(q, k, v, o, False, bm, bn, True),
    flash.attention_fwd_launch(q, k, v, o, False, bm, bn, False),
]
def timed(fn):
    started = time.perf_counter(); fn(); return time.perf_counter() - started
first = timed(launches[3].run)
found = {"launches": [], "tokens": T}
for launch in launches:
    found["launches"].append({"kernel": launch.name, "grid": list(launch.grid),
        "constants": {k: v for k, v in launch.options.items() if isinstance(v, (bool, int))},
        "seconds": timed(launch.run)})
found["first_s"] = first
with count_traffic():
    found["counted_s"] = timed(launches[3].run)
if sys.argv[2] == "ceilings":
    x = torch.rand((64 << 20) // 4); y = torch.empty_like(x)
    a = torch.randn(1024, 1024); b = torch.randn(1024, 1024)
    torch.set_num_threads(int(sys.argv[3]))
    copy = min(timed(lambda: y.copy_(x)) for _ in range(5))
    product = min(timed(lambda: a @ b) for _ in range(5))
    found["ceilings"] = {"copy_gbps": 2 * x.numel() * 4 / copy / 1e9,
                         "matmul_tflops": 2 * 1024**3 / product / 1e12}
json.dump(found, open(sys.argv[1], "w"))
"""


# --- what the plan launches and compiles -------------------------------------------------------


def planned_launches(params, device: str) -> list[dict]:
    """Every kernel launch the plan makes, one record each: the job that makes it ("rule",
    "job"), what for ("use": measure, candidate, validate, tile_errors, build), its variant
    (the id the build and the preflight give it) and, under the interpreter, its work
    ("interpreted": kernel, programs, loop iterations). The one place that counts them;
    on a GPU whose preflight ran, ``preflight_launches`` reads the same records for the
    points and the validation cases from results/preflight.json."""
    from kernels.build import compile as build
    from kernels.build.variants import candidate_launches, case_launches, point_launches
    from kernels.measure import tile_errors
    from kernels.planning.cases import Shape, cases, shapes_for

    naming = build.gpu_target("sm_90")

    def record(rule, job, use, launch, tokens):
        vid = build.variant_id(build.describe(launch, *build.specialize(launch, naming)))
        work = None
        if device == "cpu":
            work = budget.interpreted_launch(launch.name, launch.grid, launch.options, tokens)
        kernel = budget.kernel_key(launch.name, launch.options)
        return {"rule": rule, "job": job, "use": use, "kernel": kernel, "variant": vid, "interpreted": work}

    points = {name: Point.from_name(name) for name in params.points}
    out = []
    for point in points.values():
        for launch in point_launches(point):
            out.append(record("measure", point.name, "measure", launch, point.tokens))
        for launch in candidate_launches(point):
            out.append(record("measure", point.name, "candidate", launch, point.tokens))
    for job, names in params.build_jobs.items():
        for name in names:
            point = points[name]
            found = point_launches(point) + (candidate_launches(point) if params.candidates else [])
            out += [record("build", job, "build", launch, point.tokens) for launch in found]
    for name in params.validations:
        impl, dtype, blocks = _validation_fields(name)
        bm, bn = parse_blocks(blocks)
        if bm is None:
            continue
        for shape, case_dtype, causal in cases(shapes_for(device), (dtype,), (False, True)):
            for launch in case_launches(impl, shape, case_dtype, causal, bm, bn):
                out.append(record("validate", name, "validate", launch, shape.tokens))
    if params.tile_errors:
        for tokens in tile_errors.TOKENS:
            for block_n in tile_errors.BLOCKS_N:
                for impl in tile_errors.compared():
                    shape = Shape(1, 1, tokens, tile_errors.HEAD_DIM)
                    found = case_launches(impl, shape, "float32", True, tile_errors.BLOCK_M, block_n)
                    out += [
                        record("tile_errors", "tile_errors", "tile_errors", launch, tokens)
                        for launch in found
                    ]
    return out


CASE_KEY = re.compile(r"(?P<impl>\w+)/(?P<dtype>\w+)/.*-(?P<blocks>bm\d+-bn\d+)-[a-z]+-[a-z]+")


def preflight_launches(found: dict) -> list[dict]:
    """The preflight's launches (python -m kernels preflight, results/preflight.json) as
    records of ``planned_launches``: its points' calls and candidates, and its validation
    cases (a case key names its validation: impl, dtype, blocks); the gpu tests' are not the
    study's."""
    out = []
    for launch in found["launches"]:
        if launch["use"] in ("measure", "candidate"):
            job = ("measure", launch["what"])
        elif launch["use"] == "validate" and (match := CASE_KEY.fullmatch(launch["what"])):
            job = ("validate", "{impl}_{dtype}_{blocks}".format(**match.groupdict()))
        else:
            continue
        kernel = launch["kernel"]
        if kernel == "attention_fwd_kernel" and launch["what"].startswith("triton_tile_softmax/"):
            kernel = "attention_fwd_kernel_tile"
        out.append(
            {
                "rule": job[0],
                "job": job[1],
                "use": launch["use"],
                "kernel": kernel,
                "variant": launch["variant"],
            }
        )
    return out


def distinct(items: list[dict], per_variant: int = 1) -> dict[str, int]:
    """{kernel: distinct variants} of launch records (× ``per_variant``: targets)."""
    kernels = {i["variant"]: i["kernel"] for i in items}
    out: dict[str, int] = {}
    for kernel in kernels.values():
        out[kernel] = out.get(kernel, 0) + per_variant
    return out


def _validation_fields(name: str) -> tuple[str, str, str]:
    """impl, dtype, blocks of a validation name (VALIDATION_PATTERN: {impl}_{dtype}_{blocks})."""
    rest, blocks = name.rsplit("_", 1)
    impl, dtype = rest.rsplit("_", 1)
    return impl, dtype, blocks


def works(params, device: str, on_gpu: bool) -> dict:
    """The plan's jobs as budget.Work: compiles (distinct variants, per target) and interpreted
    launches per job, validation cases."""
    from kernels.measure import tile_errors
    from kernels.planning.cases import shapes_for

    found = planned_launches(params, device)
    preflight_json = Path(params.preflight_json)
    if on_gpu and preflight_json.exists():  # the preflight's own count of the GPU's variants
        done = json.loads(preflight_json.read_text())
        found = [i for i in found if i["rule"] not in ("measure", "validate")] + [
            i | {"interpreted": None} for i in preflight_launches(done)
        ]
    by_job: dict[tuple[str, str], list[dict]] = {}
    for item in found:
        by_job.setdefault((item["rule"], item["job"]), []).append(item)

    def work(rule, job, compiles_per_variant=1, uses=None):
        """A job's distinct variants by kernel (compiled: by a build anywhere, by the JIT on a
        GPU) and its interpreted launches (on a CPU)."""
        items = [i for i in by_job.get((rule, job), []) if uses is None or i["use"] in uses]
        compiled = rule == "build" or on_gpu
        made = budget.Work(compiles=distinct(items, compiles_per_variant) if compiled else {})
        for item in items:
            if item["interpreted"] and item["use"] != "candidate":
                made.add_interpreted(*item["interpreted"])
        return made

    cases = 2 * len(shapes_for(device))
    measures = {}
    for name in params.points:
        built = {i["variant"] for i in by_job.get(("build", Point.from_name(name).build_name), [])}
        built = built if params.build_targets else set()
        made = work("measure", name, uses=("measure",))
        left = [
            i
            for i in by_job.get(("measure", name), [])
            if i["use"] == "candidate" and i["variant"] not in built
        ]
        # on a GPU, what neither the build nor the preflight compiled for the local target,
        # the JIT compiles here
        made.compiles = distinct(left) if on_gpu and "preflight" not in params.rules else {}
        measures[name] = made
    validations = {}
    for name in params.validations:
        made = work("validate", name)
        made.cases = cases
        validations[name] = made
    tile = None
    if params.tile_errors:
        tile = work("tile_errors", "tile_errors")
        tile.cases = len(tile_errors.TOKENS)
    targets = len(params.build_targets)
    builds = {job: work("build", job, compiles_per_variant=targets) for job in params.build_jobs}
    preflight = None
    if on_gpu and params.preflight_in_plan and not preflight_json.exists():
        planned = [i for i in found if i["rule"] in ("measure", "validate")]
        preflight = budget.Work(compiles=distinct(planned, len(params.required_targets)))
    return {
        "build_jobs": builds,
        "validations": validations,
        "measures": measures,
        "tile_errors": tile,
        "preflight": preflight,
        "launches": len(found),
    }


# --- the machine ---------------------------------------------------------------------------------


def calibration_snakefile(kinds: dict[str, str], cores: int, on_gpu: bool) -> str:
    """One rule per calibration job: name → shell command (``script`` for a script job,
    ``tables`` for the report page's tables). As in the study, a timed job takes every core,
    a job using the GPU the gpu resource, the commands go to the workflow's warm workers (in
    WARM_CHAIN's order), and html renders the page the notebook job executed."""
    lines = [SESSION, "rule all:", "    input:", *(f"        '{name}.out'," for name in kinds), ""]
    chained = [name for name in WARM_CHAIN if name in kinds]
    for name, command in kinds.items():
        lines += [f"rule {name}:", f"    output: '{name}.out'", f"    log: '{name}.log'"]
        inputs = [f"{chained[chained.index(name) - 1]}.out"] if name in chained[1:] else []
        inputs += {"notebook": ["tables.out"], "html": ["notebook.out"]}.get(name, [])
        inputs += ["measure0.out", "measure1.out"] if name == "tables" else []
        if inputs:
            lines += ["    input: " + ", ".join(repr(i) for i in inputs)]
        if name.startswith("measure"):
            lines += [f"    threads: {cores}"]
        if on_gpu and name.startswith(("measure", "validate", "warm")):
            lines += ["    resources: gpu=1"]
        if command in ("script", "tables"):
            lines += [f"    params: device={'cuda' if on_gpu else 'cpu'!r}"]
            lines += [f"    script: '{'trivial' if command == 'script' else 'tables'}.py'", ""]
        else:
            lines += [f"    shell: {command!r}", ""]
    return "\n".join(lines)


def calibrate(params, device: str, targets: list[str], probe: str | None, interpreted: bool) -> dict:
    """Run the throw-away workflow on ``device``; {job: seconds} as Snakemake timed each (its
    metadata), Snakemake's own start and end, and what the jobs wrote. ``targets``: a build
    job for them; ``probe``: the interpreter probe (and short ceilings); ``interpreted``: a
    measure job under the interpreter."""
    py = "python"
    threads = params.cores
    tiny = "--batch 1 --heads 1 --tokens 16 --head-dim 16"
    kinds = {f"shell{i}": f"{py} -c {SHELL!r} > {{log}} 2>&1 && touch {{output}}" for i in range(2)}
    kinds |= {f"script{i}": "script" for i in range(2)}
    for i in range(2):
        kinds[f"measure{i}"] = (
            f"{py} -m kernels measure --impl sdpa {tiny} --dtype float32 --device {device} "
            f"--threads {threads} --no-ncu --out {{output}} > {{log}} 2>&1"
        )
    # a job through a warm worker that does next to nothing: one tiny validation case
    kinds["warm0"] = (
        f"{py} -m kernels validate --impl torch_naive --dtype float32 --device {device} --tokens 16 "
        "--head-dim 16 --batch 1 --heads 1 --causal false --quiet --exit-zero --json {output} > {log} 2>&1"
    )
    kinds["validate"] = (
        f"{py} -m kernels validate --impl torch_naive --dtype float32 --device {device} --quiet "
        "--exit-zero --json {output} > {log} 2>&1"
    )
    if interpreted:
        for i in range(2):
            kinds[f"interpreted{i}"] = (
                f"{py} -m kernels measure --impl triton_flash {tiny} --dtype float16 --block-m 16 "
                "--block-n 16 --device cpu --out {output} > {log} 2>&1"
            )
    if targets:  # real build jobs: each Triton implementation's first point, for the plan's
        # targets; and the first of them for one target, which tells a job's fixed cost from
        # its cost per variant
        firsts: dict[str, str] = {}
        for point in map(Point.from_name, params.points):
            if point.triton:
                firsts.setdefault(point.impl, point.name)
        names = list(firsts.values())
        if device == "cpu":  # the builds' compiling worker started by a job that does nothing
            kinds["compiled0"] = f"{py} -m kernels ceilings --device cuda --out {{output}} > {{log}} 2>&1"
        for job, (those, where) in {"build_one": (names[:1], targets[:1]), "build": (names, targets)}.items():
            kinds[job] = (
                f"{py} -m kernels build --target {' '.join(where)} --point {' '.join(those)} "
                f"--no-candidates --artifacts artifacts_{job} --out {{output}} > {{log}} 2>&1"
            )
    if probe:
        kinds["probe"] = f"{py} probe.py {{output}} {probe} {threads} > {{log}} 2>&1"
    page = params.calibration_page if params.reports else None
    if page:
        unmade = sorted(set(page["parameters"].values()) - set(CALIBRATION_TABLES))
        if unmade:
            raise ValueError(
                f"calibration page {page['template']} reads {unmade}, which the calibration does not make"
            )
        kinds["tables"] = "tables"
        given = " ".join(
            f"-p {shlex.quote(name)} {shlex.quote(path)}" for name, path in page["parameters"].items()
        )
        template = shlex.quote(page["template"])  # the checkout may live in any folder
        kinds["notebook"] = (  # as rule report_notebook: the page executed, its outcome written
            f"python -m reports.pages.outcome run {template} page.ipynb {{output}} {{log}} -- {given}"
        )
        kinds["html"] = (  # as rule report_html: the outcome read, the page published
            "python -m reports.pages.publish {input} page.ipynb published.ipynb {output} --no-input "
            "> {log} 2>&1"
        )
    with tempfile.TemporaryDirectory(prefix="attnio-budget-") as tmp:
        folder = Path(tmp)
        (folder / "Snakefile").write_text(calibration_snakefile(kinds, params.cores, device == "cuda"))
        (folder / "trivial.py").write_text(SCRIPT)
        (folder / "probe.py").write_text(PROBE)
        (folder / "tables.py").write_text(TABLES_SCRIPT)
        env = os.environ | {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
        env.pop("ATTNIO_INTERPRET", None)
        command = [sys.executable, "-m", "snakemake", "--snakefile", str(folder / "Snakefile")]
        command += ["--directory", tmp, "--cores", str(params.cores), "--resources", "gpu=1", "--quiet"]
        launched = time.time()
        done = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, check=False)
        finished = time.time()
        if done.returncode != 0:
            logs = "".join(f"\n== {p.name}\n{p.read_text()[-1500:]}" for p in folder.glob("*.log"))
            raise RuntimeError(f"the calibration workflow failed:\n{done.stderr[-3000:]}{logs}")
        times = {}
        for path in (folder / ".snakemake" / "metadata").iterdir():
            meta = json.loads(path.read_text())
            if meta.get("rule") in kinds:
                times[meta["rule"]] = (meta["starttime"], meta["endtime"])
        missing = set(kinds) - set(times)
        if missing:
            raise RuntimeError(f"Snakemake's metadata has no times for {sorted(missing)}")
        outputs = {}
        for name in ("measure0", "measure1", "build", "build_one", "probe"):
            if name in kinds:
                outputs[name] = json.loads((folder / f"{name}.out").read_text())
    first = min(start for start, _ in times.values())
    last = max(end for _, end in times.values())
    return {
        "seconds": {name: end - start for name, (start, end) in times.items()},
        "workflow_s": (first - launched) + (finished - last),
        "outputs": outputs,
    }


def interpreter_of(found: dict) -> budget.Interpreter:
    speed = {}
    for launch in found["launches"]:
        kernel, programs, iterations = budget.interpreted_launch(
            launch["kernel"], tuple(launch["grid"]), launch["constants"], found["tokens"]
        )
        per_program, per_iteration = budget.interpreter_ms(kernel)
        speed[kernel] = launch["seconds"] / ((programs * per_program + iterations * per_iteration) / 1e3)
    fwd = next(
        launch["seconds"] for launch in found["launches"] if launch["kernel"] == "attention_fwd_kernel"
    )
    return budget.Interpreter(speed, max(0.0, found["first_s"] - fwd), max(1.0, found["counted_s"] / fwd))


def machine_of(params, plan_device: str, gpu, calibration: dict, device: str, ceilings) -> budget.Machine:
    from kernels.measure import timing
    from kernels.planning.cases import shapes_for
    from kernels.spec import CUDA_REP_MS, CUDA_WARMUP_MS

    seconds, outputs = calibration["seconds"], calibration["outputs"]
    chosen = params.timing  # config timing: the measure jobs' windows on a CPU
    windows = budget.Windows(
        timing.CPU_MIN_SECONDS,
        chosen["cpu_seconds"],
        timing.CPU_MIN_SAMPLES,
        CUDA_WARMUP_MS / 1e3,
        CUDA_REP_MS / 1e3,
        cpu_stage_s=chosen["stage_seconds"],
    )
    startup = budget.Startup(
        shell_s=(seconds["shell0"] + seconds["shell1"]) / 2,
        script_s=(seconds["script0"] + seconds["script1"]) / 2,
        notebook_s=seconds.get("notebook", 0.0),
        html_s=seconds.get("html", 0.0),
        workflow_s=calibration["workflow_s"],
        # the first measure job started the lane's worker, the second found it warm
        warm_s=seconds["warm0"],
        worker_s=max(0.0, seconds["measure0"] - seconds["measure1"]),
    )
    warm = outputs["measure1"]  # the first paid its worker's start (startup.worker_s)
    if device == "cuda":
        timed = budget.cuda_window(warm["time_ms"] / 1e3, windows, gpu)
    else:
        timed = warm["time_ms"] * warm["repeats"] / 1e3
    cases = 2 * len(shapes_for(device))
    compile_s, inspect_s, build_fixed_s = {}, 0.0, 0.0
    if "build" in outputs:
        made = outputs["build"]["variants"]
        by_kernel: dict[str, list[float]] = {}
        for v in made:
            by_kernel.setdefault(budget.kernel_key(v["kernel"], v["constants"]), []).append(v["compile_s"])
        compile_s = {kernel: sum(times) / len(times) for kernel, times in by_kernel.items()}
        one = outputs["build_one"]["variants"]
        rest_all = seconds["build"] - sum(v["compile_s"] for v in made)  # start-up, fixed, read-backs
        rest_one = seconds["build_one"] - sum(v["compile_s"] for v in one)
        if len(made) > len(one):
            inspect_s = max(0.0, (rest_all - rest_one) / (len(made) - len(one)))
        build_fixed_s = max(0.0, rest_one - startup.job_s - len(one) * inspect_s)
    return budget.Machine(
        device=plan_device,
        cores=params.cores,
        startup=startup,
        windows=windows,
        measure_s=seconds["measure1"],
        measure_timed_s=timed,
        validate_case_s=max(0.0, seconds["validate"] - startup.job_s) / cases,
        compile_s=compile_s,
        inspect_s=inspect_s,
        build_fixed_s=build_fixed_s,
        gpu=gpu if plan_device == "cuda" else None,
        ceilings=ceilings,
        interpreter=interpreter_of(outputs["probe"]) if "probe" in outputs else None,
        interpreted_measure_s=(seconds.get("interpreted0", 0.0) + seconds.get("interpreted1", 0.0)) / 2,
    )


def local_gpu() -> tuple[str, str | None, bool]:
    """This machine's GPU among those the model knows, its target and whether it is here;
    without a GPU, the H200 and sm_90 the GPU study is sized for (a rehearsal)."""
    import torch

    from kernels.planning.device import local_target

    if not torch.cuda.is_available():
        return "H200", "sm_90", False
    name = torch.cuda.get_device_name()
    known = [key for key in GPUS if key in name]
    if not known:
        raise SystemExit(f"{name}: not among the GPUs the model knows ({', '.join(GPUS)})")
    return known[0], local_target(), True


def main(smk) -> dict:
    params = smk.params
    plan_device = params.device
    on_gpu = plan_device == "cuda"
    gpu_name, gpu_target, here = local_gpu() if on_gpu else (None, None, False)
    device = "cuda" if here else "cpu"  # where the calibration jobs run
    ceilings = None
    if plan_device == "cpu" and Path(params.ceilings_json).exists():
        ceilings = json.loads(Path(params.ceilings_json).read_text())
    has_triton = any(Point.from_name(n).triton for n in params.points)
    # on a CPU: the interpreter's speed, and short ceilings where the run has none yet
    probe = ("ceilings" if ceilings is None else "interpreter") if plan_device == "cpu" else None
    targets = list(params.build_targets) or ([gpu_target] if on_gpu else [])
    started = time.perf_counter()
    interpreted = plan_device == "cpu" and has_triton
    calibration = calibrate(params, device, targets if has_triton else [], probe, interpreted)
    if ceilings is None and "probe" in calibration["outputs"]:
        ceilings = calibration["outputs"]["probe"].get("ceilings")
    gpu = GPUS[gpu_name] if gpu_name else None
    machine = machine_of(params, plan_device, gpu, calibration, device, ceilings)
    counted = works(params, plan_device, on_gpu)
    plan = budget.Plan(
        points=[Point.from_name(n) for n in params.points],
        build_jobs=counted["build_jobs"],
        validations=counted["validations"],
        measures=counted["measures"],
        gathers=list(params.gathers),
        reports={name: list(rules) for name, rules in params.reports.items()},
        tile_errors=counted["tile_errors"],
        preflight=counted["preflight"],
        # on a GPU the preflight runs first (in the plan, or before the study: gpu_study.sh;
        # a rehearsal is costed as that run)
        validation_cached=on_gpu and "preflight" in params.rules,
        rules=list(params.rules),
        interpreter_limit=params.interpreter_limit,
        call_seconds=params.call_seconds,
    )
    found = budget.estimate(plan, machine)
    if on_gpu and Path(params.preflight_json).exists():
        done = json.loads(Path(params.preflight_json).read_text())
        found["left_out"].append(
            f"rule preflight: run before the study ({done.get('seconds', 0):.0f} s, {params.preflight_json})"
        )
    if on_gpu and not here:
        found["left_out"].append(
            "a rehearsal: no GPU here, so start-ups, compiles and timing windows are this machine's"
        )
    if "profile" in params.rules:
        found["left_out"].append("the profiling command (rule profile: Nsight Compute, the gpu tests)")
    found["measured_here"] = {"device": device, "seconds": time.perf_counter() - started}
    found["calibration_jobs_s"] = calibration["seconds"]
    found["launches_counted"] = counted["launches"]
    found["summary"] = budget.summary(found)
    return found
