"""Atomic writes: a temporary file in the same folder, then a rename, so an interrupted run
never leaves a half-written file under the final name. The file gets the permissions the
umask gives a new file (mkstemp's own are 0600, which a group or a web server cannot read)."""

from __future__ import annotations

import csv
import io
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path


def new_file_mode() -> int:
    """0666 less the process's umask: what open() would give a new file."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomic(path: str | os.PathLike, write: Callable[[Path], None], *, sealed: bool = False) -> None:
    """Call ``write(temporary_path)``, then rename the result to ``path``; ``sealed``: a table,
    whose seal (kernels.io.seal: its rows, bytes and hash) is written after it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, new_file_mode())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if sealed:
        from kernels.io.seal import write_seal

        write_seal(target)


def write_text_atomic(path: str | os.PathLike, text: str, *, sealed: bool = False) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())

    write_atomic(path, write, sealed=sealed)


def write_csv_atomic(path: str | os.PathLike, rows: list[dict], columns: Sequence[str] | None = None) -> None:
    """Rows of dicts as a sealed CSV table with a header (the first row's keys unless given)."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(columns or rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(path, text.getvalue(), sealed=True)
