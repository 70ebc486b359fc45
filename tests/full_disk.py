"""A study's next runs with results/ on a file system that is full, then with room again: run
inside a user and mount namespace of its own (``unshare --user --map-root-user --mount``),
where results/ is a small tmpfs holding a copy of the study's results. What the runs said and
left is written as JSON to SUMMARY (outside the tmpfs, which ends with the namespace).

    unshare --user --map-root-user --mount python tests/full_disk.py WORKDIR SUMMARY [--once] -- COMMAND...

COMMAND runs with no room (``full``); then, unless --once, a dry run of it, and with room
again the command (``again``) and its dry run: a Snakemake command line.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

UNSHARE = ["unshare", "--user", "--map-root-user", "--mount"]


# a namespace of the test's own may be allowed while mounting in it is not (some containers)
PROBE = 'd=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs "$d" && umount "$d"; s=$?; rmdir "$d"; exit $s'


def can_mount_tmpfs() -> bool:
    if not shutil.which("unshare"):
        return False
    return subprocess.run([*UNSHARE, "sh", "-c", PROBE], capture_output=True, timeout=60).returncode == 0


def no_room(workdir: Path, tmp_path: Path, command: list[str], *flags: str) -> dict:
    """For a test: what this script saw of ``command`` run in ``workdir`` with its results/
    on a full tmpfs (skipped, naming why, where no namespace of the test's own can be made)."""
    import pytest

    if not can_mount_tmpfs():
        pytest.skip("needs unshare --user --mount and a tmpfs mounted there, for results/ of the test's own")
    summary = tmp_path / "summary.json"
    helper = [sys.executable, __file__, str(workdir), str(summary), *flags, "--"]
    from workflow_run import env  # rule shells find this environment's python first

    run = [*UNSHARE, *helper, *command]
    done = subprocess.run(run, capture_output=True, text=True, env=env(), timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(summary.read_text())


def fill(folder: Path) -> Path:
    """A file that takes all the room of folder's file system, to the last block."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as handle:
        for size in (1 << 20, 4096, 1):
            try:
                while True:
                    handle.write(b"\0" * size)
            except OSError as err:
                if err.errno != errno.ENOSPC:
                    raise
    return filler


def leftovers(results: Path) -> list[str]:
    """Temporary files a writer left behind."""
    names = ("*.tmp", ".*.tmp", ".*.running.ipynb")
    return sorted(str(p.relative_to(results)) for name in names for p in results.rglob(name))


def run(command: list[str], workdir: Path) -> dict:
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=900)
    return {"returncode": done.returncode, "output": done.stdout + done.stderr}


def main(workdir: str, summary: str, command: list[str], once: bool = False) -> None:
    root = Path(workdir)
    results = root / "results"
    staged = root / "results-staged"
    results.rename(staged)
    results.mkdir()
    size = sum(p.stat().st_size for p in staged.rglob("*") if p.is_file()) + (32 << 20)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(results)], check=True)
    subprocess.run(["cp", "-a", f"{staged}/.", str(results)], check=True)
    filler = fill(results)
    found = {"full": run(command, root), "free_when_full": shutil.disk_usage(results).free}
    found["leftovers_when_full"] = leftovers(results)
    found["files_when_full"] = sorted(str(p.relative_to(results)) for p in results.rglob("*") if p.is_file())
    if not once:
        found["dry_when_full"] = run([*command, "-n"], root)
        filler.unlink()
        found["again"] = run(command, root)
        found["leftovers_again"] = leftovers(results)
        found["dry_again"] = run([*command, "-n"], root)
    Path(summary).write_text(json.dumps(found))
    os.sync()


if __name__ == "__main__":
    split = sys.argv.index("--")
    main(*sys.argv[1:3], sys.argv[split + 1 :], once="--once" in sys.argv[3:split])
