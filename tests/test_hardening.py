"""Results readable by whoever the umask allows, and a file argument that names a folder
refused before any work (build's targets and blocks: test_build.py)."""

import os
import stat
import subprocess
import sys

import pytest
from workflow_run import env

from kernels.io.atomic import write_text_atomic


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_atomic_writes_get_the_umask_permissions(tmp_path, umask, mode):
    before = os.umask(umask)
    try:
        write_text_atomic(tmp_path / "table.csv", "a,b\n")
    finally:
        os.umask(before)
    assert stat.S_IMODE((tmp_path / "table.csv").stat().st_mode) == mode


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernels", *args], capture_output=True, text=True, timeout=120, env=env()
    )


POINT = ["--impl", "sdpa", "--tokens", "16", "--head-dim", "16", "--dtype", "float32", "--device", "cpu"]


@pytest.mark.parametrize(
    "command",
    [
        ["measure", *POINT],
        ["validate", "--device", "cpu", "--impl", "sdpa", "--json"],
        ["tile-errors", "--device", "cpu"],
        ["ceilings", "--device", "cpu"],
    ],
)
def test_an_output_that_names_a_folder_is_refused_before_any_work(tmp_path, command):
    flag = [] if command[-1] == "--json" else ["--out"]
    done = cli(*command, *flag, str(tmp_path))
    assert done.returncode == 2
    assert f"{tmp_path} is a folder; name a file in it" in done.stderr
    blocked = tmp_path / "file"
    blocked.write_text("")
    done = cli(*command, *flag, str(blocked / "x.json"))
    assert done.returncode == 2 and f"{blocked} is a file, not a folder" in done.stderr
