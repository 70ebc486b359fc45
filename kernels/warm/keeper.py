"""A worker's parent: starts it, records how it ended, and ends it with the run.

``python -m kernels.warm.keeper LANE`` runs in a session of its own (a Ctrl-C in Snakemake's
terminal never reaches it), starts the worker, and then every POLL_S checks two things: the
worker (when it ends, its exit status goes to ``exits/<pid>.json`` for the job that was
waiting on it: a signal such as SIGSEGV or SIGKILL is the reason its record gives) and the
run's Snakemake process (when that is gone, killed with -9 included, the worker is ended).
SIGTERM (the run's end) ends the worker too. Standard library only, so it starts in
milliseconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from kernels.warm.lanes import Lane, lane_from_json

POLL_S = 0.2
TERM_WAIT_S = 3.0


def stop(worker: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after TERM_WAIT_S."""
    if worker.poll() is not None:
        return
    worker.terminate()
    try:
        worker.wait(TERM_WAIT_S)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()


def record_exit(lane: Lane, worker: subprocess.Popen) -> None:
    code = worker.returncode
    found = {"pid": worker.pid, "returncode": code}
    if code is not None and code < 0:
        found["signal"] = signal.Signals(-code).name
    path = lane.exit_file(worker.pid)
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(found))
        os.replace(tmp, path)
    except OSError:  # no room (a full disk): the client says the exit could not be read
        tmp.unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    lane = lane_from_json(argv[0])
    lane.keeper_file(os.getpid()).write_text(str(os.getpid()))
    ending = []
    signal.signal(signal.SIGTERM, lambda *_: ending.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    worker = subprocess.Popen([sys.executable, "-m", "kernels.warm.worker", argv[0]])
    lane.worker_file(worker.pid).write_text(str(worker.pid))
    try:
        while worker.poll() is None:
            if ending or not lane.run.ongoing():
                why = "the run ended" if ending else f"the run's process {lane.run.pid} is gone"
                print(f"keeper: {why}: ending worker {worker.pid}", file=sys.stderr, flush=True)
                stop(worker)
                break
            time.sleep(POLL_S)  # a few wake-ups a second: nothing beside a timed job
    finally:
        stop(worker)
        record_exit(lane, worker)
        for path in (lane.worker_file(worker.pid), lane.keeper_file(os.getpid())):
            path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
