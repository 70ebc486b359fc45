"""Tile-softmax page: the seed's Figure 4 computed, the same scores under two denominators,
and how wrong the tile-local kernel is against T and BLOCK_N (from the error table)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.colors import LogNorm

from reports.pages.common import POINT_COLUMNS, load, no_point_of, overflow_finding, sections, show
from reports.pages.paths import tile_local_path, triton_path

__all__ = [
    "load",
    "show",
    "empty",
    "why_no_swept",
    "figure4_table",
    "example_figure",
    "error_heatmaps",
    "case_text",
    "swept_errors",
    "overflow_finding",
]


def compared(metrics: pd.DataFrame) -> list[str]:
    """The study's tile-local path and our fused one: the same loop, wrong and right."""
    return [p for p in (tile_local_path(metrics), triton_path("none", metrics)) if p is not None]


# what each section shows, for the sentence it shows instead when the study has nothing for it
empty = sections(
    {
        "error map": "the tile-local and the fused kernel's error against T and BLOCK_N, from "
        "the error table",
        "swept": "the tile-local and the fused kernel's error at this study's own points",
    }
)


def figure4_table(example: dict):
    """First-position probabilities of the seed's three cases, as percentages."""
    values, x = example["figure4"], example["scores"][2]
    cases = ["row [0, 0, 0, 0]", f"row [0, 0, {x:g}, {x:g}]", "softmax of [0, 0] alone"]
    keys = ["row_0000_first", "row_00xx_first", "first_two_only_first"]
    frame = pd.DataFrame({"case": cases, "first probability": [values[k] for k in keys]})
    return frame.style.set_uuid("figure4").format({"first probability": "{:.2%}"}).hide(axis="index")


def example_figure(example: dict):
    row, tile = example["scores"], example["tile"]
    data = pd.DataFrame(
        {
            "key": list(range(len(row))) * 2,
            "probability": example["whole_row"] + example["per_tile"],
            "softmax": ["over the whole row"] * len(row) + [f"per tile of {tile}"] * len(row),
        }
    )
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    sns.barplot(data=data, x="key", y="probability", hue="softmax", ax=ax)
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1))
    for edge in range(tile, len(row), tile):
        ax.axvline(edge - 0.5, color="black", ls=":")
    ax.set(
        xlabel=f"key position (scores {row}; dotted: tile edges)", title="The same scores, two denominators"
    )
    return fig


def error_heatmaps(errors: pd.DataFrame):
    """The tile-local and the fused kernel's errors side by side on one logarithmic colour
    scale, so that the same colour is the same error in both."""
    if errors.empty:
        return None
    impls = list(dict.fromkeys(errors["impl"]))[:2]  # the tile-local one, then the fused one
    positive = errors.loc[errors["error"] > 0, "error"]
    floor = positive.min() if len(positive) else 1e-12
    norm = LogNorm(vmin=floor, vmax=max(errors["error"].max(), floor * 10))
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.2), gridspec_kw={"width_ratios": [1, 1, 0.05]})
    for ax, impl in zip(axes[:2], impls, strict=True):
        data = errors[errors["impl"] == impl].pivot(index="tokens", columns="block_n", values="error")
        sns.heatmap(
            data.clip(lower=floor),
            annot=data,
            fmt=".1e",
            cmap="rocket_r",
            norm=norm,
            ax=ax,
            cbar=ax is axes[1],
            cbar_ax=axes[2] if ax is axes[1] else None,
            cbar_kws={"label": "max |out − ref| (log scale)"},
            annot_kws={"fontsize": 7},
        )
        ax.set(xlabel="BLOCK_N", ylabel="tokens T", title=f"{impl}: error against float64")
    fig.tight_layout()
    return fig


def case_text(errors: pd.DataFrame, env: dict) -> str:
    """What the error map was computed on, read from the table and the run's provenance."""
    if errors.empty:
        return empty("error map", "the error table has no row")
    where = "GPU, compiled" if env.get("device") == "cuda" else "CPU, Triton interpreter"
    first = errors.iloc[0]
    return (
        f"Computed by the pipeline on **{where}**: {first['dtype']}, one head of "
        f"d = {first['head_dim']}, BLOCK_M = {first['block_m']}, "
        f"{'causal' if first['causal'] else 'not causal'}."
    )


def why_no_swept(metrics: pd.DataFrame) -> str | None:
    if compared(metrics):
        return None
    return no_point_of(metrics, "point of a tile-local or a fused Triton path")


def swept_errors(metrics: pd.DataFrame) -> pd.DataFrame:
    swept = metrics[metrics["impl"].isin(compared(metrics))]
    columns = [*POINT_COLUMNS, "block_m", "block_n", "max_abs_error", "nonfinite_outputs", "status"]
    return swept[columns].sort_values(["tokens", "impl"]).reset_index(drop=True)
