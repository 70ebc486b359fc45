"""The Cache hand-off page's sentences and the index's finding on it: every number computed
from the page's rows (reports.pages.handoff.View), every claim made only where those rows
show it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from kernels.io.tables import REST
from reports.pages.common import number
from reports.pages.handoff import (
    THIS_MACHINE,
    View,
    empty,
    gpu_target,
    is_memory,
    keyed,
    main_case,
    of_case,
    predicted_case,
    stages,
)
from reports.pages.rates import BYTES, ELEMENTS, FLOPS, fastest, measurable_ms, rate

__all__ = ["time_text", "bounds_text", "prediction_text", "gpu_text", "finding"]

# a warm/cold ratio within this of 1 is not a difference the page names
NEAR = 0.1
IN_PLACE = "in place"  # how a stage's `does` says it updates S where it lies


def pct(share: float) -> str:
    return f"{number(100 * share)}%"


def listed(items) -> str:
    """'a', 'a and b', 'a, b and c', in the order given."""
    items = list(dict.fromkeys(items))
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


BOUND_WORDS = {"products": "the matrix products", "exponentials": "the exponentials"}


def grouped(found: dict[str, str]) -> str:
    """'scores and pv by the matrix products; softmax by the exponentials': stages by bound."""
    by: dict[str, list[str]] = {}
    for stage, bound in found.items():
        by.setdefault(bound, []).append(stage)
    return "; ".join(f"{listed(stages)} by {BOUND_WORDS.get(bound, bound)}" for bound, stages in by.items())


def span(values) -> str:
    values = [float(v) for v in values]
    low, high = number(min(values)), number(max(values))
    return low if low == high else f"{low} to {high}"


def inside(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows whose S + P fit in the largest cache (at most its size)."""
    return rows[rows["sp_over_cache"] <= 1]


def outside(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["sp_over_cache"] > 1]


def _stage(rows: pd.DataFrame, stage: str) -> pd.DataFrame:
    return rows[rows["stage"] == stage]


def _largest(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["tokens"] == rows["tokens"].max()]


# --- where the time goes ----------------------------------------------------------------------


def _rest_text(rest: pd.Series, top: pd.Series) -> str:
    if rest["time_ms"] < 0:
        return (
            f" The call ran {number(-rest['time_ms'])} ms faster than its stages one by one (its rest "
            "is negative), so the stages' shares add up to more than the whole."
        )
    more = ", more than any one stage" if rest["time_ms"] > top["time_ms"] else ""
    return (
        f" The rest of the call — {rest['does']} — takes {pct(rest['share_of_call'])} of it "
        f"({number(rest['time_ms'])} ms){more}."
    )


def time_text(v: View) -> str:
    """Which stage takes the most time at the largest T, and the rest of the call there."""
    if v.case is None:
        return empty("shares", v.why_untimed)
    at = _largest(v.rows)
    timed = at[at["stage"] != REST]
    top = timed.loc[timed["time_ms"].idxmax()]
    text = (
        f"At the largest length timed (T = {int(top['tokens']):,}), **{top['stage']}** takes the most "
        f"time of the stages: {number(top['time_ms'])} ms, {pct(top['share_of_call'])} of the call's "
        f"{number(top['call_time_ms'])} ms."
    )
    rest = at[at["stage"] == REST]
    return text + (_rest_text(rest.iloc[0], top) if len(rest) else "")


# --- what bounds each stage -------------------------------------------------------------------


def bounds(v: View) -> dict[str, str]:
    """Each stage's bound for this machine (warm, the band's pessimistic end) at the largest
    T that has a prediction."""
    known = v.rows[v.rows["stage"] != REST].dropna(subset=["bound_warm_high"])
    at = _largest(known)
    return dict(zip(at["stage"], at["bound_warm_high"], strict=True))


def _sides(rows: pd.DataFrame, column: str) -> tuple[float, float, int, int] | None:
    """Medians of ``column`` inside and past the largest cache, and how many lengths each."""
    a, b = inside(rows)[column].dropna(), outside(rows)[column].dropna()
    if a.empty or b.empty:
        return None
    return float(a.median()), float(b.median()), len(a), len(b)


def one_side(rows: pd.DataFrame) -> str | None:
    """The sentence for lengths that all stay on one side of the largest cache, or None."""
    x = rows["sp_over_cache"].dropna()
    if x.empty:
        return "The records give no size of the largest cache, so no rate here is held against it."
    if (x <= 1).all() or (x > 1).all():
        where = "within" if (x <= 1).all() else "past"
        return (
            f"Every timed length keeps S + P {where} the largest cache ({span(x)}× its size), so "
            "nothing here compares the two sides of it."
        )
    return None


def without_fixed_cost(rows: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The rows with their GB/s over the time less each call's fixed cost, where the
    ceilings measured it (expected_fixed_ms), and the words that say which: across the cache
    a rate that keeps the fixed cost compares fixed costs at the short lengths, not bytes. A
    length whose time does not stand measurably above its fixed cost (reports.pages.rates)
    gets no rate, and the words say how many."""
    fixed = rows["expected_fixed_ms"] if "expected_fixed_ms" in rows else pd.Series(dtype=float)
    if fixed.notna().any():
        warm, cold = measurable_ms(rows, fixed), measurable_ms(rows, fixed, cold=True)
        data = rows.assign(
            gbps=rows["bytes"] / (warm / 1e3) / 1e9,
            cold_gbps=rows["bytes"] / (cold / 1e3) / 1e9,
        )
        taken = f"{number(fixed.median() * 1e3)} µs"
        short = int((warm.isna() | cold.isna()).sum())
        left = (
            f"; {short} of its {len(rows)} timed lengths too short to measure against it, warm or "
            "cold, left out"
            if short
            else ""
        )
        return data, f" (each call's fixed cost of {taken}, from the ceilings, taken out{left})"
    return rows, (
        " (each call's fixed cost included: the ceilings timed none, so at short lengths this "
        "compares fixed costs as much as bytes)"
    )


def per_byte(rows: pd.DataFrame, stage: str, ceilings: dict | None = None) -> str:
    """A stage's median GB/s inside and past the largest cache, warm and cold, and how its
    time per byte changed across it, with the fixed cost of a call taken out where known; no
    rate where one side was too short to measure or beats the ceilings (reports.pages.rates)."""
    mine, how = without_fixed_cost(_stage(rows, stage))
    warm, cold = _sides(mine, "gbps"), _sides(mine, "cold_gbps")
    if warm is None or cold is None:
        if _sides(_stage(rows, stage), "gbps") is not None:
            return (
                f"**{stage}** was timed on both sides of the largest cache, but on one side or both "
                f"every length was too short to measure against its fixed cost{how}."
            )
        return f"**{stage}** has no timed length on both sides of the largest cache."
    (w_in, w_out, n_in, n_out), (c_in, c_out, _, _) = warm, cold
    said = [rate(1e9 * g, BYTES, ceilings) for g in (w_in, c_in, w_out, c_out)]
    beyond = next((r for r in said if not r.measured), None)
    if beyond is not None:
        return f"**{stage}** was {beyond.text}{how}."
    return (
        f"**{stage}** moved a median {number(w_in)} GB/s warm and {number(c_in)} GB/s cold at the "
        f"{n_in} length{'s' * (n_in != 1)} whose S + P fit in the largest cache, {number(w_out)} and "
        f"{number(c_out)} GB/s at the {n_out} past it{how}: past the cache its time per byte is "
        f"{number(w_in / w_out)}× (warm) and {number(c_in / c_out)}× (cold) what it was inside."
    )


def _bound_at(v: View) -> str:
    at = int(_largest(v.rows.dropna(subset=["bound_warm_high"]))["tokens"].iloc[0])
    return f"the roofline's bound for this machine at T = {at:,}, warm, at the band's pessimistic end"


def memory_text(v: View, found: dict[str, str], ceilings: dict | None = None) -> str:
    memory = {s: b for s, b in found.items() if is_memory(b)}
    if not memory:
        return f"No stage is bound by memory here ({_bound_at(v)})."
    text = f"**Bound by memory here** ({_bound_at(v)}): {grouped(memory)}."
    alone = one_side(v.rows)
    return text + " " + (alone or " ".join(per_byte(v.rows, s, ceilings) for s in memory))


def _rate_of(row: pd.Series, bound: str, ceilings: dict) -> str | None:
    """A stage's arithmetic rate at one length against the machine's measured one (none
    beyond what the ceilings allow: reports.pages.rates)."""
    if bound == "products" and pd.notna(row["tflops"]):
        reached = rate(row["tflops"] * 1e12, FLOPS, ceilings, "TFLOP/s", 1e12)
        if not reached.measured:
            return f"{row['stage']} was {reached.text}"
        peak = ceilings.get("matmul_tflops")
        share = f" ({pct(row['tflops'] / peak)} of the measured {number(peak)} TFLOP/s)" if peak else ""
        return f"{row['stage']} ran at {reached.text}{share}"
    if bound == "exponentials" and pd.notna(row["exps_per_s"]):
        reached = rate(row["exps_per_s"], ELEMENTS, ceilings, "billion exponentials per second")
        if not reached.measured:
            return f"{row['stage']} was {reached.text}"
        peak = ceilings.get("exp_per_s")
        share = (
            f" ({pct(row['exps_per_s'] / peak)} of the measured {number(peak / 1e9)} billion)" if peak else ""
        )
        return f"{row['stage']} at {reached.text}{share}"
    return None


def _medians(rows: pd.DataFrame, stage: str) -> tuple[float | None, float | None]:
    """A stage's median warm/cold ratio while S + P fit in the largest cache and past it."""
    mine = _stage(rows, stage).dropna(subset=["warm_speedup"])
    a, b = inside(mine)["warm_speedup"], outside(mine)["warm_speedup"]
    return (float(a.median()) if len(a) else None), (float(b.median()) if len(b) else None)


def _ratio_words(stage: str, fit: float | None, past: float | None) -> str:
    sides = [
        f"{number(fit)}× while S + P fit" if fit else "",
        f"{number(past)}× past the cache" if past else "",
    ]
    return f"{stage} " + ", ".join(side for side in sides if side)


def _near(value: float | None) -> bool:
    return value is None or abs(value - 1) <= NEAR


def _verdict(ratios: dict[str, tuple], same: bool) -> str:
    """What the measured warm/cold ratios of the arithmetic-bound stages say."""
    flat = [s for s, (fit, past) in ratios.items() if _near(fit) and _near(past)]
    slowed = [s for s, (fit, _) in ratios.items() if not _near(fit)]
    said = []
    if flat:
        said.append(
            f"{listed(flat)} ran as fast cold as warm (within {pct(NEAR)}): the hand-off does not show"
        )
    if slowed:
        beyond = " (more than the roofline gives)" if same else ""
        recovered = all(_near(ratios[s][1]) and ratios[s][1] is not None for s in slowed)
        tail = f", and within {pct(NEAR)} of warm once S + P outgrew the cache" if recovered else ""
        said.append(f"{listed(slowed)} ran slower cold while S + P fit{beyond}{tail}")
    return " Measured: " + "; ".join(said) + "."


def _arithmetic_rates(rows: pd.DataFrame, arithmetic: list[str], ceilings: dict) -> str:
    """The arithmetic-bound stages' warm GB/s over every length, against DRAM's copy rate
    (none where a length beats the ceilings: reports.pages.rates)."""
    fastest_found = rows[rows["stage"].isin(arithmetic)]["gbps"].max()
    beyond = rate(1e9 * fastest_found, BYTES, ceilings) if pd.notna(fastest_found) else None
    if beyond is not None and not beyond.measured:
        return f" Warm, no byte rate is given for them: at one length or more a stage was {beyond.text}."
    spans = [f"{s} {span(_stage(rows, s)['gbps'].dropna())} GB/s" for s in arithmetic]
    text = " Warm, they moved " + listed(spans) + " over the lengths timed"
    copy, _ = dram_rates(ceilings)
    if copy and fastest_found < copy:
        text += f", below DRAM's copy rate ({number(copy)} GB/s) at every one"
    return text + "."


def arithmetic_text(v: View, found: dict[str, str], ceilings: dict) -> str:
    arithmetic = {s: b for s, b in found.items() if not is_memory(b)}
    if not arithmetic:
        return "No stage is bound by arithmetic here."
    at = _largest(v.rows)
    rates = [
        _rate_of(at[at["stage"] == s].iloc[0], b, ceilings)
        for s, b in arithmetic.items()
        if (at["stage"] == s).any()
    ]
    rates = [r for r in rates if r]
    text = f"**Bound by arithmetic**: {grouped(arithmetic)}."
    if rates:
        text += f" At T = {int(at['tokens'].iloc[0]):,}, " + "; ".join(rates) + "."
    text += _arithmetic_rates(v.rows, list(arithmetic), ceilings)
    ratios = {s: _medians(v.rows, s) for s in arithmetic}
    text += " Warm over cold, median: " + "; ".join(_ratio_words(s, *r) for s, r in ratios.items()) + "."
    mine = v.rows[v.rows["stage"].isin(list(arithmetic))].dropna(subset=["predicted_cold_ms"])
    same = bool(len(mine)) and bool(np.allclose(mine["predicted_cold_ms"], mine["predicted_warm_low_ms"]))
    if same:
        text += (
            " The roofline gives each the same time warm and cold: its arithmetic outlasts any move "
            "of its bytes, so where S or P come from should not show."
        )
    return text + _verdict(ratios, same)


def bounds_text(v: View, ceilings: dict) -> str:
    """Which stages are bound by memory (and how much slower per byte they became past the
    largest cache) and which by arithmetic (and whether warm differs from cold in them)."""
    if v.case is None:
        return empty("bounds", v.why_untimed)
    found = bounds(v)
    if not found:
        why = v.why_unpredicted or "none matches these points"
        lead = f"Without this machine's prediction ({why}), the stages are not sorted by what bounds them."
        alone = one_side(v.rows)
        return lead + " " + (alone or " ".join(per_byte(v.rows, s, ceilings) for s in stages(v.rows)))
    return memory_text(v, found, ceilings) + "\n\n" + arithmetic_text(v, found, ceilings)


# --- measured against predicted ---------------------------------------------------------------


def _median_ratio(rows: pd.DataFrame, measured: str, predicted: str) -> float:
    return float((rows[measured] / rows[predicted]).median())


def _stage_ratio(rows: pd.DataFrame, stage: str) -> str:
    mine = _stage(rows, stage)
    low = _median_ratio(mine, "time_ms", "predicted_warm_low_ms")
    high = _median_ratio(mine, "time_ms", "predicted_warm_high_ms")
    other = f" ({number(high)} against the pessimistic end)" if number(low) != number(high) else ""
    cold = number(_median_ratio(mine, "cold_time_ms", "predicted_cold_ms"))
    return f"{stage} {number(low)} warm{other}, {cold} cold"


def below_bound(rows: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """(stage, warm or cold, its rows) where a measured time beat the roofline's lower bound."""
    found = []
    for stage in stages(rows):
        mine = _stage(rows, stage)
        for kind, measured, bound in (
            ("warm", "time_ms", "predicted_warm_low_ms"),
            ("cold", "cold_time_ms", "predicted_cold_ms"),
        ):
            faster = mine[mine[measured] < mine[bound]]
            if len(faster):
                found.append((stage, kind, faster.assign(ratio=faster[measured] / faster[bound])))
    return found


def _beat(rows: pd.DataFrame, stage: str, kind: str, found: pd.DataFrame) -> str:
    lengths = _stage(rows, stage)["tokens"].nunique()
    return f"{stage} {kind} at {len(found)} of {lengths} lengths (down to {number(found['ratio'].min())}×)"


def dram_rates(ceilings: dict) -> tuple[float | None, float | None]:
    """DRAM's copy rate and in-place update rate (None where not measured)."""
    dram = next((lv for lv in ceilings.get("levels") or [] if lv.get("level") == "DRAM"), {})
    return dram.get("copy_gbps") or ceilings.get("copy_gbps"), dram.get("update_gbps")


def write_allocate(rows: pd.DataFrame, ceilings: dict) -> str:
    """Why an in-place stage ran cold faster than DRAM's copy rate, where one did."""
    copy, update = dram_rates(ceilings)
    if not copy:
        return ""
    said = []
    for stage in stages(rows):
        mine = _stage(rows, stage)
        # above DRAM's copy rate and within what the ceilings allow (reports.pages.rates)
        possible = mine["cold_gbps"] * 1e9 <= (fastest(ceilings, BYTES) or np.inf)
        fast = mine[mine["does"].str.contains(IN_PLACE, regex=False) & (mine["cold_gbps"] > copy) & possible]
        if fast.empty:
            continue
        top = fast.sort_values("tokens").iloc[-1]
        said.append(
            f"**{stage}** works in place, and cold at T = {int(top['tokens']):,} it moved "
            f"{number(top['cold_gbps'])} GB/s, more than DRAM's copy rate ({number(copy)} GB/s)"
        )
    if not said:
        return ""
    text = (
        " " + "; ".join(said) + ": the copy that measures that rate writes into a fresh destination, "
        "whose every line a write-allocate cache reads before it writes it, while an in-place pass "
        "reads and writes the same lines."
    )
    if update:
        text += f" DRAM's in-place update rate, measured beside the copy, is {number(update)} GB/s."
    return text


def _band_end(mine: pd.DataFrame) -> str:
    """Which end of the warm band a stage's measured warm/cold ratios lie nearer, as the
    sentence's last clause; where the two ends predict the same at every length, that there
    is no nearer end to name."""
    low = mine["predicted_cold_ms"] / mine["predicted_warm_low_ms"]
    high = mine["predicted_cold_ms"] / mine["predicted_warm_high_ms"]
    measured = mine["warm_speedup"]
    differ = ~np.isclose(low, high)
    if not differ.any():
        return "the two ends agree at every length, so neither is nearer the measurements"
    far_low = np.abs(np.log(measured[differ] / low[differ]))
    far_high = np.abs(np.log(measured[differ] / high[differ]))
    nearer_high = int((far_high < far_low).sum())
    end = "pessimistic" if nearer_high * 2 > differ.sum() else "optimistic"
    count = nearer_high if end == "pessimistic" else int(differ.sum()) - nearer_high
    return (
        f"the measurements lie nearer its {end} end at {count} of the {int(differ.sum())} lengths "
        "where the two ends differ"
    )


def _sided(series: pd.Series, rows: pd.DataFrame) -> str:
    a, b = series[rows["sp_over_cache"] <= 1], series[rows["sp_over_cache"] > 1]
    parts = [f"{span(a)} while S + P fit" if len(a) else "", f"{span(b)} past the cache" if len(b) else ""]
    return " and ".join(p for p in parts if p)


def _past_words(median: float) -> str:
    if _near(median):
        return "the caches no longer serve the hand-off."
    if median > 1:
        return "the caches still serve part of it."
    return "the stage runs faster cold than warm there."


def band_text(rows: pd.DataFrame, stage: str) -> str:
    """A memory-bound stage's measured warm/cold ratios against both ends of the warm band."""
    mine = _stage(rows, stage).dropna(subset=["warm_speedup", "predicted_cold_ms"])
    if mine.empty:
        return ""
    low = mine["predicted_cold_ms"] / mine["predicted_warm_low_ms"]
    high = mine["predicted_cold_ms"] / mine["predicted_warm_high_ms"]
    text = (
        f"**{stage}**: warm over cold measured {_sided(mine['warm_speedup'], mine)}; the band's "
        f"optimistic end (every cache serves the share of the footprint that fits) predicts "
        f"{_sided(low, mine)}, its pessimistic end (a cache serves it only where it fits with room "
        f"to spare) {_sided(high, mine)}: {_band_end(mine)}."
    )
    past = outside(mine)["warm_speedup"]
    if len(past):
        median = float(past.median())
        text += f" Past the cache the median is {number(median)}×: " + _past_words(median)
    return text


def prediction_text(v: View, ceilings: dict) -> str:
    """Measured over predicted per stage, where a measurement beat the bound (and why, where
    the data says), and which end of the band the warm/cold ratios follow."""
    if v.case is None:
        return empty("predicted", v.why_untimed)
    rows = v.rows[v.rows["stage"] != REST].dropna(subset=["predicted_cold_ms"])
    if rows.empty:
        return empty("predicted", v.why_unpredicted or "no prediction matches the timed points")
    lengths = rows["tokens"].nunique()
    text = (
        f"**Measured over predicted** (the median over {lengths} length{'s' * (lengths != 1)}, warm "
        "against the band's optimistic end; the roofline is a lower bound, so 1 is as fast as it "
        "allows): " + "; ".join(_stage_ratio(rows, s) for s in stages(rows)) + "."
    )
    below = below_bound(rows)
    if below:
        text += " Faster than the bound: " + "; ".join(_beat(rows, *found) for found in below) + "."
    text += write_allocate(rows, ceilings)
    memory = [s for s, b in bounds(v).items() if is_memory(b)]
    bands = [band_text(rows, s) for s in memory]
    return "\n\n".join([text, *[b for b in bands if b]])


# --- on a GPU ---------------------------------------------------------------------------------


def _memory_share(rows: pd.DataFrame) -> tuple[float, dict[str, str]]:
    """The share of the chain's predicted time (warm, pessimistic end) in stages bound by
    memory, and those stages with their bounds."""
    memory = rows[rows["bound_warm_high"].map(is_memory)]
    share = memory["predicted_warm_high_ms"].sum() / rows["predicted_warm_high_ms"].sum()
    return float(share), dict(zip(memory["stage"], memory["bound_warm_high"], strict=True))


def _share_words(share: float, memory: dict[str, str]) -> str:
    if not memory:
        return "no stage is bound by memory"
    return f"the stages bound by memory ({grouped(memory)}) take {pct(share)} of the chain's predicted time"


def gpu_text(v: View) -> str:
    """On the GPU (predicted): how much of the chain's time is bound by memory at the largest
    T, against this machine, and which stages change bound between them."""
    target, case = gpu_target(v.predictions), predicted_case(v)
    if target is None or case is None:
        return empty(
            "gpu",
            "this study has no forward point timed stage by stage to predict"
            if v.predictions.empty
            else "the predictions have no GPU",
        )
    rows = of_case(v.predictions, case)
    rows = rows[rows["tokens"] == rows["tokens"].max()]
    there = rows[rows["target"] == target]
    gpu_share, gpu_memory = _memory_share(there)
    text = (
        f"Predicted, not measured: on the {target} at T = {int(there['tokens'].iloc[0]):,}, "
        f"{_share_words(gpu_share, gpu_memory)} (warm, the band's pessimistic end)."
    )
    here = rows[rows["target"] == THIS_MACHINE]
    if here.empty:
        return text
    own_share, own_memory = _memory_share(here)
    text += f" On this machine {_share_words(own_share, own_memory)}."
    bound_there = dict(zip(there["stage"], there["bound_warm_high"], strict=True))
    moved = [
        f"{stage} is bound by {bound_there[stage]} there and by {bound} here"
        for stage, bound in zip(here["stage"], here["bound_warm_high"], strict=True)
        if stage in bound_there and is_memory(bound_there[stage]) != is_memory(bound)
    ]
    if moved:
        said = "; ".join(moved)
        text += " " + said[0].upper() + said[1:] + "."
    if own_share != gpu_share:
        more = "larger" if gpu_share > own_share else "smaller"
        text += (
            " Fusing keeps S and P out of memory and so removes most of that time: it would save a "
            f"{more} share of the chain's time there than here."
        )
    return text


# --- the index's finding --------------------------------------------------------------------------


def finding(stage_times: pd.DataFrame | None, env: dict) -> str | None:
    """The largest warm/cold ratio while S + P fit in the largest cache, with its stage, and
    that stage's ratio past it; None without timed stages."""
    if stage_times is None or stage_times.empty:
        return None
    rows = keyed(stage_times[(stage_times["status"] == "ok") & (stage_times["stage"] != REST)])
    rows = rows.dropna(subset=["warm_speedup", "sp_over_cache"])
    case = main_case(rows)
    if case is None:
        return None
    rows = of_case(rows, case)
    fit = inside(rows)
    pool = fit if len(fit) else rows
    top = pool.loc[pool["warm_speedup"].idxmax()]
    where = "this CPU" if env.get("device") == "cpu" else env.get("gpu_name") or "this GPU"
    text = (
        f"On {where}, emptying the caches before a stage of {case['impl']} ({case['dtype']}) slowed it by "
        f"up to {number(top['warm_speedup'])}× ({top['stage']} at T = {int(top['tokens']):,}, S + P at "
        f"{number(top['sp_over_cache'])}× the largest cache)"
    )
    if fit.empty:
        return text + "; no timed length kept S + P within the largest cache."
    past = outside(rows[rows["stage"] == top["stage"]])["warm_speedup"]
    if past.empty:
        return text + "; no timed length took S + P past it."
    return (
        text + f"; once S + P outgrew the cache, {top['stage']}'s ratio was {number(past.median())}× in the "
        f"median (at most {number(past.max())}×)."
    )
