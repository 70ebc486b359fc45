"""The suite runs on CPU: Triton kernels go through the interpreter. The switch must be set
before any kernel module imports triton, so it is set here, first. Every study of the suite
sees the same small machine (tests/suite_machine.py: a 4 MiB L3 through ATTNIO_SYSFS_CPU),
whatever caches the machine running it has."""

import ctypes
import fcntl
import json
import os
import resource
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("ATTNIO_INTERPRET", "1")

import suite_machine  # noqa: E402

os.environ["ATTNIO_SYSFS_CPU"] = str(suite_machine.tree())


import pytest  # noqa: E402

from kernels.measure import contention  # noqa: E402

# The order in which the two test workers take whole files (`--dist loadfile`, with
# `--no-loadscope-reorder` so that this order holds): the shared ci study's own file first, so
# that one worker makes the study while the other takes the long files that need no study;
# the files that copy the study after those, when it is made; the short files fill the end.
FIRST = (
    "test_workflow.py",  # makes the shared study (conftest.study), then reads it
    "test_contention.py",  # its competing process beside the study, whose load is recorded
    "test_reports_any_grid.py",
    "test_preflight.py",
    "test_slurm.py",
    "test_example_plugin.py",
    "test_warm_worker.py",
    "test_workflow_plan.py",
    "test_reports_any_study.py",
    "test_workflow_copies.py",  # copies of the shared study: made by now, or nearly
    "test_build_workflow.py",
    "test_expected.py",
    "test_trust.py",
    "test_wheels.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))


@pytest.fixture(scope="session")
def study(tmp_path_factory, worker_id):
    """The ci preset run once per suite run through the real workflow, as a user runs it
    inside a checkout, here one whose path has a space, a non-ASCII letter and a shell
    metacharacter, with an environment whose path has them too (every rule's python,
    Snakemake's script: rules included). Both test workers share it: the first to ask makes
    it under a file lock, the other waits and reads it (a failed run fails both, once). Tests
    read it, or change a copy of it (study_copy); only test_workflow.py runs Snakemake in it."""
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":  # every xdist worker's base folder sits in the run's own
        shared = shared.parent
    folder = shared / "shared-study"
    workdir = folder / "attn io ü;x"
    with open(shared / "shared-study.lock", "w") as lock:
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
    started = time.perf_counter()
    with contention.watched(2, own_seconds=children_cpu_seconds) as load, reaping_orphans():
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
    took = time.perf_counter() - started  # what the budget's estimate is held against
    if done.returncode != 0:
        return "the ci study failed:\n" + done.stderr[-3000:]
    (workdir / "snakemake-output.txt").write_text(done.stdout + done.stderr)
    (workdir / "study-seconds.txt").write_text(f"{took:.1f}\n")
    (workdir / "study-load.json").write_text(json.dumps(load))  # the CPUs the other tests kept busy
    return "ok"


def study_copy(study: Path, dest: Path) -> Path:
    """A copy of the shared study for a test that changes it, without the locks and the
    in-progress markers of a Snakemake run the other worker may have going in it."""
    skip = shutil.ignore_patterns("locks", "incomplete")
    return Path(shutil.copytree(study, dest, symlinks=True, ignore=skip))


def children_cpu_seconds() -> float:
    """CPU time of this process's children that have ended and been waited for, with theirs:
    the study's Snakemake, its jobs and (reaping_orphans) its warm workers."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


PR_SET_CHILD_SUBREAPER = 36
ORPHAN_WAIT_S = 60


@contextmanager
def reaping_orphans():
    """Within the block this process adopts its descendants whose parents end (Linux's child
    subreaper): the warm workers' keepers, which outlive the job that started them. At its
    end it waits for each (they stop once the run is over), so that their CPU time counts as
    this process's children's, not as other processes'."""
    libc = ctypes.CDLL(None, use_errno=True)
    known = set(children())
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        yield
    finally:
        deadline = time.monotonic() + ORPHAN_WAIT_S
        for pid in set(children()) - known:
            while time.monotonic() < deadline and not ended(pid):
                time.sleep(0.05)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def ended(pid: int) -> bool:
    """Whether child ``pid`` has ended (and is now waited for)."""
    try:
        return os.waitpid(pid, os.WNOHANG) != (0, 0)
    except ChildProcessError:  # waited for already
        return True


def children() -> list[int]:
    """The process ids whose parent is this process (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            found.append(int(stat.parent.name))
    return found


@pytest.fixture(scope="session")
def no_torch(tmp_path_factory) -> dict:
    """An environment for subprocesses in which importing torch or triton fails."""
    from workflow_run import env

    fake = tmp_path_factory.mktemp("no-torch")
    for name in ("torch", "triton"):
        (fake / name).mkdir()
        (fake / name / "__init__.py").write_text(
            f"raise ImportError('{name} is not available in this test')\n"
        )
    return env() | {"PYTHONPATH": str(fake)}
