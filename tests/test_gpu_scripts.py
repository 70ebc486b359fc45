"""The GPU scripts on this CPU: the rehearsals of scripts/gpu_study.sh and scripts/gpu_profile.sh
check every command of their Snakemake plans and exit 0; a wrong flag in a planned command is
caught; what goes into $OUT stays within what the GPU machine sends back; the profile rules
run (with a stand-in for Nsight Compute) into the records the headline reads."""

import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from test_headline import H200_CEILINGS
from workflow_run import ROOT, checkout_copy, env, snakemake

from kernels.planning.point import Point
from reports import headline


def load(name: str):
    """A module of scripts/ (not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


rehearse = load("rehearse")
gpu_out = load("gpu_out")
GPU_CONFIG = ("--configfile", *(str(ROOT / "config" / f) for f in ("config.yaml", "presets/gpu_study.yaml")))


@pytest.mark.integration  # make integration (CI): both GPU scripts rehearsed, 22 s
def test_the_rehearsals_of_both_gpu_scripts_pass_here(tmp_path):
    """Both at once, each in a checkout of its own (about 40 s): every planned command
    checked (the estimate's too, not made here), $OUT within its limits, the summary printed
    last."""
    runs = {}
    for name, script in (("study", "gpu_study.sh"), ("profile", "gpu_profile.sh")):
        work = checkout_copy(tmp_path / f"attn io {name}")
        if name == "study":  # something of an earlier run for $OUT's archive
            (work / "results" / "logs").mkdir(parents=True)
            (work / "results" / "logs" / "earlier.log").write_text("an earlier run\n")
        out = tmp_path / f"out-{name}"
        log = (tmp_path / f"{name}.txt").open("w")
        process = subprocess.Popen(
            ["bash", f"scripts/{script}", "--rehearse"],
            cwd=work,
            # the estimate's plan checked, not the estimate made: the budget's own tests run it
            env=env() | {"PYTHON": sys.executable, "OUT": str(out), "GPU_REHEARSE_BUDGET": "0"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        runs[name] = (process, out, tmp_path / f"{name}.txt")
    for name, (process, out, log) in runs.items():
        assert process.wait(timeout=600) == 0, log.read_text()[-4000:]
        printed = log.read_text()
        checked = re.findall(r"^checked: (.*); (\d+) problem\(s\)$", printed, flags=re.MULTILINE)
        assert checked and all(n == "0" for _, n in checked) and "problem:" not in printed, printed[-4000:]
        summary = (out / f"{name}-summary.txt").read_text()
        assert printed.rstrip().endswith(summary.rstrip())
        assert "rehearsal" in summary.splitlines()[0] and "took " in summary.splitlines()[-1]
        assert gpu_out.check_out(out) == []
        archive = [f"{name}-results.tar.gz"] if name == "study" else []
        assert sorted(p.name for p in out.iterdir()) == [
            f"{name}-console.log",
            *archive,
            f"{name}-summary.txt",
        ]
        if archive:
            with tarfile.open(out / archive[0]) as tar:
                assert {"results/logs", "results/logs/earlier.log"} <= set(tar.getnames())
        else:  # a dry run makes nothing to pack
            assert "pack: no results/ to pack" in printed
        runs[name] = printed
    assert "94 python -m kernels measure" in runs["study"] and "GPU_REHEARSE_BUDGET=0" in runs["study"]
    assert "2 python -m kernels ncu-target" in runs["profile"] and "4 ncu" in runs["profile"]
    assert int(re.search(r"pytest \((\d+) tests selected\)", runs["profile"]).group(1)) > 0


PLAN = """
[Tue Dec  1 08:44:42 2026]
rule profile_ncu:
    input: results/points/triton_flash/bfloat16/B2-H16-T8192-d128-full-bm128-bn64-normal.json
    jobid: 3
Shell command: ATTNIO_INTERPRET=0 ncu --clock-control none --profile-from-start off --metrics \
dram__bytes_read.sum,gpu__time_duration.sum --export 'results/profile/ncu/triton_flash.ncu-rep' \
--force-overwrite python -m kernels ncu-target --impl triton_flash --batch 2 --heads 16 --tokens 8192 \
--head-dim 128 --dtype bfloat16 --block-m 128 --block-n 64 --seed 0 {extra} > log 2>&1 && ncu --import \
results/profile/ncu/triton_flash.ncu-rep --csv --print-units base > out.csv 2>> log
"""


def test_a_wrong_flag_in_a_planned_command_is_caught():
    good = rehearse.check_plan(PLAN.format(extra="--launch 8,2"))
    assert good.problems == [] and good.checked == {"ncu": 2, "python -m kernels ncu-target": 1}
    for plan, says in (
        (PLAN.format(extra="--device cuda"), "ncu-target: python -m kernels: error: unrecognized arguments"),
        (PLAN.format(extra="--launch 8"), "give num_warps,num_stages"),
        (PLAN.format(extra="").replace("none", "off", 1), "ncu --clock-control off: allowed are"),
        (PLAN.format(extra="").replace("--force-overwrite", "--overwrite"), "--overwrite is not one"),
        (PLAN.format(extra="").replace("ncu --import", "ncuu --import"), "ncuu: not on PATH"),
        (PLAN.format(extra="").replace("python -m kernels", "python -m kernel"), "no such module"),
    ):
        [problem] = rehearse.check_plan(plan).problems
        assert problem.startswith("rule profile_ncu: ") and says in problem, problem


@pytest.mark.integration  # make integration (CI): the GPU scripts' steps, run here
def test_the_pytest_step_is_collected_with_its_selection():
    tests = os.path.relpath(ROOT / "tests" / "test_gpu.py")
    command = f"python -m pytest -m gpu {tests} {{k}} -q --junitxml x.xml > log 2>&1 || test $? -eq 1"
    plan = f"rule gpu_tests:\nShell command: {command}"
    report = rehearse.check_plan(plan.format(k="-k 'not test_timing_behaves and not test_timing_behaving'"))
    [unknown] = report.problems
    assert "test_timing_behaving, which is no test collected" in unknown
    assert any(kind.startswith("pytest (") for kind in report.checked)
    [usage] = rehearse.check_plan(plan.format(k="--no-such-pytest-flag")).problems
    assert "pytest --collect-only exited 4" in usage


HEADLINE_POINTS = {
    impl: Point.from_name(f"{impl}/bfloat16/B2-H16-T8192-d128-full-bm128-bn64-normal")
    for impl in ("triton_naive", "triton_flash")
}
FAKE_NCU = """#!{python}
# A stand-in for Nsight Compute: the profiled command parsed as the real one would run it, a
# report file, and on --import the details page as CSV (kernels.measure.ncu's format).
import sys
args = sys.argv[1:]
if "--import" in args:
    report = args[args.index("--import") + 1]
    kernels = ["scores_kernel", "softmax_kernel", "pv_kernel"] if "naive" in report else ["flash_kernel"]
    print('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name",'
          '"Metric Name","Metric Unit","Metric Value"')
    for i, kernel in enumerate(kernels):
        for metric, value in (("dram__bytes_read.sum", "2,000,000,000"),
                              ("dram__bytes_write.sum", "1,000,000,000"),
                              ("lts__t_bytes.sum", "9,000,000,000"),
                              ("gpu__time_duration.sum", "1,000,000")):
            print(f'"{{i}}","1","python","host","{{kernel}}","1","7","Command line profiler metrics",'
                  f'"{{metric}}","byte","{{value}}"')
    sys.exit(0)
start = args.index("kernels") + 1
from kernels.cli import build_parser
build_parser().parse_args(args[start:])
open(args[args.index("--export") + 1], "w").write("report")
"""


def plant_records(workdir: Path) -> None:
    """Valid GPU records of the two headline points: the fused one timed with candidates."""
    from kernels.io.records import write_record
    from kernels.measure.run import base_record

    for impl, point in HEADLINE_POINTS.items():
        record = base_record(point, "cpu", 0) | {"device": "cuda", "mode": "triton-compiled", "time_ms": 2.0}
        if impl == "triton_flash":
            timed = [
                {"num_warps": 4, "num_stages": 2, "time_ms": 2.5},
                {"num_warps": 8, "num_stages": 2, "time_ms": 2.0},
            ]
            record |= {"num_warps": 8, "num_stages": 2, "launch_candidates": timed}
        path = workdir / "results" / "points" / f"{point.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_record(record, path)


@pytest.mark.integration  # make integration (CI): the GPU scripts' steps, run here
def test_the_profile_runs_the_timed_launch_into_what_the_headline_reads(tmp_path):
    """Planned: each headline point under ncu, the fused one with the launch its record was
    timed with; run with a stand-in for ncu: the CSV parsed into the JSON the headline reads,
    every headline line naming its file."""
    plant_records(tmp_path)
    targets = [f"results/profile/ncu/{impl}.json" for impl in HEADLINE_POINTS]
    plan = snakemake(tmp_path, *targets, "--dry-run", "--printshellcmds", "--cores", "1", *GPU_CONFIG)
    assert plan.returncode == 0, plan.stderr[-3000:]
    commands = dict(rehearse.shell_commands(plan.stdout))
    assert "--seed 0 --launch 8,2 >" in next(
        c for r, c in rehearse.shell_commands(plan.stdout) if "flash" in c
    )
    assert rehearse.check_plan(plan.stdout).problems == [] and "profile_ncu" in commands

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ncu").write_text(FAKE_NCU.format(python=sys.executable))
    (bin_dir / "ncu").chmod(0o755)
    environment = env() | {"PATH": f"{bin_dir}{os.pathsep}{env()['PATH']}"}
    run = ("--cores", "1", "--allowed-rules", "profile_ncu", "profile_summary", *GPU_CONFIG)
    done = snakemake(tmp_path, *targets, *run, environment=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    flash = json.loads((tmp_path / targets[1]).read_text())
    assert flash["launch"] == [8, 2] and flash["dram_bytes"] == 3_000_000_000 and flash["dram_reason"] is None
    assert flash["traffic_model_bytes"] > 0 and flash["record"].endswith(
        f"{HEADLINE_POINTS['triton_flash'].name}.json"
    )

    (tmp_path / "results" / "ceilings.json").write_text(json.dumps(H200_CEILINGS))
    lines = headline.lines(tmp_path / "results")
    for line in lines:
        named = re.search(r"\(([^()]*)\)$", line)
        assert named, line
        files, _, missing = named.group(1).partition("missing: ")
        assert all(Path(f).exists() for f in files.rstrip("; ").split(", ") if f), line
        assert not missing or not Path(missing).exists(), line
    softmax = next(line for line in lines if "softmax kernel" in line)
    assert (
        softmax.startswith("triton_naive softmax kernel: 3,000 GB/s")
        and "75% of the measured copy" in softmax
    )
    assert any(line.startswith("triton_flash T=8192, launch 8,2 as timed: DRAM 2,861 MiB") for line in lines)


def fill(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(size))


@pytest.mark.integration  # make integration (CI): the GPU scripts' steps, run here
def test_out_packing_stays_within_what_comes_back(tmp_path):
    """A results folder far larger than one file may be: the archive is split into parts
    under 16 MiB, build artifacts are left out but their folders kept, and $OUT holds at
    most 8 files; when even the parts would be too many, the bulkier folders are trimmed."""
    results = tmp_path / "results"
    fill(results / "points" / "a.json", 14 * 2**20)  # random bytes: gzip cannot shrink them
    fill(results / "reports" / "b.html", 8 * 2**20)
    fill(results / "build" / "job" / "d16" / "sm_90" / "k.cubin", 8 * 2**20)
    fill(results / "build" / "job" / "d16" / "sm_90" / "k.resources.txt", 10 * 2**20)
    (results / "build" / "job" / "d16.json").write_text("{}")
    (results / "empty").mkdir()
    out = tmp_path / "out"
    said = gpu_out.pack(results, out, "study", other_files=2)
    parts = sorted(out.iterdir())
    assert [p.name for p in parts] == [f"study-results.tar.gz.part{i}" for i in range(3)], said
    assert gpu_out.check_out(out) == [] and all(p.stat().st_size <= 16 * 2**20 for p in parts)
    joined = tmp_path / "joined.tar.gz"
    joined.write_bytes(b"".join(p.read_bytes() for p in parts))
    with tarfile.open(joined) as tar:
        names = set(tar.getnames())
    assert {"results/empty", "results/build/job/d16/sm_90", "results/build/job/d16.json"} <= names
    assert "results/points/a.json" in names and "results/build/job/d16/sm_90/k.cubin" not in names

    said = gpu_out.pack(results, out, "study", other_files=6)  # room for 2 parts: trimmed
    assert any("trimming" in line for line in said) and len(list(out.iterdir())) == 2
    joined.write_bytes(b"".join(p.read_bytes() for p in sorted(out.iterdir())))
    with tarfile.open(joined) as tar:
        names = set(tar.getnames())
    assert "results/build/job/d16/sm_90" in names and "results/points/a.json" in names
    assert "results/build/job/d16/sm_90/k.resources.txt" not in names
    said = gpu_out.pack(results, out, "study", other_files=7)  # room for 1: cannot
    assert "does not fit" in said[-1] and not list(out.iterdir())
    fill(out / "a" / "b" / "c" / "deep.txt", 10)
    assert gpu_out.check_out(out) == ["a/b/c/deep.txt is deeper than two folders"]


@pytest.mark.parametrize("script", ["gpu_study.sh", "gpu_profile.sh"])
def test_a_script_refuses_an_option_it_does_not_know(script, tmp_path):
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / script), "--rehears"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "unknown option: --rehears" in done.stderr
