"""The warm worker: torch and triton imported once (and on a GPU its CUDA context made once),
then one command at a time from the lane's jobs (kernels.warm.client).

``python -m kernels.warm.worker LANE`` is started by the lane's keeper. It fixes the Triton
mode of its lane, imports what the commands import, listens on the lane's socket and runs
each job's ``python -m kernels`` arguments through ``kernels.cli.main`` in the job's folder,
environment and output files (kernels.warm.isolation). A measure job's record names this
process and how many points it measured before. After a job that leaked memory (its point's
record then says failed, naming the leak), left threads running, replaced what later points
reach (torch's functions, a tensor's methods, our own functions) or broke the GPU context,
the worker ends; so it does when its keeper is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
import traceback

from kernels.io import last_words
from kernels.warm.lanes import Lane, lane_from_json

PARENT_POLL_S = 0.5
# the rehearsal's timing windows, as the commands take them (a call's time at most, its
# stages' passes at least): what is set up matters here, not the times
SHORT_WINDOWS = ["--cpu-seconds", "0.02", "--stage-seconds", "0.005"]


def fix_mode(mode: str) -> None:
    from kernels.impl import mode as triton_mode

    if mode != "auto":
        triton_mode.set_interpret(mode == "interpret")
    triton_mode.interpret()


def warm_up(mode: str) -> None:
    """Import what the commands import, and make the CUDA context where the lane compiles."""
    import torch
    import triton  # noqa: F401

    import kernels.cli  # noqa: F401
    import kernels.measure.ceilings  # noqa: F401
    import kernels.measure.run  # noqa: F401
    import kernels.measure.tile_errors  # noqa: F401
    import kernels.measure.validate  # noqa: F401

    if mode != "interpret" and torch.cuda.is_available():
        torch.zeros(1, device="cuda").add_(1).item()


def rehearse() -> None:
    """A tiny point of each kind, measured and thrown away before a worker's first measure
    job: what a process sets up on first use (the profiler, the timers, the interpreter,
    cuBLAS) is then part of the worker's state, not memory that job seems to leave behind."""
    import tempfile

    import torch

    from kernels.impl import mode

    device = "cpu" if mode.interpret() else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        return  # a compiling lane without a GPU builds only

    from kernels import catalog
    from kernels.spec import DEFAULT_TWIN

    tiny = ["--batch", "1", "--heads", "1", "--tokens", "16", "--head-dim", "16", "--device", device]
    with tempfile.TemporaryDirectory(prefix="attnio-rehearsal-") as folder:
        # a PyTorch path and a Triton one (the fused: the lightest to interpret)
        for impl in (DEFAULT_TWIN, catalog.triton_path("none")):
            out = os.path.join(folder, f"{impl}.json")
            args = ["measure", "--impl", impl, *tiny, "--dtype", "float32", "--no-ncu", *SHORT_WINDOWS]
            blocks = ["--block-m", "16", "--block-n", "16"] if catalog.get(impl).triton else []
            run_command([*args, *blocks, "--out", out])


def watch_parent(parent: int) -> None:
    """End this process when its keeper is gone (the keeper ends it otherwise)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(3)

    threading.Thread(target=watch, name="attnio-keeper-watch", daemon=True).start()


def receive(conn: socket.socket) -> tuple[dict, list[int]]:
    _, fds, _, _ = socket.recv_fds(conn, 1, 2)
    buffer = b""
    while not buffer.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("the job hung up before sending its command")
        buffer += chunk
    return json.loads(buffer), list(fds)


def send(conn: socket.socket, **message) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def run_command(argv: list[str]) -> int:
    from kernels.cli import main

    try:
        return main(argv) or 0
    except SystemExit as exit:
        if exit.code is None or isinstance(exit.code, int):
            return exit.code or 0
        print(exit.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 (as Python would: the traceback, status 1)
        traceback.print_exc()
        return 1


class JobUsage:
    """A command's own use of this process, for the job's log: Snakemake's benchmark of the job
    sees only its thin client. CPU time is this process's (every thread) and that of the
    processes it waited for (a compiler's), since the command started; the peak resident
    memory is the process's since then: Linux's high-water mark is set back to the current
    size (/proc/self/clear_refs), and where it cannot be, none is said."""

    def __init__(self) -> None:
        self.cpu = time.process_time() + self._children()
        try:
            with open("/proc/self/clear_refs", "w") as handle:
                handle.write("5")
            self.peak_reset = True
        except OSError:
            self.peak_reset = False

    @staticmethod
    def _children() -> float:
        import resource

        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        return used.ru_utime + used.ru_stime

    @staticmethod
    def _peak_mb() -> float | None:
        try:
            with open("/proc/self/status") as handle:
                for line in handle:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024  # kB
        except (OSError, ValueError, IndexError):
            return None
        return None

    def line(self) -> str:
        from kernels.io.benchmarks import usage_line

        cpu = time.process_time() + self._children() - self.cpu
        return usage_line(os.getpid(), cpu, self._peak_mb() if self.peak_reset else None)


class Worker:
    def __init__(self, lane: Lane) -> None:
        from kernels.warm import isolation

        self.lane = lane
        self.points = 0
        self.jobs = 0
        self.rehearsed = False
        self.leak_limit = lane.run.leak_mb * 2**20
        isolation.settle()
        self.pristine = isolation.Pristine.now()

    def serve(self, conn: socket.socket) -> tuple[str | None, int]:
        """One job: why this worker must end after it (None: it serves the next), and the
        command's exit status."""
        from kernels.measure import provenance
        from kernels.warm import isolation

        request, fds = receive(conn)
        argv = request["argv"]
        measures = argv[:1] == ["measure"]
        if measures and not self.rehearsed:
            rehearse()
            isolation.settle()
            self.pristine.reached = isolation.reached_now()
            self.rehearsed = True
        send(conn, event="started", pid=os.getpid())
        threads = threading.active_count()
        held = isolation.allocated_bytes()
        provenance.set_worker(os.getpid(), self.points)
        with isolation.job(self.pristine, request, fds):
            usage = JobUsage()
            rc = run_command(argv)
            with contextlib.suppress(OSError, ValueError):  # the job's log (kernels.io.benchmarks)
                print(usage.line(), file=sys.stderr, flush=True)
            retired, leaked = isolation.retire_reason(self.pristine, held, threads, self.leak_limit)
            if retired and measures and leaked > self.leak_limit:
                record_leak(request["env"].get(last_words.VARIABLE), retired)
        provenance.set_worker(None, 0)
        self.points += measures
        self.jobs += 1
        print(
            f"worker {os.getpid()}: job {self.jobs} ({argv[0]}): status {rc}, "
            f"{leaked / 2**20:.0f} MiB more held after it",
            file=sys.stderr,
            flush=True,
        )
        return retired, rc

    def loop(self, server: socket.socket) -> None:
        while True:
            conn, _ = server.accept()
            with conn:
                try:
                    retired, rc = self.serve(conn)
                except (ConnectionError, OSError, ValueError) as err:
                    print(
                        f"worker {os.getpid()}: a job's connection failed: {err}", file=sys.stderr, flush=True
                    )
                    continue
                if retired:
                    server.close()  # no job may reach a worker that is ending
                    print(
                        f"worker {os.getpid()}: ends after job {self.jobs}: {retired}",
                        file=sys.stderr,
                        flush=True,
                    )
                with contextlib.suppress(OSError):
                    send(conn, event="done", rc=rc, retired=retired)
                if retired:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(0)  # at once: the keeper records it, the next job starts a fresh one


def record_leak(words_path: str | None, reason: str) -> None:
    """The point that leaked is recorded as failed, naming the leak (from the command's last
    words: its record as failed)."""
    words = last_words.heard(words_path) if words_path else None
    if words is not None:
        last_words.say(words, f"{reason} (limits.worker_leak_mb)")


def main(argv: list[str]) -> int:
    import faulthandler

    lane = lane_from_json(argv[0])
    watch_parent(os.getppid())
    started = time.perf_counter()
    fix_mode(lane.mode)
    warm_up(lane.mode)
    faulthandler.enable()  # a crash's traceback goes to the job's stderr (its log)
    worker = Worker(lane)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if not lane.address.startswith("\0"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lane.address)
    server.bind(lane.address)
    server.listen(1)
    print(
        f"worker {os.getpid()} ({lane.name}): ready in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    worker.loop(server)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
