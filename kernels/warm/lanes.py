"""Lanes: one worker each, serving one job at a time.

A job claims the first free lane of its kind (an exclusive lock held for the job's life), so
there are as many workers of a kind as jobs of that kind ever ran side by side, as the
workflow's resources allowed: one for the timed jobs, which take every core. A kind is the
Triton mode the command needs (fixed once per process) and whatever the process's imports
depend on: the Python, the working folder and the variables read at import (the plugins,
Triton's and the thread libraries' settings).

Standard library only.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kernels.warm.session import Run

# variables read while modules are imported: a worker started with other values cannot serve
IMPORT_TIME_PREFIXES = ("ATTNIO_", "TRITON_", "CUDA_", "PYTHON", "LD_", "OMP_", "MKL_", "KMP_")
# the thread counts Snakemake sets per job (its threads): each job's own is given to torch by
# the worker (kernels.warm.isolation), so only whether one is set makes a kind
THREAD_COUNTS = (
    *("OMP_NUM_THREADS", "MKL_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS"),
    *("VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"),
)
NOT_IMPORT_TIME = ("ATTNIO_WORKER_RUN", *THREAD_COUNTS)
MAX_LANES = 64


def mode_of(argv: list[str], environ=os.environ) -> str:
    """The Triton mode a command runs in, as kernels.cli chooses it: build and preflight
    compile; the others follow --device (auto: ATTNIO_INTERPRET when set, else the worker
    decides as kernels.impl.mode does)."""
    if argv and argv[0] in ("build", "preflight"):
        return "compiled"
    device = "auto"
    for i, arg in enumerate(argv):
        if arg == "--device" and i + 1 < len(argv):
            device = argv[i + 1]
        elif arg.startswith("--device="):
            device = arg.partition("=")[2]
    if device == "cpu":
        return "interpret"
    if device == "cuda":
        return "compiled"
    chosen = environ.get("ATTNIO_INTERPRET", "").strip().lower()
    if chosen in ("1", "true", "yes", "on"):
        return "interpret"
    if chosen in ("0", "false", "no", "off"):
        return "compiled"
    return "auto"


def kind_of(argv: list[str], environ=os.environ, cwd: str | None = None) -> str:
    """``<mode>-<hash>``: the mode and a hash of what the worker's imports depend on."""
    imported = {
        key: value
        for key, value in environ.items()
        if key.startswith(IMPORT_TIME_PREFIXES) and key not in NOT_IMPORT_TIME
    }
    counted = [name for name in THREAD_COUNTS if name in environ]
    basis = json.dumps([sys.executable, cwd or os.getcwd(), sorted(imported.items()), counted])
    return f"{mode_of(argv, environ)}-{hashlib.sha256(basis.encode()).hexdigest()[:10]}"


@dataclass(frozen=True)
class Lane:
    run: Run
    name: str  # <kind>-<index>
    mode: str

    @property
    def log(self) -> Path:
        return self.run.folder / f"{self.name}.log"

    def keeper_file(self, pid: int) -> Path:
        """Names a running keeper (one per file: a lane's ending keeper and its next may overlap)."""
        return self.run.folder / f"keeper-{self.name}-{pid}.pid"

    def worker_file(self, pid: int) -> Path:
        return self.run.folder / f"worker-{self.name}-{pid}.pid"

    def exit_file(self, pid: int) -> Path:
        return self.run.folder / "exits" / f"{pid}.json"

    @property
    def address(self) -> str:
        """Linux: an abstract socket (no file; gone with its process); elsewhere a socket
        file in the temporary folder (short, as socket paths must be)."""
        digest = hashlib.sha256(f"{self.run.folder}:{self.name}".encode()).hexdigest()[:24]
        if sys.platform.startswith("linux"):
            return f"\0attnio-{digest}"
        return os.path.join(tempfile.gettempdir(), f"attnio-{digest}.sock")

    def as_json(self) -> str:
        return json.dumps({"run": str(self.run.folder), "name": self.name, "mode": self.mode})

    def connect(self) -> socket.socket | None:
        """A connection to this lane's worker, None when it has none listening."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.address)
        except OSError:
            sock.close()
            return None
        return sock


class Claimed:
    """A lane held for one job (its lock released when the job ends)."""

    def __init__(self, lane: Lane, handle) -> None:
        self.lane = lane
        self._handle = handle

    def __enter__(self) -> Lane:
        return self.lane

    def __exit__(self, *exc) -> None:
        self._handle.close()


def claim(run: Run, kind: str, mode: str) -> Claimed | None:
    """The first lane of ``kind`` no other job holds; None when none can be locked."""
    for index in range(MAX_LANES):
        lane = Lane(run, f"{kind}-{index}", mode)
        try:
            handle = open(run.folder / f"{lane.name}.lock", "a")  # noqa: SIM115 (held for the job)
        except OSError:
            return None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        return Claimed(lane, handle)
    return None


def lane_from_json(text: str) -> Lane:
    from kernels.warm.session import read

    found = json.loads(text)
    run = read(Path(found["run"]))
    if run is None:
        raise SystemExit(f"no run in {found['run']}")
    return Lane(run, found["name"], found["mode"])
