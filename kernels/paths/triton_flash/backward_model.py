"""The as-issued traffic and executed FLOPs of triton_flash's fused backward
(kernels.paths.triton_flash.backward). Pure Python: no torch, no triton.

Keys as the interpreter's counter makes them (kernel without "_kernel", tensor argument,
load or store). LSE and Delta are float32 (4 bytes a row); everything else is in the
input dtype. A causal run visits the tile pairs (query block m, key block n) whose first key
is at most the query block's last row; a full one visits all. Both main kernels visit the
same pairs, from the two sides:

- ``delta``: O and dO loaded once, Delta stored once (T rows);
- ``dkdv``: per key block, K and V loaded once and dK, dV stored once; per visited pair,
  the query block's Q, dO, LSE and Delta loaded (its valid rows);
- ``dq``: per query block, Q, dO, LSE and Delta loaded once and dQ stored once; per
  visited pair, the key block's K and V loaded (its valid rows).

Grouped heads (kv_heads < heads): ``dkdv`` runs per K/V head and streams every query head of
its group, so its K and V loads and dK, dV stores count B·kv_heads (T × d) matrices; all the
rest counts per query head (B·heads), ``dq``'s K and V included (each query head's programs
load the shared head). The group's sum is taken in the kernel's registers: nothing else moves.
"""

from __future__ import annotations

from kernels.models.backward_stage_cost import FUSED_DOES, issued_kernel_stages, shared_work
from kernels.models.cost import cdiv
from kernels.models.stage_type import StageCost

ROW_BYTES = 4  # LSE and Delta: float32
DKDV_PRODUCTS = 4  # S, dV, dP, dK
DQ_PRODUCTS = 3  # S, dP, dQ


def _valid(first: int, block: int, T: int) -> int:
    return min(block, T - first)


def key_blocks_visited(point, m: int) -> int:
    """How many key blocks query block ``m`` visits (the first ones): all of them full, those
    whose first key is at most the block's last row causal. Counted per row of blocks, so
    that a long T costs T / BLOCK_M steps rather than one per tile pair."""
    T, bm, bn = point.tokens, point.block_m, point.block_n
    blocks = cdiv(T, bn)
    if not point.causal:
        return blocks
    last_row = min(T, (m + 1) * bm) - 1
    return min(blocks, last_row // bn + 1)


def _pair_counts(point) -> tuple[int, int, int]:
    """(visited pairs, query rows streamed by dkdv, key rows streamed by dq)."""
    T, bm, bn = point.tokens, point.block_m, point.block_n
    pairs = streamed_rows = streamed_keys = 0
    for m in range(cdiv(T, bm)):
        visited = key_blocks_visited(point, m)
        pairs += visited
        streamed_rows += visited * _valid(m * bm, bm, T)
        streamed_keys += min(visited * bn, T)  # the valid keys of the first `visited` blocks
    return pairs, streamed_rows, streamed_keys


def as_issued_flash_backward(point) -> dict[tuple[str, str, str], int]:
    """Bytes each (kernel, tensor, op) moves as the kernels are written, for ``point`` (a
    ``kernels.planning.point.Point``, or anything with its fields tokens, head_dim, block_m,
    block_n, causal, groups, kv_groups and e)."""
    T, d, e, G, Gkv = point.tokens, point.head_dim, point.e, point.groups, point.kv_groups
    row_tensor = T * d * e  # one (T, d) tensor of one (b, h), once
    _, streamed_rows, streamed_keys = _pair_counts(point)  # rows of query (dkdv) and key (dq) blocks
    return {
        ("delta", "O", "load"): G * row_tensor,
        ("delta", "DO", "load"): G * row_tensor,
        ("delta", "Delta", "store"): G * T * ROW_BYTES,
        ("dkdv", "K", "load"): Gkv * row_tensor,
        ("dkdv", "V", "load"): Gkv * row_tensor,
        ("dkdv", "Q", "load"): G * streamed_rows * d * e,
        ("dkdv", "DO", "load"): G * streamed_rows * d * e,
        ("dkdv", "LSE", "load"): G * streamed_rows * ROW_BYTES,
        ("dkdv", "Delta", "load"): G * streamed_rows * ROW_BYTES,
        ("dkdv", "DK", "store"): Gkv * row_tensor,
        ("dkdv", "DV", "store"): Gkv * row_tensor,
        ("dq", "Q", "load"): G * row_tensor,
        ("dq", "DO", "load"): G * row_tensor,
        ("dq", "LSE", "load"): G * T * ROW_BYTES,
        ("dq", "Delta", "load"): G * T * ROW_BYTES,
        ("dq", "K", "load"): G * streamed_keys * d * e,
        ("dq", "V", "load"): G * streamed_keys * d * e,
        ("dq", "DQ", "store"): G * row_tensor,
    }


def flops_flash_backward(point) -> int:
    """FLOPs of the tile products as executed: 2·BLOCK_M·BLOCK_N·d for each of the 7 products
    of every visited tile pair, padded and masked tiles counted whole. With T a multiple of
    both blocks: 14·B·H·T²·d full, 7·B·H·d·T·(T + max(BLOCK_M, BLOCK_N)) causal."""
    pairs = _pair_counts(point)[0]
    per_product = 2 * point.block_m * point.block_n * point.head_dim
    return point.groups * pairs * (DKDV_PRODUCTS + DQ_PRODUCTS) * per_product


# each kernel's T×T·d products per visited tile and exponentials per tile element
PRODUCTS = {"delta": (0, 0), "dkdv": (4, 1), "dq": (3, 1)}  # S recomputed too


def backward_stage_costs(point) -> list[StageCost]:
    return issued_kernel_stages(point, shared_work(point, PRODUCTS), FUSED_DOES)
