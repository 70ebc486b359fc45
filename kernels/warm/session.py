"""The run's side of the warm workers: a folder per run, named in the jobs' environment.

The Snakefile's ``onstart`` calls ``begin`` in Snakemake's own process, only for a local run
(a SLURM job on another node cannot reach the submitting host's workers): it makes
``<results>/logs/worker/run-<pid>-<start>/`` and names it in ``ATTNIO_WORKER_RUN``, which every
job inherits. ``onsuccess`` and ``onerror`` (a Ctrl-C included) call ``end``; when Snakemake is
killed outright, each worker's keeper sees the run's process gone and ends its worker itself.
``ATTNIO_WORKER=0`` runs every job in its own process, as without a session.

Standard library only: the jobs' thin client reads this module.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path

RUN_VARIABLE = "ATTNIO_WORKER_RUN"
OPT_OUT_VARIABLE = "ATTNIO_WORKER"
_OFF = {"0", "false", "no", "off"}
FOLDER = "logs/worker"
RUN_FILE = "run.json"
# how long ``end`` waits for the workers to end after asking (then they are killed)
END_WAIT_S = 5.0


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), which tells a live run
    from a later process that got its number; None where /proc cannot say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def alive(pid: int, start: str | None) -> bool:
    """Whether process ``pid`` still runs and is the one that started at ``start``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return start is None
    return start is None or process_start(pid) in (start, None)


@dataclass(frozen=True)
class Run:
    """One Snakemake run's workers: their folder, the run's process and the worker's limits."""

    folder: Path
    pid: int
    start: str | None
    host: str
    leak_mb: int

    def ongoing(self) -> bool:
        return self.host == socket.gethostname() and alive(self.pid, self.start)

    def as_json(self) -> dict:
        return {"pid": self.pid, "start": self.start, "host": self.host, "leak_mb": self.leak_mb}


def opted_out(environ=os.environ) -> bool:
    return environ.get(OPT_OUT_VARIABLE, "").strip().lower() in _OFF


def begin(results: str | os.PathLike, leak_mb: int, pid: int | None = None) -> Run | None:
    """The run's folder, made and named in ``ATTNIO_WORKER_RUN`` (None when opted out); the
    folders of runs that ended are removed (their workers are gone with them)."""
    if opted_out():
        os.environ.pop(RUN_VARIABLE, None)
        return None
    pid = pid or os.getpid()
    start = process_start(pid)
    base = Path(results, FOLDER)
    base.mkdir(parents=True, exist_ok=True)
    for old in base.glob("run-*"):
        found = read(old)
        if found is None or not found.ongoing():
            shutil.rmtree(old, ignore_errors=True)
    folder = base / f"run-{pid}-{start or int(time.time())}"
    (folder / "exits").mkdir(parents=True, exist_ok=True)
    run = Run(folder.resolve(), pid, start, socket.gethostname(), leak_mb)
    (folder / RUN_FILE).write_text(json.dumps(run.as_json()))
    os.environ[RUN_VARIABLE] = str(run.folder)
    return run


def read(folder: Path) -> Run | None:
    try:
        found = json.loads((folder / RUN_FILE).read_text())
        return Run(folder, int(found["pid"]), found["start"], found["host"], int(found["leak_mb"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def current(environ=os.environ) -> Run | None:
    """The run this job belongs to, when it has workers this job can reach: none when opted
    out, outside a run, on another host or after the run ended."""
    named = environ.get(RUN_VARIABLE)
    if not named or opted_out(environ):
        return None
    run = read(Path(named))
    return run if run is not None and run.ongoing() else None


def running(run: Run, kind: str) -> list[int]:
    """The run's keepers' or workers' (``kind``) process ids: each has a
    <kind>-<lane>-<pid>.pid while it runs."""
    found = []
    for path in run.folder.glob(f"{kind}-*.pid"):
        try:
            found.append(int(path.read_text()))
        except (OSError, ValueError):
            continue
    return found


def end(run: Run | None) -> int:
    """Ask every keeper of the run to end its worker, wait for them (killing what is left
    after END_WAIT_S); the number of workers that were running."""
    if run is None:
        return 0
    pids = running(run, "keeper")
    for pid in pids:
        send_signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + END_WAIT_S
    while time.monotonic() < deadline and any(_exists(pid) for pid in pids):
        time.sleep(0.05)
    for pid in [*pids, *running(run, "worker")]:  # what did not end when asked
        send_signal(pid, signal.SIGKILL)
    os.environ.pop(RUN_VARIABLE, None)
    return len(pids)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a keeper that ended but was not yet reaped by its parent counts as gone
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return True


def send_signal(pid: int, signum: int) -> None:
    """``signum`` to ``pid``, if it is still there and ours to signal."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)
