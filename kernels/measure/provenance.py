"""What ran where: versions, processor and its cache levels, GPU and driver (and its L2), git
commit and the config's hash.

The CPU's levels name the CPUs and instances they were read for (kernels.planning.cpu_caches:
``cpus``, ``threads``, ``thread_cpus``, each level's ``study_used``): the env job is told the
timed jobs' thread count (the local cores); on a cluster it is not (``threads`` None) and
records what every CPU of its affinity meets, saying so with ``threads_asked`` null. Each
record's ``last_cache_bytes`` is for its own job's threads."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
from pathlib import Path

from kernels.io.atomic import write_text_atomic
from kernels.measure import caches


def _run(command: list[str], cwd: str | None = None) -> str | None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def config_hash(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def git_state(root: str | os.PathLike) -> dict:
    commit = _run(["git", "rev-parse", "HEAD"], cwd=str(root))
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=str(root))
    return {"commit": commit, "dirty": bool(dirty) if dirty is not None else None}


def gpu_info() -> dict:
    import torch

    if not torch.cuda.is_available():
        return {"cuda_available": False, "gpu_name": None, "driver": None, "cuda": None}
    driver = None
    if shutil.which("nvidia-smi"):
        driver = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    props = torch.cuda.get_device_properties(0)
    return {
        "cuda_available": True,
        "gpu_name": props.name,
        "driver": driver,
        "cuda": torch.version.cuda,
        "gpu_memory_bytes": props.total_memory,
        "sm_count": props.multi_processor_count,
        "capability": f"{props.major}.{props.minor}",
        "l2_bytes": getattr(props, "L2_cache_size", None),
    }


def device_name(device: str) -> str:
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


# the warm worker measuring this process's points (kernels.warm.worker), if any
_worker: dict = {"pid": None, "points_before": 0}


def set_worker(pid: int | None, points_before: int) -> None:
    """Called by the warm worker around each job: the records it writes say so."""
    _worker.update(pid=pid, points_before=points_before)


def measured_by() -> dict:
    """Which process measured a point: its id, whether it was a warm worker that had served
    other jobs (else the command's own process) and how many points it measured before."""
    warm = _worker["pid"] == os.getpid()
    return {"pid": os.getpid(), "warm": warm, "points_before": _worker["points_before"] if warm else 0}


def versions() -> dict:
    import numpy
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton_version,
        "numpy": numpy.__version__,
    }


def collect(config: dict, device: str, root: str | os.PathLike = ".", threads: int | None = None) -> dict:
    """Everything env.json holds; the CPU's cache levels as met by ``threads`` threads where the
    caller knows them (None: every CPU of the affinity)."""
    return {
        "device": device,
        "device_name": device_name(device),
        "cpu": device_name("cpu"),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "versions": versions(),
        "ncu": _run(["ncu", "--version"]) if shutil.which("ncu") else None,
        **gpu_info(),
        "git": git_state(root),
        "config_hash": config_hash(config),
        "config": config,
        "interpreter": device == "cpu",
        "caches": {"cpu": caches.cpu_caches(threads=threads), "cuda": caches.gpu_caches()},
    }


def write(
    config: dict,
    device: str,
    path: str | os.PathLike,
    root: str | os.PathLike = ".",
    threads: int | None = None,
) -> None:
    write_text_atomic(Path(path), json.dumps(collect(config, device, root, threads), indent=1) + "\n")
