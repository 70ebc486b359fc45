"""What an SDPA call holds beyond its inputs and output, for the memory gate
(kernels.models.cost.predicted_bytes). Pure Python: no torch.

A mask beyond causal reaches SDPA as a dense boolean attn_mask, one byte a score of the
(query_tokens × T) rectangle, shared by every batch and head; SDPA turns a boolean mask into
an additive one in the query's dtype before any backend runs. Both live through the call:
1 + e bytes a score (measured on a CPU by PyTorch's profiler, tests/test_masked_paths.py).
Causal and full pass no tensor (is_causal, or PyTorch's lower-right causal bias)."""

from __future__ import annotations

from kernels import masks
from kernels.planning.point import Point


def working_bytes(point: Point) -> int:
    """The dense mask and its additive form under a mask beyond causal; 0 otherwise."""
    if not masks.beyond_causal(point.mask_kind):
        return 0
    return point.queries * point.tokens * (masks.DENSE_BYTES + point.e)
