"""A measured rate, stated only where it is one: every page that states a rate (GB/s, FLOP/s,
elements per second) asks here first.

Two checks, each from the data:

- **Measurable.** A stage's rate with its fixed cost taken out divides by its data time (its
  time less the fixed cost of a call of its kind). Near the fixed cost that difference is
  noise, and a rate over it is any number at all (a floor of 1 ps once published 9,216,000
  GB/s on a machine that copies at 180). The data time counts as measured only where it
  exceeds both the stage's own spread (p10 to p90 of its repeats: a difference inside it
  cannot be told from zero) and MIN_DATA_SHARE of its time (kernels.spec: the share below
  which the ceilings null their own rates, so a stage is held to the rule its ceiling was).
- **Possible.** No rate is stated above the fastest this machine's ceilings measured of its
  kind (results/ceilings.json): bytes against the copy and in-place update rates of every
  memory level, FLOPs against the matrix products, elements against the exponentials and the
  softmax pass. The ceilings are this machine's own best: a stage said to beat all of them
  was timed too short to measure, whatever the arithmetic gives. Where the ceilings hold no
  rate of that kind there is nothing to hold a rate against, and it is stated as measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from kernels.spec import MIN_DATA_SHARE
from reports.pages.common import number

__all__ = [
    "BYTES",
    "FLOPS",
    "ELEMENTS",
    "Rate",
    "fastest",
    "rate",
    "data_ms",
    "measurable_ms",
    "too_short",
    "within_ceilings",
]

BYTES, FLOPS, ELEMENTS = "bytes", "FLOPs", "elements"
# the ceilings' places a pass's rate was timed warm at (its flushed and handed entries take a
# fixed cost measured elsewhere out of one call: not a ceiling)
WARM_PLACES = ("inside", "past")


def _positive(values) -> list[float]:
    return [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool) and v > 0]


def fastest(ceilings: dict | None, kind: str) -> float | None:
    """The fastest rate of ``kind`` (per second) the ceilings measured, or None where they
    hold none: bytes, the copy and in-place rates of every level; FLOPs, the matrix products;
    elements, the exponentials and the softmax pass."""
    found = ceilings or {}
    ops = found.get("ops") or {}
    if kind == BYTES:
        levels = found.get("levels") or []
        gbps = [found.get("copy_gbps"), *(lv.get(k) for lv in levels for k in ("copy_gbps", "update_gbps"))]
        rates = [g * 1e9 for g in _positive(gbps)]
    elif kind == FLOPS:
        tflops = _positive([found.get("matmul_tflops")])
        rates = [t * 1e12 for t in tflops] + _positive(
            p.get("flops_per_s") for p in ops.get("products") or []
        )
    elif kind == ELEMENTS:
        softmax = [
            p.get("per_s")
            for p in ops.get("passes") or []
            if p.get("op") == "softmax" and p.get("place") in WARM_PLACES
        ]
        rates = _positive([found.get("exp_per_s"), *softmax])
    else:
        raise ValueError(f"kind={kind!r}: allowed values are {BYTES}, {FLOPS}, {ELEMENTS}")
    return max(rates) if rates else None


@dataclass(frozen=True)
class Rate:
    """A rate as a page states it: ``text`` is the number with its unit where it was
    measured (``measured``), else the words saying why no number is given."""

    text: str
    measured: bool


def too_short(why: str) -> Rate:
    return Rate(f"too short to measure ({why})", False)


def rate(per_s: float, kind: str, ceilings: dict | None, unit: str = "GB/s", scale: float = 1e9) -> Rate:
    """``per_s`` as '12.3 GB/s' (divided by ``scale``, then ``unit``), or, above the fastest
    rate of its kind the ceilings measured (or not a finite positive number), the words that
    say the stage was too short to measure."""
    if not np.isfinite(per_s) or per_s <= 0:
        return too_short("no time was left to its data")
    ceiling = fastest(ceilings, kind)
    if ceiling is not None and per_s > ceiling:
        return too_short(
            f"its {kind} over its time would beat the fastest rate this machine's ceilings measured, "
            f"{number(ceiling / scale)} {unit}"
        )
    return Rate(f"{number(per_s / scale)} {unit}", True)


def data_ms(time_ms: float, fixed_ms: float, spread_ms: float | None = None) -> float | None:
    """A stage's data time (its time less its fixed cost), or None where it does not stand
    measurably above the fixed cost: above the stage's own spread and MIN_DATA_SHARE of its
    time (the module's docstring says why)."""
    data = time_ms - fixed_ms
    spread = spread_ms if spread_ms is not None and np.isfinite(spread_ms) else 0.0
    return data if _measurable(data, spread, time_ms) else None


def measurable_ms(rows: pd.DataFrame, fixed: pd.Series, cold: bool = False) -> pd.Series:
    """data_ms for every row (warm, or ``cold``), NaN where not measurable; the spread is
    the row's own p10 to p90 where its table holds them."""
    prefix = "cold_time" if cold else "time"
    time = pd.to_numeric(rows[f"{prefix}_ms"], errors="coerce").astype(float)
    low, high = rows.get(f"{prefix}_p10_ms"), rows.get(f"{prefix}_p90_ms")
    spread = (
        (pd.to_numeric(high, errors="coerce") - pd.to_numeric(low, errors="coerce")).astype(float).fillna(0.0)
        if low is not None and high is not None
        else pd.Series(0.0, index=rows.index)
    )
    data = time - pd.to_numeric(fixed, errors="coerce").astype(float)
    return data.where(_measurable(data, spread, time))


def _measurable(data, spread, time):
    """The one rule, for a number or a column: the data time above the spread and above
    MIN_DATA_SHARE of the time."""
    return data > np.maximum(spread, MIN_DATA_SHARE * time)


def within_ceilings(
    table: pd.DataFrame, columns: dict[str, tuple[str, float]], ceilings: dict | None
) -> tuple[pd.DataFrame, str | None]:
    """``table`` with each rate column's values (``columns``: column → (kind, its unit in
    per-second multiples, e.g. 1e9 for GB/s)) blanked where they beat the fastest rate of their
    kind the ceilings measured, and the sentence that says how many were (None where none)."""
    shown, blanked = table.copy(), 0
    for column, (kind, scale) in columns.items():
        ceiling = fastest(ceilings, kind)
        if ceiling is None or column not in shown:
            continue
        beyond = pd.to_numeric(shown[column], errors="coerce") * scale > ceiling
        blanked += int(beyond.sum())
        shown[column] = shown[column].where(~beyond)
    if not blanked:
        return shown, None
    return shown, (
        f"**Too short to measure:** {blanked} rate{'s' * (blanked != 1)} in the table would beat the "
        "fastest of its kind this machine's ceilings measured, so the cell is left blank: the call "
        "was too short to time against its bytes or FLOPs."
    )
