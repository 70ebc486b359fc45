"""The Cache hand-off page's answers, which come before its figures: what bounds each stage on
this machine and the rate it reached, whether this machine's caches can serve the hand-off at
all, where S + P outgrow them, and how close the expected times came to the measured ones
(kernels.models.expected's model, read from results/model/stage_predictions.csv). Every figure
is computed from the page's inputs."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from kernels.io.tables import REST
from kernels.spec import ELEMENT_BYTES, MIN_DATA_SHARE
from reports.pages.common import number
from reports.pages.handoff import CASE, KEY, THIS_MACHINE, View, describe, keyed
from reports.pages.rates import BYTES, ELEMENTS, FLOPS, Rate, data_ms, rate, too_short

__all__ = ["checked", "stage_answers", "cache_answer", "accuracy_text", "accuracy_figure", "accuracy_table"]

BAND = 0.25  # measured within this share of expected is the goal above FIXED_TIMES fixed costs
FIXED_TIMES = 5  # a stage taking more than this many times its fixed cost: its data dominates
LOOSE = 2.0  # below that, within this factor
HARDLY = 1.25  # a cache copying less than this many times DRAM's rate hardly serves anything
EXPECTED = ["expected_warm_ms", "expected_cold_ms", "expected_fixed_ms"]
SHAPE_OF_STAGE = {"scores": "qk", "pv": "pv"}
DRIFT_COLUMNS = ["warm_drift", "warm_ratio_over_drift", "cold_drift", "cold_ratio_over_drift"]


def checked(v: View, ceilings: dict | None = None) -> pd.DataFrame:
    """Every timed stage with its expected times on this machine (a PyTorch path's: the only
    ones the prediction gives them; all cases: each dtype, causal or not), and measured over
    expected warm and cold; empty without them. With ``ceilings`` holding a reference pass
    and the records theirs: the machine's drift beside each stage (drift)."""
    mine = v.predictions[v.predictions["target"] == THIS_MACHINE]
    if mine.empty or "expected_warm_ms" not in mine or v.timed.empty:
        return pd.DataFrame()
    timed = v.timed[v.timed["stage"] != REST]
    rows = timed.merge(keyed(mine)[[*KEY, "stage", *EXPECTED]], on=[*KEY, "stage"], how="inner")
    rows = rows.dropna(subset=["expected_warm_ms", "expected_cold_ms"])
    return rows.assign(
        warm_ratio=rows["time_ms"] / rows["expected_warm_ms"],
        cold_ratio=rows["cold_time_ms"] / rows["expected_cold_ms"],
        data_dominates=rows["time_ms"] > FIXED_TIMES * rows["expected_fixed_ms"],
        **drift_of(rows, (ceilings or {}).get("reference_pass")),
    ).reset_index(drop=True)


def drift_of(rows: pd.DataFrame, then: dict | None) -> dict[str, pd.Series]:
    """How much more slowly the machine ran the reference pass beside each stage than when the
    ceilings were measured (kernels.measure.reference_pass), warm and cold: the product's for
    a stage with products and for a pass whose data the caches hold (the cores' speed), the
    copy past the caches' for a pass from DRAM (cold, or warm past the largest cache); NaN
    where either side has none."""
    nan = pd.Series(np.nan, index=rows.index)
    if not then or "reference_copy_gbps" not in rows:
        return {"warm_drift": nan, "cold_drift": nan}
    copy = then["copy_gbps"] / pd.to_numeric(rows["reference_copy_gbps"], errors="coerce")
    product = then["product_gflops"] / pd.to_numeric(rows["reference_product_gflops"], errors="coerce")
    products = rows["flops"].fillna(0) > 0
    footprint = rows["footprint_bytes"] if "footprint_bytes" in rows else rows["bytes"]
    past = (footprint > rows["last_cache_bytes"]).fillna(True).astype(bool)
    return {
        "warm_drift": product.where(products | ~past, copy),
        "cold_drift": product.where(products, copy),
    }


def _ops(ceilings: dict) -> dict:
    return ceilings.get("ops") or {}


def _pass_rates(ceilings: dict, dtype: str, op: str) -> dict[str, float]:
    return {
        p["place"]: p["per_s"]
        for p in _ops(ceilings).get("passes") or []
        if p["dtype"] == dtype and p["op"] == op and p.get("per_s")
    }


def _product_rates(ceilings: dict, dtype: str, head_dim: int, shape: str) -> dict[str, tuple[int, float]]:
    """place → (T, FLOP/s) of the products the ceilings timed in this shape."""
    return {
        p["place"]: (p["tokens"], p["flops_per_s"])
        for p in _ops(ceilings).get("products") or []
        if p["dtype"] == dtype and p["head_dim"] == head_dim and p["shape"] == shape and p.get("flops_per_s")
    }


PLACE_WORDS = {"short": "the sweep's shortest", "inside": "inside the cache", "past": "past it"}


def _bound_words(stage: str, case: pd.Series, ceilings: dict) -> tuple[str, str]:
    """(what bounds the stage, the rates that say so) from the ceilings' operation rates: a
    pass whose rate inside the cache is more than 1.5 times its rate past it is bound by
    memory once S + P outgrow the cache; one whose rates are alike, by its own arithmetic."""
    if stage in SHAPE_OF_STAGE:
        rates = _product_rates(ceilings, case["dtype"], int(case["head_dim"]), SHAPE_OF_STAGE[stage])
        said = ", ".join(
            f"{number(r / 1e9)} GFLOP/s at T = {t:,} ({PLACE_WORDS.get(place, place)})"
            for place, (t, r) in sorted(rates.items(), key=lambda item: item[1][0])
        )
        return "its matrix products", f"the ceilings timed this product at {said}"
    rates = _pass_rates(ceilings, case["dtype"], stage)  # a pass is named as its stage
    if "inside" not in rates or "past" not in rates:
        return "", ""
    unit = "billion elements" if stage == "softmax" else "GB/s"
    said = (
        f"the ceilings timed it at {number(rates['inside'] / 1e9)} {unit} inside the cache and "
        f"{number(rates['past'] / 1e9)} past it"
    )
    if rates["inside"] > 1.5 * rates["past"]:
        return "memory once S + P outgrow the cache", said
    return "its own arithmetic, whichever memory serves it", said


def reached_rate(row: pd.Series, ceilings: dict) -> Rate:
    """The rate a timed stage reached with its fixed cost taken out (products: FLOP/s;
    softmax: elements per second; the passes: GB/s), or why none is stated: its data time does
    not stand measurably above its fixed cost, or the rate would beat the ceilings
    (reports.pages.rates)."""
    spread = row.get("time_p90_ms", np.nan) - row.get("time_p10_ms", np.nan)
    data = data_ms(row["time_ms"], row["expected_fixed_ms"], None if pd.isna(spread) else spread)
    if data is None:
        return too_short(
            f"it took {number(row['time_ms'] * 1e3)} µs against a fixed cost of "
            f"{number(row['expected_fixed_ms'] * 1e3)} µs: what is left to its data is within the "
            f"spread of its repeats or under {number(100 * MIN_DATA_SHARE)}% of its time"
        )
    if row["stage"] in SHAPE_OF_STAGE:
        return rate(row["flops"] / (data / 1e3), FLOPS, ceilings, "GFLOP/s")
    if row["stage"] == "softmax":
        return rate(row["exps"] / (data / 1e3), ELEMENTS, ceilings, "billion elements per second")
    return rate(row["bytes"] / (data / 1e3), BYTES, ceilings)


def stage_answers(v: View, ceilings: dict) -> str:
    """One sentence per stage of the page's case, at its longest length: what bounds it, the
    rate it reached with its fixed cost taken out against the rate the ceilings measured, and
    measured over expected."""
    rows = checked(v)
    if v.case is None or rows.empty:
        return ""
    case = v.case
    mine = rows[(rows[CASE] == case[CASE].to_numpy()).all(axis=1)]
    if mine.empty:
        return ""
    longest = mine[mine["tokens"] == mine["tokens"].max()].sort_values("order")
    lines = [f"**What bounds each stage here** ({describe(case)}, T = {int(longest['tokens'].iloc[0]):,}):"]
    for _, row in longest.iterrows():
        bound, said = _bound_words(row["stage"], case, ceilings)
        reached = reached_rate(row, ceilings)
        text = f"- **{row['stage']}** ({row['does']}): bound by {bound or 'what its rates do not say'}; " + (
            f"it reached {reached.text} with its fixed cost taken out"
            if reached.measured
            else f"it was {reached.text}"
        )
        text += f" ({said})" if said else ""
        text += (
            f"; warm it took {number(row['warm_ratio'])}× its expected time, "
            f"cold {number(row['cold_ratio'])}×."
        )
        lines.append(text)
    return "\n".join(lines)


def _largest_cache(ceilings: dict) -> dict | None:
    caches = [lv for lv in ceilings.get("levels") or [] if lv.get("level") != "DRAM" and lv.get("bytes")]
    return max(caches, key=lambda lv: lv["bytes"]) if caches else None


def cache_answer(v: View, ceilings: dict) -> str:
    """Whether this machine's caches can serve the hand-off at all (its largest cache's copy
    rate against DRAM's), and the length at which S + P fill that cache."""
    largest = _largest_cache(ceilings)
    dram = next((lv for lv in ceilings.get("levels") or [] if lv.get("level") == "DRAM"), None)
    if not largest or not dram or not largest.get("copy_gbps") or not dram.get("copy_gbps"):
        return (
            "**Can this machine's caches serve the hand-off?** The ceilings give no copy rate for "
            "the largest cache and DRAM to say."
        )
    ratio = largest["copy_gbps"] / dram["copy_gbps"]
    rates = (
        f"the {largest['level']} copies at {number(largest['copy_gbps'])} GB/s, "
        f"DRAM at {number(dram['copy_gbps'])} GB/s"
    )
    if ratio < HARDLY:
        verdict = (
            f"hardly: {rates} (only {number(ratio)}×), so a hand-off the cache holds moves about "
            "as fast as one from DRAM, and warm and cold differ little"
        )
    else:
        verdict = (
            f"yes: {rates}, {number(ratio)}× faster, so a stage bound by memory can run up to "
            "that much faster warm while S + P fit"
        )
    text = f"**Can this machine's caches serve the hand-off?** {verdict}."
    if v.case is not None:
        e = ELEMENT_BYTES[v.case["dtype"]]
        crossing = int(np.sqrt(largest["bytes"] / (2 * e)))
        text += (
            f" S + P fill the {largest['level']} ({number(largest['bytes'] / 2**20)} MiB) at "
            f"T ≈ {crossing:,} in {v.case['dtype']}; the figures below mark it."
        )
    return text


def _ratios(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per measurement (warm and cold of each stage timed): its ratio, the same over
    the machine's drift, and whether its data dominates."""
    both = [
        rows.assign(
            kind=kind, ratio=rows[f"{kind}_ratio"], drift=rows[f"{kind}_drift"],
            undrifted=rows[f"{kind}_ratio"] / rows[f"{kind}_drift"],
        )[["stage", "tokens", "dtype", "causal", "kind", "ratio", "drift", "undrifted", "data_dominates"]]
        for kind in ("warm", "cold")
    ]  # fmt: skip
    return pd.concat(both, ignore_index=True)


def drift_text(big: pd.DataFrame, ceilings: dict | None) -> str | None:
    """What the machine's drift explains: its range over the points, the count within the band
    once it is taken out, and how far the reference pass moved on its own within the ceilings
    job (its noise); None where no record timed the reference pass."""
    drift, undrifted = big["drift"].dropna(), big["undrifted"].dropna()
    if drift.empty or undrifted.empty:
        return None
    held = int(((undrifted - 1).abs() <= BAND).sum())
    text = (
        f"the machine ran the reference pass timed beside each point from {number(drift.min())}× to "
        f"{number(drift.max())}× as slowly as when the ceilings were measured; with that drift taken "
        f"out, {held} of {len(undrifted)} are within ±{int(BAND * 100)}%"
    )
    start, end = (ceilings or {}).get("reference_pass"), (ceilings or {}).get("reference_pass_end")
    if start and end:
        moved = {k: abs(end[k] / start[k] - 1) * 100 for k in ("copy_gbps", "product_gflops")}
        text += (
            f" (within the ceilings job alone the same pass moved {number(moved['copy_gbps'], 2)}% "
            f"for the copy and {number(moved['product_gflops'], 2)}% for the product: a drift within "
            "that is the reference's own noise)"
        )
    return text


def why_unchecked(v: View, ceilings: dict | None = None) -> str:
    """Why no timed stage has an expected time beside it: which of the things it needs is
    missing (a timed stage, this machine's prediction, the ceilings' operation rates)."""
    if v.timed.empty:
        return v.why_untimed or "no stage was timed"
    if v.why_unpredicted:
        return f"this machine has no prediction: {v.why_unpredicted}"
    if ceilings is not None and not _ops(ceilings):
        return (
            "results/ceilings.json holds no operation rates (its ops are missing or null: measured "
            "without the sweep's products), and the expected times are made of them"
        )
    timed = sorted(set(v.timed["dtype"]))
    products = {p["dtype"] for p in _ops(ceilings or {}).get("products") or [] if p.get("flops_per_s")}
    if ceilings is not None and not products & set(timed):
        return (
            f"results/ceilings.json times no product of the stages' shapes in {' or '.join(timed)} "
            f"(only in {', '.join(sorted(products)) or 'none'}), and the expected times are made of them"
        )
    return "no timed stage is one this machine's prediction gives an expected time"


def accuracy_text(v: View, ceilings: dict | None = None) -> str:
    """How many measured stage times came within ±BAND of expected where the data dominates,
    and within LOOSE× below that; the worst of each. ``ceilings``: to say which input is
    missing where there is none, and the reference pass the drift is measured against."""
    rows = checked(v, ceilings)
    if rows.empty:
        return (
            "**Expected against measured:** no stage has both a measured and an expected time "
            f"here: {why_unchecked(v, ceilings)}."
        )
    found = _ratios(rows)
    big, small = found[found["data_dominates"]], found[~found["data_dominates"]]
    parts = []
    if len(big):
        held = (big["ratio"] - 1).abs() <= BAND
        worst = big.loc[(np.log(big["ratio"])).abs().idxmax()]
        mask = " causal" if worst["causal"] else ""
        parts.append(
            f"{int(held.sum())} of {len(big)} stage times (warm and cold) within ±{int(BAND * 100)}% "
            f"of expected where the stage takes more than {FIXED_TIMES}× its fixed cost (worst: "
            f"{worst['stage']} {worst['kind']}, {worst['dtype']}{mask}, T = {int(worst['tokens']):,}, "
            f"{number(worst['ratio'])}×)"
        )
    if len(small):
        held = (np.log(small["ratio"])).abs() <= np.log(LOOSE)
        parts.append(f"{int(held.sum())} of {len(small)} within {number(LOOSE)}× below that")
    drifted = drift_text(big, ceilings)
    if drifted:
        parts.append(drifted)
    return "**Expected against measured:** " + "; ".join(parts) + "."


def accuracy_figure(v: View):
    """Measured over expected per stage against T, warm (filled) and cold (open), one colour
    per dtype and mask, the ±BAND band shaded; None without expected times."""
    rows = checked(v)
    if rows.empty:
        return None
    # in the chain's order: a stage's place in the longest chain timed (causal: with the mask)
    shown = list(rows.groupby("stage")["order"].max().sort_values().index)
    fig, axes = plt.subplots(1, len(shown), figsize=(3.2 * len(shown), 3.6), sharey=True, squeeze=False)
    cases = list(dict.fromkeys(zip(rows["dtype"], rows["head_dim"], rows["causal"], strict=True)))
    colours = dict(zip(cases, sns.color_palette("tab10", len(cases)), strict=True))
    several_d = rows["head_dim"].nunique() > 1
    for ax, stage in zip(axes[0], shown, strict=True):
        ax.axhspan(1 - BAND, 1 + BAND, color="tab:green", alpha=0.12, lw=0)
        ax.axhline(1, color="tab:green", lw=0.8)
        for (dtype, head_dim, causal), colour in colours.items():
            mine = rows[
                (rows["stage"] == stage)
                & (rows["dtype"] == dtype)
                & (rows["head_dim"] == head_dim)
                & (rows["causal"] == causal)
            ].sort_values("tokens")
            label = f"{dtype}{f', d = {head_dim}' if several_d else ''}{', causal' if causal else ''}"
            ax.plot(
                mine["tokens"], mine["warm_ratio"], "o-", color=colour, ms=4, lw=0.8, label=f"{label}, warm"
            )
            ax.plot(
                mine["tokens"],
                mine["cold_ratio"],
                "o--",
                color=colour,
                ms=5,
                lw=0.6,
                mfc="none",
                label=f"{label}, cold",
            )
            small = mine[~mine["data_dominates"]]
            ax.scatter(small["tokens"], small["warm_ratio"], marker="x", color="black", s=14, zorder=4)
        ax.set(xscale="log", yscale="log", title=stage, xlabel="T")
        ax.set_xscale("log", base=2)
    axes[0][0].set_ylabel("measured / expected")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=4, fontsize=7, bbox_to_anchor=(0.5, 0.02))
    fig.suptitle(
        f"Measured over expected, per stage (band: ±{int(BAND * 100)}%; "
        f"×: under {FIXED_TIMES}× its fixed cost)",
        fontsize=10,
    )
    fig.tight_layout()
    return fig


def accuracy_table(v: View, ceilings: dict | None = None) -> pd.DataFrame:
    """Every stage time beside its expected time: the figure's points, with the machine's
    drift beside each where the reference pass was timed."""
    rows = checked(v, ceilings)
    if rows.empty:
        return pd.DataFrame()
    if rows["warm_drift"].notna().any():
        rows = rows.assign(
            warm_ratio_over_drift=rows["warm_ratio"] / rows["warm_drift"],
            cold_ratio_over_drift=rows["cold_ratio"] / rows["cold_drift"],
        )
    return rows[
        [
            "dtype",
            "head_dim",
            "causal",
            "tokens",
            "stage",
            "time_ms",
            "expected_warm_ms",
            "warm_ratio",
            "cold_time_ms",
            "expected_cold_ms",
            "cold_ratio",
            "expected_fixed_ms",
            *(DRIFT_COLUMNS if "warm_ratio_over_drift" in rows else []),
        ]
    ].sort_values(["dtype", "head_dim", "causal", "stage", "tokens"], ignore_index=True)
