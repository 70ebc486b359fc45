"""A plain, non-editable install (``pip install .``) into a fresh virtual environment can
measure a point and write a schema-valid record: the package carries everything it reads."""

import json
import shutil
import subprocess
from pathlib import Path

from workflow_run import ROOT, fresh_venv

SOURCE_PARTS = ("kernels", "reports", "pyproject.toml", "README.md", "LICENSE")


def copy_source(to: Path) -> Path:
    """The files a user downloads, without this checkout's caches or build output."""
    to.mkdir()
    for part in SOURCE_PARTS:
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, to / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, to / part)
    return to


def test_plain_install_measures_a_point(tmp_path):
    source = copy_source(tmp_path / "source")
    python = fresh_venv(tmp_path / "venv", own_pip=False)  # this pip (ensurepip: 4 CPU-s more)
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    shutil.rmtree(source)  # nothing may be read from the source tree any more
    work = tmp_path / "work"
    work.mkdir()
    where = subprocess.run(
        [str(python), "-c", "import kernels, reports; print(kernels.__file__)"],
        capture_output=True,
        text=True,
        cwd=work,
        check=True,
    ).stdout
    assert str(tmp_path / "venv") in where
    record_path = work / "record.json"
    done = subprocess.run(
        [
            str(python),
            "-m",
            "kernels",
            "measure",
            "--impl",
            "torch_naive",
            "--tokens",
            "64",
            "--head-dim",
            "16",
            "--dtype",
            "float32",
            "--causal",
            "--device",
            "cpu",
            # the ci preset's timing: what is asked of the time here is that there is one
            "--cpu-seconds",
            "0.3",
            "--stage-seconds",
            "0.1",
            "--out",
            str(record_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=work,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(record_path.read_text())
    assert record["status"] == "ok" and record["time_ms"] > 0 and record["tokens"] == 64
    check = subprocess.run(
        [
            str(python),
            "-c",
            "import json, sys; from kernels.io.records import validate_record; "
            "validate_record(json.load(open(sys.argv[1])))",
            str(record_path),
        ],
        capture_output=True,
        text=True,
        cwd=work,
        timeout=120,
    )
    assert check.returncode == 0, check.stderr[-2000:]
