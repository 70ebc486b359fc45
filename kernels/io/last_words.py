"""What a command leaves behind if its process dies before it ends.

A measure or validate job may lose its process to the code it runs (a plugin's ``os._exit``,
a segfault, the out-of-memory killer). The command says early, while it can, what its output
should read then: a measure job its record with status failed, a validate job every case with
verdict error. It writes that to the file ``ATTNIO_LAST_WORDS`` names, which the process
watching it made (the job's thin client, kernels.warm); when the command's process ends
without its own output, the watcher writes the last words at the output's path with the
reason it saw. The point is then a failed record, the implementation's points are skipped
naming the reason, and the run goes on.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

VARIABLE = "ATTNIO_LAST_WORDS"
KINDS = ("record", "validation")


def leave(kind: str, content, out: str) -> None:
    """Say what ``out`` should hold if this process dies before writing it (nothing without a
    watcher). ``kind`` record: a metrics record; validation: a list of verdict rows."""
    path = os.environ.get(VARIABLE)
    if not path:
        return
    if kind not in KINDS:
        raise ValueError(f"last words of kind {kind!r}: one of {', '.join(KINDS)}")
    from kernels.io.atomic import write_text_atomic

    write_text_atomic(path, json.dumps({"kind": kind, "out": os.path.abspath(out), "content": content}))


def retract() -> None:
    """Take back what ``leave`` said: the command ends as it chose to (a refusal, its status
    and message its own), not as a process that died."""
    path = os.environ.get(VARIABLE)
    if path:
        Path(path).unlink(missing_ok=True)


def heard(path: str | os.PathLike) -> dict | None:
    """The last words the command left at ``path``, or None (it left none, or they are not
    readable)."""
    try:
        words = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return words if isinstance(words, dict) and words.get("kind") in KINDS else None


def say(words: dict, reason: str) -> str:
    """Write the last words at their output with ``reason``; the output's path."""
    from kernels.io.atomic import write_text_atomic

    out, content = words["out"], words["content"]
    if words["kind"] == "record":
        from kernels.io.records import write_record

        finished = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
        write_record(content | {"status": "failed", "reason": reason, "finished_at": finished}, out)
    else:
        rows = [row | {"message": reason} for row in content]
        write_text_atomic(out, json.dumps(rows, indent=1))
    return out
