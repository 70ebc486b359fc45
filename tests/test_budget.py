"""The study's estimated duration (kernels.models.budget, kernels.estimate, rule budget):
Snakemake's printed plan read back job by job, each job costed from its own benchmark record,
else from the calibration's records of its rule, the jobs scheduled as the workflow runs them;
the shipped GPU study, as Snakemake plans it, within its limit on a slow GPU host."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import yaml
from workflow_run import ROOT, env

from kernels.models import budget
from kernels.planning.gpus import GPUS
from kernels.planning.point import Point

# Two jobs of a dry run as Snakemake 9 prints them (snakemake -n), and a checkpoint.
DRY_RUN = """Building DAG of jobs...
[Sun Dec  6 01:51:23 2026]
rule validate:
    output: results/validate/triton_flash_float16_bm16-bn32.json
    log: results/logs/validate/triton_flash_float16_bm16-bn32.log
    jobid: 29
    benchmark: results/benchmarks/validate/triton_flash_float16_bm16-bn32.tsv
    reason: Forced execution
    wildcards: impl=triton_flash, dtype=float16, blocks=bm16-bn32
    resources: tmpdir=/tmp, gpu=1, runtime=35
[Sun Dec  6 01:51:23 2026]
rule measure:
    input: results/validate/triton_flash_float16_bm16-bn32.json, results/ceilings.json
    output: results/points/triton_flash/float16/B1-H1-T100-d16-causal-bm16-bn32-normal.json
    jobid: 55
    reason: Forced execution
    wildcards: impl=triton_flash, dtype=float16, batch=1, heads=1, tokens=100, head_dim=16, mask=causal, blocks=bm16-bn32, inputs=normal, direction=
    threads: 2
    resources: tmpdir=/tmp, gpu=0, slurm_extra=, runtime=20
[Sun Dec  6 01:51:23 2026]
checkpoint report_notebook:
    input: results/points/triton_flash/float16/B1-H1-T100-d16-causal-bm16-bn32-normal.json
    output: results/logs/reports/storage.outcome.json
    jobid: 72
    wildcards: report=storage
DAG of jobs will be updated after completion.
"""  # noqa: E501


def test_the_plan_is_read_from_snakemakes_dry_run():
    validate, measure, page = budget.planned_jobs(DRY_RUN)
    assert (validate.rule, validate.jobid, validate.gpu, validate.threads) == ("validate", "29", True, 1)
    assert validate.benchmark == "results/benchmarks/validate/triton_flash_float16_bm16-bn32.tsv"
    assert (measure.threads, measure.gpu, measure.after, measure.benchmark) == (2, False, ["29"], None)
    assert Point.from_wildcards(measure.wildcards) == Point(
        "triton_flash", 1, 1, 100, 16, "float16", True, 16, 32
    )
    assert page.checkpoint and page.after == ["55"] and page.wildcards == {"report": "storage"}


def write_benchmark(path, *seconds):
    """A benchmark record as Snakemake writes it (one row per repeat)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    head = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    path.write_text(
        head + "".join(f"{s}\t0:00:0{int(s)}\t50.1\t99\t40\t41\t0\t1\t90\t{s}\n" for s in seconds)
    )


def test_a_job_is_costed_from_its_own_record_else_from_a_related_one(tmp_path):
    jobs = budget.planned_jobs(DRY_RUN)
    write_benchmark(tmp_path / "validate.tsv", 3.0, 5.0)
    jobs[0].benchmark = str(tmp_path / "validate.tsv")
    assert budget.recorded(jobs) == [jobs[0]] and (jobs[0].seconds, jobs[0].basis) == (4.0, "benchmark")
    # the pool's ids are another plan's (the calibration's): one may equal the costed job's own
    pool = [
        budget.Job(
            "measure", jobs[1].jobid, wildcards=jobs[1].wildcards | {"tokens": "16"}, seconds=2.0, basis="x"
        ),
        budget.Job("measure", "c2", wildcards={"impl": "sdpa", "direction": ""}, seconds=9.0, basis="y"),
        budget.Job("validate", "c3", wildcards=jobs[0].wildcards, seconds=100.0, basis="z"),
    ]
    assert budget.related(pool[0], jobs[1]) and not budget.related(pool[1], jobs[1])
    left_out = budget.cost_jobs(jobs, pool, lambda job, kin: kin.seconds * 3 if job.jobid == "55" else None)
    assert [(j.seconds, j.basis) for j in jobs[:2]] == [(4.0, "benchmark"), (6.0, "like x, scaled")]
    # a rule no record stands for: every record's median, and said so
    assert jobs[2].seconds == 9.0 and left_out == [
        "rule report_notebook: no record of it here, costed as the median job"
    ]
    assert budget.cost_jobs(budget.planned_jobs(DRY_RUN), [], lambda job, kin: None)[0].startswith(
        "rule measure: no record"
    )


def test_the_schedule_gives_a_timed_job_every_core_and_the_gpu_to_one_job_at_a_time():
    def job(name, seconds, after=(), threads=1, gpu=False):
        return budget.Job(name, name, seconds=seconds, after=list(after), threads=threads, gpu=gpu)

    jobs = [job("a", 2), job("b", 2), job("timed", 1, threads=2), job("c", 1, ["timed"])]
    jobs += [job("g1", 3, gpu=True), job("g2", 3, gpu=True)]
    times = budget.schedule(jobs, cores=2)
    assert times["a"] == (0.0, 2.0) and times["b"] == (0.0, 2.0)
    assert times["timed"] == (2.0, 3.0)  # waits for both cores
    assert times["g1"][0] >= 3.0 and times["c"][0] >= 3.0
    g1, g2 = sorted([times["g1"], times["g2"]])
    assert g2[0] >= g1[1]  # never two on the GPU
    found = budget.estimate(jobs, 2, 1.5, [])
    assert (
        found["total_s"] == 1.5 + max(end for _, end in times.values()) and found["rules"]["a"]["jobs"] == 1
    )
    with pytest.raises(ValueError, match="never run"):
        budget.schedule([job("x", 1, ["x"])], cores=1)


def test_interpreted_work_is_programs_and_the_key_tiles_each_streams():
    def work(kernel, programs, iterations):
        return pytest.approx(programs * budget.PROGRAM_S + iterations * budget.ITERATION_S)

    full = {"BLOCK_M": 16, "BLOCK_N": 32, "CAUSAL": False, "CARRY_STATS": True}
    # T = 100: 7 query blocks, each streaming 4 key tiles; causal: up to the diagonal
    assert budget.interpreted_launch("attention_fwd_kernel", (7, 2), full, 100) == work(
        "attention_fwd_kernel", 14, 56
    )
    causal = full | {"CAUSAL": True, "CARRY_STATS": False}
    spans = [1, 1, 2, 2, 3, 3, 4]  # ceil(min(100, 16(m + 1)) / 32)
    assert budget.interpreted_launch("attention_fwd_kernel", (7, 1), causal, 100) == work(
        "attention_fwd_kernel_tile", 7, sum(spans)
    )
    assert budget.interpreted_launch("scores_kernel", (7, 4, 2), full, 100) == work("scores_kernel", 56, 0)
    two_pass = {"SINGLE_PASS": False, "ROW_BLOCK": 16384}
    assert budget.interpreted_launch("softmax_kernel", (10, 1), two_pass, 20000) == work(
        "softmax_kernel", 10, 40
    )
    assert budget.interpreted_launch("dq_kernel", (3,), {}, 100) == work("dq_kernel", 3, 3)


def test_a_points_work_is_its_timing_window_and_nothing_when_a_gate_skips_it():
    cpu = budget.Machine(
        "cpu", 2, ceilings={"copy_gbps": 20.0, "matmul_tflops": 0.15}, interpreter_limit=1 << 14
    )
    small, big = (
        Point("sdpa", 1, 1, 64, 16, "float32", True),
        Point("sdpa", 4, 16, 4096, 128, "float32", True),
    )
    assert budget.point_work(big, cpu) > budget.point_work(small, cpu) >= 0.2
    assert budget.point_work(Point("sdpa_cudnn", 1, 1, 64, 16, "float32", True), cpu) == 0.0
    over = Point("triton_flash", 1, 1, 256, 16, "float16", True, 16, 32)
    assert (
        budget.skipped(over, cpu) == "over the interpreter limit" and budget.point_work(over, cpu, 5.0) == 0.0
    )
    gpu = budget.Machine("cuda", 16, gpu=GPUS["H200"])
    fused = Point("triton_flash", 1, 16, 4096, 128, "bfloat16", True, 64, 64)
    assert 0 < budget.point_work(fused, gpu) < 5.0


def test_a_cuda_study_where_there_is_none_says_every_point_would_be_skipped_and_why():
    """`device: cuda` on a machine without one: the summary does not read as an estimate made
    on a GPU, and says that run here every point would be skipped, with the gates' own reason."""
    from kernels.estimate import skipped_points
    from kernels.measure.gates import device_absent

    points = [
        Point("sdpa", 1, 1, 64, 16, "float32", True),
        Point("triton_flash", 1, 1, 64, 16, "float16", True),
    ]
    gpu = budget.Machine("cuda", 2, gpu=GPUS["H200"])
    # the gates' reason here (a CPU-only machine); where there is a GPU, one standing for it
    reason = device_absent("cuda") or "the gates' reason for a device that is absent"
    assert skipped_points(points, gpu, reason) == {reason: 2}
    assert skipped_points(points, gpu, None) == {}  # on an H200 both run
    cpu = budget.Machine("cpu", 2, interpreter_limit=16)
    assert skipped_points(points, cpu, None) == {"over the interpreter limit": 1}
    jobs = [budget.Job("measure", "1", seconds=3.0)]
    found = budget.estimate(jobs, 2, 1.0, []) | {"device": "cuda", "gpu": "H200", "points": 2}
    said = budget.summary(found | {"device_absent": reason, "skipped_points": {reason: 2}})
    assert "on H200" not in said[0] and "as a rehearsal of the H200 plan" in said[0]
    whole = "this machine has no CUDA device: run here, every one of the 2 points would be skipped"
    assert said[1] == f"  {whole} ({reason})"
    said = budget.summary(
        found | {"device": "cpu", "gpu": None, "skipped_points": {"over the interpreter limit": 1}}
    )
    assert (
        said[0].startswith("estimated 4 s for 2 points on cpu")
        and said[1] == "  skipped: 1 point: over the interpreter limit"
    )


# A slow GPU host, per job of each rule as its calibration would record it: a build 25 s (1.5 s
# per variant), a validation 10 s (22 cases at 0.3 s; the preflight, which scripts/gpu_study.sh
# runs first, filled Triton's cache), a measure job 3 s, a script 4 s, a page 8 s: each several
# times this 2-core CPU's medians in the ci study (build 7.9 s, validate 1.5 s, measure 0.34 s,
# a page 5.0 s: results/benchmarks_by_rule.csv, 2026-12-06, on a busy machine).
SLOW_GPU_HOST_S = {"measure": 3.0, "validate": 10.0, "build": 25.0, "tile_errors": 15.0, "ceilings": 15.0}
SLOW_SCRIPT_S, SLOW_PAGE_S = 4.0, 8.0
GPU_STUDY_SECONDS = 480  # scripts/gpu_study.sh's default limit


def test_the_gpu_study_fits_its_limit_on_a_slow_gpu_host(tmp_path):
    """The gpu_study preset as Snakemake plans it on a GPU (a dry run here), each job at a
    slow host's figures: within scripts/gpu_study.sh's limit."""
    command = [sys.executable, "-m", "snakemake", "-n", "--forceall", "--nolock", "--cores", "16"]
    command += [
        "--directory",
        str(tmp_path),
        "--configfile",
        "config/config.yaml",
        "config/presets/gpu_study.yaml",
    ]
    done = subprocess.run(command, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = [j for j in budget.planned_jobs(done.stdout + done.stderr) if j.rule != "all"]
    pages = [budget.Job("report_html", f"{j.jobid}+", after=[j.jobid]) for j in jobs if j.checkpoint]
    for job in jobs + pages:
        page = job.rule.startswith("report_")
        job.seconds = SLOW_GPU_HOST_S.get(job.rule, SLOW_PAGE_S if page else SLOW_SCRIPT_S)
    rules = budget.estimate(jobs + pages, 16, 8.0, [])
    assert rules["rules"]["measure"]["jobs"] == 94 and rules["rules"]["validate"]["jobs"] == 11
    assert all(j.gpu for j in jobs if j.rule in ("measure", "validate"))
    assert rules["total_s"] < GPU_STUDY_SECONDS, "\n".join(budget.summary(rules | {"points": 94}))


@pytest.mark.integration  # make integration: a calibration of about 45 s
def test_the_gpu_studys_estimate_is_made_in_a_rehearsal(tmp_path):
    """`scripts/gpu_study.sh --rehearse` makes the GPU study's estimate on a machine without a
    GPU: Snakemake's plan of it on an H200, calibrated here (its points skipped: no CUDA), and
    said to be a rehearsal."""
    command = [sys.executable, "-m", "snakemake", "budget", "--cores", "2", "--directory", str(tmp_path)]
    command += ["--configfile", "config/config.yaml", "config/presets/gpu_study.yaml"]
    done = subprocess.run(command, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads((tmp_path / "results" / "budget.json").read_text())
    said = "\n".join(found["summary"])
    assert (found["gpu"], found["points"], found["rules"]["measure"]["jobs"]) == ("H200", 94, 94), said
    assert found["calibrated_for"] > 0 and "a rehearsal" in said and 0 < found["total_s"] < 480, said
    # run here, every point would be skipped, and the summary says why as the gates do
    from kernels.measure.gates import device_absent

    assert found["device_absent"] == device_absent("cuda") and found["skipped_points"] == {
        device_absent("cuda"): 94
    }
    assert (
        f"no CUDA device: run here, every one of the 94 points would be skipped ({device_absent('cuda')})"
        in said
    )


# --- the calibration: found as the study finds its plugins; a failure in one line -----------

# A nested run's output as Snakemake 9 prints it: a job failed, then Snakemake's closing lines.
JOB_FAILED = """[Mon Dec  7 11:24:33 2026]
Error in rule validate:
    message: None
    jobid: 3
    output: results/validate/my_torch_float32_na.json
    log: results/logs/validate/my_torch_float32_na.log (check log file(s) for error details)
    shell:
        python -m kernels validate --impl my_torch > results/logs/validate/my_torch_float32_na.log 2>&1
        (one of the commands exited with non-zero exit code; note that snakemake uses bash strict mode!)

Shutting down, this might take some time.
Exiting because a job execution failed. Look above for error messages
WorkflowError:
At least one job did not complete successfully.
"""
# ... and one stopped before any job, after the planner's warning
STOPPED = """attnio: plugin myplug: import failed: ModuleNotFoundError: No module named 'myplug'; its implementations are left out
WorkflowError in file "/work/attnio/workflow/rules/common.smk", line 60:
sweep: no grid has an implementation left to measure
  File "/work/attnio/workflow/rules/common.smk", line 60, in <module>
"""  # noqa: E501


def test_a_failed_nested_run_is_one_line_naming_the_job_its_last_error_and_its_log(tmp_path):
    from kernels.io.snakemake_failure import why_failed

    log = tmp_path / "results/logs/validate/my_torch_float32_na.log"
    log.parent.mkdir(parents=True)
    log.write_text(
        'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n'
        "    import myplug\nModuleNotFoundError: No module named 'myplug'\n\n"
    )
    said = why_failed(JOB_FAILED, tmp_path)
    assert said == f"its validate job failed: ModuleNotFoundError: No module named 'myplug' (log: {log})"
    log.unlink()
    assert why_failed(JOB_FAILED, tmp_path) == f"its validate job failed: its log says nothing (log: {log})"
    said = why_failed(STOPPED, tmp_path)
    assert said.startswith(
        "WorkflowError: sweep: no grid has an implementation left to measure (after: plugin myplug"
    )
    assert "No module named 'myplug'" in said and "\n" not in said
    assert why_failed("Using a profile\nsomething broke\n\n", tmp_path) == "something broke"


def test_the_calibration_finds_a_plugin_beside_the_studys_config(tmp_path, monkeypatch):
    """The calibration runs in a scratch folder: the study's folder goes first on its module
    path (after it, what the study had), as the study's own Snakemake, run there, has it."""
    from kernels.estimate import environment

    study, scratch = tmp_path / "study", tmp_path / "scratch"
    study.mkdir(), scratch.mkdir()
    (study / "beside_the_config.py").write_text("FOUND = 'here'\n")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setenv("ATTNIO_PLUGINS", "beside_the_config")
    env = environment(study)
    assert env["PYTHONPATH"].split(os.pathsep) == [str(study), "/elsewhere"]
    assert env["ATTNIO_PLUGINS"] == "beside_the_config" and "ATTNIO_INTERPRET" not in env
    code = "import beside_the_config; print(beside_the_config.FOUND)"
    done = subprocess.run([sys.executable, "-c", code], cwd=scratch, env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "here", done.stderr[-500:]


@pytest.mark.integration  # make integration: a calibration (2.5 min on two busy cores)
def test_the_budget_of_a_study_with_a_plugin_beside_its_config_calibrates_it(tmp_path):
    """A study of a plugin module in the study's own folder, run there (as the study itself
    runs): its budget's calibration, in a scratch folder, finds the plugin too and measures
    its point; without it the calibration had no implementation to measure and failed."""
    (tmp_path / "beside.py").write_text(
        textwrap.dedent(
            """
            import torch

            from kernels.catalog import implementation


            @implementation("beside_torch", stores="SP", twin="torch_naive")
            def beside_torch(q, k, v, *, causal):
                s = (q.float() @ k.float().transpose(-1, -2)) / q.shape[-1] ** 0.5
                if causal:
                    future = torch.ones(s.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
                    s = s.masked_fill(future, float("-inf"))
                return (s.softmax(-1) @ v.float()).to(q.dtype)
            """
        )
    )
    config = {"device": "cpu", "plugins": ["beside"], "timing": {"cpu_seconds": 0.3, "stage_seconds": 0.1}}
    config |= {"build": {"candidates": False, "targets": ["sm_90"]}}
    config["sweep"] = [{"impls": ["beside_torch"], "tokens": [16], "head_dim": [16], "dtype": ["float32"]}]
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    command = [sys.executable, "-m", "snakemake", "budget", "--snakefile", str(ROOT / "Snakefile")]
    command += ["--cores", "2", "--configfile", str(ROOT / "config" / "config.yaml"), "study.yaml"]
    done = subprocess.run(command, cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    found = json.loads((tmp_path / "results" / "budget.json").read_text())
    said = "\n".join(found["summary"])
    measure = found["rules"]["measure"]
    assert found["points"] == measure["jobs"] > 0 and found["calibrated_for"] > 0, said
    assert all("the calibration" in basis for basis in measure["basis"]), said
