"""What a point's code must leave of the process that measures it: its working folder, and
no thread of its own still running. A plugin that moves the folder would have the record
written elsewhere (a relative --out resolves against it); one that leaves threads running
keeps the job's process alive after its record (Python waits for them at exit) or holds on
to a warm worker. Either makes the point a failed record naming what it did, and the folder
is set back first."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

THREAD_WAIT_S = 2.0  # for the point's own short-lived threads (a timer being cancelled) to end


@contextmanager
def guarded() -> Iterator[list[str]]:
    """Within the block, the point's code runs; after it, the yielded list holds what it left
    changed (empty when nothing), and the working folder is as before."""
    folder = os.getcwd()
    before = set(threading.enumerate())
    found: list[str] = []
    try:
        yield found
    finally:
        moved = _folder_now()
        if moved != folder:
            os.chdir(folder)
            found.append(f"it changed the working folder (to {moved}); a point's code must not")
        left = _threads_left(before)
        if left:
            names = ", ".join(sorted(t.name for t in left)[:3])
            found.append(
                f"it left {len(left)} thread(s) running after the point ({names}); a point's code "
                "must end the threads it starts"
            )


def _folder_now() -> str:
    try:
        return os.getcwd()
    except OSError as err:  # the folder it moved to is gone
        return f"a folder that is gone: {err}"


def _threads_left(before: set[threading.Thread]) -> list[threading.Thread]:
    deadline = time.monotonic() + THREAD_WAIT_S
    while True:
        left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)
