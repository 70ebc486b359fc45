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
    "list(torch.cuda.get_device_capability()) if ok else None}))"
)


def nvidia_driver_present() -> bool:
    return any(marker.exists() for marker in NVIDIA_MARKERS)


@cache
def torch_cuda() -> dict:
    """{"cuda": whether torch sees a GPU, "capability": [major, minor] or None}."""
    if not nvidia_driver_present():
        return {"cuda": False, "capability": None}
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
