"""The suite runs on CPU: Triton kernels go through the interpreter. The switch must be set
before any kernel module imports triton, so it is set here, first."""

import os
import time

os.environ.setdefault("ATTNIO_INTERPRET", "1")


import pytest  # noqa: E402

# The files with the longest set-ups (whole studies, every page on a dozen grids, the GPU
# study's compiles, a SLURM cluster) go first: each test worker takes whole files
# (`--dist loadfile`, so a file's shared study is made once), and started first, the long
# ones do not leave one worker running alone at the end.
FIRST = (
    "test_contention.py",  # its competing process first, before the studies whose time is estimated
    "test_reports_any_grid.py",
    "test_workflow.py",
    "test_example_plugin.py",
    "test_preflight.py",
    "test_slurm.py",
    "test_warm_worker.py",
    "test_reports_any_study.py",
    "test_build_workflow.py",
    "test_workflow_plan.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))


@pytest.fixture(scope="session")
def study(tmp_path_factory):
    """The ci preset run once through the real workflow, as a user runs it inside a checkout,
    here one whose path has a space, a non-ASCII letter and a shell metacharacter, with an
    environment whose path has them too (every rule's python, Snakemake's script: rules
    included); its results are shared."""
    from workflow_run import checkout_copy, snakemake, spaced_python

    folder = tmp_path_factory.mktemp("study")
    workdir = checkout_copy(folder / "attn io ü;x")
    started = time.perf_counter()
    done = snakemake(
        workdir,
        "--cores",
        "2",
        "--configfile",
        "config/config.yaml",
        "config/presets/ci.yaml",
        timeout=1800,  # a hang guard: alone the study takes about 4 minutes, beside other tests 6
        python=spaced_python(folder),
    )
    took = time.perf_counter() - started  # what the budget's estimate is held against
    assert done.returncode == 0, done.stderr[-3000:]
    (workdir / "snakemake-output.txt").write_text(done.stdout + done.stderr)
    (workdir / "study-seconds.txt").write_text(f"{took:.1f}\n")
    return workdir


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
