"""The cost model of one sweep point: storage, traffic and FLOPs. Pure Python: no torch, no triton.

Traffic is listed transfer by transfer (kernel, tensor, load or store) in two forms:
``compulsory`` — every tensor of the algorithm read or written exactly once — and
``as_issued`` — what our Triton kernels, as written, load and store: K and V re-read once per
query block, tiles a causal kernel skips left out, partial edge tiles counted by their valid
elements. The interpreter's byte counter (``kernels.measure.traffic``) must agree with ``as_issued``
to the byte; that agreement is what makes the model a description of the kernels we run.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernels.spec import REFERENCE_CHUNK_BYTES, TRITON_IMPLEMENTATIONS
from kernels.study.point import Point


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


def matrix_bytes(point: Point) -> int:
    """Bytes of one of S or P: B·H·T²·e for the materialized paths, 0 for the fused ones."""
    return point.groups * point.tokens**2 * point.e_sp if point.materialized else 0


def flops(point: Point) -> int:
    """4·B·H·T²·d (two matrix products), halved when causal: the FlashAttention convention."""
    total = 4 * point.groups * point.tokens**2 * point.head_dim
    return total // 2 if point.causal else total


def _rows(point: Point, m: int) -> int:
    return min(point.block_m, point.tokens - m * point.block_m)


def _key_span(point: Point, m: int) -> int:
    """Key columns one query block streams: all T, or up to its diagonal tile when causal."""
    T, bm, bn = point.tokens, point.block_m, point.block_n
    hi = min(T, (m + 1) * bm) if point.causal else T
    return min(cdiv(hi, bn) * bn, T)


def _scores_tiles(point: Point, m: int) -> int:
    """Score tiles of query block m that load Q and K (a tile wholly in the future does not)."""
    n_tiles = cdiv(point.tokens, point.block_n)
    if not point.causal:
        return n_tiles
    return min(n_tiles, (m * point.block_m + point.block_m - 1) // point.block_n + 1)


def _as_issued_naive(point: Point) -> dict[tuple[str, str, str], int]:
    T, d, e, e_sp, G = point.tokens, point.head_dim, point.e, point.e_sp, point.groups
    q = k = p = v = o = 0
    for m in range(cdiv(T, point.block_m)):
        rows, tiles = _rows(point, m), _scores_tiles(point, m)
        q += rows * d * e * tiles
        k += min(tiles * point.block_n, T) * d * e
        span = _key_span(point, m)
        p += rows * span * e_sp
        v += span * d * e
        o += rows * d * e
    passes = 1 if min(next_power_of_2(T), point.max_row_block) >= T else 2
    sp = T * T * e_sp
    return {
        ("scores", "Q", "load"): G * q,
        ("scores", "K", "load"): G * k,
        ("scores", "S", "store"): G * sp,
        ("softmax", "S", "load"): G * sp * passes,
        ("softmax", "P", "store"): G * sp,
        ("pv", "P", "load"): G * p,
        ("pv", "V", "load"): G * v,
        ("pv", "O", "store"): G * o,
    }


def _as_issued_fused(point: Point) -> dict[tuple[str, str, str], int]:
    T, d, e, G = point.tokens, point.head_dim, point.e, point.groups
    q = kv = o = 0
    for m in range(cdiv(T, point.block_m)):
        rows = _rows(point, m)
        q += rows * d * e
        kv += _key_span(point, m) * d * e
        o += rows * d * e
    return {
        ("attention_fwd", "Q", "load"): G * q,
        ("attention_fwd", "K", "load"): G * kv,
        ("attention_fwd", "V", "load"): G * kv,
        ("attention_fwd", "O", "store"): G * o,
    }


def transfers(point: Point) -> list[Transfer]:
    G, T, d, e = point.groups, point.tokens, point.head_dim, point.e
    qkvo = G * T * d * e
    sp = matrix_bytes(point)
    if point.materialized:
        compulsory = {
            ("scores", "Q", "load"): qkvo,
            ("scores", "K", "load"): qkvo,
            ("scores", "S", "store"): sp,
            ("softmax", "S", "load"): sp,
            ("softmax", "P", "store"): sp,
            ("pv", "P", "load"): sp,
            ("pv", "V", "load"): qkvo,
            ("pv", "O", "store"): qkvo,
        }
    else:
        compulsory = {
            ("attention_fwd", "Q", "load"): qkvo,
            ("attention_fwd", "K", "load"): qkvo,
            ("attention_fwd", "V", "load"): qkvo,
            ("attention_fwd", "O", "store"): qkvo,
        }
    issued: dict[tuple[str, str, str], int] = {}
    if point.impl == "triton_naive":
        issued = _as_issued_naive(point)
    elif point.impl in TRITON_IMPLEMENTATIONS:
        issued = _as_issued_fused(point)
    return [
        Transfer(kernel, tensor, op, nbytes, issued.get((kernel, tensor, op)))
        for (kernel, tensor, op), nbytes in compulsory.items()
    ]


def predicted_bytes(point: Point) -> int:
    """Memory one measured call needs at its peak: inputs, output, S and P where they are
    stored, and the float64 error check (inputs, output, one chunk of scores)."""
    G, T, d, e = point.groups, point.tokens, point.head_dim, point.e
    qkvo = 4 * G * T * d * e
    check = 4 * G * T * d * 8 + REFERENCE_CHUNK_BYTES
    work = 2 * matrix_bytes(point)
    if point.impl == "torch_naive" and e != 4:
        work += G * T * T * 4  # softmax's float32 result before the cast back
    if point.impl == "reference":
        work += 4 * G * T * d * 8
    return qkvo + work + check


def summarize(point: Point) -> dict:
    """The model's fields of a record."""
    moves = transfers(point)
    compulsory = sum(t.compulsory for t in moves)
    modelled = point.impl in TRITON_IMPLEMENTATIONS
    issued = sum(t.as_issued for t in moves) if modelled else None
    work = flops(point)
    return {
        "bytes_S": matrix_bytes(point),
        "bytes_P": matrix_bytes(point),
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
