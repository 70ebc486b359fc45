"""What would a GPU do with a point, before there is one?

What a GPU would do with a point, before there is one: DRAM bytes as a band, and time from
the roofline, per kernel, from the cost model's transfers and a GPU's published figures
(kernels.planning.gpus). Pure Python; no torch.

DRAM bytes. Each transfer's compulsory bytes (first touch) come from DRAM, except the S/P
hand-off: S (or P) is stored by one kernel and loaded by the next, and while it lives between
the two, L2 may hold it. Bytes a kernel issues beyond the compulsory ones are re-reads (K and V
per query block, Q per key tile, S in a second softmax pass), which L2 serves while what they
re-read stays resident. For each such reuse, with the footprint that must stay resident:
- low end (optimistic): L2 serves the share of the footprint that fits, min(1, L2 / footprint);
- high end (pessimistic): L2 serves it only where the footprint fits in half of L2
  (RESIDENT_SHARE), leaving room for everything else in flight; otherwise all comes from DRAM.
Far below L2 both ends serve everything; far above, both serve (almost) nothing: the band
collapses. In between lies the L2 hand-off the seed warns about.

Time. A kernel takes at least max(DRAM bytes / bandwidth, product FLOPs / peak); a point's
time is the sum over its kernels, for each end of the band. These are lower bounds: a real
kernel also pays for launch, latency and imperfect overlap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kernels import catalog
from kernels.models.cost import Transfer, cdiv, flops, matrix_bytes, transfers
from kernels.planning.gpus import Gpu
from kernels.planning.point import Point
from kernels.spec import DEFAULT_BLOCK

RESIDENT_SHARE = 0.5
HANDOFF_TENSORS = ("S", "P")
# Matrix products per kernel, each 2·B·H·T²·d FLOPs (halved when causal). The softmax
# kernel's exponentials and sums (about 5 operations per score against 2e-4e bytes moved)
# are far below every target's ridge point and are left out, as are the fused kernel's,
# which overlap its products.
# A kernel of a plugin's own model, named otherwise, takes an equal share of the two products.
PRODUCTS = {"scores": 1, "softmax": 0, "stats": 0, "pv": 1, "attention_fwd": 2}
# The designs a prediction compares, by what they store (our Triton path of each kind, asked of
# the catalog): materialized, S stored but never P, fused; a plugin with a traffic model swept
# in a study is predicted beside them under its own name.
DESIGNS = {"materialized": "SP", "s_only": "S", "fused": "none"}


def served(footprint: float, capacity: float, *, optimistic: bool) -> float:
    """The share of a reuse a cache of ``capacity`` bytes serves, at one end of the band: the
    GPU's L2 here, every cache level in kernels.models.hierarchy."""
    if footprint <= 0:
        return 1.0
    if optimistic:
        return min(1.0, capacity / footprint)
    return 1.0 if footprint <= RESIDENT_SHARE * capacity else 0.0


def reread_footprint(point: Point, tensor: str, gpu: Gpu) -> int:
    """What must stay resident for the re-reads of a tensor to hit L2: one (b, h) slice of Q,
    K or V for every slice whose query blocks run at once (one block per SM), or, for S and
    P, the rows in flight (one per SM)."""
    T = point.tokens
    if tensor in HANDOFF_TENSORS:
        return gpu.sms * T * point.e_sp
    blocks_per_slice = cdiv(T, point.block_m or T)
    slices_at_once = min(point.groups, max(1, math.ceil(gpu.sms / blocks_per_slice)))
    return slices_at_once * T * point.head_dim * point.e


def dram_bytes(transfer: Transfer, point: Point, gpu: Gpu, *, optimistic: bool) -> float:
    """One transfer's bytes that reach DRAM, at one end of the band."""
    issued = float(transfer.compulsory if transfer.as_issued is None else transfer.as_issued)
    first = min(float(transfer.compulsory), issued)  # fewer: tiles a causal kernel never loads
    if transfer.tensor in HANDOFF_TENSORS:
        first *= 1 - served(matrix_bytes(point), gpu.l2_bytes, optimistic=optimistic)
    extra = max(0.0, issued - transfer.compulsory)
    if extra > 0:
        footprint = reread_footprint(point, transfer.tensor, gpu)
        extra *= 1 - served(footprint, gpu.l2_bytes, optimistic=optimistic)
    return first + extra


def product_flops_per_s(point: Point, gpu: Gpu) -> float:
    """Triton's tl.dot runs float32 on TF32 tensor cores; torch's float32 matmul does not."""
    if point.dtype == "float32" and not point.triton:
        return gpu.fp32_flops
    return gpu.tensor_flops[point.dtype]


@dataclass(frozen=True)
class KernelPrediction:
    kernel: str
    flops: int
    bytes_low: float
    bytes_high: float
    time_low_s: float
    time_high_s: float
    bound_low: str  # memory | compute
    bound_high: str

    @property
    def intensity_low(self) -> float:
        return self.flops / self.bytes_low if self.bytes_low else math.inf

    @property
    def intensity_high(self) -> float:
        return self.flops / self.bytes_high if self.bytes_high else math.inf


def roofline(nbytes: float, work: int, gpu: Gpu, peak: float) -> tuple[float, str]:
    memory, compute = nbytes / gpu.hbm_bytes_per_s, work / peak if work else 0.0
    return max(memory, compute), "memory" if memory >= compute else "compute"


def kernels(point: Point, gpu: Gpu, moves: list[Transfer] | None = None) -> list[KernelPrediction]:
    """Each kernel of the point, in launch order, with its band and time bounds (from
    ``moves``, the point's transfers, when the caller has them already)."""
    moves = transfers(point) if moves is None else moves
    per_product = flops(point) // 2
    peak = product_flops_per_s(point, gpu)
    found = []
    # with a model, the kernels that issue bytes (a compulsory row the path's kernels never
    # name, attention_fwd of a fused path with kernels of its own, is not a kernel of it)
    modelled = any(t.as_issued is not None for t in moves)
    names = list(dict.fromkeys(t.kernel for t in moves if not modelled or t.as_issued))
    unnamed = [k for k in names if k not in PRODUCTS]
    for kernel in names:
        mine = [t for t in moves if t.kernel == kernel]
        low = sum(dram_bytes(t, point, gpu, optimistic=True) for t in mine)
        high = sum(dram_bytes(t, point, gpu, optimistic=False) for t in mine)
        work = per_product * PRODUCTS[kernel] if kernel in PRODUCTS else 2 * per_product // len(unnamed)
        time_low, bound_low = roofline(low, work, gpu, peak)
        time_high, bound_high = roofline(high, work, gpu, peak)
        found.append(KernelPrediction(kernel, work, low, high, time_low, time_high, bound_low, bound_high))
    return found


def predict(
    point: Point, gpu: Gpu, found: list[KernelPrediction] | None = None, moves: list[Transfer] | None = None
) -> dict:
    """One point on one GPU: the band of DRAM bytes, the time bounds and what bounds them
    (from ``found``, the point's kernels on that GPU, and ``moves``, its transfers, when the
    caller has them already)."""
    moves = transfers(point) if moves is None else moves
    found = kernels(point, gpu, moves) if found is None else found
    footprint = matrix_bytes(point)
    return {
        "gpu": gpu.name,
        "target": gpu.target,
        "impl": point.impl,
        "tokens": point.tokens,
        "bytes_S": footprint,
        "l2_bytes": gpu.l2_bytes,
        "handoff_in_l2_low": served(footprint, gpu.l2_bytes, optimistic=True) if footprint else None,
        "handoff_in_l2_high": served(footprint, gpu.l2_bytes, optimistic=False) if footprint else None,
        "dram_low_bytes": sum(k.bytes_low for k in found),
        "dram_high_bytes": sum(k.bytes_high for k in found),
        "issued_bytes": sum(t.compulsory if t.as_issued is None else t.as_issued for t in moves),
        "compulsory_bytes": sum(t.compulsory for t in moves),
        "flops": flops(point),
        "time_low_s": sum(k.time_low_s for k in found),
        "time_high_s": sum(k.time_high_s for k in found),
        "bound": ", ".join(f"{k.kernel}: {k.bound_high}" for k in found),
    }


def path_points(point: Point, plugins: tuple[str, ...] = ()) -> dict[str, Point]:
    """Our three Triton paths (materialized, S only, fused) for the point's shape, dtype,
    masking and blocks, and each of ``plugins`` (implementations with a traffic model)."""
    paths = {design: catalog.triton_path(kind) for design, kind in DESIGNS.items()}
    paths |= {name: name for name in plugins}
    blocks = {"block_m": point.block_m or DEFAULT_BLOCK, "block_n": point.block_n or DEFAULT_BLOCK}
    return {
        path: replace(
            point, impl=impl, **(blocks if catalog.get(impl).triton else {"block_m": None, "block_n": None})
        )
        for path, impl in paths.items()
    }


def predicted_plugins(points: list[Point]) -> tuple[str, ...]:
    """The plugins among the points' implementations that give a traffic model."""
    found = dict.fromkeys(p.impl for p in points)
    return tuple(n for n in found if not catalog.get(n).ours and catalog.get(n).traffic_model is not None)


def compare(point: Point, gpu: Gpu) -> dict:
    """Both paths on one GPU, and the predicted speed-up of fused over materialized at each
    end of the band."""
    both = {path: predict(p, gpu) for path, p in path_points(point).items()}
    mat, fused = both["materialized"], both["fused"]
    return {
        "gpu": gpu.name,
        "paths": both,
        "speedup_low": mat["time_low_s"] / fused["time_low_s"],
        "speedup_high": mat["time_high_s"] / fused["time_high_s"],
    }


def summary_row(point: Point, gpu: Gpu) -> dict:
    """One shape on one GPU, both paths, as one flat row (the predict command's output)."""
    both = compare(point, gpu)
    mat, fused = both["paths"]["materialized"], both["paths"]["fused"]
    row = {
        "gpu": gpu.name,
        "model": gpu.model,
        "target": gpu.target,
        **point.shape(),
        "bytes_S_plus_P": 2 * mat["bytes_S"],
        "l2_bytes": gpu.l2_bytes,
    }
    for path, found in (("materialized", mat), ("fused", fused)):
        for field in ("dram_low_bytes", "dram_high_bytes", "time_low_s", "time_high_s", "bound"):
            row[f"{path}_{field}"] = found[field]
    return row | {"speedup_low": both["speedup_low"], "speedup_high": both["speedup_high"]}


def _band(low: float, high: float, unit: float, digits: int) -> str:
    a, b = f"{low / unit:,.{digits}f}", f"{high / unit:,.{digits}f}"
    return a if a == b else f"{a}–{b}"


def aligned(lines: list[tuple[str, ...]]) -> list[str]:
    """Rows of cells as terminal lines, each column right-aligned to its widest cell."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return ["  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)) for line in lines]


def format_rows(rows: list[dict]) -> str:
    """A small table for the terminal: sizes in MiB, times in µs, every figure a prediction."""
    mib = float(1 << 20)
    header = ("GPU", "T", "S+P MiB", "L2 MiB", "DRAM MiB: mat.", "fused", "µs: mat.", "fused", "fused ×")
    lines = [header]
    for r in rows:
        lines.append(
            (
                r["gpu"],
                f"{r['tokens']:,}",
                f"{r['bytes_S_plus_P'] / mib:,.1f}",
                f"{r['l2_bytes'] / mib:,.0f}",
                _band(r["materialized_dram_low_bytes"], r["materialized_dram_high_bytes"], mib, 1),
                _band(r["fused_dram_low_bytes"], r["fused_dram_high_bytes"], mib, 1),
                _band(r["materialized_time_low_s"], r["materialized_time_high_s"], 1e-6, 1),
                _band(r["fused_time_low_s"], r["fused_time_high_s"], 1e-6, 1),
                _band(r["speedup_low"], r["speedup_high"], 1, 2),
            )
        )
    text = aligned(lines)
    first = rows[0] if rows else {}
    note = (
        f"Predicted, not measured: B={first.get('batch')} H={first.get('heads')} "
        f"d={first.get('head_dim')} {first.get('dtype')} causal={first.get('causal')}; "
        "ranges run from L2 serving every reuse that fits to L2 serving only what fits in half "
        "of it; times are roofline lower bounds (kernels.models.predict)."
    )
    return "\n".join(text + ["", note])
