"""Which device a run uses: ``auto`` means CUDA when torch sees a GPU, else the CPU."""

from __future__ import annotations

from pathlib import Path

DEVICES = ("auto", "cpu", "cuda")
NVIDIA_MARKERS = (Path("/dev/nvidiactl"), Path("/proc/driver/nvidia"))


def nvidia_driver_present() -> bool:
    return any(marker.exists() for marker in NVIDIA_MARKERS)


def resolve(name: str) -> str:
    """``auto`` → cuda or cpu. torch (seconds to import) is consulted only where an NVIDIA
    driver is present at all, so that planning a sweep on a laptop stays fast."""
    if name not in DEVICES:
        raise ValueError(f"device={name!r}: allowed values are {', '.join(DEVICES)}")
    if name != "auto":
        return name
    if not nvidia_driver_present():
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def local_target() -> str | None:
    """The local GPU as a build target (sm_90 on an H100 or H200); None when torch sees no GPU
    (``device: cuda`` asked for on a machine without one: its points are recorded as skipped)."""
    import torch

    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"
