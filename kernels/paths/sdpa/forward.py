"""PyTorch's fused attention, ``scaled_dot_product_attention``, with a selectable backend."""

from __future__ import annotations

import warnings

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
# what PyTorch says when a forced backend cannot run these inputs
_NO_KERNEL = ("No available kernel", "No viable backend")


class BackendUnavailableError(ValueError):
    """A forced backend that this device, dtype or shape does not have."""


def _why_not(err: RuntimeError, caught: list[warnings.WarningMessage]) -> str:
    """PyTorch's first sentence, and the reasons it warned about (on a GPU it says why each
    backend declined: head dim, dtype, architecture)."""
    reasons = [str(w.message).splitlines()[0] for w in caught if "not used because" in str(w.message)]
    first = str(err).splitlines()[0].split(". ")[0].rstrip(".")
    return "; ".join([first, *reasons])


def sdpa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, backend: str | None = None
) -> torch.Tensor:
    """``backend=None`` lets PyTorch choose; a named backend is forced, and one the device
    lacks raises BackendUnavailableError rather than falling back to another."""
    if backend is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: allowed values are {', '.join(BACKENDS)} or None")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with sdpa_kernel(BACKENDS[backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        except RuntimeError as err:
            if not any(m in str(err) for m in _NO_KERNEL):
                raise
            raise BackendUnavailableError(
                f"PyTorch's {backend} backend (backend={backend!r}) is not available for "
                f"{str(q.dtype).removeprefix('torch.')} on {q.device}: {_why_not(err, caught)}"
            ) from err


def unavailable(backend: str, dtype: torch.dtype, device: str, head_dim: int, causal: bool) -> str | None:
    """Why the forced ``backend`` cannot run inputs of this dtype and head dim here, or
    None when it can: a call on a small input of the same kind tells."""
    q = torch.randn(1, 1, 16, head_dim, device=device).to(dtype)
    try:
        sdpa(q, q, q, causal, backend)
    except BackendUnavailableError as err:
        return str(err)
    return None
