"""Predicted on GPUs page: what an A100, an H100 or an H200 would do with the sweep's shapes,
from the cost model and the vendors' figures (results/model/{gpus,predictions,
predicted_kernels}.csv), with measured GPU records drawn on the same axes when a run has them."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from reports.pages.common import (
    MIB,
    headline_shape,
    load,
    names,
    no_prediction,
    number,
    sections,
    show,
    why_untimed,
)

__all__ = [
    "load",
    "show",
    "headline_shape",
    "no_prediction",
    "shape_title",
    "assumptions",
    "gpu_table",
    "time_figure",
    "footprint_figure",
    "crossings",
    "roofline_figure",
    "largest_swept",
    "why_no_roofline",
    "speedup_table",
    "measured",
    "launch_table",
    "empty",
    "why_unmeasured",
    "every_launch_fits",
]

PATH_COLOURS = {"materialized": "tab:red", "s_only": "tab:purple", "fused": "tab:blue"}
PLUGIN_COLOURS = ("tab:green", "tab:orange", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")


def predicted_impls(predictions: pd.DataFrame) -> list[str]:
    """The implementations the predictions are for, each path's, as the predict rule wrote them."""
    return list(dict.fromkeys(predictions["impl"]))


def path_colour(path: str, predictions: pd.DataFrame) -> str:
    """Ours in fixed colours; a plugin's path (named by its implementation) in the next free one."""
    if path in PATH_COLOURS:
        return PATH_COLOURS[path]
    plugins = sorted(set(predictions["path"]) - set(PATH_COLOURS))
    return PLUGIN_COLOURS[plugins.index(path) % len(PLUGIN_COLOURS)]


# what each section shows, for the sentence it shows instead when the study has nothing for it
empty = sections(
    {
        "speedup": "each path's predicted DRAM bytes and time floors at the sweep's T, and the "
        "predicted gain from fusing",
        "measured": "this run's GPU times of the predicted implementations against the "
        "predictions for its GPU",
        "roofline": "each kernel with matrix products at its arithmetic intensity on each GPU, at "
        "the shown shape's largest swept T",
        "time": "each path's predicted time per call against T on each GPU, a band from the L2 "
        "hand-off's optimistic to its pessimistic end",
        "footprint": "the size of S (or P) against T beside each GPU's L2, and the T where it stops fitting",
        "launch": "the predicted paths whose kernels do not build for a GPU's target, and why",
    }
)


def shape_title(predictions: pd.DataFrame, shape: str) -> str:
    row = predictions[predictions["shape"] == shape].iloc[0]
    mask = "causal" if row["causal"] else "not causal"
    return (
        f"B={row['batch']}, H={row['heads']}, d={row['head_dim']}, {row['dtype']}, {mask}, "
        f"blocks {row['block_m']}×{row['block_n']}"
    )


def assumptions(gpus: pd.DataFrame) -> str:
    share = gpus["resident_share"].iloc[0]
    return (
        "**Every number on this page is a prediction, not a measurement.** It comes from the "
        "cost model's bytes per kernel (as our Triton kernels issue them) and the vendors' "
        "published figures below. DRAM bytes are a band: at the low end L2 serves every reuse "
        "(the S/P hand-off between kernels, K/V re-reads) for the share of its footprint that "
        f"fits in L2; at the high end L2 serves a reuse only when its footprint fits in "
        f"{share:.0%} of L2, and otherwise everything comes from DRAM. A kernel's time is at "
        "least its DRAM bytes over the bandwidth and at least its matrix products over the "
        "dense tensor-core peak; the page sums the larger of the two over the kernels. Real "
        "kernels are slower (launches, latency, imperfect overlap) and datasheet bandwidth is "
        "not reached by a copy (on a GPU the ceilings rule measures what is), so read the "
        "times as floors and "
        "the ratios between paths as the point."
    )


def gpu_table(gpus: pd.DataFrame, env: dict | None = None) -> pd.DataFrame:
    table = pd.DataFrame(
        {
            "GPU": gpus["model"],
            "target": gpus["target"],
            "HBM, TB/s": gpus["hbm_bytes_per_s"] / 1e12,
            "L2, MiB": gpus["l2_bytes"] / MIB,
            "SMs": gpus["sms"],
            "fp16/bf16 tensor, TFLOP/s": gpus["tensor_flops_float16"] / 1e12,
            "tf32 tensor, TFLOP/s": gpus["tensor_flops_float32"] / 1e12,
        }
    )
    if env and env.get("device") == "cuda" and env.get("l2_bytes"):
        table.attrs["measured_l2"] = f"{env['gpu_name']} reports {number(env['l2_bytes'] / MIB)} MiB of L2"
    return table


def _shape(frame: pd.DataFrame, shape: str) -> pd.DataFrame:
    return frame[(frame["shape"] == shape) & frame["launch_reason"].isna()]


def time_figure(predictions: pd.DataFrame, shape: str | None, measured_points: pd.DataFrame | None = None):
    """Each path's time band against T on each GPU; None without a shape (no prediction)."""
    if shape is None:
        return None
    data = _shape(predictions, shape)
    names = list(dict.fromkeys(data["gpu"]))
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 4.2), sharey=True, squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        for path, group in data[data["gpu"] == name].groupby("path", sort=False):
            group = group.sort_values("tokens")
            colour = path_colour(path, predictions)
            ax.fill_between(
                group["tokens"],
                group["time_low_s"] * 1e6,
                group["time_high_s"] * 1e6,
                color=colour,
                alpha=0.25,
                label=f"{path}: band",
            )
            ax.plot(
                group["tokens"], group["time_high_s"] * 1e6, color=colour, lw=1.2, label=f"{path}: high end"
            )
        if measured_points is not None and len(measured_points):
            mine = measured_points[measured_points["gpu"] == name]
            for path, group in mine.groupby("path"):
                ax.scatter(
                    group["tokens"],
                    group["time_ms"] * 1e3,
                    marker="x",
                    color=path_colour(path, predictions),
                    s=50,
                    zorder=3,
                    label=f"{path}: measured",
                )
        ax.set(xscale="log", yscale="log", xlabel="T (tokens)", title=name)
        ax.set_xscale("log", base=2)
    axes[0][0].set_ylabel("predicted time per call, µs (roofline floor)")
    axes[0][-1].legend(fontsize=8, loc="upper left")
    fig.suptitle(f"Predicted time against T — {shape_title(predictions, shape)}", fontsize=11)
    fig.tight_layout()
    return fig


def footprint_figure(predictions: pd.DataFrame, gpus: pd.DataFrame, shape: str | None):
    """S's size against T beside each L2; None without a shape (no prediction)."""
    if shape is None:
        return None
    data = _shape(predictions, shape)
    sizes = data[(data["path"] == "materialized")].drop_duplicates("tokens").sort_values("tokens")
    fig, ax = plt.subplots()
    ax.plot(
        sizes["tokens"], sizes["bytes_S"] / MIB, "k-o", ms=3, label="one of S or P (stored between kernels)"
    )
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for colour, gpu in zip(colours, gpus.itertuples(), strict=False):
        l2 = gpu.l2_bytes / MIB
        ax.axhline(l2, color=colour, lw=1.2, label=f"{gpu.gpu} L2 ({l2:.0f} MiB)")
        ax.axhline(
            l2 * gpu.resident_share,
            color=colour,
            lw=1,
            ls="--",
            label=f"{gpu.gpu}: {gpu.resident_share:.0%} of L2",
        )
        crossing = first_above(sizes, gpu.l2_bytes)
        if crossing is not None:
            ax.axvline(crossing, color=colour, lw=0.8, ls=":")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="T (tokens)",
        ylabel="MiB",
        title=f"S/P footprint against each L2 — {shape_title(predictions, shape)}",
    )
    ax.set_xscale("log", base=2)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def first_above(sizes: pd.DataFrame, limit: float) -> int | None:
    above = sizes[sizes["bytes_S"] > limit]
    return int(above["tokens"].min()) if len(above) else None


def crossings(predictions: pd.DataFrame, gpus: pd.DataFrame, shape: str) -> str:
    """Where S stops fitting, per GPU, in words computed from the tables."""
    sizes = _shape(predictions, shape)
    sizes = sizes[sizes["path"] == "materialized"].drop_duplicates("tokens").sort_values("tokens")
    lines = []
    for gpu in gpus.itertuples():
        fits = sizes[sizes["bytes_S"] <= gpu.l2_bytes * gpu.resident_share]["tokens"]
        over = first_above(sizes, gpu.l2_bytes)
        lines.append(
            f"- **{gpu.gpu}** ({gpu.l2_bytes / MIB:.0f} MiB L2): S fits comfortably up to "
            f"T = {int(fits.max()):,}"
            if len(fits)
            else f"- **{gpu.gpu}**: S never fits comfortably"
        )
        if over is not None:
            size = sizes.loc[sizes["tokens"] == over, "bytes_S"].iloc[0] / MIB
            lines[-1] += f"; from T = {over:,} ({size:,.0f} MiB) it no longer fits at all."
        else:
            lines[-1] += "; it fits at every T shown."
    return "\n".join(lines)


def largest_swept(predictions: pd.DataFrame, shape: str) -> int | None:
    """The largest T this shape was swept at (each shape has its own T list: a T found in
    one need not exist in another), None where it has no swept row."""
    data = _shape(predictions, shape)
    swept = data.loc[data["in_sweep"].astype(bool), "tokens"]
    return int(swept.max()) if len(swept) else None


def why_no_roofline(kernels: pd.DataFrame, predictions: pd.DataFrame, shape: str) -> str:
    tokens = largest_swept(predictions, shape)
    if tokens is None:
        return f"the shape {shape_title(predictions, shape)} has no swept length"
    return f"the kernel table has no row for this shape at T = {tokens:,}"


def roofline_figure(kernels: pd.DataFrame, gpus: pd.DataFrame, predictions: pd.DataFrame, shape: str):
    """The roofline of each GPU with the shape's kernels at its largest swept T; None where
    the kernel table has none for it."""
    tokens = largest_swept(predictions, shape)
    data = kernels[(kernels["shape"] == shape) & (kernels["tokens"] == tokens)]
    if data.empty:
        return None
    dtype = data["dtype"].iloc[0]
    rate = f"tensor_flops_{'float16' if dtype == 'bfloat16' else dtype}"
    fig, axes = plt.subplots(1, len(gpus), figsize=(4.2 * len(gpus), 4.2), sharey=True, squeeze=False)
    intensity = np.logspace(-1, 4, 200)
    for ax, gpu in zip(axes[0], gpus.itertuples(), strict=True):
        peak, bandwidth = getattr(gpu, rate), gpu.hbm_bytes_per_s
        ax.plot(intensity, np.minimum(peak, bandwidth * intensity) / 1e12, "k-", lw=1.2, label="roofline")
        ax.axvline(
            peak / bandwidth, color="grey", ls=":", lw=0.8, label=f"ridge {peak / bandwidth:.0f} FLOP/B"
        )
        mine = data[(data["gpu"] == gpu.gpu) & (data["flops"] > 0)]
        mine = mine.assign(intensity=mine["flops"] / mine["bytes_high"].where(mine["bytes_high"] > 0))
        for (path, x), group in mine.fillna({"intensity": 1e4}).groupby(["path", "intensity"]):
            y = min(peak, bandwidth * x) / 1e12
            ax.scatter([x], [y], color=path_colour(path, data), zorder=3)
            label = f"{', '.join(group['kernel'])} ({x:,.0f})"
            ax.annotate(label, (x, y), fontsize=8, xytext=(4, -12), textcoords="offset points")
        ax.set(xscale="log", yscale="log", xlabel="FLOPs per DRAM byte (high end)", title=gpu.gpu)
    axes[0][0].set_ylabel("attainable TFLOP/s")
    axes[0][-1].legend(fontsize=8, loc="lower right")
    fig.suptitle(
        f"Roofline at T = {tokens:,} — {shape_title(kernels.assign(launch_reason=None), shape)}", fontsize=11
    )
    fig.tight_layout()
    return fig


def speedup_table(predictions: pd.DataFrame, shape: str | None) -> pd.DataFrame:
    """At the sweep's T: both paths' DRAM bands and time floors, and fused's predicted gain
    (no row without a shape or a swept T)."""
    data = _shape(predictions, shape)
    data = data[data["in_sweep"].astype(bool)]
    if data.empty:
        return pd.DataFrame()
    wide = data.pivot_table(
        index=["gpu", "tokens"],
        columns="path",
        values=["dram_low_bytes", "dram_high_bytes", "time_low_s", "time_high_s"],
    )

    def band(low, high, unit):
        """Each value in significant figures, one where both ends read the same."""
        return [
            number(a / unit)
            if number(a / unit) == number(b / unit)
            else f"{number(a / unit)}–{number(b / unit)}"
            for a, b in zip(low, high, strict=True)
        ]

    out = pd.DataFrame(index=wide.index)
    paths = list(dict.fromkeys(data["path"]))
    for path in paths:
        out[f"{path} DRAM, MiB"] = band(wide[("dram_low_bytes", path)], wide[("dram_high_bytes", path)], MIB)
        out[f"{path} µs"] = band(wide[("time_low_s", path)], wide[("time_high_s", path)], 1e-6)
    out["fused ×"] = band(
        wide[("time_low_s", "materialized")] / wide[("time_low_s", "fused")],
        wide[("time_high_s", "materialized")] / wide[("time_high_s", "fused")],
        1,
    )
    return out.reset_index().rename(columns={"gpu": "GPU", "tokens": "T"})


def measured(metrics: pd.DataFrame, predictions: pd.DataFrame, env: dict) -> pd.DataFrame:
    """GPU records of the Triton paths beside their predictions (empty without a GPU run)."""
    if env.get("device") != "cuda" or not env.get("gpu_name"):
        return pd.DataFrame()
    gpu = next((g for g in predictions["gpu"].unique() if g in env["gpu_name"]), None)
    runs = metrics[
        (metrics["status"] == "ok")
        & metrics["impl"].isin(predicted_impls(predictions))
        & metrics["time_ms"].notna()
        & (metrics["inputs"] == "normal")
    ]
    if gpu is None or runs.empty:
        return pd.DataFrame()
    keys = ["impl", "batch", "heads", "tokens", "head_dim", "dtype", "causal", "block_m", "block_n"]
    mine = predictions[(predictions["gpu"] == gpu) & predictions["launch_reason"].isna()]
    both = runs.merge(mine, on=keys, suffixes=("", "_predicted"))
    both = both.assign(
        gpu=gpu,
        measured_over_floor_high=both["time_ms"] / 1e3 / both["time_high_s"],
        measured_over_floor_low=both["time_ms"] / 1e3 / both["time_low_s"],
    )
    if "dram_bytes" in both:
        both["dram_measured_MiB"] = both["dram_bytes"] / MIB
    both["dram_band_MiB"] = [
        f"{a / MIB:,.1f}–{b / MIB:,.1f}"
        for a, b in zip(both["dram_low_bytes"], both["dram_high_bytes"], strict=True)
    ]
    return both


def why_unmeasured(metrics: pd.DataFrame, predictions: pd.DataFrame, env: dict) -> str:
    """Why no measured GPU time stands beside the predictions."""
    if predictions.empty:
        return no_prediction(metrics)
    if env.get("device") != "cuda":
        return (
            "this run was on a CPU, so every number above is a prediction (a run on a GPU, see "
            "the README, adds its times here as measured/predicted ratios)"
        )
    predicted = names(predictions["gpu"])
    if not any(g in (env.get("gpu_name") or "") for g in predictions["gpu"].unique()):
        return f"no prediction is for this run's GPU ({env.get('gpu_name')}; predicted: {predicted})"
    impls = predicted_impls(predictions)
    mine = metrics[metrics["impl"].isin(impls)]
    untimed = why_untimed(mine, normal_only=True) if len(mine) else None
    if mine.empty or untimed:
        return untimed or f"this study has no point of {' or '.join(impls)}"
    return "no timed point of this run has the shape, dtype and blocks of a prediction"


def _shapes(count: int) -> str:
    return "the one predicted shape" if count == 1 else f"all {count:,} predicted shapes"


def every_launch_fits(predictions: pd.DataFrame) -> str:
    return (
        f"No predicted path is limited by a launch: {_shapes(predictions['shape'].nunique())} "
        f"launch{'es' if predictions['shape'].nunique() == 1 else ''} on the targets of "
        f"{names(predictions['gpu'])}, as far as "
        "this run's builds show (a study that built no kernel shows no launch limit)."
    )


def launch_table(predictions: pd.DataFrame) -> pd.DataFrame:
    failed = predictions[predictions["launch_reason"].notna()]
    return failed.drop_duplicates(["shape", "gpu", "path"])[["shape", "gpu", "path", "launch_reason"]]
