"""A SIGTERM to a local run ends its running jobs too.

Snakemake takes SIGTERM (``kill``, a session ending) as "finish the running jobs, start no
more": a job whose code hangs would then hold the run until its own time limit. Installed in
Snakemake's process by the Snakefile's onstart (after Snakemake's own handler, which it
keeps), this handler also sends SIGTERM to every process below Snakemake's (the jobs' shells,
their thin clients, which pass it to their command's process) and SIGKILL to any of them
still there KILL_AFTER_S later; Snakemake then sees the jobs fail and ends the run.

Standard library only (Snakemake's process).
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

from kernels.warm.session import send_signal

KILL_AFTER_S = 10.0


def children_of() -> dict[int, list[int]]:
    """Every process's children, by parent (Linux: /proc)."""
    found: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        found.setdefault(parent, []).append(int(entry.name))
    return found


def descendants(pid: int) -> list[int]:
    """The processes below ``pid``, parents before their children."""
    tree, found, queue = children_of(), [], [pid]
    while queue:
        children = tree.get(queue.pop(0), [])
        found += children
        queue += children
    return found


def end_jobs_on_sigterm() -> None:
    """Chain a handler to this process's SIGTERM that ends the processes below it."""
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum, frame) -> None:
        below = descendants(os.getpid())
        for pid in below:
            send_signal(pid, signal.SIGTERM)
        timer = threading.Timer(KILL_AFTER_S, lambda: [send_signal(p, signal.SIGKILL) for p in below])
        timer.daemon = True
        timer.start()
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
