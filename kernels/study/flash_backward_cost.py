"""The as-issued traffic and executed FLOPs of triton_flash's fused backward
(kernels.impl.triton.flash_backward). Pure Python: no torch, no triton.

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
"""

from __future__ import annotations

from collections.abc import Iterator

from kernels.study.cost import cdiv

ROW_BYTES = 4  # LSE and Delta: float32
DKDV_PRODUCTS = 4  # S, dV, dP, dK
DQ_PRODUCTS = 3  # S, dP, dQ


def visited_pairs(point) -> Iterator[tuple[int, int]]:
    """(query block, key block) of every tile pair the main kernels compute."""
    T, bm, bn = point.tokens, point.block_m, point.block_n
    for m in range(cdiv(T, bm)):
        last_row = min(T, (m + 1) * bm) - 1
        for n in range(cdiv(T, bn)):
            if not point.causal or n * bn <= last_row:
                yield m, n


def _valid(first: int, block: int, T: int) -> int:
    return min(block, T - first)


def as_issued_flash_backward(point) -> dict[tuple[str, str, str], int]:
    """Bytes each (kernel, tensor, op) moves as the kernels are written, for ``point`` (a
    ``kernels.study.point.Point``, or anything with its fields tokens, head_dim, block_m,
    block_n, causal, groups and e)."""
    T, d, e, G = point.tokens, point.head_dim, point.e, point.groups
    bm, bn = point.block_m, point.block_n
    row_tensor = T * d * e  # one (T, d) tensor of one (b, h), once
    streamed_rows = streamed_keys = 0  # rows of query (dkdv) and key (dq) blocks loaded
    for m, n in visited_pairs(point):
        streamed_rows += _valid(m * bm, bm, T)
        streamed_keys += _valid(n * bn, bn, T)
    return {
        ("delta", "O", "load"): G * row_tensor,
        ("delta", "DO", "load"): G * row_tensor,
        ("delta", "Delta", "store"): G * T * ROW_BYTES,
        ("dkdv", "K", "load"): G * row_tensor,
        ("dkdv", "V", "load"): G * row_tensor,
        ("dkdv", "Q", "load"): G * streamed_rows * d * e,
        ("dkdv", "DO", "load"): G * streamed_rows * d * e,
        ("dkdv", "LSE", "load"): G * streamed_rows * ROW_BYTES,
        ("dkdv", "Delta", "load"): G * streamed_rows * ROW_BYTES,
        ("dkdv", "DK", "store"): G * row_tensor,
        ("dkdv", "DV", "store"): G * row_tensor,
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
    pairs = sum(1 for _ in visited_pairs(point))
    per_product = 2 * point.block_m * point.block_n * point.head_dim
    return point.groups * pairs * (DKDV_PRODUCTS + DQ_PRODUCTS) * per_product
