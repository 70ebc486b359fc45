"""The CPU's cache levels, read from the OS, and what of them a study's threads meet.

CPU (Linux): the OS's cache description under ``/sys/devices/system/cpu`` (the root is a
parameter, so a test can hand it a tree of its own; without one, the environment variable
``ATTNIO_SYSFS_CPU`` names another root, for a container whose own tree is hidden or wrong, or
a planner test): for every ``cpuN/cache/indexM`` its ``level``, ``type``, ``size``,
``shared_cpu_list`` and ``coherency_line_size``. Data and unified caches are the data levels;
instruction caches are listed apart and never used as data levels. A cache shared by several
CPUs appears under each of them; it is counted once per distinct ``shared_cpu_list`` (one
*instance*). Each level reports:

- ``bytes``: the size of one instance (what one core meets; the smallest, should instances
  differ, as on a processor with two kinds of cores),
- ``total_bytes``: the sum over its distinct instances (what a footprint spread over the
  whole machine meets), with ``instances`` and ``cpus_per_instance`` beside them,
- ``study_bytes``: the sum over the instances the study's threads touch, each its own size
  (what a hand-off between those threads meets), with ``study_instances`` and ``study_used``
  (each instance's ``cpus``, ``bytes`` and ``first_thread``: the first of the study's threads
  that meets it, so that a copy on fewer threads can tell which it reaches).

The study's CPUs are those the process may run on (``os.sched_getaffinity``, or the ``cpus``
given), sorted; its threads run on the first ``threads`` of them (all of them when not given).
The total is no capacity a study meets: on a 64-core EPYC with eight 32 MiB L3 instances, two
threads on one CCD share 32 MiB, not 256 MiB. The result names what it used: ``cpus``,
``threads``, ``threads_asked`` (None: every CPU of the affinity) and ``thread_cpus``.

So on a 2-core machine with 32 KiB of L1d and 512 KiB of L2 per core and 32 MiB of L3 shared
by both: L1d 32 KiB per core, 64 KiB in total; L2 512 KiB, 1 MiB in total; L3 32 MiB, once;
one thread meets 32 KiB, 512 KiB and 32 MiB of them, two 64 KiB, 1 MiB and 32 MiB.

What cannot be read is left out and said in ``reason`` (no sysfs at all, a CPU without a cache
description, an index without a level, type or size); what can be read is still reported.
``shared_cpu_map`` stands in for a missing ``shared_cpu_list``; without either the cache is
taken as private to the CPU it was found under, and ``reason`` says so. A level none of whose
instances holds a study thread's CPU (an affinity on CPUs the tree does not describe) counts
its smallest instance as the study's, and ``reason`` says so.

Pure Python (the planner reads the cache size a hand-off sweep follows without torch);
kernels.measure.caches adds a GPU's L2.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

SYSFS_CPU = "/sys/devices/system/cpu"
ROOT_VARIABLE = "ATTNIO_SYSFS_CPU"  # another root than SYSFS_CPU, read by cpu_caches only

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]?)(?:i?B)?\s*$", re.IGNORECASE)
_SUFFIX = {"data": "d", "instruction": "i", "unified": ""}


def parse_size(text: str) -> int | None:
    """Bytes in a sysfs cache size ("32K", "1024K", "32768K", "1M", "512"), else None."""
    found = _SIZE.match(text or "")
    if not found:
        return None
    return int(found.group(1)) * _UNITS[found.group(2).upper()]


def parse_cpu_list(text: str) -> frozenset[int] | None:
    """The CPUs of a list like "0-3,8,10-11", else None."""
    cpus: set[int] = set()
    for part in (text or "").strip().split(","):
        part = part.strip()
        if not part:
            continue
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            return None
        cpus.update(range(int(first), int(last or first) + 1))
    return frozenset(cpus) or None


def parse_cpu_map(text: str) -> frozenset[int] | None:
    """The CPUs of a hexadecimal mask like "00000000,0000000f", else None."""
    digits = (text or "").strip().replace(",", "")
    try:
        mask = int(digits, 16)
    except ValueError:
        return None
    return frozenset(i for i in range(mask.bit_length()) if mask >> i & 1) or None


def format_cpu_list(cpus: Iterable[int]) -> str:
    """The OS's compact notation of some CPUs: {0, 1, 2, 3, 8} → "0-3,8"."""
    runs: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(first) if first == last else f"{first}-{last}" for first, last in runs)


def affinity() -> list[int] | None:
    """The CPUs this process may run on, sorted; None where the OS does not say."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _cpu_number(path: Path) -> int | None:
    found = re.fullmatch(r"cpu(\d+)", path.name)
    return int(found.group(1)) if found else None


def _problems(problems: dict[str, list[int]]) -> str | None:
    """One line per distinct problem, naming the CPUs it was found on."""
    if not problems:
        return None
    parts = []
    for problem, cpus in sorted(problems.items()):
        where = f"cpu{cpus[0]}" if len(cpus) == 1 else f"{len(cpus)} CPUs (cpu{cpus[0]}…cpu{cpus[-1]})"
        parts.append(f"{problem} on {where}")
    return "; ".join(parts)


def _study_used(instances: dict[frozenset[int], int], thread_cpus: list[int]) -> list[dict]:
    """The instances the threads on ``thread_cpus`` touch, in the order the threads first
    meet them (so those ``threads[:k]`` meet are the first ones), each with its own size."""
    holding = {cpu: shared for shared in instances for cpu in shared}
    used: dict[frozenset[int], dict] = {}
    for thread, cpu in enumerate(thread_cpus):
        shared = holding.get(cpu)
        if shared is not None and shared not in used:
            used[shared] = {
                "cpus": format_cpu_list(shared),
                "bytes": instances[shared],
                "first_thread": thread,
            }
    return list(used.values())


def _threads(study: list[int] | None, threads: int | None) -> dict:
    """What the study runs on: its CPUs, its thread count (capped at them) and their CPUs."""
    if study is None:
        return {"cpus": None, "threads": None, "threads_asked": threads, "thread_cpus": None}
    count = len(study) if threads is None else min(threads, len(study))
    return {
        "cpus": format_cpu_list(study),
        "threads": count,
        "threads_asked": threads,
        "thread_cpus": format_cpu_list(study[:count]),
    }


def cpu_caches(
    root: str | Path | None = None, cpus: Iterable[int] | None = None, threads: int | None = None
) -> dict:
    """Every cache level the OS describes under ``root`` (default: ``ATTNIO_SYSFS_CPU``, else
    SYSFS_CPU), and what of each the study meets: its CPUs ``cpus`` (default: this process's
    affinity, else every CPU described), its threads on the first ``threads`` of them (capped
    at their number; default: all). Returns ``levels`` (data and unified, by level),
    ``instruction`` (listed, not used as data levels), ``source``, ``reason`` (None when
    everything could be read), ``cpus``, ``threads``, ``threads_asked`` and ``thread_cpus``.
    Each level: ``level`` ("L1d", "L2", ...), ``number``, ``type``, ``bytes`` (one instance),
    ``instances``, ``total_bytes``, ``cpus_per_instance``, ``line_bytes``, ``study_bytes``,
    ``study_instances``, ``study_used``."""
    if threads is not None and threads < 1:
        raise ValueError(f"threads={threads}: at least 1")
    root = Path(root if root is not None else os.environ.get(ROOT_VARIABLE) or SYSFS_CPU)
    study = sorted(set(cpus)) if cpus is not None else affinity()
    if study is not None and not study:
        raise ValueError("cpus: no CPU given")
    found = {"source": str(root), "levels": [], "instruction": [], "reason": None}
    found |= _threads(study, threads)
    try:
        folders = sorted((n, p) for p in root.iterdir() if p.is_dir() and (n := _cpu_number(p)) is not None)
    except OSError as error:
        found["reason"] = f"no cache description: {root} cannot be read ({error.strerror or error})"
        return found
    if not folders:
        found["reason"] = f"no cache description: no cpuN folder under {root}"
        return found
    problems: dict[str, list[int]] = {}

    def problem(text: str, cpu: int) -> None:
        problems.setdefault(text, []).append(cpu)

    # (number, type) -> {shared cpus -> (size, line size)}
    caches: dict[tuple[int, str], dict[frozenset[int], tuple[int, int | None]]] = {}
    online = []
    for cpu, path in folders:
        if _read(path / "online") == "0":
            continue  # an offline CPU describes no caches
        online.append(cpu)
        indices = sorted(path.glob("cache/index*"))
        if not indices:
            problem("no cache/index* folder", cpu)
            continue
        for index in indices:
            level, kind, size = (_read(index / f) for f in ("level", "type", "size"))
            missing = [f for f, v in (("level", level), ("type", kind), ("size", size)) if v is None]
            if missing:
                problem(f"{index.name} without {', '.join(missing)}", cpu)
                continue
            number, nbytes = int(level) if level.isdigit() else None, parse_size(size)
            if number is None or nbytes is None or kind.lower() not in _SUFFIX:
                problem(f"{index.name} unreadable (level {level!r}, type {kind!r}, size {size!r})", cpu)
                continue
            shared = parse_cpu_list(_read(index / "shared_cpu_list") or "")
            if shared is None:
                shared = parse_cpu_map(_read(index / "shared_cpu_map") or "")
            if shared is None:
                problem(f"{index.name} without shared_cpu_list (taken as private)", cpu)
                shared = frozenset({cpu})
            line = _read(index / "coherency_line_size")
            line_bytes = int(line) if line and line.isdigit() else None
            caches.setdefault((number, kind.capitalize()), {})[shared] = (nbytes, line_bytes)
    if study is None:  # the OS does not say which CPUs the process may use: every CPU described
        study = online or [cpu for cpu, _ in folders]
        found |= _threads(study, threads)
    thread_cpus = study[: found["threads"]]
    stand_ins = []
    for (number, kind), instances in sorted(caches.items()):
        sizes = {shared: size for shared, (size, _) in instances.items()}
        lines = {line for _, line in instances.values() if line is not None}
        used = _study_used(sizes, thread_cpus)
        name = f"L{number}{_SUFFIX[kind.lower()]}"
        if not used:  # the threads' CPUs are not in the tree: one instance, the least
            smallest = min(sizes, key=lambda shared: (sizes[shared], min(shared)))
            used = [{"cpus": format_cpu_list(smallest), "bytes": sizes[smallest], "first_thread": 0}]
            stand_ins.append(name)
        entry = {
            "level": name,
            "number": number,
            "type": kind,
            "bytes": min(sizes.values()),
            "instances": len(instances),
            "total_bytes": sum(sizes.values()),
            "cpus_per_instance": max(len(shared) for shared in instances),
            "line_bytes": min(lines) if lines else None,
            "study_bytes": sum(u["bytes"] for u in used),
            "study_instances": len(used),
            "study_used": used,
        }
        found["instruction" if kind == "Instruction" else "levels"].append(entry)
    reasons = [_problems(problems)]
    if stand_ins:
        reasons.append(
            f"no {', '.join(stand_ins)} instance holds the study's thread CPUs {found['thread_cpus']} "
            "(the smallest instance counted as the study's)"
        )
    found["reason"] = "; ".join(r for r in reasons if r) or None
    if not found["levels"] and found["reason"] is None:
        found["reason"] = f"no data or unified cache described under {root}"
    return found
