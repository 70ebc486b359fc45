"""The CPU's cache levels, read from the OS.

CPU (Linux): the OS's cache description under ``/sys/devices/system/cpu`` (the root is a
parameter, so a test can hand it a tree of its own): for every ``cpuN/cache/indexM`` its
``level``, ``type``, ``size``, ``shared_cpu_list`` and ``coherency_line_size``. Data and
unified caches are the data levels; instruction caches are listed apart and never used as
data levels. A cache shared by several CPUs appears under each of them; it is counted once
per distinct ``shared_cpu_list`` (one *instance*). Each level reports both:

- ``bytes``: the size of one instance (what one core meets; the smallest, should instances
  differ, as on a processor with two kinds of cores),
- ``total_bytes``: the sum over its distinct instances (what a footprint spread over the
  whole machine meets), with ``instances`` and ``cpus_per_instance`` beside them.

So on a 2-core machine with 32 KiB of L1d and 512 KiB of L2 per core and 32 MiB of L3 shared
by both: L1d 32 KiB per core, 64 KiB in total; L2 512 KiB, 1 MiB in total; L3 32 MiB, once.

What cannot be read is left out and said in ``reason`` (no sysfs at all, a CPU without a cache
description, an index without a level, type or size); what can be read is still reported.
``shared_cpu_map`` stands in for a missing ``shared_cpu_list``; without either the cache is
taken as private to the CPU it was found under, and ``reason`` says so.

Pure Python (the planner reads the cache size a hand-off sweep follows without torch);
kernels.measure.caches adds a GPU's L2.
"""

from __future__ import annotations

import re
from pathlib import Path

SYSFS_CPU = "/sys/devices/system/cpu"

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


def cpu_caches(root: str | Path = SYSFS_CPU) -> dict:
    """Every cache level the OS describes under ``root``: ``levels`` (data and unified, by
    level), ``instruction`` (listed, not used as data levels), ``source`` and ``reason`` (None
    when everything could be read). Each level: ``level`` ("L1d", "L2", ...), ``number``,
    ``type``, ``bytes`` (one instance), ``instances``, ``total_bytes``, ``cpus_per_instance``,
    ``line_bytes``."""
    root = Path(root)
    found = {"source": str(root), "levels": [], "instruction": [], "reason": None}
    try:
        cpus = sorted((n, p) for p in root.iterdir() if p.is_dir() and (n := _cpu_number(p)) is not None)
    except OSError as error:
        found["reason"] = f"no cache description: {root} cannot be read ({error.strerror or error})"
        return found
    if not cpus:
        found["reason"] = f"no cache description: no cpuN folder under {root}"
        return found
    problems: dict[str, list[int]] = {}

    def problem(text: str, cpu: int) -> None:
        problems.setdefault(text, []).append(cpu)

    # (number, type) -> {shared cpus -> (size, line size)}
    caches: dict[tuple[int, str], dict[frozenset[int], tuple[int, int | None]]] = {}
    for cpu, path in cpus:
        if _read(path / "online") == "0":
            continue  # an offline CPU describes no caches
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
    for (number, kind), instances in sorted(caches.items()):
        sizes = [size for size, _ in instances.values()]
        lines = {line for _, line in instances.values() if line is not None}
        entry = {
            "level": f"L{number}{_SUFFIX[kind.lower()]}",
            "number": number,
            "type": kind,
            "bytes": min(sizes),
            "instances": len(instances),
            "total_bytes": sum(sizes),
            "cpus_per_instance": max(len(shared) for shared in instances),
            "line_bytes": min(lines) if lines else None,
        }
        found["instruction" if kind == "Instruction" else "levels"].append(entry)
    found["reason"] = _problems(problems)
    if not found["levels"] and found["reason"] is None:
        found["reason"] = f"no data or unified cache described under {root}"
    return found
