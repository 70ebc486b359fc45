"""The as-issued traffic and executed FLOPs of triton_naive's materialized backward
(kernels.paths.triton_naive.backward). Pure Python: no torch, no triton.

Five kernels, keyed as the interpreter's counter keys them:

- ``dp``: as the forward's scores: dO and V loaded for every tile not wholly in the future,
  dP stored whole (future tiles as 0), B·H·T²·e_sp;
- ``ds``: P and dP loaded once per pass over a row (one pass, or two where a row is longer
  than max_row_block), dS stored once;
- ``dv``, ``dk``: per BLOCK_M key rows, the T×T tensor (P, dS) read down its columns over
  the query rows streamed (all T, or from the key block's first row when causal), the T×d
  operand (dO, Q) over the same rows, the gradient stored once;
- ``dq``: as the forward's pv: dS over each query block's key span, K over the span.

Under a mask beyond causal every kernel but ``ds`` walks the mask's tile map: ``dp`` as the
forward's scores (each tile's program reads its rows' runs of keys, 8 bytes a row; a tile none
of them reaches stores zeros, loading nothing), ``dq`` as its pv (the runs read once), ``dv``
and ``dk`` over the query tiles of BLOCK_N rows that see their key block (the map read by key
block, ``kernels.masks.tiles.key_tile_rows``: 8 bytes a program).

Non-causal with one ds pass the T×T traffic is 7·B·H·T²·e_sp: dP stored once and read by
ds, P read by ds and dv, dS stored once and read by dq and dk; the forward's is 4·B·H·T²·e_sp.

Grouped heads (kv_heads < heads): ``dv`` and ``dk`` run per K/V head over its group's query
heads, so only their dV and dK stores count B·kv_heads (T × d) matrices; every load counts per
query head (B·heads), ``dp``'s V and ``dq``'s K included (each query head's programs load the
shared head). The group's sum is taken in the kernels' registers: nothing else moves.
"""

from __future__ import annotations

from functools import lru_cache

from kernels import masks
from kernels.masks import tiles
from kernels.models.backward_stage_cost import MATERIALIZED_DOES, MATERIALIZED_STEPS, issued_kernel_stages
from kernels.models.cost import RUN_BYTES, _key_span, _rows, _scores_tiles, cdiv, next_power_of_2, runs_bytes
from kernels.models.stage_type import StageCost

KERNELS = ("dp", "ds", "dv", "dq", "dk")  # launch order


@lru_cache(maxsize=64)
def _key_block_queries(mask: str, tokens: int, block_m: int, block_n: int) -> tuple[tuple[int, int], ...]:
    """[first, stop) of the query rows each key block of BLOCK_M streams in BLOCK_N-row tiles
    under a mask beyond causal, stop cut at T (as the kernels read KEY_ROWS)."""
    rows = tiles.key_tile_rows(masks.parse(mask), tokens, block_n, block_m)
    return tuple((first, min(stop, tokens)) for first, stop in rows)


def _streamed(point, kb: int) -> int:
    """Query rows key block kb streams: all T, from its first key on when causal, the
    query tiles that see it under a mask beyond causal."""
    if masks.beyond_causal(point.mask_kind):
        first, stop = _key_block_queries(point.mask, point.tokens, point.block_m, point.block_n)[kb]
        return max(0, stop - first)
    return point.tokens - (kb * point.block_m if point.causal else 0)


def _ds_passes(point) -> int:
    return 1 if min(next_power_of_2(point.tokens), point.max_row_block) >= point.tokens else 2


def as_issued_naive_backward(point) -> dict[tuple[str, str, str], int]:
    """Bytes each (kernel, tensor, op) moves as the kernels are written, for ``point`` (a
    ``kernels.planning.point.Point``, or anything with its fields tokens, head_dim, block_m,
    block_n, causal, max_row_block, groups, kv_groups, e and e_sp)."""
    T, d, e, e_sp, G = point.tokens, point.head_dim, point.e, point.e_sp, point.groups
    do_dp = 0  # dp's dO loads; its V loads are dq's K loads, over the same spans
    by_rows = cols = 0  # dq: dS over key spans, K over them
    by_keys = rows_streamed = 0  # dv, dk: P or dS down the columns, dO or Q over the rows
    for m in range(cdiv(T, point.block_m)):
        rows = _rows(point, m)
        do_dp += rows * d * e * _scores_tiles(point, m)
        span = _key_span(point, m)
        by_rows += rows * span * e_sp
        cols += span * d * e
        streamed = _streamed(point, m)
        by_keys += rows * streamed * e_sp
        rows_streamed += streamed * d * e
    tt = T * T * e_sp
    passes = _ds_passes(point)
    grad = T * d * e
    found = {
        ("dp", "DO", "load"): G * do_dp,
        ("dp", "V", "load"): G * cols,
        ("dp", "DP", "store"): G * tt,
        ("ds", "P", "load"): G * tt * passes,
        ("ds", "DP", "load"): G * tt * passes,
        ("ds", "DS", "store"): G * tt,
        ("dv", "P", "load"): G * by_keys,
        ("dv", "DO", "load"): G * rows_streamed,
        ("dv", "DV", "store"): point.kv_groups * grad,
        ("dq", "DS", "load"): G * by_rows,
        ("dq", "K", "load"): G * cols,
        ("dq", "DQ", "store"): G * grad,
        ("dk", "DS", "load"): G * by_keys,
        ("dk", "Q", "load"): G * rows_streamed,
        ("dk", "DK", "store"): point.kv_groups * grad,
    }
    if not masks.beyond_causal(point.mask_kind):
        return found
    key_rows = point.kv_groups * cdiv(T, point.block_m) * RUN_BYTES  # one (first, stop) a program
    return found | {
        ("dp", "BOUNDS", "load"): runs_bytes(point) * cdiv(T, point.block_n),
        ("dq", "BOUNDS", "load"): runs_bytes(point),
        ("dv", "KEY_ROWS", "load"): key_rows,
        ("dk", "KEY_ROWS", "load"): key_rows,
    }


def flops_naive_backward(point) -> int:
    """FLOPs of the tile products as executed: 2·BLOCK_M·BLOCK_N·d for every tile product a
    program runs (edge tiles counted whole, skipped ones not), in dp, dv, dq and dk; ds does
    no tile product. Non-causal with T a multiple of the blocks: 8·B·H·T²·d."""
    T, bm, bn = point.tokens, point.block_m, point.block_n
    tiles = 0
    for m in range(cdiv(T, bm)):
        tiles += _scores_tiles(point, m)  # dp
        tiles += cdiv(_key_span(point, m), bn)  # dq
        tiles += 2 * cdiv(_streamed(point, m), bn)  # dv and dk
    return point.groups * tiles * 2 * bm * bn * point.head_dim


def _tile_products(point) -> dict[str, int]:
    """Tile products each kernel runs (dp as the forward's scores, dq as its pv, dv and dk over
    the query rows each key block streams)."""
    T, bn = point.tokens, point.block_n
    tiles = dict.fromkeys(MATERIALIZED_STEPS, 0)
    for m in range(cdiv(T, point.block_m)):
        tiles["dp"] += _scores_tiles(point, m)
        tiles["dq"] += cdiv(_key_span(point, m), bn)
        tiles["dv"] += cdiv(_streamed(point, m), bn)
        tiles["dk"] += cdiv(_streamed(point, m), bn)
    return tiles


def backward_stage_costs(point) -> list[StageCost]:
    """Its five kernels, the standard backward's steps, costed from their traffic and tiles."""
    per_tile = 2 * point.block_m * point.block_n * point.head_dim * point.groups
    work = {k: (per_tile * n, 0) for k, n in _tile_products(point).items()}
    return issued_kernel_stages(point, work, MATERIALIZED_DOES)
