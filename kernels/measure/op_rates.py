"""The rates of the operations torch_naive's stages run, each measured on its own, for the
expected time of a stage (kernels.models.expected); part of the ceilings (``ops``).

- ``products``: the two matrix products of attention in each dtype and head dimension the
  sweep times, in the stages' shapes and layout (Q·Kᵀ: T×d by a transposed d×T view, into a
  T×T tensor; P·V: T×T by T×d), at up to three lengths: one whose T×T tensor fills a quarter of the
  largest cache the job's threads meet (``inside``) and one whose T×T tensor is four times
  that cache (``past``), each clamped to the lengths the sweep runs (a product is not timed at
  a length no point needs), and the sweep's shortest length (``short``). FLOP/s over the time
  the data takes (the fixed cost of a call taken out, as for the copies). The inside length
  is also timed with the caches emptied before each call (``flushed``): a cold stage's.
- ``rows``: the same two products with one query row per head (decode: 1×d by a transposed
  d×T view, and a 1×T row of P by T×d), ROW_HEADS heads, for each dtype and head dimension
  whose points give a K/V head fewer rows than keys (product_shapes' ``rows``): a product
  that streams K or V for a few FLOPs per byte, so its rate is bytes per second (its
  operands and output), timed with K or V from DRAM: filling half the largest cache with the
  caches emptied before each call (``flushed``) and four times past it (``past``). The chain
  reads K and V once per pass, with the caches emptied in between every other pass, so that
  is where its products find them, warm or cold.
- ``passes``: the stages that stream S and P, per dtype, with their tensors inside the largest
  cache and past it (DRAM; only where a stage of the sweep outgrows half the cache):
  ``scale`` (S ×= c in place: bytes read and written), ``mask`` (S filled with −∞ where a
  boolean T×T tensor says: S read and written, the mask read),
  ``softmax`` (rows of S into float32: elements per second) and, for a 2-byte dtype,
  ``cast`` (the float32 result into P: bytes read and written). Inside the cache each is also
  timed ``flushed`` (the caches emptied before each call) and ``handed`` (right after a
  matrix product wrote its input, as scale meets S: a tensor a product has just written reads
  back slower than one the pass itself keeps in cache, on the machines we ran).
- ``fixed_us``: what one call of each kind costs beyond its data when it runs as a stage does,
  alone between other operations and timed by itself (kernels.measure.stages).

Every rate says how it was had (``method``)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

import torch

from kernels.measure.stages import empty_caches, flush_buffer, time_stages
from kernels.measure.warm_rate import warm_times
from kernels.paths.torch_naive.forward import softmax_wide
from kernels.planning.sweep import ROWS
from kernels.spec import RATE_SINGLE_CALLS

KINDS = ("elementwise", "product", "softmax", "masked_fill")
INSIDE_SHARE = 0.25  # of the largest cache, the T×T tensor of a product timed inside it
PAST_FACTOR = 4  # the T×T tensor of a product timed past the largest cache, over that cache
T_STEP = 64  # product lengths are whole multiples of this
PRODUCT_CALL_MAX_S = 2.0  # a product timed for the ceilings takes at most about this per call
PRODUCT_MAX_BYTES = 1 << 30  # the T×T tensor of a product timed for the ceilings, at most
PROBE_TOKENS = 512  # a product timed once first, for the rate the first length is capped by
PASS_INSIDE_SHARE = 0.5  # of the largest cache, a pass's tensors together
HANDED_OPS = ("scale",)  # the passes a product hands its output to in torch_naive's chain
OP_KIND = {"scale": "elementwise", "mask": "masked_fill", "softmax": "softmax", "cast": "elementwise"}
FLUSHED_PRODUCT_METHOD = (
    "torch.matmul as for the inside place, timed one call at a time with the caches emptied "
    "before each (a buffer twice the largest cache written), less the product's fixed cost"
)
PRODUCT_METHOD = (
    "torch.matmul into a tensor allocated once, the stages' layout; calls repeated on the same "
    "data in blocks of about a millisecond, each followed by a 1×1 product (the fixed cost), "
    "FLOP/s over the median difference"
)
ROW_HEADS = 8  # heads of a one-row product timed for the ceilings (decode's products run per head)
ROW_METHOD = (
    "torch.matmul of one query row per head (or one row of P) against K or V four times the "
    "largest cache, into a tensor allocated once; calls repeated in blocks of about a "
    "millisecond, each followed by a 1×1 product (the fixed cost), bytes of its operands and "
    "output per second over the median difference"
)
ROW_FLUSHED_METHOD = (
    "torch.matmul of one query row per head (or one row of P) against K or V filling half the "
    "largest cache, the caches emptied before each call, each call timed by itself; bytes of "
    "its operands and output per second over the median time less the fixed cost of a product"
)
PASS_METHOD = (
    "the stage's operation repeated on one set of tensors (in the largest cache, or four times "
    "past it) in blocks of about a millisecond, each followed by the same operation on one "
    "element, the rate over the median difference"
)
HANDED_METHOD = (
    "the stage's operation on a T×T tensor filling half the largest cache, a Q·Kᵀ product "
    "writing that tensor before each call (as scores hands S to scale), each call timed by "
    "itself; the rate over the median time less the fixed cost of its kind"
)
FLUSHED_METHOD = (
    "the stage's operation on tensors that fit in half the largest cache, the caches emptied "
    "before each call as the stage timer's cold passes do, each call timed by itself; the rate "
    "over the median time less the fixed cost of its kind"
)
FIXED_METHOD = (
    "a chain of a product, an in-place scale, a masked fill and a softmax on tensors just large "
    "enough for every thread, timed warm by the stage timer (each call by itself, as a stage); "
    "each call's median less its data time (the call repeated in blocks)"
)


def dtype_of(name: str) -> torch.dtype:
    return getattr(torch, name)


def product_lengths(e: int, cache_bytes: int | None, shortest: int, longest: int) -> dict[str, int]:
    """The lengths a product is timed at, by place: the sweep's shortest (``short``, where a
    call's threads and blocking differ most), and inside and past the largest cache in whole
    multiples of T_STEP, clamped to [shortest, longest] (the sweep's); none whose T×T tensor
    is over PRODUCT_MAX_BYTES; each length once."""
    if not cache_bytes:
        wanted = {"inside": shortest, "past": longest}
    else:
        wanted = {
            "inside": math.sqrt(INSIDE_SHARE * cache_bytes / e),
            "past": math.sqrt(PAST_FACTOR * cache_bytes / e),
        }
    most = max(T_STEP, int(math.sqrt(PRODUCT_MAX_BYTES / e)) // T_STEP * T_STEP)
    found: dict[str, int] = {"short": min(shortest, most)}
    for place, tokens in wanted.items():
        stepped = max(T_STEP, round(tokens / T_STEP) * T_STEP)
        clamped = min(max(stepped, shortest), longest, most)
        if clamped not in found.values():
            found[place] = clamped
    return found


def product_calls(shape: str, tokens: int, head_dim: int, dtype: torch.dtype, device: str) -> tuple:
    """(the product, the 1×1 product of the same kind, its FLOPs) in the stages' layout."""
    if shape == "qk":
        q = torch.randn(1, 1, tokens, head_dim, device=device).to(dtype)
        k_t = torch.randn(1, 1, tokens, head_dim, device=device).to(dtype).transpose(-1, -2)
        out = torch.empty(1, 1, tokens, tokens, dtype=dtype, device=device)
        a, b = q, k_t
    else:
        a = torch.rand(1, 1, tokens, tokens, device=device).to(dtype)
        b = torch.randn(1, 1, tokens, head_dim, device=device).to(dtype)
        out = torch.empty(1, 1, tokens, head_dim, dtype=dtype, device=device)
    one_a, one_b = torch.ones(1, 1, dtype=dtype, device=device), torch.ones(1, 1, dtype=dtype, device=device)
    one_out = torch.empty(1, 1, dtype=dtype, device=device)
    return (
        lambda: torch.matmul(a, b, out=out),
        lambda: torch.matmul(one_a, one_b, out=one_out),
        2 * tokens * tokens * head_dim,
    )


def row_calls(shape: str, footprint: int, head_dim: int, dtype: torch.dtype, device: str) -> tuple:
    """(decode's product, the 1×1 product of the same kind, the bytes it moves, its T) in the
    stages' layout, K or V (ROW_HEADS heads) filling about ``footprint`` bytes."""
    e = dtype.itemsize
    tokens = max(T_STEP, footprint // (ROW_HEADS * head_dim * e) // T_STEP * T_STEP)
    keys = torch.randn(1, ROW_HEADS, tokens, head_dim, device=device).to(dtype)
    if shape == "qk":
        a = torch.randn(1, ROW_HEADS, 1, head_dim, device=device).to(dtype)
        b, out = keys.transpose(-1, -2), torch.empty(1, ROW_HEADS, 1, tokens, dtype=dtype, device=device)
    else:
        a = torch.rand(1, ROW_HEADS, 1, tokens, device=device).to(dtype)
        b, out = keys, torch.empty(1, ROW_HEADS, 1, head_dim, dtype=dtype, device=device)
    _, fixed, _ = product_calls(shape, 1, 1, dtype, device)
    moved = (a.numel() + b.numel() + out.numel()) * e
    return (lambda: torch.matmul(a, b, out=out)), fixed, moved, tokens


def row_rates(
    device: str,
    wanted: list[dict],
    footprints: dict[str, int],
    flush: torch.Tensor,
    fixed_us: dict[str, float],
) -> list[dict]:
    """One entry per dtype, head dimension, shape and place for each ``wanted`` shape marked
    ``rows``: K or V filling the inside footprint with the caches emptied before each call
    (``flushed``: read from DRAM into a cache with room, as the stage timer's chain meets
    them, warm or cold) and the past one (``past``: streamed from DRAM)."""
    found = []
    for want in (w for w in wanted if w.get(ROWS)):
        dtype = dtype_of(want["dtype"])
        for shape in ("qk", "pv"):
            for place, footprint in footprints.items():
                call, fixed, moved, tokens = row_calls(shape, footprint, want["head_dim"], dtype, device)
                if place == "inside":
                    place = "flushed"
                    whole, _ = single_seconds(device, call, lambda: empty_caches(flush))
                    data, method = whole - fixed_us["product"] / 1e6, ROW_FLUSHED_METHOD
                else:
                    whole, _, data = warm_times(device, call, fixed)
                    method = ROW_METHOD
                found.append(
                    {
                        "dtype": want["dtype"],
                        "head_dim": want["head_dim"],
                        "shape": shape,
                        "place": place,
                        "tokens": tokens,
                        "heads": ROW_HEADS,
                        "bytes": moved,
                        "time_us": whole * 1e6,
                        "per_s": moved / data if data > 0 else None,
                        "method": method,
                    }
                )
    return found


def product_rates(
    device: str,
    wanted: list[dict],
    cache_bytes: int | None,
    flush: torch.Tensor | None = None,
    fixed_us: dict[str, float] | None = None,
) -> list[dict]:
    """One entry per dtype, head dimension, shape and place: ``wanted`` lists the sweep's
    (dtype, head_dim, shortest, longest) as dicts. Lengths in increasing order; one whose call
    the rate found so far says would take over PRODUCT_CALL_MAX_S is timed at the longest
    length that does not (``capped`` says so), so that a slow dtype cannot use up the
    ceilings' time limit. With ``flush`` (and the fixed costs), the ``inside`` length is also
    timed ``flushed``: the caches emptied before each call, as the cold stages meet it."""
    found = []
    for want in wanted:
        dtype = dtype_of(want["dtype"])
        e = dtype.itemsize
        lengths = product_lengths(e, cache_bytes, want["shortest"], want["longest"])
        for shape in ("qk", "pv"):
            rate = probe_rate(shape, want["head_dim"], dtype, device)
            for place, wanted_tokens in sorted(lengths.items(), key=lambda item: item[1]):
                tokens = capped_length(wanted_tokens, want["head_dim"], rate)
                call, fixed, flops = product_calls(shape, tokens, want["head_dim"], dtype, device)
                whole, _, data = warm_times(device, call, fixed)
                measured = flops / data if data > 0 else None
                rate = measured or rate
                found.append(
                    {
                        "dtype": want["dtype"],
                        "head_dim": want["head_dim"],
                        "shape": shape,
                        "place": place,
                        "tokens": tokens,
                        "matrix_bytes": tokens * tokens * e,
                        "time_us": whole * 1e6,
                        "flops_per_s": measured,
                        "method": PRODUCT_METHOD,
                    }
                    | (
                        {"capped": f"T = {wanted_tokens:,} wanted, a call of over {PRODUCT_CALL_MAX_S:g} s"}
                        if tokens != wanted_tokens
                        else {}
                    )
                )
                if place == "inside" and flush is not None and fixed_us is not None:
                    found.append(flushed_product(device, found[-1], call, flops, flush, fixed_us["product"]))
    return found


def flushed_product(
    device: str, inside: dict, call: Callable, flops: int, flush: torch.Tensor, fixed_us: float
) -> dict:
    """The ``inside`` product timed one call at a time with the caches emptied before each:
    what a cold stage pays to bring its operands from DRAM (a T×T operand read, P·V's P, costs
    more than a T×T output written, Q·Kᵀ's S)."""
    whole, before = single_seconds(device, call, lambda: empty_caches(flush))
    data = whole - fixed_us / 1e6
    return inside | {
        "place": "flushed",
        "time_us": whole * 1e6,
        "flops_per_s": flops / data if data > 0 else None,
        "before_us": before * 1e6,
        "method": FLUSHED_PRODUCT_METHOD,
    }


def probe_rate(shape: str, head_dim: int, dtype: torch.dtype, device: str) -> float | None:
    """FLOP/s of one product at PROBE_TOKENS (the better of two calls): a first rate to cap
    the first length timed by, however slow the dtype."""
    call, _, flops = product_calls(shape, PROBE_TOKENS, head_dim, dtype, device)
    best = min(timed_call(device, call) for _ in range(2))
    return flops / best if best > 0 else None


def timed_call(device: str, call: Callable) -> float:
    """Seconds of one call, the device's queue drained before and after (CUDA)."""
    if device == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    call()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started


def capped_length(tokens: int, head_dim: int, rate: float | None) -> int:
    """``tokens``, or the longest multiple of T_STEP whose product (2·T²·d FLOPs) takes at most
    PRODUCT_CALL_MAX_S at ``rate`` (the rate at the last length timed)."""
    if not rate or 2 * tokens * tokens * head_dim / rate <= PRODUCT_CALL_MAX_S:
        return tokens
    longest = math.sqrt(PRODUCT_CALL_MAX_S * rate / (2 * head_dim))
    return max(T_STEP, int(longest // T_STEP) * T_STEP)


def pass_calls(
    op: str, dtype: torch.dtype, footprint: int, device: str
) -> tuple[Callable, Callable, float, torch.Tensor]:
    """(the pass over tensors filling ``footprint`` bytes together, the same on one element,
    its amount: bytes moved, or for the softmax elements; the T×T tensor it reads)."""
    e = dtype.itemsize
    per_element = {"scale": e, "mask": e + 1, "softmax": e + 4, "cast": 4 + e}[op]
    side = max(16, int(math.sqrt(footprint / per_element)) // 16 * 16)
    n = side * side
    x = torch.empty(side, side, dtype=dtype, device=device).uniform_()
    tiny = torch.empty(1, 1, dtype=dtype, device=device).uniform_()
    if op == "scale":
        return (lambda: x.mul_(1.0)), (lambda: tiny.mul_(1.0)), 2 * n * e, x
    if op == "mask":
        mask = torch.ones(side, side, dtype=torch.bool, device=device).triu_(1)
        one_mask = torch.zeros(1, 1, dtype=torch.bool, device=device)
        return (
            (lambda: x.masked_fill_(mask, float("-inf"))),
            (lambda: tiny.masked_fill_(one_mask, float("-inf"))),
            2 * n * e + n,
            x,
        )
    wide = torch.empty(side, side, dtype=torch.float32, device=device)
    one_wide = torch.empty(1, 1, dtype=torch.float32, device=device)
    if op == "softmax":
        return (
            (lambda: softmax_wide(x, wide)),
            (lambda: softmax_wide(tiny, one_wide)),
            float(n),
            x,
        )
    return (lambda: x.copy_(wide)), (lambda: tiny.copy_(one_wide)), n * (4 + e), wide


def pass_ops(dtype: str) -> tuple[str, ...]:
    two_bytes = dtype_of(dtype).itemsize == 2
    return ("scale", "mask", "softmax", "cast") if two_bytes else ("scale", "mask", "softmax")


def single_seconds(device: str, call: Callable, before: Callable) -> tuple[float, float]:
    """The median time of ``call`` timed by itself, ``before`` run before each, and the
    median time of ``before`` (what the measurement spent besides)."""
    times, befores = [], []
    for _ in range(RATE_SINGLE_CALLS):
        befores.append(timed_call(device, before))
        times.append(timed_call(device, call))
    return statistics.median(times), statistics.median(befores)


def product_into(x: torch.Tensor) -> Callable:
    """A Q·Kᵀ product (d = 64) writing all of the T×T tensor ``x``, as scores writes S."""
    side = x.shape[-1]
    q = torch.randn(x.shape[0], 64, device=x.device).to(x.dtype)
    k_t = torch.randn(side, 64, device=x.device).to(x.dtype).transpose(0, 1)
    return lambda: torch.matmul(q, k_t, out=x)


def pass_rates(
    device: str,
    dtypes: list[str],
    footprints: dict[str, int],
    flush: torch.Tensor,
    fixed_us: dict[str, float],
) -> list[dict]:
    """One entry per dtype, operation and place (``footprints``: bytes by place; the inside
    footprint is also timed ``flushed``: from DRAM, with room in the cache)."""
    found = []
    for dtype in dtypes:
        for op in pass_ops(dtype):
            for place, footprint in footprints.items():
                call, fixed, amount, x = pass_calls(op, dtype_of(dtype), footprint, device)
                whole, _, data = warm_times(device, call, fixed)
                found.append(pass_entry(dtype, op, place, footprint, whole, data, amount))
                if place == "inside":
                    fixed_s = fixed_us[OP_KIND[op]] / 1e6
                    whole, before = single_seconds(device, call, lambda: empty_caches(flush))
                    entry = pass_entry(dtype, op, "flushed", footprint, whole, whole - fixed_s, amount)
                    found.append(entry | {"before_us": before * 1e6})
                    if op in HANDED_OPS:
                        whole, before = single_seconds(device, call, product_into(x))
                        entry = pass_entry(dtype, op, "handed", footprint, whole, whole - fixed_s, amount)
                        found.append(entry | {"before_us": before * 1e6})
    return found


def pass_entry(
    dtype: str, op: str, place: str, footprint: int, whole: float, data: float, amount: float
) -> dict:
    return {
        "dtype": dtype,
        "op": op,
        "place": place,
        "footprint_bytes": footprint,
        "time_us": whole * 1e6,
        "per_s": amount / data if data > 0 else None,
        "unit": "elements" if op == "softmax" else "bytes",
        "method": {"flushed": FLUSHED_METHOD, "handed": HANDED_METHOD}.get(place, PASS_METHOD),
    }


def fixed_costs(device: str, threads: int) -> dict[str, float]:
    """µs one call of each kind costs beyond its data, as a stage meets it (FIXED_METHOD): a
    chain of the four kinds on tensors just large enough to run on every thread, timed by the
    stage timer (kernels.measure.stages), less each call's data time."""
    side = max(16, math.ceil(math.sqrt(threads * 32768 * 2)) // 16 * 16)
    calls = {
        "product": product_calls("qk", side, 64, torch.float32, device),
        "elementwise": pass_calls("scale", torch.float32, side * side * 4, device),
        "masked_fill": pass_calls("mask", torch.float32, side * side * 5, device),
        "softmax": pass_calls("softmax", torch.float32, side * side * 8, device),
    }
    timed = time_stages([(kind, found[0]) for kind, found in calls.items()], device)
    found = {}
    for row, (kind, (call, tiny, *_)) in zip(timed, calls.items(), strict=True):
        data = warm_times(device, call, tiny)[2]
        found[kind] = max(0.0, row["time_ms"] / 1e3 - data) * 1e6
    return found


def stage_footprint(want: dict) -> int:
    """The most any stage of the sweep's longest point touches at once: softmax's S, its
    float32 result and P."""
    e = dtype_of(want["dtype"]).itemsize
    return want["longest"] ** 2 * (2 * e + 4)


def measure(device: str, threads: int, wanted: list[dict], cache_bytes: int | None, past_bytes: int) -> dict:
    """Every operation rate the expected times use (the ceilings' ``ops``)."""
    dtypes = list(dict.fromkeys(w["dtype"] for w in wanted)) or ["float32"]
    inside = int(PASS_INSIDE_SHARE * cache_bytes) if cache_bytes else None
    footprints = {"inside": inside, "past": past_bytes} if inside else {"past": past_bytes}
    if inside and all(stage_footprint(w) <= inside for w in wanted):
        del footprints["past"]  # no stage of the sweep outgrows half the cache
    fixed_us = fixed_costs(device, threads)
    flush = flush_buffer(device, cache_bytes)
    return {
        "threads": threads,
        "cache_bytes": cache_bytes,
        "products": product_rates(device, wanted, cache_bytes, flush, fixed_us),
        # without a known cache only past it: the flushed place is half a cache
        "rows": row_rates(
            device,
            wanted,
            {"inside": inside, "past": past_bytes} if inside else {"past": past_bytes},
            flush,
            fixed_us,
        ),
        "passes": pass_rates(device, dtypes, footprints, flush, fixed_us),
        "fixed_us": fixed_us,
        "fixed_method": FIXED_METHOD,
    }
