"""Storage page: how large S and P get against T (from the model's table), whether the
seed's two quoted sizes agree with it, and the peak allocation the runs measured."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from kernels.spec import ELEMENT_BYTES
from reports.pages.common import (
    MIB,
    POINT_COLUMNS,
    load,
    names,
    number,
    ok,
    overflow_finding,
    sections,
    show,
    why_nothing_ran,
)

__all__ = [
    "load",
    "show",
    "empty",
    "why_no_peak",
    "why_no_seed",
    "seed_check",
    "storage_figure",
    "quadrupling",
    "peak_figure",
    "above_the_line",
    "peak_table",
    "overflow_finding",
]

# The seed article's two sizes, quoted as it states them (MiB at 2 bytes per element): the
# page checks the model against them, so they are a citation, not a result.
SEED_CLAIMS = pd.DataFrame({"tokens": [4096, 8192], "seed says, MiB": [32, 128]})
SEED_DTYPE = "float16"
# what each section shows, for the sentence it shows instead when the study has nothing for it
empty = sections(
    {
        "peaks": "the peak memory each point allocated during one call, against S + P",
        "seed": "the seed article's two quoted sizes of S beside the model's",
        "peak figure": "the measured peak allocation of the paths that store S and P against "
        "S + P, on log–log axes",
    }
)


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


def why_no_seed(sizes: pd.DataFrame) -> str | None:
    if not seed_marks(sizes).empty:
        return None
    return f"the model's table of sizes has no {SEED_DTYPE} size at T = " + " or ".join(
        f"{t:,}" for t in SEED_CLAIMS["tokens"]
    )


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


def _measured_peaks(metrics: pd.DataFrame) -> pd.DataFrame:
    data = ok(metrics).dropna(subset=["peak_alloc_bytes"])
    data = data[data["inputs"] == "normal"]
    return data.assign(
        stored=data["bytes_S"] + data["bytes_P"],
        per_score=data["peak_alloc_bytes"] / (data["batch"] * data["heads"] * data["tokens"] ** 2),
    )


def peak_figure(metrics: pd.DataFrame):
    """Peak allocation against S + P on log–log axes, with the line where they are equal.
    Only the paths that store S and P have a place on it (the fused ones store none)."""
    data = _measured_peaks(metrics)
    data = data[data["stored"] > 0]
    if data.empty:
        return None
    fig, ax = plt.subplots()
    label = (data["impl"] + " " + data["dtype"]).rename("path")
    sns.scatterplot(
        x=data["stored"] / MIB, y=data["peak_alloc_bytes"] / MIB, hue=label, style=label, s=80, ax=ax
    )
    low = min(data["stored"].min(), data["peak_alloc_bytes"].min()) / MIB / 2
    high = max(data["stored"].max(), data["peak_alloc_bytes"].max()) / MIB * 2
    ax.plot([low, high], [low, high], color="grey", ls="--", lw=1, label="peak = S + P")
    first = data.iloc[0]
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="S + P from the model, MiB",
        ylabel="peak allocated above inputs and output, MiB",
        title=f"Measured peak against S + P — B={first['batch']}, H={first['heads']}, "
        f"d={first['head_dim']}, {masks(data)}",
    )
    ax.legend(fontsize=8, title=None)
    return fig


def masks(data: pd.DataFrame) -> str:
    found = set(data["causal"].astype(bool))
    return "causal and not" if len(found) == 2 else ("causal" if True in found else "not causal")


def why_no_peak(metrics: pd.DataFrame, stored_only: bool = False) -> str | None:
    """Why no point has a measured peak allocation (of a path that stores S and P, when
    ``stored_only``), or None when one has."""
    nothing_ran = why_nothing_ran(metrics)
    if nothing_ran:
        return nothing_ran
    data = _measured_peaks(metrics)
    if data.empty:
        ran = ok(metrics)
        return (
            "no point that ran with normal inputs has a measured peak allocation (ran: "
            f"{names(ran['impl'])}, inputs {names(ran['inputs'])})"
        )
    if stored_only and not (data["stored"] > 0).any():
        return f"no path that stores S and P ran (ran: {names(data['impl'])}, which store neither)"
    return None


def above_the_line(metrics: pd.DataFrame) -> str:
    """Which stored-S/P paths sit above peak = S + P, by how much and why, and where the
    fused ones stay, from the measured peaks at each path's largest T."""
    data = _measured_peaks(metrics)
    if data.empty:
        return empty("peaks", why_no_peak(metrics))
    lines = []
    for (impl, dtype), group in data.groupby(["impl", "dtype"], sort=True):
        row = group.sort_values("tokens").iloc[-1]
        peak, stored, tokens = row["peak_alloc_bytes"], row["stored"], int(row["tokens"])
        if stored == 0:
            lines.append(
                f"- **{impl}** ({dtype}) stores neither S nor P: at T = {tokens:,} its peak is "
                f"{number(peak / MIB)} MiB, {number(row['per_score'])} B per score."
            )
        elif peak > 1.05 * stored:
            element = ELEMENT_BYTES[dtype]
            softmax = row.get("softmax_dtype")  # its registration's, where wider than S
            wide = ELEMENT_BYTES.get(softmax, 0) if isinstance(softmax, str) else 0
            lines.append(
                f"- **{impl}** ({dtype}) sits {peak / stored:.2f}× above the line at T = {tokens:,}: "
                f"{number(peak / MIB)} MiB against {number(stored / MIB)} MiB of S + P, "
                f"{number(row['per_score'])} B per score instead of {2 * element}."
                + (
                    f" Its softmax runs in {softmax}, so a {softmax} copy of S and the {softmax} "
                    f"probabilities ({wide} B per score each) are alive beside the {dtype} S "
                    f"({element} B): {element + 2 * wide} B per score at the peak."
                    if wide > element
                    else ""
                )
            )
        else:
            lines.append(
                f"- **{impl}** ({dtype}) sits on the line: {number(peak / MIB)} MiB at T = {tokens:,} "
                f"against {number(stored / MIB)} MiB of S + P."
            )
    return "\n".join(lines)


def peak_table(metrics: pd.DataFrame) -> pd.DataFrame:
    columns = [*POINT_COLUMNS, "bytes_S", "bytes_P", "peak_alloc_bytes"]
    return ok(metrics)[columns].sort_values(["impl", "tokens"]).reset_index(drop=True)
