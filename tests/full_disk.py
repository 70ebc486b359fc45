"""A study's next runs with results/ on a file system that is full, then with room again: run
inside a user and mount namespace of its own (``unshare --user --map-root-user --mount``),
where results/ is a small tmpfs holding a copy of the study's results. What the runs said and
left is written as JSON to SUMMARY (outside the tmpfs, which ends with the namespace).

    unshare --user --map-root-user --mount python tests/full_disk.py WORKDIR SUMMARY -- SNAKEMAKE...
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOM_LEFT = 4096  # bytes: less than any record, page or log the runs write


def fill(folder: Path) -> Path:
    """A file that takes all the room but ROOM_LEFT bytes of folder's file system."""
    filler = folder / "filler"
    with open(filler, "wb") as handle:
        handle.truncate(0)
        free = shutil.disk_usage(folder).free - ROOM_LEFT
        handle.write(b"\0" * max(free, 0))
    return filler


def leftovers(results: Path) -> list[str]:
    """Temporary files a writer left behind."""
    names = ("*.tmp", ".*.tmp", ".*.running.ipynb")
    return sorted(str(p.relative_to(results)) for name in names for p in results.rglob(name))


def run(command: list[str], workdir: Path) -> dict:
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=900)
    return {"returncode": done.returncode, "output": done.stdout + done.stderr}


def main(workdir: str, summary: str, command: list[str]) -> None:
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
    found["dry_when_full"] = run([*command, "-n"], root)
    filler.unlink()
    found["again"] = run(command, root)
    found["leftovers_again"] = leftovers(results)
    found["dry_again"] = run([*command, "-n"], root)
    Path(summary).write_text(json.dumps(found))
    os.sync()


if __name__ == "__main__":
    split = sys.argv.index("--")
    main(*sys.argv[1:3], sys.argv[split + 1 :])
