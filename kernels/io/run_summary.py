"""The last lines a run prints: the configured points counted by the records on disk, where
to look, whether the index is this run's, and whether results/ ran out of room.

Plain Python (no Snakemake): the workflow's onsuccess/onerror hooks (workflow/rules/
run_summary.smk) hand it the points' record paths and what Snakemake planned, and print the
lines it words at the level it gives.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kernels.io.records import DamagedRecordError, read_record

STATUSES = ("ok", "skipped", "failed", "missing", "damaged")

# Less room than this where results/ is (64 MiB, or 2 % of a smaller file system): a job
# that failed there most likely found none (its log may be empty, having had no room either).
LOW_ROOM_BYTES = 64 << 20
LOW_ROOM_SHARE = 0.02


@dataclass
class Tally:
    """The records of a run's points: how many of each status (ok, skipped, failed; missing:
    no record; damaged: one that cannot be used), those not usable, how many were timed on a
    busy machine, and when the newest usable one was written."""

    counts: Counter = field(default_factory=Counter)
    unusable: list[str] = field(default_factory=list)
    busy: int = 0
    newest: float = 0.0


def tally(records: Iterable[tuple[str, dict]]) -> Tally:
    """The records at each (path, what its file name says it holds)."""
    found = Tally()
    for path, expect in records:
        try:
            record = read_record(path, expect)
            found.counts[record["status"]] += 1
            found.busy += (record.get("contention") or {}).get("verdict") == "busy"
            found.newest = max(found.newest, os.path.getmtime(path))
        except DamagedRecordError:
            found.counts["damaged" if os.path.exists(path) else "missing"] += 1
            found.unusable.append(path)
    return found


def point_lines(found: Tally, tables: list[Path], results: str) -> list[tuple[str, str]]:
    """(level, line) for the points: their count by status and why (the first of ``tables``
    and the others with a reason column, when each exists, else the records), the busy
    timings, the records a plain run makes."""
    total = sum(found.counts.values())
    said = ", ".join(f"{found.counts[s]} {s}" for s in STATUSES if found.counts[s]) or "none"
    why = (
        f"{' and '.join(map(str, tables))}, column reason"
        if all(t.exists() for t in tables)
        else f"each record under {results}/points/"
    )
    lines = [("info", f"attnio: {total} points: {said} (why: {why})")]
    if found.busy:
        lines.append(
            (
                "warning",
                f"attnio: {found.busy} of them timed while other processes held CPUs their "
                f"threads needed: the pages mark them (why: {tables[0]}, column "
                "contention_reason); to time them again, delete their records and run again "
                "on a quiet machine",
            )
        )
    if found.unusable:
        more = f" and {len(found.unusable) - 1} more" if len(found.unusable) > 1 else ""
        lines.append(
            (
                "warning",
                f"attnio: no usable record: {found.unusable[0]}{more}; a plain run makes them",
            )
        )
    return lines


def index_line(index: Path, newest_record: float, planned: bool, run_started: float) -> str | None:
    """Where the reports are; or that the index there is an earlier run's, and from when:
    this run was to make it again (``planned``) and stopped first (a failed job, Ctrl-C), or
    a record is newer than it (a run that left the index out, --until, --omit-from). None
    where there is no index."""
    if not index.exists():
        return None
    made = index.stat().st_mtime
    if (planned and made < run_started) or made < newest_record:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(made))
        return (
            f"attnio: reports: {index} is stale: an earlier run made it ({when}), before "
            "this run's records, so it does not show them; a plain run makes it again"
        )
    return f"attnio: reports: {index}"


def disk_full_line(folder: str | os.PathLike) -> str | None:
    """A failed run's closing line when the results' file system is (nearly) full, or None."""
    try:
        usage = shutil.disk_usage(folder)
    except OSError:
        return None
    if usage.free >= min(LOW_ROOM_BYTES, LOW_ROOM_SHARE * usage.total):
        return None
    return (
        f"attnio: no space left on device: the file system of {folder}/ has {usage.free:,} "
        f"bytes free of {usage.total:,}; jobs that write there fail (their logs may be empty, "
        "having no room either) and nothing partial is kept under a final name: free some "
        "space and run again, which makes what is missing"
    )
