"""How fast can a stage be when the caches serve part of its bytes?

A roofline with a cache hierarchy, per stage of a materialized path: the stage takes at
least as long as the slowest of the levels that serve its bytes, its matrix products and its
exponentials. Pure Python; no torch.

Which level serves what. The hand-off bytes (S and P, kernels.models.stage_cost) are served by
the smallest cache that holds the stage's footprint, with the same band as the GPU
predictions (kernels.models.predict.served): c_i, the share served by level i or a smaller
one, is served(footprint, capacity_i) at the optimistic or the pessimistic end; level i
serves (c_i − c_{i−1}) of the hand-off, DRAM the rest and every other byte (Q, K, V, O and
the mask, read once). Cold: the caches were emptied just before the stage, so every byte
comes from DRAM.

Time. Each level and DRAM moves its bytes at its own bandwidth, the products run at the
machine's product rate and the exponentials at its exponential rate, all at once: the stage
takes the largest of these times (a lower bound, like every roofline) and the largest names
its bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from kernels.models import expected
from kernels.models.predict import product_flops_per_s, served
from kernels.models.stage_type import StageCost
from kernels.planning.gpus import Gpu
from kernels.planning.point import Point

DRAM = "DRAM"
PRODUCTS = "products"
EXPONENTIALS = "exponentials"
GIGA = 1e9
TERA = 1e12

Level = tuple[str, int, float]  # name, capacity in bytes, bytes per second


@dataclass(frozen=True)
class Machine:
    name: str
    levels: tuple[Level, ...]  # the caches, smallest first
    dram_bytes_per_s: float
    product_flops_per_s: Callable[[Point], float]  # by the point's dtype and path
    exp_per_s: float
    source: str
    # bytes/s of a pass updating one tensor in place, by level name (DRAM included), where
    # measured: a stage that updates S in place moves its bytes at these rates, not a copy's
    in_place_rates: dict[str, float] = field(default_factory=dict)
    # the operations' measured rates (kernels.models.expected), where the ceilings hold them:
    # the expected time beside this floor
    ops: expected.Ops | None = None
    # by dtype: why its product rate is an assumption (None where it was measured)
    product_assumption: Callable[[str], str | None] = lambda dtype: None

    @property
    def largest_cache_bytes(self) -> int | None:
        return self.levels[-1][1] if self.levels else None


def from_gpu(gpu: Gpu) -> Machine:
    """A GPU of kernels.planning.gpus: its L2 the one cache level, its HBM the DRAM."""
    return Machine(
        name=gpu.name,
        levels=(("L2", gpu.l2_bytes, gpu.l2_bytes_per_s),),
        dram_bytes_per_s=gpu.hbm_bytes_per_s,
        product_flops_per_s=partial(product_flops_per_s, gpu=gpu),
        exp_per_s=gpu.exp_per_s,
        source=f"published figures for the {gpu.model} (kernels.planning.gpus)",
    )


def _rate(ceilings: dict, field: str, reason_field: str = "reason") -> float:
    """A rate the ceilings must hold, or a ValueError naming the field and the file's reason."""
    value = ceilings.get(field)
    if value is None:
        state = "missing" if field not in ceilings else "null"
        why = ceilings.get(reason_field)
        raise ValueError(f"ceilings: {field} is {state}" + (f" ({why})" if why else ""))
    return float(value)


def _cache_levels(ceilings: dict) -> tuple[Level, ...]:
    """The measured cache levels that have a capacity and a copy rate, smallest first."""
    found = [
        (level["level"], int(level["bytes"]), float(level["copy_gbps"]) * GIGA)
        for level in ceilings.get("levels") or []
        if level.get("level") != DRAM and level.get("bytes") and level.get("copy_gbps")
    ]
    return tuple(sorted(found, key=lambda level: level[1]))


def _dram_rate(ceilings: dict) -> float:
    """The DRAM level's copy rate; the top-level copy_gbps (the same copy) where the file
    lists no levels."""
    dram = next((level for level in ceilings.get("levels") or [] if level.get("level") == DRAM), None)
    if dram is not None and dram.get("copy_gbps") is not None:
        return float(dram["copy_gbps"]) * GIGA
    return _rate(ceilings, "copy_gbps") * GIGA


def _in_place_rates(ceilings: dict) -> dict[str, float]:
    return {
        level["level"]: float(level["update_gbps"]) * GIGA
        for level in ceilings.get("levels") or []
        if level.get("update_gbps")
    }


def from_ceilings(ceilings: dict, name: str = "this machine") -> Machine:
    """The machine the ceilings were measured on (python -m kernels ceilings, as a dict).

    The copy rates count bytes read plus bytes written, as the stage costs do. The matrix
    product rate is, for a dtype whose products the ceilings timed in the stages' shapes
    (``ops``), the fastest of those; for any other, the one square product's rate, which for
    a 2-byte dtype is then an assumption."""
    device = ceilings.get("device_name") or ceilings.get("device") or "an unnamed device"
    square = _rate(ceilings, "matmul_tflops") * TERA
    ops = expected.read(ceilings)
    fastest = expected.fastest_products(ops) if ops else {}
    square_dtype = ceilings.get("matmul_dtype") or "float32"

    def product_assumption(dtype: str) -> str | None:
        if dtype in fastest:
            return None
        held = (
            f"they time the stages' products in {', '.join(fastest)} only"
            if fastest
            else "they hold no operation rates (ops), so no product of the stages' shapes was timed"
        )
        return (
            f"{name}: the ceilings time no {dtype} product of the stages' shapes ({held}): its "
            f"{dtype} products are given the square {square_dtype} product's rate "
            f"({square / TERA:.3g} TFLOP/s), an assumption (the workflow's ceilings job, or "
            f"python -m kernels ceilings --products {dtype}:D:SHORTEST:LONGEST, times them)"
        )

    return Machine(
        name=name,
        levels=_cache_levels(ceilings),
        dram_bytes_per_s=_dram_rate(ceilings),
        product_flops_per_s=lambda point: fastest.get(point.dtype, square),
        exp_per_s=_rate(ceilings, "exp_per_s", "exp_reason"),
        in_place_rates=_in_place_rates(ceilings),
        ops=ops,
        product_assumption=product_assumption,
        source=(
            f"measured by python -m kernels ceilings on {device} ({ceilings.get('threads')} threads, "
            f"{ceilings.get('matmul_dtype') or 'float32'} square products"
            + (f", the stages' products in {', '.join(fastest)}" if fastest else "")
            + f") at {ceilings.get('measured_at')}"
        ),
    )


def level_bytes(stage: StageCost, machine: Machine, *, optimistic: bool, cold: bool) -> dict[str, float]:
    """The bytes each cache level and DRAM serve, by level name, smallest first."""
    found: dict[str, float] = {}
    below = 0.0  # the share served by the levels so far
    for name, capacity, _ in machine.levels:
        share = below if cold else max(below, served(stage.footprint_bytes, capacity, optimistic=optimistic))
        found[name] = (share - below) * stage.handoff_bytes
        below = share
    found[DRAM] = (1 - below) * stage.handoff_bytes + stage.other_bytes
    return found


def stage_time(
    stage: StageCost, machine: Machine, *, point: Point, optimistic: bool, cold: bool = False
) -> dict:
    """One stage of ``point`` on one machine: the bytes and the seconds of each level, of the
    products and of the exponentials; the bound (the name with the most seconds) and the time."""
    moved = level_bytes(stage, machine, optimistic=optimistic, cold=cold)
    rates = {name: rate for name, _, rate in machine.levels} | {DRAM: machine.dram_bytes_per_s}
    if stage.in_place:
        rates |= {name: rate for name, rate in machine.in_place_rates.items() if name in rates}
    seconds = {name: moved[name] / rates[name] for name in moved}
    seconds[PRODUCTS] = stage.flops / machine.product_flops_per_s(point) if stage.flops else 0.0
    seconds[EXPONENTIALS] = stage.exps / machine.exp_per_s if stage.exps else 0.0
    bound = max(seconds, key=seconds.__getitem__)
    return {"bytes": moved, "seconds": seconds, "bound": bound, "time_s": seconds[bound]}
