"""A wall-clock limit for one job (measure; validate, build, preflight, ceilings and
tile-errors with --time-limit): when it passes, what the job records instead is written (a
failed record, verdicts saying timeout, ceilings saying why they are missing) and the
process ends, so that code that hangs or crawls becomes a record instead of a stuck
workflow. A watchdog thread does it: torch's operators and the
Triton interpreter release the interpreter lock often enough for it to run."""

from __future__ import annotations

import os
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def deadline(
    seconds: float | None, on_expiry: Callable[[], None], exit_status: int = 0
) -> Iterator[threading.Lock]:
    """Within the block, after ``seconds`` call ``on_expiry`` and exit the process (status
    0 by default: the record says what happened; a command with nothing to record exits
    non-zero). The block holds the yielded lock while it writes its own result, so that the
    two never both write. The process ends even when ``on_expiry`` cannot write (a command
    stopped before it had what to record, a full disk): status 1, its error said."""
    lock = threading.Lock()

    def expire() -> None:
        if not lock.acquire(blocking=False):
            return
        status = exit_status
        try:
            on_expiry()
        except BaseException:  # noqa: BLE001 (said, then the process ends all the same)
            traceback.print_exc()
            status = 1
        print(f"stopped after the time limit of {seconds:g} s", file=sys.stderr, flush=True)
        os._exit(status)

    timer = threading.Timer(seconds, expire) if seconds else None
    if timer:
        timer.daemon = True
        timer.start()
    try:
        yield lock
    finally:
        if timer:
            timer.cancel()
