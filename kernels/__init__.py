"""attnio kernels: one interface over every attention implementation we measure.

``kernels.attention(q, k, v, impl=..., causal=...)`` runs one implementation on tensors of
shape (B, H, T, d). Importing this package imports neither torch nor triton, so a program can
still choose the Triton mode (``kernels.impl.mode.set_interpret``) after ``import kernels``.

Layers (imports run downwards only; ``make lint`` checks them with import-linter): ``cli``
over ``measure`` and ``build``, over ``impl`` (which imports only ``spec``), over ``study`` (no
torch, no triton), over ``io`` and ``spec``. ``_compat`` holds every private internal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["IMPLEMENTATIONS", "TRITON_IMPLEMENTATIONS", "attention"]


def __getattr__(name: str):
    """IMPLEMENTATIONS and TRITON_IMPLEMENTATIONS: every registered name (kernels.catalog,
    plugins included), read when asked, since plugins register after import."""
    if name not in ("IMPLEMENTATIONS", "TRITON_IMPLEMENTATIONS"):
        raise AttributeError(f"module 'kernels' has no attribute {name!r}")
    import kernels.catalog as catalog

    if name == "IMPLEMENTATIONS":
        return catalog.names()
    return catalog.triton_names()


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    impl: str,
    causal: bool | None = None,
    mask=None,
    block_m: int | None = None,
    block_n: int | None = None,
    **options,
) -> torch.Tensor:
    """Attention by implementation ``impl``, causal or not, or under ``mask`` (a string such as
    ``"window:256"``; see ``kernels.impl.registry.attention``)."""
    from kernels.impl.registry import attention as run

    return run(q, k, v, impl=impl, causal=causal, mask=mask, block_m=block_m, block_n=block_n, **options)
