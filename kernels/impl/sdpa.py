"""PyTorch's fused attention, ``scaled_dot_product_attention``, with a selectable backend."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from kernels.spec import SDPA_BACKENDS

_ENUM_NAMES = {
    "math": "MATH",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
}
BACKENDS = {name: getattr(SDPBackend, _ENUM_NAMES[name]) for name in SDPA_BACKENDS}


def sdpa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, backend: str | None = None
) -> torch.Tensor:
    """``backend=None`` lets PyTorch choose; a named backend is forced, and one the device
    lacks raises ValueError rather than falling back to another."""
    if backend is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: allowed values are {', '.join(BACKENDS)} or None")
    try:
        with sdpa_kernel(BACKENDS[backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    except RuntimeError as err:
        if not any(m in str(err) for m in ("No available kernel", "No viable backend")):
            raise
        raise ValueError(
            f"backend={backend!r} is not available for dtype {str(q.dtype).removeprefix('torch.')} "
            f"on device {q.device}: {str(err).splitlines()[0]}"
        ) from err
