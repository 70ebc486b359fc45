"""Reading what ptxas produced: ``cuobjdump --dump-resource-usage``, ``--dump-sass`` and the
``ptxas -v`` log. Pure text parsing, so the tests can feed it real tool output.

Instruction classes (SASS opcode → class):
  HMMA (warp-level tensor core, sm_80+), HGMMA (warpgroup tensor core, sm_90),
  LDG / STG (global loads / stores), LDGSTS (global → shared async copy),
  UTMALDG / UTMASTG (tensor-memory-accelerator copies), LDS / STS / LDSM (shared memory),
  LDL / STL (local memory: spills).
The width of a memory instruction is read from its modifiers (.128, .64, .U16, ...).
"""

from __future__ import annotations

import re
from collections import Counter

INSTRUCTION_CLASSES = (
    "HMMA",
    "HGMMA",
    "LDG",
    "STG",
    "LDGSTS",
    "UTMALDG",
    "UTMASTG",
    "LDS",
    "STS",
    "LDSM",
    "LDL",
    "STL",
)
MEMORY_CLASSES = ("LDG", "STG", "LDGSTS", "LDS", "STS", "LDL", "STL")
TENSOR_CORE_CLASSES = ("HMMA", "HGMMA")
_WIDTHS = {"128": 128, "64": 64, "U16": 16, "S16": 16, "U8": 8, "S8": 8}
_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_x]+)*)")
_RESOURCE = re.compile(r"\b(REG|STACK|SHARED|LOCAL):(\d+)")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def resource_usage(text: str) -> dict[str, int]:
    """REG, STACK, SHARED, LOCAL of the (single) function in a cuobjdump resource dump."""
    found = {}
    for line in text.splitlines():
        if line.strip().startswith("REG:"):
            found = {key: int(value) for key, value in _RESOURCE.findall(line)}
    missing = {"REG", "STACK", "SHARED", "LOCAL"} - set(found)
    if missing:
        raise ValueError(f"no {', '.join(sorted(missing))} in cuobjdump's resource usage:\n{text}")
    return found


_REGISTERS = re.compile(r"Used (\d+) registers")
_STATIC_SHARED = re.compile(r"(\d+) bytes smem")


def ptxas_resources(ptxas_log: str) -> dict[str, int]:
    """REG and static SHARED from a ``ptxas -v`` log (what the preflight needs without
    running cuobjdump)."""
    registers = _REGISTERS.search(ptxas_log)
    if not registers:
        raise ValueError(f"no register count in the ptxas log:\n{ptxas_log}")
    shared = _STATIC_SHARED.search(ptxas_log)
    return {"REG": int(registers.group(1)), "SHARED": int(shared.group(1)) if shared else 0}


def spills(ptxas_log: str) -> tuple[int, int] | None:
    """(spill store bytes, spill load bytes) from a ``ptxas -v`` log, None if absent."""
    match = _SPILLS.search(ptxas_log)
    return (int(match.group(1)), int(match.group(2))) if match else None


def opcodes(sass: str) -> list[str]:
    """Every instruction's opcode with its modifiers, in order (e.g. 'LDG.E.128')."""
    return _SASS_LINE.findall(sass)


def width_bits(opcode: str) -> int:
    for modifier in reversed(opcode.split(".")[1:]):
        if modifier in _WIDTHS:
            return _WIDTHS[modifier]
    return 32


def instruction_class(opcode: str) -> str | None:
    base = opcode.split(".")[0]
    return base if base in INSTRUCTION_CLASSES else None


def instruction_mix(sass: str) -> dict:
    """Counts per class, per-width counts for memory classes, and the total."""
    ops = opcodes(sass)
    counts = Counter()
    for op in ops:
        cls = instruction_class(op)
        if cls is None:
            continue
        counts[cls] += 1
        if cls in MEMORY_CLASSES:
            counts[f"{cls}.{width_bits(op)}"] += 1
    return {"total": len(ops), **{key: counts[key] for key in sorted(counts)}}
