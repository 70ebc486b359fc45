"""A measure or validate job without a warm worker (ATTNIO_WORKER=0, no session, no lane):
its command in a process of its own, watched from this one.

Whatever the command's code does to its process (a plugin's ``os._exit``, a segfault, threads
that never end), this process outlives it: when the command's process ends without its
output, its last words (kernels.io.last_words) are written with the reason, and past the
job's time limit and a grace it is killed and the same is done. A signal that ends the job
(Snakemake cancelling it) ends the command's process too. Standard library only: no torch.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernels.io import last_words
from kernels.warm.client import death_reason, grace, last_said, time_limit, written_since

WATCHED_COMMANDS = ("measure", "validate")
INSIDE = "ATTNIO_WATCHED"  # set in the command's own process: it runs the command itself


def watched(argv: list[str]) -> int | None:
    """The command's exit status, run in a watched process; None where it runs here (another
    command, help, or already inside a watched process)."""
    if not argv or argv[0] not in WATCHED_COMMANDS or {"-h", "--help"} & set(argv):
        return None
    if os.environ.get(INSIDE):
        return None
    with tempfile.TemporaryDirectory(prefix="attnio-watched-") as folder:
        words = Path(folder) / "last-words.json"
        environ = os.environ | {INSIDE: "1", last_words.VARIABLE: str(words)}
        started = time.time()
        sys.stdout.flush()
        sys.stderr.flush()
        child = subprocess.Popen([sys.executable, "-m", "kernels", *argv], env=environ)
        cancel = lambda signum, frame: _cancelled(child, signum)  # noqa: E731
        previous = {s: signal.signal(s, cancel) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            return _waited(child, argv, words, started)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def _waited(child: subprocess.Popen, argv: list[str], words: Path, started: float) -> int:
    limit = time_limit(argv)
    try:
        returncode = child.wait(None if limit is None else limit + grace(limit))
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        reason = (
            f"stopped after the time limit of {limit:g} s per {argv[0]} job (--time-limit): its "
            f"process (pid {child.pid}) had not stopped the command itself {grace(limit):g} s later, "
            "so it was killed"
        )
        return last_said(argv, words, reason)
    heard = last_words.heard(words)
    if heard is None:  # nothing it could leave unfinished (bad arguments): as it ended
        return returncode if returncode >= 0 else 1
    if written_since(heard["out"], started):  # its output is whole: as it said
        return max(returncode, 0)
    status = {"returncode": returncode} if returncode >= 0 else {"signal": signal.Signals(-returncode).name}
    return last_said(argv, words, death_reason(f"the process running it (pid {child.pid})", status))


def _cancelled(child: subprocess.Popen, signum: int) -> None:
    """Snakemake ends the job: the command's process with it."""
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
    raise SystemExit(128 + signum)
