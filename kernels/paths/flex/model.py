"""FlexAttention as a model: what its fused loop moves and computes over the tiles its
BlockMask lists, and the BlockMask's own bytes. Pure Python: no torch, no triton.

The BlockMask cuts the (query_tokens × T) scores into BLOCK × BLOCK tiles (create_block_mask's
default block) and lists, per query block, the key tiles it must visit: partial ones (the
element mask applied) and full ones. Its kernel walks each query block over those tiles only,
as our fused kernel walks its tile map (kernels.masks.tiles), so for each query head it
reads Q and writes O once, and reads K and V once per visited tile (cut at T), and every
score of a visited tile is computed: FLOPs 4·d per score of the visited tiles, not of the
scores the mask keeps. With grouped heads each query head reads its K/V head's tiles itself.

Not our kernel: PyTorch generates it (C++ on a CPU, Triton on a GPU), so its bytes are this
model's, never counted in the interpreter (the record's counted traffic stays empty), and a
GPU's DRAM bytes come from Nsight Compute like every path's.
"""

from __future__ import annotations

from kernels.models import cost
from kernels.planning.point import Point

BLOCK = 128  # create_block_mask's BLOCK_SIZE default: the tile it visits or skips whole
INDEX_BYTES = 4  # its counts and indices are int32


def _blocks(point: Point) -> tuple[int, int]:
    """Query blocks and key blocks of the BlockMask."""
    return cost.cdiv(point.queries, BLOCK), cost.cdiv(point.tokens, BLOCK)


def _walk(point: Point) -> cost.BlockWalk:
    return cost.block_walk(point.tokens, BLOCK, BLOCK, point.mask, point.queries)


def visited_tiles(point: Point) -> int:
    """Key tiles its query blocks visit, per head (partial and full)."""
    return sum(v.visited for v in cost.block_visits(point.tokens, BLOCK, BLOCK, point.mask, point.queries))


def block_mask_bytes(point: Point) -> int:
    """create_block_mask's tensors, one set for every batch and head (they broadcast): by query
    block, the counts of its partial and full key tiles and their index tables (the forward's),
    and the same by key block (what a backward walks): 2·(Tq/128 + T/128) counts and four
    (Tq/128 × T/128) tables, 4 bytes each."""
    nq, nk = _blocks(point)
    return INDEX_BYTES * (2 * nq + 2 * nk + 4 * nq * nk)


def working_bytes(point: Point) -> int:
    """Beyond Q, K, V and O at its peak: the BlockMask (nothing T×T)."""
    return block_mask_bytes(point)


def as_issued(point: Point) -> dict[tuple[str, str, str], int]:
    """Its forward's bytes by tensor: Q read and O written once per query head, K and V once
    per visited tile, and per query block its two tile counts and one index per visited tile."""
    d, e = point.head_dim, point.e
    rows = point.groups * point.queries * d * e
    keys = point.groups * _walk(point).span * d * e
    nq, _ = _blocks(point)
    indices = point.groups * INDEX_BYTES * (2 * nq + visited_tiles(point))
    return {
        ("attention_fwd", "Q", "load"): rows,
        ("attention_fwd", "K", "load"): keys,
        ("attention_fwd", "V", "load"): keys,
        ("attention_fwd", "O", "store"): rows,
        ("attention_fwd", "block_mask", "load"): indices,
    }


def flops(point: Point) -> int:
    """4·d FLOPs for every score of the tiles it visits (Q·Kᵀ and P·V over them), per query head."""
    return 4 * point.head_dim * point.groups * _walk(point).rows_by_span
