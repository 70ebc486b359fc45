"""How many bytes does one point store and move, and how many FLOPs does it compute?

The cost model of one sweep point: storage, traffic and FLOPs. Pure Python: no torch, no triton.

Traffic is listed transfer by transfer (kernel, tensor, load or store) in two forms:
``compulsory`` — every tensor of the algorithm read or written exactly once — and
``as_issued`` — what our Triton kernels, as written, load and store: K and V re-read once per
query block, tiles the mask's map skips left out, partial edge tiles counted by their valid
elements. The interpreter's byte counter (``kernels.measure.traffic``) must agree with ``as_issued``
to the byte; that agreement is what makes the model a description of the kernels we run.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kernels import catalog, masks
from kernels.masks import tiles
from kernels.planning.point import Point
from kernels.spec import REFERENCE_CHUNK_BYTES


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    return 1 << (n - 1).bit_length()


@dataclass(frozen=True)
class Transfer:
    kernel: str  # scores | softmax | pv | attention_fwd (the stage that moves the bytes)
    tensor: str  # Q | K | V | S | P | O
    op: str  # load | store
    compulsory: int
    as_issued: int | None  # None: not our kernel (library code), not modelled


def score_bytes(point: Point) -> int:
    """Bytes of every score once, B·H·query_tokens·T·e: what one pass over a stored S (or P)
    moves."""
    return point.groups * point.queries * point.tokens * point.e_sp


def matrix_bytes(point: Point) -> int:
    """Bytes of S held at once: B·H·query_tokens·T·e for a path that stores it, B·H·rows·T·e
    for one that stores a chunk of query rows at a time, 0 for the fused ones."""
    rows = min(point.stored_rows, point.queries)
    return point.groups * rows * point.tokens * point.e_sp if point.stores != "none" else 0


def p_bytes(point: Point) -> int:
    """Bytes of P held at once: as S's where P is stored, else 0."""
    return matrix_bytes(point) if point.materialized else 0


def flops(point: Point) -> int:
    """4·B·H·query_tokens·T·d (two matrix products); causal, the visible share of the
    query_tokens × T rectangle taken as Tq·(T − Tq/2), which for Tq = T halves the total (the
    FlashAttention convention) and for decode (Tq = 1) keeps nearly all of it; under any other
    mask, 4·d per score it keeps (kernels.masks.tiles.kept_scores). A path whose kernels
    execute other than that (every score of the tiles a block-sparse library kernel visits)
    registers its own count (``flops_model``)."""
    executed = catalog.get(point.impl).hook("flops_model")
    if executed is not None:
        return executed(point)
    Tq, T = point.queries, point.tokens
    if point.causal:
        return 2 * point.groups * point.head_dim * Tq * (2 * T - Tq)
    if point.mask == "full":
        return 4 * point.groups * Tq * T * point.head_dim
    return 4 * point.groups * point.head_dim * kept_scores(point.mask, T, Tq)


@lru_cache(maxsize=4096)
def kept_scores(mask: str, tokens: int, queries: int) -> int:
    """Scores a mask keeps of one head's query_tokens × T (per spelling and shape, once)."""
    return tiles.kept_scores(masks.parse(mask), tokens, queries)


@lru_cache(maxsize=64)
def block_visits(
    tokens: int, block_m: int, block_n: int, mask: str, queries: int
) -> tuple[tiles.BlockVisit, ...]:
    """The mask's tile map (kernels.masks.tiles.block_map) for one shape, once: what every
    as-issued model walks, as the kernels iterate it."""
    return tuple(tiles.block_map(masks.parse(mask), tokens, block_m, block_n, queries))


def visits_of(point) -> tuple[tiles.BlockVisit, ...]:
    """Each query block's visit (its rows, its run of key tiles), the point's mask."""
    return block_visits(point.tokens, point.block_m, point.block_n, point.mask, point.queries)


def visited_keys(visit: tiles.BlockVisit, block_n: int, tokens: int) -> int:
    """Key rows a block's visited tiles hold, cut at T: what it loads of K (or V)."""
    return min(visit.stop * block_n, tokens) - visit.first * block_n


def _rows(point: Point, m: int) -> int:
    return min(point.block_m, point.queries - m * point.block_m)


def _key_span(point: Point, m: int) -> int:
    """Key columns one query block streams: those of the tiles the mask's map visits."""
    return visited_keys(visits_of(point)[m], point.block_n, point.tokens)


def _scores_tiles(point: Point, m: int) -> int:
    """Score tiles of query block m that load Q and K (one the mask hides whole does not)."""
    return visits_of(point)[m].visited


@dataclass(frozen=True)
class BlockWalk:
    """What the query blocks of one (T, block_m, block_n, mask) stream, summed over the
    blocks: the as-issued models are these sums times d, e and B·H."""

    rows_by_tiles: int  # Σ rows · score tiles that load Q and K
    rows_by_span: int  # Σ rows · key span: the scores a block reads back
    span: int  # Σ key span: the K (or V) rows a block's visited tiles hold


@lru_cache(maxsize=4096)
def block_walk(tokens: int, block_m: int, block_n: int, mask: str, queries: int | None = None) -> BlockWalk:
    """Every query block walked once per shape (cached: a predictions table asks for the same
    shape at each d, dtype, batch and head count; T = 131,072 is 8,192 blocks). ``mask``: its
    spelling; ``queries``: the query rows (default T), the sequence's last positions."""
    rows_by_tiles = rows_by_span = span = 0
    for visit in block_visits(tokens, block_m, block_n, mask, queries or tokens):
        rows, keys = visit.rows[1] - visit.rows[0], visited_keys(visit, block_n, tokens)
        rows_by_tiles += rows * visit.visited
        rows_by_span += rows * keys
        span += keys
    return BlockWalk(rows_by_tiles, rows_by_span, span)


def walk_of(point: Point) -> BlockWalk:
    return block_walk(point.tokens, point.block_m, point.block_n, point.mask, point.queries)


def runs_bytes(point: Point) -> int:
    """Each query row's run of keys as a kernel reads it under a mask beyond causal: two int32
    per row (kernels.impl.triton.common.key_runs), once per query head's programs; 0 where the
    kernel masks by index (causal, full)."""
    return point.groups * point.queries * RUN_BYTES if masks.beyond_causal(point.mask_kind) else 0


RUN_BYTES = 8  # a row's run of keys, lo and hi as int32


def compulsory_transfers(point: Point) -> dict[tuple[str, str, str], int]:
    """Each tensor of the algorithm moved once per pass its stores require: S and P written
    and read once; S only written once and read twice (statistics, then P·V); neither. Q and O
    are B·H·query_tokens rows; K and V are B·kv_heads·T rows, read once per K/V head however
    many query heads share it."""
    d, e = point.head_dim, point.e
    qo = point.groups * point.queries * d * e
    kv = point.kv_groups * point.tokens * d * e
    sp = score_bytes(point)
    if point.stores == "SP":
        return {
            ("scores", "Q", "load"): qo,
            ("scores", "K", "load"): kv,
            ("scores", "S", "store"): sp,
            ("softmax", "S", "load"): sp,
            ("softmax", "P", "store"): sp,
            ("pv", "P", "load"): sp,
            ("pv", "V", "load"): kv,
            ("pv", "O", "store"): qo,
        }
    if point.stores == "S":
        return {
            ("scores", "Q", "load"): qo,
            ("scores", "K", "load"): kv,
            ("scores", "S", "store"): sp,
            ("stats", "S", "load"): sp,
            ("pv", "S", "load"): sp,
            ("pv", "V", "load"): kv,
            ("pv", "O", "store"): qo,
        }
    return {
        ("attention_fwd", "Q", "load"): qo,
        ("attention_fwd", "K", "load"): kv,
        ("attention_fwd", "V", "load"): kv,
        ("attention_fwd", "O", "store"): qo,
    }


def as_issued(point: Point) -> dict[tuple[str, str, str], int] | None:
    """The implementation's own model of what it moves, or None where it gives none."""
    model = catalog.get(point.impl).model()
    return None if model is None else {key: int(nbytes) for key, nbytes in model(point).items()}


def transfers(point: Point) -> list[Transfer]:
    """The compulsory transfers beside the as-issued ones, row by row; a transfer only one of
    them has (a kernel's own statistics, say) is a row with 0 on the other side."""
    compulsory = compulsory_transfers(point)
    issued = as_issued(point)
    rows = list(compulsory) + [key for key in (issued or {}) if key not in compulsory]
    return [
        Transfer(*key, compulsory.get(key, 0), None if issued is None else issued.get(key, 0)) for key in rows
    ]


def predicted_bytes(point: Point) -> int:
    """Memory one measured call needs at its peak: inputs, output, S and P where they are
    stored, and the float64 error check (inputs, output, one chunk of scores)."""
    G, T, d, e = point.groups, point.tokens, point.head_dim, point.e
    rows = 2 * G * point.queries + 2 * point.kv_groups * T  # Q and O; K and V
    qkvo = rows * d * e
    check = rows * d * 8 + 2 * G * T * d * 8 + REFERENCE_CHUNK_BYTES  # K and V per query head
    work = matrix_bytes(point) + p_bytes(point)
    working = catalog.get(point.impl).hook("working_model")
    if working is not None:
        work += working(point)
    if point.backward:
        work += backward_extra_bytes(point)
    return qkvo + work + check


def backward_extra_bytes(point: Point) -> int:
    """What a backward point needs beyond its forward's call: dO and the three gradients, a
    T×T dP and dS (kept in the stored dtype, or float32 by PyTorch's autograd), and the
    float64 check of the gradients (autograd through the definition keeps S and P and makes
    dP and dS: four T×T float64 tensors)."""
    G, T, d, e = point.groups, point.tokens, point.head_dim, point.e
    return 4 * G * T * d * e + 2 * G * T * T * max(point.e_sp, 4) + 4 * G * T * T * 8


def summarize(point: Point) -> dict:
    """The model's fields of a record."""
    moves = transfers(point)
    compulsory = sum(t.compulsory for t in moves)
    modelled = moves[0].as_issued is not None
    issued = sum(t.as_issued for t in moves) if modelled else None
    work = flops(point)
    return {
        **catalog.describe(point.impl),
        "bytes_S": matrix_bytes(point),
        "bytes_P": p_bytes(point),
        "traffic_compulsory_bytes": compulsory,
        "traffic_model_bytes": issued,
        "flops": work,
        "intensity_flop_per_byte": work / (issued if issued else compulsory),
        "stages": [
            {
                "kernel": t.kernel,
                "tensor": t.tensor,
                "op": t.op,
                "compulsory_bytes": t.compulsory,
                "model_bytes": t.as_issued,
            }
            for t in moves
        ],
    }
