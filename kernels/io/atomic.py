"""Atomic writes: a temporary file in the same folder, then a rename, so an interrupted run
never leaves a half-written file under the final name. The file gets the permissions the
umask gives a new file (mkstemp's own are 0600, which a group or a web server cannot read)."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from kernels.io.seal import fingerprint, seal_path


def new_file_mode() -> int:
    """0666 less the process's umask: what open() would give a new file."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


FULL = (errno.ENOSPC, errno.EDQUOT)


class DiskFullError(OSError):
    """A write that found no room: the message names the file, the bytes it needed (or had
    written when the room ran out, where known) and what its file system has free."""

    def __init__(
        self, path: str | os.PathLike, needed: int | None = None, written: int | None = None
    ) -> None:
        folder = Path(path).parent
        try:
            usage = shutil.disk_usage(folder)
            room = f"{usage.free:,} bytes free of {usage.total:,} on the file system of {folder}"
        except OSError:
            room = f"the file system of {folder} could not be asked how much is free"
        if needed is not None:
            room = f"needed {needed:,} bytes, {room}"
        elif written is not None:
            room = f"needed more than the {written:,} bytes it had written, {room}"
        super().__init__(errno.ENOSPC, f"no space left on device writing {path}: {room}")


def is_disk_full(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno in FULL


def disk_full_message(err: OSError) -> str:
    """One line for a write that found no room, from any writer's error."""
    return str((err if isinstance(err, DiskFullError) else DiskFullError(err.filename or "a file")).strerror)


def saying_a_full_disk(command: Callable[[], int]) -> int:
    """``command``'s exit status; where a write found no room, 1 and one line on stderr naming
    the file and the bytes (instead of a traceback, which a full disk's log has no room for)."""
    import sys

    try:
        return command()
    except OSError as err:
        if not is_disk_full(err):
            raise
        print(f"error: {disk_full_message(err)}", file=sys.stderr, flush=True)
        return 1


def temporary_pattern(target: Path) -> re.Pattern:
    """The names mkstemp gives ``target``'s temporaries: ".NAME." and 8 characters, ".tmp"
    (not another file's that starts with NAME, such as its seal's)."""
    return re.compile(rf"\.{re.escape(target.name)}\.[a-z0-9_]{{8}}\.tmp")


def drop_interrupted(target: Path) -> None:
    """Remove the temporaries of ``target`` that a write cut short left behind (a process
    killed between creating one and the rename: kill -9, or a warm worker ended with its
    job). The job writing ``target`` now owns it, so no other write of it is under way."""
    pattern = temporary_pattern(target)
    for entry in os.scandir(target.parent):
        if pattern.fullmatch(entry.name):
            Path(entry.path).unlink(missing_ok=True)


def write_atomic(path: str | os.PathLike, write: Callable[[Path], None], *, sealed: bool = False) -> None:
    """Call ``write(temporary_path)``, then rename the result to ``path``; ``sealed``: a table,
    whose seal (kernels.io.seal: its rows, bytes and hash) is written after it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    drop_interrupted(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, new_file_mode())
        os.replace(tmp, target)
    except BaseException as err:
        written = Path(tmp).stat().st_size if Path(tmp).exists() else 0
        Path(tmp).unlink(missing_ok=True)
        if is_disk_full(err) and not isinstance(err, DiskFullError):
            raise DiskFullError(target, getattr(err, "attnio_needed", None), written) from err
        raise
    if sealed:
        write_seal(target)


def write_seal(path: str | os.PathLike) -> None:
    """The table's seal beside it (kernels.io.seal), written as every file is: atomically."""
    write_text_atomic(seal_path(path), json.dumps(fingerprint(path), indent=1) + "\n")


def write_text_atomic(path: str | os.PathLike, text: str, *, sealed: bool = False) -> None:
    def write(tmp: Path) -> None:
        try:
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as err:
            err.attnio_needed = len(text.encode("utf-8"))  # what the message names
            raise

    write_atomic(path, write, sealed=sealed)


def write_csv_atomic(path: str | os.PathLike, rows: Iterable[dict], columns: Sequence[str]) -> None:
    """Rows of dicts as a sealed CSV table with the header ``columns`` (never a first row's
    keys: a table of no rows has its header too). A table of tables.schema.json is written
    with kernels.io.computed_tables.write_table, which takes its columns from its schema."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(path, text.getvalue(), sealed=True)
