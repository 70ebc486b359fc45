"""The machine the suite's studies see: an OS cache tree of our own (ATTNIO_SYSFS_CPU), the
same on every machine that runs the suite. Each CPU this process may run on gets a private
32 KiB L1d and 512 KiB L2, and all of them share one 4 MiB L3.

Why: what a study does scales with the cache the OS describes. The ceilings copy through
each level and past the last (four times it, at least 64 MiB); a cold stage first writes a
buffer four times the last level; the hand-off sweep's lengths follow it. On a VM that
reports a 260 MiB L3 the ci study's ceilings took 46 s and each cold pass wrote a GiB; on
this tree they take 10 s, and a test means the same thing on a laptop and on a 64-core EPYC.
Tests whose question is the real tree, or another machine's, pass their own root."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

L1D, L2, L3 = "32K", "512K", "4M"
LAST_LEVEL_BYTES = 4 << 20


def _cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _write(root: Path, cpus: list[int]) -> None:
    shared = ",".join(map(str, cpus))
    for cpu in cpus:
        levels = [(1, "Data", L1D, str(cpu)), (2, "Unified", L2, str(cpu)), (3, "Unified", L3, shared)]
        for index, (level, kind, size, sharing) in enumerate(levels):
            folder = root / f"cpu{cpu}" / "cache" / f"index{index}"
            folder.mkdir(parents=True)
            files = {"level": level, "type": kind, "size": size, "shared_cpu_list": sharing}
            for name, value in (files | {"coherency_line_size": 64}).items():
                (folder / name).write_text(f"{value}\n")


def tree() -> Path:
    """The tree's root, written once per machine and CPU set (a folder renamed into place, so
    that two test workers never see half of it)."""
    cpus = _cpus()
    key = hashlib.sha256(repr((L1D, L2, L3, cpus)).encode()).hexdigest()[:12]
    root = Path(tempfile.gettempdir()) / f"attnio-suite-machine-{key}"
    if not root.exists():
        scratch = Path(tempfile.mkdtemp(prefix="attnio-suite-machine-"))
        _write(scratch, cpus)
        try:
            scratch.rename(root)
        except OSError:  # the other worker put it there first
            shutil.rmtree(scratch)
    return root
