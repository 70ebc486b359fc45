"""Tile-local softmax, wrong on purpose.

The tempting shortcut: compute a score tile, turn it into probabilities with a softmax over
that tile alone, multiply by V at once, move on. Each tile's weights then sum to one on
their own, so a row that spans n key tiles gets weights summing to n, divided by
denominators that each miss the rest of the row. The result equals attention only when a
row fits in one key tile (T ≤ BLOCK_N). It is the fused kernel without carried row
statistics, so that the two differ in exactly that one respect.

Inference shapes come with the fused kernel (``kernels.paths.triton_flash.forward``): q of
Tq query rows, k and v of Hkv heads read by index, causal row i seeing key j ≤ i + (T − Tq).
A row is then right exactly where the keys it sees fit one key tile (non-causal: T ≤
BLOCK_N); a key tile it cannot see adds nothing (its weights are zero, not 1/n).
"""

from __future__ import annotations

import torch

from kernels.impl.triton.common import check_triton_device, key_runs
from kernels.paths.triton_flash.forward import attention_fwd_launch


def planned_launches(q, k, v, *, causal, block_m, block_n, mask=None):
    """One call's launch on an output allocated like the call's (meta tensors: the build)."""
    o, bounds = torch.empty_like(q), key_runs(mask, q, k)
    return [attention_fwd_launch(q, k, v, o, causal, block_m, block_n, carry_stats=False, bounds=bounds)]


def triton_tile_softmax(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    block_m: int,
    block_n: int,
    *,
    out: torch.Tensor | None = None,
    mask=None,
) -> torch.Tensor:
    """``mask`` beyond causal: the fused loop's block-sparse walk, each tile still normalized
    on its own (exact only where no row's run of keys spans two tiles)."""
    check_triton_device(q)
    o = torch.empty_like(q) if out is None else out
    bounds = key_runs(mask, q, k)
    attention_fwd_launch(q, k, v, o, causal and bounds is None, block_m, block_n, False, bounds=bounds).run()
    return o
