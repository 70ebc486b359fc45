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

from kernels.spec import IMPLEMENTATIONS, TRITON_IMPLEMENTATIONS

if TYPE_CHECKING:
    import torch

__all__ = ["IMPLEMENTATIONS", "TRITON_IMPLEMENTATIONS", "attention"]


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    impl: str,
    causal: bool,
    block_m: int | None = None,
    block_n: int | None = None,
    **options,
) -> torch.Tensor:
    """Attention by implementation ``impl`` (see ``kernels.impl.registry.attention``)."""
    from kernels.impl.registry import attention as run

    return run(q, k, v, impl=impl, causal=causal, block_m=block_m, block_n=block_n, **options)
