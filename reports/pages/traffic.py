"""Traffic page: the bytes each stage moves through global memory (model), the interpreter's
count held against the model, DRAM against the model on a GPU, and the fused kernel's traffic
against its block size."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from reports.pages.common import (
    MIB,
    describe_case,
    headline_shape,
    load,
    names,
    no_point,
    no_point_of,
    no_prediction,
    number,
    ok,
    sections,
    show,
    triton_points,
    why_nothing_ran,
)
from reports.pages.paths import triton_path

__all__ = [
    "load",
    "show",
    "empty",
    "why_no_triton",
    "why_uncounted",
    "headline_figure",
    "headline_text",
    "traffic_by_stage",
    "stacked_traffic_figure",
    "counted_vs_model",
    "counted_summary",
    "dram_figure",
    "no_dram",
    "block_case",
    "block_figure",
    "no_prediction",
    "why_no_blocks",
]

STAGE_ORDER = ["Q load", "K load", "V load", "S store", "S load", "P store", "P load", "O store"]
CASE = ["batch", "heads", "head_dim", "dtype", "causal", "block_m", "block_n"]


PATH_STYLE = {"materialized": "tab:red", "s_only": "tab:purple", "fused": "tab:blue"}
# what each section shows, for the sentence it shows instead when the study has nothing for it
empty = sections(
    {
        "by stage": "the bytes each stage of the Triton kernels moves (the model, as issued), as "
        "shares of each point's total",
        "counted": "the bytes the Triton interpreter counted at each point against the model",
        "dram": "the DRAM bytes Nsight Compute measured against the model, with the S/P "
        "footprint relative to L2",
        "blocks": "the fused kernel's modelled traffic against its block size at this study's longest case",
        "headline": "each path's bytes through global memory against T (the model as issued and "
        "compulsory, and the interpreter's counts) for one of the study's shapes",
    }
)


def why_no_triton(metrics: pd.DataFrame) -> str | None:
    """Why the study has no Triton point, or None when it has one."""
    if not triton_points(metrics).empty:
        return None
    return no_point_of(metrics, "Triton point")


def _model_lines(predictions: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """The model's bytes of our three paths over T for the headline shape (one GPU's rows: the
    model's bytes do not depend on the GPU), as issued and compulsory (each of Q, K, V and O
    once, and S and P stored and loaded once where a path stores both, S stored once and
    loaded twice where it stores S only), as the predict rule wrote them."""
    shape = headline_shape(predictions)
    rows = predictions[(predictions["shape"] == shape) & predictions["path"].isin(list(PATH_STYLE))]
    rows = rows[rows["gpu"] == rows["gpu"].iloc[0]].sort_values("tokens")
    return rows, rows.iloc[0]


def headline_figure(predictions: pd.DataFrame, metrics: pd.DataFrame):
    """Bytes through global memory against T, both paths, log–log: the model as issued and
    compulsory, the points the interpreter counted on top, and T² and T guides; None where
    there is no prediction (no_prediction says why)."""
    if predictions.empty:
        return None
    rows, first = _model_lines(predictions)
    fig, ax = plt.subplots()
    for path, colour in PATH_STYLE.items():
        line = rows[rows["path"] == path]
        if line.empty:
            continue
        impl = line["impl"].iloc[0]  # the Triton path the prediction costs this design as
        ax.plot(
            line["tokens"],
            line["issued_bytes"] / MIB,
            color=colour,
            lw=1.8,
            label=f"{path} ({impl}), as issued",
        )
        ax.plot(
            line["tokens"],
            line["compulsory_bytes"] / MIB,
            color=colour,
            lw=1,
            ls="-.",
            label=f"{path}, compulsory",
        )
        counted = metrics[
            (metrics["impl"] == impl)
            & metrics["traffic_counted_bytes"].notna()
            & (metrics["inputs"] == "normal")
        ]
        counted = counted[(counted[CASE] == first[CASE]).all(axis=1)]
        if len(counted):
            ax.scatter(
                counted["tokens"],
                counted["traffic_counted_bytes"] / MIB,
                color=colour,
                edgecolor="black",
                zorder=3,
                s=45,
                label=f"{path}, counted in the interpreter",
            )
    tokens = rows["tokens"].drop_duplicates().to_numpy(dtype=float)
    start = rows[rows["tokens"] == tokens[0]].set_index("path")
    square = start.loc["materialized", "issued_bytes"] / MIB / 3
    linear = start.loc["fused", "compulsory_bytes"] / MIB / 3
    ax.plot(tokens, square * (tokens / tokens[0]) ** 2, color="grey", ls=":", lw=1, label="guide ∝ T²")
    ax.plot(tokens, linear * (tokens / tokens[0]), color="grey", ls="--", lw=1, label="guide ∝ T")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="T (tokens)",
        ylabel="bytes loaded and stored, MiB",
        title=f"Global traffic against T — {describe_case(first)}, "
        f"blocks {int(first['block_m'])}×{int(first['block_n'])}",
    )
    ax.set_xscale("log", base=2)
    ax.legend(fontsize=7)
    return fig


def headline_text(predictions: pd.DataFrame) -> str:
    """The gap in absolute bytes at the largest T the sweep ran, and at the end of the grid."""
    rows, first = _model_lines(predictions)
    swept = rows[rows["in_sweep"].astype(bool)]
    lines = []
    for label, frame in (("the largest swept", swept), ("the largest shown", rows)):
        if frame.empty:
            continue
        at = frame[frame["tokens"] == frame["tokens"].max()].set_index("path")
        issued, compulsory = at["issued_bytes"] / MIB, at["compulsory_bytes"] / MIB
        lines.append(
            f"- At T = {int(frame['tokens'].max()):,} ({label}): the materialized path issues "
            f"{number(issued['materialized'])} MiB ({number(compulsory['materialized'])} MiB "
            f"compulsory), the fused one {number(issued['fused'])} MiB ({number(compulsory['fused'])} "
            f"MiB compulsory): {number(issued['materialized'] / issued['fused'])}× as issued, "
            f"{number(compulsory['materialized'] / compulsory['fused'])}× compulsory."
        )
        if "s_only" in at.index:
            lines.append(
                f"  Between them, storing S but never P issues {number(issued['s_only'])} MiB "
                f"({number(compulsory['s_only'])} MiB compulsory): "
                f"{number(issued['s_only'] / issued['materialized'] * 100)} % of the materialized "
                f"path's bytes, {number(issued['s_only'] / issued['fused'])}× the fused one's."
            )
    return "\n".join(lines)


def traffic_by_stage(stages: pd.DataFrame, column: str = "model_bytes") -> pd.DataFrame:
    data = stages[stages[column].notna()].copy()  # the modelled (or counted) implementations
    if data.empty:
        return data
    data["stage"] = data["tensor"] + " " + data["op"]
    data["MiB"] = data[column] / MIB
    return data.groupby(["impl", "tokens", *CASE, "stage"], as_index=False)["MiB"].sum()


def stacked_traffic_figure(by_stage: pd.DataFrame, metrics: pd.DataFrame):
    """Each stage's share of the materialized and the fused Triton path's bytes, per T."""
    impls = [triton_path("SP", metrics), triton_path("none", metrics)]
    data = by_stage[by_stage["impl"].isin(impls)]
    if data.empty:
        return None
    first = data.iloc[0]
    data = data[(data[CASE] == first[CASE]).all(axis=1)]
    table = data.pivot_table(
        index=["tokens", "impl"], columns="stage", values="MiB", aggfunc="sum", fill_value=0.0
    )
    table = table[[s for s in STAGE_ORDER if s in table.columns]]
    labels = [f"T={t:,}\n{i.replace('triton_', '')}" for t, i in table.index]
    totals = table.sum(axis=1).to_numpy()
    shares = table.div(totals, axis=0) * 100
    fig, ax = plt.subplots(figsize=(max(7.5, 1.1 * len(table)), 4.8))
    bottom = np.zeros(len(table))
    colors = sns.color_palette("tab10", len(table.columns))
    for color, stage in zip(colors, table.columns, strict=True):
        ax.bar(labels, shares[stage], bottom=bottom, label=stage, color=color)
        bottom += shares[stage].to_numpy()
    for x, total in enumerate(totals):
        ax.annotate(f"{total:.3g} MiB", (x, 100), ha="center", va="bottom", fontsize="small")
    ax.set(
        ylim=(0, 112),
        ylabel="share of the bytes moved (model, as issued), %",
        title=f"Global traffic by stage, {describe_case(first)}, "
        f"blocks {int(first['block_m'])}×{int(first['block_n'])}",
    )
    ax.legend(ncol=1, fontsize="small", bbox_to_anchor=(1.01, 1), loc="upper left")
    return fig


def counted_vs_model(metrics: pd.DataFrame) -> pd.DataFrame:
    data = metrics.dropna(subset=["traffic_counted_bytes", "traffic_model_bytes"])
    cols = [
        "impl",
        "tokens",
        "head_dim",
        "dtype",
        "causal",
        "block_m",
        "block_n",
        "traffic_model_bytes",
        "traffic_counted_bytes",
    ]
    out = data[cols].copy()
    out["counted / model"] = out["traffic_counted_bytes"] / out["traffic_model_bytes"]
    return out.reset_index(drop=True)


def why_uncounted(metrics: pd.DataFrame, env: dict) -> str:
    """Why no point was counted in the interpreter."""
    no_triton = why_no_triton(metrics)
    if no_triton:
        return no_triton
    if env.get("device") == "cuda":
        return "on a GPU the Triton kernels are compiled, not interpreted, so no byte is counted"
    triton = triton_points(metrics)
    return why_nothing_ran(triton, "Triton ") or "no Triton point that ran has a count"


def counted_summary(counted: pd.DataFrame, why: str | None = None) -> str:
    """How many counted points moved exactly the model's bytes; ``why``: why none was
    counted, when none was (why_uncounted)."""
    if counted.empty:
        return empty("counted", why)
    exact = int((counted["traffic_counted_bytes"] == counted["traffic_model_bytes"]).sum())
    return (
        f"{exact} of {len(counted)} counted points moved exactly the bytes the model "
        f"predicts (ratios from {number(counted['counted / model'].min())} to "
        f"{number(counted['counted / model'].max())})."
    )


def dram_figure(metrics: pd.DataFrame, l2_bytes: int | None):
    data = ok(metrics).dropna(subset=["dram_bytes", "traffic_model_bytes"]).copy()
    if data.empty or not l2_bytes:
        return None
    data["DRAM / model"] = data["dram_bytes"] / data["traffic_model_bytes"]
    data["S/P footprint / L2"] = (data["bytes_S"] + data["bytes_P"]) / l2_bytes
    fig, ax = plt.subplots()
    sns.scatterplot(data=data, x="S/P footprint / L2", y="DRAM / model", hue="impl", s=70, ax=ax)
    ax.axvline(1.0, color="black", ls=":", label="footprint = L2 size")
    ax.axhline(1.0, color="grey", ls="--", lw=1)
    ax.set(xscale="symlog", title="Measured DRAM bytes against the model")
    ax.legend()
    return fig


def no_dram(metrics: pd.DataFrame, l2_bytes: int | None = None) -> str:
    """Why there is no DRAM figure: nothing ran, the records' own reasons, or no L2 size."""
    why = why_nothing_ran(metrics)
    ran = ok(metrics)
    if not why:
        measured = ran.dropna(subset=["dram_bytes", "traffic_model_bytes"])
        reasons = ran["dram_reason"].dropna().unique()
        if not measured.empty and not l2_bytes:
            why = "the run's provenance gives no L2 size to hold the footprints against"
        elif len(reasons):
            why = "; ".join(reasons)
        else:
            why = f"no point that ran has a DRAM measurement (ran: {names(ran['impl'])})"
    return empty("dram", why)


def block_case(metrics: pd.DataFrame, curves: pd.DataFrame) -> tuple[str, pd.DataFrame, pd.DataFrame]:
    """The longest swept case: (title, the model's curve over block sizes, the fused points
    counted at that case with square blocks and one head)."""
    if metrics.empty:
        return "", curves.iloc[:0].assign(MiB=[])[["block", "MiB"]], metrics
    largest = metrics.sort_values("tokens").iloc[-1]
    same = ["tokens", "head_dim", "dtype", "causal"]
    curve = curves[(curves[same] == largest[same]).all(axis=1)]
    curve = curve.assign(MiB=curve["bytes"] / MIB)[["block", "MiB"]].reset_index(drop=True)
    flash = metrics[
        (metrics["impl"] == triton_path("none", metrics))
        & (metrics[same] == largest[same]).all(axis=1)
        & (metrics["block_m"] == metrics["block_n"])
        & (metrics["batch"] * metrics["heads"] == 1)
    ]
    measured = flash.dropna(subset=["traffic_counted_bytes"])
    measured = measured.assign(MiB=measured["traffic_counted_bytes"] / MIB)
    mask = "causal" if largest["causal"] else "not causal"
    title = (
        f"triton_flash at T = {int(largest['tokens']):,}, one head, d={largest['head_dim']}, "
        f"{largest['dtype']}, {mask}"
    )
    return title, curve, measured


def why_no_blocks(metrics: pd.DataFrame) -> str:
    """Why the block section has no curve: no point on this page, or none in the table."""
    if metrics.empty:
        return no_point(metrics)
    return "the model's table of block traffic has no row for it"


def block_figure(curve: pd.DataFrame, measured: pd.DataFrame, title: str):
    if curve.empty:
        return None
    fig, ax = plt.subplots()
    ax.plot(curve["block"], curve["MiB"], marker="o", label="model (BLOCK_M = BLOCK_N)")
    if not measured.empty:
        ax.scatter(
            measured["block_m"], measured["MiB"], color="black", zorder=5, label="counted in the interpreter"
        )
    ax.set(xscale="log", xlabel="block size", ylabel="global traffic, MiB", title=title)
    ax.set_xscale("log", base=2)
    ax.legend()
    return fig
