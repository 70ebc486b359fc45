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

from functools import lru_cache

from kernels import masks
from kernels.masks import tiles
from kernels.models.backward_stage_cost import FUSED_DOES, issued_kernel_stages, shared_work
from kernels.models.cost import RUN_BYTES, cdiv, runs_bytes, visited_keys, visits_of
from kernels.models.stage_type import StageCost

ROW_BYTES = 4  # LSE and Delta: float32
KEY_ROWS_BYTES = 16  # a key block's four query-row bounds, int32 (key_block_rows)
DKDV_PRODUCTS = 4  # S, dV, dP, dK
DQ_PRODUCTS = 3  # S, dP, dQ


@lru_cache(maxsize=64)
def key_block_rows(mask, tokens: int, block_m: int, block_n: int) -> tuple[tuple[int, int, int, int], ...]:
    """Each key block's query rows under ``mask`` (the tile map read by key block): the first
    query block that sees one of its keys, the first and the end of those that see all of them
    (inside T: a last block cut by T is loaded with a mask), and the end. What dkdv reads, 16
    bytes a program (kernels.paths.triton_flash.backward makes it a tensor)."""
    visits = tiles.block_map(mask, tokens, block_m, block_n)
    whole = tokens // block_m * block_m
    found = []
    for n, seen in enumerate(tiles.query_blocks_by_key_tile(visits, cdiv(tokens, block_n))):
        full = [i for i in seen if n not in visits[i].partial]
        first, stop = seen[0] * block_m, (seen[-1] + 1) * block_m
        full_lo, full_hi = (full[0] * block_m, (full[-1] + 1) * block_m) if full else (first, first)
        full_hi = max(first, min(full_hi, whole))
        full_lo = max(first, min(full_lo, full_hi))
        found.append((first, full_lo, full_hi, stop))
    return tuple(found)


def _pair_counts(point) -> tuple[int, int, int]:
    """(visited pairs, query rows streamed by dkdv, key rows streamed by dq): the mask's tile
    map (kernels.models.cost.visits_of), the same pairs from either side."""
    pairs = streamed_rows = streamed_keys = 0
    for visit in visits_of(point):
        pairs += visit.visited
        streamed_rows += visit.visited * (visit.rows[1] - visit.rows[0])
        streamed_keys += visited_keys(visit, point.block_n, point.tokens)
    return pairs, streamed_rows, streamed_keys


def _masked_rows(point) -> int:
    """Query rows dkdv reads the runs of keys for: per key block, those of the query blocks
    it runs with the element mask (before the unmasked ones and after), cut at T."""
    T = point.tokens
    ranges = key_block_rows(point.mask_kind, T, point.block_m, point.block_n)
    return sum(min(lo, T) - first + min(stop, T) - min(hi, T) for first, lo, hi, stop in ranges)


def as_issued_flash_backward(point) -> dict[tuple[str, str, str], int]:
    """Bytes each (kernel, tensor, op) moves as the kernels are written, for ``point`` (a
    ``kernels.planning.point.Point``, or anything with its fields tokens, head_dim, block_m,
    block_n, causal, groups, kv_groups and e)."""
    T, d, e, G, Gkv = point.tokens, point.head_dim, point.e, point.groups, point.kv_groups
    row_tensor = T * d * e  # one (T, d) tensor of one (b, h), once
    _, streamed_rows, streamed_keys = _pair_counts(point)  # rows of query (dkdv) and key (dq) blocks
    found = {
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
    if not masks.beyond_causal(point.mask_kind):
        return found
    return found | {
        ("dkdv", "KEY_ROWS", "load"): Gkv * cdiv(T, point.block_n) * KEY_ROWS_BYTES,
        ("dkdv", "BOUNDS", "load"): G * _masked_rows(point) * RUN_BYTES,
        ("dq", "BOUNDS", "load"): runs_bytes(point),
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
