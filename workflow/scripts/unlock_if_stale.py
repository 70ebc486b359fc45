"""Remove Snakemake's lock on a folder when no Snakemake process works there any more.

A run killed without a chance to clean up (kill -9, a lost terminal, power) leaves its lock
in .snakemake/locks, and the next run stops on it. `make reproduce` calls this first:
the lock goes only when no process whose command line runs Snakemake has the folder as its
working directory (Linux /proc); while one does, the lock stays and Snakemake's own message
follows. Exit status 0 either way.

    python workflow/scripts/unlock_if_stale.py [FOLDER]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def runs_snakemake(argv: list[str]) -> bool:
    return any(Path(arg).name == "snakemake" for arg in argv)


def snakemake_processes_in(folder: Path) -> list[int]:
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        pid = int(entry.name)
        if pid == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:  # gone, or not ours to read
            continue
        if runs_snakemake(argv) and cwd == folder:
            found.append(pid)
    return found


def main(folder: str = ".") -> int:
    root = Path(folder).resolve()
    locks = [p for p in (root / ".snakemake" / "locks").glob("*") if p.is_file()]
    if not locks:
        return 0
    running = snakemake_processes_in(root)
    if running:
        print(f"Snakemake is running in {root} (pid {', '.join(map(str, running))}): its lock stays.")
        return 0
    for lock in locks:
        lock.unlink(missing_ok=True)
    print(f"removed a stale Snakemake lock in {root}: no Snakemake process works there")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
