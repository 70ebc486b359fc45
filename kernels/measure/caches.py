"""The machine's cache levels, read from the machine itself: the CPU's from the OS
(kernels.study.cpu_caches), a GPU's L2 as torch reports it
(``torch.cuda.get_device_properties(i).L2_cache_size``, one level of one instance; torch does
not report the per-SM L1).
"""

from __future__ import annotations

from pathlib import Path

from kernels.study.cpu_caches import SYSFS_CPU, cpu_caches, parse_cpu_list, parse_cpu_map, parse_size

__all__ = [
    "caches",
    "cpu_caches",
    "gpu_caches",
    "last_level_bytes",
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


def caches(device: str, root: str | Path = SYSFS_CPU) -> dict:
    """The cache levels of the device a study runs on: the CPU's from the OS, a GPU's from torch."""
    return gpu_caches() if device == "cuda" else cpu_caches(root)


def last_level_bytes(device: str) -> int | None:
    """The total size of the device's largest cache level, None where none is described."""
    levels = caches(device)["levels"]
    return levels[-1]["total_bytes"] if levels else None
