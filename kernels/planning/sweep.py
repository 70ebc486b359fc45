"""The sweep a configuration asks for: its points, the validations and builds they need, and
the groups their records are gathered in.

Pure Python, so that the workflow can plan thousands of points without importing torch.
"""

from __future__ import annotations

import itertools
import math

from kernels import catalog
from kernels.planning.point import Point
from kernels.spec import DEFAULT_INPUTS, DEFAULT_PASS, ELEMENT_BYTES, MAX_TOKENS

TOKEN_MULTIPLE = 16  # tokens_across_cache rounds T to this


SCORES_MAX_STEP = 1.5  # T's largest step where S + P (quadratic in T) follows the cache
KV_DEFAULT_STEP = 2.0  # K + V grow linearly in T: a step of 2 doubles them, as √2 does S + P


def filled_bytes(span: dict, grid: dict, dtype: str) -> tuple[float, int]:
    """What a T of the grid puts against the cache: (bytes per T^power, power). scores: S + P,
    2·T²·e; kv: K and V with a head per query head, 2·B·H·T·d·e (one batch, heads and head_dim)."""
    e = ELEMENT_BYTES[dtype]
    if span.get("fills", "scores") == "scores":
        return 2 * e, 2
    for field in ("batch", "heads", "head_dim"):
        if len(grid.get(field, [None])) != 1:
            raise ValueError(
                f"tokens_across_cache with fills: kv needs one {field} in its grid, got {grid[field]}"
            )
    return 2 * grid.get("batch", [1])[0] * grid["heads"][0] * grid["head_dim"][0] * e, 1


def tokens_across_cache(span: dict, cache_bytes: int, dtype: str, grid: dict | None = None) -> list[int]:
    """T values whose S + P (2·T²·e; with ``fills: kv``, K + V: 2·B·H·T·d·e) runs from
    span["from"] to span["to"] times ``cache_bytes``, each T ``span["step"]`` (default √2; 2
    for kv) times the one before, rounded to a multiple of TOKEN_MULTIPLE (at least that), each
    once."""
    kv = span.get("fills", "scores") == "kv"
    low, high = span["from"], span["to"]
    step = span.get("step") or (KV_DEFAULT_STEP if kv else math.sqrt(2))
    if high < low:
        raise ValueError(f"tokens_across_cache: to={high} is below from={low}")
    if not kv and step > SCORES_MAX_STEP:
        raise ValueError(f"tokens_across_cache: step={step} is above {SCORES_MAX_STEP} for fills: scores")
    per, power = filled_bytes(span, grid or {}, dtype)
    first = (low * cache_bytes / per) ** (1 / power)
    count = math.floor(math.log(high / low) / (power * math.log(step)) + 1e-9) + 1
    rounded = [
        max(TOKEN_MULTIPLE, TOKEN_MULTIPLE * round(first * step**i / TOKEN_MULTIPLE)) for i in range(count)
    ]
    if rounded[-1] > MAX_TOKENS:
        raise ValueError(
            f"tokens_across_cache: to={high} times a cache of {cache_bytes:,} bytes (cache_bytes, or the "
            f"machine's) asks for T = {rounded[-1]:,} in {dtype}, above the most a point takes "
            f"({MAX_TOKENS:,}): give a smaller cache_bytes or tokens_across_cache.to"
        )
    return list(dict.fromkeys(rounded))


def tokens_of(grid: dict, dtype: str, cache_bytes: int | None) -> list[int]:
    """The grid's T values for one dtype: its list, or those following the cache size."""
    span = grid.get("tokens_across_cache")
    if not span:
        return list(grid["tokens"])
    if not cache_bytes:
        raise ValueError(
            "tokens_across_cache needs the cache size: this machine describes no cache; "
            "set cache_bytes in the configuration"
        )
    return tokens_across_cache(span, cache_bytes, dtype, grid)


def asks_for_cache(sweep: dict | list[dict]) -> bool:
    """Whether a grid of the sweep follows the cache size (so the planner must read it)."""
    return any(grid.get("tokens_across_cache") for grid in (sweep if isinstance(sweep, list) else [sweep]))


def batches_for(sweep: dict, tokens: int) -> list[int]:
    total = sweep.get("total_tokens")
    return [max(1, total // tokens)] if total else list(sweep["batch"])


def resolved(sweep: dict | list[dict], cache_bytes: int | None) -> list[dict]:
    """The sweep's grids with every T listed: a grid following the cache size becomes one
    grid per dtype with its T values, so what reads the sweep later needs no cache size."""
    grids = sweep if isinstance(sweep, list) else [sweep]
    out = []
    for grid in grids:
        if not grid.get("tokens_across_cache"):
            out.append(grid)
            continue
        for dtype in grid["dtype"]:
            tokens = tokens_of(grid, dtype, cache_bytes)
            out.append(grid | {"dtype": [dtype], "tokens": tokens, "tokens_across_cache": None})
    return out


def masks_of(grid: dict) -> list:
    """The grid's masks: its ``mask`` list, or its ``causal`` list (the older spelling: true is
    causal, false full; both when the grid names neither). Giving both is an error."""
    given, causal = grid.get("mask"), grid.get("causal")
    if given is not None and causal is not None:
        raise ValueError(
            f"causal {causal} and mask {given} both given: give one (mask: [causal, full] is causal: "
            "[true, false])"
        )
    return list(given) if given is not None else list(causal if causal is not None else [True, False])


def _combinations(grid: dict, cache_bytes: int | None):
    for dtype in grid["dtype"]:
        yield from itertools.product(
            grid["impls"],
            tokens_of(grid, dtype, cache_bytes),
            grid["heads"],
            grid["head_dim"],
            [dtype],
            masks_of(grid),
            grid.get("inputs", [DEFAULT_INPUTS]),
            grid.get("pass", [DEFAULT_PASS]),
            grid.get("query_tokens", [None]),
            grid.get("kv_heads", [None]),
        )


def grid_points(grid: dict, cache_bytes: int | None = None) -> list[Point]:
    """Every point of one grid: the product of its lists, blocks for Triton impls only and
    num_splits for those whose registration takes it; ``cache_bytes``: the cache size a grid
    with tokens_across_cache follows."""
    out = []
    for impl, tokens, heads, d, dtype, mask, inputs, direction, queries, kv in _combinations(
        grid, cache_bytes
    ):
        entry = catalog.get(impl)
        blocks = [tuple(b) for b in grid["blocks"]] if entry.triton else [(None, None)]
        splits = grid.get("num_splits", [None]) if "num_splits" in entry.options else [None]
        for batch, (bm, bn), split in itertools.product(batches_for(grid, tokens), blocks, splits):
            point = Point(
                impl,
                batch,
                heads,
                tokens,
                d,
                dtype,
                mask,
                bm,
                bn,
                inputs=inputs,
                direction=direction,
                query_tokens=queries,
                kv_heads=kv,
                num_splits=split,
            )
            out.append(point)
    return out


def points(sweep: dict | list[dict], cache_bytes: int | None = None) -> list[Point]:
    """Every point of the sweep: one grid, or the points of several grids, each once."""
    grids = sweep if isinstance(sweep, list) else [sweep]
    return list(dict.fromkeys(p for grid in grids for p in grid_points(grid, cache_bytes)))


def build_jobs(points: list[Point]) -> dict[str, list[str]]:
    """Build job name → names of the points it compiles for (Triton points whose
    registration plans their launches: a plugin's without a planner compile on first call)."""
    jobs: dict[str, list[str]] = {}
    for point in points:
        if point.triton and catalog.get(point.impl).launches is not None:
            jobs.setdefault(point.build_name, []).append(point.name)
    return jobs


def groups(points: list[Point]) -> dict[tuple[str, str], list[Point]]:
    """(impl, dtype) → its points. Records are gathered per group first: Snakemake hashes a
    job's whole input list once per upstream job, so one job over thousands would plan slowly."""
    out: dict[tuple[str, str], list[Point]] = {}
    for point in points:
        out.setdefault((point.impl, point.dtype), []).append(point)
    return dict(sorted(out.items()))


def _registered(grid: dict, known: list[str], problems: list) -> tuple[dict | None, str | None]:
    """The grid with the implementations the registry knows (None where none is left) and a
    warning naming those left out. A name nobody registered is a ValueError naming the
    registered ones, unless a plugin failed to load: then it is left out, and the warning
    names the plugins' problems."""
    unknown = [impl for impl in grid["impls"] if impl not in known]
    if unknown and not problems:
        raise ValueError(
            f"impls {', '.join(unknown)} not registered; registered implementations are {', '.join(known)}"
        )
    warning = None
    if unknown:
        warning = f"impls {', '.join(unknown)} left out ({'; '.join(map(str, problems))})"
    impls = [impl for impl in grid["impls"] if impl in known]
    return (grid | {"impls": impls} if impls else None), warning


def planned(sweep: dict | list[dict], cache_bytes: int | None) -> tuple[list[dict], list[str], list[Point]]:
    """The sweep as the workflow plans it: its grids checked against the registry and
    resolved (``_registered``, ``resolved``), the warnings of what was left out, and its
    points, each once. A grid that cannot be planned (a name nobody registered, a span past
    the longest T, kv_heads that do not divide heads, ...) is refused by its index in the
    configuration, ``sweep grid 1: ...``, the grid a user counts (resolving splits a grid
    that follows the cache into one per dtype)."""
    given = sweep if isinstance(sweep, list) else [sweep]
    known, problems = catalog.names(), catalog.problems()
    grids, warnings, found = [], [], []
    for index, grid in enumerate(given):
        name = f"sweep grid {index}" if isinstance(sweep, list) else "sweep"
        try:
            kept, warning = _registered(grid, known, problems)
            warnings += [f"{name}: {warning}"] if warning else []
            mine = resolved([kept], cache_bytes) if kept else []
            found += [point for each in mine for point in grid_points(each)]
        except ValueError as err:
            raise ValueError(f"{name}: {err}") from None
        grids += mine
    return grids, warnings, list(dict.fromkeys(found))


def product_shapes(points: list[Point], device: str) -> list[str]:
    """The matrix products the ceilings time for a sweep (kernels.measure.op_rates), as
    ``dtype:head_dim:shortest:longest`` (the lengths it runs at), with ``:rows`` where a
    point gives a K/V head fewer query rows than it has keys (decode: its products read K and
    V for few rows, and are timed so too): one per dtype and head dimension of the points
    timed on ``device`` (on a CPU the Triton paths are interpreted, never timed)."""
    spans: dict[tuple[str, int], list[int]] = {}
    rows: set[tuple[str, int]] = set()
    for point in points:
        if device == "cpu" and point.triton:
            continue
        spans.setdefault((point.dtype, point.head_dim), []).append(point.tokens)
        if point.group_size * point.queries < point.tokens:
            rows.add((point.dtype, point.head_dim))
    return [
        f"{dtype}:{d}:{min(ts)}:{max(ts)}" + (f":{ROWS}" if (dtype, d) in rows else "")
        for (dtype, d), ts in sorted(spans.items())
    ]


ROWS = "rows"  # product_shapes' mark: the sweep's products also run with few rows per K/V head


def parse_product_shape(text: str) -> dict:
    """``dtype:head_dim:shortest:longest[:rows]`` (product_shapes) as a dict; a ValueError
    naming what is wrong."""
    parts = text.split(":")
    if len(parts) not in (4, 5) or (len(parts) == 5 and parts[4] != ROWS):
        raise ValueError(
            f"{text!r}: expected dtype:head_dim:shortest:longest, e.g. float32:64:256:8192, "
            f"then :{ROWS} where the sweep's products also run with few rows per K/V head"
        )
    dtype, *numbers = parts[:4]
    if dtype not in ELEMENT_BYTES:
        raise ValueError(f"{text!r}: dtype {dtype!r} is not one of {', '.join(ELEMENT_BYTES)}")
    try:
        head_dim, shortest, longest = (int(n) for n in numbers)
    except ValueError:
        raise ValueError(f"{text!r}: head_dim, shortest and longest must be whole numbers") from None
    if min(head_dim, shortest) < 1 or longest < shortest:
        raise ValueError(f"{text!r}: needs head_dim >= 1 and 1 <= shortest <= longest")
    found = {"dtype": dtype, "head_dim": head_dim, "shortest": shortest, "longest": longest}
    return found | ({ROWS: True} if len(parts) == 5 else {})
