"""The machine's cache levels, read from the machine itself: the CPU's from the OS
(kernels.planning.cpu_caches), a GPU's L2 as torch reports it
(``torch.cuda.get_device_properties(i).L2_cache_size``, one level of one instance; torch does
not report the per-SM L1). What a job meets of a CPU level is the instances its threads touch
(``study_bytes``), not the machine's total; a GPU's one L2 instance is all of it.
"""

from __future__ import annotations

from pathlib import Path

from kernels.planning.cpu_caches import cpu_caches, parse_cpu_list, parse_cpu_map, parse_size

__all__ = [
    "caches",
    "cpu_caches",
    "gpu_caches",
    "last_level_bytes",
    "met_bytes",
    "parse_cpu_list",
    "parse_cpu_map",
    "parse_size",
]


def gpu_caches(index: int = 0) -> dict:
    """The L2 of CUDA device ``index`` as torch reports it (one instance), or no levels and
    the reason."""
    import torch

    source = f"torch.cuda.get_device_properties({index}).L2_cache_size"
    found = {"source": source, "levels": [], "instruction": [], "reason": None}
    if not torch.cuda.is_available():
        found["reason"] = "no CUDA device"
        return found
    l2 = getattr(torch.cuda.get_device_properties(index), "L2_cache_size", None)
    if not isinstance(l2, int) or l2 <= 0:
        found["reason"] = f"torch {torch.__version__} reports no L2 size"
        return found
    found["levels"].append(
        {
            "level": "L2",
            "number": 2,
            "type": "Unified",
            "bytes": l2,
            "instances": 1,
            "total_bytes": l2,
            "cpus_per_instance": None,
            "line_bytes": None,
        }
    )
    return found


def caches(device: str, root: str | Path | None = None, threads: int | None = None) -> dict:
    """The cache levels of the device a study runs on: the CPU's from the OS (as met by a job on
    ``threads`` threads; None: every CPU of the affinity), a GPU's from torch."""
    return gpu_caches() if device == "cuda" else cpu_caches(root, threads=threads)


def met_bytes(level: dict) -> int:
    """What a job meets of ``level``: the instances its threads touch (``study_bytes``); a
    GPU's L2, or a level read before that field, its total."""
    return level.get("study_bytes") or level["total_bytes"]


def last_level_bytes(device: str, threads: int | None = None) -> int | None:
    """The size of the device's largest cache level that a job on ``threads`` threads meets,
    None where none is described."""
    levels = caches(device, threads=threads)["levels"]
    return met_bytes(levels[-1]) if levels else None
