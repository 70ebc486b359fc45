"""A job's command as a thin client: hand it to the run's warm worker, report what happened.

``python -m kernels COMMAND ...`` inside a run with a session (kernels.warm.session) claims a
lane of the command's kind, starts the lane's worker when it has none, and sends it the
arguments, the working folder, the environment and the job's own stdout and stderr (so the
job's log reads as if the command had run here). The exit status is the command's.

When the worker dies during a measure or validate job (a segfault, an out-of-memory kill, a
CUDA error that ends the process, a plugin's os._exit) or does not answer within the job's
time limit and a grace, the command's last words (kernels.io.last_words: a failed record,
every case an error) are written here with the reason; the next job starts a fresh worker.
Where no worker can be used (no session, an opt-out, a lane that cannot be locked, a worker
that cannot start), ``handed_over`` returns None and the command runs as without a session
(kernels.warm.watched: a measure or validate job in a watched process of its own).

Standard library only (kernels.io.records on a crash): no torch, no triton.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from kernels.io import last_words
from kernels.spec import JOB_LIMIT_SECONDS
from kernels.warm import lanes, session

WARM_COMMANDS = ("measure", "validate", "build", "ceilings", "tile-errors")
STARTUP_LIMIT_S = 300.0  # importing torch and triton on a slow, busy machine
EXIT_WAIT_S = 5.0  # for the keeper to record how a worker that hung up ended
# past a measure job's --time-limit before its worker is killed: the worker's own watchdog
# stops a point at the limit; only a point that holds the interpreter lock outlives it
GRACE_MIN_S, GRACE_MAX_S = 3.0, 30.0
SIGNALS = {
    "SIGSEGV": "a segmentation fault",
    "SIGBUS": "a bus error",
    "SIGILL": "an illegal instruction",
    "SIGFPE": "an arithmetic fault",
    "SIGABRT": "an abort",
    "SIGKILL": "killed: the out-of-memory killer, or kill -9",
    "SIGTERM": "terminated",
}


def note(text: str) -> None:
    print(f"attnio worker: {text}", file=sys.stderr, flush=True)


def handed_over(argv: list[str]) -> int | None:
    """The command's exit status after the worker ran it; None to run it in this process."""
    if not argv or argv[0] not in WARM_COMMANDS or {"-h", "--help"} & set(argv):
        return None
    run = session.current()
    if run is None:
        return None
    claimed = lanes.claim(run, lanes.kind_of(argv), lanes.mode_of(argv))
    if claimed is None:
        note("no lane could be locked; running in this process")
        return None
    with claimed as lane:
        for _ in range(2):  # a worker that ends before it takes the job: once more, fresh
            sock = lane.connect() or start_worker(lane)
            if sock is None:
                return None
            with sock:
                status = Job(lane, sock, argv).run()
            if status is not None:
                return status
        note("two workers in a row ended before taking the job; running in this process")
        return None


def start_worker(lane: lanes.Lane) -> socket.socket | None:
    """Start the lane's keeper (which starts the worker) and wait until the worker listens."""
    with open(lane.log, "a") as log:
        keeper = subprocess.Popen(
            [sys.executable, "-m", "kernels.warm.keeper", lane.as_json()],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + STARTUP_LIMIT_S
    while time.monotonic() < deadline:
        sock = lane.connect()
        if sock is not None:
            return sock
        if keeper.poll() is not None:
            note(f"the worker did not start (see {lane.log}); running in this process")
            return None
        time.sleep(0.02)
    note(f"the worker did not listen within {STARTUP_LIMIT_S:g} s (see {lane.log}); running in this process")
    session.send_signal(keeper.pid, signal.SIGTERM)
    return None


def grace(limit: float) -> float:
    return min(GRACE_MAX_S, max(GRACE_MIN_S, limit / 2))


def time_limit(argv: list[str]) -> float | None:
    """A job's --time-limit (the worker stops the command itself then); a measure job has
    one by default, the other commands only when given."""
    for i, arg in enumerate(argv):
        if arg == "--time-limit" and i + 1 < len(argv):
            try:
                return float(argv[i + 1])
            except ValueError:
                return None
    return float(JOB_LIMIT_SECONDS) if argv[0] == "measure" else None


class WorkerGoneError(Exception):
    """The worker hung up without saying the command was done."""


class Job:
    def __init__(self, lane: lanes.Lane, sock: socket.socket, argv: list[str]) -> None:
        self.lane, self.sock, self.argv = lane, sock, argv
        self.worker_pid: int | None = None
        # what the command's output says if its process dies (kernels.io.last_words)
        self.words = lane.run.folder / f"last-words-{os.getpid()}.json"
        self.started = time.time()
        self._buffer = b""

    def run(self) -> int | None:
        """The command's exit status; None when the worker ended before it took the job."""
        previous = {s: signal.signal(s, self._cancelled) for s in (signal.SIGTERM, signal.SIGINT)}
        self.words.unlink(missing_ok=True)
        try:
            self._send()
            limit, deadline = time_limit(self.argv), None
            while True:
                message = self._receive(deadline)
                if message is None:  # past the time limit and the grace
                    return self._overdue(limit)
                if message["event"] == "started":  # the limit runs from here, as the command's
                    self.worker_pid = message["pid"]
                    deadline = None if limit is None else time.monotonic() + limit + grace(limit)
                elif message["event"] == "done":
                    if message.get("retired"):
                        note(f"worker {self.worker_pid} ends after this job: {message['retired']}")
                    return int(message["rc"])
        except (WorkerGoneError, ConnectionError):
            return None if self.worker_pid is None else self._died()
        finally:
            self.words.unlink(missing_ok=True)
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _send(self) -> None:
        environ = dict(os.environ) | {last_words.VARIABLE: str(self.words)}
        request = {"argv": self.argv, "cwd": os.getcwd(), "env": environ, "client": os.getpid()}
        sys.stdout.flush()
        sys.stderr.flush()
        socket.send_fds(self.sock, [b"F"], [1, 2])
        self.sock.sendall(json.dumps(request).encode() + b"\n")

    def _receive(self, deadline: float | None) -> dict | None:
        while b"\n" not in self._buffer:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                return None
            if not chunk:
                raise WorkerGoneError
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def _cancelled(self, signum, frame) -> None:
        """Snakemake ends the job (Ctrl-C, a cancelled run): the worker's command with it."""
        if self.worker_pid:
            session.send_signal(self.worker_pid, signal.SIGTERM)
        raise SystemExit(128 + signum)

    def _exit_status(self) -> dict | None:
        if self.worker_pid is None:
            return None
        path = self.lane.exit_file(self.worker_pid)
        deadline = time.monotonic() + EXIT_WAIT_S
        while time.monotonic() < deadline:
            try:
                return json.loads(path.read_text())
            except (OSError, ValueError):
                time.sleep(0.02)
        return None

    def _died(self, reason: str | None = None) -> int:
        status = self._exit_status()
        if reason is None:
            reason = death_reason(f"the worker process (pid {self.worker_pid})", status)
        ended_itself = status is not None and status.get("returncode") == 0
        return outcome(self.argv, self.words, self.started, ended_itself, reason)

    def _overdue(self, limit: float) -> int:
        if self.worker_pid:
            session.send_signal(self.worker_pid, signal.SIGKILL)
        return self._died(
            f"stopped after the time limit of {limit:g} s per {self.argv[0]} job (--time-limit): the "
            f"worker (pid {self.worker_pid}) had not stopped the command itself {grace(limit):g} s later, "
            "so it was killed"
        )


def outcome(argv: list[str], words_path: Path, started: float, ended_itself: bool, reason: str) -> int:
    """The job's exit status once the process running its command ended without saying it was
    done: 0 when the command ended the process itself after writing its output (its own time
    limit); else its last words written with ``reason`` (status 0: the output says what
    happened, the run goes on), or status 1 for a command that left none."""
    words = last_words.heard(words_path)
    written = words is not None and written_since(words["out"], started)
    if ended_itself and (written or words is None):
        return 0
    return last_said(argv, words_path, reason)


def last_said(argv: list[str], words_path: Path, reason: str) -> int:
    """The command's last words written with ``reason`` (status 0: its output says what
    happened); status 1 for a command that left none."""
    note(reason)
    words = last_words.heard(words_path)
    if words is None:
        return 1
    out = last_words.say(words, reason)
    print(f"{argv[0]}: failed ({reason}) -> {out}", flush=True)
    return 0


def death_reason(who: str, status: dict | None) -> str:
    if status is None:
        return f"{who} hung up during this job and its exit status could not be read"
    if status.get("signal"):
        name = status["signal"]
        return f"{who} died during this job of {name} ({SIGNALS.get(name, 'a signal')})"
    return f"{who} exited with status {status['returncode']} during this job, before writing its output"


def written_since(path: str, started: float) -> bool:
    try:
        return Path(path).stat().st_mtime >= started - 1.0
    except OSError:
        return False
