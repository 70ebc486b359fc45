"""The report's figures and tables, as functions of the collected metrics and the model.

Every number a figure shows comes from the metrics table, the stages table or
``kernels.model``; nothing is typed in. A function whose data is absent returns None, and
the notebook says so in words.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from kernels import model
from kernels.names import TRITON_IMPLEMENTATIONS

MIB = 1 << 20
STAGE_ORDER = ["Q load", "K load", "V load", "S store", "S load", "P store", "P load", "O store"]


def style() -> None:
    """One look for every figure; fixed so that two renderings are byte-identical."""
    sns.set_theme(style="whitegrid", context="notebook")
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 100, "figure.figsize": (7.5, 4.5),
                         "svg.hashsalt": "attnio", "axes.titleweight": "bold"})


def ok(metrics: pd.DataFrame) -> pd.DataFrame:
    return metrics[metrics["status"] == "ok"]


def describe_case(row) -> str:
    return (f"B={row['batch']}, H={row['heads']}, d={row['head_dim']}, {row['dtype']}, "
            f"{'causal' if row['causal'] else 'not causal'}")


# --- storage ------------------------------------------------------------------------------

def matrix_sizes(tokens: list[int], dtypes: list[str]) -> pd.DataFrame:
    """Bytes of one T×T matrix (S or P) for one head, from the model."""
    rows = [{"tokens": t, "dtype": dt, "bytes": model.matrix_bytes(
        model.Point("torch_naive", 1, 1, t, 64, dt, False))} for t in tokens for dt in dtypes]
    frame = pd.DataFrame(rows)
    frame["MiB"] = frame["bytes"] / MIB
    return frame


def storage_figure(sizes: pd.DataFrame, marks: pd.DataFrame):
    fig, ax = plt.subplots()
    for dtype, group in sizes.groupby("dtype", sort=False):
        ax.plot(group["tokens"], group["MiB"], marker="o", ms=3, label=f"{dtype} (e = "
                f"{model.ELEMENT_BYTES[dtype]} B)")
    ax.scatter(marks["tokens"], marks["MiB"], s=120, facecolors="none", edgecolors="black",
               linewidths=1.5, zorder=5, label="the seed's points")
    for row in marks.itertuples():
        ax.annotate(f"T = {row.tokens:,}: {row.MiB:g} MiB", (row.tokens, row.MiB),
                    textcoords="offset points", xytext=(-150, 10))
    ax.set(xscale="log", yscale="log", xlabel="tokens T", ylabel="size of S (and of P), MiB",
           title="One T×T matrix per head: doubling T quadruples it")
    ax.set_xscale("log", base=2)
    ax.legend()
    return fig


def peak_figure(metrics: pd.DataFrame):
    data = ok(metrics).dropna(subset=["peak_alloc_bytes"]).copy()
    if data.empty:
        return None
    data["S+P model, MiB"] = (data["bytes_S"] + data["bytes_P"]) / MIB
    data["peak allocated above inputs and output, MiB"] = data["peak_alloc_bytes"] / MIB
    fig, ax = plt.subplots()
    sns.scatterplot(data=data, x="S+P model, MiB", y="peak allocated above inputs and output, MiB",
                    hue="impl", style="impl", s=80, ax=ax)
    top = max(data["S+P model, MiB"].max(), data["peak allocated above inputs and output, MiB"].max())
    ax.plot([0, top], [0, top], color="grey", ls="--", lw=1, label="peak = S + P")
    ax.set(title="Measured peak allocation against the S and P the model predicts")
    ax.legend()
    return fig


# --- traffic ------------------------------------------------------------------------------

def stage_label(row) -> str:
    return f"{row['tensor']} {row['op']}"


def traffic_by_stage(stages: pd.DataFrame, column: str = "model_bytes") -> pd.DataFrame:
    data = stages[stages["impl"].isin(TRITON_IMPLEMENTATIONS) & stages[column].notna()].copy()
    if data.empty:
        return data
    data["stage"] = data.apply(stage_label, axis=1)
    data["MiB"] = data[column] / MIB
    key = ["impl", "tokens", "batch", "heads", "head_dim", "dtype", "causal", "block_m", "block_n"]
    return data.groupby(key + ["stage"], as_index=False)["MiB"].sum()


def stacked_traffic_figure(by_stage: pd.DataFrame, impls=("triton_naive", "triton_flash")):
    data = by_stage[by_stage["impl"].isin(impls)]
    if data.empty:
        return None
    first = data.iloc[0]
    same = ["batch", "heads", "head_dim", "dtype", "causal", "block_m", "block_n"]
    data = data[(data[same] == first[same]).all(axis=1)]
    table = data.pivot_table(index=["tokens", "impl"], columns="stage", values="MiB",
                             aggfunc="sum", fill_value=0.0)
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
    ax.set(ylim=(0, 112), ylabel="share of the bytes moved (model, as issued), %",
           title=f"Global traffic by stage, {describe_case(first)}, "
                 f"blocks {int(first['block_m'])}×{int(first['block_n'])}")
    ax.legend(ncol=1, fontsize="small", bbox_to_anchor=(1.01, 1), loc="upper left")
    return fig


def counted_vs_model(metrics: pd.DataFrame) -> pd.DataFrame:
    data = metrics.dropna(subset=["traffic_counted_bytes", "traffic_model_bytes"])
    cols = ["impl", "tokens", "head_dim", "dtype", "causal", "block_m", "block_n",
            "traffic_model_bytes", "traffic_counted_bytes"]
    out = data[cols].copy()
    out["counted / model"] = out["traffic_counted_bytes"] / out["traffic_model_bytes"]
    return out.reset_index(drop=True)


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


def block_traffic(tokens: int, head_dim: int, dtype: str, causal: bool, blocks: list[int]):
    """The fused kernel's as-issued traffic for square blocks (model): bigger blocks, fewer
    re-reads of K and V — FlashAttention's Figure 2 (middle)."""
    rows = []
    for b in blocks:
        point = model.Point("triton_flash", 1, 1, tokens, head_dim, dtype, causal, b, b)
        rows.append({"block": b, "MiB": model.summarize(point)["traffic_model_bytes"] / MIB})
    return pd.DataFrame(rows)


def block_figure(curve: pd.DataFrame, measured: pd.DataFrame, title: str):
    fig, ax = plt.subplots()
    ax.plot(curve["block"], curve["MiB"], marker="o", label="model (BLOCK_M = BLOCK_N)")
    if not measured.empty:
        ax.scatter(measured["block_m"], measured["MiB"], color="black", zorder=5,
                   label="counted in the interpreter")
    ax.set(xscale="log", xlabel="block size", ylabel="global traffic, MiB", title=title)
    ax.set_xscale("log", base=2)
    ax.legend()
    return fig


# --- tile-local softmax ---------------------------------------------------------------------

def tile_example_figure(row: list[float], tile: int):
    from kernels.softmax_example import softmax, tile_local_softmax

    full, local = softmax(row), tile_local_softmax(row, tile)
    data = pd.DataFrame({"key": list(range(len(row))) * 2,
                         "probability": full + local,
                         "softmax": ["over the whole row"] * len(row)
                         + [f"per tile of {tile}"] * len(row)})
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    sns.barplot(data=data, x="key", y="probability", hue="softmax", ax=ax)
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1))
    for edge in range(tile, len(row), tile):
        ax.axvline(edge - 0.5, color="black", ls=":")
    ax.set(xlabel=f"key position (scores {row}; dotted: tile edges)",
           title="The same scores, two denominators")
    return fig


def error_heatmap(errors: pd.DataFrame, impl: str):
    data = errors[errors["impl"] == impl].pivot(index="tokens", columns="block_n", values="error")
    fig, ax = plt.subplots(figsize=(6.5, 4))
    sns.heatmap(data, annot=True, fmt=".1e", cmap="rocket_r", ax=ax,
                cbar_kws={"label": "max |out − ref|"})
    ax.set(xlabel="BLOCK_N", ylabel="tokens T", title=f"{impl}: error against float64")
    return fig


# --- performance ----------------------------------------------------------------------------

def timed(metrics: pd.DataFrame) -> pd.DataFrame:
    return ok(metrics).dropna(subset=["time_ms"])


def time_figure(metrics: pd.DataFrame, value: str, ylabel: str, device_label: str):
    data = timed(metrics)
    if data.empty:
        return None
    data = data.assign(case=data.apply(
        lambda r: f"{r['impl']}" + ("" if pd.isna(r["block_m"]) else
                                    f" {int(r['block_m'])}×{int(r['block_n'])}"), axis=1))
    grid = sns.relplot(data=data, x="tokens", y=value, hue="case", style="causal", kind="line",
                       markers=True, col="head_dim", height=4, aspect=1.2)
    grid.set(yscale="log", ylabel=ylabel, xlabel="tokens T")
    for ax in grid.axes.flat:
        ax.set_xscale("log", base=2)
    grid.figure.suptitle(f"{ylabel} against T — {device_label}", y=1.03)
    return grid.figure


def speedups(metrics: pd.DataFrame, fast: str, slow: str) -> pd.DataFrame:
    key = ["batch", "heads", "tokens", "head_dim", "dtype", "causal"]
    data = timed(metrics)
    a = data[data["impl"] == fast].groupby(key)["time_ms"].min()
    b = data[data["impl"] == slow].groupby(key)["time_ms"].min()
    joined = pd.concat({f"{fast} ms": a, f"{slow} ms": b}, axis=1).dropna()
    joined["speed-up"] = joined[f"{slow} ms"] / joined[f"{fast} ms"]
    return joined.reset_index()
