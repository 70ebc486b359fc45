"""Where does the difficulty go when S shrinks to one row?

The decode model: for each inference case of a sweep (a point with query_tokens or kv_heads),
the same problem with query_tokens stepping from T down to 1, and for each, what the
materialized design moves in S and P against K and V, the arithmetic intensity of the fused
design against each GPU's ridge point, and how many programs a launch makes against the GPU's
SMs: one per query block (the fused design) or the keys split across programs (the split
design). Pure Python, from the cost model and the registrations' own models; no torch.

Bandwidth a launch can reach. An SM with no program pulls no bytes, so a launch of P programs
on S SMs is taken to reach at most min(1, P / S) of the HBM bandwidth: an optimistic bound (one
program per SM rarely saturates its share), stated so the GPU study can test it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from kernels import catalog
from kernels.io.computed_tables import write_table
from kernels.models import cost
from kernels.planning.gpus import GPUS, Gpu
from kernels.planning.point import Point
from kernels.planning.sweep import points

SP_TENSORS = ("S", "P")
ATTENTION_TENSORS = ("Q", "K", "V", "O")  # what every design moves; the rest are a design's own


def query_steps(tokens: int) -> list[int]:
    """query_tokens from T down to 1, halving (T itself first, then the powers of two below it)."""
    steps = [tokens]
    q = 1 << (tokens.bit_length() - 1)
    if q == tokens:
        q //= 2
    while q >= 1:
        steps.append(q)
        q //= 2
    return steps


def cases(sweep: dict | list[dict]) -> list[Point]:
    """One point per inference case of the sweep (impl and blocks aside): the shapes whose
    query_tokens or kv_heads differ from T or H, forward."""
    found = {}
    for p in points(sweep):
        if p.square or p.backward:
            continue
        key = (p.batch, p.heads, p.kv, p.tokens, p.head_dim, p.dtype, p.mask)
        found.setdefault(key, p)
    return [found[k] for k in sorted(found)]


def design(point: Point, stores: str, split_keys: bool = False) -> Point:
    """The point on our Triton path of one design (default blocks, the path's own split count)."""
    name = catalog.triton_path(stores, split_keys)
    return replace(
        point, impl=name, block_m=None, block_n=None, sp_dtype=None, inputs="normal", num_splits=None
    )


def byte_split(point: Point) -> dict[str, int]:
    """The materialized design's compulsory bytes by what they hold: S and P, K and V, Q and O."""
    moved = cost.compulsory_transfers(design(point, "SP"))
    total = {"sp": 0, "kv": 0, "qo": 0}
    for (_, tensor, _), nbytes in moved.items():
        total["sp" if tensor in SP_TENSORS else "kv" if tensor in ("K", "V") else "qo"] += nbytes
    return total


def programs(point: Point, gpu: Gpu) -> int | None:
    """The programs the point's path launches to stream K and V (its registration's model)."""
    hook = catalog.get(point.impl).hook("programs_model")
    return None if hook is None else int(hook(point, gpu.sms))


def launch_time(nbytes: float, work: int, gpu: Gpu, peak: float, launched: int | None) -> tuple[float, float]:
    """(seconds, HBM share reached): bytes at the bandwidth the launch's programs reach, or its
    products at the peak, whichever is longer."""
    share = 1.0 if launched is None else min(1.0, launched / gpu.sms)
    return max(nbytes / (gpu.hbm_bytes_per_s * share), work / peak), share


@dataclass(frozen=True)
class Designs:
    """One case's bytes and FLOPs, the same on every GPU: computed once per case."""

    fused: Point
    split: Point
    work: int  # the products' FLOPs
    compulsory: int  # the fused design's compulsory bytes
    fused_issued: int
    split_issued: int
    partials: int  # the split design's bytes beyond Q, K, V and O


def designs(point: Point) -> Designs:
    fused, split = design(point, "none"), design(point, "none", split_keys=True)
    compulsory = sum(cost.compulsory_transfers(fused).values())
    split_moves = cost.transfers(split)
    return Designs(
        fused,
        split,
        cost.flops(fused),
        compulsory,
        sum(t.as_issued or 0 for t in cost.transfers(fused)) or compulsory,
        sum(t.as_issued or 0 for t in split_moves) or compulsory,
        sum(t.as_issued or 0 for t in split_moves if t.tensor not in ATTENTION_TENSORS),
    )


def gpu_columns(d: Designs, gpu: Gpu) -> dict:
    """One GPU's view of one case: ridge, bound, floor, and the two designs' launches."""
    peak = gpu.tensor_flops[d.fused.dtype]
    ridge = peak / gpu.hbm_bytes_per_s
    fused_programs, split_programs = programs(d.fused, gpu), programs(d.split, gpu)
    fused_s, fused_share = launch_time(d.fused_issued, d.work, gpu, peak, fused_programs)
    split_s, split_share = launch_time(d.split_issued, d.work, gpu, peak, split_programs)
    return {
        "gpu": gpu.name,
        "ridge_flop_per_byte": ridge,
        "bound": "compute" if d.work / d.compulsory >= ridge else "memory",
        "floor_s": max(d.compulsory / gpu.hbm_bytes_per_s, d.work / peak),
        "fused_programs": fused_programs,
        "fused_hbm_share": fused_share,
        "fused_s": fused_s,
        "split_programs": split_programs,
        "split_hbm_share": split_share,
        "split_bytes": d.split_issued,
        "split_partial_bytes": d.partials,
        "split_s": split_s,
    }


def rows(sweep: dict | list[dict]) -> list[dict]:
    """Every inference case at every query_tokens step, for every GPU."""
    out = []
    for case in cases(sweep):
        for queries in query_steps(case.tokens):
            point = replace(case, query_tokens=queries)  # T itself: the square problem's name
            held = byte_split(point)
            both = designs(point)
            base = {
                "batch": point.batch,
                "heads": point.heads,
                "kv_heads": point.kv,
                "group_size": point.group_size,
                "query_tokens": point.queries,
                "tokens": point.tokens,
                "head_dim": point.head_dim,
                "dtype": point.dtype,
                "causal": point.causal,
                "mask": point.mask,
                "rows_per_kv_head": point.queries * point.group_size,
                "sp_bytes": held["sp"],
                "kv_bytes": held["kv"],
                "qo_bytes": held["qo"],
                "sp_share": held["sp"] / sum(held.values()),
                "flops": both.work,
                "fused_compulsory_bytes": both.compulsory,
                "intensity_flop_per_byte": both.work / both.compulsory,
            }
            out += [base | gpu_columns(both, gpu) for gpu in GPUS.values()]
    return out


def write(sweep: dict | list[dict], path: str | os.PathLike) -> None:
    """The table, with its header where the sweep has no inference case."""
    write_table(path, "decode.csv", rows(sweep))
