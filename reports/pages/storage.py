"""Storage page: how large S and P get against T (from the model's table), whether the
seed's two quoted sizes agree with it, and the peak allocation the runs measured."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from reports.pages.common import MIB, POINT_COLUMNS, load, ok, overflow_finding, show

__all__ = [
    "load",
    "show",
    "seed_check",
    "storage_figure",
    "quadrupling",
    "peak_figure",
    "peak_table",
    "overflow_finding",
]

# The seed article's two sizes, quoted as it states them (MiB at 2 bytes per element): the
# page checks the model against them, so they are a citation, not a result.
SEED_CLAIMS = pd.DataFrame({"tokens": [4096, 8192], "seed says, MiB": [32, 128]})
SEED_DTYPE = "float16"


def with_mib(sizes: pd.DataFrame) -> pd.DataFrame:
    return sizes.assign(MiB=sizes["bytes"] / MIB)


def seed_marks(sizes: pd.DataFrame) -> pd.DataFrame:
    sizes = with_mib(sizes)
    return sizes[(sizes["dtype"] == SEED_DTYPE) & sizes["tokens"].isin(SEED_CLAIMS["tokens"])]


def seed_check(sizes: pd.DataFrame) -> pd.DataFrame:
    """The seed's sizes beside the model's, and whether they agree."""
    model = seed_marks(sizes)[["tokens", "MiB"]].rename(columns={"MiB": "model, MiB"})
    check = SEED_CLAIMS.merge(model, on="tokens")
    return check.assign(agree=check["seed says, MiB"] == check["model, MiB"])


def storage_figure(sizes: pd.DataFrame):
    sizes, marks = with_mib(sizes), seed_marks(sizes)
    fig, ax = plt.subplots()
    for dtype, group in sizes.groupby("dtype", sort=False):
        ax.plot(
            group["tokens"],
            group["MiB"],
            marker="o",
            ms=3,
            label=f"{dtype} (e = {group['element_bytes'].iloc[0]} B)",
        )
    ax.scatter(
        marks["tokens"],
        marks["MiB"],
        s=120,
        facecolors="none",
        edgecolors="black",
        linewidths=1.5,
        zorder=5,
        label="the seed's points",
    )
    for row in marks.itertuples():
        ax.annotate(
            f"T = {row.tokens:,}: {row.MiB:g} MiB",
            (row.tokens, row.MiB),
            textcoords="offset points",
            xytext=(-150, 10),
        )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="tokens T",
        ylabel="size of S (and of P), MiB",
        title="One T×T matrix per head: doubling T quadruples it",
    )
    ax.set_xscale("log", base=2)
    ax.legend()
    return fig


def quadrupling(sizes: pd.DataFrame, dtype: str = SEED_DTYPE) -> str:
    bytes_by_tokens = sizes[sizes["dtype"] == dtype].set_index("tokens")["bytes"]
    ratios = (bytes_by_tokens / bytes_by_tokens.shift(1)).dropna()
    steps = (pd.Series(bytes_by_tokens.index).diff().dropna() > 0).all()
    low, high = ratios.min(), ratios.max()
    return (
        f"From one T to the next (each step doubles T{'' if steps else ' or more'}), a "
        f"matrix grows by a factor of {low:g}" + (f" to {high:g}." if high != low else ".")
    )


def peak_figure(metrics: pd.DataFrame):
    data = ok(metrics).dropna(subset=["peak_alloc_bytes"]).copy()
    if data.empty:
        return None
    data["S+P model, MiB"] = (data["bytes_S"] + data["bytes_P"]) / MIB
    data["peak allocated above inputs and output, MiB"] = data["peak_alloc_bytes"] / MIB
    fig, ax = plt.subplots()
    sns.scatterplot(
        data=data,
        x="S+P model, MiB",
        y="peak allocated above inputs and output, MiB",
        hue="impl",
        style="impl",
        s=80,
        ax=ax,
    )
    top = max(data["S+P model, MiB"].max(), data["peak allocated above inputs and output, MiB"].max())
    ax.plot([0, top], [0, top], color="grey", ls="--", lw=1, label="peak = S + P")
    ax.set(title="Measured peak allocation against the S and P the model predicts")
    ax.legend()
    return fig


def peak_table(metrics: pd.DataFrame) -> pd.DataFrame:
    columns = [*POINT_COLUMNS, "bytes_S", "bytes_P", "peak_alloc_bytes"]
    return ok(metrics)[columns].sort_values(["impl", "tokens"]).reset_index(drop=True)
