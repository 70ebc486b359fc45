"""Which device a run uses: ``auto`` means CUDA when torch sees a GPU, else the CPU.

The planner must not import torch (seconds to import, and the reports' environment may lack
it), so torch is asked in a child process, and only where an NVIDIA driver is present at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path

from kernels.spec import DEVICES

NVIDIA_MARKERS = (Path("/dev/nvidiactl"), Path("/proc/driver/nvidia"))
_ASK_TORCH = (
    "import json, torch; ok = torch.cuda.is_available(); "
    "print(json.dumps({'cuda': ok, 'capability': "
    "list(torch.cuda.get_device_capability()) if ok else None, 'l2_bytes': "
    "getattr(torch.cuda.get_device_properties(0), 'L2_cache_size', None) if ok else None}))"
)


def nvidia_driver_present() -> bool:
    return any(marker.exists() for marker in NVIDIA_MARKERS)


@cache
def torch_cuda() -> dict:
    """{"cuda": whether torch sees a GPU, "capability": [major, minor] or None, "l2_bytes":
    the GPU's L2 size or None}."""
    if not nvidia_driver_present():
        return {"cuda": False, "capability": None, "l2_bytes": None}
    done = subprocess.run(
        [sys.executable, "-c", _ASK_TORCH], capture_output=True, text=True, timeout=300, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"asking torch for a CUDA GPU failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def resolve(name: str) -> str:
    """``auto`` → cuda or cpu; an explicit name is kept as asked."""
    if name not in DEVICES:
        raise ValueError(f"device={name!r}: allowed values are {', '.join(DEVICES)}")
    if name != "auto":
        return name
    return "cuda" if torch_cuda()["cuda"] else "cpu"


def local_target() -> str | None:
    """The local GPU as a build target (sm_90 on an H100 or H200); None when torch sees no GPU
    (``device: cuda`` asked for on a machine without one: its points are recorded as skipped)."""
    capability = torch_cuda()["capability"]
    return None if capability is None else f"sm_{capability[0]}{capability[1]}"


# A cuda study planned where torch sees no GPU (a rehearsal, a budget, a preflight on the
# development machine; its points are skipped there) follows the L2 of the GPU we are lent.
PLANNING_GPU = "H200"


def largest_cache_bytes(device: str, threads: int | None = None) -> int | None:
    """The cache a hand-off sweep follows: a GPU's L2 as torch reports it (PLANNING_GPU's
    published size where torch sees none), else the CPU's last level as far as a study on
    ``threads`` threads meets it (the instances those threads touch, kernels.planning.cpu_caches;
    None: every CPU of the affinity), not its total over the machine; None where neither is
    known."""
    if device == "cuda":
        from kernels.planning.gpus import GPUS

        return torch_cuda().get("l2_bytes") or GPUS[PLANNING_GPU].l2_bytes
    from kernels.planning.cpu_caches import cpu_caches

    levels = cpu_caches(threads=threads)["levels"]
    return levels[-1]["study_bytes"] if levels else None
