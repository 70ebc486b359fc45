"""Cache hand-off page: where each stage of the materialized path spends its time, timed warm
(right after the stage before it, whose output may still sit in a cache) and cold (caches
emptied first), against S + P over the largest cache, beside the roofline's prediction per
stage for this machine and for a GPU (results/stage_times.csv, results/model/
stage_predictions.csv, results/ceilings.json). The sentences are in handoff_text."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from kernels.io.tables import REST
from reports.pages.common import (
    busy_note,
    implementations,
    load,
    names,
    number,
    ok,
    sections,
    show,
    why_nothing_ran,
)

__all__ = [
    "busy_note",
    "load",
    "show",
    "empty",
    "view",
    "case_text",
    "why_no_rates",
    "rate_figure",
    "share_figure",
    "gpu_target",
    "gpu_figure",
    "bound_table",
    "ratio_table",
]

# a staged point and its case (everything but T), as both tables key them
KEY = ["impl", "batch", "heads", "tokens", "head_dim", "dtype", "causal", "inputs", "block_m", "block_n"]
CASE = [k for k in KEY if k != "tokens"]
THIS_MACHINE = "this machine"  # the target kernels.models.hierarchy.from_ceilings names
ARITHMETIC = ("products", "exponentials")  # the bounds that are not a memory level
PREFERRED_GPU = "H200"  # the GPU the page shows when the predictions have it
PREDICTED = [
    "predicted_warm_low_ms",
    "predicted_warm_high_ms",
    "predicted_cold_ms",
    "bound_warm_low",
    "bound_warm_high",
    "bound_cold",
    "largest_cache_bytes",
    "expected_warm_ms",
    "expected_cold_ms",
    "expected_fixed_ms",
]
# what each section shows, for the sentence it shows instead when the study has nothing for it
empty = sections(
    {
        "rates": "each stage's measured bytes per second, warm and cold, against S + P over the "
        "largest cache, with the machine's copy rates and the roofline's prediction",
        "bounds": "which stages are bound by memory and which by arithmetic on this machine, and "
        "how their rates change once S + P outgrow the largest cache",
        "predicted": "each stage's measured time over the roofline's prediction for this machine, "
        "and which end of the prediction's warm band the measured warm/cold ratios follow",
        "shares": "each stage's share of the whole call, and the rest of the call, against T",
        "gpu": "the roofline's prediction per stage for a GPU: its time and what bounds it",
    }
)


@dataclass(frozen=True)
class View:
    """What the page shows: the timed case (everything but T) with the most lengths, its rows
    (each stage and the rest, with this machine's prediction beside it), every prediction, and
    why a part is missing (None where it is not)."""

    case: pd.Series | None
    rows: pd.DataFrame
    timed: pd.DataFrame  # every timed stage of every case
    predictions: pd.DataFrame
    why_untimed: str | None
    why_unpredicted: str | None


def keyed(frame: pd.DataFrame) -> pd.DataFrame:
    """Block sizes as numbers, 0 where a path has none (the torch paths), so that rows of both
    tables group and merge."""
    blocks = {
        c: pd.to_numeric(frame[c], errors="coerce").fillna(0).astype(int) for c in ("block_m", "block_n")
    }
    return frame.assign(**blocks, causal=frame["causal"].astype(bool))


def main_case(frame: pd.DataFrame) -> pd.Series | None:
    """The case with the most lengths (the hand-off sweep in the default study); on a tie the
    one that is not causal."""
    if frame.empty:
        return None
    counts = frame.groupby(CASE, dropna=False)["tokens"].nunique().rename("lengths").reset_index()
    return counts.sort_values(["lengths", "causal"], ascending=[False, True], kind="stable").iloc[0][CASE]


def of_case(frame: pd.DataFrame, case: pd.Series) -> pd.DataFrame:
    return frame[(frame[CASE] == case[CASE].to_numpy()).all(axis=1)]


def describe(case: pd.Series) -> str:
    blocks = f", blocks {case['block_m']}×{case['block_n']}" if case["block_m"] else ""
    mask = "causal" if case["causal"] else "not causal"
    return (
        f"{case['impl']}, B={case['batch']}, H={case['heads']}, d={case['head_dim']}, {case['dtype']}, "
        f"{mask}{blocks}"
    )


def why_untimed(metrics: pd.DataFrame, stage_times: pd.DataFrame) -> str | None:
    """Why no stage was timed, or None when one was: nothing ran, no point that ran is a path
    timed stage by stage, or its records' own reason (the interpreter is never timed)."""
    if (stage_times["status"] == "ok").any():
        return None
    nothing = why_nothing_ran(metrics)
    if nothing:
        return nothing
    ran = ok(metrics)
    reasons = ran.dropna(subset=["stage_time_reason"]) if "stage_time_reason" in ran else ran.iloc[:0]
    if reasons.empty:
        return (
            "none of its points that ran is a materialized path whose stages are timed "
            f"({implementations(ran)})"
        )
    said = "; ".join(
        f"{names(group['impl'])}: {str(reason).removeprefix('not timed: ')}"
        for reason, group in reasons.groupby("stage_time_reason")
    )
    return f"its materialized points were not timed stage by stage ({said})"


def why_unpredicted(predictions: pd.DataFrame, ceilings: dict) -> str | None:
    """Why the predictions have no row for this machine, or None when they do."""
    if (predictions["target"] == THIS_MACHINE).any():
        return None
    if predictions.empty:
        return "this study has no forward point timed stage by stage to predict"
    missing = [k for k in ("copy_gbps", "matmul_tflops", "exp_per_s") if ceilings.get(k) is None]
    reason = ceilings.get("reason") or ceilings.get("exp_reason")
    if missing:
        lacks = f"results/ceilings.json has no {names(missing)}"
        return lacks + (f" ({reason})" if reason else "") + ", so the roofline has no rate for this machine"
    return "the prediction has no row for this machine"


def view(data) -> View:
    """The page's case and rows from its loaded inputs (metrics, stage_times,
    stage_predictions, ceilings)."""
    stage_times = keyed(data.stage_times[data.stage_times["status"] == "ok"])
    predictions = keyed(data.stage_predictions)
    case = main_case(stage_times)
    rows = stage_times.iloc[:0].reindex(columns=[*stage_times.columns, *PREDICTED])
    if case is not None:
        rows = of_case(stage_times, case).sort_values(["tokens", "order"], ignore_index=True)
        mine = predictions[predictions["target"] == THIS_MACHINE].reindex(columns=[*KEY, "stage", *PREDICTED])
        rows = (
            rows.merge(mine, on=[*KEY, "stage"], how="left")
            if len(mine)
            else rows.reindex(columns=[*rows.columns, *PREDICTED])
        )
    return View(
        case,
        rows,
        stage_times,
        predictions,
        why_untimed(data.metrics, data.stage_times),
        why_unpredicted(data.stage_predictions, data.ceilings),
    )


def why_no_rates(v: View) -> str:
    """Why the rate figure is missing: no timed stage, or no cache size to hold S + P against."""
    return v.why_untimed or "the records give no size of the largest cache to hold S + P against"


def stages(rows: pd.DataFrame) -> list[str]:
    """The stages in chain order, the rest left out."""
    staged = rows[rows["stage"] != REST].sort_values("order")
    return list(dict.fromkeys(staged["stage"]))


def case_text(v: View) -> str:
    """Which case the page shows, and how far its lengths take S + P past the largest cache."""
    if v.case is None:
        return empty("rates", v.why_untimed)
    x = v.rows["sp_over_cache"].dropna()
    spread = (
        f"; S + P runs from {number(x.min())}× to {number(x.max())}× the largest cache "
        f"({number(v.rows['last_cache_bytes'].dropna().iloc[0] / 2**20)} MiB)"
        if len(x)
        else "; the records give no size of the largest cache"
    )
    lengths = v.rows["tokens"].nunique()
    return (
        f"**Shown:** {describe(v.case)}, at {lengths} length{'s' * (lengths != 1)} "
        f"({lengths_of(v.rows['tokens'])}){spread}.{others_text(v)}"
    )


def lengths_of(tokens: pd.Series) -> str:
    """'T = 256', 'T = 256 and 1,024' or 'T from 256 to 8,192' (a list of thousands with commas
    would read as one number)."""
    found = [f"{t:,}" for t in sorted({int(t) for t in tokens})]
    if len(found) > 2:
        return f"T from {found[0]} to {found[-1]}"
    return "T = " + " and ".join(found)


def others_text(v: View) -> str:
    """The other timed cases, which the page leaves to the table results/stage_times.csv."""
    others = v.timed[~(v.timed[CASE] == v.case[CASE].to_numpy()).all(axis=1)]
    if others.empty:
        return ""
    cases = [
        f"{describe(pd.Series(dict(zip(CASE, key, strict=True))))} at {lengths_of(group['tokens'])}"
        for key, group in others.groupby(CASE, dropna=False, sort=False)
    ]
    return " The study also timed " + "; ".join(cases) + ": results/stage_times.csv holds them."


# --- figures --------------------------------------------------------------------------------


def _rate(bytes_: pd.Series, ms: pd.Series) -> pd.Series:
    return bytes_ / (ms / 1e3) / 1e9


def unmeasured_levels_text(ceilings: dict) -> str | None:
    """The memory levels the figure has no copy rate for, each with the reason the ceilings
    gave (a level too small to time on a busy machine): named, never silently left out."""
    unmeasured = [level for level in ceilings.get("levels") or [] if not level.get("copy_gbps")]
    if not unmeasured:
        return None
    said = "; ".join(
        f"{level['level']} ({level.get('reason') or 'the ceilings give no reason'})" for level in unmeasured
    )
    one = len(unmeasured) == 1
    return (
        f"**Not drawn:** the copy rate {'of' if one else 'of each of'} {said}: "
        f"results/ceilings.json has no rate for {'it' if one else 'them'}."
    )


LEVEL_LINES = (("copy_gbps", "-", "copy", 0.0, "left"), ("update_gbps", "--", "in place", 1.0, "right"))


def _levels(ax, ceilings: dict, colours, named: bool) -> None:
    """The measured copy rate of each memory level (and its in-place update rate, where
    measured) as horizontal guides; ``named``: each named on the panel, copies at its left
    edge, in-place rates at its right."""
    for colour, level in zip(colours, ceilings.get("levels") or [], strict=False):
        for field, style, word, edge, align in LEVEL_LINES:
            if not level.get(field):
                continue
            label = f"{level['level']} {word}, {number(level[field])} GB/s"
            ax.axhline(level[field], color=colour, lw=0.9, ls=style, alpha=0.8, label=label)
            if named:
                ax.annotate(
                    level["level"] if field == "copy_gbps" else f"{level['level']} in place",
                    (edge, level[field]),
                    xycoords=("axes fraction", "data"),
                    xytext=(2 if edge == 0 else -2, 2),
                    textcoords="offset points",
                    ha=align,
                    fontsize=7,
                    color="dimgrey",
                )


def _stage_panel(ax, rows: pd.DataFrame, ceilings: dict, named: bool) -> None:
    rows = rows.dropna(subset=["sp_over_cache"]).sort_values("sp_over_cache")
    x = rows["sp_over_cache"]
    predicted = rows.dropna(subset=["predicted_cold_ms"])
    if len(predicted):
        px = predicted["sp_over_cache"]
        low = _rate(predicted["bytes"], predicted["predicted_warm_low_ms"])
        high = _rate(predicted["bytes"], predicted["predicted_warm_high_ms"])
        ax.fill_between(px, high, low, color="tab:red", alpha=0.15, lw=0)
        ax.plot(px, low, color="tab:red", lw=1, ls="-", label="warm, predicted (optimistic end)")
        ax.plot(px, high, color="tab:red", lw=1, ls=":", label="warm, predicted (pessimistic end)")
        cold = _rate(predicted["bytes"], predicted["predicted_cold_ms"])
        ax.plot(px, cold, color="tab:blue", lw=1, ls="-.", label="cold, predicted")
    ax.scatter(x, rows["gbps"], color="tab:red", s=30, zorder=3, label="warm, measured")
    ax.scatter(
        x, rows["cold_gbps"], facecolors="none", edgecolors="tab:blue", s=36, zorder=3, label="cold, measured"
    )
    _levels(ax, ceilings, sns.color_palette("Greys_r", 8)[1:], named)
    ax.axvline(1.0, color="black", ls=(0, (2, 2)), lw=1, label="S + P = largest cache")
    ax.set(xscale="log", yscale="log", xlabel="S + P over the largest cache")
    ax.set_xscale("log", base=2)
    ax.set_title(f"{rows['stage'].iloc[0]}: {rows['does'].iloc[0]}", fontsize=9)


def rate_figure(v: View, ceilings: dict):
    """Per stage, GB/s (the model's bytes over the measured time) warm and cold against S + P
    over the largest cache, with the copy rate of each level, this machine's predicted band
    (warm) and line (cold), and the crossing marked; None without timed stages."""
    rows = v.rows.dropna(subset=["sp_over_cache"])
    shown = stages(rows)
    if not shown:
        return None
    fig, axes = plt.subplots(1, len(shown), figsize=(3.4 * len(shown), 4.0), sharey=True, squeeze=False)
    for ax, stage in zip(axes[0], shown, strict=True):
        _stage_panel(ax, rows[rows["stage"] == stage], ceilings, ax is axes[0][0])
    axes[0][0].set_ylabel("GB/s (model bytes over time)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=4, fontsize=7, bbox_to_anchor=(0.5, 0.02))
    fig.suptitle(f"Each stage's rate, warm and cold — {describe(v.case)}", fontsize=11)
    fig.tight_layout()
    return fig


def share_figure(v: View):
    """Each stage's share of the call, and the rest's, against T; None without timed stages."""
    if v.rows.empty:
        return None
    fig, ax = plt.subplots()
    order = [*stages(v.rows), REST]
    colours = dict(zip(order, sns.color_palette("tab10", len(order)), strict=True))
    for stage in order:
        line = v.rows[v.rows["stage"] == stage].sort_values("tokens")
        if line.empty:
            continue
        ax.plot(
            line["tokens"],
            100 * line["share_of_call"],
            marker="o",
            color=colours[stage],
            ls="--" if stage == REST else "-",
            label=stage if stage != REST else "rest (the call beyond its stages)",
        )
    ax.axhline(0, color="grey", lw=0.8)
    ax.set(
        xlabel="T (tokens)",
        ylabel="share of the call's time, %",
        title=f"Where the call's time goes — {describe(v.case)}",
    )
    ax.set_xscale("log", base=2)
    ax.legend(fontsize=8)
    return fig


def gpu_target(predictions: pd.DataFrame) -> str | None:
    """The GPU the page shows: the H200 where the predictions have it, else the first GPU."""
    gpus = [t for t in dict.fromkeys(predictions["target"]) if t != THIS_MACHINE]
    if not gpus:
        return None
    return PREFERRED_GPU if PREFERRED_GPU in gpus else gpus[0]


def predicted_case(v: View) -> pd.Series | None:
    """The case the GPU section shows: the measured one where the predictions have it."""
    if v.case is not None and len(of_case(v.predictions, v.case)):
        return v.case
    return main_case(v.predictions)


def is_memory(bound: str) -> bool:
    return bound not in ARITHMETIC


MARKERS = {True: "o", False: "s"}  # bound by memory: circles; by arithmetic: squares
BOUND_KINDS = {True: "bound by memory", False: "bound by arithmetic"}
LINES = ["-", "--", "-.", ":"]  # stages whose predictions coincide stay visible


def _predicted_panel(ax, rows: pd.DataFrame, colours: dict) -> None:
    for place, (stage, line) in enumerate(rows.groupby("stage", sort=False)):
        line = line.sort_values("tokens")
        colour = colours[stage]
        low, high = line["predicted_warm_low_ms"], line["predicted_warm_high_ms"]
        ax.fill_between(line["tokens"], low, high, color=colour, alpha=0.15)
        ax.plot(line["tokens"], high, color=colour, lw=1.4, ls=LINES[place % len(LINES)], label=stage)
        for memory, points in line.groupby(line["bound_warm_high"].map(is_memory)):
            ax.scatter(
                points["tokens"],
                points["predicted_warm_high_ms"],
                marker=MARKERS[memory],
                color=colour,
                edgecolors="black",
                s=28,
                zorder=3,
                label=f"_{stage} {BOUND_KINDS[memory]}",
            )
    ax.set(xscale="log", yscale="log", xlabel="T (tokens)")
    ax.set_xscale("log", base=2)


def _bound_handles() -> list:
    """Legend entries for the two marker shapes, in black (each stage has its colour)."""
    from matplotlib.lines import Line2D

    return [
        Line2D(
            [],
            [],
            marker=MARKERS[memory],
            color="white",
            markerfacecolor="grey",
            markeredgecolor="black",
            label=BOUND_KINDS[memory],
        )
        for memory in (True, False)
    ]


def gpu_figure(v: View):
    """The roofline's time per stage against T on the GPU, beside this machine's where it has
    a prediction: warm band, its pessimistic end as a line, each point marked by what bounds
    it. None without a GPU prediction."""
    target, case = gpu_target(v.predictions), predicted_case(v)
    if target is None or case is None:
        return None
    rows = of_case(v.predictions, case)
    targets = [t for t in (target, THIS_MACHINE) if (rows["target"] == t).any()]
    fig, axes = plt.subplots(1, len(targets), figsize=(5.2 * len(targets), 4.3), squeeze=False)
    order = list(dict.fromkeys(rows["stage"]))
    colours = dict(zip(order, sns.color_palette("tab10", len(order)), strict=True))
    for ax, name in zip(axes[0], targets, strict=True):
        _predicted_panel(ax, rows[rows["target"] == name], colours)
        ax.set_title(f"{name}, predicted", fontsize=10)
    axes[0][0].set_ylabel("predicted time per stage, ms (warm)")
    handles = axes[0][0].get_legend_handles_labels()[0] + _bound_handles()
    fig.legend(handles=handles, loc="upper center", ncol=6, fontsize=8, bbox_to_anchor=(0.5, 0.02))
    fig.suptitle(f"Predicted, not measured: each stage on the {target} — {describe(case)}", fontsize=11)
    fig.tight_layout()
    return fig


def bound_table(v: View) -> pd.DataFrame:
    """The prediction per stage at the largest T of the GPU section's case, on the GPU and on
    this machine: the warm band, the cold time and what bounds each."""
    target, case = gpu_target(v.predictions), predicted_case(v)
    if target is None or case is None:
        return pd.DataFrame()
    rows = of_case(v.predictions, case)
    rows = rows[rows["target"].isin([target, THIS_MACHINE]) & (rows["tokens"] == rows["tokens"].max())]
    table = rows[["target", "tokens", "stage", "predicted_warm_low_ms", "predicted_warm_high_ms"]].copy()
    table["bound_warm"] = [
        low if low == high else f"{low} to {high}"
        for low, high in zip(rows["bound_warm_low"], rows["bound_warm_high"], strict=True)
    ]
    table["predicted_cold_ms"] = rows["predicted_cold_ms"]
    table["bound_cold"] = rows["bound_cold"]
    return table.reset_index(drop=True)


def ratio_table(v: View) -> pd.DataFrame:
    """Per timed length and stage: the measured warm and cold times, their ratio, and each over
    this machine's prediction (warm against both ends of the band)."""
    rows = v.rows[(v.rows["stage"] != REST)].dropna(subset=["predicted_cold_ms"])
    if rows.empty:
        return pd.DataFrame()
    return pd.DataFrame(
        {
            "tokens": rows["tokens"],
            "stage": rows["stage"],
            "sp_over_cache": rows["sp_over_cache"],
            "warm_ms": rows["time_ms"],
            "cold_ms": rows["cold_time_ms"],
            "warm_speedup": rows["warm_speedup"],
            "warm / optimistic end": rows["time_ms"] / rows["predicted_warm_low_ms"],
            "warm / pessimistic end": rows["time_ms"] / rows["predicted_warm_high_ms"],
            "cold / predicted": rows["cold_time_ms"] / rows["predicted_cold_ms"],
        }
    ).reset_index(drop=True)
