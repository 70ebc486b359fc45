"""The suite runs on CPU: Triton kernels go through the interpreter. The switch must be set
before any kernel module imports triton, so it is set here, first. Every study of the suite
sees the same small machine (tests/suite_machine.py: a 4 MiB L3 through ATTNIO_SYSFS_CPU),
whatever caches the machine running it has."""

import fcntl
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("ATTNIO_INTERPRET", "1")
# One thread per pool in the suite's own processes (and the commands they start), before torch
# or numpy is imported: two test workers already fill two cores, and a second OpenMP or BLAS
# thread only spins waiting for a core (beside the other worker, the interpreter tests took
# 15 % more CPU with two). Snakemake sets these per job to the job's threads, so a study's
# timed jobs still run on the threads its rules give them.
for _pool in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_pool, "1")

import suite_machine  # noqa: E402

os.environ["ATTNIO_SYSFS_CPU"] = str(suite_machine.tree())
# The workflow's one module of Snakemake's internals (workflow/rules/snakemake_internals.py),
# importable as Snakemake makes it for the .smk files beside it: their folder on sys.path.
sys.path.append(str(Path(__file__).resolve().parents[1] / "workflow" / "rules"))


import pytest  # noqa: E402

# The order in which the two test workers take whole files (`--dist loadfile`, with
# `--no-loadscope-reorder` so that this order holds): the shared ci study's own file first, so
# that one worker makes the study while the other takes the long files that need no study;
# the files that copy the study after those, when it is made; the short files fill the end.
FIRST = (
    "test_workflow.py",  # makes the shared study (conftest.study), then reads it
    # files that wait (a page past its limit, competing processes; in make integration a
    # validation past its limit and hung plugins): beside the study, whose timed jobs leave a
    # core idle. Files whose tests are all integration or preflight keep their place here for
    # those runs (make integration, make preflight); make test passes over them.
    "test_warm_worker.py",
    "test_page_outcome.py",
    "test_contention.py",
    "test_reports_any_grid.py",
    "test_preflight.py",
    "test_slurm.py",
    "test_example_plugin.py",
    "test_workflow_plan.py",
    "test_reports_any_study.py",
    "test_workflow_copies.py",  # copies of the shared study: made by now, or nearly
    "test_build_workflow.py",
    "test_expected.py",
    "test_trust.py",
    "test_wheels.py",
    # the longest of the rest, so that short files fill the end of the run
    "test_build.py",
    "test_gpu_scripts.py",
    "test_validate_backward.py",
    "test_any_machine_plan.py",
    "test_any_sweep.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))


@pytest.fixture(scope="session", autouse=True)
def shared_folder(tmp_path_factory, worker_id) -> Path:
    """The run's folder that both test workers see: the shared study and the seeded
    ceilings are made there once (each under a lock, by the first worker to ask)."""
    import workflow_run

    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":  # every xdist worker's base folder sits in the run's own
        shared = shared.parent
    workflow_run.SHARED = shared
    return shared


@pytest.fixture(scope="session")
def study(shared_folder):
    """The ci preset run once per suite run through the real workflow, as a user runs it
    inside a checkout, here one whose path has a space, a non-ASCII letter and a shell
    metacharacter, with an environment whose path has them too (every rule's python,
    Snakemake's script: rules included). Both test workers share it: the first to ask makes
    it under a file lock, the other waits and reads it (a failed run fails both, once). Tests
    read it, or change a copy of it (study_copy); only test_workflow.py runs Snakemake in it."""
    folder = shared_folder / "shared-study"
    workdir = folder / "attn io ü;x"
    with open(shared_folder / "shared-study.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, even on a crash
        outcome = folder / "outcome.txt"
        if not outcome.exists():
            folder.mkdir(exist_ok=True)
            outcome.write_text(make_study(folder, workdir))
    said = outcome.read_text()
    assert said == "ok", said
    return workdir


def make_study(folder: Path, workdir: Path) -> str:
    """Runs the ci study into workdir: "ok", or why it failed."""
    from workflow_run import checkout_copy, snakemake, spaced_python

    checkout_copy(workdir)
    done = snakemake(
        workdir,
        "--cores",
        "2",
        "--configfile",
        "config/config.yaml",
        "config/presets/ci.yaml",
        timeout=1800,  # a hang guard: beside the other tests the study took 118 s in CI
        python=spaced_python(folder),
    )
    if done.returncode != 0:
        return "the ci study failed:\n" + done.stderr[-3000:]
    (workdir / "snakemake-output.txt").write_text(done.stdout + done.stderr)
    return "ok"


def study_copy(study: Path, dest: Path) -> Path:
    """A copy of the shared study for a test that changes it, without the locks and the
    in-progress markers of a Snakemake run the other worker may have going in it."""
    skip = shutil.ignore_patterns("locks", "incomplete")
    return Path(shutil.copytree(study, dest, symlinks=True, ignore=skip))


@pytest.fixture(scope="session")
def no_torch(tmp_path_factory) -> dict:
    """An environment for subprocesses in which importing torch or triton fails."""
    from workflow_run import without_torch

    return without_torch(tmp_path_factory.mktemp("no-torch"))
