"""A workflow script's output and errors go to its rule's log. An error is written there
before the log closes (with Python's traceback), then raised again once the console streams
are back, so Snakemake shows it too; its message names the file it concerns."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def logged_to(log_path: str | os.PathLike) -> Iterator[None]:
    saved = sys.stdout, sys.stderr
    with open(log_path, "w", encoding="utf-8") as log:
        sys.stdout = sys.stderr = log
        try:
            yield
        except BaseException as err:
            traceback.print_exc(file=log)
            print(f"error: {err}", file=log)
            raise
        finally:
            sys.stdout, sys.stderr = saved
