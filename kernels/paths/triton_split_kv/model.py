"""triton_split_kv as a model: how many splits of the keys a call makes, and the bytes its two
kernels move as written. Pure Python: the forward asks ``split_plan`` the same question, so the
split count the model assumes is the one the kernels run with.

The partial kernel reads K and V once per K/V head (its program packs the query rows of the
whole group sharing that head), once per block of packed rows, over the keys the block can
see: its chunks tile [0, T) at multiples of block_n, so a block's rows, summed over its splits,
are its key span rounded up to a tile and cut at T, whatever the split count. It reads Q once
per split, and writes each (query row, split)'s float32 partial O, row maximum and sum (its
log-sum-exp in two parts), which the merge reads back once before it writes O.
"""

from __future__ import annotations

from functools import lru_cache

from kernels import masks
from kernels.masks import tiles
from kernels.models.cost import RUN_BYTES, cdiv
from kernels.planning.gpus import GPUS
from kernels.planning.point import Point
from kernels.spec import MAX_GRID_YZ

PARTIAL = "split_kv_partial"  # the kernels, as the interpreter's counter names them
MERGE = "split_kv_merge"
FLOAT32_BYTES = 4
# The default fills the largest GPU we predict for (H100 and H200 SXM: 132 SMs), and with it
# the smaller ones: FILL programs per SM, so that one that finishes early leaves no SM idle.
TARGET_SMS = max(gpu.sms for gpu in GPUS.values())
FILL = 2


def check_splits(num_splits: object) -> None:
    """None (the default) or a positive integer; anything else is refused naming it."""
    if num_splits is None:
        return
    if isinstance(num_splits, bool) or not isinstance(num_splits, int) or num_splits < 1:
        raise ValueError(
            f"num_splits={num_splits!r}: must be a positive integer (or None: enough splits of the "
            f"keys to give {FILL} programs per SM of a {TARGET_SMS}-SM GPU)"
        )


def split_plan(
    kv_groups: int, rows: int, tokens: int, block_m: int, block_n: int, num_splits: int | None = None
) -> tuple[int, int]:
    """(splits, chunk): the key chunks of one call and their length, a multiple of block_n.

    ``rows``: the packed query rows of one K/V head (group × query_tokens). Without splitting,
    decode has one row block per K/V head, B·kv_heads programs, far too few to fill a GPU; the
    default is the fewest splits that make FILL × TARGET_SMS programs. Either way at most one
    split per key tile (and CUDA's grid limit, the axis that carries them); a chunk is
    ceil(T / splits) rounded up to a tile, and the splits those chunks need are what runs, so
    that no split is empty."""
    check_splits(num_splits)
    if num_splits is None:
        num_splits = cdiv(FILL * TARGET_SMS, kv_groups * cdiv(rows, block_m))
    asked = min(num_splits, cdiv(tokens, block_n), MAX_GRID_YZ)
    chunk = cdiv(cdiv(tokens, asked), block_n) * block_n
    return cdiv(tokens, chunk), chunk


def point_plan(point: Point, num_splits: int | None = None) -> tuple[int, int]:
    """The point's (splits, chunk) (see ``split_plan``), at ``num_splits``, else the point's
    own (its num_splits, None where it leaves the count to the rule)."""
    rows = point.group_size * point.queries
    asked = point.num_splits if num_splits is None else num_splits
    return split_plan(point.kv_groups, rows, point.tokens, point.block_m, point.block_n, asked)


@lru_cache(maxsize=4096)
def key_rows(queries: int, group: int, tokens: int, block_m: int, block_n: int, causal: bool) -> int:
    """K (or V) rows the partial kernel loads for one K/V head, summed over its row blocks and
    splits. A block of packed rows sees keys up to its deepest query's position (query_tokens −
    1 where the block crosses from one head's rows into the next's), rounded up to a tile."""
    rows = group * queries
    blocks = cdiv(rows, block_m)
    if not causal:
        return blocks * tokens
    offset = tokens - queries
    total = 0
    for m in range(blocks):
        first, last = m * block_m, min(rows, (m + 1) * block_m) - 1
        deepest = queries - 1 if first // queries != last // queries else last % queries
        total += min(cdiv(deepest + offset + 1, block_n) * block_n, tokens)
    return total


@lru_cache(maxsize=1024)
def masked_key_rows(
    queries: int, group: int, tokens: int, block_m: int, block_n: int, mask: str, splits: int, chunk: int
) -> int:
    """K (or V) rows the partial kernel loads for one K/V head under a mask beyond causal: in
    each split's chunk, the tiles from the one holding the block's smallest run start to the
    block's largest run end (kernels.masks.tiles.row_bounds), cut at T."""
    runs = tiles.row_bounds(masks.parse(mask), tokens, queries)
    rows = group * queries
    total = 0
    for m in range(cdiv(rows, block_m)):
        block = [runs[r % queries] for r in range(m * block_m, min(rows, (m + 1) * block_m))]
        first = min(lo for lo, _ in block) // block_n * block_n
        end = max(hi for _, hi in block)
        for split in range(splits):
            lo, hi = max(split * chunk, first), min(tokens, split * chunk + chunk, end)
            total += min(tokens, lo + cdiv(hi - lo, block_n) * block_n) - lo if hi > lo else 0
    return total


def kv_rows(point: Point, splits: int, chunk: int) -> int:
    """K (or V) rows the partial kernel loads for one K/V head, under the point's mask."""
    shape = (point.queries, point.group_size, point.tokens, point.block_m, point.block_n)
    if masks.beyond_causal(point.mask_kind):
        return masked_key_rows(*shape, point.mask, splits, chunk)
    return key_rows(*shape, point.causal)


def as_issued(point: Point, num_splits: int | None = None) -> dict[tuple[str, str, str], int]:
    """Bytes by (kernel, tensor, op) as the kernels issue them, at the point's split count
    (its num_splits, else the default) or ``num_splits``; under a mask beyond causal, each
    program reads its rows' runs of keys too."""
    splits, chunk = point_plan(point, num_splits)
    d, e = point.head_dim, point.e
    rows = point.groups * point.queries  # B·H·query_tokens: O's rows
    kv = point.kv_groups * kv_rows(point, splits, chunk)
    partials = rows * splits
    runs = {(PARTIAL, "BOUNDS", "load"): partials * RUN_BYTES} if masks.beyond_causal(point.mask_kind) else {}
    return runs | {
        (PARTIAL, "Q", "load"): splits * rows * d * e,
        (PARTIAL, "K", "load"): kv * d * e,
        (PARTIAL, "V", "load"): kv * d * e,
        (PARTIAL, "O_partial", "store"): partials * d * FLOAT32_BYTES,
        (PARTIAL, "M", "store"): partials * FLOAT32_BYTES,
        (PARTIAL, "L", "store"): partials * FLOAT32_BYTES,
        (MERGE, "O_partial", "load"): partials * d * FLOAT32_BYTES,
        (MERGE, "M", "load"): partials * FLOAT32_BYTES,
        (MERGE, "L", "load"): partials * FLOAT32_BYTES,
        (MERGE, "O", "store"): rows * d * e,
    }


def working(point: Point) -> int:
    """Bytes a call holds beyond Q, K, V and O: the float32 partials, their maxima and sums."""
    splits, _ = point_plan(point)
    return point.groups * point.queries * splits * (point.head_dim + 2) * FLOAT32_BYTES


def programs(point: Point, sms: int | None = None) -> int:
    """Programs the partial kernel launches: row blocks × B·kv_heads × splits, at the point's
    split count (its num_splits, else the default). ``sms`` (a GPU's) does not change it: the
    default is planned for TARGET_SMS on every machine, so that the call and this model agree
    wherever they run."""
    splits, _ = point_plan(point)
    return cdiv(point.group_size * point.queries, point.block_m) * point.kv_groups * splits
