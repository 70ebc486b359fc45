"""Was the machine quiet while a point was timed? Other processes on the CPUs a job runs on
turn CPU timings into scheduler quanta (whole multiples of about 4 ms), and a record that
said ``ok`` would pass them off as the kernel's. Around its timing each record measures, from
Linux's /proc/stat, the CPU time every process spent on the CPUs this job may use, less this
process's own, and the time a hypervisor stole from them. Others taking more than a bound of
the CPUs the job's threads need, or a hypervisor stealing more than one, makes the verdict
``busy``, with the reason; the tables keep the times with the verdict beside them, and the
pages, the index and the run's closing line name the busy points (reports.pages.common.busy)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

PROC_STAT = Path("/proc/stat")
# Shares over the timing window: of the CPUs the job's threads need, taken by other
# processes; of the job's CPUs' time, stolen. Quiet, a run's own bookkeeping (Snakemake, the
# warm worker's keeper, the client) takes a few per cent; one process competing for one of
# two CPUs a two-thread job needs takes about 50 %.
BUSY_TAKEN = 0.15
BUSY_STEAL = 0.10
# the fields of a cpu line of /proc/stat (user nice system idle iowait irq softirq steal ...):
# work is all but idle, iowait and steal (time the hypervisor gave another guest)
IDLE, IOWAIT, STEAL = 3, 4, 7


def _ticks_per_second() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError):
        return 100


def cpu_ticks(cpus: set[int], stat: Path = PROC_STAT) -> tuple[int, int] | None:
    """(busy, stolen) clock ticks summed over ``cpus`` since boot, or None without /proc:
    busy is what this machine's processes and kernel ran, stolen what the hypervisor took."""
    try:
        lines = stat.read_text().splitlines()
    except OSError:
        return None
    busy = stolen = 0
    for line in lines:
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        ticks = [int(f) for f in fields[:8]]
        steal = ticks[STEAL] if len(ticks) > STEAL else 0
        busy += sum(ticks) - ticks[IDLE] - ticks[IOWAIT] - steal  # stolen time is no one's work here
        stolen += steal
    return busy, stolen


def affinity() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return set(range(os.cpu_count() or 1))


def verdict(wall_s: float, own_cpu_s: float, busy_s: float, stolen_s: float, cpus: int, threads: int) -> dict:
    """The evidence and the verdict from one window's figures: the CPUs other processes kept
    busy on average, the share of the CPUs the job's ``threads`` need that this took from
    them (none while enough CPUs stayed idle), and the share the hypervisor stole."""
    wall_s, threads = max(wall_s, 1e-9), max(1, min(threads, cpus))
    others = max(busy_s - own_cpu_s, 0.0) / wall_s
    taken = max(0.0, others - (cpus - threads)) / threads
    steal = stolen_s / (wall_s * cpus)
    said = (
        f"other processes kept {others:.2f} of the {cpus} CPU{'s' * (cpus != 1)} this job may run on busy "
        f"over the {wall_s:.2f} s it was timed, taking {taken:.0%} of the {threads} its threads need, and "
        f"the hypervisor stole {steal:.0%} (/proc/stat)"
    )
    busy = taken > BUSY_TAKEN or steal > BUSY_STEAL
    bounds = f"; busy past {BUSY_TAKEN:.0%} taken or {BUSY_STEAL:.0%} stolen"
    return {
        "verdict": "busy" if busy else "quiet",
        "reason": said + (bounds if busy else ""),
        "others_cpus": round(others, 3),
        "taken_share": round(taken, 4),
        "steal_share": round(steal, 4),
        "wall_s": round(wall_s, 4),
        "cpus": cpus,
        "threads": threads,
    }


def unknown(reason: str) -> dict:
    return {"verdict": "unknown", "reason": reason}


@contextmanager
def watched(threads: int, own_seconds: Callable[[], float] = time.process_time) -> Iterator[dict]:
    """Fill the yielded dict, once the block ends, with the window's contention for a job of
    ``threads`` threads: evidence, verdict (quiet, busy, or unknown where /proc/stat is
    missing) and reason. ``own_seconds`` is the job's CPU time so far: this process's, or
    for a job run as child processes, theirs."""
    cpus = affinity()
    found: dict = {}
    before = cpu_ticks(cpus)
    started, own = time.monotonic(), own_seconds()
    try:
        yield found
    finally:
        after = cpu_ticks(cpus)
        wall, own_cpu = time.monotonic() - started, own_seconds() - own
        if before is None or after is None:
            found |= unknown("no /proc/stat on this system: contention was not measured")
        else:
            hz = _ticks_per_second()
            busy, stolen = ((a - b) / hz for a, b in zip(after, before, strict=True))
            found |= verdict(wall, own_cpu, busy, stolen, len(cpus), threads)
