"""The study's estimated duration (kernels.models.budget, rule budget): each job costed from
figures measured on the machine, compiles counted per kernel variant the plan builds, the
jobs scheduled as the workflow runs them; the ci study's estimate held against its real
duration, and the shipped GPU study within its limit under slow start-ups and compiles."""

import json
import re
import subprocess
import sys

import pytest
import yaml
from workflow_run import ROOT, env

from kernels.models import budget
from kernels.planning.device import largest_cache_bytes
from kernels.planning.gpus import GPUS
from kernels.planning.point import Point
from kernels.planning.sweep import build_jobs, groups, points, resolved
from kernels.spec import CUDA_REP_MS, CUDA_WARMUP_MS, FUSED_LAUNCH_CANDIDATES

H200 = GPUS["H200"]
WINDOWS = budget.Windows(0.2, 3.0, 10, CUDA_WARMUP_MS / 1e3, CUDA_REP_MS / 1e3)
# Slower than a GPU host should be: a command in its own process (Python, torch, triton,
# CUDA) 5 s (the development machine, 2 cores, measures 1.6 s without CUDA), one through a
# warm worker 0.5 s (there: 0.3 s), a worker's start 10 s per lane (there: 3.8 s: imports and
# its rehearsal), a tiny measure job's own work beyond its start 2 s (there: 1.5 to 2 s), a
# compile 1.5 s per variant (there: 0.3 to 2 s), a validation case 0.3 s (up to T = 16,384
# with its float64 definition).
SLOW_START = dict(shell_s=5.0, script_s=2.0, notebook_s=8.0, html_s=4.0, workflow_s=8.0)
SLOW_GPU_HOST = budget.Machine(
    device="cuda",
    cores=16,
    startup=budget.Startup(**SLOW_START, warm_s=0.5, worker_s=10.0),
    windows=WINDOWS,
    measure_s=2.5,
    measure_timed_s=budget.cuda_window(30e-6, WINDOWS, H200),
    validate_case_s=0.3,
    compile_s=dict.fromkeys(budget.INTERPRETER_MS, 1.5),
    inspect_s=0.7,
    build_fixed_s=3.0,
    gpu=H200,
)
GPU_STUDY_SECONDS = 480  # scripts/gpu_study.sh's default limit


def cpu_machine(**changes) -> budget.Machine:
    machine = budget.Machine(
        device="cpu",
        cores=2,
        startup=budget.Startup(shell_s=2.0, script_s=1.0, notebook_s=5.0, html_s=2.0, workflow_s=3.0),
        windows=WINDOWS,
        measure_s=4.0,
        measure_timed_s=0.5,
        validate_case_s=0.05,
        ceilings={"copy_gbps": 20.0, "matmul_tflops": 0.15},
        interpreter=budget.Interpreter({}, setup_s=0.5, counting=1.2),
        interpreted_measure_s=6.0,
    )
    return budget.Machine(**(vars(machine) | changes))


def test_a_gpu_point_costs_the_tiny_measure_job_and_a_timing_window_per_launch():
    plan = budget.Plan([], {}, {}, {}, [], {})
    fused = Point("triton_flash", 2, 16, 8192, 128, "bfloat16", False, 128, 64)
    naive = Point("torch_naive", 2, 16, 8192, 128, "bfloat16", False)
    assert budget.launches(fused) == len(FUSED_LAUNCH_CANDIDATES[128]) and budget.launches(naive) == 1
    m = SLOW_GPU_HOST
    call = budget.call_seconds(fused, H200)
    window = budget.cuda_window(call, WINDOWS, H200)
    expected = m.measure_s - m.measure_timed_s + budget.launches(fused) * (window + call) + call
    expected += budget.check_seconds(fused, m) + 2 * 1.5  # two candidates the build left out
    left = budget.Work(compiles={"attention_fwd_kernel": 2})
    assert budget.measure_seconds(fused, m, plan, left) == pytest.approx(expected)
    # do_bench: a window of at least its warm-up and timed milliseconds
    assert window >= (CUDA_WARMUP_MS + CUDA_REP_MS) / 1e3
    # torch_naive is costed as the materialized Triton path: S and P through DRAM
    assert budget.call_seconds(naive, H200) > 2 * budget.call_seconds(fused, H200)


def test_a_materialized_point_costs_its_stages_warm_and_cold():
    """No ceilings' levels: the flush buffer is its least, 64 MiB read and written at 20 GB/s
    (6.7 ms). A tiny causal point (5 stages, call ≈ 0): passes of 5 flushes, as many as one
    second takes (30), at least ten. A call of 0.23 s: ten passes would take 4.9 s, so the
    passes stop after 4 s (9 of them)."""
    machine = cpu_machine()
    flush = 2 * (64 << 20) / 20e9
    assert budget.flush_seconds(machine) == pytest.approx(flush)
    small = Point("torch_naive", 1, 1, 16, 16, "float32", True)
    assert budget.stages_seconds(small, 0.0, machine) == pytest.approx(30 * 5 * flush)
    big = Point("torch_naive", 1, 1, 8192, 128, "float32", False)
    per_pass = 2 * 0.23 + 4 * flush
    assert budget.stages_seconds(big, 0.23, machine) == pytest.approx(0.23 + 9 * per_pass)
    assert budget.stages_seconds(Point("sdpa", 1, 1, 16, 16, "float32", True), 0.0, machine) == 0.0
    interpreted = Point("triton_naive", 1, 1, 16, 16, "float16", True, 16, 16)
    assert budget.stages_seconds(interpreted, 0.0, machine) == 0.0


def test_a_cpu_point_costs_its_window_or_its_interpreted_launches_and_a_skipped_one_neither():
    plan = budget.Plan([], {}, {}, {}, [], {}, interpreter_limit=1 << 20)
    machine = cpu_machine()
    fixed = machine.measure_s - machine.measure_timed_s
    small = Point("torch_naive", 1, 1, 16, 16, "float32", True)
    big = Point("torch_naive", 1, 1, 8192, 128, "float32", False)  # 0.23 s a call: 2.3 s timed
    # a short call: the least run, and as far towards the most as the tiny job went
    fill = (0.5 - 0.2) / (3.0 - 0.2)
    call = budget.cpu_call_seconds(small, machine.ceilings)
    assert budget.measure_seconds(small, machine, plan) == pytest.approx(
        fixed + 0.2 + fill * 2.8 + 2 * call + budget.check_seconds(small, machine)
        + budget.stages_seconds(small, call, machine), rel=1e-3
    )  # fmt: skip
    assert budget.measure_seconds(big, machine, plan) > budget.measure_seconds(small, machine, plan) + 0.5
    fused = Point("triton_flash", 1, 1, 100, 16, "float16", False, 16, 32)
    work = budget.Work(interpreted={"attention_fwd_kernel": (7, 28)})
    seconds = machine.interpreter.seconds(work.interpreted)
    assert seconds == pytest.approx((7 * 11.6 + 28 * 5.7) / 1e3)
    assert budget.measure_seconds(fused, machine, plan, work) == pytest.approx(
        6.0 + 1.2 * seconds + budget.check_seconds(fused, machine)
    )
    over = Point("triton_flash", 1, 1, 2048, 16, "float16", False, 16, 32)  # B·H·T² > 2²⁰
    assert budget.skipped(over, machine, plan) == "over the interpreter limit"
    assert budget.measure_seconds(over, machine, plan, work) == pytest.approx(fixed)
    assert budget.skipped(Point("sdpa_cudnn", 1, 1, 16, 16, "float32", True), machine, plan)


def test_interpreted_work_is_programs_and_the_key_tiles_each_streams():
    full = {"BLOCK_M": 16, "BLOCK_N": 32, "CAUSAL": False, "CARRY_STATS": True}
    # T = 100: 7 query blocks, each streaming 4 key tiles; causal: up to the diagonal
    assert budget.interpreted_launch("attention_fwd_kernel", (7, 2), full, 100) == (
        "attention_fwd_kernel",
        14,
        56,
    )
    causal = full | {"CAUSAL": True, "CARRY_STATS": False}
    spans = [1, 1, 2, 2, 3, 3, 4]  # ceil(min(100, 16(m + 1)) / 32)
    assert budget.interpreted_launch("attention_fwd_kernel", (7, 1), causal, 100) == (
        "attention_fwd_kernel_tile", 7, sum(spans),
    )  # fmt: skip
    assert budget.interpreted_launch("scores_kernel", (7, 4, 2), full, 100) == ("scores_kernel", 56, 0)
    two_pass = {"SINGLE_PASS": False, "ROW_BLOCK": 16384}
    assert budget.interpreted_launch("softmax_kernel", (10, 1), two_pass, 20000) == ("softmax_kernel", 10, 40)


def test_the_schedule_gives_a_timed_job_every_core_and_the_gpu_to_one_job_at_a_time():
    jobs = [
        budget.Job("a", "a", 2.0),
        budget.Job("b", "b", 2.0),
        budget.Job("timed", "timed", 1.0, exclusive=True),
        budget.Job("c", "c", 1.0, after=["timed"]),
        budget.Job("g1", "g1", 3.0, gpu=True),
        budget.Job("g2", "g2", 3.0, gpu=True),
    ]
    times = budget.schedule(jobs, cores=2)
    assert times["a"] == (0.0, 2.0) and times["b"] == (0.0, 2.0)
    assert times["timed"] == (2.0, 3.0)  # waits for both cores
    assert times["g1"][0] >= 3.0 and times["c"][0] >= 3.0
    g1, g2 = sorted([times["g1"], times["g2"]])
    assert g2[0] >= g1[1]  # never two on the GPU
    with pytest.raises(ValueError, match="never run"):
        budget.schedule([budget.Job("x", "x", 1.0, after=["x"])], cores=1)


# What the gpu tests count in a child process: the build layer specializes every launch as
# the compiler sees it, which needs compiled Triton (the suite imports it interpreted).
COUNT = """
import json, sys, types
from kernels.estimate import works
params = types.SimpleNamespace(**json.loads(sys.argv[1]))
found = works(params, params.device, params.device == "cuda")
def plain(work):
    return None if work is None else [work.compiles, work.cases]
print(json.dumps({key: {name: plain(w) for name, w in value.items()} if isinstance(value, dict) else
                  plain(value) if key != "launches" else value for key, value in found.items()}))
"""


def gpu_study_plan() -> budget.Plan:
    """The gpu_study preset's plan on an H200 (build for sm_90, candidates built, preflight
    first), its compiles counted by the budget script itself."""
    preset = yaml.safe_load((ROOT / "config" / "presets" / "gpu_study.yaml").read_text())
    # its hand-off grid follows the L2 of the GPU we are lent, as the planner does without one
    planned = points(resolved(preset["sweep"], largest_cache_bytes("cuda")))
    targets = list(dict.fromkeys(preset.get("build", {}).get("targets", ["sm_80", "sm_90"]) + ["sm_90"]))
    tables = ["build_table", "collect", "env", "model", "predict", "tile_errors"]
    reports = {path.stem: tables for path in (ROOT / "reports").glob("*.ipynb")}
    params = {
        "device": "cuda",
        "points": [p.name for p in planned],
        "build_jobs": build_jobs(planned),
        "build_targets": targets,
        "required_targets": ["sm_90"],
        "candidates": preset.get("build", {}).get("candidates", True),
        "validations": sorted({p.validation_name for p in planned}),
        "tile_errors": True,
        "rules": ["preflight"],
        "preflight_json": "/nonexistent/preflight.json",
        "preflight_in_plan": True,
    }
    done = subprocess.run(
        [sys.executable, "-c", COUNT, json.dumps(params)],
        cwd=ROOT, env=env() | {"ATTNIO_INTERPRET": "0"}, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    counted = json.loads(done.stdout.splitlines()[-1])

    def work(pair):
        return None if pair is None else budget.Work(compiles=pair[0], cases=pair[1])

    return budget.Plan(
        points=planned,
        build_jobs={name: work(w) for name, w in counted["build_jobs"].items()},
        validations={name: work(w) for name, w in counted["validations"].items()},
        measures={name: work(w) for name, w in counted["measures"].items()},
        gathers=[f"{impl}_{dtype}" for impl, dtype in groups(planned)],
        reports=reports,
        tile_errors=work(counted["tile_errors"]),
        preflight=work(counted["preflight"]),
        validation_cached=True,
        rules=["preflight"],
    )


def test_the_gpu_study_fits_its_limit_on_a_slow_gpu_host():
    """With its commands on warm workers; the same plan with every command in a process of
    its own (5 s of start-up and a CUDA context each) takes minutes longer."""
    plan = gpu_study_plan()
    # the hand-off: S + P at 1/16 to 16 times the H200's L2; the backward: 4 paths at 2 lengths
    assert len(plan.points) == 48 + 2 * 9 + 4 * 2
    # compiles per variant the plan builds: triton_naive's validation compiles its three
    # kernels per distinct specialization of the GPU cases, far more than one per group
    naive = next(w for name, w in plan.validations.items() if name.startswith("triton_naive"))
    assert naive.cases == 22 and sum(naive.compiles.values()) == 44
    assert set(naive.compiles) == {"scores_kernel", "softmax_kernel", "pv_kernel"}
    assert not any(w.compiles for w in plan.measures.values())  # the build and preflight compiled them
    assert sum(plan.preflight.compiles.values()) > sum(naive.compiles.values())
    found = budget.estimate(plan, SLOW_GPU_HOST)
    rules = found["rules"]
    assert (
        rules["measure"]["jobs"] == 74 and rules["validate"]["jobs"] == 10 and rules["preflight"]["jobs"] == 1
    )
    pages = len(list((ROOT / "reports").glob("*.ipynb")))
    assert rules["report_notebook"]["jobs"] == rules["report_html"]["jobs"] == pages
    assert found["total_s"] < GPU_STUDY_SECONDS, "\n".join(budget.summary(found))
    cold = budget.Machine(
        **(vars(SLOW_GPU_HOST) | {"startup": budget.Startup(**SLOW_START), "measure_s": 7.0})
    )
    assert budget.estimate(plan, cold)["total_s"] > found["total_s"] + 120


def test_every_rule_of_the_workflow_is_costed_or_named_as_not_in_the_study():
    """A rule added to the workflow and not costed here would make the estimate short; the
    estimate names such a rule in left_out, and this test names it first."""
    found = set()
    for path in [ROOT / "Snakefile", *(ROOT / "workflow" / "rules").glob("*.smk")]:
        found |= set(re.findall(r"^(?:local)?rule (\w+):", path.read_text(), re.M))
    assert found and found <= set(budget.ORDER) | set(budget.NOT_IN_STUDY), found - set(budget.ORDER)
    plan = budget.Plan([], {}, {}, {}, [], {}, rules=[*found, "new_rule"])
    _, left_out = budget.jobs(plan, cpu_machine())
    assert left_out == ["rule new_rule: not costed (a rule this estimate does not know)"]
