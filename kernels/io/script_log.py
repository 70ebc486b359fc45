"""A workflow script's output and errors go to its rule's log. An error is written there
before the log closes (with Python's traceback), then raised again once the console streams
are back, so Snakemake shows it too; its message names the file it concerns."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

from kernels.io.atomic import DiskFullError, disk_full_message, is_disk_full


@contextmanager
def logged_to(log_path: str | os.PathLike) -> Iterator[None]:
    """Within the block, stdout and stderr go to the log. A write that finds no room (the
    results' file system is full, where the log is too) is said on the console, one line
    naming the file, instead of a traceback the log has no room for."""
    saved = sys.stdout, sys.stderr
    log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 (closed below, its own errors caught)
    sys.stdout = sys.stderr = log
    try:
        yield
    except BaseException as err:
        if is_disk_full(err):
            _close(log, saved)
            raise SystemExit(f"error: {disk_full_message(err)}") from None
        traceback.print_exc(file=log)
        print(f"error: {err}", file=log)
        raise
    finally:
        _close(log, saved)


def _close(log, saved) -> None:
    sys.stdout, sys.stderr = saved
    if log.closed:
        return
    try:
        log.close()
    except OSError as err:
        if not is_disk_full(err):
            raise
        raise SystemExit(f"error: {disk_full_message(DiskFullError(log.name))}") from None
