"""How long should each stage of a PyTorch path take on this machine?

The expected time of each stage of torch_naive on the machine whose ceilings hold the
operations' rates (the ceilings' ``ops``, kernels.measure.op_rates), beside the roofline's
floor (kernels.models.hierarchy). Pure Python; no torch. Every parameter is a ceiling: no
constant is fitted to a stage or an implementation.

A stage's expected time is the fixed cost of one call of its kind (``fixed_us``) plus the time
its data takes:
- scores and pv: their FLOPs at the product rate measured for the dtype, head dimension and
  shape (Q·Kᵀ, P·V), interpolated in log T between the lengths it was timed at (the nearest
  one outside them). Those products were timed square (T query rows against T keys), so
  their rates hold a square product's bytes; a product with fewer rows than keys (a K/V
  head's group·query_tokens rows, decode's one query per head: a matrix-vector product) moves
  nearly as many bytes for far fewer FLOPs, so its time is the longer of its FLOPs at that
  rate and its bytes at the rate the same product was measured at with one row per head
  (the ceilings' ``rows``, bytes per second). Its K or V are not a hand-off: the chain read
  them a whole pass before, and the stage timer empties the caches between every other
  pass, so warm or cold they come from DRAM: the share of them half the largest cache would
  hold at the rate into a cache with room (``flushed``), the rest at the streaming rate past
  it. For one row that is the product's own measured rate; for a few, a floor (a product
  with more rows does more per byte read). Cold, a square product also pays what the same
  product paid per byte of its T×T tensor when the ceilings timed it with the caches emptied
  before each call (``flushed``), beyond its warm time, for the share of that tensor the
  cache would have held warm: P·V reads P from DRAM then (Q·Kᵀ writes S, which costs the same
  cold or warm on the machines we ran), a cost that at a small head dimension, few FLOPs per
  byte, is a large part of the stage;
- scale, mask, softmax (and softmax's cast into a 2-byte P): the share of their bytes (or
  elements) a cache serves at the operation's rate measured inside the largest cache, the
  rest at its rate past it (DRAM). The two parts add: each byte is served by one place.

Within one place the rates are the operations' own, so they already hold whatever overlap
of memory and arithmetic the operation reaches there: the softmax's exponentials and its
bytes, for instance. That is why the model composes no levels by a maximum (the roofline's
floor) or by the ECM model's sums of transfers: on the machines we ran, an operation's rate
at a place, measured, predicted its stage better than either composition of copy,
exponential and product rates (docs/predictions.md gives the figures).

Which share the cache holds: all of the stage's hand-off while its footprint (the T×T tensors
it touches) fits in half the largest cache, none past the whole cache, and linearly in
between (the same edges as the roofline's band, kernels.models.predict.served, read as one
expected value). Warm, that share runs at the operation's rate inside the cache, or where a
matrix product wrote the stage's input just before (scale after scores), at its rate on data
a product has just written (``handed``, slower than a tensor the pass keeps in cache itself
on the machines we ran); cold (the caches emptied first), at its rate from DRAM into a cache
with room (``flushed``). The stages and these rates run into tensors allocated once (the
float16 softmax too: kernels.paths.torch_naive.forward.softmax_wide), so no rate holds page faults.
The cast into P follows the softmax whose output it reads, so it runs from the cache either
way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernels.models import cost
from kernels.models.predict import RESIDENT_SHARE
from kernels.models.stage_type import StageCost
from kernels.models.stages import stage_names
from kernels.planning.point import Point

KIND = {
    "scores": "product",
    "pv": "product",
    "scale": "elementwise",
    "mask": "masked_fill",
    "softmax": "softmax",
}
PRODUCT_SHAPE = {"scores": "qk", "pv": "pv"}
US = 1e-6


@dataclass(frozen=True)
class Ops:
    """The ceilings' operation rates, read: products by (dtype, head_dim, shape) as
    (tokens, FLOP/s) pairs by length, one-row products by (dtype, head_dim, shape, place) in
    bytes per second, passes by (dtype, op, place) and fixed costs in seconds."""

    products: dict[tuple[str, int, str], list[tuple[int, float]]]
    # seconds a product pays per byte of its T×T tensor beyond its warm time when the caches
    # were emptied before it (the flushed place), by (dtype, head_dim, shape)
    cold_extra: dict[tuple[str, int, str], float]
    rows: dict[tuple[str, int, str, str], float]
    passes: dict[tuple[str, str, str], float]
    fixed_s: dict[str, float]
    cache_bytes: int | None


def read(ceilings: dict | None) -> Ops | None:
    """The ops of a ceilings file, or None where it has none (an older file, a device this
    machine lacks)."""
    ops = (ceilings or {}).get("ops")
    if not ops:
        return None
    products: dict[tuple[str, int, str], list[tuple[int, float]]] = {}
    timed = [p for p in ops.get("products") or [] if p.get("flops_per_s")]
    for p in timed:
        if p.get("place") != "flushed":
            products.setdefault((p["dtype"], p["head_dim"], p["shape"]), []).append(
                (p["tokens"], p["flops_per_s"])
            )
    passes = {
        (p["dtype"], p["op"], p["place"]): p["per_s"] for p in ops.get("passes") or [] if p.get("per_s")
    }
    rows = {
        (p["dtype"], p["head_dim"], p["shape"], p["place"]): p["per_s"]
        for p in ops.get("rows") or []
        if p.get("per_s")
    }
    return Ops(
        products={key: sorted(found) for key, found in products.items()},
        cold_extra=cold_extras(timed),
        rows=rows,
        passes=passes,
        fixed_s={kind: us * US for kind, us in (ops.get("fixed_us") or {}).items()},
        cache_bytes=ops.get("cache_bytes"),
    )


def cold_extras(products: list[dict]) -> dict[tuple[str, int, str], float]:
    """From each flushed product and the warm one at its length: the seconds the flushed call
    took beyond the warm one, per byte of its T×T tensor (none below zero)."""
    key = lambda p: (p["dtype"], p["head_dim"], p["shape"], p["tokens"])  # noqa: E731
    warm = {key(p): p for p in products if p.get("place") == "inside"}
    found = {}
    for p in products:
        inside = warm.get(key(p))
        if p.get("place") != "flushed" or inside is None:
            continue
        flops = 2 * p["tokens"] ** 2 * p["head_dim"]
        extra = flops / p["flops_per_s"] - flops / inside["flops_per_s"]
        found[(p["dtype"], p["head_dim"], p["shape"])] = max(0.0, extra) / p["matrix_bytes"]
    return found


def fastest_products(ops: Ops) -> dict[str, float]:
    """The fastest product rate measured per dtype: the roofline's product ceiling for it."""
    found: dict[str, float] = {}
    for (dtype, _, _), rates in ops.products.items():
        found[dtype] = max(found.get(dtype, 0.0), *(rate for _, rate in rates))
    return found


def along(found: list[tuple[int, float]], tokens: int) -> float:
    """A rate at ``tokens`` from (tokens, rate) pairs: linear in log T between two, the nearest
    outside them."""
    if tokens <= found[0][0]:
        return found[0][1]
    if tokens >= found[-1][0]:
        return found[-1][1]
    for (t0, r0), (t1, r1) in zip(found, found[1:], strict=False):
        if t0 <= tokens <= t1:
            w = math.log(tokens / t0) / math.log(t1 / t0)
            return r0 + w * (r1 - r0)
    return found[-1][1]


def product_rate(ops: Ops, dtype: str, head_dim: int, shape: str, tokens: int) -> float | None:
    """FLOP/s of one product of the stages at this dtype, head dimension (the nearest timed
    one where this one was not) and length; None where the dtype's products were not timed."""
    dims = [d for (t, d, s) in ops.products if t == dtype and s == shape]
    if not dims:
        return None
    nearest = min(dims, key=lambda d: (abs(math.log(d / head_dim)), d))
    return along(ops.products[(dtype, nearest, shape)], tokens)


def cache_share(footprint: float, cache_bytes: int | None) -> float:
    """The share of a stage's hand-off the largest cache holds (module docstring)."""
    if not cache_bytes:
        return 0.0
    half = RESIDENT_SHARE * cache_bytes
    if footprint <= half:
        return 1.0
    if footprint >= cache_bytes:
        return 0.0
    return (cache_bytes - footprint) / (cache_bytes - half)


def pass_seconds(ops: Ops, dtype: str, op: str, amount: float, share: float, *, held_at: str) -> float | None:
    """``amount`` at the operation's rates: ``share`` of it where the cache holds it (at the
    rate of place ``held_at``: inside, handed or flushed), the rest past the cache."""
    past = ops.passes.get((dtype, op, "past"))
    held = ops.passes.get((dtype, op, held_at)) or ops.passes.get((dtype, op, "inside")) or past
    if held is None or (share < 1 and past is None):
        return None  # a rate the ceilings did not time (past the cache: no stage of theirs got there)
    return share * amount / held + (1 - share) * amount / (past or held)


def held_place(stage: str, point: Point, *, cold: bool) -> str:
    """Where a pass finds the share of its input the cache holds: flushed (cold), handed (warm,
    right after a product wrote it) or inside."""
    if cold:
        return "flushed"
    chain = stage_names(point)
    before = chain[chain.index(stage) - 1] if stage in chain and chain.index(stage) > 0 else None
    return "handed" if before in PRODUCT_SHAPE else "inside"


def stage_expected(stage: StageCost, point: Point, ops: Ops, *, cold: bool = False) -> dict | None:
    """The expected seconds of one torch_naive stage (``time_s``), its fixed cost and data
    parts; None where the ceilings lack a rate it needs."""
    fixed = ops.fixed_s.get(KIND.get(stage.stage, ""))
    if fixed is None:
        return None
    if stage.stage in PRODUCT_SHAPE:
        data = product_data_seconds(stage, point, ops)
        if data is not None and cold:
            data += cold_product_seconds(stage, point, ops)
    else:
        data = pass_data_seconds(stage, point, ops, cache_share(stage.footprint_bytes, ops.cache_bytes), cold)
    if data is None:
        return None
    return {"time_s": fixed + data, "fixed_s": fixed, "data_s": data}


def product_data_seconds(stage: StageCost, point: Point, ops: Ops) -> float | None:
    """The data time of scores or pv: its FLOPs at the square product's rate, and, with fewer
    rows per K/V head than keys (decode), at least its bytes at the one-row product's rates
    (module docstring); None where the ceilings lack a rate it needs."""
    shape = PRODUCT_SHAPE[stage.stage]
    rate = product_rate(ops, point.dtype, point.head_dim, shape, point.tokens)
    if rate is None:
        return None
    computed = stage.flops / rate
    if point.group_size * point.queries >= point.tokens:
        return computed  # as many rows as the square products timed, or more
    streamed = row_seconds(ops, point, shape, stage.bytes)
    return None if streamed is None else max(computed, streamed)


def cold_product_seconds(stage: StageCost, point: Point, ops: Ops) -> float:
    """What a product pays cold beyond its warm time: the flushed product's extra per byte of
    its T×T tensor (the nearest head dimension timed), for the share of that tensor the
    cache would have held warm (past the cache, the warm rate already reads it from DRAM);
    0 where the ceilings timed no flushed product (an older file)."""
    shape = PRODUCT_SHAPE[stage.stage]
    dims = [d for (t, d, s) in ops.cold_extra if t == point.dtype and s == shape]
    if not dims:
        return 0.0
    nearest = min(dims, key=lambda d: (abs(math.log(d / point.head_dim)), d))
    share = cache_share(stage.footprint_bytes, ops.cache_bytes)
    return ops.cold_extra[(point.dtype, nearest, shape)] * stage.handoff_bytes * share


def row_seconds(ops: Ops, point: Point, shape: str, amount: float) -> float | None:
    """``amount`` bytes of a one-row product, from DRAM (module docstring): the share the
    largest cache would hold at its rate into a cache with room (``flushed``), the rest at its
    streaming rate past it. None where the ceilings timed no one-row product of this dtype
    (an older ceilings file)."""
    dims = sorted({d for (t, d, s, _) in ops.rows if t == point.dtype and s == shape})
    if not dims:
        return None
    d = min(dims, key=lambda d: (abs(math.log(d / point.head_dim)), d))
    past = ops.rows.get((point.dtype, d, shape, "past"))
    flushed = ops.rows.get((point.dtype, d, shape, "flushed")) or past
    share = cache_share(amount, ops.cache_bytes)
    if flushed is None or (past is None and share < 1):
        return None
    return share * amount / flushed + (1 - share) * amount / (past or flushed)


def pass_data_seconds(stage: StageCost, point: Point, ops: Ops, share: float, cold: bool) -> float | None:
    """The data time of scale, mask or softmax (with its cast for a 2-byte dtype)."""
    n = point.groups * point.queries * point.tokens  # elements of S
    held_at = held_place(stage.stage, point, cold=cold)
    if stage.stage == "softmax":
        found = pass_seconds(ops, point.dtype, "softmax", n, share, held_at=held_at)
        if found is None or point.e == 4:
            return found
        cast = pass_seconds(ops, point.dtype, "cast", n * (4 + point.e), share, held_at="inside")
        return None if cast is None else found + cast + ops.fixed_s.get("elementwise", 0.0)
    return pass_seconds(ops, point.dtype, stage.stage, stage.bytes, share, held_at=held_at)


def product_seconds(point: Point, flops: float, ceilings: dict) -> float:
    """The seconds of a call's products at this machine's rates for the point's dtype: half the
    FLOPs in Q·Kᵀ's shape and half in P·V's, each at its measured rate, where the ceilings
    timed that dtype; otherwise all at the one square product's rate (``matmul_tflops``)."""
    ops = read(ceilings)
    square = ceilings["matmul_tflops"] * 1e12
    if ops is None:
        return flops / square
    rates = [product_rate(ops, point.dtype, point.head_dim, shape, point.tokens) for shape in ("qk", "pv")]
    return sum(flops / 2 / (rate or square) for rate in rates)


# A backward point runs its forward and then a backward of at least twice its products (the
# materialized backward's four T×T·d products against the forward's two): three times the
# forward's lower bound is a lower bound on the pair.
BACKWARD_CALL_FACTOR = 3


def call_seconds(point: Point, ceilings: dict) -> float:
    """A lower bound on one call's time at this machine's rates (a roofline): the model's
    bytes at the copy rate, or its products at the rates for its dtype (product_seconds),
    whichever takes longer. The time gate (limits.call_seconds) and the budget both use it."""
    model = cost.summarize(point.forward())
    moved = model["traffic_model_bytes"] or model["traffic_compulsory_bytes"]
    seconds = max(moved / (ceilings["copy_gbps"] * 1e9), product_seconds(point, model["flops"], ceilings))
    return seconds * (BACKWARD_CALL_FACTOR if point.backward else 1)
